package test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// scaleThrottle is follower.replication.throttled.rate during TestScaleOutAndDecommission's rebalance:
// slow enough that the moves are still running when the controller leader is killed.
const scaleThrottle = 32 << 10

// TestScaleOutAndDecommission is issue 14's scenario: three nodes, a topic of 12 partitions at RF 3
// under an idempotent acks=all producer, a reader and a group consumer; nodes 4 and 5 start; `weir
// cluster rebalance --throttle` spreads the replicas over the five, and the controller leader is
// killed with -9 while the moves run and restarted; then `weir cluster decommission 1` empties node 1.
// At the end replicas are even to within one over nodes 2-5, node 1 hosts no replica, every
// acknowledged record is read exactly once at its offset, and the group consumer saw no gap.
func TestScaleOutAndDecommission(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	c := startMoveCluster(ctx, t, 5)
	c.startLoad(ctx)

	for _, n := range c.nodes[3:] {
		n.launch()
	}
	for _, n := range c.nodes[3:] {
		n.waitHealthy()
	}
	waitAgree(ctx, t, c.nodes, hasBrokers(1, 2, 3, 4, 5))

	type result struct {
		out, errOut string
		err         error
	}
	rebalanced := make(chan result, 1)
	go func() {
		out, errOut, err := c.weir(ctx, "cluster", "rebalance", "--throttle", fmt.Sprint(scaleThrottle), "--wait", "100s")
		rebalanced <- result{out, errOut, err}
	}()

	admCl := c.client()
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	all := kadm.TopicsSet{}
	for p := range int32(movePartitions) {
		all.Add(moveTopic, p)
	}
	for {
		var moving kadm.ListPartitionReassignmentsResponses
		retryAdmin(ctx, t, "list reassignments", func() (err error) {
			moving, err = adm.ListPartitionReassignments(ctx, all)
			return err
		})
		if len(moving) > 0 {
			break
		}
		select {
		case r := <-rebalanced:
			t.Fatalf("the rebalance ended before a move was seen in progress: %v\n%s%s", r.err, r.out, r.errOut)
		case <-time.After(100 * time.Millisecond):
		}
	}
	victim := controllerOf(ctx, t, c.nodes, (*node).alive)
	t.Logf("moves in progress; killing the controller leader, node %d", victim.id)
	victim.kill()
	time.Sleep(3 * time.Second)
	victim.start()

	r := <-rebalanced
	t.Logf("weir cluster rebalance:\n%s%s", r.out, r.errOut)
	if r.err != nil {
		t.Fatalf("rebalance: %v", r.err)
	}
	replicas, leaders := placementCounts(waitAgree(ctx, t, c.nodes, settled))
	t.Logf("after the rebalance: replicas per node %v, preferred leaders %v", replicas, leaders)
	checkEven(t, "replicas", replicas, 1, 2, 3, 4, 5)

	c.decommission(ctx, 1, "90s")
	replicas, leaders = placementCounts(waitAgree(ctx, t, c.nodes, settled))
	t.Logf("after the decommission: replicas per node %v, preferred leaders %v", replicas, leaders)
	checkEven(t, "replicas", replicas, 2, 3, 4, 5)
	if replicas[1] != 0 || leaders[1] != 0 {
		t.Errorf("node 1 still holds %d replicas after its decommission", replicas[1])
	}
	c.waitHostsNothing(ctx, c.nodes[0])

	time.Sleep(2 * time.Second)
	c.checkHistory(ctx, c.nodes[4])
}

// waitHostsNothing waits until n's DescribeLogDirs names no replica: its reconciler has closed and
// removed every replica the metadata took from it.
func (c *moveCluster) waitHostsNothing(ctx context.Context, n *node) {
	c.t.Helper()
	admCl := c.client()
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var hosted []string
		retryAdmin(ctx, c.t, "describe log dirs", func() error {
			dirs, err := adm.DescribeBrokerLogDirs(ctx, n.id, nil)
			hosted = nil
			dirs.Each(func(d kadm.DescribedLogDir) {
				d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
					hosted = append(hosted, fmt.Sprintf("%s-%d", p.Topic, p.Partition))
				})
			})
			return err
		})
		if len(hosted) == 0 {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("node %d still hosts %s", n.id, strings.Join(hosted, ", "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
