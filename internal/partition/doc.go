// Package partition is one node's view of its partitions. A replica's state — role, leader epoch, ISR,
// high watermark, followers' progress, producer state, acks=all waits — is a core (core.go): a state
// machine without I/O, clock or goroutines, whose methods take one event each and say what to do. A
// Replica owns one core and one storage.Log and carries out the core's decisions, one event at a time
// under the replica's turn; the Manager's reconciler opens, creates and deletes the replicas a node
// hosts so that they match the controller's metadata image, and its fetchers copy the partitions this
// node follows from their leaders (docs/replication.md).
//
// On a single node the replica is always the leader and the high watermark is the log's durable end
// offset: a record becomes visible to readers only once it is durable under the log's flush policy, so
// a consumer never sees a record that a crash could take back under the default policy.
//
// Locks (docs/locks.md): Replica.mu guards the turn and the event queue and is held for a few
// instructions; the turn's holder writes and truncates the log with no lock held. Replica.watchMu
// guards the watchers. Manager.mu guards the replica map and is never held across I/O;
// Manager.reconcileMu is held by the reconciler for a pass and is taken before Manager.mu.
package partition
