package storage

import (
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-mq/weir/internal/clock"
	"github.com/weir-mq/weir/internal/vfs"
)

// Syncer makes logs durable for one data directory (group commit). Logs that ask for a sync while a round is
// running are all synced in the next round, in parallel so the filesystem can merge their journal commits;
// each log then releases its waiters by offset. One goroutine runs the rounds; Close stops it. A second
// goroutine starts the early writeback of logs that are not synced on every append (writeBackBytes), so that
// the appender does not pay for submitting it. A third runs the logs' background jobs (bgJob: the I/O of a
// roll, of an epoch change, of a recovery point), those of different logs in parallel.
type Syncer struct {
	clock   Clock // times the rounds, on the syncer's goroutine
	mu      sync.Mutex
	cond    *sync.Cond
	pending []*Log
	// holds counts the Holds not released; pendingSince is when pending last became non-empty, and
	// gatherArmed is set while a timer will wake the round once gatherMax has passed since then.
	holds        int
	pendingSince time.Time
	gatherArmed  bool
	closed       bool
	done         chan struct{}
	jobs         []*bgJob
	jobCond      *sync.Cond
	jobDone      chan struct{}
	wb           chan writeBackRange
	wbDone       chan struct{}
	// roundSeconds and roundLogs describe the rounds run: their duration and how many logs each synced.
	roundSeconds distribution
	roundLogs    distribution

	// The journal of the data directory, for a syncer made by OpenSyncer (journal_sync.go); nil otherwise.
	// jDurable is the last seq a round made durable and jErr the error that took the journal offline, both
	// under mu; jCh is closed after every round; forced asks for a round with no log pending (waitJournal);
	// dirty lists the logs with records since the last checkpoint.
	j        *journal
	fs       vfs.FS
	dataDir  string
	logger   *slog.Logger
	jDurable int64
	jErr     error
	jCh      chan struct{}
	forced   bool
	dirty    []*Log
	// directBytes is the size from which an append to a journaled log goes past the journal (journalAppend);
	// ckptSeq is the last seq a durable journal-checkpoint covers, which no replay applies again.
	directBytes int
	ckptSeq     atomic.Int64
	ckptMu      sync.Mutex
	ckptAt      time.Time
	ckptCh      chan struct{}
	ckptDone    chan struct{}
}

// The bucket bounds of SyncStats' distributions: a round's duration in seconds, and how many logs it synced.
var (
	SyncSecondsBounds = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}
	SyncLogsBounds    = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256}
)

// SyncStats describes the group-commit rounds a Syncer has run: each round's duration (the fdatasyncs of all
// its logs, run in parallel) and its size in logs.
type SyncStats struct {
	Seconds Distribution
	Logs    Distribution
}

// Distribution is a snapshot of observations in fixed buckets, as a Prometheus histogram holds them.
type Distribution struct {
	// Bounds are the buckets' upper bounds; Cumulative[i] counts the observations at or below Bounds[i].
	Bounds     []float64
	Cumulative []uint64
	// Count counts every observation, those above the last bound too; Sum adds them up.
	Count uint64
	Sum   float64
}

// distribution counts observations in buckets: one goroutine observes, any goroutine may snapshot.
type distribution struct {
	bounds []float64
	counts []atomic.Uint64 // one per bound, plus one for the observations above the last
	sum    atomic.Uint64   // math.Float64bits of the sum; only the observer writes it
}

func newDistribution(bounds []float64) distribution {
	return distribution{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
}

func (d *distribution) observe(v float64) {
	i := 0
	for i < len(d.bounds) && v > d.bounds[i] {
		i++
	}
	d.counts[i].Add(1)
	d.sum.Store(math.Float64bits(math.Float64frombits(d.sum.Load()) + v))
}

func (d *distribution) snapshot() Distribution {
	out := Distribution{Bounds: d.bounds, Cumulative: make([]uint64, len(d.bounds))}
	for i := range d.counts {
		out.Count += d.counts[i].Load()
		if i < len(d.bounds) {
			out.Cumulative[i] = out.Count
		}
	}
	out.Sum = math.Float64frombits(d.sum.Load())
	return out
}

// Stats returns what the syncer's rounds have been so far.
func (s *Syncer) Stats() SyncStats {
	return SyncStats{Seconds: s.roundSeconds.snapshot(), Logs: s.roundLogs.snapshot()}
}

// writeBackQueue bounds the writeback ranges waiting for the Syncer; more are dropped, being only hints.
const writeBackQueue = 64

// NewSyncer starts a syncer. Close it after every log that uses it is closed.
func NewSyncer() *Syncer { return newSyncer(clock.System{}) }

// newSyncer starts a syncer that times its rounds with clk, which its goroutine reads.
func newSyncer(clk Clock) *Syncer {
	s := &Syncer{
		clock: clk, done: make(chan struct{}), wb: make(chan writeBackRange, writeBackQueue), wbDone: make(chan struct{}),
		jobDone:      make(chan struct{}),
		roundSeconds: newDistribution(SyncSecondsBounds), roundLogs: newDistribution(SyncLogsBounds),
	}
	s.cond = sync.NewCond(&s.mu)
	s.jobCond = sync.NewCond(&s.mu)
	go s.run()
	go s.writeBackLoop()
	go s.jobLoop()
	return s
}

// Close syncs what is pending, runs the jobs queued, stops the goroutines and waits for them. Later sync
// requests fail with ErrClosed; later writeback ranges are dropped; later jobs are refused (startJob), so the
// log runs them itself. A journaled syncer then checkpoints (every log being closed, the journal keeps
// nothing a restart must replay) and closes the journal.
func (s *Syncer) Close() {
	if !s.closeLoops() || s.j == nil {
		return
	}
	close(s.ckptCh)
	<-s.ckptDone
	if err := s.checkpoint(); err != nil {
		s.logger.Error("final journal checkpoint failed; the next start replays the journal", "data_dir", s.dataDir, "err", err)
	}
	if err := s.j.close(); err != nil {
		s.logger.Error("close the journal", "data_dir", s.dataDir, "err", err)
	}
}

// closeLoops stops the goroutines of the rounds, the writeback and the jobs; true for the first call.
func (s *Syncer) closeLoops() bool {
	s.mu.Lock()
	first := !s.closed
	if first {
		s.closed = true
		s.cond.Broadcast()
		s.jobCond.Broadcast()
		close(s.wb)
	}
	s.mu.Unlock()
	<-s.done
	<-s.wbDone
	<-s.jobDone
	return first
}

// startJob queues j for the job goroutine; false if the syncer is closed.
func (s *Syncer) startJob(j *bgJob) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.jobs = append(s.jobs, j)
	s.jobCond.Signal()
	return true
}

func (s *Syncer) jobLoop() {
	defer close(s.jobDone)
	var jobs []*bgJob
	for {
		s.mu.Lock()
		for len(s.jobs) == 0 && !s.closed {
			s.jobCond.Wait()
		}
		if len(s.jobs) == 0 {
			s.mu.Unlock()
			return
		}
		jobs, s.jobs = s.jobs, jobs[:0]
		s.mu.Unlock()
		runJobs(jobs)
		clear(jobs)
	}
}

// writeBack queues r for the writeback goroutine, unless the queue is full or the syncer closed: a
// dropped range is only written back later, by the kernel or the next fdatasync.
func (s *Syncer) writeBack(r writeBackRange) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	select {
	case s.wb <- r:
	default:
	}
}

func (s *Syncer) writeBackLoop() {
	defer close(s.wbDone)
	for r := range s.wb {
		f, err := r.seg.acquire()
		if err != nil {
			continue // deleted, or its log closed
		}
		f.WriteBack(r.off, r.n)
		r.seg.release()
	}
}

// enqueue asks for l to be synced in the next round; false if the syncer is closed.
func (s *Syncer) enqueue(l *Log) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if len(s.pending) == 0 {
		s.pendingSince = s.clock.Now()
	}
	s.pending = append(s.pending, l)
	s.cond.Signal()
	return true
}

// gatherMax bounds how long a Hold keeps a round from starting once a log has asked for one, so that
// holds of requests that overlap one another never starve the syncs: about what a produce request
// takes to append to a few dozen partitions, and less than the round it saves (an fdatasync took
// 0.2-1.5 ms on the development machine's disk).
const gatherMax = 500 * time.Microsecond

// Hold keeps the next round from starting until release is called (or gatherMax has passed since a log
// asked for the round). A caller about to append to several logs whose syncs it will wait for (a
// produce request's partitions) holds the syncer over its appends, so that they are synced in one round
// rather than the first alone and the others in the round after (docs/storage.md, "Durability").
func (s *Syncer) Hold() (release func()) {
	s.mu.Lock()
	s.holds++
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.holds--
			if s.holds == 0 {
				s.cond.Broadcast()
			}
			s.mu.Unlock()
		})
	}
}

// roundDue reports, with mu held, whether the logs pending may be synced now: there are some, and no
// Hold keeps them back, or gatherMax has passed since the first asked. While a Hold keeps them back it
// arms a timer that wakes run when gatherMax has passed.
func (s *Syncer) roundDue() bool {
	if s.forced {
		return true
	}
	if len(s.pending) == 0 {
		return false
	}
	if s.holds == 0 {
		return true
	}
	waited := s.clock.Now().Sub(s.pendingSince)
	if waited >= gatherMax {
		return true
	}
	if !s.gatherArmed {
		s.gatherArmed = true
		time.AfterFunc(gatherMax-waited, func() {
			s.mu.Lock()
			s.gatherArmed = false
			s.cond.Broadcast()
			s.mu.Unlock()
		})
	}
	return false
}

func (s *Syncer) run() {
	defer close(s.done)
	var round []*Log
	for {
		s.mu.Lock()
		for !s.roundDue() && !s.closed {
			s.cond.Wait()
		}
		if len(s.pending) == 0 && !s.forced {
			s.mu.Unlock()
			return
		}
		round, s.pending = s.pending, round[:0]
		s.forced = false
		s.mu.Unlock()
		start := s.clock.Now()
		s.syncRound(round)
		s.roundSeconds.observe(s.clock.Now().Sub(start).Seconds())
		s.roundLogs.observe(float64(len(round)))
		clear(round)
	}
}

// syncRound makes the round's logs durable: a journaled syncer writes and fdatasyncs its journal once and
// releases the journaled logs' waiters; every other log, and every journaled log with appends written past
// the journal, is fdatasync'd, all in parallel with the journal.
func (s *Syncer) syncRound(logs []*Log) {
	if s.j == nil && len(logs) == 1 {
		logs[0].syncNow()
		return
	}
	var wg sync.WaitGroup
	if s.j != nil {
		var journaled []*Log
		n := 0
		for _, l := range logs {
			if !l.journaled() {
				logs[n] = l
				n++
				continue
			}
			l.syncQueued.Store(false) // a log that asks again from here on is in the next round
			journaled = append(journaled, l)
			if l.directOwed() {
				wg.Go(l.syncDirect)
			}
		}
		logs = logs[:n]
		wg.Go(func() {
			seq, err := s.journalRound()
			for _, l := range journaled {
				l.ackJournal(seq, err)
			}
		})
	}
	for _, l := range logs {
		wg.Go(l.syncNow)
	}
	wg.Wait()
}
