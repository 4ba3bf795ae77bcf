package txn

import "errors"

// Errors of the coordinator and its state machine, one per Kafka condition. The Kafka API layer maps
// each to its error code with errors.Is; this package knows no Kafka codes.
var (
	// ErrNotCoordinator is returned for an id whose __transaction_state partition this node does not
	// lead (or no longer leads).
	ErrNotCoordinator = errors.New("txn: not the coordinator")
	// ErrLoadInProgress is returned for an id whose partition is still being read back.
	ErrLoadInProgress = errors.New("txn: coordinator load in progress")
	// ErrCoordinatorNotAvailable is returned when __transaction_state is being created or its
	// partition has no leader, and for a request whose record could not be written (the write error is
	// wrapped too).
	ErrCoordinatorNotAvailable = errors.New("txn: coordinator not available")
	// ErrConcurrentTransactions is returned while the id's record is being written or its markers are
	// (Prepare*), and by InitProducerId when it fences an Ongoing transaction; the client retries.
	ErrConcurrentTransactions = errors.New("txn: concurrent transactions")
	// ErrProducerFenced is returned for a request at an epoch other than the id's (a zombie producer);
	// the Kafka API layer answers INVALID_PRODUCER_EPOCH to versions that predate PRODUCER_FENCED.
	ErrProducerFenced = errors.New("txn: producer fenced")
	// ErrInvalidProducerIDMapping is returned for a request naming an id that has no producer id, or
	// another producer id than the id's.
	ErrInvalidProducerIDMapping = errors.New("txn: invalid producer id mapping")
	// ErrInvalidTxnState is returned by EndTxn with no transaction, or in the other direction than the
	// one the transaction is ending in.
	ErrInvalidTxnState = errors.New("txn: invalid transaction state")
	// ErrInvalidTransactionTimeout is returned by InitProducerId for a timeout that is not positive or
	// is over Config.TimeoutMax.
	ErrInvalidTransactionTimeout = errors.New("txn: invalid transaction timeout")
	// ErrInvalidTransactionalID is returned for an empty transactional id or one longer than a Kafka
	// string holds (IDBytesMax).
	ErrInvalidTransactionalID = errors.New("txn: invalid transactional id")
	// ErrTransactionalIDNotFound is returned by Describe for an id the coordinator does not know.
	ErrTransactionalIDNotFound = errors.New("txn: transactional id not found")
	// ErrProducerIDNeeded is returned by Txn.InitProducerID when the id needs a fresh producer id and
	// the request carried none; Coordinator.InitProducerID takes one and calls again.
	ErrProducerIDNeeded = errors.New("txn: a new producer id is needed")
	// ErrMissingOption is returned by NewCoordinator when a required option is nil.
	ErrMissingOption = errors.New("txn: missing required option")
)
