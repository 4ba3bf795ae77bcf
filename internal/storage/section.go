package storage

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/vfs"
)

// Section is a range of whole batches in one segment file, held open so that its bytes can go from the
// file to a socket (vfs.SendFile) without being read into memory first. It holds a reference to the
// segment: retention, a roll or a compaction swap that deletes the file meanwhile leaves the open handle,
// and so the bytes, in place until Release. Only a truncation cuts a file in place; Intact reports
// whether one happened since the section was taken, which the sender checks after sending and before the
// last byte of its response leaves (docs/storage.md, "Zero-copy reads").
type Section struct {
	log  *Log
	seg  *segment
	f    vfs.File
	pos  int64
	n    int
	next int64
	cuts uint64
	once sync.Once
}

// ReadSection is Read, except that the batches stay in the file: it returns the section Read would have
// copied (the same bytes), or nil where Read returns an empty slice. A non-nil Section must be released.
func (l *Log) ReadSection(offset int64, maxBytes int, maxOffset int64) (*Section, error) {
	for {
		c := l.stable()
		cuts := l.cuts.Load()
		s, err := l.section(l.view.Load(), offset, maxBytes, maxOffset)
		if l.unchangedSince(c) {
			if s != nil {
				s.cuts = cuts
			}
			return s, err
		}
		if s != nil {
			s.Release()
		}
	}
}

func (l *Log) section(v *view, offset int64, maxBytes int, maxOffset int64) (*Section, error) {
	if v.closed {
		return nil, ErrClosed
	}
	if offset < v.start || offset > v.end {
		return nil, fmt.Errorf("%w: %d not in [%d, %d]", ErrOffsetOutOfRange, offset, v.start, v.end)
	}
	if offset == v.end || offset >= maxOffset {
		return nil, nil
	}
	for i := v.find(offset); i < len(v.segs); i++ {
		s, found, err := l.sectionOf(v, i, offset, maxBytes, maxOffset)
		if err != nil || found {
			return s, err
		}
	}
	return nil, nil
}

// sectionOf finds in segment i of v the batches readSegment would copy, by their headers alone.
func (l *Log) sectionOf(v *view, i int, offset int64, maxBytes int, maxOffset int64) (*Section, bool, error) {
	seg, size := v.segs[i], v.size(i)
	idx, _, err := v.indexes(i)
	if err != nil {
		return nil, false, err
	}
	f, err := seg.acquire()
	if err != nil {
		return nil, false, err
	}
	r := newSeekReader(f, size)
	pos, h, err := seekOffset(r, lookupPosition(idx, seg.base, offset), size, offset)
	if err != nil || pos < 0 || h.LastOffset() >= maxOffset {
		seg.release()
		return nil, err == nil && pos >= 0, err
	}
	limit := pos + min(max(int64(maxBytes), int64(h.Size())), size-pos)
	end, next := pos, offset
	for end+record.HeaderSize <= limit {
		b, err := r.read(end, record.HeaderSize)
		if err != nil {
			seg.release()
			return nil, false, fmt.Errorf("%w: %s: header at %d: %w", ErrCorruption, seg.path, end, err)
		}
		bh, err := record.ParseHeader(b)
		if err != nil || end+int64(bh.Size()) > limit || bh.LastOffset() >= maxOffset {
			break
		}
		end += int64(bh.Size())
		next = bh.NextOffset()
	}
	if end == pos {
		seg.release()
		return nil, false, fmt.Errorf("%w: %s: batch at %d does not parse", ErrCorruption, seg.path, pos)
	}
	return &Section{log: l, seg: seg, f: f, pos: pos, n: int(end - pos), next: next}, true, nil
}

// Len is the section's length in bytes.
func (s *Section) Len() int { return s.n }

// NextOffset is the offset after the section's last batch.
func (s *Section) NextOffset() int64 { return s.next }

// SendTo writes the section's bytes [from, to) to w, by sendfile when w is a socket and the log is on
// the OS filesystem (vfs.SendFile).
func (s *Section) SendTo(w io.Writer, from, to int) error {
	_, err := vfs.SendFile(w, s.f, s.pos+int64(from), int64(to-from))
	return err
}

// AppendTo appends the section's bytes [from, to) to dst, read from the file.
func (s *Section) AppendTo(dst []byte, from, to int) ([]byte, error) {
	n := len(dst)
	dst = append(dst, make([]byte, to-from)...)
	k, err := s.f.ReadAt(dst[n:], s.pos+int64(from))
	if k < to-from {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return dst[:n], fmt.Errorf("%w: read %s at %d: %w", ErrCorruption, s.seg.path, s.pos+int64(from), err)
	}
	return dst, nil
}

// Intact reports whether no truncation cut the log's files since the section was taken, so that the
// bytes sent or read from it are the batches it was taken for.
func (s *Section) Intact() bool { return s.log.cuts.Load() == s.cuts }

// Release lets the segment's file close once nothing else holds it; later calls do nothing.
func (s *Section) Release() { s.once.Do(s.seg.release) }
