package server

import "github.com/weir-mq/weir/internal/partition"

// Replicas returns the partition replicas this node hosts, for in-process callers that act on a
// partition directly (a test writing a transaction marker, say); nil before the node started.
func (n *Node) Replicas() *partition.Manager { return n.replicas }
