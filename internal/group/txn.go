package group

import (
	"context"
	"errors"
	"fmt"

	"github.com/weir-mq/weir/internal/partition"
)

// Offsets in transactions (KIP-98, KIP-447; docs/transactions.md): TxnCommit writes a transaction's
// offsets to the group's partition as one transactional batch of the producer and, once durable, stages
// them under the producer id, invisible to OffsetFetch. The producer's marker, written to the same
// partition through WriteMarker, then commits them (each replacing the partition's committed offset unless
// that one's record is the later in the log) or drops them. A shard that loads the partition replays the
// same in log order, so staged and committed transactional offsets survive a coordinator move.

// TxnCommit handles a TxnOffsetCommit request once the caller has checked that every partition exists.
// who is checked as ValidateTxnCommit says; the offsets are written as one transactional batch of the
// producer (refused with partition.ErrInvalidProducerEpoch when the partition has seen a newer epoch of
// it) and staged once durable. It answers then: one error per offset (nil: staged), or an error for all.
func (c *Coordinator) TxnCommit(ctx context.Context, group string, who CommitRequest, producerID int64, producerEpoch int16, offsets []OffsetCommit) ([]error, error) {
	if producerID < 0 || producerEpoch < 0 {
		return nil, fmt.Errorf("%w: producer id %d, epoch %d", partition.ErrInvalidProducerEpoch, producerID, producerEpoch)
	}
	return memberCall(ctx, c, group, func(s *shard, reply func([]error, error)) {
		s.txnCommit(group, who, producerID, producerEpoch, offsets, reply)
	})
}

// WriteMarker writes m, the end of a producer's transaction, to partition p of __consumer_offsets and,
// once the marker is durable, commits (COMMIT) or drops (ABORT) the offsets that producer staged in every
// group of the partition. It answers ErrNotCoordinator when this node does not lead the partition and
// ErrLoadInProgress while the partition loads; the caller retries both. A marker for a producer with
// nothing staged is written all the same and changes no offset.
func (c *Coordinator) WriteMarker(ctx context.Context, p int32, m partition.Marker) error {
	s, ok := c.topic.Shard(p)
	if !ok {
		return fmt.Errorf("%w: %s-%d", ErrNotCoordinator, OffsetsTopic, p)
	}
	_, err := callShard(ctx, s, true, func(s *shard, reply func(struct{}, error)) { s.writeMarker(m, reply) })
	return err
}

func (s *shard) txnCommit(group string, who CommitRequest, producerID int64, producerEpoch int16, offsets []OffsetCommit, reply func([]error, error)) {
	if err := s.shareHeld(group, "classic"); err != nil {
		reply(nil, err)
		return
	}
	var err error
	switch gs := s.groups[group]; {
	case gs != nil && gs.hasConsumers():
		err = validateConsumerCommit(gs, who, offsets, true)
	case gs != nil:
		err = gs.g.ValidateTxnCommit(who)
	case who.Generation >= 0 || who.MemberID != "" || who.InstanceID != "":
		// A group this coordinator does not know has no members.
		err = ErrUnknownMemberID
	}
	if err != nil {
		reply(nil, err)
		return
	}
	now := s.c.clock.Now()
	errs, entries, written := s.offsetEntries(group, offsets, now)
	if len(entries) == 0 {
		reply(errs, nil)
		return
	}
	gs := s.group(group)
	gs.startWriting(offsets, written)
	a, wait, err := s.log.AppendCoordinator(encodeTxnBatch(entries, now, producerID, producerEpoch))
	s.awaitAppend(wait, err, func(err error) {
		gs.endWriting(offsets, written)
		for j, i := range written {
			if err != nil {
				errs[i] = writeFailed(err)
				continue
			}
			o := offsets[i]
			s.stage(group, gs, producerID, o.TopicPartition, o.committed(now, a.BaseOffset+int64(j)))
		}
		reply(errs, nil)
	})
}

// stage keeps c as producerID's offset of tp in group until the producer's marker.
func (s *shard) stage(group string, gs *groupState, producerID int64, tp TopicPartition, c committed) {
	txn := gs.staged[producerID]
	if txn == nil {
		txn = map[TopicPartition]committed{}
		gs.staged[producerID] = txn
	}
	txn[tp] = c
	s.openTxns.add(producerID, group)
}

func (s *shard) writeMarker(m partition.Marker, reply func(struct{}, error)) {
	_, wait, err := s.log.WriteMarker(m)
	s.awaitAppend(wait, err, func(err error) {
		if err != nil {
			reply(struct{}{}, markerFailed(err))
			return
		}
		for group := range s.openTxns[m.ProducerID] {
			if gs := s.groups[group]; gs != nil {
				completeTxn(gs.offsets, gs.staged, m.ProducerID, m.Commit)
			}
		}
		delete(s.openTxns, m.ProducerID)
		reply(struct{}{}, nil)
	})
}

// markerFailed is the error of a marker whose write failed: ErrNotCoordinator when the replica no longer
// leads, else the partition's own error (a stale producer epoch, too few in-sync replicas), which the
// marker's writer answers with and retries on.
func markerFailed(err error) error {
	if errors.Is(err, partition.ErrNotLeader) || errors.Is(err, partition.ErrClosed) {
		return fmt.Errorf("%w: %w", ErrNotCoordinator, err)
	}
	return err
}

// openTxns indexes, by producer id, the groups in which a producer may have staged offsets, so that a
// marker visits only those. It may name more groups than hold staged offsets (a group deleted since, or
// one whose staged offsets were already dropped), never fewer.
type openTxns map[int64]map[string]struct{}

func (o openTxns) add(producerID int64, group string) {
	gs := o[producerID]
	if gs == nil {
		gs = map[string]struct{}{}
		o[producerID] = gs
	}
	gs[group] = struct{}{}
}
