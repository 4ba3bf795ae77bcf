package test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	moveTopic      = "moving"
	movePartitions = 12
	// moveRate is records offered per second, moveValueBytes the size of each value.
	moveRate       = 300
	moveValueBytes = 200
	// moveThrottle is follower.replication.throttled.rate during the move: slow enough that the moves
	// are still in progress when the controller leader is killed.
	moveThrottle = 20 << 10
	moveGroup    = "moving-readers"
)

// moveCluster is TestReassignUnderLoad's cluster, clients and history.
type moveCluster struct {
	t     testing.TB
	nodes []*node
	hist  queueHistory

	prod     *kgo.Client
	stopProd context.CancelFunc
	prodDone chan struct{}
	stopRead context.CancelFunc
	readDone chan struct{}

	// groupRead holds, per partition, every offset the group consumer got.
	groupMu   sync.Mutex
	groupRead map[int32][]int64
}

func (c *moveCluster) seeds() kgo.Opt {
	var seeds []string
	for _, n := range c.nodes {
		seeds = append(seeds, n.kafkaAddr())
	}
	return kgo.SeedBrokers(seeds...)
}

// client is a client of every node, with short retries, so that a killed node is given up quickly.
func (c *moveCluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{c.seeds(), kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.RequestTimeoutOverhead(2 * time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond })}, opts...)...)
	if err != nil {
		c.t.Fatalf("client: %v", err)
	}
	return cl
}

// startProducer offers moveRate records a second with an idempotent acks=all producer, every
// outcome into the history.
func (c *moveCluster) startProducer() {
	c.prod = c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProduceRequestTimeout(2*time.Second), kgo.MaxBufferedRecords(60*moveRate))
	ctx, cancel := context.WithCancel(context.Background())
	c.stopProd, c.prodDone = cancel, make(chan struct{})
	pad := strings.Repeat("x", moveValueBytes)
	go func() {
		defer close(c.prodDone)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		began, offered := time.Now(), 0
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for due := int(time.Since(began).Seconds() * moveRate); offered < due; offered++ {
				p := int32(offered % movePartitions)
				key := fmt.Sprintf("p%d-k%02d", p, offered/movePartitions%16)
				value := fmt.Sprintf("v%08d-%s", offered, pad)
				seq := c.hist.send(key, value)
				c.prod.TryProduce(context.Background(), &kgo.Record{Topic: moveTopic, Partition: p, Key: []byte(key), Value: []byte(value)},
					func(r *kgo.Record, err error) {
						switch {
						case err == nil:
							c.hist.complete(seq, sendAcked, r.Partition, r.Offset)
						case errors.Is(err, kgo.ErrMaxBuffered):
							c.hist.complete(seq, sendFailed, 0, 0)
						default:
							c.hist.complete(seq, sendUnknown, 0, 0)
						}
					})
			}
		}
	}()
}

// startReaders runs a reader of every partition from offset 0 (into the history as "live") and a
// group consumer (its offsets into groupRead).
func (c *moveCluster) startReaders() {
	parts := map[int32]kgo.Offset{}
	for p := range int32(movePartitions) {
		parts[p] = kgo.NewOffset().At(0)
	}
	live := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{moveTopic: parts}), kgo.FetchMaxWait(500*time.Millisecond))
	group := c.client(kgo.ConsumerGroup(moveGroup), kgo.ConsumeTopics(moveTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	c.stopRead, c.readDone = cancel, make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer live.Close()
		for ctx.Err() == nil {
			var ops []pollOp
			live.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
				ops = append(ops, pollOp{reader: "live", partition: r.Partition, offset: r.Offset, value: string(r.Value)})
			})
			c.hist.poll(ops...)
		}
	}()
	go func() {
		defer wg.Done()
		defer group.Close()
		for ctx.Err() == nil {
			recs := group.PollFetches(ctx).Records()
			c.groupMu.Lock()
			for _, r := range recs {
				c.groupRead[r.Partition] = append(c.groupRead[r.Partition], r.Offset)
			}
			c.groupMu.Unlock()
		}
	}()
	go func() {
		wg.Wait()
		close(c.readDone)
	}()
}

// stop stops the producer (waiting up to 30 s for its answers) and the readers.
func (c *moveCluster) stop() {
	if c.stopProd != nil {
		c.stopProd()
		<-c.prodDone
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := c.prod.Flush(ctx); err != nil {
			c.t.Logf("producer flush: %v", err)
		}
		cancel()
		c.prod.Close()
		c.stopProd = nil
	}
	if c.stopRead != nil {
		c.stopRead()
		<-c.readDone
		c.stopRead = nil
	}
}

// retryAdmin runs call until it returns no retriable error (NOT_CONTROLLER and the like while a
// controller is elected, a connection to a killed node) or ctx ends.
func retryAdmin(ctx context.Context, t testing.TB, what string, call func() error) {
	t.Helper()
	for {
		err := call()
		if err == nil {
			return
		}
		if ctx.Err() != nil || !kerr.IsRetriable(err) && !errors.Is(err, kerr.RequestTimedOut) && !isConnErr(err) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// setThrottle sets the broker config name (follower.replication.throttled.rate or
// leader.replication.throttled.rate) to rate bytes a second cluster-wide, or removes it for 0.
func setThrottle(ctx context.Context, t testing.TB, adm *kadm.Client, name string, rate int64) {
	t.Helper()
	ac := kadm.AlterConfig{Op: kadm.DeleteConfig, Name: name}
	if rate > 0 {
		ac = kadm.AlterConfig{Name: ac.Name, Value: kadm.StringPtr(fmt.Sprint(rate))}
	}
	retryAdmin(ctx, t, "throttle", func() error {
		resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{ac})
		if err == nil {
			for _, r := range resp {
				err = errors.Join(err, r.Err)
			}
		}
		return err
	})
}

// reassign moves each partition of topic in plan to its replicas (AlterPartitionReassignments).
func reassign(ctx context.Context, t testing.TB, adm *kadm.Client, topic string, plan map[int32][]int32) {
	t.Helper()
	req := kadm.AlterPartitionAssignmentsReq{}
	for p, replicas := range plan {
		req.Assign(topic, p, replicas)
	}
	retryAdmin(ctx, t, "reassign", func() error {
		resp, err := adm.AlterPartitionAssignments(ctx, req)
		if err == nil {
			err = resp.Error()
		}
		return err
	})
}

// isConnErr reports a client error that is the connection's rather than the broker's answer.
func isConnErr(err error) bool {
	var ke *kerr.Error
	return !errors.As(err, &ke)
}

// movePlan is the target of the partitions TestReassignUnderLoad moves: partitions 0-5 trade their
// first replica (the preferred leader, and so mostly the leader) for node 4.
func movePlan(resp *kmsg.MetadataResponse) map[int32][]int32 {
	plan := map[int32][]int32{}
	for _, p := range topicOfResp(resp, moveTopic).Partitions {
		if p.Partition < movePartitions/2 {
			plan[p.Partition] = append([]int32{4}, p.Replicas[1:]...)
		}
	}
	return plan
}

func topicOfResp(resp *kmsg.MetadataResponse, topic string) kmsg.MetadataResponseTopic {
	for _, tp := range resp.Topics {
		if tp.Topic != nil && *tp.Topic == topic {
			return tp
		}
	}
	return kmsg.MetadataResponseTopic{}
}

// TestReassignUnderLoad: three nodes, a topic of 12 partitions at RF 3 under an idempotent acks=all
// producer, a reader and a group consumer; a fourth node starts; kadm's AlterPartitionReassignments
// moves six partitions' first replica to it under a throttle; bad input is refused with Kafka's codes
// and changes nothing; the controller leader is killed with -9 while the moves run and restarted. At
// the end the moves are complete, every acknowledged record is read exactly once at its offset, the
// group consumer saw no gap, and each node holds the directories of the plan and no other. Then
// `weir cluster decommission 1` moves every replica off node 1.
func TestReassignUnderLoad(t *testing.T) {
	ctx := testContext(t, 4*time.Minute)
	c := startMoveCluster(ctx, t, 4)
	admCl := c.client()
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	retryAdmin(ctx, t, "create topic", func() error {
		resp, err := adm.CreateTopic(ctx, movePartitions, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, moveTopic)
		if err == nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
			err = resp.Err
		}
		return err
	})
	waitAgree(ctx, t, c.nodes[:3], topicLed(moveTopic, movePartitions))
	c.startReaders()
	c.startProducer()
	t.Cleanup(c.stop)
	time.Sleep(3 * time.Second)
	c.waitGroupReading(ctx)

	c.nodes[3].start()
	before := waitAgree(ctx, t, c.nodes, hasBrokers(1, 2, 3, 4))
	plan := movePlan(before)

	// Bad input: a broker that does not exist, a duplicate, fewer replicas than min.insync.replicas,
	// a cancel with nothing to cancel. Each answers its code and nothing moves.
	bad := kadm.AlterPartitionAssignmentsReq{}
	bad.Assign(moveTopic, 6, []int32{1, 2, 9})
	bad.Assign(moveTopic, 7, []int32{1, 1, 2})
	bad.Assign(moveTopic, 8, []int32{1})
	bad.CancelAssign(moveTopic, 9)
	bad.Assign("no-such-topic", 0, []int32{1, 2})
	var badResp kadm.AlterPartitionAssignmentsResponses
	retryAdmin(ctx, t, "bad reassignment", func() (err error) {
		badResp, err = adm.AlterPartitionAssignments(ctx, bad)
		return err
	})
	want := map[string]error{"moving/6": kerr.InvalidReplicaAssignment, "moving/7": kerr.InvalidReplicaAssignment,
		"moving/8": kerr.InvalidReplicaAssignment, "moving/9": kerr.NoReassignmentInProgress,
		"no-such-topic/0": kerr.UnknownTopicOrPartition}
	badResp.Each(func(r kadm.AlterPartitionAssignmentsResponse) {
		k := fmt.Sprintf("%s/%d", r.Topic, r.Partition)
		if !errors.Is(r.Err, want[k]) {
			t.Errorf("%s: %v (%s), want %v", k, r.Err, r.ErrMessage, want[k])
		}
		delete(want, k)
	})
	if len(want) != 0 {
		t.Errorf("no answer for %v", want)
	}
	if after := metadata(ctx, t, c.nodes[0]); clusterView(after) != clusterView(before) {
		t.Errorf("bad input changed the cluster:\n%s\nto\n%s", clusterView(before), clusterView(after))
	}

	setThrottle(ctx, t, adm, "follower.replication.throttled.rate", moveThrottle)
	reassign(ctx, t, adm, moveTopic, plan)
	t.Logf("moving %v", plan)

	// Kill the controller leader while the moves run, then bring it back.
	var moving kadm.ListPartitionReassignmentsResponses
	retryAdmin(ctx, t, "list reassignments", func() (err error) {
		moving, err = adm.ListPartitionReassignments(ctx, kadm.TopicsSet{moveTopic: {0: {}, 1: {}, 2: {}, 3: {}, 4: {}, 5: {}}})
		return err
	})
	if len(moving[moveTopic]) == 0 {
		t.Fatal("no move in progress right after the reassignment: the throttle did not hold it")
	}
	victim := controllerOf(ctx, t, c.nodes, (*node).alive)
	t.Logf("%d moves in progress; killing the controller leader, node %d", len(moving[moveTopic]), victim.id)
	victim.kill()
	time.Sleep(3 * time.Second)
	victim.start()

	// Lift the throttle and wait for every move to complete.
	setThrottle(ctx, t, adm, "follower.replication.throttled.rate", 0)
	done := waitAgree(ctx, t, c.nodes, func(resp *kmsg.MetadataResponse) bool {
		for _, p := range topicOfResp(resp, moveTopic).Partitions {
			if replicas, ok := plan[p.Partition]; ok && !slices.Equal(p.Replicas, replicas) || len(p.ISR) != 3 {
				return false
			}
		}
		return true
	})
	retryAdmin(ctx, t, "list reassignments", func() (err error) {
		moving, err = adm.ListPartitionReassignments(ctx, kadm.TopicsSet{moveTopic: {0: {}, 1: {}, 2: {}, 3: {}, 4: {}, 5: {}}})
		return err
	})
	if len(moving[moveTopic]) != 0 {
		t.Errorf("moves still listed after they completed: %v", moving)
	}

	// Each node holds exactly the directories of the final assignment, except that the restarted node
	// keeps, for the stray grace period (docs/reassignment.md), the directories of moves that completed
	// while it was down: its first image after a restart may be behind the quorum's.
	placed := map[int32][]int32{}
	for _, p := range topicOfResp(done, moveTopic).Partitions {
		placed[p.Partition] = p.Replicas
	}
	graced := strings.Contains(victim.output.String(), "deleting them unless it does within the grace period")
	deadline := time.Now().Add(30 * time.Second)
	for {
		wrong := misplacedDirs(c.nodes, placed, victim, graced)
		if len(wrong) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica directories do not match the assignment: %v", wrong)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// DescribeLogDirs on node 4 names the moved partitions with their data.
	dirs, err := adm.DescribeBrokerLogDirs(ctx, 4, nil)
	if err != nil {
		t.Fatalf("describe log dirs: %v", err)
	}
	for p := range plan {
		found := false
		dirs.Each(func(d kadm.DescribedLogDir) {
			if lp, ok := d.Topics.Lookup(moveTopic, p); ok && lp.Size > 0 {
				found = true
			}
		})
		if !found {
			t.Errorf("node 4's log dirs lack %s-%d: %+v", moveTopic, p, dirs)
		}
	}

	time.Sleep(2 * time.Second)
	c.stop()
	c.checkHistory(ctx, c.nodes[1])

	// weir cluster decommission 1 moves every replica off node 1, internal topics' too.
	c.decommission(ctx, 1, "90s")
	if victim.id != 1 {
		deadline := time.Now().Add(30 * time.Second)
		for p := range int32(movePartitions) {
			dir := filepath.Join(c.nodes[0].dataDir, fmt.Sprintf("%s-%d", moveTopic, p))
			for _, err := os.Stat(dir); err == nil; _, err = os.Stat(dir) {
				if time.Now().After(deadline) {
					t.Fatalf("node 1 still holds %s after its decommission", dir)
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
	}
}

// weir runs the weir command line with args and --brokers naming every node.
func (c *moveCluster) weir(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	var seeds []string
	for _, n := range c.nodes {
		seeds = append(seeds, n.kafkaAddr())
	}
	cmd := exec.CommandContext(ctx, weirBin, append(args, "--brokers", strings.Join(seeds, ","))...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// decommission runs `weir cluster decommission id` and waits until every node's metadata places no
// replica on id.
func (c *moveCluster) decommission(ctx context.Context, id int32, wait string) {
	c.t.Helper()
	out, errOut, err := c.weir(ctx, "cluster", "decommission", fmt.Sprint(id), "--wait", wait)
	if err != nil || !strings.Contains(out, fmt.Sprintf("node %d holds no replicas; it can be stopped", id)) {
		c.t.Fatalf("weir cluster decommission %d: %v\n%s%s", id, err, out, errOut)
	}
	c.t.Logf("weir cluster decommission %d:\n%s", id, out)
	waitAgree(ctx, c.t, c.nodes, func(resp *kmsg.MetadataResponse) bool {
		for _, tp := range resp.Topics {
			for _, p := range tp.Partitions {
				if slices.Contains(p.Replicas, id) {
					return false
				}
			}
		}
		return true
	})
}

// checkHistory stops the clients, reads every partition from offset 0 through reader, and fails the
// test unless every acknowledged record is read exactly once at its offset and the group consumer
// skipped nothing.
func (c *moveCluster) checkHistory(ctx context.Context, reader *node) {
	c.t.Helper()
	c.stop()
	var ops []pollOp
	for p, recs := range reader.readAll(ctx, c.t, moveTopic) {
		for _, r := range recs {
			ops = append(ops, pollOp{reader: "final", partition: p, offset: r.Offset, value: string(r.Value)})
		}
	}
	c.hist.poll(ops...)
	r := checkQueue(&c.hist)
	c.t.Logf("history: %s", r)
	if r.total() != 0 {
		c.t.Errorf("%d anomalies", r.total())
	}
	if r.acked == 0 {
		c.t.Error("nothing acknowledged")
	}
	c.checkGroupGaps(ops)
}

// waitGroupReading waits until the group consumer has read from every partition, so that the faults
// that follow find it running.
func (c *moveCluster) waitGroupReading(ctx context.Context) {
	c.t.Helper()
	for {
		c.groupMu.Lock()
		n := len(c.groupRead)
		c.groupMu.Unlock()
		if n == movePartitions {
			return
		}
		select {
		case <-ctx.Done():
			c.t.Fatalf("the group consumer read %d of %d partitions: %v", n, movePartitions, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// checkGroupGaps fails the test where the group consumer skipped an offset below the highest it read
// of a partition that the final read has.
func (c *moveCluster) checkGroupGaps(final []pollOp) {
	c.groupMu.Lock()
	defer c.groupMu.Unlock()
	for p := range int32(movePartitions) {
		got := c.groupRead[p]
		if len(got) == 0 {
			c.t.Errorf("group consumer read nothing of partition %d", p)
			continue
		}
		top := slices.Max(got)
		for _, op := range final {
			if op.partition == p && op.offset <= top && !slices.Contains(got, op.offset) {
				c.t.Errorf("group consumer skipped %d/%d (read up to %d)", p, op.offset, top)
				break
			}
		}
	}
}

// misplacedDirs lists the replica directories that are where the assignment does not put them, or
// missing where it does. With graced, restarted may keep directories the assignment took from it.
func misplacedDirs(nodes []*node, placed map[int32][]int32, restarted *node, graced bool) []string {
	var wrong []string
	for _, n := range nodes {
		for p, replicas := range placed {
			_, err := os.Stat(filepath.Join(n.dataDir, fmt.Sprintf("%s-%d", moveTopic, p)))
			has, want := err == nil, slices.Contains(replicas, n.id)
			if has && !want && n == restarted && graced {
				continue
			}
			if has != want {
				wrong = append(wrong, fmt.Sprintf("node %d partition %d: has %v, want %v", n.id, p, has, want))
			}
		}
	}
	return wrong
}

// startMoveCluster makes nNodes nodes, the first three the controller voters, and starts those three;
// the others are left for the test to start as brokers that join later.
func startMoveCluster(ctx context.Context, t testing.TB, nNodes int) *moveCluster {
	t.Helper()
	ports := pickPorts(t, nNodes)
	voters := voterList(ports[:3])
	c := &moveCluster{t: t, groupRead: map[int32][]int64{}}
	for i := range nNodes {
		c.nodes = append(c.nodes, newNode(t, nodeOptions{NodeID: int32(i + 1), Ports: ports[i],
			Voters: voters, Args: clusterArgs}))
	}
	for _, n := range c.nodes[:3] {
		n.launch()
	}
	for _, n := range c.nodes[:3] {
		n.waitHealthy()
	}
	waitAgree(ctx, t, c.nodes[:3], hasBrokers(1, 2, 3))
	return c
}

// startLoad creates moveTopic at RF 3 on the first three nodes and starts the readers and the
// producer on it (stopped when the test ends), returning once the group consumer reads and the
// producer has run three seconds.
func (c *moveCluster) startLoad(ctx context.Context) {
	c.t.Helper()
	if err := createTopicRF(ctx, c.t, c.nodes[0], moveTopic, movePartitions, 3); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		c.t.Fatalf("create topic: %v", err)
	}
	waitAgree(ctx, c.t, c.nodes[:3], topicLed(moveTopic, movePartitions))
	c.startReaders()
	c.startProducer()
	c.t.Cleanup(c.stop)
	c.waitGroupReading(ctx)
	time.Sleep(3 * time.Second)
}
