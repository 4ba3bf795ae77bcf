// Package txn is the transaction coordinator (docs/transactions.md): for every partition of the
// internal __transaction_state topic that this node leads, one owner goroutine (a shard) loads the
// transactional ids stored there and drives their state machines, writing each transition to the
// partition and the transactions' COMMIT and ABORT markers to their partitions through a MarkerWriter.
package txn

import (
	"context"

	"github.com/weir-mq/weir/internal/partition"
)

// TopicPartition names one partition of a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// MarkerWriter writes a transaction's marker to its partitions, each at the partition's current
// leader; *api.MarkerWriter is weir's. It returns one error per partition of parts, in order (nil: the
// marker is committed there, or the partition no longer exists). The coordinator retries the
// partitions that failed.
type MarkerWriter interface {
	WriteMarkers(ctx context.Context, m partition.Marker, parts []TopicPartition) []error
}
