package test

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// netDiskSize is the size of a node's own disk in the full-disk scenario: room for the node's logs,
// its Raft store and its spare segments for the length of a scenario.
const netDiskSize = 512 << 20

// mountDisk mounts a tmpfs of size bytes on a new temporary directory and returns it; it is
// unmounted at the test's cleanup. It needs root, as the network-fault tests do.
func mountDisk(t testing.TB, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.FormatInt(size, 10), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount a tmpfs (needs root): %v\n%s", err, out)
	}
	// Cleanups run last-registered first: this one before TempDir's removal, after the node's stop.
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v\n%s", dir, err, out)
		}
	})
	return dir
}

// fillDisk writes path until its filesystem has no space left.
func fillDisk(t testing.TB, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatalf("create %s: %v", path, err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for {
		if _, err := f.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatalf("fill %s: %v", path, err)
		}
	}
}

// waitExit waits up to timeout for the node's process to exit on its own and returns its exit
// status (nil for code 0); the test fails if it is still running then.
func (n *node) waitExit(timeout time.Duration) error {
	n.t.Helper()
	p := n.proc
	if p == nil {
		n.t.Fatalf("node %d: waitExit while not running", n.id)
	}
	select {
	case <-p.done:
		n.proc = nil
		return p.err
	case <-time.After(timeout):
		n.t.Fatalf("node %d: still running %v after its disk filled", n.id, timeout)
		return nil
	}
}
