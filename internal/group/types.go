package group

import (
	"fmt"
	"time"
)

// State is where a group stands in the classic group protocol. Its String is the name Kafka reports in
// DescribeGroups and ListGroups.
type State int8

// The group states; see the package comment for the transitions.
const (
	// Empty: no members. Simple offset commits (generation -1) are accepted.
	Empty State = iota
	// PreparingRebalance: JoinGroup requests are parked until every member rejoined or the rebalance
	// timeout expires.
	PreparingRebalance
	// CompletingRebalance: the generation is chosen and SyncGroup requests wait for the leader's.
	CompletingRebalance
	// Stable: every member has, or can fetch, its assignment of the current generation.
	Stable
	// Dead: deleted or given away; every request gets ErrCoordinatorNotAvailable.
	Dead
)

// String returns Kafka's name for the state.
func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case PreparingRebalance:
		return "PreparingRebalance"
	case CompletingRebalance:
		return "CompletingRebalance"
	case Stable:
		return "Stable"
	case Dead:
		return "Dead"
	default:
		return fmt.Sprintf("State(%d)", int8(s))
	}
}

// Ref identifies a JoinGroup or SyncGroup request for the caller, which chooses it (unique among the
// requests it has not had an answer for yet). Every Ref passed to Join or Sync comes back in exactly one
// response, at once or in the Output of a later call.
type Ref uint64

// Protocol is one assignment protocol a member supports, with its metadata (for protocol type "consumer",
// the encoded subscription). Metadata is passed to the leader byte for byte.
type Protocol struct {
	Name     string
	Metadata []byte
}

// JoinRequest is the part of a JoinGroup request the group needs.
type JoinRequest struct {
	Ref Ref
	// Version is the JoinGroup request version: v4+ without a member id gets ErrMemberIDRequired first.
	Version int16
	// MemberID is empty on a member's first join.
	MemberID string
	// InstanceID is the group.instance.id of a static member (KIP-345), empty for a dynamic member.
	InstanceID   string
	ClientID     string
	ClientHost   string
	ProtocolType string
	// Protocols are in the member's order of preference.
	Protocols      []Protocol
	SessionTimeout time.Duration
	// RebalanceTimeout at or below zero (absent in v0, or -1) means the session timeout.
	RebalanceTimeout time.Duration
	// Topics is the cluster's topics as the request found them, read when the group is a KIP-848 group
	// and the member joins it as a classic member; nil: no topics.
	Topics Topics
}

// JoinedMember is one member as the leader sees it in its JoinGroup response.
type JoinedMember struct {
	MemberID   string
	InstanceID string
	// Metadata is the member's metadata for the chosen protocol.
	Metadata []byte
}

// JoinResponse answers the JoinRequest with the same Ref. On error only Err and, for ErrMemberIDRequired,
// MemberID are set, and Generation is -1.
type JoinResponse struct {
	Ref          Ref
	Err          error
	MemberID     string
	Generation   int32
	ProtocolType string
	Protocol     string
	Leader       string
	// SkipAssignment is set for a static leader that rejoined without a rebalance (KIP-814): it gets the
	// members but must not compute a new assignment. Before JoinGroup v9 the API layer sends no members.
	SkipAssignment bool
	// Members is filled for the leader only.
	Members []JoinedMember
}

// MemberAssignment is one member's assignment as the leader's SyncGroup gives it.
type MemberAssignment struct {
	MemberID   string
	Assignment []byte
}

// SyncRequest is the part of a SyncGroup request the group needs.
type SyncRequest struct {
	Ref        Ref
	MemberID   string
	InstanceID string
	Generation int32
	// ProtocolType and Protocol are checked against the group's when not empty (SyncGroup v5+).
	ProtocolType string
	Protocol     string
	// Assignments is read from the leader only; members it omits get an empty assignment.
	Assignments []MemberAssignment
}

// SyncResponse answers the SyncRequest with the same Ref.
type SyncResponse struct {
	Ref          Ref
	Err          error
	ProtocolType string
	Protocol     string
	// Assignment is the leader's bytes for this member, unchanged, except that an empty assignment under
	// protocol type "consumer" is an encoded empty ConsumerMemberAssignment.
	Assignment []byte
}

// HeartbeatRequest is a Heartbeat request.
type HeartbeatRequest struct {
	MemberID   string
	InstanceID string
	Generation int32
}

// LeaveMember names one member in a LeaveGroup request: v0-v2 by MemberID, v3+ by MemberID or InstanceID.
type LeaveMember struct {
	MemberID   string
	InstanceID string
}

// CommitRequest is who sends an OffsetCommit: a member (its id and generation) or, with Generation -1 and
// no ids, an outside client (a "simple" commit, accepted only while the group is Empty).
type CommitRequest struct {
	MemberID   string
	InstanceID string
	Generation int32
}

// MemberMetadata is one member in a group metadata record.
type MemberMetadata struct {
	MemberID         string
	InstanceID       string
	ClientID         string
	ClientHost       string
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
	// Subscription is the member's metadata for the group's protocol.
	Subscription []byte
	Assignment   []byte
}

// Metadata is a group's state as Kafka keeps it in __consumer_offsets (GroupMetadataValue): enough to
// Restore the group elsewhere.
type Metadata struct {
	Group        string
	ProtocolType string
	Protocol     string
	Generation   int32
	Leader       string
	Members      []MemberMetadata
}

// Record is a write the caller owes __consumer_offsets under the group's key: a metadata value, or a
// tombstone once the group is deleted. Once it is written (or failed), the caller calls Stored with its
// Ticket: some responses wait for that.
type Record struct {
	Ticket    uint64
	Tombstone bool
	Metadata  Metadata
}

// Output is what a call asks of its caller: deliver the responses (each to the request with that Ref),
// write the records in order, and call Tick at Deadline (zero: no timer is needed). Deadline replaces any
// earlier one; calling Tick earlier than needed is harmless. The slices are the caller's to read, not to
// modify.
type Output struct {
	Joins    []JoinResponse
	Syncs    []SyncResponse
	Records  []Record
	Deadline time.Time
}

// MemberDescription is one member in a Description.
type MemberDescription struct {
	MemberID   string
	InstanceID string
	ClientID   string
	ClientHost string
	// Metadata and Assignment are set only while the group is Stable, as Kafka does.
	Metadata   []byte
	Assignment []byte
}

// Description is what DescribeGroups reports for a group.
type Description struct {
	Group        string
	State        State
	ProtocolType string
	// Protocol is set only while the group is Stable.
	Protocol   string
	Generation int32
	Leader     string
	Members    []MemberDescription
}
