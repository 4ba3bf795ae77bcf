package controller

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestRaftFenceSelf: a broker that fences itself (its data directory failed) is fenced at once,
// without its session expiring, and its leaderships move to the ISR; it never heartbeats again, so
// the fence stays. Both a follower of the quorum and the controller leader itself can do it.
func TestRaftFenceSelf(t *testing.T) {
	c := newTestCluster(t, 3, 0)
	c.ready()
	ctx, cancel := context.WithTimeout(context.Background(), waitMax)
	defer cancel()
	retry(t, "create", func() error {
		_, err := c.node(1).store.CreateTopicSpec(ctx, TopicSpec{Name: "t", Partitions: 6, ReplicationFactor: 3}, false)
		return err
	})
	c.converged()
	var follower *testNode
	for _, n := range c.nodes {
		if n != c.leader() {
			follower = n
			break
		}
	}
	leader := c.leader()
	survivor := c.nodes[0]
	for _, n := range c.nodes {
		if n != follower && n != leader {
			survivor = n
		}
	}
	for _, victim := range []*testNode{follower, leader} {
		retry(t, "fence self", func() error { return victim.store.FenceSelf(ctx) })
		eventually(t, "the survivor's image to show the fence", func() bool {
			b, _ := survivor.store.Image().Broker(victim.id)
			return b.Fenced
		})
		// A retired broker sends nothing: had it heartbeat, the leader would have unfenced it.
		victim.store.node.liveOnce()
		if b, _ := survivor.store.Image().Broker(victim.id); !b.Fenced {
			t.Fatalf("broker %d unfenced after fencing itself", victim.id)
		}
	}
	for p, st := range survivor.store.Image().Topics["t"].States {
		if st.Leader != survivor.id || len(st.ISR) != 1 || st.ISR[0] != survivor.id {
			t.Fatalf("partition %d after two brokers fenced themselves: %+v", p, st)
		}
	}
}

// TestRaftFenceRequestNamesTheRegistration: a fence request for another incarnation or epoch is
// refused with ErrStaleBroker and fences nobody.
func TestRaftFenceRequestNamesTheRegistration(t *testing.T) {
	c := newTestCluster(t, 1, 0)
	c.ready()
	n := c.node(1)
	b, _ := n.store.Image().Broker(1)
	client := newRPCClient(time.Second, nil)
	defer client.close()
	for _, req := range []fenceRequest{
		{NodeID: 1, Incarnation: "someone-else", Epoch: b.Epoch},
		{NodeID: 1, Incarnation: b.Incarnation, Epoch: b.Epoch + 1},
		{NodeID: 7, Incarnation: b.Incarnation, Epoch: b.Epoch},
	} {
		if _, err := client.call(context.Background(), n.addr, methodFence, req, nil); !errors.Is(err, ErrStaleBroker) {
			t.Fatalf("fence %+v: %v, want ErrStaleBroker", req, err)
		}
	}
	if b, _ := n.store.Image().Broker(1); b.Fenced {
		t.Fatal("a stale fence request fenced the broker")
	}
}
