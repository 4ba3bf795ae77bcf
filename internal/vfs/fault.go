package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync/atomic"
)

// ErrInjected is the error the ready-made injectors return when they are given a nil error.
var ErrInjected = errors.New("vfs: injected fault")

// Op names one filesystem operation, as seen by an Injector.
type Op uint8

// The operations of FS and File that a faulty FS asks its Injector about.
const (
	OpCreate Op = iota + 1
	OpOpenAppend
	OpOpen
	OpRemove
	OpRemoveAll
	OpRename
	OpMkdirAll
	OpReadDir
	OpStat
	OpSyncDir
	OpWrite
	OpReadAt
	OpSync
	OpTruncate
	OpSize
	OpClose
	OpAllocate
)

var opNames = [...]string{
	OpCreate:     "create",
	OpOpenAppend: "openappend",
	OpOpen:       "open",
	OpRemove:     "remove",
	OpRemoveAll:  "removeall",
	OpRename:     "rename",
	OpMkdirAll:   "mkdirall",
	OpReadDir:    "readdir",
	OpStat:       "stat",
	OpSyncDir:    "syncdir",
	OpWrite:      "write",
	OpReadAt:     "readat",
	OpSync:       "sync",
	OpTruncate:   "truncate",
	OpSize:       "size",
	OpClose:      "close",
	OpAllocate:   "allocate",
}

// Ops lists every Op, in declaration order.
func Ops() []Op {
	ops := make([]Op, 0, len(opNames)-1)
	for op := OpCreate; int(op) < len(opNames); op++ {
		ops = append(ops, op)
	}
	return ops
}

// String returns the operation's lower-case name, which is also the Op of the *fs.PathError an injected
// fault comes wrapped in.
func (op Op) String() string {
	if op > 0 && int(op) < len(opNames) {
		return opNames[op]
	}
	return fmt.Sprintf("Op(%d)", uint8(op))
}

// Injector decides whether an operation fails. Inject is called before every operation of a faulty FS
// with the operation and its path (the old name for a rename, the name the file was opened with for a
// File method); a nil result lets the operation run. Injectors must be safe for concurrent use.
type Injector interface {
	Inject(op Op, path string) error
}

// InjectorFunc adapts a function to the Injector interface.
type InjectorFunc func(op Op, path string) error

// Inject calls f.
func (f InjectorFunc) Inject(op Op, path string) error { return f(op, path) }

// ShortWrite, returned by an Injector for OpWrite, makes the Write store the first N bytes of its
// buffer (at most all of it) and then fail with Err.
type ShortWrite struct {
	N   int
	Err error
}

func (e *ShortWrite) Error() string {
	return fmt.Sprintf("vfs: short write of %d bytes: %v", e.N, e.Unwrap())
}

// Unwrap returns Err, or io.ErrShortWrite when Err is nil.
func (e *ShortWrite) Unwrap() error {
	if e.Err == nil {
		return io.ErrShortWrite
	}
	return e.Err
}

// NewFaulty wraps inner so that inj is asked before every operation. An injected error is returned
// instead of running the operation, wrapped in an *fs.PathError (unless it already is one) so callers
// see the path; the operation then does nothing, with two exceptions: a Write whose error is (or
// wraps) a *ShortWrite writes that many bytes first, and a Close always closes the inner file, as
// close(2) releases the descriptor even when it reports an error.
// A nil inj injects nothing.
func NewFaulty(inner FS, inj Injector) FS {
	if inj == nil {
		inj = InjectorFunc(func(Op, string) error { return nil })
	}
	return &faultyFS{inner: inner, inj: inj}
}

type faultyFS struct {
	inner FS
	inj   Injector
}

func (f *faultyFS) inject(op Op, name string) error { return inject(f.inj, op, name) }

func inject(inj Injector, op Op, name string) error {
	err := inj.Inject(op, name)
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*fs.PathError](err); ok {
		return err
	}
	return &fs.PathError{Op: op.String(), Path: name, Err: err}
}

func (f *faultyFS) wrap(file File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return &faultyFile{File: file, inj: f.inj}, nil
}

func (f *faultyFS) Create(name string) (File, error) {
	if err := f.inject(OpCreate, name); err != nil {
		return nil, err
	}
	return f.wrap(f.inner.Create(name))
}

func (f *faultyFS) OpenAppend(name string) (File, error) {
	if err := f.inject(OpOpenAppend, name); err != nil {
		return nil, err
	}
	return f.wrap(f.inner.OpenAppend(name))
}

func (f *faultyFS) Open(name string) (File, error) {
	if err := f.inject(OpOpen, name); err != nil {
		return nil, err
	}
	return f.wrap(f.inner.Open(name))
}

func (f *faultyFS) Remove(name string) error {
	if err := f.inject(OpRemove, name); err != nil {
		return err
	}
	return f.inner.Remove(name)
}

func (f *faultyFS) RemoveAll(name string) error {
	if err := f.inject(OpRemoveAll, name); err != nil {
		return err
	}
	return f.inner.RemoveAll(name)
}

func (f *faultyFS) Rename(oldname, newname string) error {
	if err := f.inject(OpRename, oldname); err != nil {
		return err
	}
	return f.inner.Rename(oldname, newname)
}

func (f *faultyFS) MkdirAll(dir string) error {
	if err := f.inject(OpMkdirAll, dir); err != nil {
		return err
	}
	return f.inner.MkdirAll(dir)
}

func (f *faultyFS) ReadDir(dir string) ([]string, error) {
	if err := f.inject(OpReadDir, dir); err != nil {
		return nil, err
	}
	return f.inner.ReadDir(dir)
}

func (f *faultyFS) Stat(name string) (fs.FileInfo, error) {
	if err := f.inject(OpStat, name); err != nil {
		return nil, err
	}
	return f.inner.Stat(name)
}

func (f *faultyFS) SyncDir(dir string) error {
	if err := f.inject(OpSyncDir, dir); err != nil {
		return err
	}
	return f.inner.SyncDir(dir)
}

// faultyFile asks the injector before each method of the File it wraps.
type faultyFile struct {
	File
	inj Injector
}

func (f *faultyFile) Write(p []byte) (int, error) {
	err := inject(f.inj, OpWrite, f.Name())
	if err == nil {
		return f.File.Write(p)
	}
	sw, ok := errors.AsType[*ShortWrite](err)
	if !ok || sw.N <= 0 {
		return 0, err
	}
	n, werr := f.File.Write(p[:min(sw.N, len(p))])
	if werr != nil {
		return n, werr
	}
	return n, err
}

func (f *faultyFile) ReadAt(p []byte, off int64) (int, error) {
	if err := inject(f.inj, OpReadAt, f.Name()); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *faultyFile) Sync() error {
	if err := inject(f.inj, OpSync, f.Name()); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *faultyFile) Truncate(size int64) error {
	if err := inject(f.inj, OpTruncate, f.Name()); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *faultyFile) Size() (int64, error) {
	if err := inject(f.inj, OpSize, f.Name()); err != nil {
		return 0, err
	}
	return f.File.Size()
}

func (f *faultyFile) Allocate(size int64) error {
	if err := inject(f.inj, OpAllocate, f.Name()); err != nil {
		return err
	}
	return f.File.Allocate(size)
}

func (f *faultyFile) Close() error {
	err := inject(f.inj, OpClose, f.Name())
	cerr := f.File.Close()
	if err != nil {
		return err
	}
	return cerr
}

// orInjected returns err, or ErrInjected when err is nil.
func orInjected(err error) error {
	if err == nil {
		return ErrInjected
	}
	return err
}

// OnOp returns an Injector that fails every call of op on a path containing pathSubstring ("" matches
// every path) with err (ErrInjected if err is nil).
func OnOp(op Op, pathSubstring string, err error) Injector {
	err = orInjected(err)
	return InjectorFunc(func(o Op, path string) error {
		if o == op && strings.Contains(path, pathSubstring) {
			return err
		}
		return nil
	})
}

// OnPath returns an Injector that fails every operation on a path containing pathSubstring with err
// (ErrInjected if err is nil), as a dead disk would.
func OnPath(pathSubstring string, err error) Injector {
	err = orInjected(err)
	return InjectorFunc(func(_ Op, path string) error {
		if strings.Contains(path, pathSubstring) {
			return err
		}
		return nil
	})
}

// OnNth returns an Injector that fails only the n-th (counting from 1) call of op on a path containing
// pathSubstring, with err (ErrInjected if err is nil).
func OnNth(n int, op Op, pathSubstring string, err error) Injector {
	err = orInjected(err)
	var calls atomic.Int64
	return InjectorFunc(func(o Op, path string) error {
		if o == op && strings.Contains(path, pathSubstring) && calls.Add(1) == int64(n) {
			return err
		}
		return nil
	})
}

// Any returns an Injector that asks each of injs in turn and returns the first error.
func Any(injs ...Injector) Injector {
	return InjectorFunc(func(op Op, path string) error {
		for _, inj := range injs {
			if err := inj.Inject(op, path); err != nil {
				return err
			}
		}
		return nil
	})
}

// Toggle is an Injector switched on and off at runtime: while enabled it defers to the Injector it
// wraps, while disabled it lets everything through. A full disk that later frees up is
// NewToggle(OnOp(OpWrite, "", syscall.ENOSPC)), enabled and then disabled.
type Toggle struct {
	enabled atomic.Bool
	inj     Injector
}

// NewToggle returns a disabled Toggle wrapping inj.
func NewToggle(inj Injector) *Toggle { return &Toggle{inj: inj} }

// Enable switches t on.
func (t *Toggle) Enable() { t.enabled.Store(true) }

// Disable switches t off.
func (t *Toggle) Disable() { t.enabled.Store(false) }

// Enabled reports whether t is on.
func (t *Toggle) Enabled() bool { return t.enabled.Load() }

// Inject implements Injector.
func (t *Toggle) Inject(op Op, path string) error {
	if !t.Enabled() {
		return nil
	}
	return t.inj.Inject(op, path)
}
