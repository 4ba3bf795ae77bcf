// Package group is the classic Kafka consumer group protocol (JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup, and who may commit offsets) as a deterministic state machine.
//
// A Group does no I/O, starts no goroutine and reads no clock. Its coordinator drives it from one owner
// goroutine: each call takes the current time and returns an Output with the responses to deliver (a
// JoinGroup or SyncGroup may be parked and answered by a later call; the caller's Ref ties a response to
// its request), the records to write to __consumer_offsets, and the Deadline at which to call Tick. A
// record's outcome comes back through Stored: the leader's assignment takes effect, and the waiting
// SyncGroups are answered, only once the record holding it is stored.
//
// States and transitions (Kafka's, with KIP-394 and KIP-345):
//
//	           a member joins
//	+-------+ ----------------> +--------------------+ <--------------------------------+
//	| Empty |                   | PreparingRebalance |                                  |
//	+-------+ <---------------- +--------------------+                                  |
//	    |     join phase ends      |                                                    |
//	    |     with no members      | every member and pending id rejoined, or the      |
//	    |                          | rebalance timeout passed (out of Empty: after the  |
//	    |                          | initial delay); the generation grows               |
//	    |                          v                                                    |
//	    |              +---------------------+   a member joins, leaves, expires or     |
//	    |              | CompletingRebalance | --changes its metadata; a SyncGroup is ->+
//	    |              +---------------------+   missing at the rebalance timeout;      |
//	    |                          |             the leader's record failed to store    |
//	    |                          | the record of the leader's assignment is stored    |
//	    |                          v                                                    |
//	    |                     +--------+   a member joins, leaves, expires or changes   |
//	    |                     | Stable | --its metadata; the leader rejoins; a -------->+
//	    |                     +--------+   SyncGroup is missing at the rebalance timeout
//	    v
//	+------+
//	| Dead |   from Empty by Delete, from any state by Unload
//	+------+
//
// Restore starts a group in Stable (with members) or Empty (without).
//
// Join phase: a new member gets its id from the coordinator (Config.NewMemberID). JoinGroup v4+ without a
// member id first gets ErrMemberIDRequired with a pending id, which expires after the session timeout if
// the member does not come back. Joins are parked until every member and pending id joined or the
// rebalance timeout (the members' largest; the session timeout when absent) passes; dynamic members that
// did not rejoin are removed, static ones stay until their session expires. The generation grows by one,
// the leader is kept if it rejoined (else the earliest member that did), and the protocol chosen is the one
// most members prefer among those all support. The leader's response lists every member's metadata.
//
// Sync phase: followers' SyncGroups wait for the leader's; each member then receives the leader's bytes for
// it unchanged. Members that send no SyncGroup within the rebalance timeout are removed.
//
// Static members (group.instance.id): a member that rejoins with a known instance id and no member id
// replaces the old member id, which is fenced (ErrFencedInstanceID); in Stable, with unchanged metadata,
// this costs no rebalance.
//
// Transactions (KIP-98, KIP-447): a TxnOffsetCommit is checked by ValidateTxnCommit and its offsets are
// staged by the coordinator under the producer id, invisible to OffsetFetch, until the producer's COMMIT
// or ABORT marker reaches the group's partition (Coordinator.TxnCommit and Coordinator.WriteMarker).
//
// Timers: a member's session expires unless a Heartbeat, SyncGroup, JoinGroup or commit renews it within
// its session timeout; the session does not run while the member's JoinGroup or SyncGroup is parked, since
// the join and sync phases have their own deadlines.
//
// KIP-848 groups (group.protocol=consumer): ConsumerGroup is the new protocol's state machine, as pure as
// Group. Members only heartbeat (ConsumerGroupHeartbeat); a change of membership, subscription or
// subscribed topics grows the group epoch and recomputes the target assignment with a server-side
// assignor (assign.go: uniform, range), and each member is moved to its target revocation first: it is
// given a partition only once no other member owns it. A group with KIP-848 members keeps its classic
// Group Empty. A consumer-protocol join to a classic group of consumers converts it (Kafka's online
// upgrade: ConsumerGroupFromClassic, Group.HandOver), and classic members of a KIP-848 group are served
// by ConsumerGroup.ClassicJoin, ClassicSync, ClassicHeartbeat and ClassicLeave; a KIP-848 group whose
// members are all classic becomes classic again (ConsumerGroup.Downgrade, Group.Adopt; docs/groups.md).
//
// Share groups (KIP-932): the shard also holds each share group's membership (share.Group, a state
// machine of package share) under the same owner goroutine, so one goroutine decides what a group id
// names. A share group's existence and group epoch are recorded in the partition (record type 11) and
// rebuilt, empty, by a load; members whose session ends are removed on the shard's timer and reported
// to Coordinator.OnShareMembersGone (share_shard.go; docs/queues.md).
package group
