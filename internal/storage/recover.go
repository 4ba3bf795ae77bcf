package storage

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/vfs"
)

// Recovery is what opening a log found in its directory.
type Recovery struct {
	// Existing is set when the directory already held segments: the log is not a new one.
	Existing bool
	// Unclean is set when such a log had no clean-shutdown marker, so its active segment was walked
	// batch by batch (docs/storage.md, "Recovery").
	Unclean bool
	// TruncatedBytes counts the bytes of torn or invalid tail that were cut off.
	TruncatedBytes int64
}

// Recovery returns what Open found in the log's directory.
func (l *Log) Recovery() Recovery { return l.recovered }

// recover loads the directory into the writer's state (docs/storage.md, "Recovery").
func (l *Log) recover() error {
	names, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return fmt.Errorf("storage: list %s: %w", l.dir, err)
	}
	clean, bases, err := l.sweep(names)
	if err != nil {
		return err
	}
	l.start = l.readStart()
	if len(bases) > 0 && bases[0] > l.start {
		l.start = bases[0]
	}
	bases, err = l.dropBelowStart(bases)
	if err != nil {
		return err
	}
	epochsOK := l.readEpochs()
	// A log with no segment yet (a new replica) starts with one empty segment, which newActive makes
	// durable; there is nothing else to write or sync for it unless a checkpoint says otherwise.
	fresh := len(bases) == 0
	l.recovered = Recovery{Existing: !fresh, Unclean: !fresh && !clean}
	if fresh {
		if err := l.newActive(l.start); err != nil {
			return err
		}
	} else {
		if err := l.loadClosed(bases[:len(bases)-1], bases[len(bases)-1]); err != nil {
			return err
		}
		if err := l.loadActive(bases[len(bases)-1], clean); err != nil {
			return err
		}
	}
	end := l.act.b.next
	if l.start > end {
		if err := l.truncateFully(l.start); err != nil {
			return err
		}
		end = l.start
	}
	if !epochsOK {
		l.rebuildEpochs()
	}
	// a missing epoch checkpoint reads as empty: an empty log with no epochs need not write one
	if l.epochs.truncateFromEnd(end) || !epochsOK && !(fresh && len(l.epochs.entries) == 0) {
		if err := l.writeEpochs(); err != nil {
			return err
		}
	}
	return l.finishRecovery(clean, fresh, end)
}

// sweep removes leftovers of interrupted writes and returns whether the log was shut down cleanly and the
// sorted base offsets of its segments.
func (l *Log) sweep(names []string) (bool, []int64, error) {
	clean := false
	var bases []int64
	stems := map[string]bool{}
	for _, name := range names {
		if base, ok := parseSegmentName(name); ok {
			bases = append(bases, base)
			stems[segmentName(base)] = true
		}
	}
	for _, name := range names {
		path := filepath.Join(l.dir, name)
		switch {
		case name == cleanShutdownName:
			clean = true
		case strings.HasSuffix(name, tmpSuffix) || strings.HasSuffix(name, cleanedSuffix) || strings.HasSuffix(name, deletedSuffix):
			if err := l.fs.Remove(path); err != nil {
				return false, nil, fmt.Errorf("storage: remove %s: %w", path, err)
			}
		case strings.HasSuffix(name, indexSuffix) || strings.HasSuffix(name, timeIndexSuffix) || strings.HasSuffix(name, txnIndexSuffix):
			stem := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, timeIndexSuffix), indexSuffix), txnIndexSuffix)
			if !stems[stem] {
				if err := l.fs.Remove(path); err != nil {
					return false, nil, fmt.Errorf("storage: remove %s: %w", path, err)
				}
			}
		}
	}
	slices.Sort(bases)
	return clean, bases, nil
}

// readStart reads the log start checkpoint; 0 if it is missing or damaged (the first segment then decides).
func (l *Log) readStart() int64 {
	v, err := readOffsetCheckpoint(l.fs, filepath.Join(l.dir, startCheckpointName), 1)
	if err != nil {
		if !vfs.IsNotExist(err) {
			l.logger.Warn("ignoring log start checkpoint", "err", err)
		}
		return 0
	}
	return max(v[0], 0)
}

// dropBelowStart deletes the segments whose successor starts at or below the log start.
func (l *Log) dropBelowStart(bases []int64) ([]int64, error) {
	n := 0
	for n+1 < len(bases) && bases[n+1] <= l.start {
		seg := newSegment(l.fs, l.dir, bases[n])
		if err := l.removeSegmentFiles(seg); err != nil {
			return nil, err
		}
		n++
	}
	return bases[n:], nil
}

func (l *Log) removeSegmentFiles(seg *segment) error {
	for _, p := range seg.filePaths() {
		if err := l.fs.Remove(p); err != nil && !vfs.IsNotExist(err) {
			return fmt.Errorf("storage: remove %s: %w", p, err)
		}
	}
	return nil
}

// readEpochs loads the epoch checkpoint; false if it is missing or damaged and must be rebuilt.
func (l *Log) readEpochs() bool {
	c, err := readEpochCheckpoint(l.fs, filepath.Join(l.dir, epochCheckpointName))
	if err != nil {
		if !vfs.IsNotExist(err) {
			l.logger.Warn("rebuilding leader epoch checkpoint", "err", err)
		}
		return false
	}
	l.epochs = c
	return true
}

// loadClosed registers the closed segments, checking that their index files exist with plausible sizes and
// rebuilding them otherwise.
func (l *Log) loadClosed(bases []int64, activeBase int64) error {
	rebuilt := false
	for i, base := range bases {
		seg := newSegment(l.fs, l.dir, base)
		seg.next = activeBase
		if i+1 < len(bases) {
			seg.next = bases[i+1]
		}
		st, err := l.fs.Stat(seg.path)
		if err != nil {
			return fmt.Errorf("storage: stat %s: %w", seg.path, err)
		}
		seg.size = st.Size()
		l.loadTxnIndex(seg)
		if !plausibleIndexes(l.fs, seg) {
			idx, tidx, err := seg.rebuildLocked()
			if err != nil {
				return fmt.Errorf("storage: segment %s: %w", seg.path, err)
			}
			l.logger.Warn("rebuilt index files", "segment", seg.path)
			if err := l.writeIndexFiles(seg, idx, tidx); err != nil {
				return err
			}
			rebuilt = true
		}
		l.segs = append(l.segs, seg)
	}
	if rebuilt {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return fmt.Errorf("storage: sync dir %s: %w", l.dir, err)
		}
	}
	return nil
}

func plausibleIndexes(fsys vfs.FS, seg *segment) bool {
	for _, p := range []struct {
		path string
		unit int64
	}{{seg.indexPath(), offsetEntrySize}, {seg.timeIndexPath(), timeEntrySize}} {
		st, err := fsys.Stat(p.path)
		if err != nil || st.Size()%p.unit != 0 {
			return false
		}
	}
	return true
}

// loadActive opens the last segment for appending and rebuilds its in-memory state: from its index files
// after a clean shutdown, otherwise by walking its batches and cutting the first torn or invalid one.
func (l *Log) loadActive(base int64, clean bool) error {
	seg := newSegment(l.fs, l.dir, base)
	f, err := l.fs.OpenAppend(seg.path)
	if err != nil {
		return fmt.Errorf("storage: open %s: %w", seg.path, err)
	}
	seg.setFile(f)
	l.segs = append(l.segs, seg)
	l.act = activeState{seg: seg, file: f, created: l.clock.Now(), jitter: l.rollJitter()}
	l.act.b.interval = int64(l.cfg.IndexIntervalBytes)
	size, err := f.Size()
	if err != nil {
		return fmt.Errorf("storage: size of %s: %w", seg.path, err)
	}
	if clean && l.loadActiveClean(size) {
		return nil
	}
	return l.recoverActive(size)
}

// loadActiveClean trusts the index files written by Close and walks the batches after the last entry; false
// if anything does not add up.
func (l *Log) loadActiveClean(size int64) bool {
	a := &l.act
	a.b.reset(a.seg.base)
	idx, tidx, err := loadIndexes(l.fs, a.seg.indexPath(), a.seg.timeIndexPath(), a.seg.base, math.MaxInt64, size)
	if err != nil {
		return false
	}
	from := int64(0)
	if n := len(idx); n > 0 {
		from = int64(idx[n-1].pos)
	}
	a.b.idx, a.b.tidx = idx, tidx
	if n := len(tidx); n > 0 {
		a.b.maxTs, a.b.maxTsOff = tidx[n-1].ts, a.seg.base+int64(tidx[n-1].rel)
	}
	r := newSegReader(a.file, size)
	end, err := r.walk(from, size, false, a.b.track)
	return err == nil && end == size
}

// recoverActive rebuilds the active segment's state by walking it: headers only up to the recovery point,
// full validation after it. The first torn or invalid batch and everything after it are cut off.
func (l *Log) recoverActive(size int64) error {
	a := &l.act
	a.b.reset(a.seg.base)
	trusted := int64(0)
	if v, err := readOffsetCheckpoint(l.fs, filepath.Join(l.dir, recoveryCheckpointName), 3); err == nil &&
		v[1] == a.seg.base && v[2] <= size {
		trusted = v[2]
	}
	track := func(h record.Header, pos int64) error {
		if err := a.b.track(h, pos); err != nil {
			return err
		}
		l.epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset)
		return nil
	}
	r := newSegReader(a.file, size)
	end, err := r.walk(0, trusted, false, track)
	if err != nil {
		return fmt.Errorf("storage: recover %s: %w", a.seg.path, err)
	}
	end, err = r.walk(end, size, true, track)
	if err != nil {
		return fmt.Errorf("storage: recover %s: %w", a.seg.path, err)
	}
	if end < size {
		l.logger.Warn("cutting torn or invalid tail", "segment", a.seg.path, "valid", end, "size", size)
		if err := a.file.Truncate(end); err != nil {
			return fmt.Errorf("storage: truncate %s: %w", a.seg.path, err)
		}
		l.recovered.TruncatedBytes += size - end
	}
	return nil
}

// rebuildEpochs rebuilds the epoch cache from the batch headers of every segment.
func (l *Log) rebuildEpochs() {
	l.epochs = epochCache{}
	for _, seg := range l.segs[:len(l.segs)-1] {
		f, err := seg.acquire()
		if err != nil {
			continue
		}
		r := newSegReader(f, seg.size)
		_, _ = r.walk(0, seg.size, false, func(h record.Header, _ int64) error {
			l.epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset)
			return nil
		})
		seg.release()
	}
	r := newSegReader(l.act.file, l.act.b.size)
	_, _ = r.walk(0, l.act.b.size, false, func(h record.Header, _ int64) error {
		l.epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset)
		return nil
	})
}

// finishRecovery makes the recovered state durable and removes the clean-shutdown marker and the active
// segment's index files before any write.
func (l *Log) finishRecovery(clean, fresh bool, end int64) error {
	if !fresh || clean {
		if err := l.act.file.Sync(); err != nil {
			return fmt.Errorf("storage: fdatasync %s: %w", l.act.seg.path, err)
		}
		if clean {
			if err := l.fs.Remove(filepath.Join(l.dir, cleanShutdownName)); err != nil && !vfs.IsNotExist(err) {
				return fmt.Errorf("storage: remove clean-shutdown marker: %w", err)
			}
		}
		// The active segment's index lives in memory. Index files Close left for it would describe only a
		// prefix of it once it grows, and a roll's job rewrites them only after its successor exists: a
		// crash in between must find them missing (and rebuild them), not stale. Its transaction index is
		// in memory too, given by the owner (SetAborted).
		for _, p := range []string{l.act.seg.indexPath(), l.act.seg.timeIndexPath(), l.act.seg.txnIndexPath()} {
			if err := l.fs.Remove(p); err != nil && !vfs.IsNotExist(err) {
				return fmt.Errorf("storage: remove %s: %w", p, err)
			}
		}
		if err := l.fs.SyncDir(l.dir); err != nil {
			return fmt.Errorf("storage: sync dir %s: %w", l.dir, err)
		}
	}
	l.durable = durablePoint{offset: end, base: l.act.seg.base, pos: l.act.b.size}
	l.rpSaved = durablePoint{offset: -1}
	return nil
}
