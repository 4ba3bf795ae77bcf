package api_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/server"
)

// startConsumerGroupNode is startGroupNode with KIP-848 heartbeats every 100 ms and a 3 s session.
func startConsumerGroupNode(t testing.TB) *server.Node {
	t.Helper()
	cfg := nodeConfig(t.TempDir())
	cfg.Groups = group.CoordinatorConfig{OffsetsPartitions: 4, SessionTimeoutMin: 100 * time.Millisecond,
		ConsumerHeartbeatInterval: 100 * time.Millisecond, ConsumerSessionTimeout: 3 * time.Second}
	return startNodeWith(t, cfg)
}

// describeConsumerGroup sends ConsumerGroupDescribe for one group.
func describeConsumerGroup(t *testing.T, cl *kgo.Client, id string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{id}
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Groups[0]
}

// consumerStable waits until ConsumerGroupDescribe shows the group Stable with n members that between
// them own every one of the topic's partitions, and returns it.
func consumerStable(t *testing.T, cl *kgo.Client, id string, n, partitions int) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	var g kmsg.ConsumerGroupDescribeResponseGroup
	waitFor(t, fmt.Sprintf("group %s stable with %d members", id, n), func() bool {
		g = describeConsumerGroup(t, cl, id)
		owned := 0
		for _, m := range g.Members {
			for _, tp := range m.Assignment.TopicPartitions {
				owned += len(tp.Partitions)
			}
		}
		return g.ErrorCode == 0 && g.State == "Stable" && len(g.Members) == n && owned == partitions
	})
	return g
}

// TestConsumerGroupFranzChurn runs franz-go's KIP-848 consumer (ServerSideBalancer, the uniform
// assignor) against the coordinator: three members split six partitions, one leaves and another joins
// while records keep coming, and every record is read exactly once, since each member commits what it
// read before its next poll and a partition moves only once its owner gave it up.
func TestConsumerGroupFranzChurn(t *testing.T) {
	n := startConsumerGroupNode(t)
	adm := newAdmin(t, n)
	cl := newClient(t, n, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	const topic, id = "cg-churn", "cg-churn"
	createTopic(t, adm, topic, 6, nil)
	r := newReads()
	opts := []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer())}
	a := startMember(t, n, "a", id, topic, r, opts...)
	startMember(t, n, "b", id, topic, r, opts...)
	startMember(t, n, "c", id, topic, r, opts...)
	g := consumerStable(t, cl, id, 3, 6)
	if g.AssignorName != group.AssignorUniform {
		t.Errorf("assignor %q, want uniform", g.AssignorName)
	}
	for _, m := range g.Members {
		if got := len(m.Assignment.TopicPartitions[0].Partitions); got != 2 || m.Assignment.TopicPartitions[0].Topic != topic {
			t.Errorf("member %s owns %+v; want two partitions of %s each", m.ClientID, m.Assignment, topic)
		}
	}
	produceValues(t, cl, topic, "a", 300)
	waitFor(t, "300 records", func() bool { return r.distinct() == 300 })

	a.close()
	startMember(t, n, "d", id, topic, r, opts...)
	produceValues(t, cl, topic, "b", 300)
	consumerStable(t, cl, id, 3, 6)
	produceValues(t, cl, topic, "c", 300)
	waitFor(t, "900 records", func() bool { return r.distinct() == 900 })
	r.checkOnce(t)
	if ms := r.members(); ms["d"] == 0 {
		t.Errorf("the member that joined late read nothing: %v", ms)
	}
	listed, err := adm.ListGroups(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if l := listed[id]; l.ProtocolType != "consumer" || l.State != "Stable" {
		t.Errorf("ListGroups shows %+v", l)
	}
}

// TestConsumerGroupMixedRefusals: a ConsumerGroupHeartbeat other than a join to a classic group with
// members gets GROUP_ID_NOT_FOUND, and a malformed join its error without converting the group; a
// JoinGroup to a group with KIP-848 members whose metadata is not a consumer's gets
// INCONSISTENT_GROUP_PROTOCOL; the KIP-848 group's members commit and fetch offsets (OffsetCommit and
// OffsetFetch v9) at their epoch (STALE_MEMBER_EPOCH otherwise), an admin commit is refused while it
// has members and an admin fetch is not.
func TestConsumerGroupMixedRefusals(t *testing.T) {
	n := startConsumerGroupNode(t)
	adm := newAdmin(t, n)
	cl := newClient(t, n)
	createTopic(t, adm, "mix", 2, nil)
	r := newReads()
	startMember(t, n, "classic", "mix-classic", "mix", r)
	stableWith(t, adm, "mix-classic", 1)

	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.SubscribedTopicNames = "mix-classic", "m1", []string{"mix"}
	hb.RebalanceTimeoutMillis, hb.Topics = 30000, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	hb.MemberEpoch = 1
	resp, err := hb.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("heartbeat at epoch 1 to a classic group: %v, want GROUP_ID_NOT_FOUND", kerr.ErrorForCode(resp.ErrorCode))
	}
	// A join the group would refuse (here: no subscription) does not convert the classic group.
	bad := *hb
	bad.MemberEpoch, bad.SubscribedTopicNames = 0, nil
	if resp, err = bad.RequestWith(testCtx(t), cl); err != nil || resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("join naming no subscription to a classic group: %+v, %v; want INVALID_REQUEST", resp, err)
	}
	if g := describeConsumerGroup(t, cl, "mix-classic"); g.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("after a refused join the classic group is described as a KIP-848 one: %+v", g)
	}
	stableWith(t, adm, "mix-classic", 1)

	hb.Group, hb.MemberEpoch = "mix-848", 0
	if resp, err = hb.RequestWith(testCtx(t), cl); err != nil || resp.ErrorCode != 0 || resp.MemberEpoch != 1 {
		t.Fatalf("join: %+v, %v", resp, err)
	}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = "mix-848", "consumer", 6000, 6000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0}}}
	jr, err := join.RequestWith(testCtx(t), cl)
	if err != nil || jr.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("JoinGroup with undecodable metadata to a KIP-848 group: %v, %v; want INCONSISTENT_GROUP_PROTOCOL", jr, err)
	}

	commit := func(member string, epoch int32) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = 9
		req.Group, req.MemberID, req.Generation = "mix-848", member, epoch
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "mix"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = 0
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	for _, tc := range []struct {
		member string
		epoch  int32
		want   *kerr.Error
	}{{"m1", 1, nil}, {"m1", 0, kerr.StaleMemberEpoch}, {"nobody", 1, kerr.UnknownMemberID}, {"", -1, kerr.UnknownMemberID}} {
		if got := commit(tc.member, tc.epoch); got != errCode(tc.want) {
			t.Errorf("commit as %q at epoch %d: %v, want %v", tc.member, tc.epoch, kerr.ErrorForCode(got), tc.want)
		}
	}

	fetch := func(member *string, epoch int32) (int16, int64) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 9
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group, g.MemberID, g.MemberEpoch = "mix-848", member, epoch
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.Partitions = "mix", []int32{0}
		g.Topics = append(g.Topics, rt)
		req.Groups = append(req.Groups, g)
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		rg := resp.Groups[0]
		if rg.ErrorCode != 0 {
			return rg.ErrorCode, -1
		}
		return rg.Topics[0].Partitions[0].ErrorCode, rg.Topics[0].Partitions[0].Offset
	}
	for _, tc := range []struct {
		member *string
		epoch  int32
		want   *kerr.Error
	}{{kmsg.StringPtr("m1"), 1, nil}, {kmsg.StringPtr("m1"), 0, kerr.StaleMemberEpoch}, {kmsg.StringPtr("nobody"), 1, kerr.UnknownMemberID}, {nil, -1, nil}} {
		code, offset := fetch(tc.member, tc.epoch)
		if code != errCode(tc.want) || tc.want == nil && offset != 0 {
			t.Errorf("OffsetFetch v9 as %v at epoch %d: %v, offset %d; want %v and the committed 0", tc.member, tc.epoch, kerr.ErrorForCode(code), offset, tc.want)
		}
	}

	hb.MemberEpoch, hb.Topics, hb.SubscribedTopicNames, hb.RebalanceTimeoutMillis = group.LeaveEpoch, nil, nil, -1
	if resp, err = hb.RequestWith(testCtx(t), cl); err != nil || resp.ErrorCode != 0 || resp.MemberEpoch != group.LeaveEpoch {
		t.Fatalf("leave: %+v, %v", resp, err)
	}
	// Without KIP-848 members the group takes classic members again, with its offsets.
	startMember(t, n, "classic2", "mix-848", "mix", r)
	stableWith(t, adm, "mix-848", 1)
	if g := describeConsumerGroup(t, cl, "mix-848"); g.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("ConsumerGroupDescribe of a classic group: %v, want GROUP_ID_NOT_FOUND", kerr.ErrorForCode(g.ErrorCode))
	}
}

// TestConsumerGroupVersionFeature: ApiVersions v3+ finalizes group.version 1 and lists keys 68 and 69,
// which is what tells clients they may use KIP-848 groups.
func TestConsumerGroupVersionFeature(t *testing.T) {
	n := startConsumerGroupNode(t)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = 4, "weir-test", "1"
	resp, err := req.RequestWith(testCtx(t), newClient(t, n))
	if err != nil {
		t.Fatal(err)
	}
	finalized := slices.ContainsFunc(resp.FinalizedFeatures, func(f kmsg.ApiVersionsResponseFinalizedFeature) bool {
		return f.Name == "group.version" && f.MinVersionLevel == 1 && f.MaxVersionLevel == 1
	})
	supported := slices.ContainsFunc(resp.SupportedFeatures, func(f kmsg.ApiVersionsResponseSupportedFeature) bool {
		return f.Name == "group.version" && f.MinVersion == 0 && f.MaxVersion == 1
	})
	if !finalized || !supported {
		t.Errorf("group.version finalized %v, supported %v: %+v %+v", finalized, supported, resp.FinalizedFeatures, resp.SupportedFeatures)
	}
	for _, key := range []int16{68, 69} {
		if !slices.ContainsFunc(resp.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool {
			return k.ApiKey == key && k.MinVersion == 0 && k.MaxVersion == 1
		}) {
			t.Errorf("key %d not advertised at v0-v1", key)
		}
	}
}

func errCode(e *kerr.Error) int16 {
	if e == nil {
		return 0
	}
	return e.Code
}

// TestConsumerGroupBadHeartbeats sends malformed ConsumerGroupHeartbeats over the wire: each gets
// Kafka's error code and leaves the group as it was (its epoch unchanged).
func TestConsumerGroupBadHeartbeats(t *testing.T) {
	n := startConsumerGroupNode(t)
	cl := newClient(t, n)
	createTopic(t, newAdmin(t, n), "bad", 2, nil)
	join := func() *kmsg.ConsumerGroupHeartbeatRequest {
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Group, r.MemberID, r.SubscribedTopicNames = "bad-g", "m1", []string{"bad"}
		r.RebalanceTimeoutMillis, r.Topics = 30000, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		return r
	}
	send := func(r *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
		resp, err := r.RequestWith(testCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if r := send(join()); r.ErrorCode != 0 || r.MemberEpoch != 1 {
		t.Fatalf("join: %+v", r)
	}
	for _, tc := range []struct {
		name string
		edit func(*kmsg.ConsumerGroupHeartbeatRequest)
		want *kerr.Error
	}{
		{"v1 without a member id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = "" }, kerr.InvalidRequest},
		{"join owning partitions", func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			tp := kmsg.NewConsumerGroupHeartbeatRequestTopic()
			tp.Partitions = []int32{0}
			r.MemberID, r.Topics = "m2", []kmsg.ConsumerGroupHeartbeatRequestTopic{tp}
		}, kerr.InvalidRequest},
		{"join with null owned partitions", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID, r.Topics = "m2", nil }, kerr.InvalidRequest},
		{"join without a subscription", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID, r.SubscribedTopicNames = "m2", nil }, kerr.InvalidRequest},
		{"unknown assignor", func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.MemberID, r.ServerAssignor = "m2", kmsg.StringPtr("cooperative-sticky")
		}, kerr.UnsupportedAssignor},
		{"bad regular expression", func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.MemberID, r.SubscribedTopicNames, r.SubscribedTopicRegex = "m2", nil, kmsg.StringPtr("bad(")
		}, kerr.InvalidRegularExpression},
		{"epoch ahead", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch, r.Topics = 9, nil }, kerr.FencedMemberEpoch},
		{"unknown member", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID, r.MemberEpoch = "m9", 1 }, kerr.UnknownMemberID},
		{"leave of an unknown member", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID, r.MemberEpoch = "m9", -1 }, kerr.UnknownMemberID},
	} {
		r := join()
		tc.edit(r)
		if got := send(r); got.ErrorCode != tc.want.Code {
			t.Errorf("%s: %v, want %v", tc.name, kerr.ErrorForCode(got.ErrorCode), tc.want)
		}
		if g := describeConsumerGroup(t, cl, "bad-g"); g.Epoch != 1 || len(g.Members) != 1 {
			t.Errorf("%s changed the group: epoch %d, %d members", tc.name, g.Epoch, len(g.Members))
		}
	}
}

// TestConsumerGroupInDescribeGroups: DescribeGroups describes a KIP-848 group as Kafka does, protocol
// type "consumer" and the assignor as its protocol, with each member's subscription and assignment in
// the classic encoding, so that kadm's DescribeGroups (and tools built on it, such as `weir group
// describe` and the empty-group check of `weir group reset-offsets`) see its members.
func TestConsumerGroupInDescribeGroups(t *testing.T) {
	n := startConsumerGroupNode(t)
	adm := newAdmin(t, n)
	cl := newClient(t, n)
	const topic, id = "cg-described", "cg-described"
	createTopic(t, adm, topic, 4, nil)
	r := newReads()
	opts := []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer())}
	startMember(t, n, "a", id, topic, r, opts...)
	startMember(t, n, "b", id, topic, r, opts...)
	consumerStable(t, cl, id, 2, 4)
	d := stableWith(t, adm, id, 2)
	if d.ProtocolType != "consumer" || d.Protocol != group.AssignorUniform {
		t.Errorf("protocol type %q, protocol %q; want consumer and %s", d.ProtocolType, d.Protocol, group.AssignorUniform)
	}
	owned := 0
	for _, m := range d.Members {
		meta, ok := m.Join.AsConsumer()
		if !ok || !slices.Equal(meta.Topics, []string{topic}) {
			t.Errorf("member %s subscription %+v", m.ClientID, meta)
		}
		ca, _ := m.Assigned.AsConsumer()
		for _, at := range ca.Topics {
			if at.Topic != topic {
				t.Errorf("member %s assigned %+v", m.ClientID, ca.Topics)
			}
			owned += len(at.Partitions)
		}
	}
	if owned != 4 {
		t.Errorf("the members own %d partitions of 4: %+v", owned, d.Members)
	}
}

// startCommittingMember is a group member that commits what each poll returned before the group may
// rebalance (kgo.BlockRebalanceOnPoll), so a partition it gives up has nothing read and not committed.
func startCommittingMember(t *testing.T, n *server.Node, name, groupID, topic string, r *reads, opts ...kgo.Opt) *member {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(n.KafkaAddr()), kgo.ClientID(name), kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic),
		kgo.FetchMaxWait(100 * time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(), kgo.HeartbeatInterval(100 * time.Millisecond),
		kgo.SessionTimeout(2 * time.Second), kgo.RebalanceTimeout(3 * time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
	}, opts...)...)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{name: name, cl: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			recs := cl.PollRecords(ctx, 50).Records()
			if len(recs) > 0 && cl.CommitRecords(ctx, recs...) == nil {
				_, gen := cl.GroupMetadata()
				r.add(name, gen, recs)
			}
			cl.AllowRebalance()
		}
	}()
	t.Cleanup(m.close)
	return m
}

// TestConsumerGroupUpgradeFromClassic runs Kafka's online upgrade with franz-go: two classic
// cooperative-sticky members consume a topic; a KIP-848 member (kgo.ServerSideBalancer) joins, which
// makes the group a KIP-848 group with the classic members kept, and the three split the partitions;
// then the classic members leave and the KIP-848 member takes every partition. Every record committed
// is read exactly once.
func TestConsumerGroupUpgradeFromClassic(t *testing.T) {
	n := startConsumerGroupNode(t)
	adm := newAdmin(t, n)
	cl := newClient(t, n, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	const topic, id = "cg-upgrade", "cg-upgrade"
	createTopic(t, adm, topic, 6, nil)
	r := newReads()
	a := startCommittingMember(t, n, "a", id, topic, r)
	b := startCommittingMember(t, n, "b", id, topic, r)
	stableWith(t, adm, id, 2)
	produceValues(t, cl, topic, "a", 300)
	waitFor(t, "300 records", func() bool { return r.distinct() == 300 })

	startCommittingMember(t, n, "k", id, topic, r, kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()))
	produceValues(t, cl, topic, "b", 300)
	g := consumerStable(t, cl, id, 3, 6)
	for _, m := range g.Members {
		wantType := int8(0)
		if m.ClientID == "k" {
			wantType = 1
		}
		if got := len(m.Assignment.TopicPartitions[0].Partitions); got != 2 || m.MemberType != wantType {
			t.Errorf("member %s (type %d) owns %+v; want two partitions, type %d", m.ClientID, m.MemberType, m.Assignment, wantType)
		}
	}
	waitFor(t, "600 records", func() bool { return r.distinct() == 600 })
	listed, err := adm.ListGroups(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if l := listed[id]; l.ProtocolType != "consumer" || l.State != "Stable" {
		t.Errorf("ListGroups shows %+v", l)
	}

	a.close()
	b.close()
	produceValues(t, cl, topic, "c", 300)
	consumerStable(t, cl, id, 1, 6)
	waitFor(t, "900 records", func() bool { return r.distinct() == 900 })
	r.checkOnce(t)
	if ms := r.members(); ms["k"] == 0 || ms["a"] == 0 || ms["b"] == 0 {
		t.Errorf("reads by member: %v", ms)
	}
}

// TestConsumerGroupDowngradeToClassic: two classic franz-go members and a KIP-848 one share an upgraded
// group; when the KIP-848 member leaves, the group is classic again (ConsumerGroupDescribe no longer
// knows it, DescribeGroups shows it Stable with the two members) and they split every partition;
// every record committed is read exactly once.
func TestConsumerGroupDowngradeToClassic(t *testing.T) {
	n := startConsumerGroupNode(t)
	adm := newAdmin(t, n)
	cl := newClient(t, n, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	const topic, id = "cg-downgrade", "cg-downgrade"
	createTopic(t, adm, topic, 6, nil)
	r := newReads()
	startCommittingMember(t, n, "a", id, topic, r)
	startCommittingMember(t, n, "b", id, topic, r)
	stableWith(t, adm, id, 2)
	k := startCommittingMember(t, n, "k", id, topic, r, kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()))
	consumerStable(t, cl, id, 3, 6)
	produceValues(t, cl, topic, "a", 300)
	waitFor(t, "300 records", func() bool { return r.distinct() == 300 })

	k.close()
	produceValues(t, cl, topic, "b", 300)
	waitFor(t, "the group classic again", func() bool {
		return describeConsumerGroup(t, cl, id).ErrorCode == kerr.GroupIDNotFound.Code
	})
	d := stableWith(t, adm, id, 2)
	owned := 0
	for _, m := range d.Members {
		ca, _ := m.Assigned.AsConsumer()
		for _, tp := range ca.Topics {
			owned += len(tp.Partitions)
		}
	}
	if owned != 6 || d.Protocol != "cooperative-sticky" {
		t.Errorf("classic again: protocol %q, %d partitions assigned; want cooperative-sticky and 6", d.Protocol, owned)
	}
	waitFor(t, "600 records", func() bool { return r.distinct() == 600 })
	r.checkOnce(t)
	if ms := r.members(); ms["k"] == 0 {
		t.Errorf("reads by member: %v", ms)
	}
}
