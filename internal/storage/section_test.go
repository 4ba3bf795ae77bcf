package storage

import (
	"bytes"
	"io"
	"net"
	"testing"

	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/vfs"
)

// sectionLog is a log of 60 batches of 1 to 3 records in segments of 4 KiB, on fsys.
func sectionLog(t *testing.T, fsys vfs.FS, dir string) *Log {
	t.Helper()
	l := openLog(t, fsys, dir, testConfig(), newClock())
	t.Cleanup(func() { _ = l.Close() })
	for i := range 60 {
		if _, err := l.Append(batch(1+i%3, 150, int64(i)), 1); err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
	}
	if len(l.Segments()) < 4 {
		t.Fatalf("%d segments, want rolls", len(l.Segments()))
	}
	return l
}

// tcpPair returns both ends of a loopback TCP connection, so that SendTo takes the sendfile path.
func tcpPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	var lc net.ListenConfig
	ln, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var d net.Dialer
	c, err := d.DialContext(t.Context(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(); _ = s.Close() })
	return s.(*net.TCPConn), c.(*net.TCPConn)
}

// link is a loopback TCP connection the sections of a test are sent over, one after the other.
type link struct{ w, r *net.TCPConn }

func newLink(t *testing.T) link {
	w, r := tcpPair(t)
	return link{w: w, r: r}
}

// sent is what s sends over lk.
func sent(t *testing.T, lk link, s *Section) []byte {
	t.Helper()
	w, r := lk.w, lk.r
	errc := make(chan error, 1)
	go func() { errc <- s.SendTo(w, 0, s.Len()) }()
	got := make([]byte, s.Len())
	if _, err := io.ReadFull(r, got); err != nil {
		t.Fatalf("read sent bytes: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("SendTo: %v", err)
	}
	return got
}

// checkSection asserts that ReadSection gives exactly Read's bytes, sent over TCP and read into memory.
func checkSection(t *testing.T, lk link, l *Log, offset int64, maxBytes int, maxOffset int64) {
	t.Helper()
	want, werr := l.Read(offset, maxBytes, maxOffset)
	s, err := l.ReadSection(offset, maxBytes, maxOffset)
	if (werr == nil) != (err == nil) {
		t.Fatalf("ReadSection(%d, %d, %d): error %v, Read's %v", offset, maxBytes, maxOffset, err, werr)
	}
	if s == nil {
		if len(want) != 0 {
			t.Fatalf("ReadSection(%d, %d, %d): nothing, Read gave %d bytes", offset, maxBytes, maxOffset, len(want))
		}
		return
	}
	defer s.Release()
	got, err := s.AppendTo(nil, 0, s.Len())
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("ReadSection(%d, %d, %d) read %d bytes (%v), Read %d", offset, maxBytes, maxOffset, len(got), err, len(want))
	}
	if got := sent(t, lk, s); !bytes.Equal(got, want) {
		t.Fatalf("ReadSection(%d, %d, %d) sent %d bytes that differ from Read's %d", offset, maxBytes, maxOffset, len(got), len(want))
	}
	if !s.Intact() || s.NextOffset() != recordsNext(t, want) {
		t.Fatalf("intact %v, next %d, want %d", s.Intact(), s.NextOffset(), recordsNext(t, want))
	}
}

// recordsNext is the offset after the last batch of b.
func recordsNext(t *testing.T, b []byte) int64 {
	t.Helper()
	var next int64
	for len(b) > 0 {
		h, err := record.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		next = h.NextOffset()
		b = b[h.Size():]
	}
	return next
}

// TestLogReadSectionMatchesRead reads every offset with byte limits that cut between batches, across
// segment boundaries and with the bound (the high watermark) inside a batch, on the OS filesystem
// (sendfile) and the in-memory one (the copying fallback of vfs.SendFile).
func TestLogReadSectionMatchesRead(t *testing.T) {
	for name, fsys := range map[string]vfs.FS{"os": vfs.OS, "mem": newMem(t)} {
		t.Run(name, func(t *testing.T) {
			dir := "/data/t-0"
			if name == "os" {
				dir = t.TempDir() + "/t-0"
			}
			l := sectionLog(t, fsys, dir)
			lk := newLink(t)
			end := l.EndOffset()
			var bounds []int64
			for _, s := range l.Segments() {
				bounds = append(bounds, s.BaseOffset, s.BaseOffset-1, s.BaseOffset+1)
			}
			for off := int64(0); off <= end; off++ {
				for _, maxBytes := range []int{1, 300, 1000, 5000} {
					for _, maxOffset := range []int64{end, end - 1, off + 1, off + 3, 1 << 62} {
						checkSection(t, lk, l, off, maxBytes, maxOffset)
					}
				}
			}
			for _, off := range bounds {
				if off >= 0 {
					checkSection(t, lk, l, off, 1<<20, 1<<62)
				}
			}
		})
	}
}

// TestLogSectionOutlivesRetention takes a section, has its segment deleted (the log start moved past
// it, as retention does), and still sends the section's bytes from the open file.
func TestLogSectionOutlivesRetention(t *testing.T) {
	l := sectionLog(t, vfs.OS, t.TempDir()+"/t-0")
	want, err := l.Read(0, 1<<20, 1<<62)
	if err != nil {
		t.Fatal(err)
	}
	s, err := l.ReadSection(0, 1<<20, 1<<62)
	if err != nil || s == nil {
		t.Fatalf("ReadSection: %v", err)
	}
	defer s.Release()
	path := l.Segments()[0].Path
	if err := l.AdvanceStart(l.Segments()[2].BaseOffset); err != nil {
		t.Fatal(err)
	}
	if _, err := vfs.OS.Stat(path); !vfs.IsNotExist(err) {
		t.Fatalf("segment %s still there: %v", path, err)
	}
	if got := sent(t, newLink(t), s); !bytes.Equal(got, want) || !s.Intact() {
		t.Fatalf("sent %d bytes after the segment's deletion, want the %d read before (intact %v)", len(got), len(want), s.Intact())
	}
}

// TestLogSectionCutByTruncation shows a section of the active segment no longer intact once a
// truncation cuts the file it lies in, and one taken after the cut intact.
func TestLogSectionCutByTruncation(t *testing.T) {
	l := sectionLog(t, vfs.OS, t.TempDir()+"/t-0")
	segs := l.Segments()
	last := segs[len(segs)-1].BaseOffset
	s, err := l.ReadSection(last, 1<<20, 1<<62)
	if err != nil || s == nil {
		t.Fatalf("ReadSection: %v", err)
	}
	defer s.Release()
	if err := l.Truncate(last + 1); err != nil {
		t.Fatal(err)
	}
	if s.Intact() {
		t.Fatal("section intact after the truncation that cut its file")
	}
	after, err := l.ReadSection(0, 1<<20, 1<<62)
	if err != nil || after == nil {
		t.Fatalf("ReadSection after the cut: %v", err)
	}
	defer after.Release()
	if !after.Intact() {
		t.Fatal("section taken after the cut is not intact")
	}
}
