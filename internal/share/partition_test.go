package share

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

// dump prints the window: SPSO, then per offset its state's initial (a Available, Q acquired by the
// member after the colon, K acknowledged, X archived) and delivery count.
func dump(p *Partition) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "spso=%d [", p.StartOffset())
	for off := p.StartOffset(); off < p.End(); off++ {
		e, _ := p.Lookup(off)
		if off > p.StartOffset() {
			sb.WriteByte(' ')
		}
		fmt.Fprintf(&sb, "%c%d", "aQKX"[e.State], e.DeliveryCount)
		if e.State == Acquired {
			sb.WriteString(":" + e.Member)
		}
	}
	sb.WriteByte(']')
	return sb.String()
}

func newPartition(t *testing.T, cfg Config, spso int64) *Partition {
	t.Helper()
	p, err := New(cfg, spso, 1)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustAck(t *testing.T, p *Partition, member string, now time.Time, batches ...AckBatch) []Archive {
	t.Helper()
	archived, err := p.Acknowledge(member, batches, now)
	if err != nil {
		t.Fatalf("Acknowledge(%s, %v): %v", member, batches, err)
	}
	return archived
}

func ack(first, last int64, types ...AckType) AckBatch {
	return AckBatch{First: first, Last: last, Types: types}
}

func expect(t *testing.T, p *Partition, want string) {
	t.Helper()
	if got := dump(p); got != want {
		t.Fatalf("state\n got %s\nwant %s", got, want)
	}
}

func TestShareConfig(t *testing.T) {
	p := newPartition(t, Config{}, 0)
	if p.cfg.LockDuration != DefaultLockDuration || p.cfg.DeliveryCountLimit != DefaultDeliveryCountLimit ||
		p.cfg.RecordLocksMax != DefaultRecordLocksMax || p.cfg.UpdatesPerSnapshot != DefaultUpdatesPerSnapshot {
		t.Fatalf("defaults: %+v", p.cfg)
	}
	if p.LockDuration() != 30*time.Second {
		t.Fatalf("LockDuration = %v", p.LockDuration())
	}
	for _, cfg := range []Config{
		{LockDuration: -time.Second},
		{DeliveryCountLimit: -1},
		{DeliveryCountLimit: 1 << 15},
		{RecordLocksMax: -1},
		{RecordLocksMax: WindowMax + 1},
		{UpdatesPerSnapshot: -1},
	} {
		if _, err := New(cfg, 0, 0); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
	if _, err := New(Config{}, -1, 0); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("New at start -1 = %v, want ErrInvalidConfig", err)
	}
}

func TestShareAcquire(t *testing.T) {
	p := newPartition(t, Config{}, 10)
	if got := p.Acquire("m1", 3, 20, t0); !slices.Equal(got, []AcquiredRange{{10, 12, 1}}) {
		t.Fatalf("first acquire = %v", got)
	}
	if got := p.Acquire("m2", 100, 15, t0); !slices.Equal(got, []AcquiredRange{{13, 14, 1}}) {
		t.Fatalf("acquire up to the high watermark = %v", got)
	}
	if got := p.Acquire("m2", 100, 15, t0); got != nil {
		t.Fatalf("nothing left below the high watermark, got %v", got)
	}
	if got := p.Acquire("m2", 0, 20, t0); got != nil {
		t.Fatalf("MaxRecords 0 acquired %v", got)
	}
	expect(t, p, "spso=10 [Q1:m1 Q1:m1 Q1:m1 Q1:m2 Q1:m2]")
	e, _ := p.Lookup(10)
	if e.Deadline != t0.Add(DefaultLockDuration) {
		t.Fatalf("deadline %v", e.Deadline)
	}
	if _, ok := p.Lookup(9); ok {
		t.Fatal("Lookup below the SPSO found a record")
	}
	if _, ok := p.Lookup(15); ok {
		t.Fatal("Lookup at the window's end found a record")
	}

	// Released records come first, lowest offset first, and ranges split by delivery count.
	mustAck(t, p, "m1", t0, ack(11, 11, AckRelease))
	got := p.Acquire("m3", 3, 20, t0)
	if want := []AcquiredRange{{11, 11, 2}, {15, 16, 1}}; !slices.Equal(got, want) {
		t.Fatalf("acquire after a release = %v, want %v", got, want)
	}
	expect(t, p, "spso=10 [Q1:m1 Q2:m3 Q1:m1 Q1:m2 Q1:m2 Q1:m3 Q1:m3]")
}

func TestShareAcquireWindowCap(t *testing.T) {
	p := newPartition(t, Config{RecordLocksMax: 3}, 0)
	if got := p.Acquire("m1", 10, 100, t0); !slices.Equal(got, []AcquiredRange{{0, 2, 1}}) {
		t.Fatalf("acquire = %v", got)
	}
	if got := p.Acquire("m2", 10, 100, t0); got != nil {
		t.Fatalf("window full, acquired %v", got)
	}
	// A release inside the window is acquired again although the window is full.
	mustAck(t, p, "m1", t0, ack(1, 1, AckRelease))
	if got := p.Acquire("m2", 10, 100, t0); !slices.Equal(got, []AcquiredRange{{1, 1, 2}}) {
		t.Fatalf("acquire within a full window = %v", got)
	}
	// Accepting the head moves the SPSO and makes room for one new offset.
	mustAck(t, p, "m1", t0, ack(0, 0, AckAccept))
	if got := p.Acquire("m3", 10, 100, t0); !slices.Equal(got, []AcquiredRange{{3, 3, 1}}) {
		t.Fatalf("acquire after the SPSO moved = %v", got)
	}
	expect(t, p, "spso=1 [Q2:m2 Q1:m1 Q1:m3]")
}

// TestShareAcquireThrough: the rest of a log batch is acquired without a count, from the offset given,
// skipping records others hold, up to the high watermark and the window cap, and never past the
// window's end.
func TestShareAcquireThrough(t *testing.T) {
	p := newPartition(t, Config{RecordLocksMax: 8}, 0)
	if got := p.Acquire("m1", 2, 100, t0); !slices.Equal(got, []AcquiredRange{{0, 1, 1}}) {
		t.Fatalf("acquire = %v", got)
	}
	if got := p.AcquireThrough("m1", 2, 4, 100, t0); !slices.Equal(got, []AcquiredRange{{2, 4, 1}}) {
		t.Fatalf("through 4 = %v", got)
	}
	// Released records and records another member holds: only the available ones, by delivery count.
	mustAck(t, p, "m1", t0, ack(1, 1, AckRelease), ack(3, 3, AckRelease))
	if got := p.Acquire("m2", 1, 100, t0); !slices.Equal(got, []AcquiredRange{{1, 1, 2}}) {
		t.Fatalf("m2 acquire = %v", got)
	}
	if got := p.AcquireThrough("m3", 1, 6, 100, t0); !slices.Equal(got, []AcquiredRange{{3, 3, 2}, {5, 6, 1}}) {
		t.Fatalf("m3 through 6 = %v", got)
	}
	if got := p.AcquireThrough("m3", 7, 20, 7, t0); got != nil {
		t.Fatalf("through 20 at high watermark 7 = %v", got)
	}
	if got := p.AcquireThrough("m3", 9, 20, 100, t0); got != nil {
		t.Fatalf("from past the window's end = %v", got)
	}
	if got := p.AcquireThrough("m3", 7, 20, 100, t0); !slices.Equal(got, []AcquiredRange{{7, 7, 1}}) {
		t.Fatalf("through 20 with a cap of 8 = %v", got)
	}
	expect(t, p, "spso=0 [Q1:m1 Q2:m2 Q1:m1 Q2:m3 Q1:m1 Q1:m3 Q1:m3 Q1:m3]")
}

func TestShareAcknowledgeTypes(t *testing.T) {
	p := newPartition(t, Config{DeliveryCountLimit: 2, RenewEnabled: true}, 0)
	p.Acquire("m1", 6, 6, t0)
	archived := mustAck(t, p, "m1", t0.Add(time.Second),
		ack(1, 1, AckAccept), ack(2, 5, AckRelease, AckReject, AckGap, AckRenew))
	if want := []Archive{{Offset: 3, Reason: ArchiveRejected, DeliveryCount: 1}}; !slices.Equal(archived, want) {
		t.Fatalf("archived %v, want %v (a gap is not reported)", archived, want)
	}
	expect(t, p, "spso=0 [Q1:m1 K1 a1 X1 X1 Q1:m1]")
	if e, _ := p.Lookup(5); e.Deadline != t0.Add(time.Second+DefaultLockDuration) {
		t.Fatalf("RENEW: deadline %v", e.Deadline)
	}
	// Accepting offset 0 moves the SPSO over every final record after it.
	mustAck(t, p, "m1", t0, ack(0, 0, AckAccept))
	expect(t, p, "spso=2 [a1 X1 X1 Q1:m1]")
	// The second delivery is the last: its release archives.
	p.Acquire("m2", 1, 6, t0)
	archived = mustAck(t, p, "m2", t0, ack(2, 2, AckRelease))
	if want := []Archive{{Offset: 2, Reason: ArchiveDeliveryLimit, DeliveryCount: 2}}; !slices.Equal(archived, want) {
		t.Fatalf("archived %v, want %v", archived, want)
	}
	expect(t, p, "spso=5 [Q1:m1]")
	mustAck(t, p, "m1", t0, ack(5, 5, AckAccept))
	expect(t, p, "spso=6 []")
}

func TestShareAcknowledgeErrors(t *testing.T) {
	cases := []struct {
		name    string
		member  string
		batches []AckBatch
		want    error
	}{
		{"reversed range", "m1", []AckBatch{ack(3, 2, AckAccept)}, ErrInvalidRequest},
		{"negative offset", "m1", []AckBatch{ack(-1, 2, AckAccept)}, ErrInvalidRequest},
		{"overlapping batches", "m1", []AckBatch{ack(1, 3, AckAccept), ack(3, 4, AckAccept)}, ErrInvalidRequest},
		{"batches out of order", "m1", []AckBatch{ack(4, 5, AckAccept), ack(1, 2, AckAccept)}, ErrInvalidRequest},
		{"no types", "m1", []AckBatch{ack(1, 2)}, ErrInvalidRequest},
		{"types for part of the batch", "m1", []AckBatch{ack(1, 3, AckAccept, AckAccept)}, ErrInvalidRequest},
		{"unknown type", "m1", []AckBatch{ack(1, 1, 5)}, ErrInvalidRequest},
		{"negative type", "m1", []AckBatch{ack(1, 1, -1)}, ErrInvalidRequest},
		{"huge range", "m1", []AckBatch{ack(0, 1<<62, AckAccept)}, ErrInvalidRecordState},
		{"another member's records", "m2", []AckBatch{ack(1, 1, AckAccept)}, ErrInvalidRecordState},
		{"a record not acquired", "m1", []AckBatch{ack(6, 6, AckAccept)}, ErrInvalidRecordState},
		{"below the SPSO", "m1", []AckBatch{ack(0, 1, AckAccept)}, ErrInvalidRecordState},
		{"beyond the window", "m1", []AckBatch{ack(7, 8, AckAccept)}, ErrInvalidRecordState},
		{"a valid batch before a bad one", "m1", []AckBatch{ack(1, 2, AckAccept), ack(5, 6, AckAccept)}, ErrInvalidRecordState},
		{"RENEW not allowed", "m1", []AckBatch{ack(1, 1, AckRenew)}, ErrInvalidRecordState},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPartition(t, Config{}, 0)
			p.Acquire("m1", 1, 10, t0)
			mustAck(t, p, "m1", t0, ack(0, 0, AckAccept))
			p.Acquire("m1", 5, 10, t0)
			p.Acquire("m3", 1, 10, t0)
			mustAck(t, p, "m3", t0, ack(6, 6, AckRelease))
			before := dump(p)
			p.Persist()
			archived, err := p.Acknowledge(c.member, c.batches, t0)
			if !errors.Is(err, c.want) || archived != nil {
				t.Fatalf("Acknowledge = %v, %v; want %v", archived, err, c.want)
			}
			expect(t, p, before)
			if r, ok := p.Persist(); ok {
				t.Fatalf("a refused acknowledgement left a record to persist: %+v", r)
			}
		})
	}
}

func TestShareExpire(t *testing.T) {
	p := newPartition(t, Config{LockDuration: 10 * time.Second, DeliveryCountLimit: 2, RenewEnabled: true}, 0)
	if !p.Deadline().IsZero() {
		t.Fatal("Deadline set with nothing acquired")
	}
	p.Acquire("m1", 2, 10, t0)
	p.Acquire("m2", 2, 10, t0.Add(5*time.Second))
	if d := p.Deadline(); d != t0.Add(10*time.Second) {
		t.Fatalf("Deadline = %v", d)
	}
	if got := p.Expire(t0.Add(10*time.Second - time.Nanosecond)); got != nil {
		t.Fatalf("expired early: %v", got)
	}
	expect(t, p, "spso=0 [Q1:m1 Q1:m1 Q1:m2 Q1:m2]")
	// m2 renews offset 3: only offset 2 of m2's expires at its deadline.
	mustAck(t, p, "m2", t0.Add(7*time.Second), ack(3, 3, AckRenew))
	p.Expire(t0.Add(10 * time.Second))
	expect(t, p, "spso=0 [a1 a1 Q1:m2 Q1:m2]")
	if d := p.Deadline(); d != t0.Add(15*time.Second) {
		t.Fatalf("Deadline = %v", d)
	}
	p.Expire(t0.Add(15 * time.Second))
	expect(t, p, "spso=0 [a1 a1 a1 Q1:m2]")
	// The second delivery's expiry archives.
	p.Acquire("m1", 1, 10, t0.Add(20*time.Second))
	got := p.Expire(t0.Add(30 * time.Second))
	if want := []Archive{{Offset: 0, Reason: ArchiveDeliveryLimit, DeliveryCount: 2}}; !slices.Equal(got, want) {
		t.Fatalf("Expire archived %v, want %v", got, want)
	}
	expect(t, p, "spso=1 [a1 a1 a1]")
	if !p.Deadline().IsZero() {
		t.Fatalf("Deadline = %v with nothing acquired", p.Deadline())
	}
}

func TestShareReleaseMember(t *testing.T) {
	p := newPartition(t, Config{DeliveryCountLimit: 1}, 0)
	p.Acquire("m1", 2, 10, t0)
	p.Acquire("m2", 2, 10, t0)
	got := p.ReleaseMember("m1")
	want := []Archive{{Offset: 0, Reason: ArchiveDeliveryLimit, DeliveryCount: 1}, {Offset: 1, Reason: ArchiveDeliveryLimit, DeliveryCount: 1}}
	if !slices.Equal(got, want) {
		t.Fatalf("ReleaseMember archived %v, want %v", got, want)
	}
	expect(t, p, "spso=2 [Q1:m2 Q1:m2]")
	if got := p.ReleaseMember("m3"); got != nil {
		t.Fatalf("released for an unknown member: %v", got)
	}
}

func TestShareMoveStart(t *testing.T) {
	p := newPartition(t, Config{}, 0)
	p.Acquire("m1", 4, 10, t0)
	p.MoveStart(2)
	expect(t, p, "spso=2 [Q1:m1 Q1:m1]")
	if _, err := p.Acknowledge("m1", []AckBatch{ack(1, 1, AckAccept)}, t0); !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("acknowledging a record below the new start: %v", err)
	}
	p.MoveStart(1)
	expect(t, p, "spso=2 [Q1:m1 Q1:m1]")
	p.MoveStart(7)
	expect(t, p, "spso=7 []")
	if got := p.Acquire("m1", 2, 10, t0); !slices.Equal(got, []AcquiredRange{{7, 8, 1}}) {
		t.Fatalf("acquire after the start moved = %v", got)
	}
}

func TestSharePersist(t *testing.T) {
	p := newPartition(t, Config{UpdatesPerSnapshot: 2}, 5)
	r, ok := p.Persist()
	if !ok || !r.Snapshot || r.Seq != 1 || r.Slot != 0 || r.StartOffset != 5 || r.End != 5 || r.Batches != nil || r.LeaderEpoch != 1 {
		t.Fatalf("first Persist = %+v, %t; want an empty snapshot of round 1", r, ok)
	}
	if r, ok := p.Persist(); ok {
		t.Fatalf("Persist with no change = %+v", r)
	}
	p.Acquire("m1", 4, 20, t0)
	mustAck(t, p, "m1", t0, ack(7, 7, AckAccept))
	r, _ = p.Persist()
	want := Record{Seq: 1, Slot: 1, LeaderEpoch: 1, StartOffset: 5, End: 9, Batches: []Batch{
		{First: 5, Last: 6, State: Available, DeliveryCount: 1},
		{First: 7, Last: 7, State: Acknowledged, DeliveryCount: 1},
		{First: 8, Last: 8, State: Available, DeliveryCount: 1},
	}}
	if !recordsEqual(r, want) {
		t.Fatalf("update = %+v\nwant %+v (acquired records as Available)", r, want)
	}
	// An update holds only the offsets changed since the record before.
	mustAck(t, p, "m1", t0, ack(8, 8, AckReject))
	r, _ = p.Persist()
	want = Record{Seq: 1, Slot: 2, LeaderEpoch: 1, StartOffset: 5, End: 9, Batches: []Batch{{First: 8, Last: 8, State: Archived, DeliveryCount: 1}}}
	if !recordsEqual(r, want) {
		t.Fatalf("update = %+v\nwant %+v", r, want)
	}
	// After UpdatesPerSnapshot updates comes a snapshot; an SPSO move alone is an update.
	mustAck(t, p, "m1", t0, ack(5, 6, AckAccept))
	r, _ = p.Persist()
	want = Record{Snapshot: true, Seq: 2, LeaderEpoch: 1, StartOffset: 9, End: 9}
	if !recordsEqual(r, want) {
		t.Fatalf("snapshot = %+v\nwant %+v", r, want)
	}
	p.MoveStart(12)
	r, _ = p.Persist()
	want = Record{Seq: 2, Slot: 1, LeaderEpoch: 1, StartOffset: 12, End: 12}
	if !recordsEqual(r, want) {
		t.Fatalf("update = %+v\nwant %+v", r, want)
	}
	// A failed write makes the next record a snapshot of a round of its own.
	p.Acquire("m1", 1, 20, t0)
	p.Persist()
	p.PersistFailed()
	r, _ = p.Persist()
	want = Record{Snapshot: true, Seq: 3, LeaderEpoch: 1, StartOffset: 12, End: 13, Batches: []Batch{{First: 12, Last: 12, State: Available, DeliveryCount: 1}}}
	if !recordsEqual(r, want) {
		t.Fatalf("snapshot after a failure = %+v\nwant %+v", r, want)
	}
}

func recordsEqual(a, b Record) bool {
	return a.Snapshot == b.Snapshot && a.Seq == b.Seq && a.Slot == b.Slot && a.LeaderEpoch == b.LeaderEpoch &&
		a.StartOffset == b.StartOffset && a.End == b.End && slices.Equal(a.Batches, b.Batches)
}

// replay applies encoded records to a fresh Durable, skipping stale and fenced ones, as a load does.
func replay(t *testing.T, recs [][]byte) *Durable {
	t.Helper()
	var d Durable
	for _, b := range recs {
		r, err := DecodeRecord(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Apply(r); err != nil && !errors.Is(err, ErrStaleRecord) && !errors.Is(err, ErrFencedLeaderEpoch) {
			t.Fatal(err)
		}
	}
	return &d
}

func TestShareRestore(t *testing.T) {
	p := newPartition(t, Config{DeliveryCountLimit: 2, UpdatesPerSnapshot: 3}, 0)
	var log [][]byte
	persist := func() {
		if r, ok := p.Persist(); ok {
			log = append(log, r.Encode())
		}
	}
	persist()
	p.Acquire("m1", 6, 10, t0)
	persist()
	mustAck(t, p, "m1", t0, ack(0, 5, AckAccept, AckRelease, AckReject, AckAccept, AckRelease, AckRelease))
	persist()
	p.Acquire("m2", 2, 10, t0)
	persist()
	mustAck(t, p, "m2", t0, ack(1, 1, AckRelease))
	persist()
	expect(t, p, "spso=4 [Q2:m2 a1]")

	d := replay(t, log)
	if !d.Loaded() || d.StartOffset() != 4 || d.LeaderEpoch() != 1 {
		t.Fatalf("replayed: loaded %t, start %d, epoch %d", d.Loaded(), d.StartOffset(), d.LeaderEpoch())
	}
	if _, _, err := Restore(Config{}, d, 0); !errors.Is(err, ErrFencedLeaderEpoch) {
		t.Fatalf("Restore at an older epoch: %v", err)
	}
	q, archived, err := Restore(Config{DeliveryCountLimit: 2}, d, 2)
	if err != nil {
		t.Fatal(err)
	}
	// m2's lock on offset 4 ended with the old leader: at its second delivery, it is archived.
	if want := []Archive{{Offset: 4, Reason: ArchiveDeliveryLimit, DeliveryCount: 2}}; !slices.Equal(archived, want) {
		t.Fatalf("Restore archived %v, want %v", archived, want)
	}
	expect(t, q, "spso=5 [a1]")
	// The new leader's first record is a snapshot of the next round at its epoch, which fences the old
	// leader's later writes.
	r, _ := q.Persist()
	if !r.Snapshot || r.Seq != d.seq+1 || r.LeaderEpoch != 2 {
		t.Fatalf("first record after Restore = %+v", r)
	}
	log = append(log, r.Encode())
	if old := p.Acquire("m1", 1, 10, t0); len(old) != 1 {
		t.Fatalf("old leader acquired %v", old)
	}
	r, _ = p.Persist()
	log = append(log, r.Encode())
	d2 := replay(t, log)
	if err := d2.Apply(r); !errors.Is(err, ErrFencedLeaderEpoch) {
		t.Fatalf("the old leader's update after the new leader's snapshot: %v", err)
	}
	q2, _, err := Restore(Config{DeliveryCountLimit: 2}, d2, 2)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, q2, "spso=5 [a1]")
	if _, _, err := Restore(Config{}, &Durable{}, 1); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Restore of a Durable without a snapshot: %v", err)
	}
}

func TestShareDurableApply(t *testing.T) {
	snap := Record{Snapshot: true, Seq: 4, LeaderEpoch: 3, StartOffset: 10, End: 12}
	upd := func(slot int32, mut func(*Record)) Record {
		r := Record{Seq: 4, Slot: slot, LeaderEpoch: 3, StartOffset: 10, End: 12}
		if mut != nil {
			mut(&r)
		}
		return r
	}
	cases := []struct {
		name string
		r    Record
		want error
	}{
		{"the next update", upd(1, nil), nil},
		{"an update of an older round", upd(1, func(r *Record) { r.Seq = 3 }), ErrStaleRecord},
		{"an update of a newer round", upd(1, func(r *Record) { r.Seq = 5 }), ErrStaleRecord},
		{"a missing slot", upd(2, nil), ErrCorruptRecord},
		{"an older leader epoch", upd(1, func(r *Record) { r.LeaderEpoch = 2 }), ErrFencedLeaderEpoch},
		{"a newer leader epoch without a snapshot", upd(1, func(r *Record) { r.LeaderEpoch = 4 }), ErrCorruptRecord},
		{"the start going back", upd(1, func(r *Record) { r.StartOffset = 9 }), ErrCorruptRecord},
		{"the end going back", upd(1, func(r *Record) { r.End = 11 }), ErrCorruptRecord},
		{"an acquired batch", upd(1, func(r *Record) { r.Batches = []Batch{{First: 10, Last: 10, State: Acquired}} }), ErrCorruptRecord},
		{"a newer snapshot", Record{Snapshot: true, Seq: 9, LeaderEpoch: 3, StartOffset: 1, End: 1}, nil},
		{"a snapshot of the same round (a coordinator's fence)", Record{Snapshot: true, Seq: 4, LeaderEpoch: 3, StartOffset: 10, End: 12}, nil},
		{"a late snapshot of an older round", Record{Snapshot: true, Seq: 3, LeaderEpoch: 3, StartOffset: 10, End: 12}, ErrStaleRecord},
		{"a newer leader's snapshot of an older round", Record{Snapshot: true, Seq: 1, LeaderEpoch: 4, StartOffset: 10, End: 12}, nil},
		{"an older leader's snapshot", Record{Snapshot: true, Seq: 9, LeaderEpoch: 2, StartOffset: 1, End: 1}, ErrFencedLeaderEpoch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var d Durable
			if err := d.Apply(snap); err != nil {
				t.Fatal(err)
			}
			before := fmt.Sprintf("%+v", d)
			err := d.Apply(c.r)
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Fatalf("Apply = %v, want %v", err, c.want)
			}
			if err != nil && fmt.Sprintf("%+v", d) != before {
				t.Fatalf("a refused record changed the state: %+v, was %s", d, before)
			}
		})
	}
	var d Durable
	if err := d.Apply(upd(1, nil)); !errors.Is(err, ErrStaleRecord) {
		t.Fatalf("an update before any snapshot: %v", err)
	}
}

// TestShareDurableSnapshot: a Durable sent as its Snapshot (as a coordinator answers another node's
// leader) and applied to a zero Durable is the same state: same round, start and window, the offsets
// never delivered included as Available with count 0, and the same partition restored from it.
func TestShareDurableSnapshot(t *testing.T) {
	p := newPartition(t, Config{DeliveryCountLimit: 3, UpdatesPerSnapshot: 4}, 20)
	var log [][]byte
	persist := func() {
		if r, ok := p.Persist(); ok {
			log = append(log, r.Encode())
		}
	}
	persist()
	p.Acquire("m1", 8, 40, t0)
	persist()
	mustAck(t, p, "m1", t0, ack(21, 23, AckAccept, AckRelease, AckReject), ack(26, 27, AckRelease))
	persist()
	p.Acquire("m2", 1, 40, t0)
	persist()
	d := replay(t, log)
	r := d.Snapshot()
	// m1 still holds 20, 24 and 25 and m2 holds 22 at its second delivery: held records are written
	// Available with their count, and each run of one state and count is one batch.
	want := Record{Snapshot: true, Seq: 1, LeaderEpoch: 1, StartOffset: 20, End: 28, Batches: []Batch{
		{First: 20, Last: 20, State: Available, DeliveryCount: 1},
		{First: 21, Last: 21, State: Acknowledged, DeliveryCount: 1},
		{First: 22, Last: 22, State: Available, DeliveryCount: 2},
		{First: 23, Last: 23, State: Archived, DeliveryCount: 1},
		{First: 24, Last: 27, State: Available, DeliveryCount: 1},
	}}
	if !recordsEqual(r, want) {
		t.Fatalf("Snapshot\n got %+v\nwant %+v", r, want)
	}
	var back Durable
	if err := back.Apply(r); err != nil {
		t.Fatal(err)
	}
	if again := back.Snapshot(); !recordsEqual(again, r) {
		t.Fatalf("applied and taken again\n got %+v\nwant %+v", again, r)
	}
	q1, _, err := Restore(Config{DeliveryCountLimit: 3}, d, 2)
	if err != nil {
		t.Fatal(err)
	}
	q2, _, err := Restore(Config{DeliveryCountLimit: 3}, &back, 2)
	if err != nil {
		t.Fatal(err)
	}
	if dump(q1) != dump(q2) {
		t.Fatalf("restored from the snapshot %s, from the log %s", dump(q2), dump(q1))
	}
	var empty Durable
	if err := empty.Apply(Record{Snapshot: true, Seq: 4, LeaderEpoch: 1, StartOffset: 7, End: 7}); err != nil {
		t.Fatal(err)
	}
	if s := empty.Snapshot(); s.StartOffset != 7 || s.End != 7 || len(s.Batches) != 0 || s.Seq != 4 {
		t.Fatalf("Snapshot of an empty window: %+v", s)
	}
}

// TestShareRollback: an acknowledgement whose write failed for good is rolled back: the records are
// held again by the member, which acknowledges them again; the rounds written meanwhile stay counted,
// so the next record is a snapshot of a newer round than any failed write's; and the clone shares
// nothing with the partition it was taken from.
func TestShareRollback(t *testing.T) {
	p := newPartition(t, Config{}, 0)
	p.Persist()
	p.Acquire("m1", 3, 10, t0)
	saved := p.Clone()
	mustAck(t, p, "m1", t0, ack(0, 1, AckAccept))
	expect(t, saved, "spso=0 [Q1:m1 Q1:m1 Q1:m1]")
	p.Persist()
	p.PersistFailed()
	failed, _ := p.Persist()
	p.Rollback(saved)
	expect(t, p, "spso=0 [Q1:m1 Q1:m1 Q1:m1]")
	r, ok := p.Persist()
	if !ok || !r.Snapshot || r.Seq <= failed.Seq {
		t.Fatalf("the record after a rollback: %+v (ok %t), the failed snapshot's round %d", r, ok, failed.Seq)
	}
	mustAck(t, p, "m1", t0, ack(0, 2, AckAccept))
	expect(t, p, "spso=3 []")
}

// TestShareTune: a change of the group's lock duration, delivery limit, window cap and RENEW switch
// applies to a live partition without giving back the records held: the locks held keep their
// deadlines, new ones and renewals take the new duration, an Available record already at the lowered
// limit is archived and reported for its dead-letter copy, a lowered cap stops new offsets while the
// window is longer, and an invalid change changes nothing.
func TestShareTune(t *testing.T) {
	p := newPartition(t, Config{}, 0)
	p.Acquire("m1", 4, 10, t0)
	mustAck(t, p, "m1", t0, ack(1, 2, AckRelease))
	p.Acquire("m2", 1, 10, t0)
	mustAck(t, p, "m2", t0, ack(1, 1, AckRelease))
	expect(t, p, "spso=0 [Q1:m1 a2 a1 Q1:m1]")
	if _, err := p.Acknowledge("m1", []AckBatch{ack(0, 0, AckRenew)}, t0); err == nil {
		t.Fatal("RENEW accepted before it was enabled")
	}
	now := t0.Add(time.Second)
	archived, err := p.Tune(Config{LockDuration: 20 * time.Second, DeliveryCountLimit: 2, RecordLocksMax: 5, RenewEnabled: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := []Archive{{Offset: 1, Reason: ArchiveDeliveryLimit, DeliveryCount: 2}}; !slices.Equal(archived, want) {
		t.Fatalf("Tune archived %v, want %v", archived, want)
	}
	expect(t, p, "spso=0 [Q1:m1 X2 a1 Q1:m1]")
	if e, _ := p.Lookup(3); e.Deadline != t0.Add(DefaultLockDuration) {
		t.Fatalf("a lock held keeps its deadline: %v, want %v", e.Deadline, t0.Add(DefaultLockDuration))
	}
	mustAck(t, p, "m1", now, ack(0, 0, AckRenew))
	if e, _ := p.Lookup(0); e.Deadline != now.Add(20*time.Second) {
		t.Fatalf("renewed deadline %v, want the new duration from now", e.Deadline)
	}
	if got := p.Acquire("m2", 10, 10, now); len(got) != 2 || got[0].First != 2 || got[1].First != 4 || got[1].Last != 4 {
		t.Fatalf("acquired %v, want 2 and 4, the cap of 5 reached", got)
	}
	if e, _ := p.Lookup(4); e.Deadline != now.Add(20*time.Second) {
		t.Fatalf("new lock %v, want the new duration", e.Deadline)
	}
	if _, err := p.Tune(Config{DeliveryCountLimit: -1}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Tune of an invalid limit: %v", err)
	}
	if p.LockDuration() != 20*time.Second {
		t.Fatalf("an invalid change changed the lock duration to %v", p.LockDuration())
	}
}
