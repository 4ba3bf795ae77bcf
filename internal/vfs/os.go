package vfs

import (
	"io/fs"
	"os"
	"sort"
	"syscall"
)

// OS is the operating system's filesystem.
var OS FS = osFS{}

type osFS struct{}

type osFile struct {
	*os.File
	readOnly bool
}

// Sync flushes the file; on a file opened read-only it fails, as the File contract says, although
// the kernel would accept it.
func (f osFile) Sync() error {
	if f.readOnly {
		return &fs.PathError{Op: "sync", Path: f.Name(), Err: syscall.EBADF}
	}
	return fdatasync(f.File)
}

// WriteBack starts writing n bytes at off back to the disk without waiting (Linux; nothing elsewhere). It
// makes nothing durable: it only shortens the fdatasync that follows, and that fdatasync reports any
// failure of the writes it started.
func (f osFile) WriteBack(off, n int64) {
	if !f.readOnly {
		writeBack(f.File, off, n)
	}
}

// Allocate reserves size bytes of disk for the file, keeping its size (allocate_linux.go; nothing
// elsewhere).
func (f osFile) Allocate(size int64) error {
	if f.readOnly {
		return &fs.PathError{Op: "allocate", Path: f.Name(), Err: syscall.EBADF}
	}
	if size < 0 {
		return &fs.PathError{Op: "allocate", Path: f.Name(), Err: syscall.EINVAL}
	}
	if err := allocate(f.File, size); err != nil {
		return &fs.PathError{Op: "allocate", Path: f.Name(), Err: err}
	}
	return nil
}

func (f osFile) Size() (int64, error) {
	st, err := f.File.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func (osFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return osFile{File: f}, nil
}

func (osFS) OpenAppend(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return nil, err
	}
	return osFile{File: f}, nil
}

func (osFS) Open(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return osFile{File: f, readOnly: true}, nil
}

func (osFS) Remove(name string) error              { return os.Remove(name) }
func (osFS) RemoveAll(name string) error           { return os.RemoveAll(name) }
func (osFS) Rename(oldname, newname string) error  { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(dir string) error             { return os.MkdirAll(dir, 0o755) }
func (osFS) Stat(name string) (fs.FileInfo, error) { return os.Stat(name) }

func (osFS) ReadDir(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	sort.Strings(names)
	return names, nil
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
