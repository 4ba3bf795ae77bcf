package share

import "errors"

// Errors returned by this package, one per condition. The Kafka API layer maps them to error codes with
// errors.Is; this package knows no Kafka codes.
var (
	// ErrInvalidConfig is returned by New and Restore for an unusable Config.
	ErrInvalidConfig = errors.New("share: invalid config")
	// ErrInvalidRequest is returned by Acknowledge for malformed acknowledgement batches: an empty or
	// reversed range, batches out of order or overlapping, a count of types that is neither one nor the
	// batch's length, an unknown type (INVALID_REQUEST).
	ErrInvalidRequest = errors.New("share: invalid request")
	// ErrInvalidRecordState is returned by Acknowledge when an offset is not acquired by the member, or
	// for RENEW when the group does not allow it (INVALID_RECORD_STATE).
	ErrInvalidRecordState = errors.New("share: invalid record state")
	// ErrCorruptRecord is returned by DecodeRecord and DecodeKey for bytes that are not a record or a key
	// of this package, and by Durable.Apply for a record that cannot follow the ones applied before it.
	ErrCorruptRecord = errors.New("share: corrupt share state record")
	// ErrFencedLeaderEpoch is returned by Durable.Apply for a record of a leader epoch older than the
	// state's, and by Restore for a leader epoch older than the state's: a deposed leader's writes.
	ErrFencedLeaderEpoch = errors.New("share: fenced leader epoch")
	// ErrStaleRecord is returned by Durable.Apply for an update that belongs to no round being replayed:
	// one of an older snapshot, which compaction keeps until its slot is written again, or one with no
	// snapshot before it. Replay skips it.
	ErrStaleRecord = errors.New("share: stale share state update")
)

// Errors returned by Group, one per Kafka condition of ShareGroupHeartbeat.
var (
	// ErrUnknownMemberID is returned for a heartbeat or a leave of a member the group does not know
	// (UNKNOWN_MEMBER_ID): the client joins again with epoch 0.
	ErrUnknownMemberID = errors.New("share: unknown member id")
	// ErrFencedMemberEpoch is returned for a heartbeat whose epoch is neither the member's current nor its
	// previous one (FENCED_MEMBER_EPOCH): the client joins again with epoch 0.
	ErrFencedMemberEpoch = errors.New("share: fenced member epoch")
	// ErrGroupMaxSize is returned for the join of a new member into a group at GroupConfig.MembersMax
	// (GROUP_MAX_SIZE_REACHED).
	ErrGroupMaxSize = errors.New("share: group max size reached")
)
