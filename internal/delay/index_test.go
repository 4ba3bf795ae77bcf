package delay

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// indexRun drives an Index over a log of entries as a Releaser does, with a tiny heap so that it
// drops, shrinks and refills, and checks every release against the log: never before its due time,
// in (due, offset) order except the late ones, each once. After every round that released, it
// may restart from the saved progress, as a new leader does.
type indexRun struct {
	t        *testing.T
	rng      *rand.Rand
	log      []Entry // by offset; Offset -1 for an offset with no entry (a progress record)
	max      int
	x        *Index
	now      int64
	released map[int64]int
	last     Entry
	saved    Progress
	restarts int
}

// scan returns the entries of up to chunk offsets from from, below end, and the next offset.
func (r *indexRun) scan(from, end int64) ([]Entry, int64) {
	var out []Entry
	to := min(end, from+1+int64(r.rng.IntN(7)))
	for off := from; off < to; off++ {
		if r.log[off].Offset >= 0 {
			out = append(out, r.log[off])
		}
	}
	return out, max(from, to)
}

func (r *indexRun) release(e Entry, late bool) {
	r.t.Helper()
	if e.Due > r.now {
		r.t.Fatalf("released %+v at %d, before its due time", e, r.now)
	}
	if !late {
		if e.less(r.last) {
			r.t.Fatalf("released %+v after %+v", e, r.last)
		}
		r.last = e
	}
	r.released[e.Offset]++
}

// round is one Releaser step over the first visible offsets of the log.
func (r *indexRun) round(visible int64) {
	es, next := r.scan(r.x.ScanEnd(), visible)
	released := false
	for _, e := range es {
		if r.x.Add(e) {
			if !e.less(r.x.cursor) {
				r.t.Fatalf("%+v late at cursor %+v", e, r.x.cursor)
			}
			r.release(e, true)
			released = true
		}
	}
	r.x.Skip(next)
	if from, to, ok := r.x.Refilling(); ok {
		es, next := r.scan(from, to)
		r.x.Refilled(es, next)
	}
	for {
		e, ok := r.x.Peek()
		if !ok || e.Due > r.now {
			break
		}
		r.release(r.x.Pop(), false)
		released = true
	}
	if len(r.x.heap) > r.max {
		r.t.Fatalf("heap of %d entries, max %d", len(r.x.heap), r.max)
	}
	if released {
		r.saved = r.x.Progress()
		if r.rng.IntN(10) == 0 {
			r.x = NewIndex(r.max, r.saved)
			r.restarts++
		}
	}
}

// TestDelayIndexOrder runs 200 seeded logs of 300 records due in random order (some due before they
// are read) through heaps of 4 to 16 entries.
func TestDelayIndexOrder(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 17))
		r := &indexRun{t: t, rng: rng, max: 4 + rng.IntN(13), released: map[int64]int{}, last: Entry{Due: math.MinInt64}}
		n := 300
		for off := range int64(n) {
			e := Entry{Due: int64(rng.IntN(2000)), Offset: off}
			if rng.IntN(20) == 0 {
				e.Offset = -1
			}
			r.log = append(r.log, e)
		}
		r.saved = Initial(0)
		r.x = NewIndex(r.max, r.saved)
		visible := int64(0)
		for r.now = 0; r.now < 2200; r.now += int64(rng.IntN(40)) {
			visible = min(int64(n), visible+int64(rng.IntN(12)))
			for range 3 {
				r.round(visible)
			}
		}
		// Each refill reads the pending offsets again a few at a time and puts back half a heap.
		for i := 0; r.x.Progress().Low < int64(n); i++ {
			if i == 100*n {
				t.Fatalf("seed %d: not done after %d rounds: %+v", seed, i, r.x.Progress())
			}
			r.round(int64(n))
		}
		for off, e := range r.log {
			if got := r.released[int64(off)]; e.Offset >= 0 && got != 1 {
				t.Fatalf("seed %d (max %d, %d restarts): offset %d (due %d) released %d times", seed, r.max, r.restarts, off, e.Due, got)
			}
		}
		if p := r.x.Progress(); p.ScanEnd != int64(n) || p.Low != int64(n) || len(r.x.heap) != 0 {
			t.Fatalf("seed %d: done at %+v with %d in the heap", seed, p, len(r.x.heap))
		}
	}
}

// TestDelayIndexRefill fills a heap of 8 with 100 entries due in reverse offset order, so that it
// drops most of them, then checks that the refills hand them all out in due order, and that the
// heap hands nothing out past the old horizon while a refill is running.
func TestDelayIndexRefill(t *testing.T) {
	x := NewIndex(8, Initial(0))
	for off := range int64(100) {
		if x.Add(Entry{Due: 1000 - off, Offset: off}) {
			t.Fatalf("offset %d late", off)
		}
	}
	if len(x.heap) > 8 {
		t.Fatalf("heap of %d", len(x.heap))
	}
	if _, _, ok := x.Refilling(); ok {
		t.Fatalf("refill with a full heap")
	}
	var got []Entry
	refills := 0
	for len(got) < 100 {
		if from, to, ok := x.Refilling(); ok {
			refills++
			if from != 0 || to != 100 {
				t.Fatalf("refill of [%d, %d), want offsets below 100", from, to)
			}
			var es []Entry
			for off := from; off < to; off++ {
				es = append(es, Entry{Due: 1000 - off, Offset: off})
			}
			half := len(es) / 2
			x.Refilled(es[:half], from+int64(half))
			if e, ok := x.Peek(); ok && !e.less(x.refill.below) {
				t.Fatalf("peeked %+v past the refill's horizon %+v", e, x.refill.below)
			}
			x.Refilled(es[half:], to)
		}
		if _, ok := x.Peek(); !ok {
			t.Fatalf("nothing to pop after %d, %d refills", len(got), refills)
		}
		got = append(got, x.Pop())
	}
	if !slices.IsSortedFunc(got, Entry.Compare) || got[0].Offset != 99 || got[99].Offset != 0 {
		t.Fatalf("released out of order: %v", got)
	}
	if refills < 10 {
		t.Fatalf("%d refills for 100 entries through a heap of 8", refills)
	}
	if p := x.Progress(); p.Low != 100 || p.Cursor != (Entry{Due: 1000, Offset: 1}) {
		t.Fatalf("progress %+v", p)
	}
}

// TestDelayIndexLate checks that a record read below the cursor is late, and one at it is not.
func TestDelayIndexLate(t *testing.T) {
	x := NewIndex(4, Initial(0))
	x.Add(Entry{Due: 50, Offset: 0})
	x.Pop()
	if !x.Add(Entry{Due: 49, Offset: 1}) {
		t.Fatalf("due 49 after the cursor passed 50: not late")
	}
	if x.Add(Entry{Due: 50, Offset: 2}) {
		t.Fatalf("due 50 at offset 2 late at cursor %+v", x.cursor)
	}
}

// TestDelayProgressEncoding round-trips progress and refuses values that are not one.
func TestDelayProgressEncoding(t *testing.T) {
	p := Progress{Cursor: Entry{Due: math.MinInt64, Offset: 7}, ScanEnd: 1 << 40, Low: 3}
	got, err := ParseProgress(AppendProgress(nil, p))
	if err != nil || got != p {
		t.Fatalf("round trip: %+v %v, want %+v", got, err, p)
	}
	good := AppendProgress(nil, p)
	for name, b := range map[string][]byte{
		"empty":      nil,
		"short":      good[:len(good)-1],
		"long":       append(slices.Clone(good), 0),
		"version":    append([]byte{2}, good[1:]...),
		"low > scan": AppendProgress(nil, Progress{ScanEnd: 1, Low: 2}),
		"negative":   AppendProgress(nil, Progress{Cursor: Entry{Offset: -1}}),
	} {
		if _, err := ParseProgress(b); !errors.Is(err, ErrBadProgress) {
			t.Errorf("%s: %v, want ErrBadProgress", name, err)
		}
	}
}
