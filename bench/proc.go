package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat: 100 on every Linux ABI.
const clockTicks = 100

// cpuTime is CPU time in seconds, as the user and system parts a process has used.
type cpuTime struct{ user, sys float64 }

func (c cpuTime) total() float64 { return c.user + c.sys }

// cpuTimes reads the user and system CPU time a process has used so far (utime and stime in
// /proc/PID/stat), in seconds. It counts every thread of the process, a JVM's compiler and collector
// threads included, and no child process.
func cpuTimes(pid int) (cpuTime, error) {
	_, c, err := readStat(pid)
	return c, err
}

// readStat reads /proc/PID/stat: the parent's pid (field 4) and the CPU time (utime and stime, fields 14
// and 15).
func readStat(pid int) (ppid int, c cpuTime, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, cpuTime{}, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: fields count from after it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, cpuTime{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 {
		return 0, cpuTime{}, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	// f[0] is field 3 (state), so the parent's pid (field 4) is f[1], utime (field 14) f[11] and stime
	// (field 15) f[12].
	var v [3]int64
	for j, s := range [][]byte{f[1], f[11], f[12]} {
		if v[j], err = strconv.ParseInt(string(s), 10, 64); err != nil {
			return 0, cpuTime{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
	}
	return int(v[0]), cpuTime{user: float64(v[1]) / clockTicks, sys: float64(v[2]) / clockTicks}, nil
}

// rssBytes reads a process's resident set size from /proc (Linux).
func rssBytes(pid int) (int64, error) { return statusBytes(pid, "VmRSS:") }

// peakRSSBytes reads the largest resident set size a process has had (VmHWM in /proc/PID/status).
func peakRSSBytes(pid int) (int64, error) { return statusBytes(pid, "VmHWM:") }

// statusBytes reads one "Name:  N kB" line of /proc/PID/status, in bytes.
func statusBytes(pid int, name string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte(name)); ok {
			kb, err := strconv.ParseInt(string(bytes.Fields(v)[0]), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s for pid %d", name, pid)
}

// cpuDuring runs fn and returns the CPU seconds, user and system, process pid used meanwhile.
func cpuDuring(pid int, fn func() error) (float64, error) {
	c, err := cpuTimesDuring(pid, fn)
	return c.total(), err
}

// cpuTimesDuring runs fn and returns the user and system CPU time process pid used meanwhile.
func cpuTimesDuring(pid int, fn func() error) (cpuTime, error) {
	before, err := cpuTimes(pid)
	if err != nil {
		return cpuTime{}, err
	}
	if err := fn(); err != nil {
		return cpuTime{}, err
	}
	after, err := cpuTimes(pid)
	return cpuTime{user: after.user - before.user, sys: after.sys - before.sys}, err
}

// kernelThreads is the CPU time, in seconds, each of the kernel's own threads (kthreadd, pid 2, and its
// children: the flusher workers that write dirty pages back, the block layer's completion work) has used,
// by pid. A broker that does not fsync leaves the writeback of its records to these threads, which its own
// /proc/PID/stat does not count.
type kernelThreads map[int]float64

func readKernelThreads() (kernelThreads, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	k := kernelThreads{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, c, err := readStat(pid)
		if err != nil || (pid != 2 && ppid != 2) {
			continue // gone since the listing, or not a kernel thread
		}
		k[pid] = c.total()
	}
	return k, nil
}

// since is the CPU time the kernel's threads used from before to k: each thread's growth, all of a thread
// started since. The kernel starts and ends its workers as it needs them, and what a worker that ended
// in between used is lost, so this is a lower bound.
func (k kernelThreads) since(before kernelThreads) float64 {
	total := 0.0
	for pid, c := range k {
		if b, ok := before[pid]; ok && b <= c {
			c -= b
		}
		total += c
	}
	return total
}
