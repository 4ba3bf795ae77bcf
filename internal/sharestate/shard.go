package sharestate

import (
	"errors"
	"fmt"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/coordshard"
	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/share"
)

// state is one share-partition's state at its shard: appended has every record appended (each write
// is checked against it first), committed every record committed (reads answer from it).
type state struct {
	appended, committed share.Durable
	// reset is set by an admin's Reset or Delete, and refuses the leaders' writes (ErrStateReset) until
	// one reads the state again or creates it.
	reset bool
}

// shard coordinates the share-partitions of one led partition of __share_group_state. Its Owner
// (coordshard) reads the partition back; then the states are the owner goroutine's, writes are appended
// from it, and their completions come back to it in write order.
type shard struct {
	*coordshard.Owner
	c   *Coordinator
	p   int32
	log Log

	// Owned by the owner goroutine.
	states  map[SharePartition]*state
	skipped int
}

func (c *Coordinator) newShard(p int32, l Log) *shard {
	s := &shard{c: c, p: p, log: l, states: map[SharePartition]*state{}}
	s.Owner = coordshard.NewOwner(l, coordshard.Hooks{Load: s.load, Loaded: s.loaded})
	return s
}

// load applies the records of batches (whole batches, as read from the log) in order. A record that
// does not decode, and one replay skips (stale, or a deposed leader's), is counted in skipped: it must
// not stop the load.
func (s *shard) load(batches []byte) (int64, error) {
	next := int64(-1)
	for batch, err := range record.Batches(batches) {
		if err != nil {
			return next, err
		}
		h, err := record.ParseHeader(batch)
		if err != nil {
			return next, err
		}
		next = h.NextOffset()
		if h.Control() || h.Compression() != 0 {
			s.skipped += int(h.NumRecords)
			continue
		}
		recs, err := record.DecodeRecords(record.Body(batch), int(h.NumRecords))
		if err != nil {
			return next, fmt.Errorf("sharestate: batch at %d: %w", h.BaseOffset, err)
		}
		for _, rec := range recs {
			if err := s.loadRecord(rec.Key, rec.Value); err != nil {
				s.skipped++
			}
		}
	}
	return next, nil
}

func (s *shard) loadRecord(key, value []byte) error {
	k, err := share.DecodeKey(key)
	if err != nil {
		return err
	}
	sp := SharePartition{Group: k.Group, TopicID: controller.TopicID(k.TopicID), Partition: k.Partition}
	if value == nil {
		if k.Slot == 0 {
			delete(s.states, sp)
		}
		return nil
	}
	r, err := share.DecodeRecord(value)
	if err != nil {
		return err
	}
	if r.Slot != k.Slot {
		return fmt.Errorf("%w: slot %d under key slot %d", share.ErrCorruptRecord, r.Slot, k.Slot)
	}
	st := s.states[sp]
	if st == nil {
		st = &state{}
		s.states[sp] = st
	}
	return st.committed.Apply(r)
}

// loaded ends the load: the appended state starts as the committed one.
func (s *shard) loaded(to int64, err error) {
	if err != nil {
		s.c.log.Warn("sharestate: the load stopped early", "partition", s.p, "offset", to, "err", err)
	}
	if s.skipped > 0 {
		s.c.log.Warn("sharestate: records skipped in the load", "partition", s.p, "records", s.skipped)
	}
	for _, st := range s.states {
		st.appended = *st.committed.Clone()
	}
}

// write checks r against sp's appended state, appends it and replies once it is committed; it reports
// whether r was taken. A record taken ends an admin's reset (the caller refused a leader's write
// under one before).
func (s *shard) write(sp SharePartition, r share.Record, reply func(struct{}, error)) bool {
	st := s.states[sp]
	if st == nil {
		st = &state{}
	}
	if err := st.appended.Apply(r); err != nil {
		reply(struct{}{}, err)
		return false
	}
	s.states[sp] = st
	st.reset = false
	batch := encodeBatch(sp.key(r.Slot).Encode(), r.Encode(), s.c.clock.Now().UnixMilli())
	_, wait, err := s.log.Append(batch)
	if err != nil {
		reply(struct{}{}, writeFailed(err))
		return true
	}
	s.Await(wait, func(err error) {
		if err != nil {
			reply(struct{}{}, writeFailed(err))
			return
		}
		if err := st.committed.Apply(r); err != nil {
			// The committed state lags the appended one, which took r: only a failed write between them
			// can make it refuse r, and the leader's next record after a failure is a snapshot.
			s.c.log.Warn("sharestate: a committed record does not follow the committed state", "share_partition", sp.String(), "err", err)
		}
		reply(struct{}{}, nil)
	})
	return true
}

// read fences sp at leaderEpoch and replies with its committed state (Coordinator.Read).
func (s *shard) read(sp SharePartition, leaderEpoch int32, reply func(*share.Durable, error)) {
	st := s.states[sp]
	if st == nil || !st.appended.Loaded() {
		reply(nil, fmt.Errorf("%w: %s", ErrNoState, sp))
		return
	}
	fence := st.appended.Snapshot()
	if leaderEpoch < fence.LeaderEpoch {
		reply(nil, fmt.Errorf("%w: read at leader epoch %d of a state written at %d", share.ErrFencedLeaderEpoch, leaderEpoch, fence.LeaderEpoch))
		return
	}
	fence.LeaderEpoch = leaderEpoch
	s.write(sp, fence, func(_ struct{}, err error) {
		if err != nil {
			reply(nil, err)
			return
		}
		reply(st.committed.Clone(), nil)
	})
}

// writeFailed is the error of a write that could not be committed: ErrNotCoordinator when the replica
// no longer leads, else ErrCoordinatorNotAvailable.
func writeFailed(err error) error {
	if errors.Is(err, partition.ErrNotLeader) || errors.Is(err, partition.ErrClosed) {
		return fmt.Errorf("%w: %w", ErrNotCoordinator, err)
	}
	return fmt.Errorf("%w: %w", ErrCoordinatorNotAvailable, err)
}

// encodeBatch builds one uncompressed v2 batch holding one record, as a non-idempotent producer would.
func encodeBatch(key, value []byte, ts int64) []byte {
	return encodeRecords([]record.Record{{Key: key, Value: value}}, ts)
}

// encodeRecords builds one uncompressed v2 batch of recs, whose offset deltas are 0, 1, ….
func encodeRecords(recs []record.Record, ts int64) []byte {
	var body []byte
	for _, r := range recs {
		body = record.AppendRecord(body, r)
	}
	return record.AppendBatch(nil, record.PlainHeader(len(recs), ts, ts), body)
}
