package storage

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/record/recordtest"
	"github.com/weir-mq/weir/internal/vfs"
)

// prefixBatches are the valid batches FuzzRecover puts before the fuzzed tail.
func prefixBatches() []byte {
	return recordtest.Batches(
		recordtest.Spec{BaseOffset: 0, Records: 3, ValueBytes: 20, Timestamp: 10, LeaderEpoch: 1},
		recordtest.Spec{BaseOffset: 3, Records: 1, ValueBytes: 200, Timestamp: 20, LeaderEpoch: 1},
		recordtest.Spec{BaseOffset: 4, Records: 2, ValueBytes: 5, Timestamp: 30, LeaderEpoch: 2},
	)
}

// recoverWithTail writes prefix+tail as the only segment (no clean-shutdown marker) and opens the log.
func recoverWithTail(t *testing.T, prefix, tail []byte) *Log {
	t.Helper()
	mem := vfs.NewMem()
	dir := "/data/r-0"
	if err := mem.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	f, err := mem.Create(filepath.Join(dir, segmentName(0)+logSuffix))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(append(append([]byte(nil), prefix...), tail...)); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	cfg := testConfig()
	cfg.IndexIntervalBytes = 64
	l, err := Open(dir, cfg, Options{FS: mem, Clock: newClock(), Logger: quietLogFn})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func FuzzRecover(f *testing.F) {
	prefix := prefixBatches()
	next := recordtest.Batch(recordtest.Spec{BaseOffset: 6, Records: 2, ValueBytes: 50, Timestamp: 40, LeaderEpoch: 3})
	f.Add([]byte{})
	f.Add(next)
	f.Add(next[:len(next)-1])
	f.Add(next[:record.HeaderSize])
	f.Add(make([]byte, 100))
	f.Add(bytes.Repeat([]byte{0xff}, 70))
	f.Add(append(append([]byte(nil), next...), prefix[:30]...))
	f.Fuzz(func(t *testing.T, tail []byte) {
		l := recoverWithTail(t, prefix, tail)
		end := l.EndOffset()
		if end < 6 {
			t.Fatalf("valid prefix lost: end %d", end)
		}
		var got []byte
		for off := int64(0); off < end; {
			b, err := l.Read(off, 1<<20, 1<<62)
			if err != nil {
				t.Fatalf("Read(%d): %v", off, err)
			}
			for bb, err := range record.Batches(b) {
				if err != nil {
					t.Fatalf("Read(%d): %v", off, err)
				}
				h, err := record.Validate(bb)
				if err != nil {
					t.Fatalf("recovered an invalid batch at %d: %v", off, err)
				}
				off = h.NextOffset()
			}
			got = append(got, b...)
		}
		if !bytes.Equal(got[:len(prefix)], prefix) {
			t.Fatalf("valid prefix changed")
		}
		if _, err := l.Append(batch(1, 1, 1), max(l.LatestEpoch(), 0)); err != nil {
			t.Fatalf("Append after recovery: %v", err)
		}
	})
}

func TestLogRecoverCutsTornTail(t *testing.T) {
	prefix := prefixBatches()
	next := recordtest.Batch(recordtest.Spec{BaseOffset: 6, Records: 2, ValueBytes: 50, Timestamp: 40, LeaderEpoch: 3})
	tests := []struct {
		name string
		tail []byte
		end  int64
	}{
		{"none", nil, 6},
		{"whole batch", next, 8},
		{"torn batch", next[:len(next)-5], 6},
		{"zeros", make([]byte, 5000), 6},
		{"bad crc", append(next[:len(next)-1:len(next)-1], next[len(next)-1]^0xff), 6},
		{"offset going back", recordtest.Batch(recordtest.Spec{BaseOffset: 2, Records: 1}), 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := recoverWithTail(t, prefix, tt.tail)
			if l.EndOffset() != tt.end {
				t.Fatalf("end %d, want %d", l.EndOffset(), tt.end)
			}
			if tt.end == 8 && l.LatestEpoch() != 3 {
				t.Fatalf("epoch cache not rebuilt from the tail: latest %d", l.LatestEpoch())
			}
		})
	}
}

// TestLogRecoveryPointWalk checks that recovery with a recovery point still finds and validates the tail.
func TestLogRecoveryPointWalk(t *testing.T) {
	mem := newMem(t)
	clk := newClock()
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	l := openLog(t, mem, "/data/p-0", cfg, clk)
	appendDurable(t, l, 20)
	if err := l.Maintain(); err != nil {
		t.Fatal(err)
	}
	acked := appendDurable(t, l, 5)
	res, err := l.Append(batch(3, 3000, 1), 0)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20 {
		crashed := mem.CrashClone(rng, vfs.CrashOptions{KeepUnsyncedProbability: float64(i%3) / 2, TornWrite: true})
		r, err := Open("/data/p-0", cfg, Options{FS: crashed, Clock: clk, Logger: quietLogFn})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if r.EndOffset() != acked && r.EndOffset() != res.LastOffset+1 {
			t.Fatalf("recovered end %d, want %d or %d", r.EndOffset(), acked, res.LastOffset+1)
		}
		readAll(t, r, 0)
		_ = r.Close()
	}
	_ = l.Close()
}
