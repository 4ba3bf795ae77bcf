package test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
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
	c := startMoveCluster(ctx, t)
	if err := createTopicRF(ctx, t, c.nodes[0], moveTopic, movePartitions, 3); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("create topic: %v", err)
	}
	waitAgree(ctx, t, c.nodes[:3], topicLed(moveTopic, movePartitions))
	c.startReaders()
	c.startProducer()
	t.Cleanup(c.stop)
	c.waitGroupReading(ctx)
	time.Sleep(3 * time.Second)

	c.nodes[3].start()
	before := waitAgree(ctx, t, c.nodes, hasBrokers(1, 2, 3, 4))
	var seeds []string
	for _, n := range c.nodes {
		seeds = append(seeds, n.kafkaAddr())
	}
	weir := func(args ...string) (string, string, error) {
		cmd := exec.CommandContext(ctx, weirBin, append([]string{"cluster", "rebalance", "--brokers", strings.Join(seeds, ",")}, args...)...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
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

	done := waitAgree(ctx, t, c.nodes, func(resp *kmsg.MetadataResponse) bool {
		for _, tp := range resp.Topics {
			for _, p := range tp.Partitions {
				if len(p.ISR) != len(p.Replicas) || p.Leader != p.Replicas[0] {
					return false
				}
			}
		}
		return true
	})
	replicas, leaders, of4 := map[int32]int{}, map[int32]int{}, 0
	for _, tp := range done.Topics {
		for _, p := range tp.Partitions {
			leaders[p.Replicas[0]]++
			for _, r := range p.Replicas {
				replicas[r]++
				if r == 4 && *tp.Topic == moveTopic {
					of4++
				}
			}
		}
	}
	t.Logf("replicas per node %v, preferred leaders %v, node 4 holds %d of %s", replicas, leaders, of4, moveTopic)
	for _, counts := range []map[int32]int{replicas, leaders} {
		lo, hi := counts[1], counts[1]
		for id := range int32(4) {
			lo, hi = min(lo, counts[id+1]), max(hi, counts[id+1])
		}
		if hi-lo > 1 {
			t.Errorf("uneven after the rebalance: %v", counts)
		}
	}
	if of4 < movePartitions*3/4-1 || leaders[4] == 0 {
		t.Errorf("node 4 holds %d replicas of %s and leads %d partitions", of4, moveTopic, leaders[4])
	}
	if out, _, err := weir("--dry-run"); err != nil || strings.TrimSpace(out) != `{"version":1,"partitions":[]}` {
		t.Errorf("a second plan after the rebalance: %v %s", err, out)
	}

	time.Sleep(2 * time.Second)
	c.stop()
	var ops []pollOp
	for p, recs := range c.nodes[3].readAll(ctx, t, moveTopic) {
		for _, r := range recs {
			ops = append(ops, pollOp{reader: "final", partition: p, offset: r.Offset, value: string(r.Value)})
		}
	}
	c.hist.poll(ops...)
	r := checkQueue(&c.hist)
	t.Logf("history: %s", r)
	if r.total() != 0 {
		t.Errorf("%d anomalies", r.total())
	}
	if r.acked == 0 {
		t.Error("nothing acknowledged")
	}
	c.checkGroupGaps(ops)
}
