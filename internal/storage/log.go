// Package storage is weir's partition log: segmented files of Kafka record batches with sparse offset and time
// indexes, a leader epoch cache, group-committed durability, crash recovery, truncation and retention.
// The on-disk format and the recovery procedure are in docs/storage.md.
//
// One goroutine at a time writes a Log (Append, Truncate, AdvanceStart, Maintain, Close); a mutex enforces it.
// Readers (Read, OffsetForTime, ScanBatches and the offset getters) never take that mutex: they work on an
// immutable view published after every change, so they see only whole batches below the published end offset.
package storage

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-mq/weir/internal/clock"
	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/vfs"
)

// Log is one partition replica's log. Create it with Open.
type Log struct {
	dir       string
	fs        vfs.FS
	clock     Clock
	logger    *slog.Logger
	syncer    *Syncer
	ownSyncer bool
	// recovered is what Open found (Recovery); set before Open returns, never changed after.
	recovered Recovery

	// mu serializes writers; the fields below it are owned by the writer.
	mu       sync.Mutex
	cfg      Config
	segs     []*segment
	act      activeState
	start    int64
	epochs   epochCache
	closed   bool
	lastSync time.Time
	rpSaved  durablePoint

	view       atomic.Pointer[view]
	policy     atomic.Uint32
	offline    atomic.Pointer[error]
	syncQueued atomic.Bool
	gen        atomic.Uint64
	latest     atomic.Int32
	// changes counts the writer's changes to bytes or files that a published view refers to (a truncation,
	// a segment replaced or deleted, the log closed): odd while one is under way (read.go, "stable").
	changes atomic.Uint64

	// cleaner is the compaction state (compact.go).
	cleaner cleaner

	// durMu guards the durable point and the channel closed whenever it moves or the log goes offline.
	durMu     sync.Mutex
	durable   durablePoint
	durCh     chan struct{}
	durClosed bool
}

// durablePoint says every batch below offset, ending at position pos of segment base, is durable.
type durablePoint struct {
	offset int64
	base   int64
	pos    int64
}

// activeState is the writer's state of the last segment.
type activeState struct {
	seg *segment
	// file is the segment's append handle; nil while it is parked (parkIdleActive): use activeFile.
	file    vfs.File
	written bool // appended to since the last parkIdleActive
	b       indexBuilder
	created time.Time
	wbFrom  int64 // position up to which writeback has been started (writeBackBytes)
}

// writeBackBytes is how many unsynced bytes the active segment of a log that is not synced on every
// append (FlushInterval, FlushNever) gathers before the log asks the kernel to start writing them back.
// Without it the kernel holds them for up to 30 s, and the fdatasync that closes a segment at a roll, under
// the log's lock, then writes most of a segment and stalls appends (about 200 ms per 256 MiB segment at
// 100 MB/s, measured on these machines).
const writeBackBytes = 4 << 20

// writeBackRange is a range of the active segment for the Syncer to write back.
type writeBackRange struct {
	seg    *segment
	off, n int64
}

// followUp is what an append asks of the Syncer once the log's lock is released.
type followUp struct {
	sync bool           // a sync round (syncDue)
	wb   writeBackRange // a range to write back, when wb.seg is set (writeBackDue)
}

// view is what readers see: immutable once published.
type view struct {
	segs     []*segment
	start    int64
	end      int64
	actSize  int64
	actIdx   []offsetEntry
	actTidx  []timeEntry
	actMaxTs int64
	closed   bool
}

// AppendResult describes a successful append.
type AppendResult struct {
	// FirstOffset and LastOffset are the offsets of the first and last record appended.
	FirstOffset, LastOffset int64
	// MaxTimestamp is the largest maxTimestamp of the appended batches.
	MaxTimestamp int64
	// LogStartOffset is the log start offset after the append.
	LogStartOffset int64
	// Bytes is the number of bytes appended.
	Bytes int
	// LogAppendTime is the broker time stamped into the batches under Config.LogAppendTime, else -1.
	LogAppendTime int64
}

// Open opens the log in dir, creating the directory if it is missing, and recovers it (docs/storage.md).
func Open(dir string, cfg Config, opts Options) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.FS == nil {
		opts.FS = vfs.OS
	}
	if opts.Clock == nil {
		opts.Clock = clock.System{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	l := &Log{
		dir:    dir,
		fs:     opts.FS,
		clock:  opts.Clock,
		logger: opts.Logger.With("log", dir),
		syncer: opts.Syncer,
		cfg:    cfg,
		durCh:  make(chan struct{}),
	}
	l.policy.Store(uint32(cfg.Flush))
	// A directory that exists was made durable by whoever created it (Open itself, or the owner, which
	// creates and syncs a replica's directory before it opens the log).
	if _, err := l.fs.Stat(dir); vfs.IsNotExist(err) {
		if err := l.fs.MkdirAll(dir); err != nil {
			return nil, fmt.Errorf("storage: create %s: %w", dir, err)
		}
		if err := l.fs.SyncDir(filepath.Dir(dir)); err != nil {
			return nil, fmt.Errorf("storage: sync parent of %s: %w", dir, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("storage: stat %s: %w", dir, err)
	}
	if err := l.recover(); err != nil {
		l.closeFiles()
		return nil, err
	}
	if l.syncer == nil {
		l.syncer, l.ownSyncer = NewSyncer(), true
	}
	l.lastSync = l.clock.Now()
	l.publish()
	return l, nil
}

// publish makes the writer's state visible to readers. Callers hold mu (or own the log exclusively).
func (l *Log) publish() {
	b := &l.act.b
	l.view.Store(&view{
		segs:     l.segs,
		start:    l.start,
		end:      b.next,
		actSize:  b.size,
		actIdx:   b.idx[:len(b.idx):len(b.idx)],
		actTidx:  b.tidx[:len(b.tidx):len(b.tidx)],
		actMaxTs: b.maxTs,
	})
	l.latest.Store(l.epochs.latest())
}

// StartOffset is the log start offset.
func (l *Log) StartOffset() int64 { return l.view.Load().start }

// EndOffset is the log end offset: the offset the next appended record gets.
func (l *Log) EndOffset() int64 { return l.view.Load().end }

// DurableEndOffset is the offset below which every record is known to be fdatasync'd.
func (l *Log) DurableEndOffset() int64 {
	l.durMu.Lock()
	defer l.durMu.Unlock()
	return l.durable.offset
}

// LatestEpoch is the latest leader epoch in the epoch cache, -1 if none.
func (l *Log) LatestEpoch() int32 { return l.latest.Load() }

// Dir is the log's directory.
func (l *Log) Dir() string { return l.dir }

// Err is non-nil once the log is offline (wrapping ErrLogOffline) or closed (ErrClosed).
func (l *Log) Err() error {
	if p := l.offline.Load(); p != nil {
		return *p
	}
	l.durMu.Lock()
	defer l.durMu.Unlock()
	if l.durClosed {
		return ErrClosed
	}
	return nil
}

// fail takes the log offline for good because of cause and returns the error to report.
func (l *Log) fail(op string, cause error) error {
	err := fmt.Errorf("%w: %s: %w", ErrLogOffline, op, cause)
	if l.offline.CompareAndSwap(nil, &err) {
		l.logger.Error("log offline", "op", op, "err", cause)
	}
	l.durMu.Lock()
	close(l.durCh)
	l.durCh = make(chan struct{})
	l.durMu.Unlock()
	return *l.offline.Load()
}

// writable returns the error that stops writes, if any. Callers hold mu.
func (l *Log) writable() error {
	if l.closed {
		return ErrClosed
	}
	if p := l.offline.Load(); p != nil {
		return *p
	}
	return nil
}

// SetConfig changes the configuration; it applies from the next operation.
func (l *Log) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cfg = cfg
	l.act.b.interval = int64(cfg.IndexIntervalBytes)
	l.policy.Store(uint32(cfg.Flush))
	return nil
}

// Config returns the current configuration.
func (l *Log) Config() Config {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cfg
}

// Append validates each batch (record.Validate; larger than MaxBatchBytes gives ErrBatchTooLarge), stamps base
// offsets from the log end and the leader epoch into the caller's bytes, writes them and publishes the new
// end offset. It does not wait for durability: call WaitDurable. A leader epoch below LatestEpoch gives
// ErrStaleLeaderEpoch. A failed write takes the log offline.
func (l *Log) Append(batches []byte, leaderEpoch int32) (AppendResult, error) {
	return l.appendAndSchedule(batches, leaderEpoch, true)
}

// AppendAsFollower appends batches fetched from the leader, keeping their base offsets and leader epochs.
// Base offsets must not go below the log end (ErrOffsetNotMonotonic); gaps are allowed (compacted sources).
func (l *Log) AppendAsFollower(batches []byte) (AppendResult, error) {
	return l.appendAndSchedule(batches, -1, false)
}

// appendAndSchedule appends and then, outside the log's lock, asks the syncer for the round the flush
// policy wants and for any writeback that is due.
func (l *Log) appendAndSchedule(batches []byte, leaderEpoch int32, assign bool) (AppendResult, error) {
	res, next, err := l.append(batches, leaderEpoch, assign)
	if next.sync {
		l.requestSync()
	}
	if next.wb.seg != nil {
		l.syncer.writeBack(next.wb)
	}
	return res, err
}

// append does the work of Append under mu and says what to ask of the Syncer after it.
func (l *Log) append(batches []byte, leaderEpoch int32, assign bool) (AppendResult, followUp, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return AppendResult{}, followUp{}, err
	}
	if len(batches) == 0 {
		return AppendResult{}, followUp{}, fmt.Errorf("%w: no batches", record.ErrCorrupt)
	}
	if assign && leaderEpoch < l.epochs.latest() {
		return AppendResult{}, followUp{}, fmt.Errorf("%w: %d < %d", ErrStaleLeaderEpoch, leaderEpoch, l.epochs.latest())
	}
	res, epochs, err := l.prepare(batches, leaderEpoch, assign)
	if err != nil {
		return AppendResult{}, followUp{}, err
	}
	if err := l.maybeRoll(int64(len(batches)), res.LastOffset); err != nil {
		return AppendResult{}, followUp{}, err
	}
	changed := false
	for _, e := range epochs {
		changed = l.epochs.assign(e.epoch, e.start) || changed
	}
	if changed {
		if err := l.writeEpochs(); err != nil {
			return AppendResult{}, followUp{}, err
		}
	}
	if err := l.writeActive(batches); err != nil {
		return AppendResult{}, followUp{}, err
	}
	pos := l.act.b.size
	for b := batches; len(b) > 0; {
		h, _ := record.ParseHeader(b) // validated by prepare
		_ = l.act.b.track(h, pos)     // offsets checked by prepare
		pos += int64(h.Size())
		b = b[h.Size():]
	}
	l.publish()
	res.LogStartOffset = l.start
	return res, followUp{sync: l.syncDue(), wb: l.writeBackDue()}, nil
}

// writeBackDue says which written range of the active segment to start writing back, if any: under
// FlushInterval and FlushNever, everything since the last such range once it reaches writeBackBytes.
// Callers hold mu.
func (l *Log) writeBackDue() writeBackRange {
	a := &l.act
	from := min(a.wbFrom, a.b.size)
	if l.cfg.Flush == FlushAlways || a.b.size-from < writeBackBytes {
		return writeBackRange{}
	}
	a.wbFrom = a.b.size
	return writeBackRange{seg: a.seg, off: from, n: a.b.size - from}
}

// prepare validates and (for a leader) stamps every batch, and lists the epoch changes the batches bring.
func (l *Log) prepare(batches []byte, leaderEpoch int32, assign bool) (AppendResult, []epochEntry, error) {
	res := AppendResult{FirstOffset: -1, MaxTimestamp: -1, Bytes: len(batches), LogAppendTime: -1}
	if assign && l.cfg.LogAppendTime {
		res.LogAppendTime = l.clock.Now().UnixMilli()
	}
	next := l.act.b.next
	latest := l.epochs.latest()
	var epochs []epochEntry
	if assign && leaderEpoch > latest {
		epochs = append(epochs, epochEntry{epoch: leaderEpoch, start: next})
	}
	for rest := batches; len(rest) > 0; {
		batch, tail, err := record.Split(rest)
		if err != nil {
			return res, nil, err
		}
		if len(batch) > int(l.cfg.MaxBatchBytes) {
			return res, nil, fmt.Errorf("%w: %d bytes > %d", ErrBatchTooLarge, len(batch), l.cfg.MaxBatchBytes)
		}
		h, err := record.Validate(batch)
		if err != nil {
			return res, nil, err
		}
		if assign {
			record.SetBaseOffset(batch, next)
			record.SetPartitionLeaderEpoch(batch, leaderEpoch)
			h.BaseOffset = next
			if res.LogAppendTime >= 0 {
				record.SetLogAppendTime(batch, res.LogAppendTime)
				h, _ = record.ParseHeader(batch)
			}
		} else {
			if h.BaseOffset < next {
				return res, nil, fmt.Errorf("%w: %d < %d", ErrOffsetNotMonotonic, h.BaseOffset, next)
			}
			if h.PartitionLeaderEpoch < latest {
				return res, nil, fmt.Errorf("%w: %d < %d", ErrStaleLeaderEpoch, h.PartitionLeaderEpoch, latest)
			}
			if h.PartitionLeaderEpoch > latest {
				latest = h.PartitionLeaderEpoch
				epochs = append(epochs, epochEntry{epoch: latest, start: h.BaseOffset})
			}
		}
		if res.FirstOffset < 0 {
			res.FirstOffset = h.BaseOffset
		}
		res.LastOffset = h.LastOffset()
		res.MaxTimestamp = max(res.MaxTimestamp, h.MaxTimestamp)
		next = h.NextOffset()
		rest = tail
	}
	return res, epochs, nil
}

// writeActive appends bytes to the active segment. On failure it cuts what a short write left behind and
// takes the log offline: a reopen recovers the tail either way.
func (l *Log) writeActive(b []byte) error {
	f, err := l.activeFile()
	if err != nil {
		return err
	}
	l.act.written = true
	n, err := f.Write(b)
	if err == nil && n != len(b) {
		err = fmt.Errorf("short write of %d of %d bytes", n, len(b))
	}
	if err != nil {
		if n > 0 {
			if terr := f.Truncate(l.act.b.size); terr != nil {
				l.logger.Error("cannot cut a failed write", "err", terr)
			}
		}
		return l.fail("write "+l.act.seg.path, err)
	}
	return nil
}

// maybeRoll rolls the active segment if n more bytes ending at offset last would not fit in it.
func (l *Log) maybeRoll(n, last int64) error {
	b := &l.act.b
	if b.nBatches == 0 {
		return nil
	}
	full := b.size+n > l.cfg.SegmentBytes || b.size+n > maxSegmentPos || last-b.base > maxRelOffset
	if !full && !l.expired() {
		return nil
	}
	return l.roll()
}

func (l *Log) expired() bool {
	return l.act.b.nBatches > 0 && l.clock.Now().Sub(l.act.created) >= l.cfg.SegmentAge
}

// roll closes the active segment (synced, indexes written and synced) and starts a new one at the log end.
func (l *Log) roll() error {
	a := &l.act
	f, err := l.activeFile()
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return l.fail("fdatasync "+a.seg.path, err)
	}
	a.b.finish()
	if err := l.writeIndexFiles(a.seg, a.b.idx, a.b.tidx); err != nil {
		return err
	}
	old := a.seg
	old.size, old.next = a.b.size, a.b.next
	old.seal(a.b.idx, a.b.tidx, a.b.maxTs, l.clock.Now())
	if err := l.newActive(a.b.next); err != nil {
		return err
	}
	l.advanceDurable(durablePoint{offset: old.next, base: l.act.seg.base, pos: 0}, l.gen.Load())
	return nil
}

// activeFile returns the active segment's append handle, opening it again if it was parked. A failure to
// open it (out of file descriptors, say) fails the operation but leaves the log as it was, online. Callers
// hold mu.
func (l *Log) activeFile() (vfs.File, error) {
	if l.act.file != nil {
		return l.act.file, nil
	}
	f, err := l.act.seg.acquire()
	if err != nil {
		return nil, err
	}
	l.act.seg.release()
	l.act.file = f
	return f, nil
}

// parkIdleActive closes the active segment's file if nothing wrote or read it since the previous call and
// all of it is durable, so that an idle partition holds no file descriptor; the next use opens it again.
// It parks only a durable segment so that no write of it can fail where no open handle would report it.
// Callers hold mu.
func (l *Log) parkIdleActive() {
	a := &l.act
	if a.file == nil {
		return
	}
	quiet := !a.written && l.DurableEndOffset() >= a.b.next
	a.written = false
	if a.seg.closeIfIdle(quiet) {
		a.file = nil
	}
}

// newActive creates an empty segment at base, makes its directory entry durable and makes it active.
func (l *Log) newActive(base int64) error {
	seg := newSegment(l.fs, l.dir, base)
	f, err := l.fs.Create(seg.path)
	if err != nil {
		return l.fail("create "+seg.path, err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		_ = f.Close() // the log is going offline for the sync error
		return l.fail("sync dir "+l.dir, err)
	}
	seg.setFile(f)
	l.segs = append(l.segs[:len(l.segs):len(l.segs)], seg)
	l.act = activeState{seg: seg, file: f, created: l.clock.Now()}
	l.act.b.interval = int64(l.cfg.IndexIntervalBytes)
	l.act.b.reset(base)
	return nil
}

// writeIndexFiles writes and syncs a segment's two index files.
func (l *Log) writeIndexFiles(seg *segment, idx []offsetEntry, tidx []timeEntry) error {
	if err := l.writeSynced(seg.indexPath(), encodeOffsetIndex(idx)); err != nil {
		return err
	}
	return l.writeSynced(seg.timeIndexPath(), encodeTimeIndex(tidx))
}

func (l *Log) writeSynced(path string, data []byte) error {
	f, err := l.fs.Create(path)
	if err != nil {
		return l.fail("create "+path, err)
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close() // the log is going offline for the write error
		return l.fail("write "+path, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close() // the log is going offline for the sync error
		return l.fail("fdatasync "+path, err)
	}
	if err := f.Close(); err != nil {
		return l.fail("close "+path, err)
	}
	return nil
}

func (l *Log) writeEpochs() error {
	if err := writeFileAtomic(l.fs, l.dir, epochCheckpointName, l.epochs.encode()); err != nil {
		return l.fail("write "+epochCheckpointName, err)
	}
	return nil
}

// syncDue says whether an append should ask the syncer for a round: always under FlushAlways, where every
// append is waited for, so the fdatasync starts before the waiter gets to ask for it; under FlushInterval
// once the interval has passed; never under FlushNever. Callers hold mu.
func (l *Log) syncDue() bool {
	switch l.cfg.Flush {
	case FlushAlways:
		return true
	case FlushNever:
		return false
	}
	now := l.clock.Now()
	if now.Sub(l.lastSync) < l.cfg.FlushInterval {
		return false
	}
	l.lastSync = now
	return true
}

// requestSync queues the log for the syncer's next round unless it is already queued.
func (l *Log) requestSync() bool {
	if !l.syncQueued.CompareAndSwap(false, true) {
		return true
	}
	if !l.syncer.enqueue(l) {
		l.syncQueued.Store(false)
		return false
	}
	return true
}

// syncNow runs on the syncer: it syncs the active segment up to the current end and releases waiters.
func (l *Log) syncNow() {
	l.syncQueued.Store(false)
	l.mu.Lock()
	if l.writable() != nil {
		l.mu.Unlock()
		return
	}
	seg, point, gen := l.act.seg, durablePoint{offset: l.act.b.next, base: l.act.seg.base, pos: l.act.b.size}, l.gen.Load()
	l.mu.Unlock()
	if l.DurableEndOffset() >= point.offset && gen == l.gen.Load() {
		return
	}
	f, err := seg.acquire()
	if err != nil {
		return // the segment was rolled (and synced) or the log closed meanwhile
	}
	err = f.Sync()
	seg.release()
	if err != nil {
		l.fail("fdatasync "+seg.path, err)
		return
	}
	l.advanceDurable(point, gen)
}

// advanceDurable moves the durable point forward if no truncation happened since gen, and wakes waiters.
func (l *Log) advanceDurable(p durablePoint, gen uint64) {
	l.durMu.Lock()
	defer l.durMu.Unlock()
	if gen != l.gen.Load() || p.offset < l.durable.offset {
		return
	}
	l.durable = p
	close(l.durCh)
	l.durCh = make(chan struct{})
}

// WaitDurable returns once every offset below end is durable under the flush policy (FlushAlways: synced
// through the Syncer; FlushInterval and FlushNever: at once), or with the error that took the log offline,
// ErrClosed, or ctx's error.
func (l *Log) WaitDurable(ctx context.Context, end int64) error {
	if p := l.offline.Load(); p != nil {
		return *p
	}
	if FlushPolicy(l.policy.Load()) != FlushAlways {
		return nil
	}
	requested := false
	for {
		l.durMu.Lock()
		durable, ch, closed := l.durable.offset, l.durCh, l.durClosed
		l.durMu.Unlock()
		if durable >= end {
			return nil
		}
		if p := l.offline.Load(); p != nil {
			return *p
		}
		if closed {
			return ErrClosed
		}
		if !requested || !l.syncQueued.Load() {
			if !l.requestSync() {
				return ErrClosed
			}
			requested = true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close syncs the log, writes the active segment's indexes and the clean-shutdown marker, and closes every
// file. A log that went offline is closed without the marker, so the next Open recovers it.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	var err error
	if l.writable() == nil {
		err = l.closeClean()
	}
	l.closed = true
	l.beginChange()
	closedView := *l.view.Load()
	closedView.closed = true
	l.view.Store(&closedView)
	l.closeFiles()
	l.endChange()
	l.mu.Unlock()
	l.durMu.Lock()
	l.durClosed = true
	close(l.durCh)
	l.durCh = make(chan struct{})
	l.durMu.Unlock()
	if l.ownSyncer {
		l.syncer.Close()
	}
	return err
}

func (l *Log) closeClean() error {
	a := &l.act
	// a parked active segment was durable when it was parked and has not been written since
	if a.file != nil {
		if err := a.file.Sync(); err != nil {
			return l.fail("fdatasync "+a.seg.path, err)
		}
	}
	l.advanceDurable(durablePoint{offset: a.b.next, base: a.seg.base, pos: a.b.size}, l.gen.Load())
	if err := l.writeIndexFiles(a.seg, a.b.idx, a.b.tidx); err != nil {
		return err
	}
	if err := l.writeSynced(filepath.Join(l.dir, cleanShutdownName), nil); err != nil {
		return err
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail("sync dir "+l.dir, err)
	}
	return nil
}

func (l *Log) closeFiles() {
	for _, s := range l.segs {
		s.kill()
	}
}

// Delete closes the log and removes its directory.
func (l *Log) Delete() error {
	if err := l.Close(); err != nil {
		return err
	}
	if err := l.fs.RemoveAll(l.dir); err != nil {
		return fmt.Errorf("storage: remove %s: %w", l.dir, err)
	}
	if err := l.fs.SyncDir(filepath.Dir(l.dir)); err != nil {
		return fmt.Errorf("storage: sync parent of %s: %w", l.dir, err)
	}
	return nil
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch: the largest epoch at or below epoch and the offset where
// the epoch after it starts (the log end offset for the latest epoch). (-1, -1) if the epoch is unknown.
func (l *Log) EndOffsetForEpoch(epoch int32) (leaderEpoch int32, endOffset int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epochs.endOffsetFor(epoch, l.act.b.next)
}

// find returns the index of the segment holding offset: the last one whose base is at or below it.
func (v *view) find(offset int64) int {
	i := sort.Search(len(v.segs), func(i int) bool { return v.segs[i].base > offset })
	return max(i-1, 0)
}

func (v *view) isActive(i int) bool { return i == len(v.segs)-1 }

func (v *view) size(i int) int64 {
	if v.isActive(i) {
		return v.actSize
	}
	return v.segs[i].size
}

func (v *view) indexes(i int) ([]offsetEntry, []timeEntry, error) {
	if v.isActive(i) {
		return v.actIdx, v.actTidx, nil
	}
	return v.segs[i].indexes()
}

func (v *view) maxTimestamp(i int) (int64, error) {
	if v.isActive(i) {
		return v.actMaxTs, nil
	}
	return v.segs[i].maxTimestamp()
}
