package storage

import (
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
	for {
		c := l.stable()
		b, err := l.read(l.view.Load(), dst, offset, maxBytes, maxOffset)
		if l.unchangedSince(c) {
			return b, err
		}
	}
}

// stable waits until no change to a published view's bytes is under way and returns the change count, for
// unchangedSince. Readers never hold mu, so a change in progress is waited out on mu, which it holds.
//
// Readers take a view without a lock, and the writer may cut, replace or delete the files that view names
// while they read: a read that overlaps such a change may fail, or succeed with bytes the change was
// rewriting. So a read's outcome, error or data, counts only if the change count is the same even number
// before the view is loaded and after the read; otherwise the read is made again on the new view. Each
// retry follows a change that completed while the read ran, and changes are rare and slow next to a read
// (truncation, retention, a compaction swap, each with a sync), so a read that lost the race is retried
// however often it loses, and none is ever reported as corruption for it.
func (l *Log) stable() uint64 {
	for {
		c := l.changes.Load()
		if c%2 == 0 {
			return c
		}
		l.mu.Lock()
		l.mu.Unlock() // an empty critical section: it only waits for the change to end
	}
}

// unchangedSince reports whether no change began since stable returned c.
func (l *Log) unchangedSince(c uint64) bool { return l.changes.Load() == c }

// beginChange and endChange bracket a writer's change to bytes or files that a published view refers to.
// Callers hold mu.
func (l *Log) beginChange() { l.changes.Add(1) }
func (l *Log) endChange()   { l.changes.Add(1) }

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
	for {
		c := l.stable()
		off, ok, err := l.offsetForTime(l.view.Load(), ts)
		if l.unchangedSince(c) {
			return off, ok, err
		}
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
// such as producer sequences. It reads headers in chunks and hands fn only those of a chunk that no
// change overlapped (stable); a chunk that raced one is read again from the same offset, so fn sees each
// batch once. Batches that retention deletes meanwhile are skipped, and a truncation below the scan ends it.
func (l *Log) ScanBatches(from int64, fn func(h record.Header) bool) error {
	hs := make([]record.Header, 0, scanChunk)
	first := true
	for {
		c := l.stable()
		v := l.view.Load()
		var done bool
		var err error
		switch {
		case v.closed:
			err = ErrClosed
		case first && (from < v.start || from > v.end):
			err = fmt.Errorf("%w: %d not in [%d, %d]", ErrOffsetOutOfRange, from, v.start, v.end)
		case from >= v.end:
			hs, done = hs[:0], true
		default:
			hs, done, err = scanHeaders(v, max(from, v.start), hs[:0])
		}
		if !l.unchangedSince(c) {
			continue
		}
		if err != nil {
			return err
		}
		first = false
		for _, h := range hs {
			if !fn(h) {
				return nil
			}
		}
		if done {
			return nil
		}
		from = hs[len(hs)-1].NextOffset()
	}
}

// scanChunk is how many batch headers ScanBatches reads before it checks that no change overlapped them.
const scanChunk = 1024

// scanHeaders appends to hs the headers of v's batches whose last offset is at or after from, in offset
// order, until hs holds scanChunk of them; done says it reached the view's end first.
func scanHeaders(v *view, from int64, hs []record.Header) ([]record.Header, bool, error) {
	collect := func(h record.Header) bool {
		hs = append(hs, h)
		return len(hs) < scanChunk
	}
	for i := v.find(from); i < len(v.segs); i++ {
		more, err := scanSegment(v, i, from, collect)
		if err != nil || !more {
			return hs, false, err
		}
	}
	return hs, true, nil
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
