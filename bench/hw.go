package main

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"time"
)

// diskWriteMBs writes total bytes sequentially in 1 MiB blocks to a new file in dir and fdatasyncs it
// once at the end, as `dd bs=1M conv=fdatasync` does, and returns MB/s (10^6 bytes) including the sync.
func diskWriteMBs(dir string, total int64) (float64, error) {
	f, block, done, err := scratchFile(dir, "dd.bin", 1<<20)
	if err != nil {
		return 0, err
	}
	defer done()
	start := time.Now()
	if err := writeBlocks(f, block, total); err != nil {
		return 0, err
	}
	if err := syscall.Fdatasync(int(f.Fd())); err != nil {
		return 0, err
	}
	return float64(total) / time.Since(start).Seconds() / 1e6, nil
}

// scratchFile creates a file named name in dir and a block of size bytes to write to it; done closes and
// removes the file.
func scratchFile(dir, name string, size int) (f *os.File, block []byte, done func(), err error) {
	path := filepath.Join(dir, name)
	if f, err = os.Create(path); err != nil {
		return nil, nil, nil, err
	}
	block = make([]byte, size)
	for i := range block {
		block[i] = byte(i)
	}
	return f, block, func() { f.Close(); os.Remove(path) }, nil
}

// writeBlocks writes block to f over and over until total bytes are written.
func writeBlocks(f *os.File, block []byte, total int64) error {
	for written := int64(0); written < total; written += int64(len(block)) {
		if _, err := f.Write(block); err != nil {
			return err
		}
	}
	return nil
}

// fsyncLatency appends 1 KiB blocks to a new file in dir at rate per second for dur, fdatasyncing after
// each, and returns the time each append and its fdatasync took: the floor under the latency of any
// broker that makes a record durable before acknowledging it or showing it to consumers.
func fsyncLatency(dir string, rate float64, dur time.Duration) (*samples, error) {
	f, block, done, err := scratchFile(dir, "fsync.bin", recordSize)
	if err != nil {
		return nil, err
	}
	defer done()
	lat := &samples{}
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for end := time.Now().Add(dur); time.Now().Before(end); {
		<-tick.C
		start := time.Now()
		if _, err := f.Write(block); err != nil {
			return nil, err
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return nil, err
		}
		lat.add(time.Since(start))
	}
	return lat, nil
}

// pageCacheWriteCost writes total bytes in 16 KiB writes to a new file in dir, syncing nothing, and returns
// the system CPU time the writing thread spent per GB (10^9 bytes): what copying written bytes into the page
// cache costs the kernel at that moment, with no broker in the way. On the development machine, a virtual
// machine, that cost moves eightfold with the memory's history (docs/bench.md, "What the page cache costs
// here"), and a broker writing through the page cache pays it too. The file is removed.
func pageCacheWriteCost(dir string, total int64) (float64, error) {
	f, block, done, err := scratchFile(dir, "pagecache.bin", 16<<10)
	if err != nil {
		return 0, err
	}
	defer done()
	c, err := threadCPU(func() error { return writeBlocks(f, block, total) })
	return c.sys / (float64(total) / 1e9), err
}

// syncCost writes back every dirty page of the machine (sync(2)) and returns the CPU time that took on the
// calling thread, where sync(2) submits the writeback of what the flusher threads have not taken yet.
func syncCost() (float64, error) {
	c, err := threadCPU(func() error { syscall.Sync(); return nil })
	return c.total(), err
}

// threadCPU runs fn on one OS thread and returns the user and system CPU time that thread spent in it
// (getrusage(2) of the thread, not of the process, whose other goroutines run meanwhile).
func threadCPU(fn func() error) (cpuTime, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var before, after syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &before); err != nil {
		return cpuTime{}, err
	}
	if err := fn(); err != nil {
		return cpuTime{}, err
	}
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &after); err != nil {
		return cpuTime{}, err
	}
	seconds := func(a, b syscall.Timeval) float64 { return time.Duration(b.Nano() - a.Nano()).Seconds() }
	return cpuTime{user: seconds(before.Utime, after.Utime), sys: seconds(before.Stime, after.Stime)}, nil
}

// settleDisk writes back every dirty page of the machine (sync(2)) before a measured phase, so that no
// phase pays for an earlier phase's unsynced writes: on ext4 (data=ordered) an fdatasync can wait for
// other files' data the kernel is writing back, and the kernel writes dirty pages back 30 s after they
// were made, which would put one system's leftovers (JetStream's default, weir's `never`) into the next
// system's fsyncs.
func settleDisk() { syscall.Sync() }

// loopbackMBs streams total bytes over one loopback TCP connection in 256 KiB writes and returns MB/s.
func loopbackMBs(total int64) (float64, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	read := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			read <- err
			return
		}
		defer c.Close()
		_, err = io.Copy(io.Discard, c)
		read <- err
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 256<<10)
	start := time.Now()
	for sent := int64(0); sent < total; sent += int64(len(buf)) {
		if _, err := c.Write(buf); err != nil {
			c.Close()
			return 0, err
		}
	}
	c.Close()
	if err := <-read; err != nil {
		return 0, err
	}
	return float64(total) / time.Since(start).Seconds() / 1e6, nil
}
