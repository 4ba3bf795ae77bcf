//go:build !linux

package vfs

import "os"

// allocate does nothing where fallocate(2) is not available through the syscall package.
func allocate(*os.File, int64) error { return nil }
