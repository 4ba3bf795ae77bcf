package partition

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/weir-mq/weir/internal/vfs"
)

// ErrDirFailed is what a Manager reports through ManagerOptions.OnDirFailure, wrapping the failed
// filesystem operation: a write, fsync, truncation or directory change in the data directory failed,
// so the log that did it is offline (storage.ErrLogOffline) and the directory is not to be trusted.
var ErrDirFailed = errors.New("partition: data directory failed")

// dirWatch is the Manager's filesystem: it passes every call to the real one and reports the first
// failure of an operation that changes the disk (Kafka's log directory failure). Reads are not
// watched: a failed read is an error for its reader, and storage takes no log offline for it. A
// missing file or directory is an answer, not a failure.
type dirWatch struct {
	inner  vfs.FS
	report func(error)
	once   sync.Once
	// failed counts every failure, not only the first, by the index of its operation in watchedOps.
	failed [len(watchedOps)]atomic.Uint64
	// outOfFiles counts the operations, opens included, that failed for want of a file descriptor.
	outOfFiles atomic.Uint64
}

// watchedOps names the operations a dirWatch watches, as Stats.FailedOps reports them.
var watchedOps = [...]string{"create", "remove", "removeall", "rename", "mkdirall", "syncdir", "write", "sync", "truncate"}

// watchDir wraps inner so that report is called once, with ErrDirFailed wrapping the cause, on the
// first failed write, fsync, truncation, create, rename, remove, mkdir or directory sync. report runs
// on the goroutine that saw the failure (often with a log's lock held): it must not block.
func watchDir(inner vfs.FS, report func(error)) vfs.FS {
	return &dirWatch{inner: inner, report: report}
}

// check reports err if it is a failure of a changing operation, and returns it unchanged.
func (w *dirWatch) check(op, path string, err error) error {
	if err == nil || vfs.IsNotExist(err) || w.countOutOfFiles(err) {
		return err
	}
	if i := slices.Index(watchedOps[:], op); i >= 0 {
		w.failed[i].Add(1)
	}
	w.once.Do(func() {
		if _, ok := errors.AsType[*fs.PathError](err); ok {
			w.report(fmt.Errorf("%w: %w", ErrDirFailed, err))
			return
		}
		w.report(fmt.Errorf("%w: %s %s: %w", ErrDirFailed, op, path, err))
	})
	return err
}

// countOutOfFiles counts and reports the errors of a process or system out of file descriptors (EMFILE,
// ENFILE): the disk is fine, the node is short of a resource, so the operation fails for its caller (a
// replica that cannot be opened is retried by the next reconciliation) but the directory is not reported
// as failed.
func (w *dirWatch) countOutOfFiles(err error) bool {
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		w.outOfFiles.Add(1)
		return true
	}
	return false
}

func (w *dirWatch) Create(name string) (vfs.File, error) {
	f, err := w.inner.Create(name)
	if err != nil {
		return nil, w.check("create", name, err)
	}
	return &watchedFile{File: f, w: w}, nil
}

func (w *dirWatch) OpenAppend(name string) (vfs.File, error) {
	f, err := w.inner.OpenAppend(name)
	if err != nil {
		w.countOutOfFiles(err)
		return nil, err
	}
	return &watchedFile{File: f, w: w}, nil
}

func (w *dirWatch) Open(name string) (vfs.File, error) {
	f, err := w.inner.Open(name)
	if err != nil {
		w.countOutOfFiles(err)
	}
	return f, err
}

func (w *dirWatch) Remove(name string) error {
	return w.check("remove", name, w.inner.Remove(name))
}

func (w *dirWatch) RemoveAll(name string) error {
	return w.check("removeall", name, w.inner.RemoveAll(name))
}

func (w *dirWatch) Rename(oldname, newname string) error {
	return w.check("rename", oldname, w.inner.Rename(oldname, newname))
}

func (w *dirWatch) MkdirAll(dir string) error {
	return w.check("mkdirall", dir, w.inner.MkdirAll(dir))
}

func (w *dirWatch) ReadDir(dir string) ([]string, error) { return w.inner.ReadDir(dir) }

func (w *dirWatch) Stat(name string) (fs.FileInfo, error) { return w.inner.Stat(name) }

func (w *dirWatch) SyncDir(dir string) error {
	return w.check("syncdir", dir, w.inner.SyncDir(dir))
}

// watchedFile is a file opened for writing through a dirWatch.
type watchedFile struct {
	vfs.File
	w *dirWatch
}

// SendTo leaves reads unwatched, as ReadAt does, and lets the OS file underneath use sendfile.
func (f *watchedFile) SendTo(w io.Writer, off, n int64) (int64, error) {
	return vfs.SendFile(w, f.File, off, n)
}

func (f *watchedFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	return n, f.w.check("write", f.Name(), err)
}

func (f *watchedFile) Sync() error {
	return f.w.check("sync", f.Name(), f.File.Sync())
}

func (f *watchedFile) Truncate(size int64) error {
	return f.w.check("truncate", f.Name(), f.File.Truncate(size))
}
