package test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/sharestate"
)

// TestJavaShareCoordinatorKill is issue 17's six-consumer run with a coordinator kill -9: three
// nodes with share groups, a topic of two partitions at RF 3, six Java KafkaShareConsumers
// (weir.e2e.ShareConsumer: reject the values ending in "r", release those ending in "l" on their first
// delivery, accept the rest, commitSync) in a group whose coordinator also coordinates the state of
// the group's partition 0 and leads no data partition, so that its kill -9 takes both coordinators
// while the data leaders serve on. The node is killed while records flow, and restarted. Every
// record must end with exactly one confirmed finishing acknowledgement (accept, or reject for an "r"),
// an "l" record accepted only at a delivery count of 2 or more, and nothing confirmed twice: an
// acknowledgement the broker confirmed is never lost to the kill. Acknowledgements refused during the
// kill are allowed; their records come back once their locks expire.
func TestJavaShareCoordinatorKill(t *testing.T) {
	cp := javaClasspath(t)
	ctx := testContext(t, 4*time.Minute)
	nodes := startGroupCluster(ctx, t, "--share-groups")
	const topic = "share-java-kill"
	createLedTopic(ctx, t, nodes, topic, 2)
	meta := waitAgree(ctx, t, nodes, fullISR(topic))
	id := topicOf(t, meta, topic).TopicID
	dataLeaders := leaders(t, meta, topic)

	// A probe's first fetch creates __share_group_state and __consumer_offsets; then the group is
	// chosen.
	probe := newShareMember(t, nodes, "probe", "sg-probe", topic)
	pctx, stopProbe := context.WithCancel(ctx)
	var probeWG sync.WaitGroup
	probeWG.Go(func() { probe.run(pctx, newShareHistory(), func(int32) {}) })
	meta = waitAgree(ctx, t, nodes, fullISR(topic, sharestate.StateTopic, group.OffsetsTopic))
	stopProbe()
	probeWG.Wait()
	probe.cl.Close()
	groupID, coord := pickCoordinatedShareGroup(t, id, dataLeaders, leaders(t, meta, sharestate.StateTopic), leaders(t, meta, group.OffsetsTopic))

	var seeds []string
	for _, n := range nodes {
		seeds = append(seeds, n.kafkaAddr())
	}
	consumers := make([]*javaShareConsumer, 6)
	for i := range consumers {
		name := fmt.Sprintf("share-kill-%d", i)
		consumers[i] = startShareConsumer(t, javaCommand(ctx, cp, "ShareConsumer", strings.Join(seeds, ","), topic, groupID, name), name)
	}
	defer func() {
		for _, c := range consumers {
			c.stop(ctx, t)
		}
	}()
	prod, err := kgo.NewClient(append(clusterClientOpts(nodes), kgo.ProducerLinger(0),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	produce := func(values ...string) {
		recs := make([]*kgo.Record, len(values))
		for i, v := range values {
			recs[i] = &kgo.Record{Topic: topic, Value: []byte(v)}
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	warm := 0
	waitFor(ctx, t, "a warm-up record from each partition", func() bool {
		produce(fmt.Sprintf("warm-%d-a", warm), fmt.Sprintf("warm-%d-b", warm))
		warm++
		seen := map[int32]bool{}
		for _, c := range consumers {
			for _, d := range c.deliveries() {
				seen[d.partition] = true
			}
		}
		return len(seen) == 2
	})

	const total = 2000
	values := make([]string, total)
	for i := range values {
		values[i] = fmt.Sprintf("v%05d", i)
		switch i % 10 {
		case 3:
			values[i] += "r"
		case 7:
			values[i] += "l"
		}
	}
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for i := 0; i < total && ctx.Err() == nil; i += 20 {
			produce(values[i : i+20]...)
			time.Sleep(150 * time.Millisecond)
		}
	}()
	finished := func() map[string][]javaShareAck {
		out := map[string][]javaShareAck{}
		for _, c := range consumers {
			for _, d := range c.deliveries() {
				if !strings.HasPrefix(d.value, "warm-") {
					out[d.value] = append(out[d.value], d)
				}
			}
		}
		return out
	}
	confirmed := func() int {
		n := 0
		for _, ds := range finished() {
			if slices.ContainsFunc(ds, func(d javaShareAck) bool { return d.ack != "release" }) {
				n++
			}
		}
		return n
	}
	time.Sleep(4 * time.Second)
	t.Logf("before the kill: %d of %d records finished", confirmed(), total)
	byID := func(id int32) *node { return nodes[id-1] }
	byID(coord).kill()
	time.Sleep(6 * time.Second)
	t.Logf("node %d (group and state coordinator) killed: %d of %d records finished", coord, confirmed(), total)
	byID(coord).restart()
	<-produced
	waitFor(ctx, t, "every record to be finished", func() bool { return confirmed() == total })

	got := finished()
	for _, v := range values {
		var accepts, rejects []javaShareAck
		for _, d := range got[v] {
			switch d.ack {
			case "accept":
				accepts = append(accepts, d)
			case "reject":
				rejects = append(rejects, d)
			}
		}
		switch {
		case strings.HasSuffix(v, "r"):
			if len(rejects) != 1 || len(accepts) != 0 {
				t.Errorf("%s: %v, want one reject", v, got[v])
			}
		case strings.HasSuffix(v, "l"):
			if len(accepts) != 1 || len(rejects) != 0 || accepts[0].deliveryCount < 2 {
				t.Errorf("%s: %v, want one accept at a delivery count of 2 or more", v, got[v])
			}
		default:
			if len(accepts) != 1 || len(rejects) != 0 {
				t.Errorf("%s: %v, want one accept", v, got[v])
			}
		}
	}
	for _, c := range consumers {
		c.mu.Lock()
		if len(c.failed) > 0 {
			t.Logf("%s: acknowledgements refused around the kill: %v", c.name, c.failed)
		}
		c.mu.Unlock()
	}
}

// pickCoordinatedShareGroup returns a group whose coordinator (its __consumer_offsets partition's
// leader) also leads the state of the group's share-partition 0 of the topic id and leads no data
// partition, and whose share-partition 1 has its state led apart from its data leader; and that node.
func pickCoordinatedShareGroup(t testing.TB, id [16]byte, dataLeaders, stateLeaders, offsetsLeaders map[int32]int32) (string, int32) {
	t.Helper()
	stateParts, offsetsParts := int32(len(stateLeaders)), int32(len(offsetsLeaders))
	for i := range 10000 {
		g := fmt.Sprintf("sg-kill-%d", i)
		l0, l1 := stateLeaders[statePartition(g, id, 0, stateParts)], stateLeaders[statePartition(g, id, 1, stateParts)]
		gc := offsetsLeaders[group.PartitionFor(g, offsetsParts)]
		if gc == l0 && l0 != dataLeaders[0] && l0 != dataLeaders[1] && l1 != dataLeaders[1] {
			t.Logf("data leaders %v, group %s's coordinator %d, its state coordinators %d and %d", dataLeaders, g, gc, l0, l1)
			return g, l0
		}
	}
	t.Fatalf("no group is coordinated apart from the data leaders %v (state leaders %v, offsets leaders %v)", dataLeaders, stateLeaders, offsetsLeaders)
	return "", 0
}
