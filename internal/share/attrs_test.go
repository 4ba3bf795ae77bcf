package share

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// offsets lists the offsets of ranges in the order given.
func offsets(ranges []AcquiredRange) []int64 {
	var out []int64
	for _, r := range ranges {
		for off := r.First; off <= r.Last; off++ {
			out = append(out, off)
		}
	}
	return out
}

// track tells p the attributes of every offset from Tracked() up to hw, as the owner does.
func track(t *testing.T, p *Partition, now time.Time, attrs ...Attr) {
	t.Helper()
	if _, err := p.Track(attrs, now); err != nil {
		t.Fatal(err)
	}
}

func TestSharePriorityOrder(t *testing.T) {
	p := newPartition(t, Config{}, 0)
	// offsets 0-5 priority 0, 6-8 priority 9, 9 priority 5
	attrs := make([]Attr, 10)
	for i := 6; i < 9; i++ {
		attrs[i].Priority = 9
	}
	attrs[9].Priority = 5
	track(t, p, t0, attrs...)
	if got := p.Tracked(); got != 10 {
		t.Fatalf("tracked %d, want 10", got)
	}
	if got := offsets(p.Acquire("m1", 2, 10, t0)); !slices.Equal(got, []int64{6, 7}) {
		t.Fatalf("first acquisition %v, want the two lowest priority-9 offsets", got)
	}
	if got := offsets(p.Acquire("m1", 3, 10, t0)); !slices.Equal(got, []int64{0, 8, 9}) {
		t.Fatalf("second acquisition %v, want 8 (9), 9 (5), 0 (0) as ranges in offset order", got)
	}
	// a released priority-9 record comes before the priority-0 ones below it
	mustAck(t, p, "m1", t0, ack(7, 7, AckRelease))
	if got := offsets(p.Acquire("m2", 1, 10, t0)); !slices.Equal(got, []int64{7}) {
		t.Fatalf("after a release %v, want 7", got)
	}
	if got := offsets(p.Acquire("m2", 10, 10, t0)); !slices.Equal(got, []int64{1, 2, 3, 4, 5}) {
		t.Fatalf("the rest %v", got)
	}
}

func TestSharePriorityAging(t *testing.T) {
	p := newPartition(t, Config{PriorityAging: time.Second}, 0)
	track(t, p, t0, Attr{}, Attr{}) // two priority-0 records, tracked at t0
	// 3.5 s later, three priority-3 records arrive: the old ones have aged to 3 and, tied, win by offset
	later := t0.Add(3500 * time.Millisecond)
	track(t, p, later, Attr{Priority: 3}, Attr{Priority: 3}, Attr{Priority: 3})
	if got := offsets(p.Acquire("m1", 2, 5, later)); !slices.Equal(got, []int64{0, 1}) {
		t.Fatalf("aged records %v, want 0 and 1", got)
	}
	// a fresh priority-4 record beats the priority-3 ones, and aging caps at PriorityMax
	track(t, p, later, Attr{Priority: 4})
	if got := offsets(p.Acquire("m1", 1, 6, later)); !slices.Equal(got, []int64{5}) {
		t.Fatalf("priority 4 over 3: %v", got)
	}
	if got := (Attr{Priority: 8, Since: t0.UnixMilli()}).level(t0.Add(time.Hour), time.Second); got != PriorityMax {
		t.Fatalf("aged level %d, want %d", got, PriorityMax)
	}
}

func TestShareDueSkipped(t *testing.T) {
	p := newPartition(t, Config{LockDuration: time.Minute}, 0)
	due := t0.Add(2 * time.Second).UnixMilli()
	// 0 due at t0+2s, 1 plain, 2 due in the past (due now), 3 priority 9 due at t0+2s
	track(t, p, t0, Attr{Due: due}, Attr{}, Attr{Due: t0.Add(-time.Hour).UnixMilli()}, Attr{Priority: 9, Due: due})
	if got := p.NextDue(t0); !got.Equal(time.UnixMilli(due)) {
		t.Fatalf("next due %v, want %v", got, time.UnixMilli(due))
	}
	if got := offsets(p.Acquire("m1", 10, 4, t0)); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("before the due time %v, want 1 and 2", got)
	}
	if got := p.Acquire("m1", 10, 4, time.UnixMilli(due-1)); got != nil {
		t.Fatalf("one millisecond early: %v", got)
	}
	if got := offsets(p.Acquire("m1", 1, 4, time.UnixMilli(due))); !slices.Equal(got, []int64{3}) {
		t.Fatalf("at the due time %v, want 3 (priority 9) first", got)
	}
	if got := p.NextDue(time.UnixMilli(due)); !got.IsZero() {
		t.Fatalf("next due %v after all are due", got)
	}
}

func TestShareTrackBounds(t *testing.T) {
	p := newPartition(t, Config{RecordLocksMax: 4}, 0)
	n, err := p.Track(make([]Attr, 6), t0)
	if err != nil || n != 4 {
		t.Fatalf("Track took %d, %v; want 4 (the window's cap)", n, err)
	}
	if _, err := p.Track([]Attr{{Priority: 10}}, t0); err == nil {
		t.Fatal("priority 10 tracked")
	}
	p.Acquire("m1", 4, 10, t0)
	mustAck(t, p, "m1", t0, ack(0, 1, AckAccept))
	if got, want := p.TrackLimit(), int64(6); got != want {
		t.Fatalf("track limit %d, want %d", got, want)
	}
	if n, _ := p.Track([]Attr{{Priority: 9}, {Priority: 9}, {Priority: 9}}, t0); n != 2 {
		t.Fatalf("Track took %d after two records finished, want 2", n)
	}
	// a start moved past the tracked offsets drops their attributes
	p.MoveStart(5)
	if got := p.Tracked(); got != 6 {
		t.Fatalf("tracked %d after MoveStart(5), want 6", got)
	}
	if got := offsets(p.Acquire("m2", 5, 10, t0)); !slices.Equal(got, []int64{5, 6, 7, 8}) {
		t.Fatalf("after MoveStart %v", got)
	}
	if e, _ := p.Lookup(5); e.Attr.Priority != 9 {
		t.Fatalf("offset 5 lost its priority: %+v", e)
	}
}

// TestShareRestoreTracksNothing checks that a restored partition knows no attribute: the owner tracks
// from the SPSO again before it acquires, so that a record not yet due stays unacquired.
func TestShareRestoreTracksNothing(t *testing.T) {
	p := newPartition(t, Config{}, 0)
	due := t0.Add(time.Minute).UnixMilli()
	track(t, p, t0, Attr{}, Attr{Due: due}, Attr{})
	p.Acquire("m1", 3, 3, t0)
	r, _ := p.Persist()
	q, _, err := Restore(Config{}, replay(t, [][]byte{r.Encode()}), 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := q.Tracked(); got != 0 {
		t.Fatalf("restored partition tracks up to %d, want 0", got)
	}
	track(t, q, t0, Attr{}, Attr{Due: due}, Attr{})
	if got := offsets(q.Acquire("m2", 10, q.Tracked(), t0)); !slices.Equal(got, []int64{0, 2}) {
		t.Fatalf("restored acquisition %v, want 0 and 2", got)
	}
}

// TestShareNeverEarly drives random partitions with random priorities, due times, acknowledgements and
// clock steps, some records marked Skip, and checks at every acquisition that no record is handed out
// before it is due nor a Skip record at all (each is archived in the window), that
// no due Available record of a higher effective priority is left behind for one of a lower, and that
// within a level the records taken are the lowest offsets.
func TestShareNeverEarly(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		rnd := rand.New(rand.NewPCG(seed, 17))
		cfg := Config{RecordLocksMax: 1 + rnd.IntN(40), PriorityAging: time.Duration(1+rnd.IntN(5)) * time.Second, LockDuration: time.Second}
		p := newPartition(t, cfg, 0)
		now := t0
		attr := map[int64]Attr{}
		hw := int64(0)
		for step := 0; step < 200; step++ {
			switch rnd.IntN(5) {
			case 0:
				hw += int64(rnd.IntN(10))
			case 1:
				now = now.Add(time.Duration(rnd.IntN(3000)) * time.Millisecond)
				p.Expire(now)
			case 2:
				e, ok := p.Lookup(p.StartOffset() + int64(rnd.IntN(max(1, int(p.End()-p.StartOffset())))))
				if ok && e.State == Acquired {
					off := p.StartOffset()
					for ; ; off++ {
						if x, _ := p.Lookup(off); x.State == Acquired && x.Member == e.Member {
							break
						}
					}
					mustAck(t, p, e.Member, now, ack(off, off, AckType(1+rnd.IntN(3))))
				}
			}
			var attrs []Attr
			for off := p.Tracked(); off < min(hw, p.TrackLimit()); off++ {
				a := Attr{Priority: int8(rnd.IntN(PriorityMax + 1))}
				if rnd.IntN(3) == 0 {
					a.Due = now.Add(time.Duration(rnd.IntN(5000)-1000) * time.Millisecond).UnixMilli()
				}
				a.Skip = rnd.IntN(6) == 0
				attrs = append(attrs, a)
			}
			from := p.Tracked()
			n, _ := p.Track(attrs, now)
			for k := range n {
				a := attrs[k]
				a.Since = now.UnixMilli()
				attr[from+int64(k)] = a
			}
			before := p.Clone()
			limit := min(hw, p.Tracked())
			max := 1 + rnd.IntN(6)
			got := offsets(p.Acquire("m"+string(rune('a'+rnd.IntN(3))), max, limit, now))
			checkAcquisition(t, seed, before, attr, got, max, limit, now)
		}
	}
}

// checkAcquisition checks one acquisition of up to max records below limit against the partition as it
// was before it.
func checkAcquisition(t *testing.T, seed uint64, before *Partition, attr map[int64]Attr, got []int64, max int, limit int64, now time.Time) {
	t.Helper()
	taken := map[int64]bool{}
	lowest := level(PriorityMax + 1)
	for _, off := range got {
		a := attr[off]
		if a.Skip {
			t.Fatalf("seed %d: offset %d, marked Skip, handed out", seed, off)
		}
		if a.Due > now.UnixMilli() {
			t.Fatalf("seed %d: offset %d handed out at %d, due at %d", seed, off, now.UnixMilli(), a.Due)
		}
		taken[off] = true
		lowest = min(lowest, a.level(now, before.cfg.PriorityAging))
	}
	// every due Available record left behind must be of a level below the lowest taken, or at it with a
	// higher offset than every record taken at that level; none is left when fewer than max were taken
	for off := before.StartOffset(); off < min(limit, before.TrackLimit()); off++ {
		a := attr[off]
		e, ok := before.Lookup(off)
		if a.Skip && (!ok || e.State != Archived) {
			t.Fatalf("seed %d: offset %d, marked Skip, is %v, in the window %v", seed, off, e.State, ok)
		}
		if (ok && e.State != Available) || taken[off] || a.Skip {
			continue
		}
		if a.Due > now.UnixMilli() {
			continue
		}
		l := a.level(now, before.cfg.PriorityAging)
		if len(got) < max {
			t.Fatalf("seed %d: offset %d left behind by an acquisition of %d < %d", seed, off, len(got), max)
		}
		if l > lowest {
			t.Fatalf("seed %d: offset %d at level %d left behind for level %d (took %v)", seed, off, l, lowest, got)
		}
		if l == lowest {
			for _, o := range got {
				if attr[o].level(now, before.cfg.PriorityAging) == l && o > off {
					t.Fatalf("seed %d: offset %d left behind for %d at level %d", seed, off, o, l)
				}
			}
		}
	}
}

// TestShareTrackSkip: records marked Skip (read_committed: aborted transactions and control records)
// are archived as Track sees them, the SPSO moves over them when nothing before them is in flight,
// they are never acquired nor reported for a dead-letter copy, a restore of the persisted state has them
// archived, and a record a member finished before the restore (the group read uncommitted then) stays
// as it was.
func TestShareTrackSkip(t *testing.T) {
	p := newPartition(t, Config{}, 0)
	skip := Attr{Skip: true}
	track(t, p, t0, skip, skip, Attr{}, skip, Attr{Priority: 4}, skip)
	expect(t, p, "spso=2 [a0 X0 a0 X0]")
	if got := offsets(p.Acquire("m1", 10, p.Tracked(), t0)); !slices.Equal(got, []int64{2, 4}) {
		t.Fatalf("acquired %v, want 2 and 4", got)
	}
	if archived := mustAck(t, p, "m1", t0, ack(2, 2, AckAccept), ack(4, 4, AckAccept)); len(archived) != 0 {
		t.Fatalf("skipped records reported for a dead-letter copy: %v", archived)
	}
	expect(t, p, "spso=6 []")

	// offsets tracked ahead of the window, then skipped past a record still in flight
	track(t, p, t0, Attr{}, Attr{})
	p.Acquire("m1", 1, p.Tracked(), t0)
	track(t, p, t0, skip, Attr{}, skip)
	expect(t, p, "spso=6 [Q1:m1 a0 X0 a0 X0]")
	r, _ := p.Persist()
	q, _, err := Restore(Config{}, replay(t, [][]byte{r.Encode()}), 1)
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := q.Lookup(8); e.State != Archived {
		t.Fatalf("restored offset 8 is %v, want Archived", e.State)
	}
	track(t, q, t0, Attr{}, Attr{}, skip, Attr{}, skip)
	if got := offsets(q.Acquire("m2", 10, q.Tracked(), t0)); !slices.Equal(got, []int64{6, 7, 9}) {
		t.Fatalf("restored acquisition %v, want 6, 7 and 9", got)
	}

	p = newPartition(t, Config{}, 0)
	track(t, p, t0, Attr{}, Attr{}, Attr{})
	p.Acquire("m1", 3, p.Tracked(), t0)
	mustAck(t, p, "m1", t0, ack(1, 1, AckAccept))
	r, _ = p.Persist()
	if q, _, err = Restore(Config{}, replay(t, [][]byte{r.Encode()}), 1); err != nil {
		t.Fatal(err)
	}
	track(t, q, t0, skip, skip, Attr{})
	expect(t, q, "spso=2 [a1]")
}
