package partition

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
