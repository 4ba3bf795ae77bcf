package test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// rebalanceThrottle is follower.replication.throttled.rate during TestRebalanceNewBroker's moves:
// slow enough that progress is printed more than once.
const rebalanceThrottle = 32 << 10

// TestRebalanceNewBroker: three nodes, a topic of 12 partitions at RF 3 on them under an idempotent
// acks=all producer, a reader and a group consumer; node 4 starts as a broker; `weir cluster
// rebalance --dry-run` plans its share and moves nothing; `weir cluster rebalance --throttle` moves
// it, printing progress, and removes the throttle. At the end replicas and preferred leaders are even
// to within one over every broker (node 4 holding its share of the topic and leading some of it),
// every acknowledged record is read exactly once at its offset, and the group consumer saw no gap.
func TestRebalanceNewBroker(t *testing.T) {
	ctx := testContext(t, 4*time.Minute)
	c := startMoveCluster(ctx, t, 4)
	c.startLoad(ctx)

	c.nodes[3].start()
	before := waitAgree(ctx, t, c.nodes, hasBrokers(1, 2, 3, 4))
	weir := func(args ...string) (string, string, error) {
		return c.weir(ctx, append([]string{"cluster", "rebalance"}, args...)...)
	}

	out, errOut, err := weir("--dry-run")
	var plan struct {
		Version    int
		Partitions []struct {
			Topic     string
			Partition int32
			Replicas  []int32
		}
	}
	if err != nil || json.Unmarshal([]byte(out), &plan) != nil || !strings.Contains(errOut, "plan: ") {
		t.Fatalf("rebalance --dry-run: %v\nstdout %s\nstderr %s", err, out, errOut)
	}
	onto4 := 0
	for _, p := range plan.Partitions {
		if p.Topic == moveTopic && slices.Contains(p.Replicas, 4) {
			onto4++
		}
	}
	if onto4 == 0 {
		t.Fatalf("the dry run moves nothing of %s to node 4: %s", moveTopic, out)
	}
	if after := metadata(ctx, t, c.nodes[0]); clusterView(after) != clusterView(before) {
		t.Errorf("the dry run changed the cluster:\n%s\nto\n%s", clusterView(before), clusterView(after))
	}

	out, errOut, err = weir("--throttle", fmt.Sprint(rebalanceThrottle), "--wait", "150s")
	t.Logf("weir cluster rebalance:\n%s%s", out, errOut)
	if err != nil {
		t.Fatalf("rebalance: %v", err)
	}
	progress := 0
	for line := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(line, "moved ") && strings.Contains(line, " partitions, copied ") {
			progress++
		}
	}
	for _, want := range []string{"throttle: 32768 bytes/s", "throttle removed", "leadership moved to the new preferred replica"} {
		if !strings.Contains(out, want) {
			t.Errorf("rebalance output lacks %q", want)
		}
	}
	if progress < 2 {
		t.Errorf("%d progress lines, want the moves followed", progress)
	}

	done := waitAgree(ctx, t, c.nodes, settled)
	replicas, leaders := placementCounts(done)
	of4 := 0
	for _, p := range topicOfResp(done, moveTopic).Partitions {
		if slices.Contains(p.Replicas, 4) {
			of4++
		}
	}
	t.Logf("replicas per node %v, preferred leaders %v, node 4 holds %d of %s", replicas, leaders, of4, moveTopic)
	checkEven(t, "replicas", replicas, 1, 2, 3, 4)
	checkEven(t, "preferred leaders", leaders, 1, 2, 3, 4)
	if of4 < movePartitions*3/4-1 || leaders[4] == 0 {
		t.Errorf("node 4 holds %d replicas of %s and leads %d partitions", of4, moveTopic, leaders[4])
	}
	// The producer goes on writing, so the partitions' sizes drift apart between two plans; the counts
	// need nothing more.
	if out, _, err := weir("--dry-run", "--bytes-tolerance", "0"); err != nil || strings.TrimSpace(out) != `{"version":1,"partitions":[]}` {
		t.Errorf("a second plan after the rebalance: %v %s", err, out)
	}

	time.Sleep(2 * time.Second)
	c.checkHistory(ctx, c.nodes[3])
}

// settled reports every partition led by its preferred replica with every replica in the ISR: no move
// in progress and leadership where the plan put it.
func settled(resp *kmsg.MetadataResponse) bool {
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if len(p.ISR) != len(p.Replicas) || p.Leader != p.Replicas[0] {
				return false
			}
		}
	}
	return true
}

// placementCounts counts, per broker, the replicas and the preferred leaderships of every partition
// of every topic in resp.
func placementCounts(resp *kmsg.MetadataResponse) (replicas, leaders map[int32]int) {
	replicas, leaders = map[int32]int{}, map[int32]int{}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			leaders[p.Replicas[0]]++
			for _, r := range p.Replicas {
				replicas[r]++
			}
		}
	}
	return replicas, leaders
}

// checkEven fails the test where two of brokers differ by more than one in counts.
func checkEven(t testing.TB, what string, counts map[int32]int, brokers ...int32) {
	t.Helper()
	lo, hi := counts[brokers[0]], counts[brokers[0]]
	for _, b := range brokers {
		lo, hi = min(lo, counts[b]), max(hi, counts[b])
	}
	if hi-lo > 1 {
		t.Errorf("%s uneven over brokers %v: %v", what, brokers, counts)
	}
}
