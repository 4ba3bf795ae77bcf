//go:build linux && !arm

package vfs

import (
	"os"
	"syscall"
)

// syncFileRangeWrite is SYNC_FILE_RANGE_WRITE (linux/fs.h), which the syscall package does not name.
const syncFileRangeWrite = 0x2

// writeBack starts the writeback of n bytes of f at off (sync_file_range(2), SYNC_FILE_RANGE_WRITE) and
// does not wait for it. Writing back does not consume a writeback error: the next fdatasync still reports it.
func writeBack(f *os.File, off, n int64) {
	_ = syscall.SyncFileRange(int(f.Fd()), off, n, syncFileRangeWrite) // a hint: nothing to do with an error
}
