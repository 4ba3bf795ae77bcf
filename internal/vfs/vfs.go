// Package vfs is weir's one door to the filesystem. Everything that stores data (the partition log, its
// indexes and checkpoints, the node's metadata) goes through an FS, so tests can swap the operating
// system for an in-memory filesystem that simulates a crash (unsynced bytes and directory entries lost)
// or for a wrapper that injects faults (short writes, EIO, ENOSPC) by operation and path.
//
// The durability model is POSIX's: bytes written to a File are durable only after File.Sync returns
// nil; a created, renamed or removed directory entry is durable only after SyncDir on its parent
// returns nil. An FS implementation must never report success for a Sync that did not happen.
//
// This package imports only the standard library.
package vfs

import (
	"errors"
	"io"
	"io/fs"
	"path/filepath"
)

// File is an open file. Write appends at the end of the file (files are opened for append); ReadAt
// may run concurrently with Write and with other ReadAt calls, and sees every byte whose Write
// returned.
type File interface {
	io.ReaderAt
	io.Writer
	io.Closer
	// Sync makes every byte written so far durable (fdatasync).
	Sync() error
	// WriteBack asks for n bytes at off to start going to the disk now rather than when the kernel would
	// choose to. It is a hint: it makes nothing durable and reports nothing, the next Sync reporting any
	// failure of the writes it started. Only the OS filesystem acts on it (Linux).
	WriteBack(off, n int64)
	// Allocate reserves disk space for the file's first size bytes without changing its size (Linux's
	// fallocate(2) with FALLOC_FL_KEEP_SIZE), so that later writes up to size find their blocks
	// allocated. A filesystem that cannot reserve space answers nil: the writes still work, only
	// later. It fails on a read-only file.
	Allocate(size int64) error
	// Truncate cuts the file to size bytes; later writes append after that point.
	Truncate(size int64) error
	// Size reports the file's current length, unsynced bytes included.
	Size() (int64, error)
	// Name is the path the file was opened with.
	Name() string
}

// FS is a filesystem. Paths are slash- or OS-separated paths as the os package takes them.
type FS interface {
	// Create creates (or truncates) name for reading and appending.
	Create(name string) (File, error)
	// OpenAppend opens an existing file for reading and appending.
	OpenAppend(name string) (File, error)
	// Open opens an existing file read-only; Write, Truncate and Sync fail on it.
	Open(name string) (File, error)
	Remove(name string) error
	RemoveAll(name string) error
	Rename(oldname, newname string) error
	MkdirAll(dir string) error
	// ReadDir lists the names in dir, sorted.
	ReadDir(dir string) ([]string, error)
	Stat(name string) (fs.FileInfo, error)
	// SyncDir makes the entries of dir durable (creates, renames and removes done in it so far).
	SyncDir(dir string) error
}

// IsNotExist reports whether err says a file or directory does not exist, for every FS here.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// ReadFile returns the whole content of name in fsys.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !(errors.Is(err, io.EOF) && int64(n) == size) {
		return nil, err
	}
	return buf, nil
}

// MkdirAllDurable creates dir and its missing parents, and syncs the parent of each directory it
// created, so that the new entries survive a crash.
func MkdirAllDurable(fsys FS, dir string) error {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := fsys.Stat(d); err == nil {
			break
		} else if !IsNotExist(err) {
			return err
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := fsys.MkdirAll(dir); err != nil {
		return err
	}
	for _, d := range missing {
		if err := fsys.SyncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}
