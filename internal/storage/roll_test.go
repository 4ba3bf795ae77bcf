package storage

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/vfs"
)

// rollWait bounds how long a test waits for something that must happen while a roll's I/O is held.
const rollWait = 10 * time.Second

// holdOp makes the first operation op on a path containing sub (once armed) block until released, and says
// when it is blocked.
type holdOp struct {
	op      vfs.Op
	sub     string
	armed   atomic.Bool
	held    chan struct{}
	release chan struct{}
}

func newHoldOp(op vfs.Op, sub string) *holdOp {
	return &holdOp{op: op, sub: sub, held: make(chan struct{}), release: make(chan struct{})}
}

func (h *holdOp) Inject(op vfs.Op, path string) error {
	if op == h.op && strings.Contains(path, h.sub) && h.armed.CompareAndSwap(true, false) {
		close(h.held)
		<-h.release
	}
	return nil
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(rollWait):
		t.Fatalf("%s did not happen within %v", what, rollWait)
	}
}

// fillToRoll appends batches until the next one rolls the segment, waits for the background jobs of those
// appends, and returns that next batch.
func fillToRoll(t *testing.T, l *Log) []byte {
	t.Helper()
	next := batch(2, 100, 1)
	for l.view.Load().actSize+int64(len(next)) <= l.Config().SegmentBytes {
		if _, err := l.Append(batch(2, 100, 1), max(l.LatestEpoch(), 0)); err != nil {
			t.Fatal(err)
		}
	}
	l.settle()
	return next
}

// TestLogRollIOOffTheLock holds, one at a time, each slow operation of a roll (the closed segment's
// fdatasync, an index file's fsync, the directory sync, the leader epoch checkpoint's fsync) and checks that
// appends, reads and the offset getters go on meanwhile, and that no offset past the closed segment is
// reported durable before that segment is synced and its successor's name is durable.
func TestLogRollIOOffTheLock(t *testing.T) {
	for _, tt := range []struct {
		name   string
		op     vfs.Op
		sub    string
		epoch  int32
		gating bool // the durable point waits for the held operation
	}{
		{"closed segment fdatasync", vfs.OpSync, segmentName(0) + logSuffix, 0, true},
		{"directory sync", vfs.OpSyncDir, "/data/f-0", 0, true},
		{"offset index fsync", vfs.OpSync, indexSuffix + tmpSuffix, 0, false},
		{"epoch checkpoint fsync", vfs.OpSync, epochCheckpointName, 1, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hold := newHoldOp(tt.op, tt.sub)
			cfg := testConfig()
			cfg.Flush = FlushNever // nothing syncs the closed segment before the roll does
			mem := newMem(t)
			l, err := Open("/data/f-0", cfg, Options{FS: vfs.NewFaulty(mem, hold), Clock: newClock(), Logger: quietLogFn})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			next := fillToRoll(t, l)
			closedEnd := l.EndOffset()
			hold.armed.Store(true)
			rolled := make(chan struct{})
			go func() {
				defer close(rolled)
				if _, err := l.Append(next, tt.epoch); err != nil {
					t.Error(err)
				}
			}()
			waitFor(t, hold.held, "the held operation")
			waitFor(t, rolled, "the rolling append's return")
			done := make(chan struct{})
			go func() {
				defer close(done)
				res, err := l.Append(batch(1, 10, 2), tt.epoch)
				if err != nil {
					t.Error(err)
					return
				}
				if got := readAll(t, l, 0); got[len(got)-1].LastOffset() != res.LastOffset {
					t.Errorf("read ends at %d, want %d", got[len(got)-1].LastOffset(), res.LastOffset)
				}
				if e, _ := l.EndOffsetForEpoch(tt.epoch); e != tt.epoch {
					t.Errorf("EndOffsetForEpoch(%d) found epoch %d", tt.epoch, e)
				}
			}()
			waitFor(t, done, "an append and a read during the held "+tt.name)
			if tt.gating {
				if d := l.DurableEndOffset(); d > closedEnd {
					t.Fatalf("durable end %d past the closed segment's end %d before it is synced", d, closedEnd)
				}
			}
			close(hold.release)
			l.settle()
			if len(l.Segments()) != 2 || l.Err() != nil {
				t.Fatalf("%d segments, err %v after the roll", len(l.Segments()), l.Err())
			}
			if d := l.DurableEndOffset(); d < closedEnd {
				t.Fatalf("durable end %d below the closed segment's end %d once it is synced", d, closedEnd)
			}
		})
	}
}

// TestLogRollJobFailureTakesLogOffline fails each operation of a roll's background job and checks that the
// log goes offline as a failure under its lock would, that waiters get the error, and that a reopen keeps
// every acknowledged offset.
func TestLogRollJobFailureTakesLogOffline(t *testing.T) {
	for _, tt := range []struct {
		name string
		op   vfs.Op
		sub  string
	}{
		{"closed segment fdatasync", vfs.OpSync, segmentName(0) + logSuffix},
		{"rename of the new segment", vfs.OpRename, spareName},
		{"directory sync", vfs.OpSyncDir, "/data/f-0"},
		{"index write", vfs.OpWrite, indexSuffix + tmpSuffix},
		{"time index fsync", vfs.OpSync, timeIndexSuffix + tmpSuffix},
		{"epoch checkpoint write", vfs.OpWrite, epochCheckpointName},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mem := vfs.NewMem()
			cfg := testConfig()
			cfg.Flush = FlushNever
			if err := mem.MkdirAll("/data"); err != nil {
				t.Fatal(err)
			}
			mem.SyncAll()
			tog := vfs.NewToggle(vfs.OnOp(tt.op, tt.sub, syscall.EIO))
			l, err := Open("/data/f-0", cfg, Options{FS: vfs.NewFaulty(mem, tog), Clock: newClock(), Logger: quietLogFn})
			if err != nil {
				t.Fatal(err)
			}
			next := fillToRoll(t, l)
			if err := l.Truncate(l.EndOffset()); err != nil { // nothing to cut: only waits
				t.Fatal(err)
			}
			tog.Enable()
			if _, err := l.Append(next, 1); err != nil {
				t.Fatalf("the rolling append: %v", err)
			}
			l.settle()
			if !errors.Is(l.Err(), ErrLogOffline) || !errors.Is(l.Err(), syscall.EIO) {
				t.Fatalf("Err after a failed %s: %v", tt.name, l.Err())
			}
			if err := l.WaitDurable(context.Background(), l.EndOffset()); !errors.Is(err, ErrLogOffline) {
				t.Fatalf("WaitDurable: %v", err)
			}
			if _, err := l.Append(batch(1, 10, 1), 1); !errors.Is(err, ErrLogOffline) {
				t.Fatalf("Append on an offline log: %v", err)
			}
			acked := l.DurableEndOffset()
			_ = l.Close()
			tog.Disable()
			reopenCheck(t, mem, acked)
		})
	}
}

// TestLogCrashAtEveryStepOfARoll takes crash images before every filesystem operation of a workload that
// rolls, changes leader epochs, saves recovery points and truncates, under each flush policy, and checks
// that each image reopens to a consistent log holding every offset that was durable when it was taken, and
// that its indexes answer reads and time lookups. With preallocate, each new segment's reservation
// (vfs.File.Allocate) is one more step to crash at.
func TestLogCrashAtEveryStepOfARoll(t *testing.T) {
	for _, tc := range []struct {
		policy      FlushPolicy
		preallocate bool
	}{{FlushAlways, false}, {FlushNever, false}, {FlushAlways, true}} {
		policy := tc.policy
		name := policy.String()
		if tc.preallocate {
			name += "/preallocate"
		}
		t.Run(name, func(t *testing.T) {
			mem := newMem(t)
			type image struct {
				mem     *vfs.Mem
				durable int64
			}
			var (
				mu     sync.Mutex
				images []image
				l      *Log
				on     atomic.Bool
				cut    atomic.Int64 // while a truncation runs, the offset it cuts to, which it may drop
			)
			cut.Store(math.MaxInt64)
			capture := vfs.InjectorFunc(func(vfs.Op, string) error {
				if !on.Load() {
					return nil
				}
				mu.Lock()
				defer mu.Unlock()
				durable := min(l.DurableEndOffset(), cut.Load()) // before the image: what it must hold at least
				for _, p := range []float64{0, 0.5, 1} {
					c := mem.CrashClone(rand.New(rand.NewPCG(uint64(len(images)), 7)), vfs.CrashOptions{KeepUnsyncedProbability: p})
					images = append(images, image{c, durable})
				}
				return nil
			})
			cfg := testConfig()
			cfg.Flush = policy
			cfg.Preallocate = tc.preallocate
			// no retention: a crash between its removals of two segments can bring the older one back
			cfg.RetentionAge = -1
			var err error
			l, err = Open("/data/f-0", cfg, Options{FS: vfs.NewFaulty(mem, capture), Clock: newClock(), Logger: quietLogFn})
			if err != nil {
				t.Fatal(err)
			}
			on.Store(true)
			for i := range 60 {
				res, err := l.Append(batch(1+i%3, 150, int64(i)), int32(i/20))
				if err != nil {
					t.Fatal(err)
				}
				if policy == FlushAlways && i%2 == 0 {
					if err := l.WaitDurable(context.Background(), res.LastOffset+1); err != nil {
						t.Fatal(err)
					}
				}
				switch i % 20 {
				case 9:
					if err := l.Maintain(); err != nil {
						t.Fatal(err)
					}
				case 17:
					cut.Store(res.FirstOffset)
					if err := l.Truncate(res.FirstOffset); err != nil {
						t.Fatal(err)
					}
					cut.Store(math.MaxInt64)
				}
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			on.Store(false)
			if len(images) < 300 {
				t.Fatalf("only %d crash images", len(images))
			}
			for _, im := range images {
				r, err := Open("/data/f-0", cfg, Options{FS: im.mem, Clock: newClock(), Logger: quietLogFn})
				if err != nil {
					t.Fatalf("reopen: %v", err)
				}
				if r.EndOffset() < im.durable {
					t.Fatalf("reopened end %d below the durable end %d", r.EndOffset(), im.durable)
				}
				hs := readAll(t, r, r.StartOffset())
				next := r.StartOffset()
				for _, h := range hs {
					if h.BaseOffset != next {
						t.Fatalf("reopened log has a batch at %d after one ending at %d", h.BaseOffset, next)
					}
					next = h.NextOffset()
					if off, ok, err := r.OffsetForTime(h.MaxTimestamp); err != nil || !ok || off > h.LastOffset() {
						t.Fatalf("OffsetForTime(%d) = %d, %v, %v; the batch ends at %d", h.MaxTimestamp, off, ok, err, h.LastOffset())
					}
				}
				if next != r.EndOffset() {
					t.Fatalf("batches end at %d, the end offset is %d", next, r.EndOffset())
				}
				_ = r.Close()
			}
		})
	}
}

// TestLogRecoverRebuildsIndexFiles: a closed segment whose index files a crash lost, or left short, is
// indexed again from its batches on open.
func TestLogRecoverRebuildsIndexFiles(t *testing.T) {
	mem := newMem(t)
	cfg := testConfig()
	l := openLog(t, mem, "/data/i-0", cfg, newClock())
	for i := range 40 {
		if _, err := l.Append(batch(2, 100, int64(100+i)), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	first := filepath.Join("/data/i-0", segmentName(0))
	if err := mem.Remove(first + indexSuffix); err != nil {
		t.Fatal(err)
	}
	f, err := mem.OpenAppend(first + timeIndexSuffix)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(timeEntrySize - 1); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	r := openLog(t, mem, "/data/i-0", cfg, newClock())
	defer r.Close()
	for _, p := range []string{first + indexSuffix, first + timeIndexSuffix} {
		if st, err := mem.Stat(p); err != nil || st.Size() == 0 {
			t.Fatalf("%s not rebuilt: %v", p, err)
		}
	}
	hs := readAll(t, r, 0)
	for _, h := range hs {
		if off, ok, err := r.OffsetForTime(h.MaxTimestamp); err != nil || !ok || off < h.BaseOffset || off > h.LastOffset() {
			t.Fatalf("OffsetForTime(%d) = %d, %v, %v; want within [%d, %d]", h.MaxTimestamp, off, ok, err, h.BaseOffset, h.LastOffset())
		}
	}
}

// TestLogChangesRacingARollJob runs truncation, retention, DeleteRecords, compaction swaps, Maintain and
// Close against rolls whose background I/O is slowed down, with readers running throughout: each change
// waits for the job it would race, and every read returns whole, valid batches.
func TestLogChangesRacingARollJob(t *testing.T) {
	for range *raceRuns {
		slow := vfs.InjectorFunc(func(op vfs.Op, path string) error {
			if op == vfs.OpSync || op == vfs.OpSyncDir {
				time.Sleep(50 * time.Microsecond)
			}
			return nil
		})
		cfg := testConfig()
		cfg.Delete, cfg.RetentionBytes = true, 24<<10
		mem := newMem(t)
		syncer := NewSyncer()
		l, err := Open("/data/j-0", cfg, Options{FS: vfs.NewFaulty(mem, slow), Clock: newClock(), Logger: quietLogFn, Syncer: syncer})
		if err != nil {
			t.Fatal(err)
		}
		stop, errs := make(chan struct{}), make(chan error, 8)
		wg := raceReaders(l, 4, stop, errs)
		for i := range 300 {
			res, err := l.Append(batch(4, 100, int64(i)), int32(i/100))
			if err != nil {
				t.Fatal(err)
			}
			switch i % 10 {
			case 3:
				if err := l.Truncate(res.FirstOffset); err != nil {
					t.Fatal(err)
				}
			case 5:
				if err := l.Maintain(); err != nil {
					t.Fatal(err)
				}
			case 7:
				if err := l.AdvanceStart(l.StartOffset() + 1); err != nil {
					t.Fatal(err)
				}
			case 9:
				if segs := l.Segments(); len(segs) > 1 {
					kept := mustRead(t, l, segs[0].NextOffset-1)
					if err := l.ReplaceSegment(segs[0].BaseOffset, kept); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		if _, err := l.Append(fillToRoll(t, l), 3); err != nil {
			t.Fatal(err)
		}
		end := l.EndOffset()
		collect(t, wg, stop, errs, "a change waiting for a roll's job")
		if err := l.Close(); err != nil { // with the last roll's job likely still running
			t.Fatal(err)
		}
		syncer.Close()
		r := openLog(t, mem, "/data/j-0", cfg, newClock())
		if r.Recovery().Unclean || r.EndOffset() != end {
			t.Fatalf("reopened: %+v, end %d, want a clean log ending at %d", r.Recovery(), r.EndOffset(), end)
		}
		readAll(t, r, r.StartOffset())
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLogAppendChecked appends batches record.Check validated: stamped as by Append, with the same errors.
func TestLogAppendChecked(t *testing.T) {
	cfg := testConfig()
	cfg.MaxBatchBytes = 500
	l := openLog(t, newMem(t), "/data/a-0", cfg, newClock())
	defer l.Close()
	c, err := record.Check(batch(3, 10, 1))
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.AppendChecked(c, 2)
	if err != nil || res.FirstOffset != 0 || res.LastOffset != 2 || res.Bytes != len(c.Bytes) {
		t.Fatalf("AppendChecked = %+v, %v", res, err)
	}
	if res, err = l.AppendChecked(c, 2); err != nil || res.FirstOffset != 3 {
		t.Fatalf("second AppendChecked = %+v, %v", res, err)
	}
	hs := readAll(t, l, 0)
	if len(hs) != 2 || hs[1].BaseOffset != 3 || hs[1].PartitionLeaderEpoch != 2 {
		t.Fatalf("read back %+v", hs)
	}
	if _, err := l.AppendChecked(c, 1); !errors.Is(err, ErrStaleLeaderEpoch) {
		t.Fatalf("stale epoch: %v", err)
	}
	big, err := record.Check(batch(1, 600, 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendChecked(big, 2); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("too large: %v", err)
	}
	if _, err := l.AppendChecked(record.Checked{}, 2); !errors.Is(err, record.ErrCorrupt) {
		t.Fatalf("an empty Checked: %v", err)
	}
	cfg.LogAppendTime = true
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if c, err = record.Check(batch(1, 10, 1)); err != nil {
		t.Fatal(err)
	}
	res, err = l.AppendChecked(c, 2)
	if err != nil || res.LogAppendTime < 0 {
		t.Fatalf("AppendChecked under LogAppendTime = %+v, %v", res, err)
	}
	b := mustRead(t, l, res.FirstOffset)
	if h, err := record.Validate(b); err != nil || !h.LogAppendTime() || h.MaxTimestamp != res.LogAppendTime {
		t.Fatalf("stamped batch %+v, %v", h, err)
	}
}

// TestLogCrashBeforeRollIndexesAfterCleanReopen: the index files Close wrote for the active segment must not
// outlive the next Open, or a crash after that segment rolls, before its job rewrites them, would leave a
// closed segment indexed only up to where it stood at Close (OffsetForTime would miss its later batches).
func TestLogCrashBeforeRollIndexesAfterCleanReopen(t *testing.T) {
	mem := newMem(t)
	cfg := testConfig()
	l := openLog(t, mem, "/data/x-0", cfg, newClock())
	for i := range 3 {
		if _, err := l.Append(batch(2, 100, int64(10+i)), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	hold := newHoldOp(vfs.OpSync, indexSuffix+tmpSuffix)
	l, err := Open("/data/x-0", cfg, Options{FS: vfs.NewFaulty(mem, hold), Clock: newClock(), Logger: quietLogFn})
	if err != nil {
		t.Fatal(err)
	}
	next := batch(2, 100, 1000)
	for ts := int64(20); l.view.Load().actSize+int64(len(next)) <= cfg.SegmentBytes; ts++ {
		if _, err := l.Append(batch(2, 100, ts), 0); err != nil {
			t.Fatal(err)
		}
	}
	last := readAll(t, l, 0)
	lastTs := last[len(last)-1].MaxTimestamp
	hold.armed.Store(true)
	res, err := l.Append(next, 0)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, hold.held, "the roll's index write")
	if err := l.WaitDurable(context.Background(), res.LastOffset+1); err != nil {
		t.Fatal(err)
	}
	crashed := mem.CrashClone(rand.New(rand.NewPCG(1, 1)), vfs.CrashOptions{})
	close(hold.release)
	_ = l.Close()
	r := openLog(t, crashed, "/data/x-0", cfg, newClock())
	defer r.Close()
	if off, ok, err := r.OffsetForTime(lastTs); err != nil || !ok || off != last[len(last)-1].LastOffset() {
		t.Fatalf("OffsetForTime(%d) = %d, %v, %v; want %d", lastTs, off, ok, err, last[len(last)-1].LastOffset())
	}
}
