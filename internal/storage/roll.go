package storage

import (
	"path/filepath"
	"sync"

	"github.com/weir-mq/weir/internal/vfs"
)

// spareName is the file the next roll makes the active segment, created ahead of it (bgJob.run) so that a roll
// creates no file under mu. The roll's job renames it to the segment's name once the segment before it is
// synced, so a segment's name never becomes durable before every byte of the segment it follows.
const spareName = "next-segment" + logSuffix + tmpSuffix

// bgJob is the slow half of a roll, an epoch change or a recovery point: the I/O the writer leaves for after mu, done on the
// Syncer's job goroutine (or by the writer itself once the Syncer is closed). At most one is in flight per log:
// the writer waits for the previous one (waitJob) before it rolls, changes epochs, truncates, deletes or
// replaces a segment, or closes. It never takes mu.
type bgJob struct {
	l   *Log
	gen uint64 // the log's truncation generation at the roll
	// A roll: closed is the segment it closed, with file its append handle (a reference held until synced),
	// idx and tidx its indexes, and end the durable point its end is; next is the new active segment, whose
	// file is still named spareName.
	closed *segment
	file   vfs.File
	idx    []offsetEntry
	tidx   []timeEntry
	txns   []TxnIndexEntry
	end    durablePoint
	next   *segment
	// epochs and recoveryPoint are the checkpoints to write, nil if unchanged.
	epochs        []byte
	recoveryPoint []byte
	// spare is the next roll's file, prepared by a roll's job; it is set before done is closed. allocate is
	// the disk it reserves for it (preallocation, taken at the roll).
	spare    vfs.File
	allocate int64
	done     chan struct{}
}

// roll closes the active segment and starts a new one at the log end, in memory: the closed segment is
// sealed with its in-memory indexes and the spare file becomes the active one. The I/O (fdatasync of the
// closed segment, its successor's name, its index files) is the returned job, which the caller starts
// once mu is released (startJob); until it has synced the closed segment, the durable point stays at or
// below that segment's end (barrier). Callers hold mu and waited for the previous job.
func (l *Log) roll() (*bgJob, error) {
	a := &l.act
	if _, err := l.activeFile(); err != nil {
		return nil, err
	}
	f := l.spare
	l.spare = nil
	if f == nil {
		var err error
		if f, err = createSegmentFile(l.fs, l.sparePath(), l.preallocation()); err != nil {
			return nil, l.fail("create "+l.sparePath(), err)
		}
	}
	old := a.seg
	held, err := old.acquire() // the append handle, open: no I/O
	if err != nil {
		_ = f.Close() // the spare is created again by the next roll
		return nil, err
	}
	a.b.finish()
	old.size, old.next = a.b.size, a.b.next
	old.seal(a.b.idx, a.b.tidx, a.b.maxTs, l.clock.Now())
	old.txns, old.txnFile = a.txns, len(a.txns) > 0
	j := &bgJob{
		l: l, gen: l.gen.Load(), closed: old, file: held, idx: a.b.idx, tidx: a.b.tidx, txns: a.txns,
		allocate: l.preallocation(), done: make(chan struct{}),
	}
	l.installActive(newSegment(l.fs, l.dir, old.next), f)
	j.next = l.act.seg
	j.end = durablePoint{offset: old.next, base: j.next.base, pos: 0}
	l.durMu.Lock()
	l.barrier, l.held = old.next, durablePoint{}
	l.durMu.Unlock()
	l.job = j
	return j, nil
}

// epochJob returns the job that writes the epoch checkpoint after an append changed the epochs: the append's
// roll job if it rolled, else a new one. Callers hold mu and waited for any previous job.
func (l *Log) epochJob(j *bgJob) *bgJob {
	j = l.newJob(j)
	j.epochs = l.epochs.encode()
	return j
}

// recoveryPointJob returns the job that saves p as the recovery point checkpoint: j if Maintain rolled, else
// a new one. The writer counts it saved from here on: a truncation below it waits for the job (waitJob) and
// saves a lower one. Callers hold mu and waited for any previous job.
func (l *Log) recoveryPointJob(j *bgJob, p durablePoint) *bgJob {
	j = l.newJob(j)
	j.recoveryPoint = formatInts(p.offset, p.base, p.pos)
	l.rpSaved = p
	return j
}

func (l *Log) newJob(j *bgJob) *bgJob {
	if j == nil {
		j = &bgJob{l: l, done: make(chan struct{})}
		l.job = j
	}
	return j
}

func (l *Log) sparePath() string { return filepath.Join(l.dir, spareName) }

// waitJob waits for the last background job if it is still running and takes the spare file it prepared.
// Callers hold mu; the job never takes it.
func (l *Log) waitJob() {
	j := l.job
	if j == nil {
		return
	}
	<-j.done
	l.job = nil
	if j.spare != nil {
		l.spare = j.spare
	}
}

// settle waits for the background job in flight, if any, without mu, so that a writer that must wait for it
// (waitJob) seldom does so holding mu.
func (l *Log) settle() {
	l.mu.Lock()
	j := l.job
	l.mu.Unlock()
	if j != nil {
		<-j.done
	}
}

// startJob hands j to the Syncer, or runs it here if the Syncer is closed. Callers do not hold mu.
func (l *Log) startJob(j *bgJob) {
	if j != nil && !l.syncer.startJob(j) {
		j.run()
	}
}

// run does the job: first what the durable point waits for (the closed segment synced, its successor's name
// made durable), then the checkpoints, then the closed segment's index files (its transaction index too
// when it holds an ABORT marker), each written whole or not at all (recovery rebuilds missing ones), then the next roll's spare file. A failure takes the log offline,
// as it would under mu; an offline log's job does nothing.
func (j *bgJob) run() {
	defer close(j.done)
	l := j.l
	if j.closed != nil && !j.seal() {
		return
	}
	if l.offline.Load() != nil {
		return
	}
	for _, c := range []struct {
		name string
		data []byte
	}{{epochCheckpointName, j.epochs}, {recoveryCheckpointName, j.recoveryPoint}} {
		if c.data == nil {
			continue
		}
		if err := writeFileAtomic(l.fs, l.dir, c.name, c.data); err != nil {
			l.fail("write "+c.name, err)
			return
		}
	}
	if j.closed == nil {
		return
	}
	if err := l.writeIndexFiles(j.closed, j.idx, j.tidx); err != nil {
		return
	}
	if len(j.txns) > 0 {
		if err := writeRenamed(l.fs, j.closed.txnIndexPath(), encodeTxnIndex(j.txns)); err != nil {
			l.fail("write "+j.closed.txnIndexPath(), err)
			return
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		l.fail("sync dir "+l.dir, err)
		return
	}
	// without a spare the next roll creates the file itself, and reports a failure there
	if f, err := createSegmentFile(l.fs, l.sparePath(), j.allocate); err == nil {
		j.spare = f
	}
}

// seal syncs the closed segment (unless a sync already made all of it durable), renames its successor's
// file to the successor's name, syncs the directory and lifts the durable point's barrier.
func (j *bgJob) seal() bool {
	l := j.l
	err := func() error {
		defer j.closed.release()
		if l.offline.Load() != nil || l.fileDurableOffset() >= j.end.offset {
			return nil
		}
		if err := j.file.Sync(); err != nil {
			return l.fail("fdatasync "+j.closed.path, err)
		}
		return nil
	}()
	if err != nil || l.offline.Load() != nil {
		return false
	}
	if err := l.fs.Rename(l.sparePath(), j.next.path); err != nil {
		l.fail("rename "+j.next.path, err)
		return false
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		l.fail("sync dir "+l.dir, err)
		return false
	}
	l.liftBarrier(j.end, j.gen)
	return true
}

// runJobs runs the jobs of different logs in parallel.
func runJobs(jobs []*bgJob) {
	if len(jobs) == 1 {
		jobs[0].run()
		return
	}
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Go(j.run)
	}
	wg.Wait()
}
