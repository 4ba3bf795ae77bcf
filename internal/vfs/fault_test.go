package vfs

import (
	"errors"
	"io"
	"io/fs"
	"slices"
	"sync"
	"syscall"
	"testing"
)

// callEvery runs every operation of NewFaulty(inner, inj) once on files under /f, returning the first
// error of each. When MkdirAll or Create fails it makes the directory or file through inner, so the
// later operations still run.
func callEvery(inner FS, inj Injector) map[Op]error {
	fsys := NewFaulty(inner, inj)
	errs := map[Op]error{}
	note := func(op Op, err error) {
		if _, seen := errs[op]; !seen {
			errs[op] = err
		}
	}
	if err := fsys.MkdirAll("/f"); err != nil {
		note(OpMkdirAll, err)
		note(OpMkdirAll, inner.MkdirAll("/f"))
	}
	f, err := fsys.Create("/f/a")
	note(OpCreate, err)
	if err != nil {
		if f, err = inner.Create("/f/a"); err != nil {
			return errs
		}
	}
	_, err = f.Write([]byte("abc"))
	note(OpWrite, err)
	_, err = f.ReadAt(make([]byte, 1), 0)
	note(OpReadAt, err)
	note(OpSync, f.Sync())
	note(OpTruncate, f.Truncate(1))
	_, err = f.Size()
	note(OpSize, err)
	note(OpAllocate, f.Allocate(64))
	note(OpClose, f.Close())
	g, err := fsys.OpenAppend("/f/a")
	note(OpOpenAppend, err)
	if g != nil {
		g.Close()
	}
	g, err = fsys.Open("/f/a")
	note(OpOpen, err)
	if g != nil {
		g.Close()
	}
	_, err = fsys.ReadDir("/f")
	note(OpReadDir, err)
	_, err = fsys.Stat("/f/a")
	note(OpStat, err)
	note(OpSyncDir, fsys.SyncDir("/f"))
	note(OpRename, fsys.Rename("/f/a", "/f/b"))
	note(OpRemove, fsys.Remove("/f/a"))
	note(OpRemoveAll, fsys.RemoveAll("/f"))
	return errs
}

func TestFaultyAsksBeforeEveryOp(t *testing.T) {
	var mu sync.Mutex
	var seen []Op
	rec := InjectorFunc(func(op Op, _ string) error {
		mu.Lock()
		defer mu.Unlock()
		if !slices.Contains(seen, op) {
			seen = append(seen, op)
		}
		return nil
	})
	for op, err := range callEvery(NewMem(), rec) {
		if err != nil && op != OpRemove {
			t.Fatalf("%v: %v", op, err)
		}
	}
	slices.Sort(seen)
	if want := Ops(); !slices.Equal(seen, want) {
		t.Fatalf("injector saw %v, want %v", seen, want)
	}
}

func TestFaultyOnOpFailsEachOp(t *testing.T) {
	for _, op := range Ops() {
		t.Run(op.String(), func(t *testing.T) {
			errs := callEvery(NewMem(), OnOp(op, "/f", syscall.EIO))
			err := errs[op]
			if !errors.Is(err, syscall.EIO) {
				t.Fatalf("got %v, want EIO", err)
			}
			if _, ok := errors.AsType[*fs.PathError](err); !ok {
				t.Fatalf("%v is not an *fs.PathError", err)
			}
			for other, err := range errs {
				if other != op && errors.Is(err, syscall.EIO) {
					t.Fatalf("%v also failed: %v", other, err)
				}
			}
		})
	}
}

func TestFaultyInjectedOpHasNoEffect(t *testing.T) {
	m := NewMem()
	fsys := NewFaulty(m, Any(OnOp(OpCreate, "nope", nil), OnOp(OpRename, "", nil), OnOp(OpTruncate, "", nil)))
	if _, err := fsys.Create("/nope"); !errors.Is(err, ErrInjected) {
		t.Fatalf("Create: %v, want ErrInjected", err)
	}
	if _, err := m.Stat("/nope"); !IsNotExist(err) {
		t.Fatalf("failed Create made the file: %v", err)
	}
	f, err := fsys.Create("/yes")
	memMust(t, err)
	_, err = f.Write([]byte("abc"))
	memMust(t, err)
	if err := f.Truncate(0); !errors.Is(err, ErrInjected) {
		t.Fatalf("Truncate: %v, want ErrInjected", err)
	}
	if err := fsys.Rename("/yes", "/moved"); !errors.Is(err, ErrInjected) {
		t.Fatalf("Rename: %v, want ErrInjected", err)
	}
	if got, ok := memRead(t, m, "/yes"); !ok || string(got) != "abc" {
		t.Fatalf("after failed Truncate and Rename: %q(%v)", got, ok)
	}
}

func TestFaultyShortWrite(t *testing.T) {
	m := NewMem()
	fsys := NewFaulty(m, OnNth(2, OpWrite, "seg", &ShortWrite{N: 3, Err: syscall.ENOSPC}))
	f, err := fsys.Create("/seg.log")
	memMust(t, err)
	defer f.Close()
	_, err = f.Write([]byte("first|"))
	memMust(t, err)
	n, err := f.Write([]byte("second"))
	if n != 3 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Write = %d, %v; want 3, ENOSPC", n, err)
	}
	pe, ok := errors.AsType[*fs.PathError](err)
	if !ok || pe.Path != "/seg.log" {
		t.Fatalf("error %v does not carry the path", err)
	}
	if _, ok := errors.AsType[*ShortWrite](err); !ok {
		t.Fatalf("error %v does not carry the *ShortWrite", err)
	}
	_, err = f.Write([]byte("|third"))
	memMust(t, err)
	if got, _ := memRead(t, m, "/seg.log"); string(got) != "first|sec|third" {
		t.Fatalf("content %q", got)
	}

	g, err := NewFaulty(m, OnOp(OpWrite, "", &ShortWrite{N: 100})).Create("/small")
	memMust(t, err)
	n, err = g.Write([]byte("abc"))
	if n != 3 || !errors.Is(err, io.ErrShortWrite) {
		t.Fatalf("ShortWrite longer than the buffer: %d, %v; want 3, io.ErrShortWrite", n, err)
	}
}

func TestFaultyOnNth(t *testing.T) {
	fsys := NewFaulty(NewMem(), OnNth(3, OpSync, "x.log", syscall.EIO))
	x, err := fsys.Create("/x.log")
	memMust(t, err)
	y, err := fsys.Create("/y.log")
	memMust(t, err)
	var failed []int
	for i := 1; i <= 5; i++ {
		memMust(t, y.Sync())
		if err := x.Sync(); err != nil {
			if !errors.Is(err, syscall.EIO) {
				t.Fatalf("sync %d: %v", i, err)
			}
			failed = append(failed, i)
		}
	}
	if !slices.Equal(failed, []int{3}) {
		t.Fatalf("failed syncs %v, want [3]", failed)
	}
}

func TestFaultyToggleFullDisk(t *testing.T) {
	m := NewMem()
	full := NewToggle(Any(OnOp(OpWrite, "", syscall.ENOSPC), OnOp(OpCreate, "", syscall.ENOSPC)))
	fsys := NewFaulty(m, full)
	f, err := fsys.Create("/log")
	memMust(t, err)
	_, err = f.Write([]byte("a"))
	memMust(t, err)

	full.Enable()
	if !full.Enabled() {
		t.Fatal("Enabled() is false after Enable")
	}
	if n, err := f.Write([]byte("b")); n != 0 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Write on a full disk = %d, %v", n, err)
	}
	if _, err := fsys.Create("/other"); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Create on a full disk: %v", err)
	}
	memMust(t, f.Sync())

	full.Disable()
	_, err = f.Write([]byte("c"))
	memMust(t, err)
	if got, _ := memRead(t, m, "/log"); string(got) != "ac" {
		t.Fatalf("content %q, want ac", got)
	}
}

func TestFaultyCloseReleasesInnerFile(t *testing.T) {
	m := NewMem()
	f, err := NewFaulty(m, OnOp(OpClose, "", syscall.EIO)).Create("/c")
	memMust(t, err)
	if err := f.Close(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Close: %v, want EIO", err)
	}
	if _, err := f.(*faultyFile).File.Write([]byte("x")); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("inner file still open: %v", err)
	}
}

func TestFaultyOnPath(t *testing.T) {
	fsys := NewFaulty(NewMem(), OnPath("/dead/", syscall.EIO))
	memMust(t, fsys.MkdirAll("/live"))
	if err := fsys.MkdirAll("/dead/x"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("MkdirAll on a dead path: %v", err)
	}
}

func TestFaultyOpString(t *testing.T) {
	if got := OpSyncDir.String(); got != "syncdir" {
		t.Fatalf("OpSyncDir.String() = %q", got)
	}
	if got := Op(200).String(); got != "Op(200)" {
		t.Fatalf("Op(200).String() = %q", got)
	}
	if n := len(Ops()); n != int(OpAllocate) {
		t.Fatalf("Ops() has %d entries, want %d", n, OpAllocate)
	}
}
