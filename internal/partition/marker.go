package partition

import (
	"cmp"
	"slices"

	"github.com/weir-mq/weir/internal/record"
)

// Marker is the end of one producer's transaction as its transaction coordinator writes it to a
// partition: a control batch (COMMIT or ABORT) of the producer, carrying the coordinator's epoch
// (docs/transactions.md, "Markers").
type Marker struct {
	ProducerID    int64
	ProducerEpoch int16
	// CoordinatorEpoch is the leader epoch of the coordinator's __transaction_state partition; a
	// partition refuses a marker older than the last one it took for the producer.
	CoordinatorEpoch int32
	// Commit is set for COMMIT, clear for ABORT.
	Commit bool
	// TransactionVersion is the transaction version of the transaction the marker ends (2: KIP-890
	// part 2, whose coordinator bumps the epoch before it writes the markers); WriteTxnMarkers v2
	// carries it. It is not part of the control batch.
	TransactionVersion int8
}

// AbortedTxn is one aborted transaction of a partition, as a read_committed Fetch lists it: the
// producer's batches from FirstOffset up to its ABORT marker are to be dropped by the client.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
}

// Committed follows a read_committed reader through the batches of one committedOnly Read, in offset
// order, as a Kafka consumer drops the batches a Fetch's aborted transactions list: a producer's
// transactional batches are dropped from the first offset of its aborted transaction up to the
// control batch that ends it. The zero Committed drops only control batches.
type Committed struct {
	pending []AbortedTxn
	aborted map[int64]bool
}

// NewCommitted returns the reader of a read whose aborted transactions are aborted (ReadResult.Aborted).
func NewCommitted(aborted []AbortedTxn) *Committed {
	return &Committed{pending: slices.SortedFunc(slices.Values(aborted), func(a, b AbortedTxn) int {
		return cmp.Compare(a.FirstOffset, b.FirstOffset)
	})}
}

// Skip reports whether a read_committed reader passes over the batch of header h: a control batch, or
// a transactional batch of a producer inside an aborted transaction. Every batch of the read is to be
// passed, in order.
func (c *Committed) Skip(h record.Header) bool {
	for len(c.pending) > 0 && c.pending[0].FirstOffset <= h.BaseOffset {
		if c.aborted == nil {
			c.aborted = map[int64]bool{}
		}
		c.aborted[c.pending[0].ProducerID] = true
		c.pending = c.pending[1:]
	}
	if h.Control() {
		delete(c.aborted, h.ProducerID)
		return true
	}
	return h.Transactional() && c.aborted[h.ProducerID]
}
