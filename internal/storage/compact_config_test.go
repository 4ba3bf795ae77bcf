package storage

import (
	"slices"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/compress"
)

// closedBytes sums the sizes of the closed segments.
func closedBytes(l *Log) int64 {
	var n int64
	for _, s := range l.Segments() {
		if !s.Active {
			n += s.Size
		}
	}
	return n
}

// TestCompactMinCompactionLag checks that min.compaction.lag.ms keeps every record younger than the lag,
// even superseded ones, and that the older part of the log is compacted once it is old enough.
func TestCompactMinCompactionLag(t *testing.T) {
	mem := newMem(t)
	clk := newClock()
	cfg := compactConfig()
	cfg.MinCompactionLag = time.Hour
	l := openLog(t, mem, "/data/c-0", cfg, clk)
	defer l.Close()
	writeOverwrites(t, l, clk, compress.None, 40)
	old := logEntries(t, l)
	maintainAll(t, l)
	if got := logEntries(t, l); !slices.Equal(got, old) {
		t.Fatalf("records younger than min.compaction.lag.ms were compacted: %d of %d left", len(got), len(old))
	}
	clk.now = clk.now.Add(40 * time.Minute)
	youngFrom := l.EndOffset()
	writeOverwrites(t, l, clk, compress.None, 40)
	written := logEntries(t, l)
	clk.now = clk.now.Add(30 * time.Minute) // the first 40 rounds are 70 minutes old, the rest 30
	maintainAll(t, l)
	got := logEntries(t, l)
	checkSubset(t, got, written)
	var young, oldLeft int
	for _, e := range got {
		if e.off >= youngFrom {
			young++
		} else {
			oldLeft++
		}
	}
	if want := len(written) - len(old); young != want {
		t.Fatalf("%d records younger than the lag left, want all %d", young, want)
	}
	if oldLeft >= len(old)/2 {
		t.Fatalf("the records older than the lag were not compacted: %d of %d left", oldLeft, len(old))
	}
	if !equalMaps(latestValues(got), latestValues(written)) {
		t.Fatal("latest values changed")
	}
}

// TestCompactDirtyRatio checks that a pass starts only when the dirty bytes are more than
// min.cleanable.dirty.ratio of the cleanable bytes.
func TestCompactDirtyRatio(t *testing.T) {
	mem := newMem(t)
	clk := newClock()
	cfg := compactConfig()
	l := openLog(t, mem, "/data/c-0", cfg, clk)
	defer l.Close()
	writeOverwrites(t, l, clk, compress.None, 60)
	maintainAll(t, l) // after Open everything is dirty: ratio 1
	clean := closedBytes(l)
	before := len(logEntries(t, l))
	cleanSegs := len(l.Segments()) - 1
	for closedBytes(l) == clean || len(l.Segments())-1 == cleanSegs {
		writeOverwrites(t, l, clk, compress.None, 1)
	}
	dirty := closedBytes(l) - clean
	ratio := float64(dirty) / float64(clean+dirty)
	if ratio <= 0 || ratio >= 1 {
		t.Fatalf("dirty ratio %v: the test needs one between 0 and 1", ratio)
	}
	entries := logEntries(t, l)
	for _, r := range []float64{ratio + 0.01, ratio} {
		cfg.MinCleanableDirtyRatio = r
		if err := l.SetConfig(cfg); err != nil {
			t.Fatal(err)
		}
		if err := l.Maintain(); err != nil {
			t.Fatal(err)
		}
		if got := logEntries(t, l); !slices.Equal(got, entries) {
			t.Fatalf("a pass ran at dirty ratio %v with min.cleanable.dirty.ratio %v", ratio, r)
		}
	}
	cfg.MinCleanableDirtyRatio = ratio - 0.01
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if err := l.Maintain(); err != nil {
		t.Fatal(err)
	}
	if got := logEntries(t, l); len(got) >= len(entries) {
		t.Fatalf("no pass at dirty ratio %v with min.cleanable.dirty.ratio %v (%d records before the new rounds)", ratio, ratio-0.01, before)
	}
}

// TestCompactMaxCompactionLag checks that max.compaction.lag.ms compacts a log whose dirty ratio never
// asks for it, once its first dirty batch is older than the lag, and rolls the active segment at that age.
func TestCompactMaxCompactionLag(t *testing.T) {
	mem := newMem(t)
	clk := newClock()
	cfg := compactConfig()
	cfg.MinCleanableDirtyRatio = 1 // never by ratio
	cfg.MaxCompactionLag = time.Hour
	l := openLog(t, mem, "/data/c-0", cfg, clk)
	defer l.Close()
	writeOverwrites(t, l, clk, compress.None, 60)
	written := logEntries(t, l)
	clk.now = clk.now.Add(59 * time.Minute)
	maintainAll(t, l)
	if got := logEntries(t, l); !slices.Equal(got, written) {
		t.Fatalf("compacted before max.compaction.lag.ms: %d of %d left", len(got), len(written))
	}
	active := activeBase(l)
	clk.now = clk.now.Add(2 * time.Minute)
	maintainAll(t, l)
	got := logEntries(t, l)
	checkSubset(t, got, written)
	if len(got) >= len(written)/4 {
		t.Fatalf("not compacted after max.compaction.lag.ms: %d of %d left", len(got), len(written))
	}
	if activeBase(l) == active {
		t.Fatal("the active segment did not roll at max.compaction.lag.ms")
	}
	if !equalMaps(latestValues(got), latestValues(written)) {
		t.Fatal("latest values changed")
	}
	// The roll made the old active segment dirty and closed: the next pass leaves one record per key.
	maintainAll(t, l)
	for k, n := range closedKeyCounts(logEntries(t, l), activeBase(l)) {
		if n > 1 {
			t.Fatalf("key %s has %d records in closed segments", k, n)
		}
	}
}
