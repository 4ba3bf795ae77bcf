package storage

import (
	"errors"
	"slices"
)

// The log's side of the journal (docs/storage.md, "Journal (as built)"): a log opened directly in the data
// directory of a journaled Syncer, under FlushAlways, adds a record of every append and truncation to the
// journal, and its appends are durable once a round made their records durable. Its segment files are
// synced at the Syncer's checkpoints (checkpointSync).

// journalAck is an append waiting for the journal: once record seq is durable, the log is durable up to end.
type journalAck struct{ seq, end int64 }

// journaled reports whether the log's appends go through the journal.
func (l *Log) journaled() bool { return l.jName != "" && FlushPolicy(l.policy.Load()) == FlushAlways }

// journalAppend adds the record of data, just written at pos of the active segment, holding the offsets
// from first to end (exclusive), unless the append goes past the journal, to be made durable by an
// fdatasync of the active segment in the next round instead (docs/storage.md, "Large appends past the
// journal"):
//   - any append while an earlier one past the journal is not yet durable in the segment files: the
//     journal never holds a record whose durability would vouch for bytes before it that it does not hold;
//   - an append of at least the syncer's directBytes, unless a truncation record of the log may still be
//     replayed: its replay cuts and removes what the log wrote after it, which the journal must then hold.
//
// Callers hold mu.
func (l *Log) journalAppend(data []byte, pos, first, end int64, epoch int32) error {
	l.syncer.markDirty(l)
	large := len(data) >= l.syncer.directBytes && l.jTrunc <= l.syncer.ckptSeq.Load()
	l.durMu.Lock()
	direct := large || l.jDirect.offset > l.durable.offset
	if direct {
		l.jDirect = durablePoint{offset: end, base: l.act.seg.base, pos: pos + int64(len(data))}
		l.jDirectSeg, l.jDirectGen = l.act.seg, l.gen.Load()
	}
	l.durMu.Unlock()
	if direct {
		return nil
	}
	seq, err := l.syncer.j.add(&journalRecord{kind: journalAppend, name: l.jName, offset: first, leaderEpoch: epoch,
		segmentBase: l.act.seg.base, position: int32(pos), data: data})
	if err != nil {
		return l.fail("journal", err)
	}
	l.jUsed = true
	l.durMu.Lock()
	l.jPend = append(l.jPend, journalAck{seq: seq, end: end})
	l.durMu.Unlock()
	return nil
}

// directOwed reports whether appends written past the journal wait for the segment files' fdatasync.
func (l *Log) directOwed() bool {
	l.durMu.Lock()
	defer l.durMu.Unlock()
	return l.jDirect.offset > l.durable.offset
}

// syncDirect runs on the syncer: it fdatasyncs the segment of the log's last append past the journal and
// moves the durable point to that append's end. It takes no lock that a writer holds while it waits for a
// round (Log.mu is held across waitJournal). A segment rolled meanwhile is synced by the roll's job, which
// lifts the durable point's barrier past it.
func (l *Log) syncDirect() {
	l.durMu.Lock()
	seg, point, gen := l.jDirectSeg, l.jDirect, l.jDirectGen
	l.durMu.Unlock()
	if seg == nil || l.offline.Load() != nil || l.fileDurableOffset() >= point.offset {
		return
	}
	_ = l.syncSegment(seg, point, gen) // a failure took the log offline
}

// journalWait adds r and waits until it is durable. Callers hold mu.
func (l *Log) journalWait(r *journalRecord) (int64, error) {
	l.syncer.markDirty(l)
	r.name = l.jName
	seq, err := l.syncer.j.add(r)
	if err == nil {
		err = l.syncer.waitJournal(seq)
	}
	if err != nil {
		return 0, l.fail("journal", err)
	}
	l.jUsed = true
	return seq, nil
}

// ackJournal runs after a round that made the journal durable up to seq, or failed with err: the appends
// whose records it covered are durable.
func (l *Log) ackJournal(seq int64, err error) {
	if err != nil {
		l.fail("journal", err)
		return
	}
	l.durMu.Lock()
	defer l.durMu.Unlock()
	n := 0
	for n < len(l.jPend) && l.jPend[n].seq <= seq {
		n++
	}
	if n == 0 {
		return
	}
	end := l.jPend[n-1].end
	l.jPend = slices.Delete(l.jPend, 0, n)
	if end > l.jDurable {
		l.jDurable = end
		close(l.durCh)
		l.durCh = make(chan struct{})
	}
}

// journalTruncate makes a record of the truncation to end durable before the files are cut, so that a
// replay after a crash cuts the log again instead of bringing back what it cut. The files are synced
// first: a replay starts at the log's last truncation record. Callers hold mu.
func (l *Log) journalTruncate(end int64) error {
	if err := l.syncActive(); err != nil {
		return err
	}
	r := journalRecord{kind: journalTruncate, offset: end, leaderEpoch: -1, segmentBase: end, position: -1}
	if end > l.start {
		i, pos, newEnd, err := l.cutPoint(end)
		if err != nil {
			return err
		}
		r.segmentBase, r.position = l.segs[i].base, int32(pos)
		if newEnd < l.start {
			// the cut falls inside the batch holding the log start: Truncate restarts the log empty there
			r.offset, r.segmentBase, r.position = l.start, l.start, -1
		}
	}
	seq, err := l.journalWait(&r)
	if err != nil {
		return err
	}
	l.jTrunc = seq
	l.durMu.Lock()
	defer l.durMu.Unlock()
	// every append before the truncation record is durable with it
	if n := len(l.jPend); n > 0 {
		l.jDurable = max(l.jDurable, l.jPend[n-1].end)
		l.jPend = nil
	}
	return nil
}

// afterTruncate lowers the journal's durable end, the end of the appends past it and the checkpointed
// end to the log's new end. Callers hold mu.
func (l *Log) afterTruncate(end int64) {
	l.durMu.Lock()
	l.jDurable = min(l.jDurable, end)
	if l.jDirect.offset > end {
		l.jDirect, l.jDirectSeg = durablePoint{}, nil
	}
	l.durMu.Unlock()
	if l.ckptEnd.Load() > end {
		l.ckptEnd.Store(end)
	}
}

// journalPoint records that the log's segments are durable up to its end, which voids its earlier records
// for a replay (Close, and a change of flush policy away from FlushAlways). Callers hold mu.
func (l *Log) journalPoint() (int64, error) {
	r := journalRecord{kind: journalPoint, offset: l.act.b.next, leaderEpoch: -1, segmentBase: l.act.seg.base,
		position: int32(l.act.b.size)}
	r.name = l.jName
	seq, err := l.syncer.j.add(&r)
	if err != nil {
		return 0, l.fail("journal", err)
	}
	l.jUsed = false
	return seq, nil
}

// syncActive makes the log's files durable up to its end: the background job waited for, the active
// segment fdatasync'd. Callers hold mu.
func (l *Log) syncActive() error {
	l.waitJob()
	if err := l.writable(); err != nil {
		return err
	}
	f, err := l.activeFile()
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return l.fail("fdatasync "+l.act.seg.path, err)
	}
	l.advanceDurable(durablePoint{offset: l.act.b.next, base: l.act.seg.base, pos: l.act.b.size}, l.gen.Load())
	return nil
}

// setFlushJournal is called by SetConfig before the flush policy changes from was to next: leaving
// FlushAlways syncs the segments and writes a point (the log's records stop here); entering it syncs them
// too, so that its first record follows durable bytes. Callers hold mu.
func (l *Log) setFlushJournal(was, next FlushPolicy) error {
	if l.jName == "" || was == next || (was != FlushAlways && next != FlushAlways) {
		return nil
	}
	if was != FlushAlways {
		return l.syncActive()
	}
	return l.voidJournal()
}

// voidJournal syncs the log's files and makes a point durable, so that a replay applies none of the
// records before it: before the log's records stop (a change of flush policy), and before the log start
// moves or segments are deleted from the front, which a replay of older records (a segment made again,
// a full truncation to a lower start) would undo. Nothing to do without records since the last point.
// Callers hold mu.
func (l *Log) voidJournal() error {
	if !l.jUsed {
		return nil
	}
	if err := l.syncActive(); err != nil {
		return err
	}
	seq, err := l.journalPoint()
	if err != nil {
		return err
	}
	if err := l.syncer.waitJournal(seq); err != nil {
		return l.fail("journal", err)
	}
	l.jTrunc = -1
	l.durMu.Lock()
	l.jPend = nil
	l.jDurable = max(l.jDurable, l.act.b.next)
	l.durMu.Unlock()
	return nil
}

// checkpointSync makes the log's segments durable up to its end for a checkpoint of the Syncer. A closed
// log synced them when it closed; an offline one cannot.
func (l *Log) checkpointSync() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return l.offlineErr()
	}
	l.waitJob()
	if err := l.writable(); err != nil {
		l.mu.Unlock()
		return err
	}
	seg, point, gen := l.act.seg, durablePoint{offset: l.act.b.next, base: l.act.seg.base, pos: l.act.b.size}, l.gen.Load()
	l.mu.Unlock()
	err := l.syncSegment(seg, point, gen)
	if errors.Is(err, errSegmentGone) {
		// a truncation cut and synced it, or Close synced it, unless the log went offline
		return l.offlineErr()
	}
	return err
}

// setCheckpointed records that the log's records below end, taken at generation gen, are all covered by a
// durable journal checkpoint, unless a truncation came in between: compaction stays below it.
func (l *Log) setCheckpointed(end int64, gen uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gen.Load() == gen && end > l.ckptEnd.Load() {
		l.ckptEnd.Store(end)
	}
}

// checkpointCapture returns the log's end offset and truncation generation, for setCheckpointed.
func (l *Log) checkpointCapture() (int64, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.act.b.next, l.gen.Load()
}

func (l *Log) offlineErr() error {
	if p := l.offline.Load(); p != nil {
		return *p
	}
	return nil
}
