package storage

import (
	"errors"
	"fmt"

	"github.com/weir-mq/weir/internal/record"
)

// Read returns whole batches starting with the one that contains offset (it may start before offset), up to
// maxBytes but always at least one whole batch, and only batches whose last offset is below maxOffset. It reads
// from one segment. It returns ErrOffsetOutOfRange outside [StartOffset, EndOffset] and an empty slice at the
// end. It never blocks Append and sees only batches below the published end offset.
func (l *Log) Read(offset int64, maxBytes int, maxOffset int64) ([]byte, error) {
	return l.ReadInto(nil, offset, maxBytes, maxOffset)
}

// ReadInto is Read into dst's storage when it is large enough (a fresh slice otherwise), so that a
// sequential reader can reuse one buffer as a file copy does. The result aliases dst and is valid until
// dst is reused.
func (l *Log) ReadInto(dst []byte, offset int64, maxBytes int, maxOffset int64) ([]byte, error) {
	for attempt := 0; ; attempt++ {
		v := l.view.Load()
		b, err := l.read(v, dst, offset, maxBytes, maxOffset)
		if err != nil && attempt < 3 && (errors.Is(err, errSegmentGone) || l.superseded(v)) {
			continue
		}
		if errors.Is(err, errSegmentGone) {
			return nil, ErrOffsetOutOfRange
		}
		return b, err
	}
}

// superseded reports whether a newer view than v has been published, once any change the writer is making
// now (a truncation cuts the file before it publishes the shorter view) is complete. Readers call it only
// after a failed read, to tell a race with a truncation from real damage.
func (l *Log) superseded(v *view) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.view.Load() != v
}

func (l *Log) read(v *view, dst []byte, offset int64, maxBytes int, maxOffset int64) ([]byte, error) {
	if v.closed {
		return nil, ErrClosed
	}
	if offset < v.start || offset > v.end {
		return nil, fmt.Errorf("%w: %d not in [%d, %d]", ErrOffsetOutOfRange, offset, v.start, v.end)
	}
	if offset == v.end || offset >= maxOffset {
		return []byte{}, nil
	}
	for i := v.find(offset); i < len(v.segs); i++ {
		b, found, err := readSegment(v, i, dst, offset, maxBytes, maxOffset)
		if err != nil || found {
			return b, err
		}
	}
	return []byte{}, nil
}

// readSegment reads from segment i of v into dst (or a fresh slice when dst is too small); found is false
// if no batch there reaches offset.
func readSegment(v *view, i int, dst []byte, offset int64, maxBytes int, maxOffset int64) ([]byte, bool, error) {
	seg, size := v.segs[i], v.size(i)
	idx, _, err := v.indexes(i)
	if err != nil {
		return nil, false, err
	}
	f, err := seg.acquire()
	if err != nil {
		return nil, false, err
	}
	defer seg.release()
	r := newSeekReader(f, size)
	pos, h, err := seekOffset(r, lookupPosition(idx, seg.base, offset), size, offset)
	if err != nil || pos < 0 {
		return nil, false, err
	}
	if h.LastOffset() >= maxOffset {
		return []byte{}, true, nil
	}
	n := max(int64(maxBytes), int64(h.Size()))
	n = min(n, size-pos)
	buf := dst[:cap(dst)]
	if int64(len(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := f.ReadAt(buf, pos); err != nil {
		return nil, false, fmt.Errorf("%w: read %s at %d: %w", ErrCorruption, seg.path, pos, err)
	}
	end := 0
	for end < len(buf) {
		bh, err := record.ParseHeader(buf[end:])
		if err != nil || end+bh.Size() > len(buf) || bh.LastOffset() >= maxOffset {
			break
		}
		end += bh.Size()
	}
	if end == 0 {
		return nil, false, fmt.Errorf("%w: %s: batch at %d does not parse", ErrCorruption, seg.path, pos)
	}
	return buf[:end:end], true, nil
}

// seekOffset scans batch headers from pos for the first batch whose last offset reaches offset; pos -1 if none.
func seekOffset(r *segReader, pos, size, offset int64) (int64, record.Header, error) {
	for pos < size {
		h, err := r.header(pos)
		if err != nil {
			return -1, record.Header{}, fmt.Errorf("%w: header at %d: %w", ErrCorruption, pos, err)
		}
		if h.LastOffset() >= offset {
			return pos, h, nil
		}
		pos += int64(h.Size())
	}
	return -1, record.Header{}, nil
}

// OffsetForTime returns the offset (at least the log start) of the first record whose timestamp is at or after
// ts, and false if there is none. The index finds the batch; the batch's records are then decoded (decompressed
// if need be) to find the record, as Kafka does. A batch stamped with LogAppendTime, or one whose records cannot
// be decoded, answers with its base offset.
func (l *Log) OffsetForTime(ts int64) (int64, bool, error) {
	for attempt := 0; ; attempt++ {
		off, ok, err := l.offsetForTime(l.view.Load(), ts)
		if errors.Is(err, errSegmentGone) && attempt < 3 {
			continue
		}
		return off, ok, err
	}
}

func (l *Log) offsetForTime(v *view, ts int64) (int64, bool, error) {
	if v.closed {
		return 0, false, ErrClosed
	}
	for i, seg := range v.segs {
		segMax, err := v.maxTimestamp(i)
		if err != nil {
			return 0, false, err
		}
		if segMax < ts {
			continue
		}
		idx, tidx, err := v.indexes(i)
		if err != nil {
			return 0, false, err
		}
		from := int64(0)
		if o := lookupTime(tidx, seg.base, ts); o >= 0 {
			from = lookupPosition(idx, seg.base, o)
		}
		off, found, err := scanTime(seg, v.size(i), from, ts)
		if err != nil {
			return 0, false, err
		}
		if found {
			return max(off, v.start), true, nil
		}
	}
	return 0, false, nil
}

func scanTime(seg *segment, size, pos, ts int64) (int64, bool, error) {
	f, err := seg.acquire()
	if err != nil {
		return 0, false, err
	}
	defer seg.release()
	r := newSegReader(f, size)
	for pos < size {
		h, err := r.header(pos)
		if err != nil {
			return 0, false, fmt.Errorf("%w: %s: header at %d: %w", ErrCorruption, seg.path, pos, err)
		}
		if h.MaxTimestamp >= ts {
			b, err := r.read(pos, h.Size())
			if err != nil {
				return 0, false, fmt.Errorf("%w: %s: batch at %d: %w", ErrCorruption, seg.path, pos, err)
			}
			return firstAtOrAfter(h, b, ts), true, nil
		}
		pos += int64(h.Size())
	}
	return 0, false, nil
}

// ScanBatches calls fn with the header of every batch whose last offset is at or after from, in offset order,
// up to the end offset at the time of the call, until fn returns false. It is meant for rebuilding state
// such as producer sequences at startup.
func (l *Log) ScanBatches(from int64, fn func(h record.Header) bool) error {
	v := l.view.Load()
	if v.closed {
		return ErrClosed
	}
	if from < v.start || from > v.end {
		return fmt.Errorf("%w: %d not in [%d, %d]", ErrOffsetOutOfRange, from, v.start, v.end)
	}
	for i := v.find(from); i < len(v.segs); i++ {
		more, err := scanSegment(v, i, from, fn)
		if err != nil {
			if errors.Is(err, errSegmentGone) {
				return fmt.Errorf("%w: segment deleted during scan", ErrOffsetOutOfRange)
			}
			return err
		}
		if !more {
			return nil
		}
	}
	return nil
}

func scanSegment(v *view, i int, from int64, fn func(h record.Header) bool) (bool, error) {
	seg, size := v.segs[i], v.size(i)
	idx, _, err := v.indexes(i)
	if err != nil {
		return false, err
	}
	f, err := seg.acquire()
	if err != nil {
		return false, err
	}
	defer seg.release()
	r := newSegReader(f, size)
	for pos := lookupPosition(idx, seg.base, from); pos < size; {
		h, err := r.header(pos)
		if err != nil {
			return false, fmt.Errorf("%w: %s: header at %d: %w", ErrCorruption, seg.path, pos, err)
		}
		if h.LastOffset() >= from && !fn(h) {
			return false, nil
		}
		pos += int64(h.Size())
	}
	return true, nil
}

// firstAtOrAfter returns the offset of the first record of batch b whose timestamp is at or after ts; the
// caller knows the batch's max timestamp is. It falls back to the batch's base offset when the records carry
// no timestamps of their own (LogAppendTime) or cannot be decoded.
func firstAtOrAfter(h record.Header, b []byte, ts int64) int64 {
	if h.LogAppendTime() {
		return h.BaseOffset
	}
	_, recs, ok := batchRecords(b)
	if !ok {
		return h.BaseOffset
	}
	for _, rec := range recs {
		if h.BaseTimestamp+rec.TimestampDelta >= ts {
			return h.BaseOffset + int64(rec.OffsetDelta)
		}
	}
	return h.BaseOffset
}
