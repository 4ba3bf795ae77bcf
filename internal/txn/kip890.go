package txn

import (
	"context"
	"errors"
	"fmt"
)

// VerifyPartitions answers a partition leader that asks, before appending the first batch of a
// producer's transaction, whether the partitions are in it (AddPartitionsToTxn with VerifyOnly,
// KIP-890 part 1): err for the whole request (the id's checks, ErrNotCoordinator,
// ErrLoadInProgress), else one answer per partition, nil when it is in the transaction (see
// Txn.VerifyPartitions).
func (c *Coordinator) VerifyPartitions(ctx context.Context, id string, p ProducerIDEpoch, parts []TopicPartition) ([]error, error) {
	return call(ctx, c, id, func(s *shard, reply func([]error, error)) {
		t := s.txns[id]
		if t == nil {
			reply(nil, ErrInvalidProducerIDMapping)
			return
		}
		reply(t.VerifyPartitions(p.ProducerID, p.ProducerEpoch, parts))
	})
}

// AddPartitionsImplicit adds parts to the producer's transaction as a TV2 client's implicit add
// (KIP-890 part 2: a Produce v12's partition leader, a TxnOffsetCommit v5's group coordinator): like
// AddPartitions, with a transaction that begins here being a TV2 one.
func (c *Coordinator) AddPartitionsImplicit(ctx context.Context, id string, p ProducerIDEpoch, parts []TopicPartition) error {
	_, err := call(ctx, c, id, func(s *shard, reply func(struct{}, error)) {
		t := s.txns[id]
		if t == nil {
			reply(struct{}{}, ErrInvalidProducerIDMapping)
			return
		}
		s.apply(t, t.AddPartitionsAs(s.c.clock.Now(), p.ProducerID, p.ProducerEpoch, parts, TV2), func(err error) { reply(struct{}{}, err) })
	})
	return err
}

// EndTxnV2 handles EndTxn v5+ (KIP-890 part 2, Txn.EndTxnV2): it answers, once PrepareCommit or
// PrepareAbort at the bumped epoch is committed, the producer id and epoch of the client's next
// transaction, and the shard writes the markers after. A retry gets the same answer.
func (c *Coordinator) EndTxnV2(ctx context.Context, id string, p ProducerIDEpoch, commit bool) (ProducerIDEpoch, error) {
	newPID := int64(NoProducerID)
	for {
		r, err := call(ctx, c, id, func(s *shard, reply func(ProducerIDEpoch, error)) {
			t := s.txns[id]
			if t == nil {
				reply(ProducerIDEpoch{}, ErrInvalidProducerIDMapping)
				return
			}
			answer := func(err error) {
				if err != nil {
					reply(ProducerIDEpoch{}, err)
					return
				}
				pid, epoch := t.Metadata().ProducerAfterEnd()
				reply(ProducerIDEpoch{ProducerID: pid, ProducerEpoch: epoch}, nil)
			}
			s.apply(t, t.EndTxnV2(s.c.clock.Now(), p.ProducerID, p.ProducerEpoch, commit, newPID), answer)
		})
		if !errors.Is(err, ErrProducerIDNeeded) || newPID != NoProducerID {
			return r, err
		}
		if newPID, err = c.pids(ctx); err != nil {
			return ProducerIDEpoch{}, fmt.Errorf("%w: producer id: %w", ErrCoordinatorNotAvailable, err)
		}
	}
}
