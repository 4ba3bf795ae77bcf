package share

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var (
	modelSeed  = flag.Uint64("share.seed", 0, "run TestShareModel with this seed only")
	modelSeeds = flag.Int("share.seeds", 200, "how many seeds TestShareModel runs")
)

// TestShareModel drives a Partition with random acquisitions, acknowledgements (good and bad), lock
// expiries, members leaving, log start moves, writes that fail, and crashes that restore a new leader
// from the records written so far (compacted by key or not, while the deposed leader keeps trying to
// write). As the owner will, it writes a record after every change that releases or finishes records,
// so that a crash loses at most one uncounted acquisition per record. It checks after every step:
//   - no record whose acceptance was answered (its record written) is ever handed out again;
//   - a record is held by one member at a time, a delivery count never passes the limit, and a record
//     is handed out at most the limit plus once per restore;
//   - a refused acknowledgement changes nothing;
//   - the records written replay to exactly the state the partition would persist, and, when no
//     record is acquired, restore to exactly the partition (checkIdleRestore);
//
// and at the end that every record below the high watermark ends accepted or archived. A failure
// prints the seed; -share.seed=N replays it.
func TestShareModel(t *testing.T) { eachSeed(t, runModel) }

// eachSeed runs a model for -share.seed alone when it is set, else for the seeds 1 to -share.seeds,
// stopping at the first that fails.
func eachSeed(t *testing.T, run func(*testing.T, uint64)) {
	if *modelSeed != 0 {
		run(t, *modelSeed)
		return
	}
	for seed := uint64(1); seed <= uint64(*modelSeeds); seed++ {
		run(t, seed)
		if t.Failed() {
			return
		}
	}
}

type lock struct {
	member   string
	deadline time.Time
}

type model struct {
	t    *testing.T
	seed uint64
	rnd  *rand.Rand
	cfg  Config
	p    *Partition
	now  time.Time
	hw   int64
	// tracked runs the seed with priorities and due times: before each acquisition the model tracks
	// random ones up to the high watermark, as the owner does, and acquires below what it tracked.
	tracked bool
	// draining tracks no due time ahead, so that the drain ends.
	draining bool

	// log is every record committed, in order; compacted holds, per key slot, the log index of its
	// latest record.
	log [][]byte
	// locks are the locks the test knows the partition granted and has not seen end.
	locks map[int64]lock
	// accepted holds the offsets whose ACCEPT was answered; removed those below a log start move.
	accepted map[int64]bool
	removed  map[int64]bool
	// deliveries counts every hand-out; restores counts leaders after the first.
	deliveries map[int64]int
	restores   int
	// archived holds the archives the current leader reported, each offset at most once.
	archived map[int64]Archive
}

func (m *model) fatalf(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("seed %d (replay with -share.seed=%d): %s\n%s", m.seed, m.seed, fmt.Sprintf(format, args...), dump(m.p))
}

func runModel(t *testing.T, seed uint64) {
	rnd := rand.New(rand.NewPCG(seed, seed^0x5eed))
	cfg := Config{
		LockDuration:       10 * time.Second,
		DeliveryCountLimit: 1 + rnd.IntN(4),
		RecordLocksMax:     1 + rnd.IntN(24),
		RenewEnabled:       rnd.IntN(2) == 0,
		UpdatesPerSnapshot: 1 + rnd.IntN(6),
	}
	m := &model{t: t, seed: seed, rnd: rnd, cfg: cfg, now: t0, hw: int64(rnd.IntN(10)), tracked: seed%2 == 0,
		locks: map[int64]lock{}, accepted: map[int64]bool{}, removed: map[int64]bool{},
		deliveries: map[int64]int{}, archived: map[int64]Archive{}}
	p, err := New(cfg, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	m.p = p
	m.persist()
	for range 400 {
		m.step()
		if t.Failed() {
			return
		}
	}
	m.drain()
}

func (m *model) member() string { return fmt.Sprintf("m%d", m.rnd.IntN(4)) }

func (m *model) step() {
	switch n := m.rnd.IntN(100); {
	case n < 10:
		m.hw += int64(m.rnd.IntN(6))
	case n < 35:
		m.acquire(m.member(), 1+m.rnd.IntN(8))
	case n < 60:
		m.acknowledge(m.member())
	case n < 66:
		m.badAcknowledge(m.member())
	case n < 76:
		m.now = m.now.Add(time.Duration(m.rnd.IntN(8)) * time.Second)
		m.expire()
	case n < 80:
		m.leave(m.member())
	case n < 82:
		m.moveStart()
	case n < 90:
		m.persist()
	case n < 94:
		m.failedPersist()
	default:
		m.crash()
	}
}

// bound is the high watermark the model acquires below: m.hw, or in a tracked seed what it tracked of
// it, after tracking random priorities and due times (up to 5 s ahead) for the offsets not yet tracked.
func (m *model) bound() int64 {
	if !m.tracked {
		return m.hw
	}
	var attrs []Attr
	for off := m.p.Tracked(); off < min(m.hw, m.p.TrackLimit()); off++ {
		a := Attr{Priority: int8(m.rnd.IntN(PriorityMax + 1))}
		if !m.draining && m.rnd.IntN(4) == 0 {
			a.Due = m.now.Add(time.Duration(m.rnd.IntN(5000)) * time.Millisecond).UnixMilli()
		}
		attrs = append(attrs, a)
	}
	if _, err := m.p.Track(attrs, m.now); err != nil {
		m.fatalf("track: %v", err)
	}
	return min(m.hw, m.p.Tracked())
}

func (m *model) acquire(member string, maxRecords int) {
	got := m.p.Acquire(member, maxRecords, m.bound(), m.now)
	n := m.took(member, got)
	if n > maxRecords {
		m.fatalf("acquired %d records, asked for %d", n, maxRecords)
	}
	if p := m.p; !m.tracked && n < maxRecords && p.End() < m.hw && p.End()-p.StartOffset() < int64(m.cfg.RecordLocksMax) {
		m.fatalf("acquired %d of %d with room in the window and records above it", n, maxRecords)
	}
	if len(got) > 0 && m.rnd.IntN(2) == 0 {
		// A batch-optimized fetch takes the rest of the last log batch it sends.
		first := got[len(got)-1].Last + 1
		last := first + int64(m.rnd.IntN(8))
		for _, r := range m.p.AcquireThrough(member, first, last, m.bound(), m.now) {
			if r.First < first || r.Last > last {
				m.fatalf("acquired %+v through [%d, %d]", r, first, last)
			}
			m.took(member, []AcquiredRange{r})
		}
	}
}

// took checks and records the ranges acquired for member, and returns how many records they hold.
func (m *model) took(member string, got []AcquiredRange) int {
	n := 0
	for _, r := range got {
		if r.First > r.Last || int(r.DeliveryCount) > m.cfg.DeliveryCountLimit || r.DeliveryCount < 1 {
			m.fatalf("acquired %+v with limit %d", r, m.cfg.DeliveryCountLimit)
		}
		for off := r.First; off <= r.Last; off++ {
			n++
			switch {
			case off >= m.hw:
				m.fatalf("acquired offset %d at or above the high watermark %d", off, m.hw)
			case m.accepted[off]:
				m.fatalf("acquired offset %d, whose acceptance was answered", off)
			case m.locks[off].member != "":
				m.fatalf("acquired offset %d for %s while %s holds it", off, member, m.locks[off].member)
			}
			m.locks[off] = lock{member: member, deadline: m.now.Add(m.cfg.LockDuration)}
			m.deliveries[off]++
			if m.deliveries[off] > m.cfg.DeliveryCountLimit+m.restores {
				m.fatalf("offset %d delivered %d times, limit %d after %d restores", off, m.deliveries[off], m.cfg.DeliveryCountLimit, m.restores)
			}
		}
	}
	if w := m.p.End() - m.p.StartOffset(); w > int64(m.cfg.RecordLocksMax) {
		m.fatalf("window of %d records, capped at %d", w, m.cfg.RecordLocksMax)
	}
	return n
}

// held returns the offsets member holds, sorted.
func (m *model) held(member string) []int64 {
	var offs []int64
	for off, l := range m.locks {
		if l.member == member {
			offs = append(offs, off)
		}
	}
	slices.Sort(offs)
	return offs
}

func (m *model) acknowledge(member string) {
	offs := m.held(member)
	if len(offs) == 0 {
		return
	}
	var batches []AckBatch
	for i := 0; i < len(offs); {
		if m.rnd.IntN(3) == 0 {
			i++
			continue
		}
		j := i
		for j+1 < len(offs) && offs[j+1] == offs[j]+1 && m.rnd.IntN(4) != 0 {
			j++
		}
		b := AckBatch{First: offs[i], Last: offs[j]}
		if m.rnd.IntN(2) == 0 {
			b.Types = []AckType{m.ackType()}
		} else {
			for range j - i + 1 {
				b.Types = append(b.Types, m.ackType())
			}
		}
		batches = append(batches, b)
		i = j + 1
	}
	archived, err := m.p.Acknowledge(member, batches, m.now)
	if err != nil {
		m.fatalf("Acknowledge(%s, %v) of held records: %v", member, batches, err)
	}
	m.noteArchived(archived)
	var accepted []int64
	for _, b := range batches {
		for off := b.First; off <= b.Last; off++ {
			t := b.Types[0]
			if len(b.Types) > 1 {
				t = b.Types[off-b.First]
			}
			if t == AckRenew {
				m.locks[off] = lock{member: member, deadline: m.now.Add(m.cfg.LockDuration)}
				continue
			}
			delete(m.locks, off)
			if t == AckAccept {
				accepted = append(accepted, off)
			}
		}
	}
	// The acknowledgement is answered once its record is written; a crash before that leaves it
	// unanswered.
	if m.rnd.IntN(8) == 0 {
		m.crash()
		return
	}
	if m.persist() {
		for _, off := range accepted {
			m.accepted[off] = true
		}
	}
}

func (m *model) ackType() AckType {
	if m.cfg.RenewEnabled {
		return AckType(m.rnd.IntN(5))
	}
	return AckType(m.rnd.IntN(4))
}

// badAcknowledge sends an acknowledgement that includes an offset member does not hold (or a malformed
// batch): it must be refused with no change.
func (m *model) badAcknowledge(member string) {
	off := m.p.StartOffset() - 2 + int64(m.rnd.IntN(int(m.p.End()-m.p.StartOffset())+4))
	if l := m.locks[off]; l.member == member {
		return
	}
	batches := []AckBatch{{First: off, Last: off, Types: []AckType{m.ackType()}}}
	if held := m.held(member); len(held) > 0 && m.rnd.IntN(2) == 0 {
		h := held[m.rnd.IntN(len(held))]
		good := AckBatch{First: h, Last: h, Types: []AckType{AckAccept}}
		batches = append(batches, good)
		if h < off {
			batches[0], batches[1] = batches[1], batches[0]
		}
	}
	if m.rnd.IntN(5) == 0 {
		batches[0].Types = append(batches[0].Types, AckAccept)
	}
	before := dump(m.p)
	changed, lo, hi := m.p.changed, m.p.dirtyLo, m.p.dirtyHi
	archived, err := m.p.Acknowledge(member, batches, m.now)
	if !errors.Is(err, ErrInvalidRecordState) && !errors.Is(err, ErrInvalidRequest) {
		m.fatalf("Acknowledge(%s, %v) = %v, %v; want a refusal", member, batches, archived, err)
	}
	if after := dump(m.p); after != before || archived != nil || m.p.changed != changed || m.p.dirtyLo != lo || m.p.dirtyHi != hi {
		m.fatalf("a refused acknowledgement changed the state: was %s", before)
	}
}

func (m *model) expire() {
	m.noteArchived(m.p.Expire(m.now))
	for off, l := range m.locks {
		if !l.deadline.After(m.now) {
			delete(m.locks, off)
		}
	}
	if d := m.p.Deadline(); !d.IsZero() && !d.After(m.now) {
		m.fatalf("deadline %v not after now %v after Expire", d, m.now)
	}
	m.persist()
}

func (m *model) leave(member string) {
	m.noteArchived(m.p.ReleaseMember(member))
	for _, off := range m.held(member) {
		delete(m.locks, off)
	}
	m.persist()
}

func (m *model) moveStart() {
	to := min(m.hw, m.p.StartOffset()+int64(m.rnd.IntN(3)))
	for off := m.p.StartOffset(); off < to; off++ {
		m.removed[off] = true
		delete(m.locks, off)
	}
	m.p.MoveStart(to)
	m.persist()
}

func (m *model) noteArchived(archived []Archive) {
	for _, a := range archived {
		if _, dup := m.archived[a.Offset]; dup {
			m.fatalf("offset %d archived twice: %+v, %+v", a.Offset, m.archived[a.Offset], a)
		}
		if a.Reason == ArchiveDeliveryLimit && int(a.DeliveryCount) < m.cfg.DeliveryCountLimit {
			m.fatalf("offset %d archived by the limit at delivery %d", a.Offset, a.DeliveryCount)
		}
		m.archived[a.Offset] = a
	}
}

// persist writes the record the partition owes, if any, and checks that the log replays to the
// partition's persisted state. It reports whether everything the partition changed is written.
func (m *model) persist() bool {
	r, ok := m.p.Persist()
	if !ok {
		return true
	}
	m.log = append(m.log, r.Encode())
	m.checkReplay()
	m.checkIdleRestore()
	return true
}

// checkIdleRestore checks what an idle owner's stop relies on (the api package stops an owner that
// holds no acquired record and owes no write): with nothing acquired, the records written hold all
// of the partition, so a leader restored from them has the same window, with the same states and
// delivery counts, and archives nothing.
func (m *model) checkIdleRestore() {
	if !m.p.Deadline().IsZero() {
		return
	}
	p, archived, err := Restore(m.cfg, replay(m.t, m.log), m.p.leaderEpoch)
	if err != nil {
		m.fatalf("Restore of an idle partition: %v", err)
	}
	if len(archived) > 0 || p.StartOffset() != m.p.StartOffset() || p.End() != m.p.End() {
		m.fatalf("an idle partition restores as [%d, %d) with archives %v, is [%d, %d)", p.StartOffset(), p.End(), archived, m.p.StartOffset(), m.p.End())
	}
	for i, e := range m.p.recs {
		if r := p.recs[i]; r.State != e.State || r.DeliveryCount != e.DeliveryCount {
			m.fatalf("offset %d of an idle partition restores as %s/%d, is %s/%d", m.p.StartOffset()+int64(i), r.State, r.DeliveryCount, e.State, e.DeliveryCount)
		}
	}
}

// failedPersist loses the record (truncated) or lets it commit although the leader was told the write
// failed.
func (m *model) failedPersist() {
	r, ok := m.p.Persist()
	if !ok {
		return
	}
	if m.rnd.IntN(2) == 0 {
		m.log = append(m.log, r.Encode())
	}
	m.p.PersistFailed()
}

// compact is one pass of the log cleaner over the log's first n records: of those, it keeps the
// latest record of each key (the slot), in log order. Passes cover a growing prefix, as the cleaner's
// do.
func compact(log [][]byte, n int) [][]byte {
	last := map[int32]int{}
	slots := make([]int32, n)
	for i, b := range log[:n] {
		r, _ := DecodeRecord(b)
		slots[i] = r.Slot
		last[r.Slot] = i
	}
	var out [][]byte
	for i, b := range log {
		if i >= n || last[slots[i]] == i {
			out = append(out, b)
		}
	}
	return out
}

// compacted returns the log as the cleaner may have left it: not cleaned, cleaned up to a point, or
// cleaned whole.
func (m *model) compacted() [][]byte {
	switch m.rnd.IntN(3) {
	case 0:
		return m.log
	case 1:
		return compact(m.log, m.rnd.IntN(len(m.log)+1))
	default:
		return compact(m.log, len(m.log))
	}
}

// checkReplay replays the log (compacted or not) and compares it with what the partition would
// persist now.
func (m *model) checkReplay() {
	d := replay(m.t, m.compacted())
	p := m.p
	if d.start != p.StartOffset() || d.start+int64(len(d.recs)) != p.End() || d.leaderEpoch != p.leaderEpoch {
		m.fatalf("replayed window [%d, %d) at epoch %d, partition's [%d, %d) at %d", d.start, d.start+int64(len(d.recs)), d.leaderEpoch, p.StartOffset(), p.End(), p.leaderEpoch)
	}
	for i, de := range d.recs {
		e := p.recs[i]
		st := e.State
		if st == Acquired {
			st = Available
		}
		if de.state != st || de.count != e.DeliveryCount {
			m.fatalf("offset %d replays as %s/%d, is %s/%d", d.start+int64(i), de.state, de.count, e.State, e.DeliveryCount)
		}
	}
}

// crash replaces the leader by one restored from the log (compacted or not), while the deposed leader
// tries to write once more: the state's check (what the share-state coordinator runs before it
// appends) refuses it.
func (m *model) crash() {
	d := replay(m.t, m.compacted())
	old := m.p
	p, archived, err := Restore(m.cfg, d, old.leaderEpoch+1)
	if err != nil {
		m.fatalf("Restore: %v", err)
	}
	if p.StartOffset() < d.start {
		m.fatalf("restored SPSO %d below the durable %d", p.StartOffset(), d.start)
	}
	m.p = p
	m.restores++
	m.locks = map[int64]lock{}
	// An archive whose record was not written is lost with the leader, and may be reported again
	// (dead letters are at least once).
	m.archived = map[int64]Archive{}
	m.noteArchived(archived)
	for off := range m.accepted {
		if e, ok := p.Lookup(off); ok && e.State != Acknowledged {
			m.fatalf("offset %d, accepted and answered, restored as %s", off, e.State)
		}
	}
	r, ok := p.Persist()
	if !ok || !r.Snapshot {
		m.fatalf("the first record of a restored leader is %+v, %t; want a snapshot", r, ok)
	}
	m.log = append(m.log, r.Encode())
	m.checkReplay()

	old.Acquire("zombie", 1, m.hw, m.now)
	old.MoveStart(old.StartOffset() + 1)
	if zr, ok := old.Persist(); ok {
		fresh := replay(m.t, m.log)
		if err := fresh.Apply(zr); !errors.Is(err, ErrFencedLeaderEpoch) {
			m.fatalf("the deposed leader's record %+v was not fenced: %v", zr, err)
		}
	}
}

// drain lets every lock expire, then accepts everything as one member, and checks that every record
// below the high watermark ended accepted or archived.
func (m *model) drain() {
	m.draining = true
	m.now = m.now.Add(m.cfg.LockDuration)
	m.expire()
	for range m.hw + 1 {
		got := m.p.Acquire("drain", 1000, m.bound(), m.now)
		if len(got) == 0 {
			break
		}
		var batches []AckBatch
		for _, r := range got {
			batches = append(batches, AckBatch{First: r.First, Last: r.Last, Types: []AckType{AckAccept}})
			for off := r.First; off <= r.Last; off++ {
				if m.accepted[off] {
					m.fatalf("drain acquired offset %d, whose acceptance was answered", off)
				}
			}
		}
		if _, err := m.p.Acknowledge("drain", batches, m.now); err != nil {
			m.fatalf("drain: %v", err)
		}
	}
	if m.p.StartOffset() != m.hw || m.p.End() != m.hw {
		m.fatalf("after the drain the window is [%d, %d), the high watermark %d", m.p.StartOffset(), m.p.End(), m.hw)
	}
	m.persist()
	d := replay(m.t, compact(m.log, len(m.log)))
	if d.start != m.hw {
		m.fatalf("the drained state replays with SPSO %d, want %d", d.start, m.hw)
	}
}
