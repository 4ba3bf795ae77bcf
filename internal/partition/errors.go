package partition

import "errors"

// Errors returned by Replica and Manager. The Kafka API layer maps each to a Kafka error code; storage
// and record errors (storage.ErrOffsetOutOfRange, record.ErrCorrupt, ...) pass through wrapped.
var (
	// ErrOutOfOrderSequence is returned by Replica.Append when an idempotent batch's sequence does not
	// follow the producer's last one (or a new epoch does not start at 0).
	ErrOutOfOrderSequence = errors.New("partition: out of order sequence number")
	// ErrInvalidProducerEpoch is returned by Replica.Append when a batch's producer epoch is older than
	// the one the partition has seen (the producer was fenced).
	ErrInvalidProducerEpoch = errors.New("partition: invalid producer epoch")
	// ErrClosed is returned by Replica methods after Close or Delete.
	ErrClosed = errors.New("partition: replica closed")
	// ErrNotLeader is returned for a produce, a consumer read or a follower fetch sent to a replica
	// that does not lead the partition, and by an acks=all wait whose replica stopped leading (or
	// leads in a newer epoch) before the batch was committed.
	ErrNotLeader = errors.New("partition: not the leader")
	// ErrFencedLeaderEpoch is returned when a request's leader epoch is older than the replica's.
	ErrFencedLeaderEpoch = errors.New("partition: fenced leader epoch")
	// ErrUnknownLeaderEpoch is returned when a request's leader epoch is newer than the replica's (the
	// replica has not seen that image yet).
	ErrUnknownLeaderEpoch = errors.New("partition: unknown leader epoch")
	// ErrNotEnoughReplicas is returned by an acks=all append, before anything is appended, when the
	// ISR is smaller than min.insync.replicas.
	ErrNotEnoughReplicas = errors.New("partition: not enough in-sync replicas")
	// ErrNotEnoughReplicasAfterAppend is returned by an acks=all wait when the batch was committed but
	// the ISR had shrunk below min.insync.replicas meanwhile.
	ErrNotEnoughReplicasAfterAppend = errors.New("partition: not enough in-sync replicas after append")
	// ErrLeaderUnreachable is returned by a Transport that cannot reach or talk to a leader broker.
	ErrLeaderUnreachable = errors.New("partition: leader unreachable")
)

// Errors of transactions (docs/transactions.md, "Partition state").
var (
	// ErrInvalidTxnState is returned by Replica.Append for a non-transactional batch of a producer
	// whose transaction is open in the partition.
	ErrInvalidTxnState = errors.New("partition: invalid transaction state")
	// ErrTransactionCoordinatorFenced is returned for a marker whose coordinator epoch is older than
	// that of the producer's latest marker in the partition (a stale coordinator).
	ErrTransactionCoordinatorFenced = errors.New("partition: transaction coordinator fenced")
)
