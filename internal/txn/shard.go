package txn

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/storage"
)

// shard coordinates the transactional ids of one partition of __transaction_state that this node leads.
// Its owner goroutine (run) holds every id's state machine: it first reads the partition back up to the
// log end offset the new leader has, waiting until the high watermark covers that end, then writes the
// markers of the transactions it found in Prepare* again and serves the requests submitted to it in
// order. Every AbortInterval it aborts timed-out transactions, removes expired ids and restarts the
// markers of a Prepare* whose Complete* record failed. Writes go to the log from the owner; a waiter
// goroutine waits for each to be committed, in write order, and hands the outcome back as a message;
// markers are written by one goroutine per ending transaction, whose completion comes back the same way.
type shard struct {
	c     *Coordinator
	p     int32
	log   Log
	epoch int32

	// mu guards the inbox; it is never held while a message runs.
	mu     sync.Mutex
	inbox  []message
	closed bool
	wake   chan struct{}
	quit   chan struct{}
	done   chan struct{}

	// wmu guards the writes waiting to be committed.
	wmu     sync.Mutex
	writes  []pendingWrite
	wclosed bool
	wwake   chan struct{}
	wdone   chan struct{}

	// markersCtx ends the marker goroutines when the shard stops; markersWG waits for them.
	markersCtx    context.Context
	markersCancel context.CancelFunc
	markersWG     sync.WaitGroup

	// Owned by run.
	loaded     bool
	loadOffset int64
	loadEnd    int64
	loading    *loaded
	txns       map[string]*Txn
	// writing holds the ids whose markers are being written.
	writing map[string]bool
	timer   <-chan time.Time
}

// message is one unit of work for the owner. stopped tells a request that the shard no longer
// coordinates; internal messages (write and marker completions) always run as if not stopped.
type message struct {
	fn       func(stopped bool)
	internal bool
}

type pendingWrite struct {
	wait func(context.Context) error
	done func(error)
}

func (c *Coordinator) newShard(p int32, l Log) *shard {
	ctx, cancel := context.WithCancel(context.Background())
	return &shard{
		c: c, p: p, log: l, epoch: l.LeaderEpoch(),
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
		wwake: make(chan struct{}, 1), wdone: make(chan struct{}),
		markersCtx: ctx, markersCancel: cancel,
		loadOffset: -1, loading: newLoaded(),
		txns: map[string]*Txn{}, writing: map[string]bool{},
	}
}

// submit queues a request; false once the shard no longer takes requests.
func (s *shard) submit(fn func(stopped bool)) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	s.inbox = append(s.inbox, message{fn: fn})
	s.mu.Unlock()
	s.signal()
	return true
}

// submitInternal queues a completion; the owner runs these until it has stopped.
func (s *shard) submitInternal(fn func()) {
	s.mu.Lock()
	s.inbox = append(s.inbox, message{fn: func(bool) { fn() }, internal: true})
	s.mu.Unlock()
	s.signal()
}

func (s *shard) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// close stops the shard and waits for it.
func (s *shard) close() {
	close(s.quit)
	<-s.done
}

func (s *shard) drain(stopped bool) {
	s.mu.Lock()
	msgs := s.inbox
	s.inbox = nil
	s.mu.Unlock()
	for _, m := range msgs {
		m.fn(stopped && !m.internal)
	}
}

// leads reports whether the shard's replica still leads in the epoch the shard was loaded for.
func (s *shard) leads() bool {
	return s.log.IsLeader() && s.log.LeaderEpoch() == s.epoch
}

func (s *shard) run() {
	defer close(s.done)
	go s.waiter()
	hwMoved := make(chan struct{}, 1)
	stopWatch := s.log.Watch(hwMoved)
	for !s.loaded {
		select {
		case <-s.quit:
			stopWatch()
			s.stop()
			return
		default:
		}
		if s.loadStep() {
			s.drain(false)
			continue
		}
		select {
		case <-hwMoved:
		case <-s.wake:
			s.drain(false)
		case <-s.quit:
			stopWatch()
			s.stop()
			return
		}
	}
	stopWatch()
	for {
		select {
		case <-s.wake:
			s.drain(false)
		case <-s.timer:
			s.sweep()
		case <-s.quit:
			s.stop()
			return
		}
	}
}

// stop ends the marker goroutines, answers the queued requests with ErrNotCoordinator and finishes the
// writes in flight.
func (s *shard) stop() {
	s.markersCancel()
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.wmu.Lock()
	s.wclosed = true
	s.wmu.Unlock()
	select {
	case s.wwake <- struct{}{}:
	default:
	}
	for {
		select {
		case <-s.wake:
			s.drain(true)
		case <-s.wdone:
			s.markersWG.Wait()
			s.drain(true)
			return
		}
	}
}

// waiter waits for each write to be committed, in write order, and hands the outcome to the owner.
func (s *shard) waiter() {
	defer close(s.wdone)
	for {
		s.wmu.Lock()
		ws := s.writes
		s.writes = nil
		closed := s.wclosed
		s.wmu.Unlock()
		for _, w := range ws {
			err := w.wait(context.Background())
			done := w.done
			s.submitInternal(func() { done(err) })
		}
		if len(ws) > 0 {
			continue
		}
		if closed {
			return
		}
		<-s.wwake
	}
}

// writeFailed is the error of a request whose record could not be written: ErrNotCoordinator when the
// replica no longer leads (the client then finds the new coordinator), else ErrCoordinatorNotAvailable.
func writeFailed(err error) error {
	if errors.Is(err, partition.ErrNotLeader) || errors.Is(err, partition.ErrClosed) {
		return fmt.Errorf("%w: %w", ErrNotCoordinator, err)
	}
	return fmt.Errorf("%w: %w", ErrCoordinatorNotAvailable, err)
}

// apply carries out out for t: it writes out's record and, once it is committed or failed, lets t
// apply it, starts the markers of a stored Prepare*, drops a removed id, and calls done with the
// write's error (mapped by writeFailed).
func (s *shard) apply(t *Txn, out Output, done func(error)) {
	if out.Record == nil {
		if done != nil {
			done(out.Err)
		}
		return
	}
	now := s.c.clock.Now()
	finish := func(err error) {
		eff := t.Stored(err)
		switch {
		case eff.Err != nil:
			s.c.log.Warn("txn: writing a transaction's record failed", "partition", s.p, "transactional_id", t.cur.ID, "err", eff.Err)
		case eff.Markers:
			s.startMarkers(t)
		}
		if !t.Exists() && !t.Pending() && s.txns[t.cur.ID] == t {
			// The id's tombstone is stored, or its first record failed.
			delete(s.txns, t.cur.ID)
		}
		if done != nil {
			if eff.Err != nil {
				done(writeFailed(eff.Err))
				return
			}
			done(nil)
		}
	}
	_, wait, err := s.log.Append(encodeBatch(*out.Record, now))
	if err != nil {
		finish(fmt.Errorf("txn: write to %s-%d: %w", StateTopic, s.p, err))
		return
	}
	s.wmu.Lock()
	s.writes = append(s.writes, pendingWrite{wait: wait, done: finish})
	s.wmu.Unlock()
	select {
	case s.wwake <- struct{}{}:
	default:
	}
}

func (s *shard) txn(id string) *Txn {
	t := s.txns[id]
	if t == nil {
		t = NewTxn(id)
		s.txns[id] = t
	}
	return t
}

func (s *shard) initProducerID(id string, req InitRequest, reply func(ProducerIDEpoch, error)) {
	t := s.txn(id)
	out := t.InitProducerID(s.c.clock.Now(), req)
	if !t.Exists() && !t.Pending() {
		delete(s.txns, id)
	}
	if out.Record == nil || out.Err != nil {
		s.apply(t, out, nil)
		if out.Err != nil {
			reply(ProducerIDEpoch{}, out.Err)
			return
		}
		m := t.Metadata()
		reply(ProducerIDEpoch{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch}, nil)
		return
	}
	s.apply(t, out, func(err error) {
		if err != nil {
			reply(ProducerIDEpoch{}, err)
			return
		}
		m := t.Metadata()
		reply(ProducerIDEpoch{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch}, nil)
	})
}

func (s *shard) addPartitions(id string, p ProducerIDEpoch, parts []TopicPartition, reply func(struct{}, error)) {
	t := s.txns[id]
	if t == nil {
		reply(struct{}{}, ErrInvalidProducerIDMapping)
		return
	}
	s.apply(t, t.AddPartitions(s.c.clock.Now(), p.ProducerID, p.ProducerEpoch, parts), func(err error) { reply(struct{}{}, err) })
}

func (s *shard) endTxn(id string, p ProducerIDEpoch, commit bool, reply func(struct{}, error)) {
	t := s.txns[id]
	if t == nil {
		reply(struct{}{}, ErrInvalidProducerIDMapping)
		return
	}
	s.apply(t, t.EndTxn(s.c.clock.Now(), p.ProducerID, p.ProducerEpoch, commit), func(err error) { reply(struct{}{}, err) })
}

// startMarkers writes the markers of t's Prepare* in a goroutine, retrying the partitions that fail
// with a back-off until all have them or the shard stops; then Complete* is written.
func (s *shard) startMarkers(t *Txn) {
	m := t.Metadata()
	if s.writing[m.ID] {
		return
	}
	s.writing[m.ID] = true
	marker := partition.Marker{
		ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, CoordinatorEpoch: s.epoch, Commit: m.State == PrepareCommit,
		TransactionVersion: int8(m.ClientTransactionVersion),
	}
	s.markersWG.Add(1)
	go func() {
		defer s.markersWG.Done()
		parts := m.Partitions
		backoff := markerBackoffMin
		for len(parts) > 0 {
			errs := s.c.markers.WriteMarkers(s.markersCtx, marker, parts)
			var failed []TopicPartition
			for i, err := range errs {
				if err != nil {
					failed = append(failed, parts[i])
					s.c.log.Debug("txn: writing a marker failed; retrying", "transactional_id", m.ID,
						"topic", parts[i].Topic, "partition", parts[i].Partition, "err", err)
				}
			}
			if len(errs) < len(parts) {
				failed = append(failed, parts[len(errs):]...)
			}
			parts = failed
			if len(parts) == 0 {
				break
			}
			select {
			case <-s.c.clock.After(backoff):
			case <-s.markersCtx.Done():
				return
			}
			backoff = min(2*backoff, markerBackoffMax)
		}
		s.submitInternal(func() { s.markersDone(t, m) })
	}()
}

// markersDone writes Complete* for t once every marker of m's Prepare* is written, unless t moved on.
func (s *shard) markersDone(t *Txn, m Metadata) {
	delete(s.writing, m.ID)
	if s.txns[m.ID] != t || t.Pending() {
		return
	}
	cur := t.Metadata()
	if cur.State != m.State || cur.ProducerID != m.ProducerID || cur.ProducerEpoch != m.ProducerEpoch {
		return
	}
	s.apply(t, t.MarkersWritten(s.c.clock.Now()), nil)
}

// loadStep reads the next chunk of the partition, from its start up to the log end offset it had when
// the load began; once the high watermark covers that end the ids are rebuilt and the shard serves. It
// reports false, having read nothing, when the next chunk is still above the high watermark.
func (s *shard) loadStep() bool {
	if s.loadOffset < 0 {
		s.loadOffset = s.log.LogStartOffset()
		s.loadEnd = s.log.LogEndOffset()
	}
	if s.loadOffset < s.loadEnd {
		if s.loadOffset >= s.log.HighWatermark() {
			return false
		}
		res, err := s.log.Read(s.loadOffset, loadReadBytes, false)
		if errors.Is(err, storage.ErrOffsetOutOfRange) && s.loadOffset < s.log.LogStartOffset() {
			s.loadOffset = s.log.LogStartOffset()
			return true
		}
		if err == nil && len(res.Records) > 0 {
			var next int64
			next, err = s.loading.applyBatches(res.Records)
			if next > s.loadOffset {
				s.loadOffset = next
			}
			if err == nil {
				return true
			}
		}
		if err != nil {
			s.c.log.Error("txn: loading stopped early; transactional ids after this point are not restored",
				"partition", s.p, "offset", s.loadOffset, "err", err)
		}
	}
	s.finishLoad()
	return true
}

func (s *shard) finishLoad() {
	if s.loading.skipped > 0 {
		s.c.log.Warn("txn: skipped records of an unknown format", "partition", s.p, "records", s.loading.skipped)
	}
	for id, m := range s.loading.txns {
		s.txns[id] = RestoreTxn(m)
	}
	s.loading = nil
	s.loaded = true
	for _, t := range s.txns {
		if st := t.Metadata().State; st == PrepareCommit || st == PrepareAbort {
			s.startMarkers(t)
		}
	}
	s.timer = s.c.clock.After(s.c.cfg.AbortInterval)
	s.c.log.Info("txn: coordinating", "partition", s.p, "leader_epoch", s.epoch, "transactional_ids", len(s.txns),
		"loaded_to", s.loadOffset)
}

// sweep aborts the transactions past their timeout, removes expired ids, and writes the markers again
// of a Prepare* that is not being completed.
func (s *shard) sweep() {
	now := s.c.clock.Now()
	for _, t := range s.txns {
		if t.TimedOut(now) {
			m := t.Metadata()
			s.c.log.Info("txn: aborting a transaction past its timeout", "transactional_id", m.ID,
				"producer_id", m.ProducerID, "producer_epoch", m.ProducerEpoch, "timeout", m.Timeout)
			s.apply(t, t.Timeout(now), nil)
			continue
		}
		if out := t.Expire(now, s.c.cfg.IDExpiration); out.Record != nil {
			s.apply(t, out, nil)
			continue
		}
		if st := t.Metadata().State; !t.Pending() && (st == PrepareCommit || st == PrepareAbort) {
			s.startMarkers(t)
		}
	}
	s.timer = s.c.clock.After(s.c.cfg.AbortInterval)
}
