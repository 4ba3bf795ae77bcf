package txn

import "context"

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
