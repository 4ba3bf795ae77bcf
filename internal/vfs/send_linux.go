package vfs

import (
	"fmt"
	"io"
	"syscall"
)

// sendFileMax is the most one sendfile(2) call is asked for; Linux moves at most about 2 GiB a call.
const sendFileMax = 1 << 30

// sendFile sends n bytes of f at off to the socket behind sc with sendfile(2), waiting through the
// runtime's poller (and so under the socket's write deadline) whenever the socket buffer is full.
// handled is false when sc offers no raw connection, and SendFile then copies instead.
func sendFile(sc syscall.Conn, f osFile, off, n int64) (done int64, handled bool, err error) {
	dst, err := sc.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	src, err := f.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	var serr error
	cerr := src.Control(func(sfd uintptr) {
		pos := off
		werr := dst.Write(func(dfd uintptr) bool {
			for done < n {
				k, err := syscall.Sendfile(int(dfd), int(sfd), &pos, int(min(n-done, sendFileMax)))
				if k > 0 {
					done += int64(k)
				}
				switch {
				case err == syscall.EINTR:
				case err == syscall.EAGAIN:
					return false
				case err != nil:
					serr = fmt.Errorf("vfs: sendfile %s at %d: %w", f.Name(), pos, err)
					return true
				case k == 0:
					serr = fmt.Errorf("vfs: sendfile %s at %d: %w", f.Name(), pos, io.ErrUnexpectedEOF)
					return true
				}
			}
			return true
		})
		if serr == nil {
			serr = werr
		}
	})
	if serr == nil {
		serr = cerr
	}
	return done, true, serr
}
