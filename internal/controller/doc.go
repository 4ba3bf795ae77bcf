// Package controller holds weir's cluster metadata: the brokers and their liveness, the topics with
// their ids, configs and partition states (replicas, leader, leader epoch, ISR), the broker-level
// config defaults and the producer-id counter.
//
// The metadata is a state machine. A change is a Command value; Apply(img, cmd) is a pure function
// that returns the next Image (no I/O, no clock, no randomness: topic ids, timestamps and replica
// placements travel inside the command). An Image is immutable once published, so request handlers
// load the current one from an atomic pointer and never lock.
//
// Two Stores run the same Apply. OpenLocal keeps the latest Image in one file under the node's
// controller directory, replaced atomically on every change (temp file, fsync, rename, directory
// sync). OpenRaft runs the commands through a hashicorp/raft quorum: the FSM applies every committed
// command on every node, voters and non-voters alike; commands proposed on a node that does not lead
// are forwarded to the leader over the controller RPC. docs/controller.md describes the commands,
// fencing and election, placement and the network.
package controller
