package share

import (
	"fmt"
	"math"
	"time"
)

// Defaults Kafka uses for a share group's settings (the group.share.* broker configs, as franz-go's kfake
// mirrors them; docs/queues.md).
const (
	DefaultLockDuration       = 30 * time.Second
	DefaultDeliveryCountLimit = 5
	DefaultRecordLocksMax     = 2000
	// DefaultUpdatesPerSnapshot is Kafka's share.coordinator.snapshot.update.records.per.snapshot.
	DefaultUpdatesPerSnapshot = 500
	// DefaultPriorityAging is weir.priority.aging.ms's default.
	DefaultPriorityAging = 10 * time.Second
)

// Config holds a share-partition's settings: its group's.
type Config struct {
	// LockDuration is how long an acquired record stays locked to its member
	// (share.record.lock.duration.ms); zero means DefaultLockDuration.
	LockDuration time.Duration
	// DeliveryCountLimit is how many deliveries a record gets before a release archives it
	// (share.delivery.count.limit); zero means DefaultDeliveryCountLimit.
	DeliveryCountLimit int
	// RecordLocksMax caps the in-flight window's length (share.partition.max.record.locks); zero means
	// DefaultRecordLocksMax. It may not exceed WindowMax.
	RecordLocksMax int
	// RenewEnabled lets members extend their locks with RENEW (share.renew.acknowledge.enable).
	RenewEnabled bool
	// KeyOrdered hands out at most one record of a key at a time, in offset order
	// (weir.share.key.ordered): a record waits while an earlier record of its key is in flight or
	// available. Priorities are not applied; due times are.
	KeyOrdered bool
	// UpdatesPerSnapshot is how many updates Persist writes after a snapshot before the next snapshot;
	// zero means DefaultUpdatesPerSnapshot.
	UpdatesPerSnapshot int
	// PriorityAging is how long a record waits, available, for its effective priority to rise by one
	// (weir.priority.aging.ms); zero means DefaultPriorityAging.
	PriorityAging time.Duration
}

func (c *Config) normalize() error {
	if c.LockDuration == 0 {
		c.LockDuration = DefaultLockDuration
	}
	if c.DeliveryCountLimit == 0 {
		c.DeliveryCountLimit = DefaultDeliveryCountLimit
	}
	if c.RecordLocksMax == 0 {
		c.RecordLocksMax = DefaultRecordLocksMax
	}
	if c.UpdatesPerSnapshot == 0 {
		c.UpdatesPerSnapshot = DefaultUpdatesPerSnapshot
	}
	if c.PriorityAging == 0 {
		c.PriorityAging = DefaultPriorityAging
	}
	switch {
	case c.LockDuration < 0:
		return fmt.Errorf("%w: lock duration %v", ErrInvalidConfig, c.LockDuration)
	case c.DeliveryCountLimit < 1 || c.DeliveryCountLimit > math.MaxInt16:
		return fmt.Errorf("%w: delivery count limit %d", ErrInvalidConfig, c.DeliveryCountLimit)
	case c.RecordLocksMax < 1 || c.RecordLocksMax > WindowMax:
		return fmt.Errorf("%w: record locks max %d", ErrInvalidConfig, c.RecordLocksMax)
	case c.UpdatesPerSnapshot < 1:
		return fmt.Errorf("%w: updates per snapshot %d", ErrInvalidConfig, c.UpdatesPerSnapshot)
	case c.PriorityAging < time.Millisecond:
		return fmt.Errorf("%w: priority aging %v", ErrInvalidConfig, c.PriorityAging)
	}
	return nil
}

// RecordState is the state of one in-flight record; see the package comment for the transitions.
type RecordState int8

// The record states.
const (
	// Available: may be acquired.
	Available RecordState = iota
	// Acquired: locked to one member until it acknowledges it or the lock expires.
	Acquired
	// Acknowledged: accepted by a member; final.
	Acknowledged
	// Archived: rejected, skipped as a gap, or past the delivery count limit; final.
	Archived
)

var recordStateNames = [...]string{"Available", "Acquired", "Acknowledged", "Archived"}

// String returns the state's name.
func (s RecordState) String() string {
	if s >= 0 && int(s) < len(recordStateNames) {
		return recordStateNames[s]
	}
	return fmt.Sprintf("RecordState(%d)", int8(s))
}

// final reports whether a record in this state is finished.
func (s RecordState) final() bool { return s == Acknowledged || s == Archived }

// AckType is how a member acknowledges a record, numbered as Kafka's AcknowledgeType.
type AckType int8

// The acknowledgement types.
const (
	// AckGap: the offset holds no record for the member (a compacted record, a control batch); it is
	// archived.
	AckGap AckType = 0
	// AckAccept: processed; the record is acknowledged.
	AckAccept AckType = 1
	// AckRelease: give the record back for another delivery.
	AckRelease AckType = 2
	// AckReject: unprocessable; the record is archived.
	AckReject AckType = 3
	// AckRenew: keep the lock, from now for another lock duration (KIP-1222).
	AckRenew AckType = 4
)

// ArchiveReason is why a record was archived, for the dead-letter hook.
type ArchiveReason int8

// The reasons reported in an Archive.
const (
	// ArchiveRejected: a member rejected the record.
	ArchiveRejected ArchiveReason = iota
	// ArchiveDeliveryLimit: the record was released after its last allowed delivery.
	ArchiveDeliveryLimit
)

// String returns the reason as the dead-letter header names it.
func (r ArchiveReason) String() string {
	switch r {
	case ArchiveRejected:
		return "rejected"
	case ArchiveDeliveryLimit:
		return "delivery-limit"
	default:
		return fmt.Sprintf("ArchiveReason(%d)", int8(r))
	}
}

// Archive reports one record archived by a rejection or by the delivery limit: the caller copies it to
// the group's dead-letter topic before it writes the record that archives it. Gaps are not reported.
type Archive struct {
	Offset        int64
	Reason        ArchiveReason
	DeliveryCount int16
}

// AcquiredRange is a range of offsets handed to a member by one Acquire, all with the same delivery count:
// ShareFetch's AcquiredRecords.
type AcquiredRange struct {
	First, Last   int64
	DeliveryCount int16
}

// AckBatch acknowledges the offsets [First, Last]: with one type for all of them, or one type per offset.
type AckBatch struct {
	First, Last int64
	Types       []AckType
}

// Entry is one in-flight record as Lookup reports it.
type Entry struct {
	State         RecordState
	DeliveryCount int16
	// Member and Deadline are the lock's, set only while the record is Acquired.
	Member   string
	Deadline time.Time
	// Attr is what Track told of the record; zero before (priority 0, due, not aged).
	Attr Attr
}

// Partition is one share-partition's state machine at its partition leader. It does no I/O, starts no
// goroutine and reads no clock. It is not safe for concurrent use; one owner drives it.
type Partition struct {
	cfg         Config
	leaderEpoch int32

	// spso is the share-partition start offset; recs[i] is the record at spso+i, and the window's end
	// is spso+len(recs). recs lies at the end of buf, its array, whole: records leave recs from the
	// front, and extend moves recs back to the start of buf instead of growing it when that frees half.
	spso int64
	recs []Entry
	buf  []Entry
	// ahead holds the attributes of the tracked offsets past the window, [End, End+len(ahead));
	// tracked is one past the last offset Track described (at least End once the window reaches it).
	// mixed is set once Track has described a record not yet due or of a priority above 0: until
	// then every record has priority 0 and is due, and offset order is priority order (aging raises
	// the older, lower offsets first).
	ahead   []Attr
	tracked int64
	mixed   bool

	// seq is the round of the last snapshot written and slot the number of updates written after it;
	// snapshotDue makes the next Persist a snapshot.
	seq         int32
	slot        int32
	snapshotDue bool
	// changed is set by any change not yet persisted; the offsets changed are in [dirtyLo, dirtyHi).
	changed          bool
	dirtyLo, dirtyHi int64
	// released is set when a change not yet persisted made an acquired record Available again.
	released bool
}

// New returns the share-partition of a group that has no state for it yet, starting at the
// share-partition start offset spso (share.auto.offset.reset: the log start or end), led by a leader
// of leaderEpoch. Its first Persist is a snapshot.
func New(cfg Config, spso int64, leaderEpoch int32) (*Partition, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	if spso < 0 {
		return nil, fmt.Errorf("%w: start offset %d", ErrInvalidConfig, spso)
	}
	return &Partition{cfg: cfg, leaderEpoch: leaderEpoch, spso: spso, tracked: spso, snapshotDue: true}, nil
}

// Tune applies a change of the group's settings that needs no new owner, keeping the records held:
// LockDuration (new acquisitions and renewals; the locks held keep their deadlines),
// DeliveryCountLimit (an Available record that has had that many deliveries is archived now, as
// Restore archives it, and returned for its dead-letter copy; an acquired one at its release),
// RecordLocksMax (a window longer than the new cap takes no new offsets until it is shorter) and
// RenewEnabled. cfg's other fields are not read. A change that is not a valid Config is
// ErrInvalidConfig, and nothing changes.
func (p *Partition) Tune(cfg Config) ([]Archive, error) {
	c := p.cfg
	c.LockDuration, c.DeliveryCountLimit, c.RecordLocksMax, c.RenewEnabled = cfg.LockDuration, cfg.DeliveryCountLimit, cfg.RecordLocksMax, cfg.RenewEnabled
	if err := c.normalize(); err != nil {
		return nil, err
	}
	p.cfg = c
	var archived []Archive
	for i := range p.recs {
		if e := &p.recs[i]; e.State == Available && int(e.DeliveryCount) >= c.DeliveryCountLimit {
			*e = Entry{State: Archived, DeliveryCount: e.DeliveryCount}
			p.markDirty(p.spso + int64(i))
			archived = append(archived, Archive{Offset: p.spso + int64(i), Reason: ArchiveDeliveryLimit, DeliveryCount: e.DeliveryCount})
		}
	}
	if len(archived) > 0 {
		p.advance()
	}
	return archived, nil
}

// StartOffset returns the share-partition start offset (SPSO): every offset below it is final.
func (p *Partition) StartOffset() int64 { return p.spso }

// End returns one past the highest offset in flight: the window is [StartOffset, End).
func (p *Partition) End() int64 { return p.spso + int64(len(p.recs)) }

// LeaderEpoch returns the leader epoch the partition writes its records with.
func (p *Partition) LeaderEpoch() int32 { return p.leaderEpoch }

// LockDuration returns the acquisition lock duration: ShareFetch's AcquisitionLockTimeoutMs.
func (p *Partition) LockDuration() time.Duration { return p.cfg.LockDuration }

// Lookup returns the in-flight record at offset; false outside the window.
func (p *Partition) Lookup(offset int64) (Entry, bool) {
	if offset < p.spso || offset >= p.End() {
		return Entry{}, false
	}
	return p.recs[offset-p.spso], true
}

// Acquire locks up to maxRecords available records below the high watermark hw to member until
// now + the lock duration, and returns them as ranges in offset order. It takes them by effective
// priority first, then offset (attrs.go): released records in the window and new offsets, the window
// growing up to its cap. A record not yet due at now is never taken.
func (p *Partition) Acquire(member string, maxRecords int, hw int64, now time.Time) []AcquiredRange {
	return p.acquire(member, p.spso, maxRecords, hw, now)
}

// AcquireThrough locks to member, as Acquire does, every available record from first through last
// below the high watermark hw, with no count: a batch-optimized ShareFetch (KIP-1206) calls it after
// Acquire to take the rest of the last log batch it sends, so that the batches it sends hold only
// records it acquired. New offsets are taken only while the window is shorter than the cap, and only
// next to it: a first above End acquires nothing.
func (p *Partition) AcquireThrough(member string, first, last, hw int64, now time.Time) []AcquiredRange {
	if first > p.End() {
		return nil
	}
	return p.acquire(member, max(first, p.spso), math.MaxInt, min(hw, last+1), now)
}

// acquire locks up to maxRecords available records from offset first, in [SPSO, End], below hw to
// member: all of them when no record tracked is mixed, else those of the highest effective priorities
// (pick), each in offset order. In a key-ordered partition a record whose key is held (keysHeld), or
// whose key an earlier record of this pass has, waits, and priorities are not applied.
func (p *Partition) acquire(member string, first int64, maxRecords int, hw int64, now time.Time) []AcquiredRange {
	hw = min(hw, p.spso+int64(p.cfg.RecordLocksMax))
	var floor level
	quota := maxRecords
	mixed := p.mixed && !p.cfg.KeyOrdered
	if mixed {
		floor, quota = p.pick(first, maxRecords, hw, now)
	}
	held := p.keysHeld(first)
	var out []AcquiredRange
	deadline := now.Add(p.cfg.LockDuration)
	for off, n := first, 0; n < maxRecords && off < hw; off++ {
		i := int(off - p.spso)
		a, ok := p.eligible(i, held, now)
		if !ok {
			continue
		}
		if mixed {
			l := a.level(now, p.cfg.PriorityAging)
			if l < floor || l == floor && quota == 0 {
				continue
			}
			if l == floor {
				quota--
			}
		}
		for i >= len(p.recs) {
			p.extend()
		}
		e := &p.recs[i]
		e.State, e.Member, e.Deadline = Acquired, member, deadline
		e.DeliveryCount++
		p.markDirty(off)
		if k := len(out) - 1; k >= 0 && out[k].Last == off-1 && out[k].DeliveryCount == e.DeliveryCount {
			out[k].Last = off
		} else {
			out = append(out, AcquiredRange{First: off, Last: off, DeliveryCount: e.DeliveryCount})
		}
		n++
	}
	return out
}

// Acknowledge applies a member's acknowledgements to its acquired records. The batches must be in
// offset order and not overlap. A malformed request is ErrInvalidRequest; an offset not acquired by the
// member (or a RENEW the group does not allow) is ErrInvalidRecordState; either way nothing changes.
// It returns the records archived by a rejection or by the delivery limit.
func (p *Partition) Acknowledge(member string, batches []AckBatch, now time.Time) ([]Archive, error) {
	if err := checkBatches(batches); err != nil {
		return nil, err
	}
	for _, b := range batches {
		if err := p.checkAcquired(member, b); err != nil {
			return nil, err
		}
	}
	var archived []Archive
	for _, b := range batches {
		for off := b.First; off <= b.Last; off++ {
			t := b.Types[0]
			if len(b.Types) > 1 {
				t = b.Types[off-b.First]
			}
			archived = p.apply(off, t, now, archived)
		}
	}
	p.advance()
	return archived, nil
}

// checkBatches checks the shape of acknowledgement batches.
func checkBatches(batches []AckBatch) error {
	prev := int64(-1)
	for _, b := range batches {
		switch {
		case b.First < 0 || b.Last < b.First:
			return fmt.Errorf("%w: acknowledgement batch [%d, %d]", ErrInvalidRequest, b.First, b.Last)
		case b.First <= prev:
			return fmt.Errorf("%w: acknowledgement batch [%d, %d] overlaps or precedes the one before", ErrInvalidRequest, b.First, b.Last)
		case len(b.Types) == 0 || (len(b.Types) > 1 && int64(len(b.Types)-1) != b.Last-b.First):
			return fmt.Errorf("%w: %d acknowledge types for [%d, %d]", ErrInvalidRequest, len(b.Types), b.First, b.Last)
		}
		for _, t := range b.Types {
			if t < AckGap || t > AckRenew {
				return fmt.Errorf("%w: acknowledge type %d", ErrInvalidRequest, t)
			}
		}
		prev = b.Last
	}
	return nil
}

// checkAcquired checks that every offset of b is acquired by member, and that a RENEW is allowed.
func (p *Partition) checkAcquired(member string, b AckBatch) error {
	if b.First < p.spso || b.Last >= p.End() {
		return fmt.Errorf("%w: [%d, %d] is not within the in-flight window [%d, %d)", ErrInvalidRecordState, b.First, b.Last, p.spso, p.End())
	}
	if !p.cfg.RenewEnabled {
		for _, t := range b.Types {
			if t == AckRenew {
				return fmt.Errorf("%w: the group does not allow RENEW", ErrInvalidRecordState)
			}
		}
	}
	for off := b.First; off <= b.Last; off++ {
		e := &p.recs[off-p.spso]
		if e.State != Acquired || e.Member != member {
			return fmt.Errorf("%w: offset %d is %s, not acquired by member %q", ErrInvalidRecordState, off, e.State, member)
		}
	}
	return nil
}

// apply acknowledges the acquired record at off with t.
func (p *Partition) apply(off int64, t AckType, now time.Time, archived []Archive) []Archive {
	e := &p.recs[off-p.spso]
	switch t {
	case AckAccept:
		*e = Entry{State: Acknowledged, DeliveryCount: e.DeliveryCount}
	case AckGap:
		*e = Entry{State: Archived, DeliveryCount: e.DeliveryCount}
	case AckReject:
		*e = Entry{State: Archived, DeliveryCount: e.DeliveryCount}
		archived = append(archived, Archive{Offset: off, Reason: ArchiveRejected, DeliveryCount: e.DeliveryCount})
	case AckRelease:
		archived = p.release(off, archived)
	case AckRenew:
		e.Deadline = now.Add(p.cfg.LockDuration)
		return archived
	}
	p.markDirty(off)
	return archived
}

// release gives the acquired record at off back: Available, or Archived once it has had its last
// allowed delivery.
func (p *Partition) release(off int64, archived []Archive) []Archive {
	e := &p.recs[off-p.spso]
	if int(e.DeliveryCount) >= p.cfg.DeliveryCountLimit {
		*e = Entry{State: Archived, DeliveryCount: e.DeliveryCount}
		return append(archived, Archive{Offset: off, Reason: ArchiveDeliveryLimit, DeliveryCount: e.DeliveryCount})
	}
	*e = Entry{State: Available, DeliveryCount: e.DeliveryCount, Attr: e.Attr}
	p.released = true
	return archived
}

// Expire releases every record whose lock deadline is at or before now, and returns the records that
// this archived (past the delivery limit).
func (p *Partition) Expire(now time.Time) []Archive {
	return p.releaseWhere(func(e *Entry) bool { return !e.Deadline.After(now) })
}

// ReleaseMember releases every record acquired by member (it left the group, its session ended or its
// share session closed), and returns the records that this archived.
func (p *Partition) ReleaseMember(member string) []Archive {
	return p.releaseWhere(func(e *Entry) bool { return e.Member == member })
}

func (p *Partition) releaseWhere(match func(*Entry) bool) []Archive {
	var archived []Archive
	for i := range p.recs {
		if e := &p.recs[i]; e.State == Acquired && match(e) {
			off := p.spso + int64(i)
			archived = p.release(off, archived)
			p.markDirty(off)
		}
	}
	p.advance()
	return archived
}

// Deadline returns the earliest lock deadline in the window, when Expire has work; zero when no record
// is acquired. The owner keeps one timer for it.
func (p *Partition) Deadline() time.Time {
	var d time.Time
	for i := range p.recs {
		if e := &p.recs[i]; e.State == Acquired && (d.IsZero() || e.Deadline.Before(d)) {
			d = e.Deadline
		}
	}
	return d
}

// MoveStart moves the SPSO up to offset when the log start passed it (retention, DeleteRecords): the
// records below are gone, whatever their state.
func (p *Partition) MoveStart(offset int64) {
	if offset <= p.spso {
		return
	}
	past := offset - p.End()
	p.drop(int(min(offset-p.spso, int64(len(p.recs)))))
	if past > 0 {
		p.ahead = p.ahead[min(past, int64(len(p.ahead))):]
	}
	p.spso = offset
	p.tracked = max(p.tracked, offset)
	p.changed = true
	p.advance()
}

// advance moves the SPSO over the final records at the start of the window.
func (p *Partition) advance() {
	n := 0
	for n < len(p.recs) && p.recs[n].State.final() {
		n++
	}
	if n == 0 {
		return
	}
	p.drop(n)
	p.spso += int64(n)
	p.changed = true
}

// extend adds an Available record at the window's end.
func (p *Partition) extend() {
	n := len(p.recs)
	if n == cap(p.recs) {
		if front := cap(p.buf) - cap(p.recs); front > 0 && front >= n {
			p.recs = p.buf[:copy(p.buf, p.recs)]
			clear(p.buf[n : front+n])
		} else {
			p.buf = make([]Entry, 2*n+16)
			p.recs = p.buf[:copy(p.buf, p.recs)]
		}
	}
	p.recs = p.recs[:n+1]
	p.recs[n] = Entry{}
	if len(p.ahead) > 0 {
		p.recs[n].Attr = p.ahead[0]
		p.ahead = p.ahead[1:]
	}
}

// drop removes the first n records of the window, clearing them so that their member ids are not kept.
func (p *Partition) drop(n int) {
	clear(p.recs[:n])
	p.recs = p.recs[n:]
}

func (p *Partition) markDirty(off int64) {
	if !p.changed || p.dirtyHi <= p.dirtyLo {
		p.dirtyLo, p.dirtyHi = off, off+1
	} else {
		p.dirtyLo, p.dirtyHi = min(p.dirtyLo, off), max(p.dirtyHi, off+1)
	}
	p.changed = true
}
