package test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareGroupListed returns the state ListGroups v5 gives groupID among the share groups, "" when it
// is not listed; it retries while the coordinator loads.
func shareGroupListed(ctx context.Context, t testing.TB, cl kmsg.Requestor, groupID string) string {
	t.Helper()
	for {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version, req.TypesFilter = 5, []string{"share"}
		resp, err := req.RequestWith(ctx, cl)
		if err == nil && resp.ErrorCode == 0 {
			for _, g := range resp.Groups {
				if g.Group == groupID {
					return g.GroupState
				}
			}
			return ""
		}
		if ctx.Err() != nil {
			t.Fatalf("ListGroups: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// describeShareGroup returns ShareGroupDescribe's answer for groupID, retrying while the coordinator
// loads.
func describeShareGroup(ctx context.Context, t testing.TB, cl kmsg.Requestor, groupID string) kmsg.ShareGroupDescribeResponseGroup {
	t.Helper()
	for {
		req := kmsg.NewPtrShareGroupDescribeRequest()
		req.GroupIDs = []string{groupID}
		resp, err := req.RequestWith(ctx, cl)
		if err == nil && len(resp.Groups) == 1 && resp.Groups[0].ErrorCode != kerr.CoordinatorLoadInProgress.Code &&
			resp.Groups[0].ErrorCode != kerr.NotCoordinator.Code {
			return resp.Groups[0]
		}
		if ctx.Err() != nil {
			t.Fatalf("ShareGroupDescribe: %+v, %v", resp, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// setShareGroupConfigs sets groupID's group configs, name then value, with IncrementalAlterConfigs.
func setShareGroupConfigs(ctx context.Context, t testing.TB, cl *kgo.Client, groupID string, kvs ...string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, groupID
	for i := 0; i+1 < len(kvs); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = kvs[i], kmsg.StringPtr(kvs[i+1])
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("group configs of %s: %+v, %v", groupID, resp, err)
	}
}

// TestShareGroupAfterKill: a share group whose consumer read and left is still known after its
// coordinator's kill -9 and restart: ListGroups lists it (Empty), ShareGroupDescribe describes it at
// its group epoch, a classic JoinGroup with its id is GROUP_ID_NOT_FOUND, and DeleteGroups deletes it
// with its share-partitions' state; after another kill -9 it stays deleted, and a new share consumer
// of the same id starts afresh (its records delivered again, at share.auto.offset.reset=earliest).
func TestShareGroupAfterKill(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	n := startNode(t, nodeOptions{Args: []string{"--share-groups"}})
	const topic, groupID = "share-kill-member", "sg-kill-member"
	n.createTopic(ctx, t, topic, 1, nil)
	prod := n.client(t)
	setShareGroupConfigs(ctx, t, prod, groupID, "share.auto.offset.reset", "earliest")
	for i := range 5 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	consumeAll := func() {
		t.Helper()
		c := n.newClient(t, kgo.ShareGroup(groupID), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(200*time.Millisecond))
		defer c.Close()
		got := map[string]bool{}
		for len(got) < 5 {
			fs := c.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("consumed %v, want r0-r4", got)
			}
			for _, r := range fs.Records() {
				got[string(r.Value)] = true
			}
		}
	}
	consumeAll()
	cl := n.client(t)
	before := describeShareGroup(ctx, t, cl, groupID)
	if before.ErrorCode != 0 || before.GroupState != "Empty" {
		t.Fatalf("before the kill: %v %s, want Empty", kerr.ErrorForCode(before.ErrorCode), before.GroupState)
	}

	n.kill()
	n.restart()
	cl = n.client(t)
	if st := shareGroupListed(ctx, t, cl, groupID); st != "Empty" {
		t.Fatalf("ListGroups after the kill: %q, want the share group Empty", st)
	}
	after := describeShareGroup(ctx, t, cl, groupID)
	if after.ErrorCode != 0 || after.GroupState != "Empty" || after.GroupEpoch != before.GroupEpoch || len(after.Members) != 0 {
		t.Fatalf("ShareGroupDescribe after the kill: %v %s epoch %d, want Empty at epoch %d", kerr.ErrorForCode(after.ErrorCode),
			after.GroupState, after.GroupEpoch, before.GroupEpoch)
	}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = groupID, "consumer", 10000, 10000
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name = "range"
	join.Protocols = append(join.Protocols, p)
	if resp, err := join.RequestWith(ctx, cl); err != nil || resp.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("classic join of the share group's id after the kill: %+v, %v; want GROUP_ID_NOT_FOUND", resp, err)
	}
	if resp, err := n.admin(t).DeleteGroup(ctx, groupID); err != nil || resp.Err != nil {
		t.Fatalf("DeleteGroups after the kill: %+v, %v", resp, err)
	}

	n.kill()
	n.restart()
	cl = n.client(t)
	if st := shareGroupListed(ctx, t, cl, groupID); st != "" {
		t.Fatalf("ListGroups after the delete and a kill: %q, want the share group gone", st)
	}
	if d := describeShareGroup(ctx, t, cl, groupID); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("ShareGroupDescribe after the delete and a kill: %v, want GROUP_ID_NOT_FOUND", kerr.ErrorForCode(d.ErrorCode))
	}
	consumeAll()
}

// TestShareMemberSessionExpires: a member that stops heartbeating but keeps its connection open (a
// raw client that joined with ShareGroupHeartbeat and acquired records with ShareFetch) loses its
// records when its session times out (share.session.timeout.ms 45 s, the least a group may set):
// a franz-go share consumer gets them at delivery count 2 about 45 s after the member's last
// heartbeat, before their acquisition locks (share.record.lock.duration.ms 60 s) would have expired.
func TestShareMemberSessionExpires(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	n := startNode(t, nodeOptions{Args: []string{"--share-groups"}})
	const topic, groupID, member = "share-expire-member", "sg-expire-member", "quiet-member-0000000001"
	n.createTopic(ctx, t, topic, 1, nil)
	prod := n.client(t)
	setShareGroupConfigs(ctx, t, prod, groupID, "share.session.timeout.ms", "45000", "share.record.lock.duration.ms", "60000",
		"share.auto.offset.reset", "earliest")
	topics, err := n.admin(t).ListTopics(ctx, topic)
	if err != nil || topics[topic].Err != nil {
		t.Fatalf("list topics: %v %v", err, topics[topic].Err)
	}
	id := topics[topic].ID
	for i := range 3 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	lastBeat := quietMemberHolds(ctx, t, n.client(t), nil, groupID, member, topic, id, 3)
	c := n.newClient(t, kgo.ShareGroup(groupID), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(500*time.Millisecond))
	defer c.Close()
	took := awaitRedelivered(ctx, t, c, 3, lastBeat)
	t.Logf("records redelivered %v after the quiet member's last heartbeat (session 45 s, locks 60 s)", took.Round(time.Millisecond))
}

// quietMemberHolds joins member to groupID with a ShareGroupHeartbeat over hb, then acquires want
// records of topic's partition 0 with ShareFetch over fetch (hb when nil), and returns the time of the
// member's only heartbeat: the member then stays silent with its connections open.
func quietMemberHolds(ctx context.Context, t testing.TB, hb, fetch kmsg.Requestor, groupID, member, topic string, id [16]byte, want int) time.Time {
	t.Helper()
	if fetch == nil {
		fetch = hb
	}
	var lastBeat time.Time
	for {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = groupID, member, 0, []string{topic}
		resp, err := req.RequestWith(ctx, hb)
		if err == nil && resp.ErrorCode == 0 {
			lastBeat = time.Now()
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("join: %+v, %v", resp, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	held := 0
	for epoch := int32(0); held < want; epoch++ {
		req := kmsg.NewPtrShareFetchRequest()
		req.GroupID, req.MemberID, req.ShareSessionEpoch, req.MaxWaitMillis, req.MaxRecords = kmsg.StringPtr(groupID), kmsg.StringPtr(member), epoch, 500, 100
		rt := kmsg.NewShareFetchRequestTopic()
		rt.TopicID = id
		rt.Partitions = append(rt.Partitions, kmsg.NewShareFetchRequestTopicPartition())
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, fetch)
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("share fetch: %+v, %v", resp, err)
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				for _, a := range rp.AcquiredRecords {
					held += int(a.LastOffset - a.FirstOffset + 1)
				}
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("acquired %d records, want %d", held, want)
		}
	}
	return lastBeat
}

// awaitRedelivered polls the share consumer c until it has want distinct records, each at delivery
// count 2, and returns how long after lastBeat they came: about the quiet member's 45 s session,
// before the 60 s locks.
func awaitRedelivered(ctx context.Context, t testing.TB, c *kgo.Client, want int, lastBeat time.Time) time.Duration {
	t.Helper()
	got := map[string]int32{}
	for len(got) < want {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("the franz-go consumer got %v; want %d records once the quiet member's session ended", got, want)
		}
		for _, r := range fs.Records() {
			got[string(r.Value)] = r.DeliveryCount()
		}
	}
	took := time.Since(lastBeat)
	for v, dc := range got {
		if dc != 2 {
			t.Fatalf("record %s at delivery count %d, want 2 (released by the expiry)", v, dc)
		}
	}
	if took < 44*time.Second || took >= 58*time.Second {
		t.Fatalf("records redelivered %v after the quiet member's last heartbeat, want about its 45 s session, before the 60 s locks", took)
	}
	return took
}

// TestShareMemberSessionExpiresAcross is TestShareMemberSessionExpires on three weir processes with
// the group's coordinator on one node and the topic's only replica, its leader, on another: the
// coordinator removes the quiet member when its 45 s session ends and tells the other nodes
// (WriteShareGroupState with weir's end-member tags), so the leader ends the member's share session
// and releases its records before their 60 s locks expire.
func TestShareMemberSessionExpiresAcross(t *testing.T) {
	ctx := testContext(t, 4*time.Minute)
	nodes := startGroupCluster(ctx, t, "--share-groups")
	const topic, member = "share-expire-across", "quiet-member-0000000002"
	createPlaced(ctx, t, nodes[0], topic, []int32{1})
	meta := waitAgree(ctx, t, nodes, fullISR(topic))
	if l := leaders(t, meta, topic)[0]; l != 1 {
		t.Fatalf("%s led by %d, want 1", topic, l)
	}
	id := topicOf(t, meta, topic).TopicID
	cl, err := kgo.NewClient(clusterClientOpts(nodes)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	// A group whose coordinator is not node 1 (the first FindCoordinator creates __consumer_offsets).
	var groupID string
	var coord int32
	for i := 0; groupID == ""; i++ {
		g := fmt.Sprintf("sg-across-%d", i)
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKeys = []string{g}
		resp, err := req.RequestWith(ctx, cl)
		switch {
		case ctx.Err() != nil:
			t.Fatalf("no group coordinated apart from node 1: %v", err)
		case err != nil || len(resp.Coordinators) != 1 || resp.Coordinators[0].ErrorCode != 0:
			time.Sleep(100 * time.Millisecond)
			i--
		case resp.Coordinators[0].NodeID != 1:
			groupID, coord = g, resp.Coordinators[0].NodeID
		}
	}
	t.Logf("group %s: coordinator %d, data leader 1", groupID, coord)
	setShareGroupConfigs(ctx, t, cl, groupID, "share.session.timeout.ms", "45000", "share.record.lock.duration.ms", "60000",
		"share.auto.offset.reset", "earliest")
	for _, n := range nodes {
		waitFor(ctx, t, "the group configs at every node", func() bool {
			req := kmsg.NewPtrDescribeConfigsRequest()
			dr := kmsg.NewDescribeConfigsRequestResource()
			dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, groupID
			dr.ConfigNames = []string{"share.record.lock.duration.ms"}
			req.Resources = append(req.Resources, dr)
			resp, err := req.RequestWith(ctx, cl.Broker(int(n.id)))
			return err == nil && len(resp.Resources[0].Configs) == 1 && resp.Resources[0].Configs[0].Value != nil &&
				*resp.Resources[0].Configs[0].Value == "60000"
		})
	}
	for i := range 3 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	lastBeat := quietMemberHolds(ctx, t, cl.Broker(int(coord)), cl.Broker(1), groupID, member, topic, id, 3)
	c, err := kgo.NewClient(append(clusterClientOpts(nodes), kgo.ShareGroup(groupID), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(500*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	took := awaitRedelivered(ctx, t, c, 3, lastBeat)
	t.Logf("records redelivered %v after the quiet member's last heartbeat, across nodes (session 45 s, locks 60 s)", took.Round(time.Millisecond))
}

// TestShareGroupMovesWithCoordinator: on three weir processes, a share group whose franz-go consumer
// read and left is still known once its coordinator's node is killed with kill -9 and another node
// takes over its __consumer_offsets partition (a move, not a restart): the new coordinator describes it
// Empty at its epoch and DeleteGroups deletes it.
func TestShareGroupMovesWithCoordinator(t *testing.T) {
	ctx := testContext(t, 4*time.Minute)
	nodes := startGroupCluster(ctx, t, "--share-groups")
	const topic, groupID = "share-move", "sg-move"
	createLedTopic(ctx, t, nodes, topic, 1)
	cl, err := kgo.NewClient(clusterClientOpts(nodes)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	setShareGroupConfigs(ctx, t, cl, groupID, "share.auto.offset.reset", "earliest")
	for i := range 3 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	c, err := kgo.NewClient(append(clusterClientOpts(nodes), kgo.ShareGroup(groupID), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(200*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for len(got) < 3 {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %v, want r0-r2", got)
		}
		for _, r := range fs.Records() {
			got[string(r.Value)] = true
		}
	}
	c.Close()

	coordinator := func() int32 {
		t.Helper()
		for {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.CoordinatorKeys = []string{groupID}
			resp, err := req.RequestWith(ctx, cl)
			if err == nil && len(resp.Coordinators) == 1 && resp.Coordinators[0].ErrorCode == 0 {
				return resp.Coordinators[0].NodeID
			}
			if ctx.Err() != nil {
				t.Fatalf("FindCoordinator: %+v, %v", resp, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	before := describeShareGroup(ctx, t, cl, groupID)
	if before.ErrorCode != 0 || before.GroupState != "Empty" {
		t.Fatalf("before the kill: %v %s, want Empty", kerr.ErrorForCode(before.ErrorCode), before.GroupState)
	}
	old := coordinator()
	nodes[old-1].kill()
	var moved int32
	waitFor(ctx, t, "another node coordinates the group", func() bool {
		moved = coordinator()
		return moved != old
	})
	t.Logf("group %s: coordinator %d killed, now %d", groupID, old, moved)
	after := describeShareGroup(ctx, t, cl.Broker(int(moved)), groupID)
	if after.ErrorCode != 0 || after.GroupState != "Empty" || after.GroupEpoch != before.GroupEpoch {
		t.Fatalf("at the new coordinator: %v %s epoch %d, want Empty at epoch %d", kerr.ErrorForCode(after.ErrorCode),
			after.GroupState, after.GroupEpoch, before.GroupEpoch)
	}
	if st := shareGroupListed(ctx, t, cl.Broker(int(moved)), groupID); st != "Empty" {
		t.Fatalf("ListGroups at the new coordinator: %q, want the share group Empty", st)
	}
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = []string{groupID}
	waitFor(ctx, t, "DeleteGroups at the new coordinator", func() bool {
		resp, err := req.RequestWith(ctx, cl.Broker(int(moved)))
		return err == nil && len(resp.Groups) == 1 && resp.Groups[0].ErrorCode == 0
	})
	if d := describeShareGroup(ctx, t, cl.Broker(int(moved)), groupID); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("after the delete: %v, want GROUP_ID_NOT_FOUND", kerr.ErrorForCode(d.ErrorCode))
	}
	nodes[old-1].restart()
}
