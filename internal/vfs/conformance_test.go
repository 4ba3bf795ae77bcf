package vfs

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// conformance runs the same behaviour checks against an FS rooted at dir.
func conformance(t *testing.T, fsys FS, dir string) {
	p := func(name string) string { return filepath.Join(dir, name) }
	must := func(t *testing.T, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	create := func(t *testing.T, name, content string) File {
		t.Helper()
		f, err := fsys.Create(name)
		must(t, err)
		if content != "" {
			n, err := f.Write([]byte(content))
			must(t, err)
			if n != len(content) {
				t.Fatalf("wrote %d bytes, want %d", n, len(content))
			}
		}
		return f
	}
	writeFile := func(t *testing.T, name, content string) {
		t.Helper()
		must(t, create(t, name, content).Close())
	}
	readAll := func(t *testing.T, name string) string {
		t.Helper()
		b, err := ReadFile(fsys, name)
		must(t, err)
		return string(b)
	}
	wantNotExist := func(t *testing.T, what string, err error) {
		t.Helper()
		if !IsNotExist(err) {
			t.Fatalf("%s: got %v, want a not-exist error", what, err)
		}
	}

	t.Run("CreateWriteRead", func(t *testing.T) {
		name := p("a.log")
		f := create(t, name, "hello")
		defer f.Close()
		if _, err := f.Write([]byte(" world")); err != nil {
			t.Fatal(err)
		}
		if f.Name() != name {
			t.Fatalf("Name() = %q, want %q", f.Name(), name)
		}
		size, err := f.Size()
		must(t, err)
		if size != 11 {
			t.Fatalf("Size() = %d, want 11", size)
		}
		buf := make([]byte, 5)
		n, err := f.ReadAt(buf, 6)
		if err != nil || n != 5 || string(buf) != "world" {
			t.Fatalf("ReadAt(6) = %d, %v, %q", n, err, buf)
		}
		n, err = f.ReadAt(buf, 8)
		if !errors.Is(err, io.EOF) || n != 3 || string(buf[:n]) != "rld" {
			t.Fatalf("ReadAt(8) past the end = %d, %v, %q; want 3, EOF", n, err, buf[:n])
		}
		if n, err = f.ReadAt(buf, 11); n != 0 || !errors.Is(err, io.EOF) {
			t.Fatalf("ReadAt at the end = %d, %v; want 0, EOF", n, err)
		}
		if _, err = f.ReadAt(buf, -1); err == nil {
			t.Fatal("ReadAt at a negative offset succeeded")
		}
		f.WriteBack(0, size)
		f.WriteBack(4, 1<<20) // past the end: a hint, not an error
		if size, err := f.Size(); err != nil || size != 11 {
			t.Fatalf("Size() after WriteBack = %d, %v; want 11", size, err)
		}
		must(t, f.Allocate(1<<20))
		if size, err := f.Size(); err != nil || size != 11 {
			t.Fatalf("Size() after Allocate = %d, %v; want 11 (the size is kept)", size, err)
		}
		must(t, f.Sync())
		if got := readAll(t, name); got != "hello world" {
			t.Fatalf("content after WriteBack, Allocate and Sync = %q", got)
		}
	})

	t.Run("CreateTruncatesExisting", func(t *testing.T) {
		name := p("trunc.log")
		writeFile(t, name, "old content")
		writeFile(t, name, "new")
		if got := readAll(t, name); got != "new" {
			t.Fatalf("content = %q, want %q", got, "new")
		}
	})

	t.Run("CreateMissingDir", func(t *testing.T) {
		_, err := fsys.Create(p("nodir/x"))
		wantNotExist(t, "Create in a missing directory", err)
	})

	t.Run("OpenAppend", func(t *testing.T) {
		name := p("append.log")
		writeFile(t, name, "abc")
		f, err := fsys.OpenAppend(name)
		must(t, err)
		_, err = f.Write([]byte("def"))
		must(t, err)
		must(t, f.Close())
		if got := readAll(t, name); got != "abcdef" {
			t.Fatalf("content = %q, want abcdef", got)
		}
		_, err = fsys.OpenAppend(p("missing"))
		wantNotExist(t, "OpenAppend of a missing file", err)
	})

	t.Run("OpenReadOnly", func(t *testing.T) {
		name := p("ro.log")
		writeFile(t, name, "data")
		f, err := fsys.Open(name)
		must(t, err)
		defer f.Close()
		if _, err := f.Write([]byte("x")); err == nil {
			t.Fatal("Write on a read-only file succeeded")
		}
		if err := f.Truncate(0); err == nil {
			t.Fatal("Truncate on a read-only file succeeded")
		}
		if err := f.Sync(); err == nil {
			t.Fatal("Sync on a read-only file succeeded")
		}
		if err := f.Allocate(4); err == nil {
			t.Fatal("Allocate on a read-only file succeeded")
		}
		f.WriteBack(0, 4) // does nothing on a read-only file

		buf := make([]byte, 4)
		if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "data" {
			t.Fatalf("ReadAt = %v, %q", err, buf)
		}
		_, err = fsys.Open(p("missing"))
		wantNotExist(t, "Open of a missing file", err)
	})

	t.Run("Truncate", func(t *testing.T) {
		f := create(t, p("t.log"), "0123456789")
		defer f.Close()
		must(t, f.Truncate(4))
		_, err := f.Write([]byte("ab"))
		must(t, err)
		must(t, f.Truncate(8))
		size, err := f.Size()
		must(t, err)
		if size != 8 {
			t.Fatalf("Size() = %d, want 8", size)
		}
		buf := make([]byte, 8)
		_, err = f.ReadAt(buf, 0)
		must(t, err)
		if want := []byte("0123ab\x00\x00"); !bytes.Equal(buf, want) {
			t.Fatalf("content = %q, want %q", buf, want)
		}
	})

	t.Run("Rename", func(t *testing.T) {
		src, dst := p("src.tmp"), p("dst")
		writeFile(t, dst, "old")
		f := create(t, src, "new")
		defer f.Close()
		must(t, fsys.Rename(src, dst))
		if got := readAll(t, dst); got != "new" {
			t.Fatalf("renamed content = %q, want new", got)
		}
		_, err := fsys.Stat(src)
		wantNotExist(t, "Stat of the old name", err)
		_, err = f.Write([]byte("er"))
		must(t, err)
		if got := readAll(t, dst); got != "newer" {
			t.Fatalf("content written through the open handle = %q, want newer", got)
		}
		wantNotExist(t, "Rename of a missing file", fsys.Rename(p("missing"), p("other")))

		must(t, fsys.MkdirAll(p("rdir/sub")))
		writeFile(t, p("rdir/sub/f"), "x")
		must(t, fsys.Rename(p("rdir"), p("rdir2")))
		if got := readAll(t, p("rdir2/sub/f")); got != "x" {
			t.Fatalf("file in a renamed directory = %q, want x", got)
		}
		if err := fsys.Rename(p("rdir2"), p("rdir2/sub/inside")); err == nil {
			t.Fatal("Rename of a directory into itself succeeded")
		}
		must(t, fsys.MkdirAll(p("rdir3")))
		if err := fsys.Rename(p("rdir2"), p("rdir3")); err == nil {
			t.Fatal("Rename of a directory onto a directory succeeded")
		}
		if err := fsys.Rename(p("dst"), p("rdir3")); err == nil {
			t.Fatal("Rename of a file onto a directory succeeded")
		}
		if err := fsys.Rename(p("rdir3"), p("dst")); err == nil {
			t.Fatal("Rename of a directory onto a file succeeded")
		}
		must(t, fsys.Rename(p("dst"), p("dst")))
		if got := readAll(t, p("dst")); got != "newer" {
			t.Fatalf("content after renaming a file onto itself = %q, want newer", got)
		}
	})

	t.Run("Remove", func(t *testing.T) {
		name := p("rm.log")
		writeFile(t, name, "x")
		must(t, fsys.Remove(name))
		_, err := fsys.Stat(name)
		wantNotExist(t, "Stat of a removed file", err)
		wantNotExist(t, "Remove of a missing file", fsys.Remove(name))

		must(t, fsys.MkdirAll(p("full")))
		writeFile(t, p("full/f"), "x")
		if err := fsys.Remove(p("full")); err == nil {
			t.Fatal("Remove of a non-empty directory succeeded")
		}
		must(t, fsys.MkdirAll(p("empty")))
		must(t, fsys.Remove(p("empty")))
	})

	t.Run("RemoveOpenFile", func(t *testing.T) {
		name := p("open.log")
		f := create(t, name, "still here")
		defer f.Close()
		must(t, fsys.Remove(name))
		buf := make([]byte, 10)
		if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "still here" {
			t.Fatalf("ReadAt after Remove = %v, %q", err, buf)
		}
	})

	t.Run("RemoveAll", func(t *testing.T) {
		must(t, fsys.MkdirAll(p("tree/a/b")))
		writeFile(t, p("tree/a/b/f"), "x")
		writeFile(t, p("tree/g"), "y")
		must(t, fsys.RemoveAll(p("tree")))
		_, err := fsys.Stat(p("tree"))
		wantNotExist(t, "Stat of a removed tree", err)
		must(t, fsys.RemoveAll(p("tree")))
		writeFile(t, p("lone"), "z")
		must(t, fsys.RemoveAll(p("lone")))
		_, err = fsys.Stat(p("lone"))
		wantNotExist(t, "Stat of a file removed by RemoveAll", err)
	})

	t.Run("MkdirAllReadDirStat", func(t *testing.T) {
		d := p("m/n/o")
		must(t, fsys.MkdirAll(d))
		must(t, fsys.MkdirAll(d))
		writeFile(t, filepath.Join(d, "b"), "12345")
		writeFile(t, filepath.Join(d, "a"), "")
		must(t, fsys.MkdirAll(filepath.Join(d, "c")))
		names, err := fsys.ReadDir(d)
		must(t, err)
		if want := []string{"a", "b", "c"}; !slices.Equal(names, want) {
			t.Fatalf("ReadDir = %v, want %v", names, want)
		}
		st, err := fsys.Stat(filepath.Join(d, "b"))
		must(t, err)
		if st.Name() != "b" || st.Size() != 5 || st.IsDir() || !st.Mode().IsRegular() {
			t.Fatalf("Stat(b) = %s %d dir=%v mode=%v", st.Name(), st.Size(), st.IsDir(), st.Mode())
		}
		st, err = fsys.Stat(d)
		must(t, err)
		if st.Name() != "o" || !st.IsDir() {
			t.Fatalf("Stat(dir) = %s dir=%v", st.Name(), st.IsDir())
		}
		if err := fsys.MkdirAll(filepath.Join(d, "b", "x")); err == nil {
			t.Fatal("MkdirAll through a file succeeded")
		}
		must(t, fsys.SyncDir(d))
		_, err = fsys.ReadDir(p("missing"))
		wantNotExist(t, "ReadDir of a missing directory", err)
		_, err = fsys.Stat(p("missing"))
		wantNotExist(t, "Stat of a missing file", err)
		wantNotExist(t, "SyncDir of a missing directory", fsys.SyncDir(p("missing")))
	})

	t.Run("Closed", func(t *testing.T) {
		f := create(t, p("closed.log"), "x")
		must(t, f.Close())
		if err := f.Close(); err == nil {
			t.Fatal("second Close succeeded")
		}
		if _, err := f.Write([]byte("y")); err == nil {
			t.Fatal("Write after Close succeeded")
		}
		if _, err := f.ReadAt(make([]byte, 1), 0); err == nil {
			t.Fatal("ReadAt after Close succeeded")
		}
	})

	t.Run("ConcurrentReadWrite", func(t *testing.T) {
		f := create(t, p("conc.log"), "")
		defer f.Close()
		const nWrites = 200
		chunk := bytes.Repeat([]byte{7}, 100)
		var wg sync.WaitGroup
		wg.Go(func() {
			for range nWrites {
				if _, err := f.Write(chunk); err != nil {
					t.Error(err)
					return
				}
			}
		})
		buf := make([]byte, len(chunk))
		for range nWrites {
			n, err := f.ReadAt(buf, 0)
			if err != nil && !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			for _, b := range buf[:n] {
				if b != 7 {
					t.Fatalf("read byte %d, want 7", b)
				}
			}
		}
		wg.Wait()
		size, err := f.Size()
		must(t, err)
		if size != nWrites*int64(len(chunk)) {
			t.Fatalf("Size() = %d, want %d", size, nWrites*len(chunk))
		}
	})
}

func TestOSConformance(t *testing.T) {
	conformance(t, OS, t.TempDir())
}

func TestMemConformance(t *testing.T) {
	m := NewMem()
	if err := m.MkdirAll("/data"); err != nil {
		t.Fatal(err)
	}
	conformance(t, m, "/data")
}

func TestFaultyConformance(t *testing.T) {
	pass := InjectorFunc(func(Op, string) error { return nil })
	t.Run("Mem", func(t *testing.T) {
		m := NewMem()
		conformance(t, NewFaulty(m, pass), "/")
	})
	t.Run("OS", func(t *testing.T) {
		conformance(t, NewFaulty(OS, pass), t.TempDir())
	})
}
