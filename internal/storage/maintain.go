package storage

import (
	"fmt"
	"slices"
	"time"

	"github.com/weir-mq/weir/internal/record"

	"github.com/weir-mq/weir/internal/vfs"
)

// Truncate drops every batch at and after end (follower truncation); a batch that straddles end is dropped
// whole, so the end offset may land below end. An end below the log start empties the log and restarts it at
// end. The cut is synced before Truncate returns.
func (l *Log) Truncate(end int64) error {
	l.settle()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waitJob()
	if err := l.writable(); err != nil {
		return err
	}
	if end >= l.act.b.next {
		return nil
	}
	if l.journaled() {
		if err := l.journalTruncate(end); err != nil {
			return err
		}
	}
	l.gen.Add(1)
	l.beginChange()
	defer l.endChange()
	if end <= l.start {
		if err := l.truncateFully(end); err != nil {
			return err
		}
	} else if err := l.truncateTo(end); err != nil {
		return err
	}
	if l.act.b.next < l.start {
		// the cut fell inside the batch holding the log start: nothing is left
		if err := l.truncateFully(l.start); err != nil {
			return err
		}
	}
	newEnd := l.act.b.next
	if l.epochs.truncateFromEnd(newEnd) {
		if err := l.writeEpochs(); err != nil {
			return err
		}
	}
	if l.rpSaved.offset > newEnd {
		if err := l.saveRecoveryPoint(durablePoint{offset: newEnd, base: l.act.seg.base, pos: l.act.b.size}); err != nil {
			return err
		}
	}
	l.publish()
	l.durMu.Lock()
	if l.durable.offset > newEnd {
		l.durable = durablePoint{offset: newEnd, base: l.act.seg.base, pos: l.act.b.size}
	}
	l.durMu.Unlock()
	l.afterTruncate(newEnd)
	return nil
}

// truncateTo cuts the log inside its segments: later segments are deleted and the segment holding end
// becomes the active one, cut at the batch reaching end.
func (l *Log) truncateTo(end int64) error {
	i, pos, _, err := l.cutPoint(end)
	if err != nil {
		return err
	}
	seg := l.segs[i]
	for _, s := range l.segs[i+1:] {
		s.kill()
		if err := l.removeSegmentFiles(s); err != nil {
			return l.fail("truncate", err)
		}
	}
	l.segs = l.segs[: i+1 : i+1]
	if seg != l.act.seg {
		if err := l.reactivate(i); err != nil {
			return err
		}
	}
	a := &l.act
	f, err := l.activeFile()
	if err != nil {
		return l.fail("truncate "+a.seg.path, err)
	}
	l.cuts.Add(1)
	if err := f.Truncate(pos); err != nil {
		return l.fail("truncate "+a.seg.path, err)
	}
	if err := f.Sync(); err != nil {
		return l.fail("fdatasync "+a.seg.path, err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail("sync dir "+l.dir, err)
	}
	if err := l.rewalkActive(pos); err != nil {
		return err
	}
	end = l.act.b.next
	l.act.txns = slices.DeleteFunc(slices.Clone(l.act.txns), func(e TxnIndexEntry) bool { return e.LastOffset >= end })
	return nil
}

// cutPoint finds where truncateTo(end) cuts: segment i, at position pos, which leaves the log ending at
// newEnd. Callers hold mu.
func (l *Log) cutPoint(end int64) (i int, pos, newEnd int64, err error) {
	v := l.view.Load()
	i = v.find(end)
	seg := l.segs[i]
	idx, _, err := v.indexes(i)
	if err != nil {
		return 0, 0, 0, err
	}
	f, err := seg.acquire()
	if err != nil {
		return 0, 0, 0, err
	}
	defer seg.release()
	r := newSegReader(f, v.size(i))
	pos, h, err := seekOffset(r, lookupPosition(idx, seg.base, end), v.size(i), end)
	if err != nil {
		return 0, 0, 0, err
	}
	if pos >= 0 {
		return i, pos, h.BaseOffset, nil
	}
	// every batch of the segment ends below end: the log keeps it whole and ends after its last batch
	newEnd = seg.base
	_, err = r.walk(0, v.size(i), false, func(h record.Header, _ int64) error {
		newEnd = h.NextOffset()
		return nil
	})
	return i, v.size(i), newEnd, err
}

// reactivate makes closed segment i the active one, under a new segment object so that readers holding an
// older view keep a consistent closed segment. Its index files are removed: the active index, and its
// transaction index, live in memory.
func (l *Log) reactivate(i int) error {
	old := l.segs[i]
	if l.act.seg != nil && l.act.seg != old {
		l.act.seg.kill()
	}
	seg := newSegment(l.fs, l.dir, old.base)
	f, err := l.fs.OpenAppend(seg.path)
	if err != nil {
		return l.fail("open "+seg.path, err)
	}
	seg.setFile(f)
	old.kill()
	for _, p := range []string{seg.indexPath(), seg.timeIndexPath(), seg.txnIndexPath()} {
		if err := l.fs.Remove(p); err != nil && !vfs.IsNotExist(err) {
			return l.fail("remove "+p, err)
		}
	}
	l.segs[i] = seg
	l.act = activeState{seg: seg, file: f, created: l.clock.Now(), jitter: l.rollJitter(), txns: old.txns}
	return nil
}

// rewalkActive rebuilds the active segment's in-memory indexes from its first size bytes.
func (l *Log) rewalkActive(size int64) error {
	a := &l.act
	a.b.interval = int64(l.cfg.IndexIntervalBytes)
	a.b.reset(a.seg.base)
	f, err := l.activeFile()
	if err != nil {
		return l.fail("read "+a.seg.path, err)
	}
	end, err := newSegReader(f, size).walk(0, size, false, a.b.track)
	if err != nil {
		return l.fail("read "+a.seg.path, err)
	}
	if end != size {
		return l.fail("read "+a.seg.path, fmt.Errorf("%w: batches end at %d of %d bytes", ErrCorruption, end, size))
	}
	return nil
}

// truncateFully deletes every segment and restarts the log empty at offset start.
func (l *Log) truncateFully(start int64) error {
	if err := l.saveStart(start); err != nil {
		return err
	}
	old := l.segs
	l.segs = nil
	for _, s := range old {
		s.kill()
		if err := l.removeSegmentFiles(s); err != nil {
			return l.fail("truncate", err)
		}
	}
	if err := l.newActive(start); err != nil {
		return err
	}
	l.start = start
	if l.epochs.truncateFromStart(start) {
		return l.writeEpochs()
	}
	return nil
}

func (l *Log) saveStart(start int64) error {
	if err := writeFileAtomic(l.fs, l.dir, startCheckpointName, formatInts(start)); err != nil {
		return l.fail("write "+startCheckpointName, err)
	}
	return nil
}

func (l *Log) saveRecoveryPoint(p durablePoint) error {
	if err := writeFileAtomic(l.fs, l.dir, recoveryCheckpointName, formatInts(p.offset, p.base, p.pos)); err != nil {
		return l.fail("write "+recoveryCheckpointName, err)
	}
	l.rpSaved = p
	return nil
}

// AdvanceStart moves the log start up to offset (DeleteRecords) and deletes the segments wholly below it.
// Offsets above the end offset give ErrOffsetOutOfRange; offsets at or below the start do nothing.
func (l *Log) AdvanceStart(offset int64) error {
	l.settle()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waitJob()
	if err := l.writable(); err != nil {
		return err
	}
	if offset > l.act.b.next {
		return fmt.Errorf("%w: %d above end %d", ErrOffsetOutOfRange, offset, l.act.b.next)
	}
	if offset <= l.start {
		return nil
	}
	if err := l.saveStart(offset); err != nil {
		return err
	}
	if err := l.voidJournal(); err != nil {
		return err
	}
	l.start = offset
	if l.epochs.truncateFromStart(offset) {
		if err := l.writeEpochs(); err != nil {
			return err
		}
	}
	n := 0
	for n+1 < len(l.segs) && l.segs[n+1].base <= offset {
		n++
	}
	return l.deleteOldest(n)
}

// deleteOldest deletes the n oldest (closed) segments and publishes the result.
func (l *Log) deleteOldest(n int) error {
	if n == 0 {
		l.publish()
		return nil
	}
	if err := l.voidJournal(); err != nil {
		return err
	}
	l.beginChange()
	defer l.endChange()
	dead := l.segs[:n]
	l.segs = l.segs[n:len(l.segs):len(l.segs)]
	l.start = max(l.start, l.segs[0].base)
	l.publish()
	for _, s := range dead {
		s.kill()
		if err := l.discardSegment(s); err != nil {
			return l.fail("delete segment", err)
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail("sync dir "+l.dir, err)
	}
	return nil
}

// Maintain does the periodic work the owner schedules: roll by age, retention by time and size (with the
// delete cleanup policy), the FlushInterval sync, the recovery point checkpoint, closing the files of
// segments nobody used since the previous call (the active one too once it is durable: parkIdleActive) and,
// with the compact cleanup policy, one bounded compaction pass (docs/storage.md, "Segments", "Compaction").
func (l *Log) Maintain() error {
	l.settle()
	j, err := l.maintain()
	if j != nil {
		j.run() // on the owner's goroutine, which schedules Maintain, so that its work is done when it returns
	}
	if err != nil {
		return err
	}
	return l.compact()
}

// maintain is Maintain's work under mu. The I/O of a roll by age and the recovery point checkpoint are left
// to a job, which the caller runs once mu is released.
func (l *Log) maintain() (*bgJob, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waitJob()
	if err := l.writable(); err != nil {
		return nil, err
	}
	now := l.clock.Now()
	if err := l.removeDueTrash(now); err != nil {
		return nil, err
	}
	if l.cfg.Delete {
		n, err := l.expiredSegments(now)
		if err != nil {
			return nil, err
		}
		if err := l.deleteOldest(n); err != nil {
			return nil, err
		}
	}
	var j *bgJob
	if l.expired() {
		var err error
		if j, err = l.roll(); err != nil {
			return nil, err
		}
		l.publish()
	}
	if l.cfg.Flush == FlushInterval && l.fileDurableOffset() < l.act.b.next && now.Sub(l.lastSync) >= l.cfg.FlushInterval {
		l.lastSync = now
		l.requestSync()
	}
	l.durMu.Lock()
	p := l.durable
	l.durMu.Unlock()
	if p.offset != l.rpSaved.offset && p.offset <= l.act.b.next {
		j = l.recoveryPointJob(j, p)
	}
	for _, s := range l.segs[:len(l.segs)-1] {
		s.dropIfIdle()
	}
	l.parkIdleActive()
	return j, nil
}

// expiredSegments counts the oldest closed segments that retention by time or size deletes.
func (l *Log) expiredSegments(now time.Time) (int, error) {
	closed := l.segs[:len(l.segs)-1]
	total := l.act.b.size
	for _, s := range closed {
		total += s.size
	}
	n := 0
	for ; n < len(closed); n++ {
		s := closed[n]
		if l.cfg.RetentionBytes >= 0 && total-s.size >= l.cfg.RetentionBytes {
			total -= s.size
			continue
		}
		if l.cfg.RetentionAge < 0 {
			break
		}
		old, err := l.segmentOlderThan(s, now.Add(-l.cfg.RetentionAge))
		if err != nil {
			return 0, err
		}
		if !old {
			break
		}
		total -= s.size
	}
	return n, nil
}

// segmentOlderThan judges a closed segment by its newest batch timestamp, or by when it was sealed (or last
// modified) if no batch carried a timestamp.
func (l *Log) segmentOlderThan(s *segment, cutoff time.Time) (bool, error) {
	ts, err := s.maxTimestamp()
	if err != nil {
		return false, err
	}
	if ts >= 0 {
		return ts < cutoff.UnixMilli(), nil
	}
	s.mu.Lock()
	sealed := s.sealedAt
	s.mu.Unlock()
	if sealed.IsZero() {
		st, err := l.fs.Stat(s.path)
		if err != nil {
			return false, fmt.Errorf("storage: stat %s: %w", s.path, err)
		}
		sealed = st.ModTime()
	}
	return !sealed.IsZero() && sealed.Before(cutoff), nil
}

// SegmentInfo describes one segment, for tools and for a compactor.
type SegmentInfo struct {
	BaseOffset int64
	NextOffset int64
	Size       int64
	Active     bool
	Path       string
}

// Segments lists the segments of the current view, oldest first; the last one is active.
func (l *Log) Segments() []SegmentInfo {
	v := l.view.Load()
	out := make([]SegmentInfo, len(v.segs))
	for i, s := range v.segs {
		out[i] = SegmentInfo{BaseOffset: s.base, Size: v.size(i), Path: s.path}
		if v.isActive(i) {
			out[i].NextOffset, out[i].Active = v.end, true
		} else {
			out[i].NextOffset = s.next
		}
	}
	return out
}

// ReplaceSegment atomically replaces the closed segment starting at base with data: whole valid batches whose
// offsets increase and lie in the segment's range, such as a compactor's output. Readers holding the old
// segment finish on it. A crash leaves either the old or the new segment (indexes are rebuilt if missing).
func (l *Log) ReplaceSegment(base int64, data []byte) error {
	l.settle()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waitJob()
	if err := l.writable(); err != nil {
		return err
	}
	i := slices.IndexFunc(l.segs[:len(l.segs)-1], func(s *segment) bool { return s.base == base })
	if i < 0 {
		return fmt.Errorf("%w: no closed segment at %d", ErrOffsetOutOfRange, base)
	}
	return l.replaceSegment(i, data)
}

// replaceSegment is ReplaceSegment for closed segment i. Callers hold mu and checked writable.
func (l *Log) replaceSegment(i int, data []byte) error {
	old := l.segs[i]
	base := old.base
	var b indexBuilder
	b.interval = int64(l.cfg.IndexIntervalBytes)
	b.reset(base)
	for pos := 0; pos < len(data); {
		batch, _, err := record.Split(data[pos:])
		if err != nil {
			return err
		}
		h, err := record.Validate(batch)
		if err != nil {
			return err
		}
		if h.LastOffset() >= old.next {
			return fmt.Errorf("%w: batch [%d, %d] outside segment [%d, %d)", ErrOffsetOutOfRange, h.BaseOffset, h.LastOffset(), base, old.next)
		}
		if err := b.track(h, int64(pos)); err != nil {
			return err
		}
		pos += len(batch)
	}
	b.finish()
	seg := newSegment(l.fs, l.dir, base)
	seg.size, seg.next = int64(len(data)), old.next
	if err := l.writeSynced(seg.path+cleanedSuffix, data); err != nil {
		return err
	}
	// from here on, the old segment's path names new bytes: a reader of an older view that opens it or its
	// indexes lazily would read them against the old segment's sizes
	l.beginChange()
	defer l.endChange()
	for _, p := range []string{seg.indexPath(), seg.timeIndexPath()} {
		if err := l.fs.Remove(p); err != nil && !vfs.IsNotExist(err) {
			return l.fail("remove "+p, err)
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail("sync dir "+l.dir, err)
	}
	if err := l.fs.Rename(seg.path+cleanedSuffix, seg.path); err != nil {
		return l.fail("rename "+seg.path, err)
	}
	if err := l.writeIndexFiles(seg, b.idx, b.tidx); err != nil {
		return err
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail("sync dir "+l.dir, err)
	}
	seg.seal(b.idx, b.tidx, b.maxTs, l.clock.Now())
	seg.txns, seg.txnFile, seg.txnDamaged = old.txns, old.txnFile, old.txnDamaged
	segs := slices.Clone(l.segs)
	segs[i] = seg
	l.segs = segs
	l.publish()
	old.kill()
	return nil
}
