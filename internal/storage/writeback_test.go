package storage

import (
	"sync"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/vfs"
)

// writeBackFS records every WriteBack asked of the files it opens for appending.
type writeBackFS struct {
	vfs.FS
	mu    sync.Mutex
	calls [][2]int64
}

type writeBackFile struct {
	vfs.File
	fs *writeBackFS
}

func (w *writeBackFS) Create(name string) (vfs.File, error) {
	f, err := w.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return &writeBackFile{File: f, fs: w}, nil
}

func (w *writeBackFS) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.calls)
}

// covered is where the last range asked for ends.
func (w *writeBackFS) covered() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.calls) == 0 {
		return 0
	}
	c := w.calls[len(w.calls)-1]
	return c[0] + c[1]
}

func (f *writeBackFile) WriteBack(off, n int64) {
	f.fs.mu.Lock()
	f.fs.calls = append(f.fs.calls, [2]int64{off, n})
	f.fs.mu.Unlock()
}

// TestLogWritesBackUnsyncedAppends checks that a log not synced on every append has each writeBackBytes
// of its active segment written back, in order and without gaps, and that a log synced on every append
// never does.
func TestLogWritesBackUnsyncedAppends(t *testing.T) {
	for _, tc := range []struct {
		flush FlushPolicy
		want  bool
	}{{FlushNever, true}, {FlushInterval, true}, {FlushAlways, false}} {
		t.Run(tc.flush.String(), func(t *testing.T) {
			fsys := &writeBackFS{FS: newMem(t)}
			cfg := testConfig()
			cfg.SegmentBytes = 64 << 20
			cfg.Flush = tc.flush
			l := openLog(t, fsys, "/data/p", cfg, newClock())
			b := batch(64, 1000, 1)
			for range (10 << 20) / len(b) {
				if _, err := l.Append(b, 0); err != nil {
					t.Fatal(err)
				}
			}
			size := l.view.Load().actSize
			if !tc.want {
				if err := l.Close(); err != nil { // stops the log's own Syncer, writeback goroutine included
					t.Fatal(err)
				}
				if n := fsys.count(); n != 0 {
					t.Fatalf("WriteBack called %d times under %v", n, tc.flush)
				}
				return
			}
			defer l.Close()
			// the Syncer's goroutine writes back: wait for it to cover all but the last partial range
			deadline := time.Now().Add(10 * time.Second)
			for fsys.covered() <= size-writeBackBytes && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			fsys.mu.Lock()
			defer fsys.mu.Unlock()
			next := int64(0)
			for _, c := range fsys.calls {
				if c[0] != next || c[1] < writeBackBytes {
					t.Fatalf("WriteBack(%d, %d) after %d bytes asked for: want a range of at least %d at %d",
						c[0], c[1], next, writeBackBytes, next)
				}
				next = c[0] + c[1]
			}
			if next > size || size-next >= writeBackBytes {
				t.Fatalf("writeback asked up to %d of %d bytes (%d calls)", next, size, len(fsys.calls))
			}
		})
	}
}
