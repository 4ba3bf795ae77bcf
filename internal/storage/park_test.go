package storage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/weir-mq/weir/internal/vfs"
)

func openFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(fds)
}

// TestLogIdleLogsHoldNoFiles: a log that nothing wrote or read since the previous Maintain, and whose data is
// all durable, closes its active segment's file, so a node with many idle partitions holds descriptors only
// for those in use; the next append or read opens it again, and a log closed while parked reopens clean.
func TestLogIdleLogsHoldNoFiles(t *testing.T) {
	const logs = 200
	dir := t.TempDir()
	syncer := NewSyncer()
	defer syncer.Close()
	ls := make([]*Log, logs)
	for i := range ls {
		l, err := Open(filepath.Join(dir, fmt.Sprintf("t-%d", i)), testConfig(), Options{FS: vfs.OS, Clock: newClock(), Syncer: syncer, Logger: quietLogFn})
		if err != nil {
			t.Fatal(err)
		}
		ls[i] = l
		res, err := l.Append(batch(2, 100, 1), 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.WaitDurable(context.Background(), res.LastOffset+1); err != nil {
			t.Fatal(err)
		}
	}
	busy := openFDs(t)
	for range 2 { // the first call finds each log used by its append, the second finds it idle
		for _, l := range ls {
			if err := l.Maintain(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if idle := openFDs(t); busy-idle < logs {
		t.Fatalf("%d descriptors open with %d logs busy, %d once idle: want at least %d fewer", busy, logs, idle, logs)
	}
	for _, l := range ls[:10] {
		if _, err := l.Read(0, 1<<20, 1<<62); err != nil {
			t.Fatalf("read of a parked log: %v", err)
		}
		res, err := l.Append(batch(2, 100, 1), 0)
		if err != nil {
			t.Fatalf("append to a parked log: %v", err)
		}
		if err := l.WaitDurable(context.Background(), res.LastOffset+1); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, l, 0); len(got) != 2 {
			t.Fatalf("%d batches after the append to a parked log, want 2", len(got))
		}
	}
	for i, l := range ls {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l, err := Open(l.Dir(), testConfig(), Options{FS: vfs.OS, Clock: newClock(), Syncer: syncer, Logger: quietLogFn})
		if err != nil {
			t.Fatal(err)
		}
		want := int64(2)
		if i < 10 {
			want = 4
		}
		if l.EndOffset() != want {
			t.Fatalf("log %d reopened with end %d, want %d", i, l.EndOffset(), want)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
