package main

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// rusageSeconds is this process's user and system CPU time by getrusage(2), a reference independent of
// /proc.
func rusageSeconds(t *testing.T) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// TestProcCounters reads this test process's own CPU time and memory from /proc: over a busy loop the
// CPU time grows by what getrusage(2) says it grew (within the 10 ms tick of /proc/PID/stat), and the
// peak RSS is at least the current one.
func TestProcCounters(t *testing.T) {
	pid := os.Getpid()
	ref := rusageSeconds(t)
	var sink uint64
	cpu, err := cpuDuring(pid, func() error {
		for deadline := time.Now().Add(time.Minute); rusageSeconds(t)-ref < 0.3; {
			if time.Now().After(deadline) {
				t.Fatal("no 0.3 s of CPU in a minute")
			}
			for i := range 100_000 {
				sink += uint64(i)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := rusageSeconds(t) - ref; cpu < got-0.05 || cpu > got+0.05 {
		t.Errorf("a busy loop cost %.3f CPU s by /proc/PID/stat and %.3f s by getrusage (sink %d)", cpu, got, sink)
	}
	rss, err := rssBytes(pid)
	if err != nil {
		t.Fatal(err)
	}
	peak, err := peakRSSBytes(pid)
	if err != nil {
		t.Fatal(err)
	}
	if rss <= 0 || peak < rss {
		t.Errorf("RSS %d, peak RSS %d: want 0 < RSS <= peak", rss, peak)
	}
	if _, err := cpuTimes(1 << 30); err == nil {
		t.Error("cpuTimes of a pid that does not exist: no error")
	}
}

// TestKernelThreads reads the kernel threads' CPU time: where this process sees kthreadd (pid 2, not in a
// PID namespace of its own), its children have used some since boot; the time used between two readings
// is never negative, counts a thread that started in between whole and one that ended not at all; and a
// sync(2) after writing a file costs the caller's thread a measurable time or none, never an error.
func TestKernelThreads(t *testing.T) {
	k, err := readKernelThreads()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/proc/2/stat"); err == nil && k.since(nil) <= 0 {
		t.Errorf("kernel threads' CPU %v s since boot with kthreadd visible: want > 0", k.since(nil))
	}
	before := kernelThreads{10: 1.5, 11: 2, 12: 4}
	after := kernelThreads{10: 1.75, 12: 4, 13: 0.5}
	if got := after.since(before); got != 0.75 {
		t.Errorf("since: %v s, want 0.25 (pid 10) + 0 (pid 12) + 0.5 (pid 13, new) = 0.75", got)
	}
	if err := os.WriteFile(t.TempDir()+"/f", make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := syncCost(); err != nil || s < 0 {
		t.Errorf("syncCost: %v s, %v", s, err)
	}
}
