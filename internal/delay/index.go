// Package delay is the core of delay topics (docs/queues.md, "Delay topics (as built)"): a topic
// with weir.delay.target.topic set releases each of its records into the target topic at the
// record's due time, in (due time, offset) order, for consumers that read by offset (classic and
// KIP-848 groups).
//
// The leader of each partition of a delay topic runs one Releaser over the partition's log (the Log
// interface, served by internal/kafka/api). Its state is an Index: a cursor below which every record
// is released, the scan end below which every record has been seen, and a heap of at most a fixed
// number of the earliest pending records. Progress (cursor, scan end and the lowest offset still
// pending) is written as a record into the delay partition itself, so it is as durable and as
// replicated as the records, and a new leader resumes from the last one.
//
// Order. Entries are ordered by (Due, Offset). The cursor C is an entry: every record of an offset
// below the scan end S whose entry is below C is released, every other one is pending. A record
// read at the scan end whose entry is below C (its due time passed before it was seen: a
// weir.deliver-at in the past, no delay) is late and released at once, out of the order.
//
// Memory. The heap holds exactly the pending entries below a horizon H, at most max of them. An
// entry at or above H is dropped, remembering the lowest dropped offset. When the heap is full, its
// later half is dropped and H lowered to the first of them. When the heap runs down to a quarter
// and entries were dropped, the log is read again from the lowest dropped offset up to S (a refill),
// putting back the entries at or above the old H; the heap hands out only entries below the old H
// until the refill is done, since an entry not yet read again may come before the others.
package delay

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Entry is one record of a delay partition: when it is due (Unix milliseconds) and its offset.
type Entry struct {
	Due    int64
	Offset int64
}

// Compare orders entries by due time, then offset.
func (e Entry) Compare(o Entry) int {
	if c := cmp.Compare(e.Due, o.Due); c != 0 {
		return c
	}
	return cmp.Compare(e.Offset, o.Offset)
}

func (e Entry) less(o Entry) bool { return e.Compare(o) < 0 }

// never is above every entry: the horizon of a heap that dropped nothing.
var never = Entry{Due: math.MaxInt64, Offset: math.MaxInt64}

// Progress is what a Releaser makes durable: every record of an offset below ScanEnd whose entry is
// below Cursor is released, and no pending record has an offset below Low.
type Progress struct {
	Cursor  Entry
	ScanEnd int64
	Low     int64
}

// Initial is the progress of a delay partition where nothing is released yet, its log starting at
// start.
func Initial(start int64) Progress {
	return Progress{Cursor: Entry{Due: math.MinInt64}, ScanEnd: start, Low: start}
}

// refill is a read of [next, end) again for the entries at or above below.
type refill struct {
	below     Entry
	next, end int64
}

// Index orders the pending records of one delay partition. It does no I/O and reads no clock: the
// Releaser feeds it what it reads and pops what is due.
type Index struct {
	max     int
	heap    []Entry
	cursor  Entry
	horizon Entry
	scanEnd int64
	// dropLow is the lowest offset of an entry dropped since the last refill started.
	dropLow int64
	refill  *refill
}

// NewIndex returns the index of a partition whose progress is p, holding at most max entries (at
// least 4). Unless nothing is pending, it starts with a refill of [p.Low, p.ScanEnd).
func NewIndex(max int, p Progress) *Index {
	if max < 4 {
		panic(fmt.Sprintf("delay: index of %d entries", max))
	}
	x := &Index{max: max, cursor: p.Cursor, horizon: never, scanEnd: p.ScanEnd, dropLow: math.MaxInt64}
	if p.Low < p.ScanEnd {
		x.refill = &refill{below: p.Cursor, next: p.Low, end: p.ScanEnd}
	}
	return x
}

// ScanEnd is the offset the next new record is read from.
func (x *Index) ScanEnd() int64 { return x.scanEnd }

// Add takes the entry of the record at or after the scan end, which moves past it. It reports
// whether the record is late (below the cursor): the caller releases it at once, and the index does
// not keep it.
func (x *Index) Add(e Entry) (late bool) {
	if e.Offset < x.scanEnd {
		panic(fmt.Sprintf("delay: offset %d added below the scan end %d", e.Offset, x.scanEnd))
	}
	x.scanEnd = e.Offset + 1
	if e.less(x.cursor) {
		return true
	}
	x.insert(e)
	return false
}

// Skip moves the scan end to next, past records that carry no entry.
func (x *Index) Skip(next int64) { x.scanEnd = max(x.scanEnd, next) }

// insert puts a pending entry in the heap, or drops it.
func (x *Index) insert(e Entry) {
	if e.less(x.horizon) && len(x.heap) == x.max {
		x.shrink()
	}
	if !e.less(x.horizon) {
		x.dropLow = min(x.dropLow, e.Offset)
		return
	}
	x.heap = append(x.heap, e)
	x.up(len(x.heap) - 1)
}

// shrink drops the later half of a full heap and lowers the horizon to the first entry dropped.
func (x *Index) shrink() {
	slices.SortFunc(x.heap, Entry.Compare)
	keep := x.max / 2
	x.horizon = x.heap[keep]
	for _, e := range x.heap[keep:] {
		x.dropLow = min(x.dropLow, e.Offset)
	}
	x.heap = x.heap[:keep]
}

// Refilling returns the range the log is to be read again over, when a refill is running or due:
// a refill starts once the heap is down to a quarter of max and entries were dropped.
func (x *Index) Refilling() (from, to int64, ok bool) {
	if x.refill == nil && x.horizon != never && len(x.heap) <= x.max/4 {
		x.refill = &refill{below: x.horizon, next: x.dropLow, end: x.scanEnd}
		x.horizon, x.dropLow = never, math.MaxInt64
	}
	if x.refill == nil {
		return 0, 0, false
	}
	return x.refill.next, x.refill.end, true
}

// Refilled takes the entries read again from the refill's next offset, in offset order, up to next
// (the offset after the last one read); those at or past the refill's end are ignored. The refill
// ends once next reaches its end.
func (x *Index) Refilled(es []Entry, next int64) {
	r := x.refill
	if r == nil {
		panic("delay: Refilled without a refill")
	}
	for _, e := range es {
		if e.Offset >= r.next && e.Offset < r.end && !e.less(r.below) {
			x.insert(e)
		}
	}
	if r.next = max(r.next, next); r.next >= r.end {
		x.refill = nil
	}
}

// Held returns how many pending entries the index holds in memory and the earliest of them (false when
// it holds none). Pending records it dropped are in the log only, so the count is at most max and the
// earliest is the earliest pending record: every dropped one is at or above the horizon.
func (x *Index) Held() (int, Entry, bool) {
	if len(x.heap) == 0 {
		return 0, Entry{}, false
	}
	return len(x.heap), x.heap[0], true
}

// Peek returns the earliest pending entry, unless a refill must finish before it is known.
func (x *Index) Peek() (Entry, bool) {
	if len(x.heap) == 0 || x.refill != nil && !x.heap[0].less(x.refill.below) {
		return Entry{}, false
	}
	return x.heap[0], true
}

// Pop removes the entry Peek returned and moves the cursor past it: the caller releases it.
func (x *Index) Pop() Entry {
	if _, ok := x.Peek(); !ok {
		panic("delay: Pop without an entry to pop")
	}
	e := x.heap[0]
	last := len(x.heap) - 1
	x.heap[0] = x.heap[last]
	x.heap = x.heap[:last]
	x.down(0)
	x.cursor = Entry{Due: e.Due, Offset: e.Offset + 1}
	return e
}

// Progress is the index's progress: the lowest pending offset is the lowest of the heap's, of the
// dropped entries' and of a refill's next offset, else the scan end.
func (x *Index) Progress() Progress {
	low := x.dropLow
	for _, e := range x.heap {
		low = min(low, e.Offset)
	}
	if x.refill != nil {
		low = min(low, x.refill.next)
	}
	return Progress{Cursor: x.cursor, ScanEnd: x.scanEnd, Low: min(low, x.scanEnd)}
}

func (x *Index) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !x.heap[i].less(x.heap[p]) {
			return
		}
		x.heap[i], x.heap[p] = x.heap[p], x.heap[i]
		i = p
	}
}

func (x *Index) down(i int) {
	n := len(x.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && x.heap[r].less(x.heap[l]) {
			m = r
		}
		if !x.heap[m].less(x.heap[i]) {
			return
		}
		x.heap[i], x.heap[m] = x.heap[m], x.heap[i]
		i = m
	}
}
