// Package weirtest runs a real weir node inside a Go program: the broker that `weir serve` runs, built
// by the same code (internal/server), with its data in a directory of the caller's (a test's
// t.TempDir()) and its listeners on free loopback ports. It is the way to test a Kafka application in
// Go without a container or a process to manage:
//
//	func TestOrders(t *testing.T) {
//		node := weirtest.New(t)
//		cl, err := kgo.NewClient(kgo.SeedBrokers(node.Addr()))
//		...
//	}
//
// The node is a single voter of its own controller quorum, durable like any weir node (records are
// fsynced before they are acknowledged), with settings chosen for tests: a 50ms Raft timeout and a
// 50ms broker heartbeat, so that it elects itself and is unfenced in about 30ms (with the defaults,
// 500ms each, a start takes about 100ms); no initial rebalance delay, so that a consumer group's
// first generation starts at once; and one partition of __consumer_offsets and of __transaction_state
// instead of 50.
package weirtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/server"
)

// startTimeout bounds New's start: the node's own Raft election and the opening of its logs.
const startTimeout = 30 * time.Second

// Options configure Start; the zero value is a quiet node.
type Options struct {
	// Logger receives the node's logs; nil discards them.
	Logger *slog.Logger
}

// Node is a running weir node.
type Node struct {
	node *server.Node
}

// New starts a node with its data in tb.TempDir() and stops it when the test ends; a node that does
// not start fails the test.
func New(tb testing.TB) *Node {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	n, err := Start(ctx, tb.TempDir(), Options{})
	if err != nil {
		tb.Fatalf("weirtest: %v", err)
	}
	tb.Cleanup(func() {
		if err := n.Close(); err != nil {
			tb.Errorf("weirtest: %v", err)
		}
	})
	return n
}

// Start starts a node with its data in dir (created if missing; a directory an earlier node of this
// package left is reopened with its topics and records) and returns once it serves. ctx bounds the
// start.
func Start(ctx context.Context, dir string, opts Options) (*Node, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg := server.DefaultConfig()
	cfg.DataDir = dir
	cfg.KafkaAddr = "127.0.0.1:0"
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.ControllerAddr = "127.0.0.1:0"
	cfg.ControllerRaftTimeout = 50 * time.Millisecond
	cfg.BrokerHeartbeatInterval = 50 * time.Millisecond
	cfg.Groups.InitialRebalanceDelay = 0
	cfg.Groups.OffsetsPartitions = 1
	cfg.Txn.StatePartitions = 1
	cfg.Logger = logger
	n, err := server.Start(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("start a node in %s: %w", dir, err)
	}
	return &Node{node: n}, nil
}

// Addr is the node's Kafka bootstrap address, host:port, for kgo.SeedBrokers and the like.
func (n *Node) Addr() string { return n.node.KafkaAddr() }

// HTTPAddr is the address of the node's HTTP server: /healthz, /metrics, /v1/cluster/status.
func (n *Node) HTTPAddr() string { return n.node.HTTPAddr() }

// Close stops the node: in-flight requests drain, the logs are synced and closed. Later calls return
// nil.
func (n *Node) Close() error {
	if err := n.node.Close(); err != nil && !errors.Is(err, server.ErrClosed) {
		return fmt.Errorf("stop the node: %w", err)
	}
	return nil
}
