// Package share is the state of share groups (KIP-932, docs/queues.md) as deterministic state
// machines: Partition, one share-partition (a share group's view of one topic partition) as its
// partition leader keeps it, and the records that make it durable.
//
// A Partition does no I/O, starts no goroutine and reads no clock: every call that needs the time takes
// it. Its owner drives it from one goroutine, tells it each record's priority and due time (Track)
// before it acquires, reads the records it hands out, arms one timer for the earlier of Deadline and
// NextDue, and writes the Record that Persist returns after each change. Acquire takes records by
// effective priority (raised by aging), then offset, and never one before its due time (attrs.go).
//
// A record of the share-partition moves through these states (Kafka's):
//
//	              Acquire (delivery count + 1, locked until now + lock duration)
//	+-----------+ ---------------------------------------------------> +----------+
//	| Available |                                                      | Acquired |
//	+-----------+ <--------------------------------------------------- +----------+
//	                RELEASE, the lock expires, the member goes:              |  |  |
//	                back to Available below the delivery count limit,        |  |  | RENEW: locked
//	                else Archived                                            |  |  | again from now
//	                                                                         |  |
//	                                   ACCEPT                                |  | REJECT, GAP
//	                 +--------------+ <--------------------------------------+  |
//	                 | Acknowledged |                          +----------+ <---+
//	                 +--------------+                          | Archived |
//	                                                           +----------+
//
// Acknowledged and Archived are final. The share-partition start offset (SPSO) is the first offset not
// final; the in-flight window is [SPSO, End), End being one past the highest offset ever acquired, and
// its length is capped at Config.RecordLocksMax: new offsets are acquired only while it is shorter.
//
// Durability: Persist returns the Record owed after a change, a snapshot of the whole window or an
// update of the offsets that changed since the last record; a Durable replays records (the last
// snapshot, then the updates of its round in order) and Restore turns it back into a Partition. An
// Acquired record is written as Available with its delivery count: its lock does not outlive the
// leader that granted it. docs/queues.md explains the keys under which compaction keeps what replay
// needs.
package share
