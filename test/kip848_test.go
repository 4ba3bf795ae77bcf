package test

import (
	"context"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kip848Consumer is one weir.e2e.Kip848Consumer process: a Java KafkaConsumer with
// group.protocol=consumer. It follows the process's output: the partitions it owns and the records it
// read and committed.
type kip848Consumer struct {
	*lineProcess
	owned map[int]bool
	reads []string // "partition/offset value"
}

// startKip848Consumer starts cmd, a consumer program printing what weir.e2e.Kip848Consumer prints.
func startKip848Consumer(t *testing.T, cmd *exec.Cmd, name string) *kip848Consumer {
	t.Helper()
	c := &kip848Consumer{owned: map[int]bool{}}
	c.lineProcess = &lineProcess{name: name}
	c.handle = func(f []string) bool {
		switch f[0] {
		case "assigned", "revoked", "lost":
			fmt.Fprintf(&c.log, "%s\n", strings.Join(f, " "))
			for _, s := range f[1:] {
				p, _ := strconv.Atoi(s)
				c.owned[p] = f[0] == "assigned"
			}
		case "read":
			if len(f) == 4 {
				c.reads = append(c.reads, f[1]+"/"+f[2]+" "+f[3])
			}
		default:
			return false
		}
		return true
	}
	c.start(t, cmd)
	return c
}

// ownedPartitions returns the partitions the consumer owns now.
func (c *kip848Consumer) ownedPartitions() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for p, ok := range c.owned {
		if ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

func (c *kip848Consumer) readValues() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.reads)
}

// waitKip848 polls cond every 100 ms until ctx ends; then it fails with the group's description.
func waitKip848(ctx context.Context, t *testing.T, cl *kgo.Client, group, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			req := kmsg.NewPtrConsumerGroupDescribeRequest()
			req.Groups = []string{group}
			resp, err := req.RequestWith(context.Background(), cl)
			if err == nil {
				for _, g := range resp.Groups {
					t.Logf("group %s: %s epoch %d assignment epoch %d", g.Group, g.State, g.Epoch, g.AssignmentEpoch)
					for _, m := range g.Members {
						t.Logf("member %s %s epoch %d subscribed %v owns %v target %v", m.ClientID, m.MemberID, m.MemberEpoch,
							m.SubscribedTopics, m.Assignment.TopicPartitions, m.TargetAssignment.TopicPartitions)
					}
				}
			}
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestJavaKip848Churn runs Java KafkaConsumers with group.protocol=consumer (KIP-848) against a weir
// process: three consumers split a topic of six partitions two each; then one leaves and another joins
// while records keep coming on every partition. Each consumer commits what it read before it polls
// again, so every record must be read exactly once: none lost, none read twice across the partitions'
// moves. At the end the group has committed the end offsets.
func TestJavaKip848Churn(t *testing.T) {
	cp := javaClasspath(t)
	kip848Churn(t, "kip848", func(ctx context.Context, bootstrap, topic, group, name string) *exec.Cmd {
		return javaCommand(ctx, cp, "Kip848Consumer", bootstrap, topic, group, name)
	})
}

// TestLibrdkafkaKip848Churn is TestJavaKip848Churn with librdkafka's consumer (confluent-kafka,
// testdata/confluent_kip848_consumer.py) and group.protocol=consumer.
func TestLibrdkafkaKip848Churn(t *testing.T) {
	requireConfluentKafka(t)
	kip848Churn(t, "kip848-rdkafka", func(ctx context.Context, bootstrap, topic, group, name string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, confluentPython, "testdata/confluent_kip848_consumer.py", bootstrap, topic, group, name)
		cmd.WaitDelay = 5 * time.Second
		return cmd
	})
}

// kip848Churn runs the churn of TestJavaKip848Churn with consumers that consumer starts.
func kip848Churn(t *testing.T, topic string, consumer func(ctx context.Context, bootstrap, topic, group, name string) *exec.Cmd) {
	ctx := testContext(t, 2*time.Minute)
	n := startNode(t, nodeOptions{Args: []string{"--group-initial-rebalance-delay", "0s"}})
	group := topic + "-group"
	command := func(name string) *exec.Cmd { return consumer(ctx, n.kafkaAddr(), topic, group, name) }
	n.createTopic(ctx, t, topic, 6, nil)
	prod := n.client(t, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	var produced atomic.Int64
	produce := func(count int) {
		recs := make([]*kgo.Record, count)
		base := produced.Add(int64(count)) - int64(count)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v%06d", base+int64(i))}
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Error(err)
		}
	}
	// trickle produces 6 records every 20 ms until stopped, so that records keep arriving on every
	// partition while partitions move: a partition given to a new owner before the old one revoked it
	// would be read by both.
	trickle := func() (stop func()) {
		done, stopped := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(stopped)
			for {
				select {
				case <-done:
					return
				case <-time.After(20 * time.Millisecond):
					produce(6)
				}
			}
		}()
		return func() { close(done); <-stopped }
	}
	consumers := map[string]*kip848Consumer{}
	start := func(name string) {
		consumers[name] = startKip848Consumer(t, command(name), name)
	}
	running := func(names ...string) func() bool {
		return func() bool {
			all := map[int]bool{}
			for _, name := range names {
				ps := consumers[name].ownedPartitions()
				if len(ps) != 2 {
					return false
				}
				for _, p := range ps {
					all[p] = true
				}
			}
			return len(all) == 6
		}
	}
	distinct := func() int {
		seen := map[string]bool{}
		for _, c := range consumers {
			for _, r := range c.readValues() {
				seen[strings.Fields(r)[1]] = true
			}
		}
		return len(seen)
	}

	for _, name := range []string{"c1", "c2", "c3"} {
		start(name)
	}
	waitKip848(ctx, t, prod, group, "c1, c2 and c3 owning two partitions each", running("c1", "c2", "c3"))
	produce(300)
	waitKip848(ctx, t, prod, group, "300 records read", func() bool { return distinct() == 300 })

	stopTrickle := trickle()
	consumers["c1"].stop(ctx, t)
	waitKip848(ctx, t, prod, group, "c2 and c3 owning three partitions each", func() bool {
		return len(consumers["c2"].ownedPartitions()) == 3 && len(consumers["c3"].ownedPartitions()) == 3
	})
	start("c4")
	waitKip848(ctx, t, prod, group, "c2, c3 and c4 owning two partitions each", running("c2", "c3", "c4"))
	stopTrickle()
	produce(300)
	total := int(produced.Load())
	waitKip848(ctx, t, prod, group, fmt.Sprintf("%d records read", total), func() bool { return distinct() == total })
	for _, name := range []string{"c2", "c3", "c4"} {
		consumers[name].stop(ctx, t)
	}

	readBy := map[string][]string{}
	for _, name := range slices.Sorted(maps.Keys(consumers)) {
		for _, r := range consumers[name].readValues() {
			readBy[r] = append(readBy[r], name)
		}
		t.Logf("%s read %d records", name, len(consumers[name].readValues()))
	}
	for r, by := range readBy {
		if len(by) > 1 {
			t.Errorf("record %s read by %v", r, by)
		}
	}
	if len(readBy) != total {
		t.Errorf("%d records read, %d produced", len(readBy), total)
	}
	if len(consumers["c4"].readValues()) == 0 {
		t.Errorf("c4, which joined late, read nothing")
	}
	adm := n.admin(t)
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for p, e := range ends[topic] {
		if c, _ := committed.Lookup(topic, p); c.At != e.Offset {
			t.Errorf("partition %d committed at %d, ends at %d", p, c.At, e.Offset)
		}
	}
}
