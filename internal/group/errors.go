package group

import "errors"

// Errors returned by Group, one per Kafka condition. The Kafka API layer maps each to its error code with
// errors.Is; this package knows no Kafka codes.
var (
	// ErrCoordinatorNotAvailable is returned for a request to a Dead group, and for the requests held
	// while a record was being written when that write failed (the write error is wrapped too).
	ErrCoordinatorNotAvailable = errors.New("group: coordinator not available")
	// ErrNotCoordinator answers every parked request of a group that Unload gives away.
	ErrNotCoordinator = errors.New("group: not the coordinator")
	// ErrUnknownMemberID is returned by Join, Sync, Heartbeat, Leave and ValidateCommit for a member id the
	// group does not know, and answers a parked request of a member that was removed.
	ErrUnknownMemberID = errors.New("group: unknown member id")
	// ErrMemberIDRequired answers a JoinGroup v4+ without a member id (KIP-394); the response carries the
	// member id to rejoin with.
	ErrMemberIDRequired = errors.New("group: member id required")
	// ErrIllegalGeneration is returned for a Sync, Heartbeat or commit from another generation.
	ErrIllegalGeneration = errors.New("group: illegal generation")
	// ErrRebalanceInProgress is returned for a Sync, Heartbeat or commit while the group rebalances, and
	// answers a parked Join or Sync that a newer request of the same member superseded.
	ErrRebalanceInProgress = errors.New("group: rebalance in progress")
	// ErrInconsistentProtocol is returned for a Join whose protocol type differs from the group's or whose
	// protocols share none with every member, and for a Sync naming another protocol type or name.
	ErrInconsistentProtocol = errors.New("group: inconsistent group protocol")
	// ErrInvalidSessionTimeout is returned for a Join whose session timeout is outside the configured bounds.
	ErrInvalidSessionTimeout = errors.New("group: invalid session timeout")
	// ErrFencedInstanceID is returned for a request naming a static member's group.instance.id with another
	// member id, and answers the parked requests of a static member replaced by a restart.
	ErrFencedInstanceID = errors.New("group: fenced instance id")
	// ErrGroupMaxSize is returned for a Join of a new member into a group at Config.MembersMax.
	ErrGroupMaxSize = errors.New("group: group max size reached")
	// ErrNonEmptyGroup is returned by Delete for a group that still has members.
	ErrNonEmptyGroup = errors.New("group: group is not empty")
	// ErrGroupNotFound is returned by Delete for a group that is already Dead.
	ErrGroupNotFound = errors.New("group: group id not found")
	// ErrInvalidConfig is returned by New and Restore for an unusable Config.
	ErrInvalidConfig = errors.New("group: invalid config")
	// ErrInvalidRequest is returned by ConsumerGroup.Heartbeat for a join that names no subscription or
	// rebalance timeout, or that says it owns partitions.
	ErrInvalidRequest = errors.New("group: invalid request")
	// ErrFencedMemberEpoch is returned by ConsumerGroup.Heartbeat for a member epoch that is neither the
	// member's nor (owning no more than it was given) its previous one: the member must rejoin.
	ErrFencedMemberEpoch = errors.New("group: fenced member epoch")
	// ErrStaleMemberEpoch is returned by ConsumerGroup.ValidateMember for an offset commit or fetch at an
	// epoch other than the member's.
	ErrStaleMemberEpoch = errors.New("group: stale member epoch")
	// ErrUnreleasedInstanceID is returned by ConsumerGroup.Heartbeat for a join naming a group.instance.id
	// that another member holds.
	ErrUnreleasedInstanceID = errors.New("group: unreleased instance id")
	// ErrUnsupportedAssignor is returned by ConsumerGroup.Heartbeat for a server assignor weir lacks.
	ErrUnsupportedAssignor = errors.New("group: unsupported assignor")
	// ErrInvalidRegularExpression is returned by ConsumerGroup.Heartbeat for a subscription regular
	// expression that does not compile.
	ErrInvalidRegularExpression = errors.New("group: invalid regular expression")
	// ErrNotConsumerGroup is returned for a ConsumerGroupHeartbeat to a classic group with members (Kafka
	// answers GROUP_ID_NOT_FOUND), and by ConsumerDescribe for a group that is not a KIP-848 group.
	ErrNotConsumerGroup = errors.New("group: not a consumer group")
	// ErrInvalidRecord is returned by Restore for group metadata that cannot describe a group.
	ErrInvalidRecord = errors.New("group: invalid group metadata record")
)
