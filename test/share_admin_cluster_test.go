package test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/sharestate"
)

// TestShareClusterAdmin runs the share admin keys on three weir processes with a group whose
// coordinator, share-state coordinators and partition 0's leader are different nodes, so that every
// summary, reset, deletion and owner stop crosses nodes (weir's admin forms of keys 84 and 85), and
// partition 0's lag needs its leader's high watermark (ListOffsets): an alter to offsets 4 and 7 is
// described back (lags 6 and 3) and is where a franz-go share consumer starts; once it
// accepted everything (10 and 10), an alter of partition 0 back to 2 makes the next consumer get
// records 2-9 again from the data leader whose owner had served the first one; deleted offsets
// describe as none.
func TestShareClusterAdmin(t *testing.T) {
	ctx := testContext(t, 180*time.Second)
	nodes := startGroupCluster(ctx, t, "--share-groups")
	const topic = "sqa"
	createLedTopic(ctx, t, nodes, topic, 2)
	meta := waitAgree(ctx, t, nodes, fullISR(topic))
	id := topicOf(t, meta, topic).TopicID
	dataLeaders := leaders(t, meta, topic)
	cl, err := kgo.NewClient(clusterClientOpts(nodes)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	// alter retries while the coordinators are being created and elected (the first call creates
	// __share_group_state).
	alter := func(groupID string, offsets map[int32]int64) {
		t.Helper()
		for {
			req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
			req.GroupID = groupID
			rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
			rt.Topic = topic
			for p, o := range offsets {
				rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
				rp.Partition, rp.StartOffset = p, o
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			code := int16(-1)
			if err == nil {
				code = resp.ErrorCode
				for _, t := range resp.Topics {
					for _, p := range t.Partitions {
						code = max(code, p.ErrorCode)
					}
				}
			}
			if code == 0 {
				return
			}
			if err == nil && !slices.Contains([]int16{kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code, kerr.CoordinatorLoadInProgress.Code}, code) {
				t.Fatalf("alter %s: %v", groupID, kerr.ErrorForCode(code))
			}
			if ctx.Err() != nil {
				t.Fatalf("alter %s: %v %v", groupID, err, kerr.ErrorForCode(code))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	describe := func(groupID string) [2]string {
		t.Helper()
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
		g.GroupID = groupID
		rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
		rt.Topic, rt.Partitions = topic, []int32{0, 1}
		g.Topics = append(g.Topics, rt)
		req.Groups = append(req.Groups, g)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 || len(resp.Groups[0].Topics) != 1 {
			t.Fatalf("describe: %+v, %v", resp, err)
		}
		var out [2]string
		for _, p := range resp.Groups[0].Topics[0].Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("describe partition %d: %v", p.Partition, kerr.ErrorForCode(p.ErrorCode))
			}
			out[p.Partition] = fmt.Sprintf("%d/%d", p.StartOffset, p.Lag)
		}
		return out
	}

	// A probe's alter creates __share_group_state; then a group is chosen whose coordinator leads
	// neither share-partition's state nor partition 0's data, and whose partition 0 state is led apart
	// from partition 0's data.
	alter("sg-probe", map[int32]int64{0: 0})
	meta = waitAgree(ctx, t, nodes, fullISR(topic, sharestate.StateTopic, group.OffsetsTopic))
	stateLeaders, offsetLeaders := leaders(t, meta, sharestate.StateTopic), leaders(t, meta, group.OffsetsTopic)
	var groupID string
	for i := range 10000 {
		g := fmt.Sprintf("sga-%d", i)
		gc := offsetLeaders[group.PartitionFor(g, int32(len(offsetLeaders)))]
		l0 := stateLeaders[statePartition(g, id, 0, int32(len(stateLeaders)))]
		l1 := stateLeaders[statePartition(g, id, 1, int32(len(stateLeaders)))]
		if gc != l0 && gc != l1 && gc != dataLeaders[0] && l0 != dataLeaders[0] {
			t.Logf("group %s: coordinator %d, state coordinators %d and %d, data leaders %v", g, gc, l0, l1, dataLeaders)
			groupID = g
			break
		}
	}
	if groupID == "" {
		t.Fatalf("no group apart from the data leaders %v", dataLeaders)
	}

	prod, err := kgo.NewClient(append(clusterClientOpts(nodes), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for p := range int32(2) {
		for i := range 10 {
			if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "p%d-%d", p, i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	consume := func(want []string) {
		t.Helper()
		c, err := kgo.NewClient(append(clusterClientOpts(nodes), kgo.ShareGroup(groupID), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(200*time.Millisecond))...)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		got := map[string]bool{}
		for len(got) < len(want) {
			fs := c.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("got %v of %v", got, want)
			}
			for _, r := range fs.Records() {
				if !slices.Contains(want, string(r.Value)) || got[string(r.Value)] {
					t.Fatalf("record %s at %d-%d delivered, want each of %v once", r.Value, r.Partition, r.Offset, want)
				}
				got[string(r.Value)] = true
			}
			c.MarkAcks(kgo.AckAccept)
		}
		if err := c.FlushAcks(ctx); err != nil {
			t.Fatal(err)
		}
	}

	alter(groupID, map[int32]int64{0: 4, 1: 7})
	if got := describe(groupID); got != [2]string{"4/6", "7/3"} {
		t.Fatalf("after the alter: %v, want 4/6 and 7/3 (start/lag)", got)
	}
	consume([]string{"p0-4", "p0-5", "p0-6", "p0-7", "p0-8", "p0-9", "p1-7", "p1-8", "p1-9"})
	if got := describe(groupID); got != [2]string{"10/0", "10/0"} {
		t.Fatalf("after the first consumer: %v, want 10/0 and 10/0", got)
	}
	alter(groupID, map[int32]int64{0: 2})
	consume([]string{"p0-2", "p0-3", "p0-4", "p0-5", "p0-6", "p0-7", "p0-8", "p0-9"})

	req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	req.GroupID = groupID
	req.Topics = append(req.Topics, kmsg.DeleteShareGroupOffsetsRequestTopic{Topic: topic})
	if resp, err := req.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("delete offsets: %+v, %v", resp, err)
	}
	if got := describe(groupID); got != [2]string{"-1/-1", "-1/-1"} {
		t.Fatalf("after the delete: %v, want none", got)
	}
}
