package storage

import "sync"

// Syncer makes logs durable for one data directory (group commit). Logs that ask for a sync while a round is
// running are all synced in the next round, in parallel so the filesystem can merge their journal commits;
// each log then releases its waiters by offset. One goroutine runs the rounds; Close stops it. A second
// goroutine starts the early writeback of logs that are not synced on every append (writeBackBytes), so that
// the appender does not pay for submitting it.
type Syncer struct {
	mu      sync.Mutex
	cond    *sync.Cond
	pending []*Log
	closed  bool
	done    chan struct{}
	wb      chan writeBackRange
	wbDone  chan struct{}
}

// writeBackQueue bounds the writeback ranges waiting for the Syncer; more are dropped, being only hints.
const writeBackQueue = 64

// NewSyncer starts a syncer. Close it after every log that uses it is closed.
func NewSyncer() *Syncer {
	s := &Syncer{done: make(chan struct{}), wb: make(chan writeBackRange, writeBackQueue), wbDone: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	go s.run()
	go s.writeBackLoop()
	return s
}

// Close syncs what is pending, stops both goroutines and waits for them. Later sync requests fail with
// ErrClosed; later writeback ranges are dropped.
func (s *Syncer) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.done
		<-s.wbDone
		return
	}
	s.closed = true
	s.cond.Broadcast()
	close(s.wb)
	s.mu.Unlock()
	<-s.done
	<-s.wbDone
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
	s.pending = append(s.pending, l)
	s.cond.Signal()
	return true
}

func (s *Syncer) run() {
	defer close(s.done)
	var round []*Log
	for {
		s.mu.Lock()
		for len(s.pending) == 0 && !s.closed {
			s.cond.Wait()
		}
		if len(s.pending) == 0 {
			s.mu.Unlock()
			return
		}
		round, s.pending = s.pending, round[:0]
		s.mu.Unlock()
		syncRound(round)
		clear(round)
	}
}

func syncRound(logs []*Log) {
	if len(logs) == 1 {
		logs[0].syncNow()
		return
	}
	var wg sync.WaitGroup
	for _, l := range logs {
		wg.Go(l.syncNow)
	}
	wg.Wait()
}
