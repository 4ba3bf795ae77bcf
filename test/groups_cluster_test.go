package test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupClusterArgs are the group coordinator's settings of the group cluster tests: three offsets
// partitions (spread over the three nodes), replication factor 3, no initial rebalance delay, and
// short session timeouts allowed.
var groupClusterArgs = []string{
	"--offsets-topic-num-partitions", "3",
	"--offsets-topic-replication-factor", "3",
	"--group-initial-rebalance-delay", "0s",
	"--group-min-session-timeout", "1s",
}

// startGroupCluster starts three voters with clusterArgs, groupClusterArgs and extra, and waits until
// every node sees the three brokers.
func startGroupCluster(ctx context.Context, t testing.TB, extra ...string) []*node {
	t.Helper()
	ports := pickPorts(t, 3)
	voters := voterList(ports)
	nodes := make([]*node, len(ports))
	for i := range nodes {
		nodes[i] = newNode(t, nodeOptions{
			NodeID: int32(i + 1), Ports: ports[i], Voters: voters,
			Args: slices.Concat(clusterArgs, groupClusterArgs, extra),
		})
	}
	for _, n := range nodes {
		n.launch()
	}
	for _, n := range nodes {
		n.waitHealthy()
	}
	waitAgree(ctx, t, nodes, hasBrokers(1, 2, 3))
	return nodes
}

// createLedTopic creates an RF=3 topic through the first node and waits until every node sees each
// of its partitions with a leader.
func createLedTopic(ctx context.Context, t testing.TB, nodes []*node, topic string, partitions int32) {
	t.Helper()
	if err := createTopicRF(ctx, t, nodes[0], topic, partitions, 3); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	waitAgree(ctx, t, nodes, topicLed(topic, partitions))
}

// topicLed is a Metadata check: topic has its partitions, each with a leader.
func topicLed(topic string, partitions int32) func(*kmsg.MetadataResponse) bool {
	return func(resp *kmsg.MetadataResponse) bool {
		for _, tp := range resp.Topics {
			if tp.Topic == nil || *tp.Topic != topic || len(tp.Partitions) != int(partitions) {
				continue
			}
			for _, p := range tp.Partitions {
				if p.Leader < 0 {
					return false
				}
			}
			return true
		}
		return false
	}
}

// findCoordinator asks node n (and only n) for group's coordinator, retrying retriable errors
// until ctx ends.
func findCoordinator(ctx context.Context, t testing.TB, n *node, group string) int32 {
	t.Helper()
	return askCoordinator(ctx, t, n, 0, group)
}

// askCoordinator asks node n (and only n) for the coordinator of key (keyType 0: a group, 1: a
// transactional id), retrying retriable errors and connection errors until ctx ends.
func askCoordinator(ctx context.Context, t testing.TB, n *node, keyType int8, key string) int32 {
	t.Helper()
	cl := n.newClient(t)
	defer cl.Close()
	seed := cl.SeedBrokers()[0]
	for {
		// The key in both shapes: up to v3 one key, from v4 a list (the broker's own client sends
		// the version the node advertises, without kgo's sharding).
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey, req.CoordinatorKeys = key, []string{key}
		req.CoordinatorType = keyType
		resp, err := seed.Request(ctx, req)
		if err == nil {
			r := resp.(*kmsg.FindCoordinatorResponse)
			code, node := r.ErrorCode, r.NodeID
			if len(r.Coordinators) == 1 {
				code, node = r.Coordinators[0].ErrorCode, r.Coordinators[0].NodeID
			}
			if err = kerr.ErrorForCode(code); err == nil {
				return node
			}
		}
		// Kafka error codes that are not retriable fail at once; connection errors are retried.
		var kafkaErr *kerr.Error
		if ctx.Err() != nil || errors.As(err, &kafkaErr) && !kafkaErr.Retriable {
			t.Fatalf("node %d: FindCoordinator(type %d, %s): %v", n.id, keyType, key, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// agreedCoordinator asks every running node for group's coordinator until they all give the same
// one and accept (nil: any) takes it, and returns it.
func agreedCoordinator(ctx context.Context, t testing.TB, nodes []*node, group string, accept func(int32) bool) int32 {
	t.Helper()
	for {
		var got []int32
		for _, n := range nodes {
			if n.alive() {
				got = append(got, findCoordinator(ctx, t, n, group))
			}
		}
		same := true
		for _, id := range got {
			same = same && id == got[0]
		}
		if same && (accept == nil || accept(got[0])) {
			return got[0]
		}
		if ctx.Err() != nil {
			t.Fatalf("nodes do not agree on an acceptable coordinator of %s: %v", group, got)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// groupReads records what the members of one group read: per partition and offset, how many times
// and by which member, and separately what was read after the coordinator was killed.
type groupReads struct {
	mu        sync.Mutex
	times     map[int32]map[int64]int
	afterKill map[int32][]int64
	killed    bool
	errs      []string
}

func newGroupReads() *groupReads {
	return &groupReads{times: map[int32]map[int64]int{}, afterKill: map[int32][]int64{}}
}

func (g *groupReads) add(recs []*kgo.Record) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range recs {
		if g.times[r.Partition] == nil {
			g.times[r.Partition] = map[int64]int{}
		}
		g.times[r.Partition][r.Offset]++
		if g.killed {
			g.afterKill[r.Partition] = append(g.afterKill[r.Partition], r.Offset)
		}
	}
}

func (g *groupReads) markKilled() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.killed = true
}

func (g *groupReads) noteErr(format string, args ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.errs) < 50 {
		g.errs = append(g.errs, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
	}
}

// runMember polls and commits (after processing: at-least-once) until ctx ends, recording reads.
func runMember(ctx context.Context, cl *kgo.Client, name string, reads *groupReads, wg *sync.WaitGroup) {
	defer wg.Done()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		fs.EachError(func(topic string, p int32, err error) {
			reads.noteErr("%s: fetch %s[%d]: %v", name, topic, p, err)
		})
		recs := fs.Records()
		reads.add(recs)
		if len(recs) == 0 {
			continue
		}
		if err := cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
			reads.noteErr("%s: commit: %v", name, err)
		}
	}
}

// produceNumbered writes count records with acks=all through a client seeded with every node.
func produceNumbered(ctx context.Context, t testing.TB, cl *kgo.Client, topic string, from, count int) {
	t.Helper()
	recs := make([]*kgo.Record, count)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(from + i))}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce %d records from %d: %v", count, from, err)
	}
}

// waitCommitted polls the group's committed offsets (through any node) until every partition of
// topic has its end offset committed, and returns the committed offsets.
func waitCommitted(ctx context.Context, t testing.TB, adm *kadm.Client, group, topic string, reads *groupReads) map[int32]int64 {
	t.Helper()
	var last string
	for {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		var committed kadm.OffsetResponses
		if err == nil {
			committed, err = adm.FetchOffsets(ctx, group)
			if err == nil {
				err = committed.Error()
			}
		}
		if err == nil {
			out := map[int32]int64{}
			done := true
			ends.Each(func(o kadm.ListedOffset) {
				c, ok := committed.Lookup(topic, o.Partition)
				if !ok {
					c.At = 0
				}
				if c.At != o.Offset {
					done = false
				}
				out[o.Partition] = c.At
			})
			if done {
				return out
			}
			last = fmt.Sprintf("committed %v, end offsets %v", out, ends)
		} else if ctx.Err() == nil {
			last = err.Error()
		}
		if ctx.Err() != nil {
			reads.mu.Lock()
			defer reads.mu.Unlock()
			read := 0
			for _, offs := range reads.times {
				read += len(offs)
			}
			t.Fatalf("group %s never committed the end of %s: %s; %d offsets read; member errors:\n%s",
				group, topic, last, read, strings.Join(reads.errs, "\n"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestGroupCoordinatorFailover: a two-member franz-go group consumes an RF=3 topic on three nodes
// and commits; the node coordinating the group is killed with SIGKILL; every node then names the
// same new coordinator, the group goes on there from its committed offsets (nothing committed is
// read again, nothing is skipped), and the killed node comes back and the group still works.
func TestGroupCoordinatorFailover(t *testing.T) { groupCoordinatorFailover(t, "gc", nil) }

// TestGroupCoordinatorFailoverKIP848 is TestGroupCoordinatorFailover with franz-go's KIP-848 consumer
// (ServerSideBalancer): the new coordinator does not know the members (weir keeps a KIP-848 group's
// membership in memory only), so they rejoin on UNKNOWN_MEMBER_ID and go on from the committed
// offsets.
func TestGroupCoordinatorFailoverKIP848(t *testing.T) {
	kip848 := []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer())}
	groupCoordinatorFailover(t, "gc848", map[string][]kgo.Opt{"a": kip848, "b": kip848})
}

// TestGroupCoordinatorFailoverMixed is TestGroupCoordinatorFailover with a classic member and a
// KIP-848 one in one group (docs/groups.md, "Online upgrade and downgrade"): on the new coordinator
// both rejoin, the group is mixed again and goes on from the committed offsets.
func TestGroupCoordinatorFailoverMixed(t *testing.T) {
	groupCoordinatorFailover(t, "gcmix", map[string][]kgo.Opt{"b": {kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer())}})
}

// groupCoordinatorFailover runs the failover with topic and group names from prefix and the members'
// extra options, by member name ("a", "b"); with any, the split is read from ConsumerGroupDescribe.
func groupCoordinatorFailover(t *testing.T, prefix string, memberOpts map[string][]kgo.Opt) {
	ctx := testContext(t, 90*time.Second)
	nodes := startGroupCluster(ctx, t)
	topic, group := prefix+"-data", prefix+"-group"
	createLedTopic(ctx, t, nodes, topic, 6)
	coord := agreedCoordinator(ctx, t, nodes, group, nil)
	offsets := topicOf(t, waitAgree(ctx, t, nodes, hasBrokers(1, 2, 3)), "__consumer_offsets")
	for _, p := range offsets.Partitions {
		if len(p.Replicas) != 3 {
			t.Fatalf("__consumer_offsets-%d has replicas %v, want three", p.Partition, p.Replicas)
		}
	}

	var seeds []string
	for _, n := range nodes {
		seeds = append(seeds, n.kafkaAddr())
	}
	base := []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
	}
	prod, err := kgo.NewClient(append(base, kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	admCl, err := kgo.NewClient(base...)
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)

	reads := newGroupReads()
	mctx, stopMembers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var assignedMu sync.Mutex
	assigned := map[string]int{}
	var members []*kgo.Client
	for _, name := range []string{"a", "b"} {
		opts := append(slices.Clone(base), memberOpts[name]...)
		cl, err := kgo.NewClient(append(opts,
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(300*time.Millisecond),
			kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(300*time.Millisecond),
			kgo.RebalanceTimeout(10*time.Second), kgo.ClientID("member-"+name),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
				assignedMu.Lock()
				assigned[name] = len(a[topic])
				assignedMu.Unlock()
			}),
			kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, _ map[string][]int32) {
				if err := cl.CommitUncommittedOffsets(ctx); err != nil {
					reads.noteErr("member-%s: commit on revoke: %v", name, err)
				}
				assignedMu.Lock()
				assigned[name] = 0
				assignedMu.Unlock()
			}),
		)...)
		if err != nil {
			t.Fatal(err)
		}
		members = append(members, cl)
		wg.Add(1)
		go runMember(mctx, cl, "member-"+name, reads, &wg)
	}
	defer func() {
		stopMembers()
		wg.Wait()
		for _, cl := range members {
			cl.Close()
		}
	}()
	// Both members hold partitions before anything is produced, so that no rebalance moves a
	// partition read but not yet committed.
	for {
		assignedMu.Lock()
		split := assigned["a"] > 0 && assigned["b"] > 0 && assigned["a"]+assigned["b"] == 6
		assignedMu.Unlock()
		if len(memberOpts) > 0 {
			// The callbacks of an incremental rebalance name only what changed: ask the coordinator.
			split = consumerGroupSplit(ctx, admCl, group, 2, 6)
		}
		if split {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the two members never split the partitions: %v; errors: %v", assigned, reads.errs)
		}
		time.Sleep(50 * time.Millisecond)
	}

	produceNumbered(ctx, t, prod, topic, 0, 300)
	before := waitCommitted(ctx, t, adm, group, topic, reads)
	victim := nodes[coord-1]
	t.Logf("group %s coordinated by node %d; committed %v; killing it", group, coord, before)
	reads.markKilled()
	killedAt := time.Now()
	victim.kill()

	newCoord := agreedCoordinator(ctx, t, nodes, group, func(id int32) bool { return id != coord })
	produceNumbered(ctx, t, prod, topic, 300, 300)
	after := waitCommitted(ctx, t, adm, group, topic, reads)
	t.Logf("node %d took over the group; all of 600 records committed %v after the kill: %v", newCoord, time.Since(killedAt).Round(time.Millisecond), after)

	// The restarted node catches up, and the preferred-leader rebalance gives it back the leadership of
	// the group's offsets partition: the group moves back to it.
	victim.restart()
	agreedCoordinator(ctx, t, nodes, group, func(id int32) bool { return id == coord })
	produceNumbered(ctx, t, prod, topic, 600, 120)
	final := waitCommitted(ctx, t, adm, group, topic, reads)
	t.Logf("node %d came back and coordinates the group again: committed %v", coord, final)
	stopMembers()
	wg.Wait()

	reads.mu.Lock()
	defer reads.mu.Unlock()
	total := int64(0)
	for p, end := range final {
		total += end
		for off := range end {
			if reads.times[p][off] == 0 {
				t.Errorf("%s[%d] offset %d never read: skipped", topic, p, off)
			}
		}
		for _, off := range reads.afterKill[p] {
			if off < before[p] {
				t.Errorf("%s[%d] offset %d read again after the kill, below the committed %d", topic, p, off, before[p])
			}
		}
	}
	if total != 720 {
		t.Errorf("committed offsets %v add up to %d records, want 720", final, total)
	}
	if t.Failed() {
		t.Logf("member errors:\n%s", strings.Join(reads.errs, "\n"))
	}
}

// consumerGroupSplit reports whether ConsumerGroupDescribe shows the KIP-848 group Stable with n members
// that own partitions partitions between them, each some.
func consumerGroupSplit(ctx context.Context, cl *kgo.Client, group string, n, partitions int) bool {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Groups) != 1 {
		return false
	}
	g := resp.Groups[0]
	owned := 0
	for _, m := range g.Members {
		mine := 0
		for _, tp := range m.Assignment.TopicPartitions {
			mine += len(tp.Partitions)
		}
		if mine == 0 {
			return false
		}
		owned += mine
	}
	return g.ErrorCode == 0 && g.State == "Stable" && len(g.Members) == n && owned == partitions
}

// TestGroupKcatThroughFollower runs `kcat -G` bootstrapped from a node that does not coordinate the
// group: FindCoordinator sends it to the coordinator, it reads everything and commits, and a second
// run finds nothing new.
func TestGroupKcatThroughFollower(t *testing.T) {
	requireTool(t, "kcat")
	ctx := testContext(t, 60*time.Second)
	nodes := startGroupCluster(ctx, t)
	const topic, group = "gk-data", "gk-group"
	createLedTopic(ctx, t, nodes, topic, 3)
	kcat(ctx, t, nodes[0], seqLines(100), "-P", "-t", topic, "-X", "acks=all")
	coord := agreedCoordinator(ctx, t, nodes, group, nil)
	other := nodes[coord%3]
	t.Logf("group %s coordinated by node %d; kcat bootstraps from node %d", group, coord, other.id)

	got := kcatGroup(t, other, group, topic)
	if len(got) != 100 {
		t.Fatalf("kcat -G through node %d read %d records, want 100", other.id, len(got))
	}
	seen := map[string]bool{}
	for _, v := range got {
		if seen[v] {
			t.Fatalf("record %q read twice", v)
		}
		seen[v] = true
	}
	if got := kcatGroup(t, other, group, topic); len(got) != 0 {
		t.Fatalf("second kcat -G read %d records, want 0 (all committed): %v", len(got), got)
	}
}
