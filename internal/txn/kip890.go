package txn

import (
	"context"
	"errors"
	"fmt"
	"time"
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
//
// A TV2 client begins its next transaction as soon as EndTxn answers, while the previous one's markers
// are still being written; the add then waits here, trying again every implicitAddPollMin (doubling up
// to implicitAddPollMax) for at most implicitAddWait, rather than sending ErrConcurrentTransactions
// back for the leader to retry over a slower back-off.
func (c *Coordinator) AddPartitionsImplicit(ctx context.Context, id string, p ProducerIDEpoch, parts []TopicPartition) error {
	ctx, cancel := context.WithTimeout(ctx, implicitAddWait)
	defer cancel()
	poll := implicitAddPollMin
	for {
		_, err := call(ctx, c, id, func(s *shard, reply func(struct{}, error)) {
			t := s.txns[id]
			if t == nil {
				reply(struct{}{}, ErrInvalidProducerIDMapping)
				return
			}
			s.apply(t, t.AddPartitionsAs(s.c.clock.Now(), p.ProducerID, p.ProducerEpoch, parts, TV2), func(err error) { reply(struct{}{}, err) })
		})
		if !errors.Is(err, ErrConcurrentTransactions) {
			return err
		}
		select {
		case <-c.clock.After(poll):
		case <-ctx.Done():
			return err
		}
		poll = min(2*poll, implicitAddPollMax)
	}
}

// Bounds of an implicit add's wait for the previous transaction's end (AddPartitionsImplicit).
const (
	implicitAddPollMin = time.Millisecond
	implicitAddPollMax = 8 * time.Millisecond
	implicitAddWait    = 2 * time.Second
)

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
