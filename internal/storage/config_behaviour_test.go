package storage

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/record/recordtest"
	"github.com/weir-mq/weir/internal/vfs"
)

// TestLogSegmentJitter checks that the active segment rolls by age segment.jitter.ms earlier than
// segment.ms at most, by the amount drawn from the injected source when the segment started.
func TestLogSegmentJitter(t *testing.T) {
	mem := newMem(t)
	clk := newClock()
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.SegmentAge = 10 * time.Hour
	cfg.SegmentJitter = 4 * time.Hour
	twin := rand.New(rand.NewPCG(3, 4))
	l, err := Open("/data/j-0", cfg, Options{FS: mem, Clock: clk, Rand: rand.New(rand.NewPCG(3, 4))})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for range 3 {
		jitter := time.Duration(twin.Int64N(int64(cfg.SegmentJitter)))
		if jitter == 0 {
			t.Fatal("the test wants a non-zero jitter")
		}
		if _, err := l.Append(batch(1, 10, clk.now.UnixMilli()), 0); err != nil {
			t.Fatal(err)
		}
		base := activeBase(l)
		clk.now = clk.now.Add(cfg.SegmentAge - jitter - time.Millisecond)
		if err := l.Maintain(); err != nil {
			t.Fatal(err)
		}
		if activeBase(l) != base {
			t.Fatalf("rolled before segment.ms less its jitter %v", jitter)
		}
		clk.now = clk.now.Add(time.Millisecond)
		if err := l.Maintain(); err != nil {
			t.Fatal(err)
		}
		if activeBase(l) == base {
			t.Fatalf("did not roll at segment.ms less its jitter %v", jitter)
		}
	}
}

// TestLogIndexMaxBytes checks that segment.index.bytes rolls a segment whose offset or time index is
// full, and that the index files written stay within it.
func TestLogIndexMaxBytes(t *testing.T) {
	mem := newMem(t)
	clk := newClock()
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 30
	cfg.IndexIntervalBytes = 0 // an entry for every batch but a segment's first
	cfg.IndexMaxBytes = 120    // 15 offset entries, 10 time entries
	l := openLog(t, mem, "/data/i-0", cfg, clk)
	for i := range 100 {
		if _, err := l.Append(batch(1, 10, int64(1000+i)), 0); err != nil {
			t.Fatal(err)
		}
	}
	segs := l.Segments()
	if len(segs) != 10 {
		t.Fatalf("%d segments, want 10 of 10 batches each (time index full)", len(segs))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, s := range segs {
		stem := strings.TrimSuffix(s.Path, logSuffix)
		for _, p := range []string{stem + indexSuffix, stem + timeIndexSuffix} {
			st, err := mem.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if st.Size() > int64(cfg.IndexMaxBytes) {
				t.Fatalf("%s holds %d bytes, above segment.index.bytes %d", p, st.Size(), cfg.IndexMaxBytes)
			}
		}
	}
	l = openLog(t, mem, "/data/i-0", cfg, clk)
	defer l.Close()
	if n := len(readAll(t, l, 0)); n != 100 {
		t.Fatalf("read %d batches back, want 100", n)
	}
}

// dirFiles lists the names in dir with the given suffix.
func dirFiles(t *testing.T, fsys vfs.FS, dir, suffix string) []string {
	t.Helper()
	names, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, suffix) {
			out = append(out, n)
		}
	}
	return out
}

// TestLogFileDeleteDelay checks that segments deleted by retention are renamed .deleted and removed only
// once file.delete.delay.ms has passed, that a reader which opened one before keeps reading it, and that
// Open removes any left by a crash.
func TestLogFileDeleteDelay(t *testing.T) {
	mem := newMem(t)
	clk := newClock()
	cfg := testConfig()
	cfg.SegmentBytes = 1024
	cfg.RetentionAge = -1
	cfg.RetentionBytes = 2048
	cfg.FileDeleteDelay = time.Minute
	dir := "/data/d-0"
	l := openLog(t, mem, dir, cfg, clk)
	appendDurable(t, l, 30)
	first := l.Segments()[0]
	held, err := mem.Open(first.Path) // a reader of the segment, as a fetch that opened it is
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	want := make([]byte, first.Size)
	if _, err := held.ReadAt(want, 0); err != nil {
		t.Fatal(err)
	}
	if err := l.Maintain(); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() == 0 {
		t.Fatal("retention deleted nothing")
	}
	deleted := dirFiles(t, mem, dir, deletedSuffix)
	if !slices.Contains(deleted, filepath.Base(first.Path)+deletedSuffix) {
		t.Fatalf("deleted files %v, want the first segment's among them", deleted)
	}
	if _, err := mem.Stat(first.Path); !vfs.IsNotExist(err) {
		t.Fatalf("the deleted segment is still under its name: %v", err)
	}
	got := make([]byte, first.Size)
	if _, err := held.ReadAt(got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("a reader of the deleted segment read %v", err)
	}
	if _, err := l.Read(0, 1<<20, 1<<62); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Read below the new start: %v", err)
	}
	clk.now = clk.now.Add(59 * time.Second)
	if err := l.Maintain(); err != nil {
		t.Fatal(err)
	}
	if n := len(dirFiles(t, mem, dir, deletedSuffix)); n != len(deleted) {
		t.Fatalf("%d .deleted files before the delay, want %d", n, len(deleted))
	}
	clk.now = clk.now.Add(time.Second)
	if err := l.Maintain(); err != nil {
		t.Fatal(err)
	}
	if left := dirFiles(t, mem, dir, deletedSuffix); len(left) != 0 {
		t.Fatalf(".deleted files left after the delay: %v", left)
	}
	// A deletion the process did not live to finish is finished by Open.
	appendDurable(t, l, 30)
	if err := l.Maintain(); err != nil {
		t.Fatal(err)
	}
	if len(dirFiles(t, mem, dir, deletedSuffix)) == 0 {
		t.Fatal("the second retention left no .deleted file")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, mem, dir, cfg, clk)
	defer l.Close()
	if left := dirFiles(t, mem, dir, deletedSuffix); len(left) != 0 {
		t.Fatalf("Open left .deleted files: %v", left)
	}
	readAll(t, l, l.StartOffset())
}

// allocFS records every Allocate asked of the files it creates.
type allocFS struct {
	vfs.FS
	mu    sync.Mutex
	sizes map[string]int64
}

type allocFile struct {
	vfs.File
	fs *allocFS
}

func (a *allocFS) Create(name string) (vfs.File, error) {
	f, err := a.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return &allocFile{File: f, fs: a}, nil
}

func (f *allocFile) Allocate(size int64) error {
	f.fs.mu.Lock()
	f.fs.sizes[filepath.Base(f.Name())] = size
	f.fs.mu.Unlock()
	return f.File.Allocate(size)
}

// TestLogPreallocate checks that with preallocate every segment file the log creates gets segment.bytes
// reserved, while sizes (and so reads and recovery) see only the bytes written; without it none does.
func TestLogPreallocate(t *testing.T) {
	for _, pre := range []bool{true, false} {
		fsys := &allocFS{FS: newMem(t), sizes: map[string]int64{}}
		cfg := testConfig()
		cfg.SegmentBytes = 2048
		cfg.Preallocate = pre
		l := openLog(t, fsys, "/data/a-0", cfg, newClock())
		appendDurable(t, l, 30)
		segs := l.Segments()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		for _, s := range segs {
			name := filepath.Base(s.Path)
			if s.BaseOffset > 0 {
				name = spareName // a rolled-to segment is created as the spare
			}
			if got := fsys.sizes[name]; pre && got != cfg.SegmentBytes || !pre && got != 0 {
				t.Fatalf("preallocate=%v: %s allocated %d", pre, name, got)
			}
			st, err := fsys.Stat(s.Path)
			if err != nil || st.Size() != s.Size {
				t.Fatalf("preallocate=%v: %s has size %v (%v), want %d", pre, s.Path, st.Size(), err, s.Size)
			}
		}
		if len(segs) < 3 {
			t.Fatalf("%d segments, the test wants rolls", len(segs))
		}
	}
}

// TestLogRecoverPreallocatedZeroTail checks that a segment file with a zero tail, as Kafka's preallocate
// leaves after a crash (the file has segment.bytes and the batches end before), recovers to its batches:
// the zeros are cut, and appends go on after the last batch.
func TestLogRecoverPreallocatedZeroTail(t *testing.T) {
	prefix := prefixBatches()
	l := recoverWithTail(t, prefix, make([]byte, 4096-len(prefix)))
	if got := l.Recovery().TruncatedBytes; got != int64(4096-len(prefix)) {
		t.Fatalf("cut %d bytes, want the %d zero bytes", got, 4096-len(prefix))
	}
	if l.EndOffset() != 6 {
		t.Fatalf("end %d, want 6", l.EndOffset())
	}
	res, err := l.Append(recordtest.Batch(recordtest.Spec{Records: 2, ValueBytes: 5, Timestamp: 50, LeaderEpoch: 2}), 2)
	if err != nil || res.FirstOffset != 6 {
		t.Fatalf("append after the cut: %+v, %v", res, err)
	}
	if err := l.WaitDurable(context.Background(), 8); err != nil {
		t.Fatal(err)
	}
	if n := len(readAll(t, l, 0)); n != 4 {
		t.Fatalf("read %d batches, want 4", n)
	}
}
