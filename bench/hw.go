package main

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// diskWriteMBs writes total bytes sequentially in 1 MiB blocks to a new file in dir and fdatasyncs it
// once at the end, as `dd bs=1M conv=fdatasync` does, and returns MB/s (10^6 bytes) including the sync.
func diskWriteMBs(dir string, total int64) (float64, error) {
	path := filepath.Join(dir, "dd.bin")
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer os.Remove(path)
	defer f.Close()
	block := make([]byte, 1<<20)
	for i := range block {
		block[i] = byte(i)
	}
	start := time.Now()
	for written := int64(0); written < total; written += int64(len(block)) {
		if _, err := f.Write(block); err != nil {
			return 0, err
		}
	}
	if err := syscall.Fdatasync(int(f.Fd())); err != nil {
		return 0, err
	}
	return float64(total) / time.Since(start).Seconds() / 1e6, nil
}

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
