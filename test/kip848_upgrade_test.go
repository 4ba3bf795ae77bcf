package test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// classicConsumer is a franz-go consumer of the classic group protocol (cooperative-sticky) that
// commits what each poll returned before the group may rebalance (kgo.BlockRebalanceOnPoll), so a
// partition it gives up has nothing read and not committed. It records what it owns and what it read.
type classicConsumer struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	owned map[int32]bool
	reads []string // "partition/offset value", as kip848Consumer keeps them
}

func startClassicConsumer(t *testing.T, n *node, topic, group, name string) *classicConsumer {
	t.Helper()
	c := &classicConsumer{owned: map[int32]bool{}, done: make(chan struct{})}
	set := func(ps map[string][]int32, owned bool) {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, p := range ps[topic] {
			c.owned[p] = owned
		}
	}
	c.cl = n.newClient(t, kgo.ClientID(name), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { set(ps, true) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { set(ps, false) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { set(ps, false) }))
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			recs := c.cl.PollRecords(ctx, 100).Records()
			if len(recs) > 0 {
				if err := c.cl.CommitRecords(ctx, recs...); err != nil {
					if ctx.Err() == nil {
						t.Errorf("%s: commit: %v", name, err)
					}
				} else {
					c.mu.Lock()
					for _, r := range recs {
						c.reads = append(c.reads, fmt.Sprintf("%d/%d %s", r.Partition, r.Offset, r.Value))
					}
					c.mu.Unlock()
				}
			}
			c.cl.AllowRebalance()
		}
	}()
	t.Cleanup(c.close)
	return c
}

// close stops polling and leaves the group (LeaveGroup); it may be called more than once.
func (c *classicConsumer) close() {
	c.cancel()
	<-c.done
	c.cl.Close()
}

func (c *classicConsumer) ownedPartitions() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for p, ok := range c.owned {
		if ok {
			out = append(out, int(p))
		}
	}
	slices.Sort(out)
	return out
}

func (c *classicConsumer) readValues() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.reads)
}

// upgradeMember is the classic consumer of an upgrade test: franz-go's (classicConsumer) or Java's
// (kip848Consumer with weir.group.protocol=classic).
type upgradeMember interface {
	ownedPartitions() []int
	readValues() []string
}

// TestJavaKip848Upgrade runs Kafka's online upgrade of a consumer group against a weir process: a
// classic franz-go consumer (cooperative-sticky) owns a topic's six partitions; a Java KafkaConsumer
// 4.4 with group.protocol=consumer joins the same group, which makes it a KIP-848 group keeping the
// classic member, and the two split the partitions three and three while both go on consuming; then
// the classic member leaves and the Java member takes all six. Records keep coming on every partition
// while partitions move, each consumer commits what it read before it polls again, and every record
// is read exactly once; the group ends committed at the end offsets.
func TestJavaKip848Upgrade(t *testing.T) {
	kip848Upgrade(t, "kip848-upgrade", false, func(ctx context.Context, n *node, _, topic, group string) (upgradeMember, func()) {
		c := startClassicConsumer(t, n, topic, group, "classic")
		return c, c.close
	})
}

// TestJavaKip848UpgradeFromJavaClassic is TestJavaKip848Upgrade with a Java KafkaConsumer of the
// classic protocol as the classic member: its default assignors (range, then cooperative-sticky) make
// it an eager member, which gives up all its partitions before each rejoin.
func TestJavaKip848UpgradeFromJavaClassic(t *testing.T) {
	kip848Upgrade(t, "kip848-upgrade-java", false, javaClassicStarter(t))
}

// javaClassicStarter starts the classic member of kip848Upgrade as a Java KafkaConsumer of the classic
// protocol.
func javaClassicStarter(t *testing.T) func(ctx context.Context, n *node, cp, topic, group string) (upgradeMember, func()) {
	return func(ctx context.Context, n *node, cp, topic, group string) (upgradeMember, func()) {
		cmd := javaCommand(ctx, cp, "Kip848Consumer", n.kafkaAddr(), topic, group, "classic")
		cmd.Args = slices.Insert(cmd.Args, 1, "-Dweir.group.protocol=classic")
		c := startKip848Consumer(t, cmd, "classic")
		return c, func() { c.stop(ctx, t) }
	}
}

// TestJavaKip848Downgrade is TestJavaKip848Upgrade with the Java consumer leaving first: the group,
// whose members are then all classic, becomes a classic group again, and the classic consumer takes
// all six partitions.
func TestJavaKip848Downgrade(t *testing.T) {
	kip848Upgrade(t, "kip848-downgrade", true, func(ctx context.Context, n *node, _, topic, group string) (upgradeMember, func()) {
		c := startClassicConsumer(t, n, topic, group, "classic")
		return c, c.close
	})
}

// TestJavaKip848DowngradeToJavaClassic is TestJavaKip848Downgrade with the Java classic consumer of
// TestJavaKip848UpgradeFromJavaClassic.
func TestJavaKip848DowngradeToJavaClassic(t *testing.T) {
	kip848Upgrade(t, "kip848-downgrade-java", true, javaClassicStarter(t))
}

// kip848Upgrade runs the upgrade of TestJavaKip848Upgrade with the classic member startClassic starts;
// its leave function makes it leave the group. With javaLeavesFirst, the Java member leaves first.
func kip848Upgrade(t *testing.T, topic string, javaLeavesFirst bool, startClassic func(ctx context.Context, n *node, cp, topic, group string) (upgradeMember, func())) {
	cp := javaClasspath(t)
	ctx := testContext(t, 3*time.Minute)
	n := startNode(t, nodeOptions{Args: []string{"--group-initial-rebalance-delay", "0s",
		"--group-consumer-heartbeat-interval", "1s"}})
	group := topic + "-group"
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
	var java *kip848Consumer
	classic, leave := startClassic(ctx, n, cp, topic, group)
	reads := func() map[string][]string {
		by := map[string][]string{}
		for _, r := range classic.readValues() {
			by[r] = append(by[r], "classic")
		}
		if java != nil {
			for _, r := range java.readValues() {
				by[r] = append(by[r], "java")
			}
		}
		return by
	}
	distinct := func() int {
		seen := map[string]bool{}
		for r := range reads() {
			seen[strings.Fields(r)[1]] = true
		}
		return len(seen)
	}
	waitKip848(ctx, t, prod, group, "the classic consumer owning six partitions", func() bool {
		return len(classic.ownedPartitions()) == 6
	})
	produce(300)
	waitKip848(ctx, t, prod, group, "300 records read", func() bool { return distinct() == 300 })

	stopTrickle := trickle()
	java = startKip848Consumer(t, javaCommand(ctx, cp, "Kip848Consumer", n.kafkaAddr(), topic, group, "java"), "java")
	waitKip848(ctx, t, prod, group, "the classic and the Java consumer owning three partitions each", func() bool {
		c, j := classic.ownedPartitions(), java.ownedPartitions()
		all := map[int]bool{}
		for _, p := range append(c, j...) {
			all[p] = true
		}
		return len(c) == 3 && len(j) == 3 && len(all) == 6
	})
	members := mixedMembers(ctx, t, prod, group)
	if !slices.Equal(members, []string{"classic:0", "java:1"}) {
		t.Errorf("ConsumerGroupDescribe shows members %v, want the classic one of type 0 and the Java one of type 1", members)
	}
	stopTrickle()
	produce(300)
	waitKip848(ctx, t, prod, group, fmt.Sprintf("%d records read", produced.Load()), func() bool {
		return distinct() == int(produced.Load())
	})
	javaBefore := len(java.readValues())

	stopTrickle = trickle()
	first, last, stay := leave, func() { java.stop(ctx, t) }, upgradeMember(java)
	if javaLeavesFirst {
		first, last, stay = last, leave, classic
	}
	first()
	waitKip848(ctx, t, prod, group, "the consumer left alone owning six partitions", func() bool {
		return len(stay.ownedPartitions()) == 6
	})
	stopTrickle()
	produce(300)
	total := int(produced.Load())
	waitKip848(ctx, t, prod, group, fmt.Sprintf("%d records read", total), func() bool { return distinct() == total })
	if javaLeavesFirst {
		listed, err := n.admin(t).ListGroups(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if l := listed[group]; l.GroupType != "classic" || l.State != "Stable" {
			t.Errorf("after the Java consumer left, ListGroups shows %+v; want a Stable classic group", l)
		}
	}
	last()

	by := reads()
	for _, r := range slices.Sorted(maps.Keys(by)) {
		if len(by[r]) > 1 {
			t.Errorf("record %s read by %v", r, by[r])
		}
	}
	if len(by) != total {
		t.Errorf("%d records read, %d produced", len(by), total)
	}
	t.Logf("classic read %d records, java %d (%d while both were in the group)", len(classic.readValues()),
		len(java.readValues()), javaBefore)
	if javaBefore == 0 {
		t.Errorf("the Java consumer read nothing while it shared the group with the classic one")
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

// mixedMembers is the group's members as ConsumerGroupDescribe shows them, "client id:member type",
// sorted.
func mixedMembers(ctx context.Context, t *testing.T, cl *kgo.Client, group string) []string {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, g := range resp.Groups {
		for _, m := range g.Members {
			out = append(out, fmt.Sprintf("%s:%d", m.ClientID, m.MemberType))
		}
	}
	slices.Sort(out)
	return out
}

// TestJavaKip848StaticRollingUpgrade is the rolling upgrade of static members: two Java KafkaConsumers
// of the classic protocol with group.instance.id i1 and i2 split a topic's six partitions; each in turn
// is stopped (a static member does not leave the group when it closes) and restarted with
// group.protocol=consumer and the same instance id, which takes the classic member's place and its
// partitions; the group ends a KIP-848 group of the two. Records keep coming while partitions move,
// and every record is read exactly once.
func TestJavaKip848StaticRollingUpgrade(t *testing.T) {
	cp := javaClasspath(t)
	ctx := testContext(t, 3*time.Minute)
	n := startNode(t, nodeOptions{Args: []string{"--group-initial-rebalance-delay", "0s",
		"--group-consumer-heartbeat-interval", "1s"}})
	const topic, group = "kip848-static", "kip848-static-group"
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
	var consumers []*kip848Consumer
	start := func(name, protocol, instance string) *kip848Consumer {
		cmd := javaCommand(ctx, cp, "Kip848Consumer", n.kafkaAddr(), topic, group, name)
		cmd.Args = slices.Insert(cmd.Args, 1, "-Dweir.group.protocol="+protocol, "-Dweir.group.instance.id="+instance)
		c := startKip848Consumer(t, cmd, name)
		consumers = append(consumers, c)
		return c
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
	split := func(a, b *kip848Consumer) func() bool {
		return func() bool {
			all := map[int]bool{}
			for _, p := range append(a.ownedPartitions(), b.ownedPartitions()...) {
				all[p] = true
			}
			return len(a.ownedPartitions()) == 3 && len(b.ownedPartitions()) == 3 && len(all) == 6
		}
	}
	c1, c2 := start("classic-i1", "classic", "i1"), start("classic-i2", "classic", "i2")
	waitKip848(ctx, t, prod, group, "the classic consumers owning three partitions each", split(c1, c2))
	produce(300)
	waitKip848(ctx, t, prod, group, "300 records read", func() bool { return distinct() == 300 })

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
	c1.stop(ctx, t)
	k1 := start("consumer-i1", "consumer", "i1")
	waitKip848(ctx, t, prod, group, "consumer-i1 and classic-i2 owning three partitions each", split(k1, c2))
	if m := mixedMembers(ctx, t, prod, group); !slices.Equal(m, []string{"classic-i2:0", "consumer-i1:1"}) {
		t.Errorf("ConsumerGroupDescribe shows members %v, want classic-i2 (type 0) and consumer-i1 (type 1)", m)
	}
	c2.stop(ctx, t)
	k2 := start("consumer-i2", "consumer", "i2")
	waitKip848(ctx, t, prod, group, "consumer-i1 and consumer-i2 owning three partitions each", split(k1, k2))
	close(done)
	<-stopped
	produce(300)
	total := int(produced.Load())
	waitKip848(ctx, t, prod, group, fmt.Sprintf("%d records read", total), func() bool { return distinct() == total })
	k1.stop(ctx, t)
	k2.stop(ctx, t)

	readBy := map[string][]string{}
	for _, c := range consumers {
		for _, r := range c.readValues() {
			readBy[r] = append(readBy[r], c.name)
		}
		t.Logf("%s read %d records", c.name, len(c.readValues()))
	}
	for r, by := range readBy {
		if len(by) > 1 {
			t.Errorf("record %s read by %v", r, by)
		}
	}
	if len(readBy) != total {
		t.Errorf("%d records read, %d produced", len(readBy), total)
	}
}
