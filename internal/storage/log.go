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
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
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
	rand      *rand.Rand // draws segment jitter (rollJitter); used under mu only
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
	// job is the background half of the last roll or epoch change (roll.go), nil once waited for; spare is
	// the file the next roll makes the active segment, when one is ready.
	job   *bgJob
	spare vfs.File
	// txnKnown is set once the owner told the log every aborted transaction (SetAborted).
	txnKnown bool
	// trash lists deleted segments' files waiting for file.delete.delay.ms (trash.go).
	trash []trashed

	view   atomic.Pointer[view]
	policy atomic.Uint32
	// maxBatch and appendTime are Config.MaxBatchBytes and Config.LogAppendTime, for the checks and the
	// stamping an append does before it takes mu.
	maxBatch   atomic.Int32
	appendTime atomic.Bool
	offline    atomic.Pointer[error]
	syncQueued atomic.Bool
	gen        atomic.Uint64
	latest     atomic.Int32
	// changes counts the writer's changes to bytes or files that a published view refers to (a truncation,
	// a segment replaced or deleted, the log closed): odd while one is under way (read.go, "stable").
	changes atomic.Uint64
	// cuts counts truncations that cut a segment file in place, bumped before the cut: the only change
	// that rewrites bytes an open file handle still shows (section.go, Section.Intact).
	cuts atomic.Uint64

	// cleaner is the compaction state (compact.go).
	cleaner cleaner

	// durMu guards the durable point and the channel closed whenever it moves or the log goes offline.
	durMu     sync.Mutex
	durable   durablePoint
	durCh     chan struct{}
	durClosed bool
	// barrier, while a roll's job has not yet synced the segment the roll closed, is that segment's end
	// offset, which the durable point may not pass (-1 otherwise); held is the furthest point a sync of the
	// new active segment reached meanwhile, which the durable point moves to when the barrier is lifted.
	barrier int64
	held    durablePoint

	// The journal (journal_log.go). jName is the name of the log's records, "" when its syncer journals no
	// log in its directory; jUsed (under mu) says records were added since the last point; jPend and jDurable (under durMu) are the appends waiting for a round and
	// the end the journal made durable; jDirect, jDirectSeg and jDirectGen (under durMu) are where the last
	// append written past the journal ends, its segment and the truncation generation it was written in,
	// for the round that fdatasyncs that segment (syncDirect); jTrunc (under mu) is the seq of the log's last
	// truncation record, -1 once a point voided it; jDirty says the log is listed for the next checkpoint;
	// ckptEnd is the end below which every record of the log is covered by a durable checkpoint.
	jName      string
	jUsed      bool
	jPend      []journalAck
	jDurable   int64
	jDirect    durablePoint
	jDirectSeg *segment
	jDirectGen uint64
	jTrunc     int64
	jDirty     atomic.Bool
	ckptEnd    atomic.Int64
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
	jitter  time.Duration // how much earlier than SegmentAge it rolls by age (Config.SegmentJitter)
	wbFrom  int64         // position up to which writeback has been started (writeBackBytes)
	// txns are the aborted transactions whose marker lies in the segment, in marker order (AddAborted).
	txns []TxnIndexEntry
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
	job  *bgJob         // the background half of a roll or an epoch change, to start
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
	if opts.Rand == nil {
		h := fnv.New64a()
		_, _ = h.Write([]byte(dir)) // a hash.Hash never fails
		opts.Rand = rand.New(rand.NewPCG(uint64(opts.Clock.Now().UnixNano()), h.Sum64()))
	}
	l := &Log{
		dir:     dir,
		fs:      opts.FS,
		clock:   opts.Clock,
		logger:  opts.Logger.With("log", dir),
		rand:    opts.Rand,
		syncer:  opts.Syncer,
		cfg:     cfg,
		durCh:   make(chan struct{}),
		barrier: -1,
		jTrunc:  -1,
	}
	l.storeConfig(cfg)
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
	if l.jName = l.syncer.journalName(dir); l.jName != "" {
		l.ckptEnd.Store(l.act.b.next)
	}
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

// DurableEndOffset is the offset below which every record is known to be fdatasync'd, in the segments or
// in the journal.
func (l *Log) DurableEndOffset() int64 {
	l.durMu.Lock()
	defer l.durMu.Unlock()
	return max(l.durable.offset, l.jDurable)
}

// fileDurableOffset is the offset below which the segment files are known to be fdatasync'd.
func (l *Log) fileDurableOffset() int64 {
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
	if err := l.setFlushJournal(l.cfg.Flush, cfg.Flush); err != nil {
		return err
	}
	l.cfg = cfg
	l.act.b.interval = int64(cfg.IndexIntervalBytes)
	l.storeConfig(cfg)
	return nil
}

// storeConfig publishes the parts of cfg read without mu.
func (l *Log) storeConfig(cfg Config) {
	l.policy.Store(uint32(cfg.Flush))
	l.maxBatch.Store(cfg.MaxBatchBytes)
	l.appendTime.Store(cfg.LogAppendTime)
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
// ErrStaleLeaderEpoch. A failed write takes the log offline. The batches are validated, and stamped with
// the append time under Config.LogAppendTime, before the log's lock is taken.
func (l *Log) Append(batches []byte, leaderEpoch int32) (AppendResult, error) {
	cs, err := l.check(batches)
	if err != nil {
		return AppendResult{}, err
	}
	return l.appendAndSchedule(batches, cs, leaderEpoch, true)
}

// AppendChecked appends one batch that record.Check already validated (its CRC is not computed again), as
// Append does otherwise.
func (l *Log) AppendChecked(c record.Checked, leaderEpoch int32) (AppendResult, error) {
	if len(c.Bytes) == 0 || len(c.Bytes) != c.Header.Size() {
		return AppendResult{}, fmt.Errorf("%w: %d bytes checked as a batch of %d", record.ErrCorrupt, len(c.Bytes), c.Header.Size())
	}
	if err := l.checkSize(len(c.Bytes)); err != nil {
		return AppendResult{}, err
	}
	return l.appendAndSchedule(c.Bytes, []record.Checked{c}, leaderEpoch, true)
}

// AppendAsFollower appends batches fetched from the leader, keeping their base offsets and leader epochs.
// Base offsets must not go below the log end (ErrOffsetNotMonotonic); gaps are allowed (compacted sources).
func (l *Log) AppendAsFollower(batches []byte) (AppendResult, error) {
	cs, err := l.check(batches)
	if err != nil {
		return AppendResult{}, err
	}
	return l.appendAndSchedule(batches, cs, -1, false)
}

// check splits batches and validates each one, in the order of errors Append has always had: framing
// (record.Split), size (checkSize), then contents and CRC (record.Check).
func (l *Log) check(batches []byte) ([]record.Checked, error) {
	if len(batches) == 0 {
		return nil, fmt.Errorf("%w: no batches", record.ErrCorrupt)
	}
	var cs []record.Checked
	for rest := batches; len(rest) > 0; {
		batch, tail, err := record.Split(rest)
		if err != nil {
			return nil, err
		}
		if err := l.checkSize(len(batch)); err != nil {
			return nil, err
		}
		c, err := record.Check(batch)
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
		rest = tail
	}
	return cs, nil
}

func (l *Log) checkSize(n int) error {
	if limit := l.maxBatch.Load(); n > int(limit) {
		return fmt.Errorf("%w: %d bytes > %d", ErrBatchTooLarge, n, limit)
	}
	return nil
}

// appendAndSchedule appends checked batches (their bytes are data, in order) and then, outside the log's
// lock, starts the background job of a roll or an epoch change and asks the syncer for the round the flush
// policy wants and for any writeback that is due. A leader's batches are stamped with the append time first,
// under Config.LogAppendTime: that changes their CRC, so it is done before the lock too.
func (l *Log) appendAndSchedule(data []byte, cs []record.Checked, leaderEpoch int32, assign bool) (AppendResult, error) {
	appendTime := int64(-1)
	if assign && l.appendTime.Load() {
		appendTime = l.clock.Now().UnixMilli()
		for i := range cs {
			record.SetLogAppendTime(cs[i].Bytes, appendTime)
			cs[i].Header, _ = record.ParseHeader(cs[i].Bytes) // the stamp changed three of its fields
		}
	}
	res, next, err := l.append(data, cs, leaderEpoch, assign)
	res.LogAppendTime = appendTime
	l.startJob(next.job)
	if next.sync {
		l.requestSync()
	}
	if next.wb.seg != nil {
		l.syncer.writeBack(next.wb)
	}
	if err != nil {
		return AppendResult{}, err
	}
	return res, nil
}

// append does the work of Append under mu and says what to ask of the Syncer after it, a job to start even
// when it fails after a roll.
func (l *Log) append(data []byte, cs []record.Checked, leaderEpoch int32, assign bool) (AppendResult, followUp, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var next followUp
	if err := l.writable(); err != nil {
		return AppendResult{}, next, err
	}
	if assign && leaderEpoch < l.epochs.latest() {
		return AppendResult{}, next, fmt.Errorf("%w: %d < %d", ErrStaleLeaderEpoch, leaderEpoch, l.epochs.latest())
	}
	res, epochs, err := l.prepare(cs, leaderEpoch, assign)
	if err != nil {
		return AppendResult{}, next, err
	}
	res.Bytes = len(data)
	if l.full(int64(len(data)), res.LastOffset) {
		if next.job, err = l.rollAfterJob(); err != nil {
			return AppendResult{}, next, err
		}
	}
	changed := false
	for _, e := range epochs {
		changed = l.epochs.assign(e.epoch, e.start) || changed
	}
	if changed {
		if next.job == nil {
			l.waitJob()
			if err := l.writable(); err != nil {
				return AppendResult{}, next, err
			}
		}
		next.job = l.epochJob(next.job)
	}
	if err := l.writeActive(data); err != nil {
		return AppendResult{}, next, err
	}
	pos := l.act.b.size
	if l.journaled() {
		if err := l.journalAppend(data, pos, res.FirstOffset, res.LastOffset+1, cs[0].Header.PartitionLeaderEpoch); err != nil {
			return AppendResult{}, next, err
		}
	}
	for _, c := range cs {
		_ = l.act.b.track(c.Header, pos) // offsets checked by prepare
		pos += int64(len(c.Bytes))
	}
	l.publish()
	res.LogStartOffset = l.start
	next.sync, next.wb = l.syncDue(), l.writeBackDue()
	return res, next, nil
}

// rollAfterJob waits for the previous background job and rolls, unless that job took the log offline.
// Callers hold mu.
func (l *Log) rollAfterJob() (*bgJob, error) {
	l.waitJob()
	if err := l.writable(); err != nil {
		return nil, err
	}
	return l.roll()
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

// prepare stamps a leader's batches with their base offsets and leader epoch, checks a follower's, and lists
// the epoch changes the batches bring. The batches were validated before mu (check).
func (l *Log) prepare(cs []record.Checked, leaderEpoch int32, assign bool) (AppendResult, []epochEntry, error) {
	res := AppendResult{FirstOffset: -1, MaxTimestamp: -1}
	next := l.act.b.next
	latest := l.epochs.latest()
	var epochs []epochEntry
	if assign && leaderEpoch > latest {
		epochs = append(epochs, epochEntry{epoch: leaderEpoch, start: next})
	}
	for i := range cs {
		h := &cs[i].Header
		if assign {
			record.SetBaseOffset(cs[i].Bytes, next)
			record.SetPartitionLeaderEpoch(cs[i].Bytes, leaderEpoch)
			h.BaseOffset, h.PartitionLeaderEpoch = next, leaderEpoch
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

// full says the active segment must roll before n more bytes ending at offset last: they would not fit in
// it, or it is too old.
func (l *Log) full(n, last int64) bool {
	b := &l.act.b
	if b.nBatches == 0 {
		return false
	}
	return b.size+n > l.cfg.SegmentBytes || b.size+n > maxSegmentPos || last-b.base > maxRelOffset || l.expired() ||
		l.indexFull()
}

// expired says the active segment is old enough to roll: SegmentAge (or, for a compacted log, a shorter
// MaxCompactionLag, as Kafka does) less the segment's jitter.
func (l *Log) expired() bool {
	age := l.cfg.SegmentAge
	if l.cfg.Compact && l.cfg.MaxCompactionLag > 0 {
		age = min(age, l.cfg.MaxCompactionLag)
	}
	return l.act.b.nBatches > 0 && l.clock.Now().Sub(l.act.created) >= age-l.act.jitter
}

// rollJitter draws a new active segment's jitter, in [0, min(SegmentJitter, SegmentAge)). Callers hold mu.
func (l *Log) rollJitter() time.Duration {
	j := min(l.cfg.SegmentJitter, l.cfg.SegmentAge)
	if j <= 0 {
		return 0
	}
	return time.Duration(l.rand.Int64N(int64(j)))
}

// indexFull says the active segment's offset or time index holds as many entries as segment.index.bytes
// allows (the time index keeping room for the entry a roll adds).
func (l *Log) indexFull() bool {
	capBytes := int(l.cfg.IndexMaxBytes)
	if capBytes == 0 {
		return false
	}
	b := &l.act.b
	return len(b.idx) >= capBytes/offsetEntrySize || len(b.tidx)+1 >= capBytes/timeEntrySize
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
// It parks only a durable segment so that no write of it can fail where no open handle would report it,
// and closes the spare file of the next roll too. Callers hold mu.
func (l *Log) parkIdleActive() {
	a := &l.act
	if j := l.job; j != nil && j.closed != nil {
		return // the job of the roll that made this segment active has still to give its file its name
	}
	if l.spare != nil {
		_ = l.spare.Close() // an empty file, created again by the next roll
		l.spare = nil
	}
	if a.file == nil {
		return
	}
	quiet := !a.written && l.fileDurableOffset() >= a.b.next
	a.written = false
	if a.seg.closeIfIdle(quiet) {
		a.file = nil
	}
}

// newActive creates an empty segment at base, makes its directory entry durable and makes it active.
func (l *Log) newActive(base int64) error {
	seg := newSegment(l.fs, l.dir, base)
	f, err := createSegmentFile(l.fs, seg.path, l.preallocation())
	if err != nil {
		return l.fail("create "+seg.path, err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		_ = f.Close() // the log is going offline for the sync error
		return l.fail("sync dir "+l.dir, err)
	}
	l.installActive(seg, f)
	return nil
}

// preallocation is how many bytes a new segment file gets reserved: SegmentBytes under preallocate, else
// none. Callers hold mu.
func (l *Log) preallocation() int64 {
	if !l.cfg.Preallocate {
		return 0
	}
	return l.cfg.SegmentBytes
}

// createSegmentFile creates (or truncates) a segment file and reserves its first size bytes of disk
// (Config.Preallocate); the file's size stays 0, so nothing in it is a zero tail for recovery to cut.
func createSegmentFile(fsys vfs.FS, path string, size int64) (vfs.File, error) {
	f, err := fsys.Create(path)
	if err != nil || size == 0 {
		return f, err
	}
	if err := f.Allocate(size); err != nil {
		_ = f.Close() // the error is the allocation's
		return nil, err
	}
	return f, nil
}

// installActive makes seg, empty and open as f, the active segment.
func (l *Log) installActive(seg *segment, f vfs.File) {
	seg.setFile(f)
	l.segs = append(l.segs[:len(l.segs):len(l.segs)], seg)
	l.act = activeState{seg: seg, file: f, created: l.clock.Now(), jitter: l.rollJitter()}
	l.act.b.interval = int64(l.cfg.IndexIntervalBytes)
	l.act.b.reset(seg.base)
}

// writeIndexFiles writes a segment's two index files, each through a synced temporary file renamed over it, so
// that a crash leaves each one whole or missing (recovery rebuilds a missing one), never short. The caller
// syncs the directory.
func (l *Log) writeIndexFiles(seg *segment, idx []offsetEntry, tidx []timeEntry) error {
	if err := writeRenamed(l.fs, seg.indexPath(), encodeOffsetIndex(idx)); err != nil {
		return l.fail("write "+seg.indexPath(), err)
	}
	if err := writeRenamed(l.fs, seg.timeIndexPath(), encodeTimeIndex(tidx)); err != nil {
		return l.fail("write "+seg.timeIndexPath(), err)
	}
	return nil
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
	if l.fileDurableOffset() >= point.offset && gen == l.gen.Load() {
		return
	}
	_ = l.syncSegment(seg, point, gen) // a failure took the log offline
}

// syncSegment fdatasyncs seg and moves the durable point to p, taken in truncation generation gen. A
// segment rolled (and synced by the roll's job) or closed with its log meanwhile is left alone, with
// errSegmentGone; a failed fdatasync takes the log offline.
func (l *Log) syncSegment(seg *segment, p durablePoint, gen uint64) error {
	f, err := seg.acquire()
	if err != nil {
		return err
	}
	err = f.Sync()
	seg.release()
	if err != nil {
		return l.fail("fdatasync "+seg.path, err)
	}
	l.advanceDurable(p, gen)
	return nil
}

// advanceDurable moves the durable point forward if no truncation happened since gen, and wakes waiters. A
// point past the barrier of a roll whose closed segment is not synced yet is held until the barrier is lifted.
func (l *Log) advanceDurable(p durablePoint, gen uint64) {
	l.durMu.Lock()
	defer l.durMu.Unlock()
	if gen != l.gen.Load() || p.offset < l.durable.offset {
		return
	}
	if l.barrier >= 0 && p.offset > l.barrier {
		if p.offset > l.held.offset {
			l.held = p
		}
		return
	}
	l.moveDurableLocked(p)
}

// liftBarrier is called by a roll's job once the segment the roll closed is synced and its successor's name
// durable: the durable point moves to p, that segment's end, or to the point a sync held meanwhile.
func (l *Log) liftBarrier(p durablePoint, gen uint64) {
	l.durMu.Lock()
	defer l.durMu.Unlock()
	if l.held.offset > p.offset {
		p = l.held
	}
	l.barrier, l.held = -1, durablePoint{}
	if gen != l.gen.Load() || p.offset < l.durable.offset {
		return
	}
	l.moveDurableLocked(p)
}

func (l *Log) moveDurableLocked(p durablePoint) {
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
		durable, ch, closed := max(l.durable.offset, l.jDurable), l.durCh, l.durClosed
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
	l.settle()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.waitJob()
	if l.spare != nil {
		_ = l.spare.Close() // an empty file: closeClean removes it, the next Open otherwise
		l.spare = nil
	}
	var err error
	if l.writable() == nil {
		err = l.closeClean()
		if err == nil {
			// the log's records must never be replayed into a directory opened again under its name, by
			// a log that writes it without the journal or by a topic made again
			err = l.voidJournal()
		}
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
	if err := l.fs.Remove(l.sparePath()); err != nil && !vfs.IsNotExist(err) {
		return l.fail("remove "+l.sparePath(), err)
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
