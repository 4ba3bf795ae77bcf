package storage

import (
	"sync"
	"testing"

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

func (f *writeBackFile) WriteBack(off, n int64) {
	f.fs.mu.Lock()
	f.fs.calls = append(f.fs.calls, [2]int64{off, n})
	f.fs.mu.Unlock()
}

// TestLogWritesBackUnsyncedAppends checks that a log not synced on every append asks for each
// writeBackBytes of its active segment to be written back, in order and without gaps, and that a log synced
// on every append never does.
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
			defer l.Close()
			b := batch(64, 1000, 1)
			for range (10 << 20) / len(b) {
				if _, err := l.Append(b, 0); err != nil {
					t.Fatal(err)
				}
			}
			size := l.view.Load().actSize
			fsys.mu.Lock()
			defer fsys.mu.Unlock()
			if !tc.want {
				if len(fsys.calls) != 0 {
					t.Fatalf("WriteBack called %d times under %v", len(fsys.calls), tc.flush)
				}
				return
			}
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
