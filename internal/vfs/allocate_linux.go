//go:build linux

package vfs

import (
	"errors"
	"os"
	"syscall"
)

// fallocKeepSize is FALLOC_FL_KEEP_SIZE (linux/falloc.h), which the syscall package does not name.
const fallocKeepSize = 0x1

// allocate reserves the first size bytes of f with fallocate(2), keeping the file's size. A filesystem
// that does not support it (EOPNOTSUPP) is not an error: the reservation is an optimisation.
func allocate(f *os.File, size int64) error {
	if size == 0 {
		return nil
	}
	for {
		err := syscall.Fallocate(int(f.Fd()), fallocKeepSize, 0, size)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EOPNOTSUPP):
			return nil
		}
		return err
	}
}
