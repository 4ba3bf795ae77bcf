package storage

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/weir-mq/weir/internal/clock"
	"github.com/weir-mq/weir/internal/vfs"
)

// The Syncer's side of the journal (docs/storage.md, "Journal (as built)"): opening it replays the records
// past the last checkpoint into the log directories, rounds write and fdatasync it once for every journaled
// log, and checkpoints sync the logs' segments and trim it.

const (
	journalDirName        = "journal"
	journalCheckpointName = "journal-checkpoint"
	// journalFileBytes is the size a journal file is reserved at and written up to.
	journalFileBytes = 64 << 20
	// journalDirectBytes is the size from which an append goes past the journal, to be made durable by an
	// fdatasync of its segment: copying it into the journal would cost more CPU than the fdatasync it saves
	// (docs/storage.md, "Large appends past the journal").
	journalDirectBytes = 64 << 10
	// checkpointEvery and checkpointBytes say when a round asks for a checkpoint: once a second has passed
	// since the last one, or once that many journal bytes were written since.
	checkpointEvery = time.Second
	checkpointBytes = 64 << 20
)

// DropJournal takes the journal out of the data directory dataDir, for a node started without it after
// a run with it: the records a crash left past the checkpoint are replayed into the logs first (OpenSyncer,
// whose replay syncs every segment it writes), then the journal's directory and its checkpoint are
// removed, in that order, each removal made durable before the next. So the logs' own syncs take over
// from segments that hold everything the journal did, and a later start with the journal begins an empty
// one. A crash between the removals leaves a checkpoint without a journal, which the next DropJournal
// removes and OpenSyncer starts an empty journal after. A data directory without either is left as it is.
func DropJournal(fsys vfs.FS, dataDir string, logger *slog.Logger) error {
	dataDir = filepath.Clean(dataDir)
	dir, ckpt := filepath.Join(dataDir, journalDirName), filepath.Join(dataDir, journalCheckpointName)
	_, dirErr := fsys.Stat(dir)
	_, ckptErr := fsys.Stat(ckpt)
	switch {
	case dirErr != nil && !vfs.IsNotExist(dirErr):
		return fmt.Errorf("storage: the journal: %w", dirErr)
	case ckptErr != nil && !vfs.IsNotExist(ckptErr):
		return fmt.Errorf("storage: journal checkpoint: %w", ckptErr)
	case dirErr != nil && ckptErr != nil:
		return nil
	}
	if dirErr == nil {
		s, err := OpenSyncer(fsys, dataDir, logger)
		if err != nil {
			return err
		}
		s.Close()
		if err := fsys.RemoveAll(dir); err != nil {
			return fmt.Errorf("storage: remove the journal: %w", err)
		}
		if err := fsys.SyncDir(dataDir); err != nil {
			return fmt.Errorf("storage: remove the journal: %w", err)
		}
	}
	if err := fsys.Remove(ckpt); err != nil && !vfs.IsNotExist(err) {
		return fmt.Errorf("storage: remove the journal checkpoint: %w", err)
	}
	if err := fsys.SyncDir(dataDir); err != nil {
		return fmt.Errorf("storage: remove the journal checkpoint: %w", err)
	}
	if logger != nil {
		logger.Info("took the journal out of the data directory: durable appends sync each log again", "data_dir", dataDir)
	}
	return nil
}

// OpenSyncer opens the journal of the data directory dataDir (created if missing), replays the records a
// crash left past its checkpoint into the logs of dataDir (docs/storage.md, "Recovery" of the journal),
// checkpoints and starts a syncer that journals the appends of every log opened directly in dataDir under
// FlushAlways. Open it before those logs, close it after them.
func OpenSyncer(fsys vfs.FS, dataDir string, logger *slog.Logger) (*Syncer, error) {
	if logger == nil {
		logger = slog.Default()
	}
	dataDir = filepath.Clean(dataDir)
	after := int64(0)
	v, err := readOffsetCheckpoint(fsys, filepath.Join(dataDir, journalCheckpointName), 1)
	switch {
	case err == nil:
		after = v[0]
	case !vfs.IsNotExist(err):
		return nil, fmt.Errorf("storage: journal checkpoint: %w", err)
	}
	rp := replay{fs: fsys, dataDir: dataDir, logger: logger, logs: map[string][]journalRecord{}}
	j, rec, err := openJournal(fsys, filepath.Join(dataDir, journalDirName), after, journalFileBytes, rp.collect)
	if err != nil {
		return nil, fmt.Errorf("storage: open the journal: %w", err)
	}
	if err := rp.apply(); err != nil {
		_ = j.close() // the replay's error is the one to report
		return nil, fmt.Errorf("storage: replay the journal: %w", err)
	}
	last := j.next - 1
	if err := writeFileAtomic(fsys, dataDir, journalCheckpointName, formatInts(last)); err != nil {
		_ = j.close() // the checkpoint's error is the one to report
		return nil, fmt.Errorf("storage: journal checkpoint: %w", err)
	}
	if err := j.trim(last); err != nil {
		_ = j.close() // the trim's error is the one to report
		return nil, err
	}
	if rec.records > 0 || rec.tornBytes > 0 {
		logger.Info("replayed the journal", "data_dir", dataDir, "records", rec.records, "logs", len(rp.logs),
			"torn_bytes", rec.tornBytes)
	}
	s := newSyncer(clock.System{})
	s.j, s.fs, s.dataDir, s.logger = j, fsys, dataDir, logger
	s.directBytes = journalDirectBytes
	s.ckptSeq.Store(last)
	s.jDurable, s.jCh = last, make(chan struct{})
	s.ckptAt = s.clock.Now()
	s.ckptCh, s.ckptDone = make(chan struct{}, 1), make(chan struct{})
	go s.checkpointLoop()
	return s, nil
}

// replay gathers the records of each log past the checkpoint and writes them into its directory.
type replay struct {
	fs      vfs.FS
	dataDir string
	logger  *slog.Logger
	logs    map[string][]journalRecord
}

// collect keeps a copy of r. A point, a drop or a truncation voids the log's earlier records: the log
// synced its segments before it added one of them, so everything they wrote is durable in its files (and
// a later truncation or deletion of those files would make them fail to apply).
func (rp *replay) collect(r *journalRecord) error {
	if r.kind == journalPoint || r.kind == journalDrop {
		rp.logs[r.name] = nil
		return nil
	}
	c := *r
	c.data = slices.Clone(r.data)
	if r.kind == journalTruncate {
		rp.logs[r.name] = nil
	}
	rp.logs[r.name] = append(rp.logs[r.name], c)
	return nil
}

func (rp *replay) apply() error {
	names := make([]string, 0, len(rp.logs))
	for name := range rp.logs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := rp.log(name, rp.logs[name]); err != nil {
			return fmt.Errorf("log %s: %w", name, err)
		}
	}
	return nil
}

// log replays one log's records into its directory; a log whose directory is gone was deleted.
func (rp *replay) log(name string, recs []journalRecord) error {
	if len(recs) == 0 {
		return nil
	}
	dir := filepath.Join(rp.dataDir, name)
	if _, err := rp.fs.Stat(dir); vfs.IsNotExist(err) {
		rp.logger.Warn("journal records for a log directory that is gone", "dir", dir, "records", len(recs))
		return nil
	} else if err != nil {
		return err
	}
	// every segment a record names is synced at the end, those whose bytes were already there too: after
	// a process crash they may be in the page cache only, and the checkpoint after the replay covers them
	touched := map[int64]bool{}
	changed := false
	for i := range recs {
		var c bool
		var err error
		if recs[i].kind == journalAppend {
			c, err = rp.append(dir, &recs[i])
		} else {
			c, err = rp.truncate(dir, &recs[i])
		}
		if err != nil {
			return err
		}
		touched[recs[i].segmentBase] = touched[recs[i].segmentBase] || c
		changed = changed || c
	}
	for base, c := range touched {
		seg := newSegment(rp.fs, dir, base)
		if err := syncFile(rp.fs, seg.path); err != nil {
			return err
		}
		if !c {
			continue
		}
		// index files written for the segment's bytes before the replay changed them; recovery rebuilds them
		for _, p := range []string{seg.indexPath(), seg.timeIndexPath(), seg.txnIndexPath()} {
			if err := rp.fs.Remove(p); err != nil && !vfs.IsNotExist(err) {
				return err
			}
		}
	}
	if !changed {
		return nil
	}
	if err := rp.fs.Remove(filepath.Join(dir, cleanShutdownName)); err != nil && !vfs.IsNotExist(err) {
		return err
	}
	return rp.fs.SyncDir(dir)
}

// syncFile fdatasyncs the file at path, if it exists.
func syncFile(fsys vfs.FS, path string) error {
	f, err := fsys.OpenAppend(path)
	if vfs.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close() // the sync error is the one to report
		return err
	}
	return f.Close()
}

// append makes the record's bytes the segment's at its position: bytes already there are left alone,
// different or missing ones are cut and written. A segment is created only by its first record.
func (rp *replay) append(dir string, r *journalRecord) (bool, error) {
	path := filepath.Join(dir, segmentName(r.segmentBase)+logSuffix)
	pos := int64(r.position)
	f, err := rp.fs.OpenAppend(path)
	if vfs.IsNotExist(err) && pos == 0 {
		f, err = rp.fs.Create(path)
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return false, err
	}
	if size < pos {
		return false, fmt.Errorf("%w: journal record %d writes at %d of %s, which holds %d bytes", ErrCorruption, r.seq, pos, path, size)
	}
	if size >= pos+int64(len(r.data)) {
		have := make([]byte, len(r.data))
		if _, err := f.ReadAt(have, pos); err != nil {
			return false, err
		}
		if string(have) == string(r.data) {
			return false, nil
		}
	}
	if size > pos {
		if err := f.Truncate(pos); err != nil {
			return false, err
		}
	}
	if _, err := f.Write(r.data); err != nil {
		return false, err
	}
	return true, nil
}

// truncate cuts the log as Log.Truncate did: the record's segment at its position, the segments after it
// removed (the segments the log had then, and those it made after, which later records make again); a
// full truncation (position -1) removes every segment and restarts the log empty at the offset.
func (rp *replay) truncate(dir string, r *journalRecord) (bool, error) {
	names, err := rp.fs.ReadDir(dir)
	if err != nil {
		return false, err
	}
	var bases []int64
	for _, name := range names {
		if base, ok := parseSegmentName(name); ok {
			bases = append(bases, base)
		}
	}
	slices.Sort(bases)
	if r.position < 0 {
		for _, base := range bases {
			if err := rp.fs.Remove(filepath.Join(dir, segmentName(base)+logSuffix)); err != nil {
				return false, err
			}
		}
		f, err := rp.fs.Create(filepath.Join(dir, segmentName(r.offset)+logSuffix))
		if err != nil {
			return false, err
		}
		if err := f.Close(); err != nil {
			return false, err
		}
		return true, writeFileAtomic(rp.fs, dir, startCheckpointName, formatInts(r.offset))
	}
	changed := false
	for _, base := range bases {
		if base > r.segmentBase {
			if err := rp.fs.Remove(filepath.Join(dir, segmentName(base)+logSuffix)); err != nil {
				return false, err
			}
			changed = true
		}
	}
	path := filepath.Join(dir, segmentName(r.segmentBase)+logSuffix)
	f, err := rp.fs.OpenAppend(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return false, err
	}
	pos := int64(r.position)
	if size < pos {
		return false, fmt.Errorf("%w: journal record %d cuts %s at %d, which holds %d bytes", ErrCorruption, r.seq, path, pos, size)
	}
	if size == pos {
		return changed, nil
	}
	if err := f.Truncate(pos); err != nil {
		return false, err
	}
	return true, nil
}

// journalName is the name the journal records of the log in dir carry, or "" if the syncer journals no log
// there.
func (s *Syncer) journalName(dir string) string {
	if s.j == nil || filepath.Dir(filepath.Clean(dir)) != s.dataDir {
		return ""
	}
	return filepath.Base(dir)
}

// journalRound writes and fdatasyncs the journal's open round and wakes the waiters of waitJournal.
func (s *Syncer) journalRound() (int64, error) {
	seq, err := s.j.sync()
	s.mu.Lock()
	s.jDurable, s.jErr = seq, err
	close(s.jCh)
	s.jCh = make(chan struct{})
	due := s.clock.Now().Sub(s.ckptAt) >= checkpointEvery || s.j.writtenSince() >= checkpointBytes
	s.mu.Unlock()
	if due {
		select {
		case s.ckptCh <- struct{}{}:
		default:
		}
	}
	return seq, err
}

// waitJournal returns once every journal record up to seq is durable, asking for rounds as needed.
func (s *Syncer) waitJournal(seq int64) error {
	for {
		s.mu.Lock()
		if s.jErr != nil {
			err := s.jErr
			s.mu.Unlock()
			return err
		}
		if s.jDurable >= seq {
			s.mu.Unlock()
			return nil
		}
		if s.closed {
			s.mu.Unlock()
			return ErrClosed
		}
		ch := s.jCh
		s.forced = true
		s.cond.Signal()
		s.mu.Unlock()
		<-ch
	}
}

// markDirty lists l for the next checkpoint, once.
func (s *Syncer) markDirty(l *Log) {
	if !l.jDirty.CompareAndSwap(false, true) {
		return
	}
	s.mu.Lock()
	s.dirty = append(s.dirty, l)
	s.mu.Unlock()
}

func (s *Syncer) takeDirty() []*Log {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.dirty
	s.dirty = nil
	for _, l := range d {
		l.jDirty.Store(false)
	}
	return d
}

func (s *Syncer) checkpointLoop() {
	defer close(s.ckptDone)
	for range s.ckptCh {
		if err := s.checkpoint(); err != nil {
			s.logger.Error("journal checkpoint failed; the journal is kept", "data_dir", s.dataDir, "err", err)
		}
	}
}

// checkpoint makes every record given out so far durable in the logs' segments, records it in
// journal-checkpoint and trims the journal below it (docs/storage.md, "Checkpoints and trimming").
func (s *Syncer) checkpoint() error {
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	start := s.clock.Now()
	first := s.takeDirty()
	ends := make([]int64, len(first))
	gens := make([]uint64, len(first))
	for i, l := range first {
		ends[i], gens[i] = l.checkpointCapture()
	}
	last := s.j.lastSeq()
	second := s.takeDirty()
	logs := append(slices.Clone(first), second...)
	errs := make([]error, len(logs))
	var wg sync.WaitGroup
	for i, l := range logs {
		wg.Go(func() { errs[i] = l.checkpointSync() })
	}
	wg.Wait()
	err := errors.Join(errs...)
	if err == nil {
		err = writeFileAtomic(s.fs, s.dataDir, journalCheckpointName, formatInts(last))
	}
	if err == nil {
		s.ckptSeq.Store(last)
		err = s.j.trim(last)
	}
	if err != nil {
		for _, l := range logs {
			s.markDirty(l)
		}
		return err
	}
	for i, l := range first {
		l.setCheckpointed(ends[i], gens[i])
	}
	for _, l := range second {
		s.markDirty(l)
	}
	s.mu.Lock()
	s.ckptAt = start
	s.mu.Unlock()
	return nil
}
