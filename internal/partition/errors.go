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
)
