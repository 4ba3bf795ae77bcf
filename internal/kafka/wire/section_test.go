package wire

import (
	"bytes"
	"io"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// memSection is a Section over bytes in memory.
type memSection struct {
	b        []byte
	cut      bool
	released bool
}

func (s *memSection) Len() int { return len(s.b) }
func (s *memSection) SendTo(w io.Writer, from, to int) error {
	_, err := w.Write(s.b[from:to])
	return err
}
func (s *memSection) AppendTo(dst []byte, from, to int) ([]byte, error) {
	return append(dst, s.b[from:to]...), nil
}
func (s *memSection) Intact() bool { return !s.cut }
func (s *memSection) Release()     { s.released = true }

// sectionFetch is a Fetch response of two topics, the records of three of its partitions given as
// Sections (one of them long enough for a two-byte length varint), one partition with none.
func sectionFetch(version int16) (*kmsg.FetchResponse, [][]byte, []placedSection) {
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(version)
	recs := [][]byte{bytes.Repeat([]byte{1}, 100), bytes.Repeat([]byte{2}, 300), bytes.Repeat([]byte{3}, 7)}
	var secs []placedSection
	k := 0
	for ti, name := range []string{"a", "b"} {
		t := kmsg.NewFetchResponseTopic()
		t.Topic = name
		for pi := range 2 {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition, p.HighWatermark = int32(pi), int64(10*ti+pi)
			p.RecordBatches = []byte{}
			if !(ti == 1 && pi == 0) {
				secs = append(secs, placedSection{topic: ti, partition: pi, s: &memSection{b: recs[k]}})
				k++
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, recs, secs
}

// TestWireSectionsFrameAsCopied checks that a response framed around Sections, sent over TCP or
// appended to a buffer, is byte for byte the one encoded with the records in place, for flexible and
// older versions.
func TestWireSectionsFrameAsCopied(t *testing.T) {
	for _, v := range []int16{4, 11, 12, 16} {
		resp, recs, secs := sectionFetch(v)
		want, _, _ := sectionFetch(v)
		for i, p := range secs {
			want.Topics[p.topic].Partitions[p.partition].RecordBatches = recs[i]
		}
		wantFrame, err := appendResponse(nil, 7, want)
		if err != nil {
			t.Fatal(err)
		}
		f, err := frameSections(nil, 7, resp, secs)
		if err != nil {
			t.Fatalf("v%d: frameSections: %v", v, err)
		}
		got, err := f.appendTo(nil)
		if err != nil || !bytes.Equal(got, wantFrame) || f.size() != len(wantFrame) {
			t.Fatalf("v%d: appended frame differs (%v): %d bytes, want %d", v, err, len(got), len(wantFrame))
		}
		w, r := tcpPair(t)
		errc := make(chan error, 1)
		go func() { errc <- f.sendTo(w) }()
		sent := make([]byte, len(wantFrame))
		if _, err := io.ReadFull(r, sent); err != nil || !bytes.Equal(sent, wantFrame) {
			t.Fatalf("v%d: sent frame differs (%v)", v, err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("v%d: sendTo: %v", v, err)
		}
	}
}

// TestWireSectionsCutWithholdsLastByte checks that a Section cut while being sent leaves the frame one
// byte short, so that the client never reads it whole.
func TestWireSectionsCutWithholdsLastByte(t *testing.T) {
	resp, _, secs := sectionFetch(12)
	f, err := frameSections(nil, 7, resp, secs)
	if err != nil {
		t.Fatal(err)
	}
	secs[0].s.(*memSection).cut = true
	w, r := tcpPair(t)
	if err := f.sendTo(w); err != errSectionCut {
		t.Fatalf("sendTo: %v, want errSectionCut", err)
	}
	_ = w.Close()
	got, _ := io.ReadAll(r)
	if len(got) >= f.size() {
		t.Fatalf("read %d bytes of a %d-byte frame", len(got), f.size())
	}
	if _, err := f.appendTo(nil); err != errSectionCut {
		t.Fatalf("appendTo: %v, want errSectionCut", err)
	}
}

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
