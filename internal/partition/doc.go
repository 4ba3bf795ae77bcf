// Package partition is one node's view of its partitions: a Replica wraps one storage.Log with the
// leader's append path (idempotent-producer checks, then the append), the high watermark and the
// parked readers waiting for it; the Manager opens, creates and deletes the replicas a node hosts so
// that they match the controller's metadata image.
//
// On a single node the replica is always the leader and the high watermark is the log's durable end
// offset: a record becomes visible to readers only once it is durable under the log's flush policy, so
// a consumer never sees a record that a crash could take back under the default policy.
//
// Locks: Replica.mu guards the producer state and the append sequence and is held around the
// producer check and storage's Append (a buffered write, no sync), never across a wait for
// durability. Replica.watchMu guards the watchers; it is never held with Replica.mu. Manager.mu guards
// the replica map and is never held across I/O; Manager.reconcileMu serializes reconciliations and
// is taken before Manager.mu.
package partition
