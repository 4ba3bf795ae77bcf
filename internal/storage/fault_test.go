package storage

import (
	"context"
	"errors"
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/weir-mq/weir/internal/vfs"
)

// faultyLog opens a log on a faulty view of mem whose faults start when the returned toggle is enabled.
func faultyLog(t *testing.T, mem *vfs.Mem, inj vfs.Injector) (*Log, *vfs.Toggle) {
	t.Helper()
	if err := mem.MkdirAll("/data"); err != nil {
		t.Fatal(err)
	}
	mem.SyncAll()
	tog := vfs.NewToggle(inj)
	l, err := Open("/data/f-0", testConfig(), Options{FS: vfs.NewFaulty(mem, tog), Clock: newClock(), Logger: quietLogFn})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l, tog
}

func appendDurable(t *testing.T, l *Log, n int) int64 {
	t.Helper()
	for range n {
		res, err := l.Append(batch(2, 100, 1), max(l.LatestEpoch(), 0))
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
		if err := l.WaitDurable(context.Background(), res.LastOffset+1); err != nil {
			t.Fatalf("WaitDurable: %v", err)
		}
	}
	return l.EndOffset()
}

// reopenCheck opens the log on a crash image keeping only synced data and checks it holds [0, acked) intact.
func reopenCheck(t *testing.T, mem *vfs.Mem, acked int64) *Log {
	t.Helper()
	l, err := Open("/data/f-0", testConfig(), Options{FS: mem.CrashClone(rand.New(rand.NewPCG(7, 7)), vfs.CrashOptions{}), Clock: newClock(), Logger: quietLogFn})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	if l.EndOffset() < acked {
		t.Fatalf("reopened end %d below acknowledged %d", l.EndOffset(), acked)
	}
	hs := readAll(t, l, l.StartOffset())
	next := l.StartOffset()
	for _, h := range hs {
		if h.BaseOffset > next {
			t.Fatalf("reopened log skips offsets [%d, %d)", next, h.BaseOffset)
		}
		next = max(next, h.NextOffset())
	}
	if next != l.EndOffset() {
		t.Fatalf("reopened log's batches end at %d, its end offset is %d", next, l.EndOffset())
	}
	return l
}

func TestLogFaultFsyncFailureTakesLogOffline(t *testing.T) {
	mem := vfs.NewMem()
	l, tog := faultyLog(t, mem, vfs.OnOp(vfs.OpSync, ".log", syscall.EIO))
	acked := appendDurable(t, l, 5)
	tog.Enable()
	res, err := l.Append(batch(1, 10, 1), 0)
	if err != nil {
		t.Fatalf("Append before the failing sync: %v", err)
	}
	err = l.WaitDurable(context.Background(), res.LastOffset+1)
	if !errors.Is(err, ErrLogOffline) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("WaitDurable after failed fsync: %v", err)
	}
	tog.Disable()
	if err := l.WaitDurable(context.Background(), res.LastOffset+1); !errors.Is(err, ErrLogOffline) {
		t.Fatalf("WaitDurable retried after a failed fsync: %v", err)
	}
	if _, err := l.Append(batch(1, 10, 1), 0); !errors.Is(err, ErrLogOffline) {
		t.Fatalf("Append on an offline log: %v", err)
	}
	if !errors.Is(l.Err(), ErrLogOffline) || l.DurableEndOffset() != acked {
		t.Fatalf("Err %v, durable %d want %d", l.Err(), l.DurableEndOffset(), acked)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close offline log: %v", err)
	}
	reopenCheck(t, mem, acked)
}

func TestLogFaultShortWriteLeavesNoTornBatch(t *testing.T) {
	mem := vfs.NewMem()
	l, tog := faultyLog(t, mem, vfs.OnOp(vfs.OpWrite, ".log", &vfs.ShortWrite{N: 30, Err: syscall.EIO}))
	acked := appendDurable(t, l, 3)
	tog.Enable()
	if _, err := l.Append(batch(1, 500, 1), 0); !errors.Is(err, ErrLogOffline) {
		t.Fatalf("Append with a short write: %v", err)
	}
	if l.EndOffset() != acked {
		t.Fatalf("end moved to %d after a failed write", l.EndOffset())
	}
	_ = l.Close()
	// Process crash with the page cache intact: the torn bytes, if any survived, must be cut by recovery.
	r, err := Open("/data/f-0", testConfig(), Options{FS: mem.CrashClone(rand.New(rand.NewPCG(7, 7)), vfs.CrashOptions{KeepUnsyncedProbability: 1}), Logger: quietLogFn})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer r.Close()
	if r.EndOffset() != acked {
		t.Fatalf("reopened end %d, want %d", r.EndOffset(), acked)
	}
	readAll(t, r, 0)
}

func TestLogFaultDiskFullThenFreed(t *testing.T) {
	mem := vfs.NewMem()
	l, tog := faultyLog(t, mem, vfs.OnOp(vfs.OpWrite, "", syscall.ENOSPC))
	acked := appendDurable(t, l, 4)
	tog.Enable()
	_, err := l.Append(batch(1, 100, 1), 0)
	if !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, ErrLogOffline) {
		t.Fatalf("Append on a full disk: %v", err)
	}
	_ = l.Close()
	tog.Disable()
	r := reopenCheck(t, mem, acked)
	if r.EndOffset() != acked {
		t.Fatalf("end %d, want %d", r.EndOffset(), acked)
	}
	appendDurable(t, r, 2)
}

// TestLogFaultEveryOperation fails each filesystem operation the log performs, one at a time, during a
// workload with rolls, truncation, retention and close, and checks that acknowledged data survives a
// crash and that a reopened log works.
func TestLogFaultEveryOperation(t *testing.T) {
	for _, op := range []vfs.Op{vfs.OpWrite, vfs.OpSync, vfs.OpSyncDir, vfs.OpCreate, vfs.OpRename, vfs.OpRemove, vfs.OpTruncate} {
		for nth := 1; nth <= 12; nth += 3 {
			t.Run(op.String(), func(t *testing.T) {
				mem := vfs.NewMem()
				l, tog := faultyLog(t, mem, vfs.OnNth(nth, op, "", syscall.EIO))
				tog.Enable()
				acked := faultWorkload(l)
				_ = l.Close()
				r := reopenCheck(t, mem, acked)
				appendDurable(t, r, 1)
			})
		}
	}
}

// faultWorkload runs until the first error and returns the acknowledged end offset.
func faultWorkload(l *Log) int64 {
	acked := int64(0)
	for i := range 40 {
		res, err := l.Append(batch(1+i%4, 200, int64(i)), int32(i/10))
		if err != nil {
			return acked
		}
		if err := l.WaitDurable(context.Background(), res.LastOffset+1); err != nil {
			return acked
		}
		acked = res.LastOffset + 1
		switch i % 10 {
		case 5:
			if l.Truncate(acked-1) != nil {
				return res.FirstOffset // a truncation that failed may have cut the log first
			}
			acked = min(acked, l.EndOffset())
		case 7:
			if l.Maintain() != nil {
				return acked
			}
		}
	}
	return acked
}
