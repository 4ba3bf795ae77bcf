package test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// leaderThrottleRate is leader.replication.throttled.rate in TestLeaderThrottle, and
// leaderThrottleBytes the partition it moves: about eight seconds of copy.
const (
	leaderThrottleRate  = 512 << 10
	leaderThrottleBytes = 4 << 20
)

// TestLeaderThrottle: the leader-side throttle alone limits a move's copy, set and driven as Kafka's
// tooling does (kadm: AlterBrokerConfigs, AlterPartitionReassignments). Three nodes; a partition on
// nodes 1 and 2, led by 1, holds 4 MiB; with leader.replication.throttled.rate at 512 KiB/s and no
// follower-side rate, it moves to nodes 1 and 3. Node 3's replica grows at the rate (within ±20 %
// between 10 % and 90 % of the partition, DescribeLogDirs every 100 ms), and the move completes.
func TestLeaderThrottle(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	c := startMoveCluster(ctx, t, 3)
	createPlaced(ctx, t, c.nodes[0], "led", []int32{1, 2})
	waitAgree(ctx, t, c.nodes, func(resp *kmsg.MetadataResponse) bool {
		return len(topicOfResp(resp, "led").Partitions) == 1 && settled(resp)
	})
	fillPartition(ctx, t, c, "led", 0, leaderThrottleBytes)
	cl := c.client()
	defer cl.Close()
	adm := kadm.NewClient(cl)
	total := replicaBytes(ctx, t, adm, 1, "led")

	setThrottle(ctx, t, adm, "leader.replication.throttled.rate", leaderThrottleRate)
	began := time.Now()
	reassign(ctx, t, adm, "led", map[int32][]int32{0: {1, 3}})
	samples := sampleCopy(ctx, t, adm, 3, "led", total)
	rate := steadyCopyRate(t, samples, total)
	waitMoved(ctx, t, adm, "led")
	setThrottle(ctx, t, adm, "leader.replication.throttled.rate", 0)
	t.Logf("%d bytes copied in %v, %.0f KiB/s between 10 %% and 90 %% (%.3f of the limit)", total,
		samples[len(samples)-1].at.Sub(began).Round(time.Millisecond), rate/1024, rate/leaderThrottleRate)
	if rate < 0.8*leaderThrottleRate || rate > 1.2*leaderThrottleRate {
		t.Errorf("copy rate %.0f B/s, want %d ± 20 %%", rate, leaderThrottleRate)
	}
}
