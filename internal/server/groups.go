package server

import "github.com/weir-mq/weir/internal/group"

// GroupCoordinator returns the node's group coordinator, for in-process callers that act on it directly:
// a test that ends a transaction with Coordinator.WriteMarker, as the transaction coordinator's marker
// writer does.
func (n *Node) GroupCoordinator() *group.Coordinator { return n.groups }
