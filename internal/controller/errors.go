package controller

import "errors"

// Errors returned by Apply and by the Store. The Kafka API layer maps each to a Kafka error code;
// returned errors wrap one of these with %w and add detail.
var (
	// ErrTopicExists is returned when creating a topic whose name is taken.
	ErrTopicExists = errors.New("controller: topic already exists")
	// ErrUnknownTopic is returned for a command naming a topic that does not exist.
	ErrUnknownTopic = errors.New("controller: unknown topic")
	// ErrInvalidTopicName is returned for a name that is empty, too long, ".", "..", uses a character
	// outside [a-zA-Z0-9._-], or collides with an existing topic once '.' and '_' are treated alike.
	ErrInvalidTopicName = errors.New("controller: invalid topic name")
	// ErrInvalidPartitions is returned for a partition count below 1, above MaxPartitions, or (for
	// CreatePartitions) not above the current count.
	ErrInvalidPartitions = errors.New("controller: invalid number of partitions")
	// ErrPolicyViolation is returned for a topic or partition creation that would exceed the cluster's
	// partition budget (weir.max.partitions, weir.max.partitions.per.broker).
	ErrPolicyViolation = errors.New("controller: policy violation")
	// ErrInvalidReplication is returned for a replication factor the cluster cannot place.
	ErrInvalidReplication = errors.New("controller: invalid replication factor")
	// ErrInvalidConfig is returned for an unknown config key or a value out of range or malformed.
	ErrInvalidConfig = errors.New("controller: invalid config")
	// ErrInternalTopic is returned when a client tries to delete an internal topic.
	ErrInternalTopic = errors.New("controller: internal topic")
	// ErrInvalidCommand is returned by Apply for a command it does not know or with impossible fields
	// (a zero topic id, a non-positive producer-id count).
	ErrInvalidCommand = errors.New("controller: invalid command")
	// ErrProducerIDsExhausted is returned when the producer-id counter would overflow.
	ErrProducerIDsExhausted = errors.New("controller: producer ids exhausted")
	// ErrCorruptMetadata is returned by OpenLocal when the metadata file fails its checksum or does not
	// decode into a valid image.
	ErrCorruptMetadata = errors.New("controller: corrupt metadata file")
	// ErrFailed is returned by every Store command after a write of the metadata file failed; the
	// node must restart to learn which image is on disk.
	ErrFailed = errors.New("controller: metadata store failed")
	// ErrClosed is returned by Store methods after Close.
	ErrClosed = errors.New("controller: store closed")
	// ErrUnknownPartition is returned for a command naming a partition the topic does not have.
	ErrUnknownPartition = errors.New("controller: unknown partition")
	// ErrUnknownBroker is returned for a command naming a broker that never registered.
	ErrUnknownBroker = errors.New("controller: unknown broker")
	// ErrStaleEpoch is returned by Apply for an AlterPartition whose leader, leader epoch or
	// partition epoch is not the current one, and for a BecomeController from an older Raft term.
	// The sender must reload the image and retry with the current epochs, if it still leads.
	ErrStaleEpoch = errors.New("controller: stale epoch")
	// ErrNotController is returned by the Raft store when no controller leader is known, or when the
	// node a command reached stopped leading before the command committed. It is retriable: the API
	// layer maps it to NOT_CONTROLLER, and the caller retries after refreshing metadata.
	ErrNotController = errors.New("controller: not the controller")
	// ErrNoLeader is an alias of ErrNotController kept for callers that name the Raft condition.
	ErrNoLeader = ErrNotController
	// ErrStaleBroker is returned by the controller leader to a heartbeat from a broker incarnation or
	// epoch it does not know; the broker registers again.
	ErrStaleBroker = errors.New("controller: stale broker registration")
	// ErrTimeout is returned when a controller RPC or a wait for the local apply ran out of time. It
	// is retriable.
	ErrTimeout = errors.New("controller: request timed out")
	// ErrRPC is returned for a controller RPC that failed in transport or came back malformed; the
	// connection is dropped and the call may be retried.
	ErrRPC = errors.New("controller: rpc failed")

	// ErrInvalidReplicaAssignment is returned by Apply for a ReassignPartition whose target is empty,
	// names a broker twice or one that is not a live registered broker, or is smaller than the topic's
	// min.insync.replicas, and for a cancel that would leave no in-sync replica.
	ErrInvalidReplicaAssignment = errors.New("controller: invalid replica assignment")
	// ErrNoReassignment is returned by Apply for the cancel of a partition that is not moving.
	ErrNoReassignment = errors.New("controller: no reassignment in progress")
	// ErrElectionNotNeeded is returned by Apply for an ElectLeader whose partition already has the
	// leader it asks for (the preferred one, or any leader for an unclean election).
	ErrElectionNotNeeded = errors.New("controller: election not needed")
	// ErrPreferredLeaderNotAvailable is returned by Apply for a preferred ElectLeader whose preferred
	// replica is fenced or out of the ISR.
	ErrPreferredLeaderNotAvailable = errors.New("controller: preferred leader not available")
	// ErrEligibleLeadersNotAvailable is returned by Apply for an unclean ElectLeader of a partition
	// with no live replica.
	ErrEligibleLeadersNotAvailable = errors.New("controller: eligible leaders not available")
)
