package vfs

import (
	"errors"
	"fmt"
	"io"
	"syscall"
)

// SendFile writes the n bytes of f at off to w. When f is a file of the OS filesystem (or a Sender
// wrapping one) and w a socket (a syscall.Conn such as *net.TCPConn) on Linux, the kernel copies them
// from the page cache to the socket (sendfile(2) with an explicit offset, so that concurrent readers of
// the same open file do not race on its position) and they never pass through user memory. Otherwise
// (the in-memory and fault-injecting filesystems, a TLS connection, another OS) they are read with
// ReadAt and written through a buffer, so every FS serves it and injected read faults still fire. It
// returns the bytes written; a file shorter than off+n is an io.ErrUnexpectedEOF.
func SendFile(w io.Writer, f File, off, n int64) (int64, error) {
	if s, ok := f.(Sender); ok {
		return s.SendTo(w, off, n)
	}
	return copyRange(w, f, off, n)
}

// Sender is a File that sends its own bytes (SendFile). A wrapper that leaves reads to the file it
// wraps implements it with SendFile on that file, so that the OS file underneath still uses sendfile.
type Sender interface {
	SendTo(w io.Writer, off, n int64) (int64, error)
}

// SendTo sends n bytes at off to w with sendfile when w is a socket (SendFile).
func (f osFile) SendTo(w io.Writer, off, n int64) (int64, error) {
	if sc, ok := w.(syscall.Conn); ok {
		if done, handled, err := sendFile(sc, f, off, n); handled {
			return done, err
		}
	}
	return copyRange(w, f, off, n)
}

// sendChunk is the buffer of the copying path of SendFile.
const sendChunk = 64 << 10

func copyRange(w io.Writer, f File, off, n int64) (int64, error) {
	buf := make([]byte, min(n, sendChunk))
	var done int64
	for done < n {
		m := min(int64(len(buf)), n-done)
		k, err := f.ReadAt(buf[:m], off+done)
		if int64(k) < m {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return done, fmt.Errorf("vfs: send %s at %d: %w", f.Name(), off+done, err)
		}
		if _, err := w.Write(buf[:m]); err != nil {
			return done, err
		}
		done += m
	}
	return done, nil
}
