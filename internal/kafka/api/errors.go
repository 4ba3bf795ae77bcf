package api

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/internal/acl"
	"github.com/weir-mq/weir/internal/compress"
	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/share"
	"github.com/weir-mq/weir/internal/sharestate"
	"github.com/weir-mq/weir/internal/storage"
	"github.com/weir-mq/weir/internal/txn"
)

// Errors the handlers decide themselves; errorCode maps them like any other.
var (
	// errUnknownTopicOrPartition: the topic does not exist or has no such partition.
	errUnknownTopicOrPartition = errors.New("api: unknown topic or partition")
	// errUnknownTopicID: no topic has the id a request names.
	errUnknownTopicID = errors.New("api: unknown topic id")
	// errReplicaNotAvailable: the topic exists but its local replica is not open.
	errReplicaNotAvailable = errors.New("api: replica not available")
	// errTransactionsUnsupported: a transactional id sent to a broker built without a transaction
	// coordinator.
	errTransactionsUnsupported = errors.New("api: transactions are not supported yet")
	// errTransactionAbortable: the transaction cannot go on and the client may abort it (KIP-890).
	errTransactionAbortable = errors.New("api: transaction abortable")
	// errInvalidRequiredAcks: a produce whose acks is not 0, 1 or -1.
	errInvalidRequiredAcks = errors.New("api: acks must be 0, 1 or -1")
	// errMultipleBatches: a produce carrying more than one batch for one partition.
	errMultipleBatches = errors.New("api: more than one record batch for a partition")
	// errDuplicateResource: a request names one topic or config resource twice.
	errDuplicateResource = errors.New("api: resource named twice in one request")
	// errInvalidRequest: a field the request may not hold (an unknown resource type, a negative
	// count, a missing name).
	errInvalidRequest = errors.New("api: invalid request")
	// errInvalidTimestamp: a producer that asked for LogAppendTime itself.
	errInvalidTimestamp = errors.New("api: producer may not set LogAppendTime")
	// errTimestampOutOfRange: a CreateTime record outside the topic's message.timestamp window.
	errTimestampOutOfRange = errors.New("api: record timestamp outside the topic's message.timestamp window")
	// errUnsupportedCompression: zstd before Produce v7.
	errUnsupportedCompression = errors.New("api: zstd needs produce v7 or later")
	// errInvalidConfigOp: an IncrementalAlterConfigs operation weir does not do (APPEND, SUBTRACT) or
	// an unknown one.
	errInvalidConfigOp = errors.New("api: unsupported config operation")
	// errInvalidReplicaAssignment: a manual assignment that numbers partitions wrongly, names a
	// broker twice or one that is not registered, or (CreatePartitions) differs from this node alone.
	errInvalidReplicaAssignment = errors.New("api: invalid replica assignment")
	// errFencedLeaderEpoch: the client's leader epoch is older than the replica's.
	errFencedLeaderEpoch = errors.New("api: fenced leader epoch")
	// errUnknownLeaderEpoch: the client's leader epoch is newer than the replica's.
	errUnknownLeaderEpoch = errors.New("api: unknown leader epoch")
	// errFetchSessionNotFound: a fetch naming a session; weir declines sessions, so none exists.
	errFetchSessionNotFound = errors.New("api: fetch session not found")
	// errUnknownBroker: a broker config resource that names no registered broker.
	errUnknownBroker = errors.New("api: unknown broker")
	// errTopicNotReady: the topic was created elsewhere and this node has not applied it yet.
	errTopicNotReady = errors.New("api: topic created but not yet known to this node")
)

// codes maps errors from this package and the packages below it to Kafka error codes, most specific
// first. errorCode walks it with errors.Is; followerCodes below is the way back.
var codes = []struct {
	err  error
	code *kerr.Error
}{
	{errTopicNotReady, kerr.LeaderNotAvailable},
	{errUnknownTopicOrPartition, kerr.UnknownTopicOrPartition},
	{errUnknownTopicID, kerr.UnknownTopicID},
	{errReplicaNotAvailable, kerr.ReplicaNotAvailable},
	{errTransactionsUnsupported, kerr.InvalidTxnState},
	{errTransactionAbortable, kerr.TransactionAbortable},
	{errNotInTransaction, kerr.InvalidTxnState},
	{errTransactionalIDRequired, kerr.TransactionalIDAuthorizationFailed},
	{errCoordinatorBusy, kerr.NotEnoughReplicas},
	{errInvalidRequiredAcks, kerr.InvalidRequiredAcks},
	{errMultipleBatches, kerr.InvalidRecord},
	{errDuplicateResource, kerr.InvalidRequest},
	{errInvalidRequest, kerr.InvalidRequest},
	{errInvalidTimestamp, kerr.InvalidTimestamp},
	{errTimestampOutOfRange, kerr.InvalidTimestamp},
	{compress.ErrCorrupt, kerr.CorruptMessage},
	{compress.ErrTooLarge, kerr.MessageTooLarge},
	{errUnsupportedCompression, kerr.UnsupportedCompressionType},
	{errInvalidConfigOp, kerr.InvalidConfig},
	{errUnknownBroker, kerr.InvalidRequest},
	{errFencedLeaderEpoch, kerr.FencedLeaderEpoch},
	{errUnknownLeaderEpoch, kerr.UnknownLeaderEpoch},
	{errFetchSessionNotFound, kerr.FetchSessionIDNotFound},
	{errShareSessionNotFound, kerr.ShareSessionNotFound},
	{errInvalidShareSessionEpoch, kerr.InvalidShareSessionEpoch},
	{errInvalidReplicaAssignment, kerr.InvalidReplicaAssignment},
	{errSecurityDisabled, kerr.SecurityDisabled},
	{acl.ErrInvalidBinding, kerr.InvalidRequest},

	// Group errors come before the storage ones: a failed offsets write wraps both.
	{group.ErrCoordinatorNotAvailable, kerr.CoordinatorNotAvailable},
	{group.ErrNotCoordinator, kerr.NotCoordinator},
	{group.ErrLoadInProgress, kerr.CoordinatorLoadInProgress},
	{group.ErrUnknownMemberID, kerr.UnknownMemberID},
	{group.ErrMemberIDRequired, kerr.MemberIDRequired},
	{group.ErrIllegalGeneration, kerr.IllegalGeneration},
	{group.ErrRebalanceInProgress, kerr.RebalanceInProgress},
	{group.ErrInconsistentProtocol, kerr.InconsistentGroupProtocol},
	{group.ErrInvalidSessionTimeout, kerr.InvalidSessionTimeout},
	{group.ErrFencedInstanceID, kerr.FencedInstanceID},
	{group.ErrGroupMaxSize, kerr.GroupMaxSizeReached},
	{group.ErrNonEmptyGroup, kerr.NonEmptyGroup},
	{group.ErrGroupNotFound, kerr.GroupIDNotFound},
	{group.ErrInvalidGroupID, kerr.InvalidGroupID},
	{group.ErrOffsetMetadataTooLarge, kerr.OffsetMetadataTooLarge},
	{group.ErrGroupSubscribedToTopic, kerr.GroupSubscribedToTopic},
	{group.ErrUnstableOffsetCommit, kerr.UnstableOffsetCommit},
	{group.ErrInvalidRequest, kerr.InvalidRequest},
	{group.ErrFencedMemberEpoch, kerr.FencedMemberEpoch},
	{group.ErrStaleMemberEpoch, kerr.StaleMemberEpoch},
	{group.ErrUnreleasedInstanceID, kerr.UnreleasedInstanceID},
	{group.ErrUnsupportedAssignor, kerr.UnsupportedAssignor},
	{group.ErrInvalidRegularExpression, kerr.InvalidRegularExpression},
	{group.ErrNotConsumerGroup, kerr.GroupIDNotFound},

	// Transaction coordinator errors, before the storage ones for the same reason.
	{txn.ErrCoordinatorNotAvailable, kerr.CoordinatorNotAvailable},
	{txn.ErrNotCoordinator, kerr.NotCoordinator},
	{txn.ErrLoadInProgress, kerr.CoordinatorLoadInProgress},
	{txn.ErrConcurrentTransactions, kerr.ConcurrentTransactions},
	{txn.ErrProducerFenced, kerr.ProducerFenced},
	{txn.ErrInvalidProducerIDMapping, kerr.InvalidProducerIDMapping},
	{txn.ErrInvalidTxnState, kerr.InvalidTxnState},
	{txn.ErrInvalidTransactionTimeout, kerr.InvalidTransactionTimeout},
	{txn.ErrInvalidTransactionalID, kerr.InvalidRequest},
	{txn.ErrTransactionalIDNotFound, kerr.TransactionalIDNotFound},

	{controller.ErrTopicExists, kerr.TopicAlreadyExists},
	{controller.ErrUnknownTopic, kerr.UnknownTopicOrPartition},
	{controller.ErrInvalidTopicName, kerr.InvalidTopicException},
	{controller.ErrInvalidPartitions, kerr.InvalidPartitions},
	{controller.ErrPolicyViolation, kerr.PolicyViolation},
	{controller.ErrInvalidReplication, kerr.InvalidReplicationFactor},
	{controller.ErrInvalidConfig, kerr.InvalidConfig},
	{controller.ErrReadOnlyConfig, kerr.InvalidRequest},
	{controller.ErrInternalTopic, kerr.InvalidTopicException},
	{controller.ErrInvalidCommand, kerr.InvalidRequest},
	{controller.ErrClosed, kerr.NotController},
	{controller.ErrNotController, kerr.NotController},
	{controller.ErrRPC, kerr.NotController},
	{controller.ErrTimeout, kerr.RequestTimedOut},
	{controller.ErrUnknownPartition, kerr.UnknownTopicOrPartition},
	{controller.ErrInvalidReplicaAssignment, kerr.InvalidReplicaAssignment},
	{controller.ErrNoReassignment, kerr.NoReassignmentInProgress},
	{controller.ErrElectionNotNeeded, kerr.ElectionNotNeeded},
	{controller.ErrPreferredLeaderNotAvailable, kerr.PreferredLeaderNotAvailable},
	{controller.ErrEligibleLeadersNotAvailable, kerr.EligibleLeadersNotAvailable},
	{controller.ErrDuplicateVoter, kerr.DuplicateVoter},
	{controller.ErrVoterNotFound, kerr.VoterNotFound},
	{controller.ErrQuorumLoss, kerr.InvalidRequest},
	{controller.ErrVoterNotCaughtUp, kerr.RequestTimedOut},

	{share.ErrInvalidRequest, kerr.InvalidRequest},
	{share.ErrInvalidRecordState, kerr.InvalidRecordState},
	{share.ErrFencedLeaderEpoch, kerr.FencedLeaderEpoch},
	{share.ErrUnknownMemberID, kerr.UnknownMemberID},
	{share.ErrFencedMemberEpoch, kerr.FencedMemberEpoch},
	{share.ErrGroupMaxSize, kerr.GroupMaxSizeReached},
	{share.ErrInvalidConfig, kerr.InvalidConfig},
	{sharestate.ErrNotCoordinator, kerr.NotCoordinator},
	{sharestate.ErrLoadInProgress, kerr.CoordinatorLoadInProgress},
	{sharestate.ErrCoordinatorNotAvailable, kerr.CoordinatorNotAvailable},
	{sharestate.ErrStateReset, kerr.FencedStateEpoch},

	{partition.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
	{partition.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
	{partition.ErrInvalidTxnState, kerr.InvalidTxnState},
	{partition.ErrTransactionCoordinatorFenced, kerr.TransactionCoordinatorFenced},
	{partition.ErrClosed, kerr.NotLeaderForPartition},
	{partition.ErrNotLeader, kerr.NotLeaderForPartition},
	{partition.ErrFencedLeaderEpoch, kerr.FencedLeaderEpoch},
	{partition.ErrUnknownLeaderEpoch, kerr.UnknownLeaderEpoch},
	{partition.ErrNotEnoughReplicas, kerr.NotEnoughReplicas},
	{partition.ErrNotEnoughReplicasAfterAppend, kerr.NotEnoughReplicasAfterAppend},
	{partition.ErrLeaderUnreachable, kerr.NotLeaderForPartition},
	{storage.ErrStaleLeaderEpoch, kerr.FencedLeaderEpoch},

	{record.ErrCorrupt, kerr.CorruptMessage},
	{record.ErrInvalidRecord, kerr.InvalidRecord},
	{record.ErrUnsupportedMagic, kerr.UnsupportedVersion},

	{storage.ErrBatchTooLarge, kerr.MessageTooLarge},
	{storage.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
	{storage.ErrLogOffline, kerr.KafkaStorageError},
	{storage.ErrCorruption, kerr.KafkaStorageError},
	{storage.ErrClosed, kerr.NotLeaderForPartition},

	{context.DeadlineExceeded, kerr.RequestTimedOut},
	{context.Canceled, kerr.RequestTimedOut},
}

// errorCode returns the Kafka error code for err: 0 for nil, UNKNOWN_SERVER_ERROR for an error no
// entry of codes matches. It is the one place where weir's errors become Kafka's.
func errorCode(err error) int16 {
	if err == nil {
		return 0
	}
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code.Code
		}
	}
	return kerr.UnknownServerError.Code
}

// errorCode is the package function, and logs the errors that say something is wrong with the node
// rather than with the request: unmapped ones and storage failures.
func (b *Broker) errorCode(err error) int16 {
	code := errorCode(err)
	if code == kerr.UnknownServerError.Code || code == kerr.KafkaStorageError.Code {
		b.log.Error("api: request failed", "err", err)
	}
	return code
}

// followerCodes maps the error codes of a leader's answers to a follower's Fetch and
// OffsetForLeaderEpoch back to the errors the partition package acts on: the other direction of
// codes, for ReplicaTransport. followerError walks it.
var followerCodes = []struct {
	code *kerr.Error
	err  error
}{
	// The broker does not lead the partition (any more, or yet), or does not host it.
	{kerr.NotLeaderForPartition, partition.ErrNotLeader},
	{kerr.ReplicaNotAvailable, partition.ErrNotLeader},
	{kerr.UnknownTopicOrPartition, partition.ErrNotLeader},
	{kerr.FencedLeaderEpoch, partition.ErrFencedLeaderEpoch},
	{kerr.UnknownLeaderEpoch, partition.ErrUnknownLeaderEpoch},
	{kerr.OffsetOutOfRange, storage.ErrOffsetOutOfRange},
}

// followerError returns the error a follower acts on for a leader's error code: nil for 0, an entry
// of followerCodes, else ErrLeaderUnreachable (the leader cannot serve the follower for now).
func followerError(code int16) error {
	if code == 0 {
		return nil
	}
	for _, c := range followerCodes {
		if c.code.Code == code {
			return fmt.Errorf("%w: from the leader: %s", c.err, ErrorName(code))
		}
	}
	return fmt.Errorf("%w: from the leader: %s", partition.ErrLeaderUnreachable, ErrorName(code))
}

// errorMessage is the text that goes with errorCode(err) in responses that carry one.
func errorMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}

// ErrorName is the Kafka name of an error code (NOT_ENOUGH_REPLICAS), or the number when the code is
// unknown; metrics label errors with it.
func ErrorName(code int16) string {
	var ke *kerr.Error
	if errors.As(kerr.ErrorForCode(code), &ke) {
		return ke.Message
	}
	return strconv.Itoa(int(code))
}
