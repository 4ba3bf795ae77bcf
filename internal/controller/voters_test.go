package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestVoterChangeCheck: a change is refused when no voter would remain or the live voters would not
// be a majority of the new set.
func TestVoterChangeCheck(t *testing.T) {
	liveOf := func(ids ...int32) func(int32) bool {
		return func(id int32) bool { return slices.Contains(ids, id) }
	}
	for _, c := range []struct {
		next []int32
		live []int32
		ok   bool
	}{
		{nil, []int32{1}, false},
		{[]int32{1}, []int32{1}, true},
		{[]int32{1}, nil, false},
		{[]int32{1, 2}, []int32{1}, false},
		{[]int32{1, 2}, []int32{1, 2}, true},
		{[]int32{1, 2, 3}, []int32{1, 2}, true},
		{[]int32{1, 2, 3, 4}, []int32{1, 2}, false},
		{[]int32{1, 2, 3, 4}, []int32{1, 2, 4}, true},
	} {
		err := checkVoterChange(c.next, liveOf(c.live...))
		if (err == nil) != c.ok || err != nil && !errors.Is(err, ErrQuorumLoss) {
			t.Errorf("voters %v live %v: %v, want ok=%v", c.next, c.live, err, c.ok)
		}
	}
}

// voterIDs is the Raft configuration as "id:suffrage", sorted.
func voterIDs(t *testing.T, n *testNode) []string {
	t.Helper()
	f := n.store.node.r.GetConfiguration()
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range f.Configuration().Servers {
		out = append(out, string(s.ID)+":"+s.Suffrage.String())
	}
	sort.Strings(out)
	return out
}

// TestRaftVoterChanges: three voters and a broker; the broker becomes a voter (asked through a
// non-leader), voter 1 is removed and stays a non-voter, topics are created between and after the
// changes; bad changes (a duplicate, an unknown voter, another address, a silent broker, a removal
// that leaves too few live voters) are refused with their error and change nothing. A voter removed
// while it is down comes back, restarted, as a non-voter.
func TestRaftVoterChanges(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.ready()
	ctx := context.Background()
	create := func(name string) {
		t.Helper()
		retry(t, "create "+name, func() error {
			_, err := c.live()[len(c.live())-1].store.CreateTopic(ctx, name, 1, nil, false)
			return err
		})
	}
	create("before")
	four := c.node(4)
	via := four.store
	if err := via.AddVoter(ctx, 4, "127.0.0.1:1"); !errors.Is(err, ErrInvalidCommand) {
		t.Errorf("add at another address: %v", err)
	}
	if err := via.AddVoter(ctx, 2, c.node(2).addr); !errors.Is(err, ErrDuplicateVoter) {
		t.Errorf("add a voter: %v", err)
	}
	if err := via.AddVoter(ctx, 9, "127.0.0.1:2"); !errors.Is(err, ErrInvalidCommand) {
		t.Errorf("add an unknown node: %v", err)
	}
	if err := via.RemoveVoter(ctx, 4); !errors.Is(err, ErrVoterNotFound) {
		t.Errorf("remove a non-voter: %v", err)
	}
	retry(t, "add voter 4", func() error {
		err := via.AddVoter(ctx, 4, four.addr)
		if errors.Is(err, ErrVoterNotCaughtUp) {
			// the leader wants two heartbeats of node 4's showing what it applied
			c.step()
			return ErrTimeout
		}
		return err
	})
	create("after-add")
	retry(t, "remove voter 1", func() error { return via.RemoveVoter(ctx, 1) })
	create("after-remove")
	img := c.converged()
	for _, name := range []string{"before", "after-add", "after-remove"} {
		if _, ok := img.Topic(name); !ok {
			t.Errorf("topic %s missing: %v", name, img.TopicNames())
		}
	}
	c.stepUntil("the configuration to settle", func() bool { return c.leader() != nil })
	want := []string{"1:Nonvoter", "2:Voter", "3:Voter", "4:Voter"}
	if got := voterIDs(t, c.leader()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("raft configuration %v, want %v", got, want)
	}

	// voters 2, 3, 4; with 3 stopped, removing 2 would leave 3 and 4 with one live: refused.
	c.stop(c.node(3))
	for range 3 {
		c.step() // past the two heartbeat intervals within which 3 still counts as live
	}
	c.stepUntil("a leader among 2 and 4", func() bool { return c.leader() != nil })
	c.step() // the new leader hears from 2 and 4
	retry(t, "create with 3 down", func() error {
		_, err := four.store.CreateTopic(ctx, "three-down", 1, nil, false)
		return err
	})
	var err error
	retry(t, "remove voter 2", func() error {
		err = four.store.RemoveVoter(ctx, 2)
		if errors.Is(err, ErrQuorumLoss) {
			return nil
		}
		return err
	})
	if !errors.Is(err, ErrQuorumLoss) {
		t.Errorf("remove 2 with 3 down: %v, want ErrQuorumLoss", err)
	}
	if got := voterIDs(t, c.leader()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("a refused change changed the configuration to %v", got)
	}

	// 3, down, leaves the quorum (2 and 4 live); restarted, it registers and is a non-voter again.
	c.step()
	retry(t, "remove voter 3", func() error { return four.store.RemoveVoter(ctx, 3) })
	if got := voterIDs(t, c.leader()); fmt.Sprint(got) != fmt.Sprint([]string{"1:Nonvoter", "2:Voter", "4:Voter"}) {
		t.Fatalf("after removing 3: %v", got)
	}
	three := c.node(3)
	ln, err := net.Listen("tcp", three.addr)
	if err != nil {
		t.Skipf("the stopped node's address is taken: %v", err)
	}
	_, three.trans = raft.NewInmemTransport(raft.ServerAddress(three.addr))
	c.connectAll()
	c.open(three, ln)
	c.stepUntil("node 3 back as a non-voter", func() bool {
		l := c.leader()
		return l != nil && fmt.Sprint(voterIDs(t, l)) == fmt.Sprint([]string{"1:Nonvoter", "2:Voter", "3:Nonvoter", "4:Voter"})
	})
	retry(t, "create with 3 back", func() error {
		_, err := four.store.CreateTopic(ctx, "three-back", 1, nil, false)
		return err
	})
	c.converged()
}

// TestVoterCaughtUp: a broker may become a voter once its last heartbeat reported the metadata log
// applied up to the commit of the heartbeat before; before its second heartbeat, or while it lags,
// it is refused with ErrVoterNotCaughtUp. The leader itself always may.
func TestVoterCaughtUp(t *testing.T) {
	n := &raftNode{cfg: RaftConfig{Self: Broker{NodeID: 1}}, sess: newSessions(time.Minute)}
	now := time.Now()
	for _, c := range []struct {
		applied, commit uint64
		ok              bool
	}{
		{applied: 3, commit: 10, ok: false}, // one heartbeat: nothing to compare with yet
		{applied: 8, commit: 12, ok: false}, // behind the 10 committed at the first
		{applied: 12, commit: 20, ok: true},
		{applied: 15, commit: 30, ok: false}, // the log grew faster than it applied
		{applied: 30, commit: 31, ok: true},
	} {
		n.sess.touch(4, now, "Follower", c.applied, c.commit)
		if err := n.caughtUp(4); (err == nil) != c.ok || err != nil && !errors.Is(err, ErrVoterNotCaughtUp) {
			t.Errorf("applied %d, commit %d: %v, want ok=%v", c.applied, c.commit, err, c.ok)
		}
	}
	if err := n.caughtUp(1); err != nil {
		t.Errorf("the leader itself: %v", err)
	}
}
