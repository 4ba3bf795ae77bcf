package txn

import (
	"context"
	"errors"
	"fmt"

	"github.com/weir-mq/weir/internal/coordshard"
	"github.com/weir-mq/weir/internal/partition"
)

// shard coordinates the transactional ids of one partition of __transaction_state that this node leads.
// Its Owner (coordshard) reads the partition back up to the log end offset the new leader has, waiting
// until the high watermark covers that end; then every id's state machine is the owner goroutine's: it
// writes the markers of the transactions it found in Prepare* again and serves the requests submitted
// to it in order. Every AbortInterval it aborts timed-out transactions, removes expired ids and restarts
// the markers of a Prepare* whose Complete* record failed. Writes go to the log from the owner, and
// their completions come back to it as messages, in write order; markers are written by one helper
// goroutine per ending transaction, whose completion comes back the same way.
type shard struct {
	*coordshard.Owner
	c   *Coordinator
	p   int32
	log Log

	// Owned by the owner goroutine.
	loading *loaded
	txns    map[string]*Txn
	// writing holds the ids whose markers are being written.
	writing map[string]bool
}

func (c *Coordinator) newShard(p int32, l Log) *shard {
	s := &shard{c: c, p: p, log: l, loading: newLoaded(), txns: map[string]*Txn{}, writing: map[string]bool{}}
	s.Owner = coordshard.NewOwner(l, coordshard.Hooks{
		Load:   func(b []byte) (int64, error) { return s.loading.applyBatches(b) },
		Loaded: s.finishLoad, Timer: s.sweep,
	})
	return s
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
	s.Await(wait, finish)
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
		ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, CoordinatorEpoch: s.Epoch(), Commit: m.State == PrepareCommit,
		TransactionVersion: int8(m.ClientTransactionVersion),
	}
	s.Go(func(ctx context.Context) {
		parts := m.Partitions
		backoff := markerBackoffMin
		for len(parts) > 0 {
			errs := s.c.markers.WriteMarkers(ctx, marker, parts)
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
			case <-ctx.Done():
				return
			}
			backoff = min(2*backoff, markerBackoffMax)
		}
		s.SubmitInternal(func() { s.markersDone(t, m) })
	})
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

// finishLoad rebuilds the ids from what the load read, up to offset to, and starts the markers of those
// in Prepare*; loadErr, when set, stopped the load early.
func (s *shard) finishLoad(to int64, loadErr error) {
	if loadErr != nil {
		s.c.log.Error("txn: loading stopped early; transactional ids after this point are not restored",
			"partition", s.p, "offset", to, "err", loadErr)
	}
	if s.loading.skipped > 0 {
		s.c.log.Warn("txn: skipped records of an unknown format", "partition", s.p, "records", s.loading.skipped)
	}
	for id, m := range s.loading.txns {
		s.txns[id] = RestoreTxn(m)
	}
	s.loading = nil
	for _, t := range s.txns {
		if st := t.Metadata().State; st == PrepareCommit || st == PrepareAbort {
			s.startMarkers(t)
		}
	}
	s.SetTimer(s.c.clock.After(s.c.cfg.AbortInterval))
	s.c.log.Info("txn: coordinating", "partition", s.p, "leader_epoch", s.Epoch(), "transactional_ids", len(s.txns),
		"loaded_to", to)
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
	s.SetTimer(s.c.clock.After(s.c.cfg.AbortInterval))
}
