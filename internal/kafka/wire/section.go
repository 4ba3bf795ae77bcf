package wire

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Section is the record bytes of one fetched partition left where they are stored (a range of a segment
// file) until the connection's writer sends them: on a plaintext TCP connection from the file to the
// socket (sendfile), otherwise read straight into the pooled buffer the response is written from, so
// that no buffer holds them in between.
type Section interface {
	// Len is the number of bytes.
	Len() int
	// SendTo writes bytes [from, to) to w.
	SendTo(w io.Writer, from, to int) error
	// AppendTo appends bytes [from, to) to dst.
	AppendTo(dst []byte, from, to int) ([]byte, error)
	// Intact reports whether the bytes sent or read so far are still those the Section was taken
	// for; it is asked after the last of them was read and before the response's last byte is sent.
	Intact() bool
	// Release says the Section is no longer needed.
	Release()
}

// errSectionCut says a Section's bytes were cut (a log truncation) while they were being sent: the
// response's last byte is withheld and the connection closed, so that no client sees them.
var errSectionCut = errors.New("wire: fetched records truncated while being sent")

// placedSection is one Section with the place of its partition in the Fetch response.
type placedSection struct {
	topic, partition int
	s                Section
}

// sections collects the Sections a Reply attaches to its response. The writer has one, reused for
// every Reply it calls, and reaches the Reply through the context.
type sections struct {
	list []placedSection
}

type sectionsKey struct{}

// TakesSections reports whether a Reply called with ctx may attach Sections to a Fetch response: only
// the connection's writer offers that (not a Reply called while the connection closes).
func TakesSections(ctx context.Context) bool {
	_, ok := ctx.Value(sectionsKey{}).(*sections)
	return ok
}

// AttachSection makes s the records of resp.Topics[topic].Partitions[partition] of the Fetch response
// the Reply called with ctx returns; that partition's RecordBatches must be empty. The writer releases
// s once the response is written or the connection failed. With a ctx that does not take Sections
// (TakesSections), s is released at once.
func AttachSection(ctx context.Context, topic, partition int, s Section) {
	ss, ok := ctx.Value(sectionsKey{}).(*sections)
	if !ok {
		s.Release()
		return
	}
	ss.list = append(ss.list, placedSection{topic: topic, partition: partition, s: s})
}

// SectionBytes is the length of the Sections attached so far under ctx to the topic at index topic of
// the response, for byte counts that would otherwise read RecordBatches.
func SectionBytes(ctx context.Context, topic int) int {
	ss, ok := ctx.Value(sectionsKey{}).(*sections)
	if !ok {
		return 0
	}
	n := 0
	for _, p := range ss.list {
		if p.topic == topic {
			n += p.s.Len()
		}
	}
	return n
}

// release releases every attached Section and empties the list.
func (ss *sections) release() {
	for i, p := range ss.list {
		p.s.Release()
		ss.list[i] = placedSection{}
	}
	ss.list = ss.list[:0]
}

// markerSecret makes the placeholders of a sectioned response (frameSections) unguessable, so that no
// name or value a client chose can be taken for one.
var markerSecret = func() [markerLen - 4]byte {
	var b [markerLen - 4]byte
	_, _ = rand.Read(b[:])
	return b
}()

// markerLen is the length of one placeholder: markerSecret and the Section's index.
const markerLen = 16

// sectionedFrame is a Fetch response frame whose record bytes are still in their Sections: head holds
// every other byte, with the size prefix counting the Sections, and Section k goes at head[at[k]].
type sectionedFrame struct {
	head []byte
	at   []int
	secs []placedSection
}

// frameSections encodes resp (a FetchResponse at its version) with a placeholder in the RecordBatches
// of each Section's partition, then takes the placeholders out of the encoding, writing each
// partition's real length prefix, so that kmsg's encoder, which only knows byte slices, still frames
// the response. The encoding holds no record bytes, so it is small; placeholders are found in partition
// order, each behind the length prefix of its 16 bytes.
func frameSections(dst []byte, correlationID int32, resp kmsg.Response, secs []placedSection) (sectionedFrame, error) {
	fr, ok := resp.(*kmsg.FetchResponse)
	if !ok {
		return sectionedFrame{}, fmt.Errorf("%w: sections on key %d", errWrongReply, resp.Key())
	}
	slices.SortFunc(secs, func(a, b placedSection) int {
		if a.topic != b.topic {
			return a.topic - b.topic
		}
		return a.partition - b.partition
	})
	markers := make([]byte, markerLen*len(secs))
	for k, p := range secs {
		m := markers[k*markerLen : (k+1)*markerLen]
		copy(m, markerSecret[:])
		binary.BigEndian.PutUint32(m[len(markerSecret):], uint32(k))
		fr.Topics[p.topic].Partitions[p.partition].RecordBatches = m
	}
	enc, err := appendResponse(nil, correlationID, resp)
	if err != nil {
		return sectionedFrame{}, err
	}
	flexible := resp.IsFlexible()
	f := sectionedFrame{head: dst, at: make([]int, len(secs)), secs: secs}
	from, total := 0, 0
	for k, p := range secs {
		m := markers[k*markerLen : (k+1)*markerLen]
		fr.Topics[p.topic].Partitions[p.partition].RecordBatches = nil
		i := bytes.Index(enc[from:], m)
		if i < 0 {
			return sectionedFrame{}, fmt.Errorf("%w: section %d not found", errMalformedResponse, k)
		}
		i += from
		n := p.s.Len()
		if flexible {
			if i < 1 || enc[i-1] != markerLen+1 {
				return sectionedFrame{}, fmt.Errorf("%w: section %d has no length", errMalformedResponse, k)
			}
			f.head = append(f.head, enc[from:i-1]...)
			f.head = binary.AppendUvarint(f.head, uint64(n)+1)
		} else {
			if i < 4 || binary.BigEndian.Uint32(enc[i-4:]) != markerLen {
				return sectionedFrame{}, fmt.Errorf("%w: section %d has no length", errMalformedResponse, k)
			}
			f.head = append(f.head, enc[from:i-4]...)
			f.head = binary.BigEndian.AppendUint32(f.head, uint32(n))
		}
		f.at[k] = len(f.head)
		from = i + markerLen
		total += n
	}
	f.head = append(f.head, enc[from:]...)
	size := len(f.head) - sizeLen + total
	if size > math.MaxInt32 {
		return sectionedFrame{}, fmt.Errorf("%w: %d bytes", errResponseTooLarge, size)
	}
	binary.BigEndian.PutUint32(f.head, uint32(size))
	return f, nil
}

// intact reports whether every Section is still intact.
func (f *sectionedFrame) intact() bool {
	for _, p := range f.secs {
		if !p.s.Intact() {
			return false
		}
	}
	return true
}

// sendTo writes the frame to a TCP connection: the head's pieces from memory and the Sections from
// their files (sendfile), in order. The last Section's last byte is read into memory and sent with the
// rest of the head only after every Section proved intact, so that a cut Section never reaches the
// client as a whole frame.
func (f *sectionedFrame) sendTo(tc *net.TCPConn) error {
	prev := 0
	last := len(f.secs) - 1
	for k, p := range f.secs {
		if _, err := tc.Write(f.head[prev:f.at[k]]); err != nil {
			return err
		}
		end := p.s.Len()
		if k == last {
			end--
		}
		if err := p.s.SendTo(tc, 0, end); err != nil {
			return err
		}
		prev = f.at[k]
	}
	s := f.secs[last].s
	tail, err := s.AppendTo(make([]byte, 0, 1+len(f.head)-prev), s.Len()-1, s.Len())
	if err != nil {
		return err
	}
	if !f.intact() {
		return errSectionCut
	}
	_, err = tc.Write(append(tail, f.head[prev:]...))
	return err
}

// appendTo appends the whole frame to dst, reading the Sections into it, and checks afterwards that
// they were intact.
func (f *sectionedFrame) appendTo(dst []byte) ([]byte, error) {
	prev := 0
	var err error
	for k, p := range f.secs {
		dst = append(dst, f.head[prev:f.at[k]]...)
		if dst, err = p.s.AppendTo(dst, 0, p.s.Len()); err != nil {
			return dst, err
		}
		prev = f.at[k]
	}
	dst = append(dst, f.head[prev:]...)
	if !f.intact() {
		return dst, errSectionCut
	}
	return dst, nil
}

// size is the length of the whole frame.
func (f *sectionedFrame) size() int {
	n := len(f.head)
	for _, p := range f.secs {
		n += p.s.Len()
	}
	return n
}
