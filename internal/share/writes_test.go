package share

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestShareWritesModel drives a Partition as its owner does with writes behind the operations
// (Writes): acknowledgements are applied and answered only once a later write is committed, a write
// is in flight while acquisitions, acknowledgements, expiries and members leaving go on, writes commit
// or fail at random times, and crashes restore a new leader from what was committed. It checks after
// every step:
//   - an operation is answered only when what it changed is committed: every accepted record whose
//     answer was sent is Acknowledged (or below the start offset) in the committed state, and after a
//     crash in the restored partition, and is never handed out again;
//   - an acquisition never hands out a record whose previous delivery count is not committed: the
//     committed count is at least the new count less one, so a leader change loses at most one;
//   - no record is handed out more than the delivery limit plus once per restore.
//
// A failure prints the seed; -share.seed=N replays it.
func TestShareWritesModel(t *testing.T) { eachSeed(t, runWritesModel) }

// behind is the model of an owner whose writes go on behind its operations.
type behind struct {
	t    *testing.T
	seed uint64
	rnd  *rand.Rand
	cfg  Config
	p    *Partition
	w    Writes[int]
	now  time.Time
	hw   int64
	// committed is the share-state coordinator's state; flight is the record in flight.
	committed *Durable
	flight    Record
	// ops numbers the operations; accepts holds the offsets each acknowledgement accepted, until it is
	// answered; answered those whose acceptance was answered.
	ops      int
	accepts  map[int][]int64
	answered map[int64]bool
	// holders is who holds each acquired offset, as the model saw it handed out.
	holders    map[int64]string
	deliveries map[int64]int
	restores   int
}

func (b *behind) fatalf(format string, args ...any) {
	b.t.Helper()
	b.t.Fatalf("seed %d (replay with -share.seed=%d): %s\n%s", b.seed, b.seed, fmt.Sprintf(format, args...), dump(b.p))
}

func runWritesModel(t *testing.T, seed uint64) {
	rnd := rand.New(rand.NewPCG(seed, seed^0xbe41d))
	cfg := Config{
		LockDuration:       10 * time.Second,
		DeliveryCountLimit: 2 + rnd.IntN(4),
		RecordLocksMax:     1 + rnd.IntN(24),
		UpdatesPerSnapshot: 1 + rnd.IntN(6),
	}
	b := &behind{t: t, seed: seed, rnd: rnd, cfg: cfg, now: t0, hw: int64(rnd.IntN(10)), committed: &Durable{},
		accepts: map[int][]int64{}, answered: map[int64]bool{}, holders: map[int64]string{}, deliveries: map[int64]int{}}
	p, err := New(cfg, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	b.p = p
	b.w.Owe()
	b.next()
	b.commit()
	for range 500 {
		b.step()
		if t.Failed() {
			return
		}
	}
}

func (b *behind) step() {
	switch n := b.rnd.IntN(100); {
	case n < 10:
		b.hw += int64(b.rnd.IntN(6))
	case n < 35:
		b.acquire()
	case n < 60:
		b.acknowledge()
	case n < 68:
		b.now = b.now.Add(time.Duration(b.rnd.IntN(8)) * time.Second)
		b.release(func() []Archive { return b.p.Expire(b.now) }, func(l string, off int64) bool { return l != "" && b.lockedPast(off) })
	case n < 72:
		who := fmt.Sprintf("m%d", b.rnd.IntN(3))
		b.release(func() []Archive { return b.p.ReleaseMember(who) }, func(l string, _ int64) bool { return l == who })
	case n < 86:
		b.commit()
	case n < 92:
		b.fail()
	default:
		b.crash()
	}
	b.next()
}

// lockedPast reports whether the lock on off has expired at now.
func (b *behind) lockedPast(off int64) bool {
	e, ok := b.p.Lookup(off)
	return ok && e.State == Acquired && !e.Deadline.After(b.now)
}

// acquire hands records out, as the owner does only when no release is owed or in flight.
func (b *behind) acquire() {
	if b.w.Blocked(b.p) {
		return
	}
	member := fmt.Sprintf("m%d", b.rnd.IntN(3))
	for _, r := range b.p.Acquire(member, 1+b.rnd.IntN(8), b.hw, b.now) {
		for off := r.First; off <= r.Last; off++ {
			switch c := b.committedCount(off); {
			case off < b.committed.start:
				b.fatalf("acquired offset %d, below the committed start offset %d", off, b.committed.start)
			case b.answered[off]:
				b.fatalf("acquired offset %d, whose acceptance was answered", off)
			case c < r.DeliveryCount-1:
				b.fatalf("acquired offset %d at delivery %d with %d committed", off, r.DeliveryCount, c)
			}
			b.holders[off] = member
			b.deliveries[off]++
			if b.deliveries[off] > b.cfg.DeliveryCountLimit+b.restores {
				b.fatalf("offset %d delivered %d times, limit %d after %d restores", off, b.deliveries[off], b.cfg.DeliveryCountLimit, b.restores)
			}
		}
	}
}

// committedCount is off's delivery count in the committed state.
func (b *behind) committedCount(off int64) int16 {
	d := b.committed
	if off < d.start || off >= d.start+int64(len(d.recs)) {
		return 0
	}
	return d.recs[off-d.start].count
}

// acknowledge sends one member's acknowledgement of some of what it holds, with random types.
func (b *behind) acknowledge() {
	member := fmt.Sprintf("m%d", b.rnd.IntN(3))
	var offs []int64
	for off, h := range b.holders {
		if h == member && b.rnd.IntN(3) > 0 {
			offs = append(offs, off)
		}
	}
	if len(offs) == 0 {
		return
	}
	slices.Sort(offs)
	var batches []AckBatch
	var accepted []int64
	for _, off := range offs {
		t := []AckType{AckAccept, AckAccept, AckReject, AckRelease}[b.rnd.IntN(4)]
		batches = append(batches, AckBatch{First: off, Last: off, Types: []AckType{t}})
		if t == AckAccept {
			accepted = append(accepted, off)
		}
	}
	if _, err := b.p.Acknowledge(member, batches, b.now); err != nil {
		b.fatalf("acknowledge %v: %v", batches, err)
	}
	for _, off := range offs {
		delete(b.holders, off)
	}
	b.ops++
	b.accepts[b.ops] = accepted
	b.w.Owe(b.ops)
}

// release runs an expiry or a member's leaving (fn), as the owner does only when not blocked, and
// forgets the holders it released (gone).
func (b *behind) release(fn func() []Archive, gone func(string, int64) bool) {
	if b.w.Blocked(b.p) {
		return
	}
	for off, h := range b.holders {
		if gone(h, off) {
			delete(b.holders, off)
		}
	}
	fn()
	b.w.Owe()
}

// next starts the write owed, if none is in flight, and answers what needs no write.
func (b *behind) next() {
	r, cs, ok := b.w.Next(b.p)
	if ok {
		b.flight = r
		return
	}
	b.answer(cs)
}

// commit commits the write in flight and answers its operations.
func (b *behind) commit() {
	if !b.w.Flying() {
		return
	}
	if err := b.committed.Apply(b.flight); err != nil {
		b.fatalf("committing %+v: %v", b.flight, err)
	}
	b.answer(b.w.Done(b.p, true))
}

// fail fails the write in flight: lost, or committed although the leader was told it failed.
func (b *behind) fail() {
	if !b.w.Flying() {
		return
	}
	if b.rnd.IntN(2) == 0 {
		if err := b.committed.Apply(b.flight); err != nil {
			b.fatalf("committing the failed %+v: %v", b.flight, err)
		}
	}
	if got := b.w.Done(b.p, false); got != nil {
		b.fatalf("a failed write answered %v", got)
	}
}

// answer answers operations: their acceptances must be committed.
func (b *behind) answer(ops []int) {
	for _, op := range ops {
		for _, off := range b.accepts[op] {
			if off >= b.committed.start && (off >= b.committed.start+int64(len(b.committed.recs)) || b.committed.recs[off-b.committed.start].state != Acknowledged) {
				b.fatalf("answered the acceptance of offset %d, not committed", off)
			}
			b.answered[off] = true
		}
		delete(b.accepts, op)
	}
}

// crash restores a new leader from the committed state; the operations not answered are dropped
// unanswered (their clients see the connection close).
func (b *behind) crash() {
	for _, op := range b.w.Drop() {
		delete(b.accepts, op)
	}
	p, _, err := Restore(b.cfg, b.committed.Clone(), b.p.leaderEpoch+1)
	if err != nil {
		b.fatalf("Restore: %v", err)
	}
	for off := range b.answered {
		if e, ok := p.Lookup(off); ok && e.State != Acknowledged {
			b.fatalf("offset %d, accepted and answered, restored as %s", off, e.State)
		}
	}
	b.p = p
	b.restores++
	b.holders = map[int64]string{}
	b.w.Owe()
	b.next()
	b.commit()
}

// TestShareWritesReleaseBlocks: a release blocks acquisitions until a write that carries it is
// committed, also when the write in flight at the release was taken before it, and when the write
// carrying it fails; an acceptance is answered only by the write after it.
func TestShareWritesReleaseBlocks(t *testing.T) {
	p, err := New(Config{LockDuration: time.Minute, DeliveryCountLimit: 5}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var w Writes[string]
	w.Owe()
	if _, _, ok := w.Next(p); !ok {
		t.Fatal("no first snapshot")
	}
	w.Done(p, true)
	p.Acquire("a", 2, 10, t0)
	if _, err := p.Acknowledge("a", []AckBatch{{First: 0, Last: 0, Types: []AckType{AckAccept}}}, t0); err != nil {
		t.Fatal(err)
	}
	w.Owe("accept 0")
	if _, _, ok := w.Next(p); !ok || w.Blocked(p) {
		t.Fatalf("the acceptance's write: %t, blocked %t", ok, w.Blocked(p))
	}
	if _, err := p.Acknowledge("a", []AckBatch{{First: 1, Last: 1, Types: []AckType{AckRelease}}}, t0); err != nil {
		t.Fatal(err)
	}
	w.Owe("release 1")
	if !w.Blocked(p) {
		t.Fatal("not blocked by a release owed")
	}
	if _, _, ok := w.Next(p); ok {
		t.Fatal("a second write in flight")
	}
	if got := w.Done(p, true); !slices.Equal(got, []string{"accept 0"}) || !w.Blocked(p) {
		t.Fatalf("first write answered %v, blocked %t", got, w.Blocked(p))
	}
	r, _, ok := w.Next(p)
	if !ok || r.Snapshot || !w.Blocked(p) {
		t.Fatalf("the release's write %+v, %t, blocked %t", r, ok, w.Blocked(p))
	}
	if got := w.Done(p, false); got != nil || !w.Blocked(p) {
		t.Fatalf("a failed write answered %v, blocked %t", got, w.Blocked(p))
	}
	r, _, ok = w.Next(p)
	if !ok || !r.Snapshot {
		t.Fatalf("the write after a failure %+v, %t; want a snapshot", r, ok)
	}
	if got := w.Done(p, true); !slices.Equal(got, []string{"release 1"}) || w.Blocked(p) {
		t.Fatalf("the snapshot answered %v, blocked %t", got, w.Blocked(p))
	}
	if got := p.Acquire("b", 1, 10, t0); len(got) != 1 || got[0].First != 1 || got[0].DeliveryCount != 2 {
		t.Fatalf("acquired %+v after the release was written", got)
	}
}
