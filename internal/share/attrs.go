package share

import (
	"fmt"
	"time"
)

// PriorityMax is the highest priority a record may carry (weir.priority, 0 to 9).
const PriorityMax = 9

// Attr is what the owner reads of one record from its batch before the record may be acquired
// (docs/queues.md, "Priority and delayed delivery"): its priority, its due time, and when the leader
// first tracked it. The zero Attr is a record of priority 0, due, with no age.
type Attr struct {
	// Priority is the record's priority, 0 to PriorityMax: its weir.priority header, else the topic's
	// weir.priority.default.
	Priority int8
	// Due is the epoch millisecond before which the record is not handed out; 0 (or any time past)
	// is due now.
	Due int64
	// Since is the epoch millisecond at which the leader first tracked the record, set by Track: its
	// age, for aging, counts from max(Since, Due).
	Since int64
	// Key is a hash of the record's key and Keyed whether it has one (a record with a null key has
	// none): in a key-ordered partition (Config.KeyOrdered) at most one record of a key is in flight.
	Key   uint64
	Keyed bool
	// Skip marks a record no member is to get: under share.isolation.level=read_committed, a record of
	// an aborted transaction or a control record. Track archives it.
	Skip bool
}

// level is the record's effective priority at now: its priority plus one for every aging it has
// waited since it was tracked or became due, at most PriorityMax. A record never tracked does not age.
type level int8

func (a Attr) level(now time.Time, aging time.Duration) level {
	l := int64(a.Priority)
	if waited := now.UnixMilli() - max(a.Since, a.Due); a.Since != 0 && waited > 0 {
		l += waited / aging.Milliseconds()
	}
	return level(min(l, PriorityMax))
}

// due reports whether the record may be handed out at now: never before its due millisecond.
func (a Attr) due(now time.Time) bool { return a.Due <= now.UnixMilli() }

// Tracked returns one past the last offset whose attributes the partition knows: the owner reads the
// records from there (up to TrackLimit) and passes their attributes to Track before it acquires, and
// passes min(high watermark, Tracked()) as the bound of Acquire, so that no record is handed out
// before its attributes are known. A restored partition knows none: Tracked is its SPSO.
func (p *Partition) Tracked() int64 { return max(p.tracked, p.spso) }

// TrackLimit returns the end of the offsets the partition may track: the window's cap from the SPSO.
// Records past it are not tracked, so a record there is not seen by priority or due time until the
// window moves up to it.
func (p *Partition) TrackLimit() int64 { return p.spso + int64(p.cfg.RecordLocksMax) }

// Track records the attributes of the offsets from Tracked() on, one per offset, up to TrackLimit, and
// returns how many it took. Since is set to now for each. A priority outside 0 to PriorityMax is
// ErrInvalidConfig and nothing is taken: the produce path refuses such a header, so the owner never
// passes one. A record marked Skip that is Available, or past the window, is archived at once (the
// window grows to it) and the SPSO moves over it when nothing before it is in flight: it is never
// acquired, counts no delivery and is not reported for a dead-letter copy. The change is persisted with
// the next write; a restore that has not seen it tracks the record again from the log and archives it
// the same way.
func (p *Partition) Track(attrs []Attr, now time.Time) (int, error) {
	for _, a := range attrs {
		if a.Priority < 0 || a.Priority > PriorityMax {
			return 0, fmt.Errorf("%w: priority %d", ErrInvalidConfig, a.Priority)
		}
	}
	from := p.Tracked()
	attrs = attrs[:min(int64(len(attrs)), max(p.TrackLimit()-from, 0))]
	ms := now.UnixMilli()
	for k, a := range attrs {
		a.Since = ms
		if a.Due <= ms {
			a.Due = 0
		}
		if a.Due != 0 || a.Priority != 0 {
			p.mixed = true
		}
		if i := int(from-p.spso) + k; i < len(p.recs) {
			p.recs[i].Attr = a
		} else {
			p.ahead = append(p.ahead, a)
		}
	}
	skipped := false
	for k, a := range attrs {
		if !a.Skip {
			continue
		}
		i := int(from-p.spso) + k
		for i >= len(p.recs) {
			p.extend()
		}
		if e := &p.recs[i]; e.State == Available {
			*e = Entry{State: Archived, DeliveryCount: e.DeliveryCount}
			p.markDirty(p.spso + int64(i))
			skipped = true
		}
	}
	p.tracked = from + int64(len(attrs))
	if skipped {
		p.advance()
	}
	return len(attrs), nil
}

// candidate returns the attributes of the record at index i of the window (past its end: an offset
// tracked ahead, or not tracked at all) and whether it may be acquired: Available.
func (p *Partition) candidate(i int) (Attr, bool) {
	if i < len(p.recs) {
		e := &p.recs[i]
		return e.Attr, e.State == Available
	}
	if j := i - len(p.recs); j < len(p.ahead) {
		return p.ahead[j], true
	}
	return Attr{}, true
}

// pick chooses what an acquisition of up to maxRecords of the offsets [first, hw) takes at now when
// records are mixed: every due candidate above the returned floor level, and the first quota (in
// offset order) at the floor. One pass counts the due candidates per level.
func (p *Partition) pick(first int64, maxRecords int, hw int64, now time.Time) (level, int) {
	var counts [PriorityMax + 1]int
	for off := first; off < hw; off++ {
		if a, ok := p.candidate(int(off - p.spso)); ok && a.due(now) {
			counts[a.level(now, p.cfg.PriorityAging)]++
		}
	}
	left := maxRecords
	for l := PriorityMax; l > 0; l-- {
		if counts[l] >= left {
			return level(l), left
		}
		left -= counts[l]
	}
	return 0, left
}

// NextDue returns the earliest due time after now of a tracked Available record, zero when there is
// none: the owner arms its one timer for it (with Deadline's) and wakes the fetches parked on the
// share-partition when it fires.
func (p *Partition) NextDue(now time.Time) time.Time {
	ms := now.UnixMilli()
	next := int64(0)
	later := func(a Attr) {
		if a.Due > ms && (next == 0 || a.Due < next) {
			next = a.Due
		}
	}
	if !p.mixed {
		return time.Time{}
	}
	for i := range p.recs {
		if p.recs[i].State == Available {
			later(p.recs[i].Attr)
		}
	}
	for _, a := range p.ahead {
		later(a)
	}
	if next == 0 {
		return time.Time{}
	}
	return time.UnixMilli(next)
}

// keyGate is an acquisition's view of key order: nil outside a key-ordered partition, else the keys
// whose later records must wait (keysHeld), growing as the acquisition passes records.
type keyGate map[uint64]bool

// keysHeld returns the keyGate of an acquisition from offset first: nil outside a key-ordered
// partition, else the keys of a record in flight (Acquired) anywhere in the window, and those of an
// Available record below first, which goes before the later records of its key.
func (p *Partition) keysHeld(first int64) keyGate {
	if !p.cfg.KeyOrdered {
		return nil
	}
	held := keyGate{}
	for i := range p.recs {
		e := &p.recs[i]
		if e.Attr.Keyed && (e.State == Acquired || e.State == Available && p.spso+int64(i) < first) {
			held[e.Attr.Key] = true
		}
	}
	return held
}

// eligible returns the attributes of the record at index i of the window and whether an acquisition
// at now may take it: Available, due, and its key not held. An Available record of a key not held
// holds the key for the records after it, taken or not.
func (p *Partition) eligible(i int, held keyGate, now time.Time) (Attr, bool) {
	a, ok := p.candidate(i)
	if !ok {
		return a, false
	}
	if held != nil && a.Keyed {
		if held[a.Key] {
			return a, false
		}
		held[a.Key] = true
	}
	return a, a.due(now)
}

// Acquirable counts the records an Acquire at now could take below hw with no limit on their number,
// without taking them. In a key-ordered partition the owner divides it between the members fetching
// the share-partition, so that one fetch does not take the first record of every key and leave the
// other members idle until it is acknowledged.
func (p *Partition) Acquirable(hw int64, now time.Time) int {
	hw = min(hw, p.spso+int64(p.cfg.RecordLocksMax))
	held := p.keysHeld(p.spso)
	n := 0
	for off := p.spso; off < hw; off++ {
		if _, ok := p.eligible(int(off-p.spso), held, now); ok {
			n++
		}
	}
	return n
}
