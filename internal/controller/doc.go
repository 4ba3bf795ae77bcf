// Package controller holds weir's cluster metadata: the brokers, the topics with their ids, partition
// counts and configs, the broker-level config defaults and the producer-id counter.
//
// The metadata is a state machine. A change is a Command value; Apply(img, cmd) is a pure function
// that returns the next Image (no I/O, no clock, no randomness: topic ids and timestamps travel inside
// the command). An Image is immutable once published, so request handlers load the current one from
// an atomic pointer and never lock.
//
// Today the commands are applied by a Store that keeps the latest Image in one file under the node's
// controller directory, replaced atomically on every change (temp file, fsync, rename, directory
// sync). The controller quorum replaces that Store with a hashicorp/raft FSM whose Apply calls the
// same Apply function.
package controller
