package test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
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

// TestRebalanceBytesIn: three nodes and a topic of six partitions of one replica, two on each node,
// filled to the same size; a producer writes to partitions 0 and 1, both on node 1. Planned without
// bytes-in (`--rate-interval 0`) the cluster is balanced: counts and bytes held are even. `weir
// cluster rebalance --rate-interval 2s` measures each partition's growth and exchanges a written
// partition on node 1 for an idle one elsewhere: at the end partitions 0 and 1 are on different
// nodes, each node still holds two partitions, and the producer lost nothing.
func TestRebalanceBytesIn(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	c := startMoveCluster(ctx, t, 3)
	const topic = "rates"
	createPlaced(ctx, t, c.nodes[0], topic, []int32{1}, []int32{1}, []int32{2}, []int32{2}, []int32{3}, []int32{3})
	waitAgree(ctx, t, c.nodes, topicLed(topic, 6))
	for p := range int32(6) {
		fillPartition(ctx, t, c, topic, p, 4<<20)
	}

	// about 128 KiB/s to each of partitions 0 and 1: twice rateFloor per node, and a growth the
	// bytes tolerance below absorbs for the test's length
	cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	defer cl.Close()
	var failed atomic.Int64
	prodCtx, stopProd := context.WithCancel(ctx)
	prodDone := make(chan struct{})
	go func() {
		defer close(prodDone)
		value := make([]byte, 1<<10)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			for range 13 {
				for p := range int32(2) {
					cl.Produce(prodCtx, &kgo.Record{Topic: topic, Partition: p, Value: value}, func(_ *kgo.Record, err error) {
						if err != nil && prodCtx.Err() == nil {
							failed.Add(1)
						}
					})
				}
			}
			select {
			case <-prodCtx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	defer func() {
		stopProd()
		<-prodDone
	}()
	time.Sleep(time.Second)

	const tolerance = "0.5"
	out, errOut, err := c.weir(ctx, "cluster", "rebalance", "--dry-run", "--rate-interval", "0", "--bytes-tolerance", tolerance)
	if err != nil || strings.TrimSpace(out) != `{"version":1,"partitions":[]}` {
		t.Fatalf("planned without bytes-in: %v\nstdout %s\nstderr %s", err, out, errOut)
	}
	out, errOut, err = c.weir(ctx, "cluster", "rebalance", "--rate-interval", "2s", "--bytes-tolerance", tolerance, "--wait", "60s")
	t.Logf("weir cluster rebalance:\n%s%s", out, errOut)
	if err != nil || !strings.Contains(errOut, "measuring bytes-in over 2s") || !strings.Contains(out, "bytes-in") {
		t.Fatalf("rebalance: %v", err)
	}
	done := waitAgree(ctx, t, c.nodes, settled)
	parts := topicOfResp(done, topic).Partitions
	slices.SortFunc(parts, func(a, b kmsg.MetadataResponseTopicPartition) int { return int(a.Partition - b.Partition) })
	if parts[0].Replicas[0] == parts[1].Replicas[0] {
		t.Errorf("the written partitions 0 and 1 are both on node %d", parts[0].Replicas[0])
	}
	replicas, _ := placementCounts(done)
	checkEven(t, "replicas", replicas, 1, 2, 3)
	stopProd()
	<-prodDone
	if err := cl.Flush(ctx); err != nil {
		t.Errorf("flush: %v", err)
	}
	if n := failed.Load(); n > 0 {
		t.Errorf("%d records failed", n)
	}
}
