package storage

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/record/recordtest"
	"github.com/weir-mq/weir/internal/vfs"
)

// fakeClock is a manually advanced clock.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }

func newClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

// newMem returns an in-memory filesystem with a durable /data directory.
func newMem(t *testing.T) *vfs.Mem {
	t.Helper()
	mem := vfs.NewMem()
	if err := mem.MkdirAll("/data"); err != nil {
		t.Fatal(err)
	}
	mem.SyncAll()
	return mem
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4096
	cfg.IndexIntervalBytes = 256
	return cfg
}

func openLog(t *testing.T, fsys vfs.FS, dir string, cfg Config, clk Clock) *Log {
	t.Helper()
	l, err := Open(dir, cfg, Options{FS: fsys, Clock: clk})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

func batch(records, valueBytes int, ts int64) []byte {
	return recordtest.Batch(recordtest.Spec{Records: records, ValueBytes: valueBytes, Timestamp: ts})
}

// readAll reads every batch from offset to the end and returns their headers.
func readAll(t *testing.T, l *Log, from int64) []record.Header {
	t.Helper()
	var out []record.Header
	for off := from; off < l.EndOffset(); {
		b, err := l.Read(off, 1<<20, 1<<62)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if len(b) == 0 {
			t.Fatalf("Read(%d): empty below end %d", off, l.EndOffset())
		}
		for bb, err := range record.Batches(b) {
			if err != nil {
				t.Fatalf("Read(%d): %v", off, err)
			}
			h, err := record.Validate(bb)
			if err != nil {
				t.Fatalf("Read(%d): invalid batch: %v", off, err)
			}
			out = append(out, h)
			off = h.NextOffset()
		}
	}
	return out
}

func TestLogAppendReadReopen(t *testing.T) {
	fsys := vfs.NewMem()
	clk := newClock()
	l := openLog(t, fsys, "/data/t-0", testConfig(), clk)
	var want int64
	for i := range 50 {
		res, err := l.Append(batch(1+i%3, 100, int64(i)), 3)
		if err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		if res.FirstOffset != want {
			t.Fatalf("Append %d: first offset %d, want %d", i, res.FirstOffset, want)
		}
		want = res.LastOffset + 1
		if err := l.WaitDurable(context.Background(), want); err != nil {
			t.Fatalf("WaitDurable: %v", err)
		}
	}
	if l.EndOffset() != want || l.DurableEndOffset() != want {
		t.Fatalf("end %d durable %d, want %d", l.EndOffset(), l.DurableEndOffset(), want)
	}
	if len(l.Segments()) < 3 {
		t.Fatalf("expected rolls, got %d segments", len(l.Segments()))
	}
	hs := readAll(t, l, 0)
	if len(hs) != 50 || hs[0].PartitionLeaderEpoch != 3 {
		t.Fatalf("read %d batches, epoch %d", len(hs), hs[0].PartitionLeaderEpoch)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	l = openLog(t, fsys, "/data/t-0", testConfig(), clk)
	defer l.Close()
	if l.EndOffset() != want {
		t.Fatalf("reopened end %d, want %d", l.EndOffset(), want)
	}
	if got := len(readAll(t, l, 0)); got != 50 {
		t.Fatalf("reopened: %d batches", got)
	}
	if _, err := l.Read(want+1, 100, 1<<62); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Read past end: %v", err)
	}
	if e, off := l.EndOffsetForEpoch(3); e != 3 || off != want {
		t.Fatalf("EndOffsetForEpoch(3) = %d, %d", e, off)
	}
}
