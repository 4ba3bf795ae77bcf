package group

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// consumerMetadata is a consumer's JoinGroup metadata (v1: with owned partitions) for topic t.
func consumerMetadata(owned ...int32) []byte {
	md := kmsg.NewConsumerMemberMetadata()
	md.Version, md.Topics = 1, []string{"t"}
	if len(owned) > 0 {
		o := kmsg.NewConsumerMemberMetadataOwnedPartition()
		o.Topic, o.Partitions = "t", owned
		md.OwnedPartitions = append(md.OwnedPartitions, o)
	}
	return md.AppendTo(nil)
}

// consumerAssignment is a ConsumerMemberAssignment of partitions of topic t.
func consumerAssignment(partitions ...int32) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	if len(partitions) > 0 {
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic, at.Partitions = "t", partitions
		a.Topics = append(a.Topics, at)
	}
	return a.AppendTo(nil)
}

// assignedPartitions decodes a SyncGroup assignment of topic t.
func assignedPartitions(t *testing.T, b []byte) []int32 {
	t.Helper()
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil {
		t.Fatalf("assignment %x: %v", b, err)
	}
	var out []int32
	for _, at := range a.Topics {
		if at.Topic != "t" {
			t.Fatalf("assignment names topic %q", at.Topic)
		}
		out = append(out, at.Partitions...)
	}
	slices.Sort(out)
	return out
}

// classicMetadata is a Stable classic group at generation 5 whose members c1 and c2 split the six
// partitions of topic t.
func classicMetadata() Metadata {
	member := func(id string, assigned ...int32) MemberMetadata {
		return MemberMetadata{MemberID: id, ClientID: id, SessionTimeout: testSession, RebalanceTimeout: testRebalance,
			Subscription: consumerMetadata(assigned...), Assignment: consumerAssignment(assigned...)}
	}
	return Metadata{Group: "g", ProtocolType: "consumer", Protocol: "cooperative-sticky", Generation: 5, Leader: "c1",
		Members: []MemberMetadata{member("c1", 0, 1, 2), member("c2", 3, 4, 5)}}
}

func testConsumerConfig() ConsumerConfig {
	return ConsumerConfig{NewMemberID: sequentialIDs(), ClassicSessionTimeoutMin: time.Second,
		ClassicSessionTimeoutMax: 5 * time.Minute}
}

func classicJoinReq(memberID string, owned ...int32) JoinRequest {
	return JoinRequest{Version: 7, MemberID: memberID, ClientID: "c", ProtocolType: "consumer",
		Protocols:      []Protocol{{Name: "cooperative-sticky", Metadata: consumerMetadata(owned...)}},
		SessionTimeout: testSession, RebalanceTimeout: testRebalance}
}

// owners maps each partition of topic t to the members the group says own it, and checks that no
// partition has two.
func owners(t *testing.T, g *ConsumerGroup) map[int32]string {
	t.Helper()
	out := map[int32]string{}
	for _, m := range g.Describe().Members {
		for _, tp := range m.Assignment {
			for _, p := range tp.Partitions {
				if other, ok := out[p]; ok {
					t.Fatalf("partition %d owned by %s and %s", p, other, m.MemberID)
				}
				out[p] = m.MemberID
			}
		}
	}
	return out
}

// TestConsumerGroupUpgradeFromClassic walks Kafka's online upgrade: a classic group of two cooperative
// consumers becomes a KIP-848 group when a consumer-protocol member joins, keeping the members, their
// assignments and the generation; the classic members are told to rejoin by their heartbeats, give up
// what the new member gets through JoinGroup and SyncGroup, revocation first; then one leaves and the
// KIP-848 member takes its partitions.
func TestConsumerGroupUpgradeFromClassic(t *testing.T) {
	now := time.Unix(1000, 0)
	topics := fakeTopics{"t": {ID: topicID("t"), Partitions: 6}}
	g, err := ConsumerGroupFromClassic(classicMetadata(), testConsumerConfig(), topics, now)
	if err != nil {
		t.Fatal(err)
	}
	if o := owners(t, g); len(o) != 6 || o[0] != "c1" || o[5] != "c2" {
		t.Fatalf("after the conversion the owners are %v", o)
	}
	if d := g.Describe(); d.Epoch != 5 || d.AssignmentEpoch != 5 || !d.Members[0].Classic || d.Members[0].MemberEpoch != 5 {
		t.Fatalf("after the conversion: %+v", d)
	}
	// The classic members go on at their generation until something changes.
	if err := g.ClassicHeartbeat(now, HeartbeatRequest{MemberID: "c1", Generation: 5}); err != nil {
		t.Fatalf("c1 heartbeat before the join: %v", err)
	}
	if err := g.ValidateCommit("c1", 5, []TopicPartition{{Topic: "t", Partition: 0}}); err != nil {
		t.Fatalf("c1 commit at its generation: %v", err)
	}

	k := g.Heartbeat(now, consumerJoin("k", "t"), topics)
	if k.Err != nil || k.MemberEpoch != 6 || len(parts(k)) != 0 {
		t.Fatalf("k joins: %+v; want epoch 6 and nothing while c1 and c2 own everything", k)
	}
	for _, c := range []struct {
		id    string
		owned []int32
	}{{"c1", []int32{0, 1, 2}}, {"c2", []int32{3, 4, 5}}} {
		if err := g.ClassicHeartbeat(now, HeartbeatRequest{MemberID: c.id, Generation: 5}); !errors.Is(err, ErrRebalanceInProgress) {
			t.Fatalf("%s heartbeat after k joined: %v, want ErrRebalanceInProgress", c.id, err)
		}
		// A cooperative member rejoins owning its partitions: it keeps part of them at generation 5.
		j := g.ClassicJoin(now, classicJoinReq(c.id, c.owned...), topics)
		if j.Err != nil || j.Generation != 5 || j.Protocol != "cooperative-sticky" || j.Leader != "" {
			t.Fatalf("%s rejoins: %+v", c.id, j)
		}
		s := g.ClassicSync(now, SyncRequest{MemberID: c.id, Generation: 5})
		kept := assignedPartitions(t, s.Assignment)
		if s.Err != nil || len(kept) != 2 || !slices.Contains(c.owned, kept[0]) {
			t.Fatalf("%s sync: %+v, keeps %v", c.id, s, kept)
		}
		r := g.Heartbeat(now, ConsumerHeartbeat{MemberID: "k", MemberEpoch: 6, RebalanceTimeout: -1}, topics)
		if slices.ContainsFunc(parts(r), func(p int32) bool { return slices.Contains(c.owned, p) }) {
			t.Fatalf("k got %v before %s revoked", parts(r), c.id)
		}
		// Having revoked, it rejoins owning what it kept and moves to epoch 6.
		j = g.ClassicJoin(now, classicJoinReq(c.id, kept...), topics)
		if j.Err != nil || j.Generation != 6 {
			t.Fatalf("%s rejoins after revoking: %+v", c.id, j)
		}
		if s := g.ClassicSync(now, SyncRequest{MemberID: c.id, Generation: 6}); !slices.Equal(assignedPartitions(t, s.Assignment), kept) {
			t.Fatalf("%s sync at 6: %+v", c.id, s)
		}
		if err := g.ClassicHeartbeat(now, HeartbeatRequest{MemberID: c.id, Generation: 6}); err != nil {
			t.Fatalf("%s heartbeat at 6: %v", c.id, err)
		}
	}
	k = g.Heartbeat(now, ConsumerHeartbeat{MemberID: "k", MemberEpoch: 6, RebalanceTimeout: -1}, topics)
	if len(parts(k)) != 2 || g.ConsumerState() != "Stable" {
		t.Fatalf("k after both revoked: %v, group %s", parts(k), g.ConsumerState())
	}
	if o := owners(t, g); len(o) != 6 {
		t.Fatalf("owners %v", o)
	}

	if errs := g.ClassicLeave([]LeaveMember{{MemberID: "c1"}, {MemberID: "k"}}); errs[0] != nil || !errors.Is(errs[1], ErrUnknownMemberID) {
		t.Fatalf("leave c1 and (not classic) k: %v", errs)
	}
	k = g.Heartbeat(now, ConsumerHeartbeat{MemberID: "k", MemberEpoch: 6, RebalanceTimeout: -1}, topics)
	if k.Err != nil || k.MemberEpoch != 7 || len(parts(k)) != 3 {
		t.Fatalf("k after c1 left: %+v, partitions %v", k, parts(k))
	}
	if err := g.ClassicLeave([]LeaveMember{{MemberID: "c2"}})[0]; err != nil {
		t.Fatal(err)
	}
	k = g.Heartbeat(now, ConsumerHeartbeat{MemberID: "k", MemberEpoch: 7, RebalanceTimeout: -1}, topics)
	if !slices.Equal(parts(k), []int32{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("k after both classic members left: %v", parts(k))
	}
}

// TestConsumerGroupEagerClassicMember: an eager classic member rejoins owning nothing, so it moves to
// the new epoch at once and is given its target, without a second round.
func TestConsumerGroupEagerClassicMember(t *testing.T) {
	now := time.Unix(1000, 0)
	topics := fakeTopics{"t": {ID: topicID("t"), Partitions: 6}}
	g, err := ConsumerGroupFromClassic(classicMetadata(), testConsumerConfig(), topics, now)
	if err != nil {
		t.Fatal(err)
	}
	g.Heartbeat(now, consumerJoin("k", "t"), topics)
	j := g.ClassicJoin(now, classicJoinReq("c1"), topics)
	s := g.ClassicSync(now, SyncRequest{MemberID: "c1", Generation: j.Generation})
	if j.Err != nil || j.Generation != 6 || len(assignedPartitions(t, s.Assignment)) != 2 {
		t.Fatalf("eager c1 rejoins: %+v, sync %+v", j, s)
	}
}

// TestConsumerGroupClassicNewMember: a classic member joining a KIP-848 group gets an id, waits for the
// partitions another member still owns, is told to rejoin once they are free, and then gets them.
func TestConsumerGroupClassicNewMember(t *testing.T) {
	now := time.Unix(1000, 0)
	topics := fakeTopics{"t": {ID: topicID("t"), Partitions: 4}}
	g, err := NewConsumerGroup("g", testConsumerConfig())
	if err != nil {
		t.Fatal(err)
	}
	g.Heartbeat(now, consumerJoin("k", "t"), topics)
	j := g.ClassicJoin(now, classicJoinReq(""), topics)
	if j.Err != nil || j.MemberID == "" || j.Generation != 2 {
		t.Fatalf("new classic member: %+v", j)
	}
	if s := g.ClassicSync(now, SyncRequest{MemberID: j.MemberID, Generation: 2}); len(assignedPartitions(t, s.Assignment)) != 0 {
		t.Fatalf("sync before k revoked: %+v", s)
	}
	if err := g.ClassicHeartbeat(now, HeartbeatRequest{MemberID: j.MemberID, Generation: 2}); err != nil {
		t.Fatalf("heartbeat while its partitions are still k's: %v", err)
	}
	k := g.Heartbeat(now, ConsumerHeartbeat{MemberID: "k", MemberEpoch: 1, RebalanceTimeout: -1}, topics)
	g.Heartbeat(now, ConsumerHeartbeat{MemberID: "k", MemberEpoch: 1, RebalanceTimeout: -1,
		Owned: []TopicPartitions{{TopicID: topicID("t"), Partitions: parts(k)}}}, topics)
	if err := g.ClassicHeartbeat(now, HeartbeatRequest{MemberID: j.MemberID, Generation: 2}); !errors.Is(err, ErrRebalanceInProgress) {
		t.Fatalf("heartbeat once k revoked: %v, want ErrRebalanceInProgress", err)
	}
	j = g.ClassicJoin(now, classicJoinReq(j.MemberID), topics)
	if s := g.ClassicSync(now, SyncRequest{MemberID: j.MemberID, Generation: 2}); len(assignedPartitions(t, s.Assignment)) != 2 {
		t.Fatalf("sync after k revoked: %+v", s)
	}
	if o := owners(t, g); len(o) != 4 {
		t.Fatalf("owners %v", o)
	}
}

// TestConsumerGroupClassicRejoinTimeout: a classic member told to rejoin that does not within its
// rebalance timeout is removed, and its partitions go to the others.
func TestConsumerGroupClassicRejoinTimeout(t *testing.T) {
	now := time.Unix(1000, 0)
	topics := fakeTopics{"t": {ID: topicID("t"), Partitions: 6}}
	g, err := ConsumerGroupFromClassic(classicMetadata(), testConsumerConfig(), topics, now)
	if err != nil {
		t.Fatal(err)
	}
	g.Heartbeat(now, consumerJoin("k", "t"), topics)
	if err := g.ClassicHeartbeat(now, HeartbeatRequest{MemberID: "c1", Generation: 5}); !errors.Is(err, ErrRebalanceInProgress) {
		t.Fatal(err)
	}
	later := now.Add(testRebalance - time.Second)
	g.ClassicHeartbeat(later, HeartbeatRequest{MemberID: "c1", Generation: 5})
	g.ClassicHeartbeat(later, HeartbeatRequest{MemberID: "c2", Generation: 5})
	if d := g.Deadline(); !d.Equal(now.Add(testRebalance)) {
		t.Fatalf("deadline %v, want c1's rejoin end %v", d, now.Add(testRebalance))
	}
	g.Tick(now.Add(testRebalance))
	if o := owners(t, g); slices.Contains([]string{o[0], o[1], o[2]}, "c1") || len(g.Describe().Members) != 2 {
		t.Fatalf("c1 not removed: owners %v", o)
	}
	if err := g.ClassicHeartbeat(now, HeartbeatRequest{MemberID: "c1", Generation: 5}); !errors.Is(err, ErrUnknownMemberID) {
		t.Fatalf("c1 after removal: %v", err)
	}
}

// TestConsumerGroupClassicBadInput: every malformed or misdirected classic request gets its error and
// changes nothing.
func TestConsumerGroupClassicBadInput(t *testing.T) {
	now := time.Unix(1000, 0)
	topics := fakeTopics{"t": {ID: topicID("t"), Partitions: 6}}
	g, err := ConsumerGroupFromClassic(classicMetadata(), testConsumerConfig(), topics, now)
	if err != nil {
		t.Fatal(err)
	}
	g.Heartbeat(now, consumerJoin("k", "t"), topics)
	before := g.Describe()
	join := func(mod func(*JoinRequest)) error {
		req := classicJoinReq("c1", 0, 1, 2)
		mod(&req)
		return g.ClassicJoin(now, req, topics).Err
	}
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"join: session too short", join(func(r *JoinRequest) { r.SessionTimeout = time.Millisecond }), ErrInvalidSessionTimeout},
		{"join: other protocol type", join(func(r *JoinRequest) { r.ProtocolType = "connect" }), ErrInconsistentProtocol},
		{"join: no protocols", join(func(r *JoinRequest) { r.Protocols = nil }), ErrInconsistentProtocol},
		{"join: metadata not a consumer's", join(func(r *JoinRequest) { r.Protocols[0].Metadata = []byte{0, 0} }), ErrInconsistentProtocol},
		{"join: unknown member", join(func(r *JoinRequest) { r.MemberID = "nobody" }), ErrUnknownMemberID},
		{"join: a KIP-848 member's id", join(func(r *JoinRequest) { r.MemberID = "k" }), ErrUnknownMemberID},
		{"sync: old generation", g.ClassicSync(now, SyncRequest{MemberID: "c1", Generation: 4}).Err, ErrIllegalGeneration},
		{"sync: other protocol", g.ClassicSync(now, SyncRequest{MemberID: "c1", Generation: 5, Protocol: "range"}).Err, ErrInconsistentProtocol},
		{"sync: KIP-848 member", g.ClassicSync(now, SyncRequest{MemberID: "k", Generation: 6}).Err, ErrUnknownMemberID},
		{"heartbeat: generation ahead", g.ClassicHeartbeat(now, HeartbeatRequest{MemberID: "c1", Generation: 9}), ErrIllegalGeneration},
		{"heartbeat: other instance", g.ClassicHeartbeat(now, HeartbeatRequest{MemberID: "c1", InstanceID: "i", Generation: 5}), ErrFencedInstanceID},
		{"consumer heartbeat naming a classic member", g.Heartbeat(now, ConsumerHeartbeat{MemberID: "c1", MemberEpoch: 5, RebalanceTimeout: -1}, topics).Err, ErrUnknownMemberID},
		{"consumer leave naming a classic member", g.Heartbeat(now, ConsumerHeartbeat{MemberID: "c1", MemberEpoch: LeaveEpoch, RebalanceTimeout: -1}, topics).Err, ErrUnknownMemberID},
		{"leave: unknown", g.ClassicLeave([]LeaveMember{{MemberID: "nobody"}})[0], ErrUnknownMemberID},
		{"leave: other instance", g.ClassicLeave([]LeaveMember{{MemberID: "c1", InstanceID: "i"}})[0], ErrFencedInstanceID},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	after := g.Describe()
	if before.Epoch != after.Epoch || len(before.Members) != len(after.Members) {
		t.Fatalf("bad input changed the group: %+v, then %+v", before, after)
	}
	for i := range before.Members {
		b, a := before.Members[i], after.Members[i]
		if b.MemberID != a.MemberID || b.MemberEpoch != a.MemberEpoch || !slices.EqualFunc(b.Assignment, a.Assignment,
			func(x, y TopicPartitions) bool { return x.TopicID == y.TopicID && slices.Equal(x.Partitions, y.Partitions) }) {
			t.Fatalf("bad input changed member %s: %+v, then %+v", b.MemberID, b, a)
		}
	}
}

// TestConsumerGroupFromClassicRefusals: a classic group that cannot be read as consumers is not
// converted.
func TestConsumerGroupFromClassicRefusals(t *testing.T) {
	now := time.Unix(1000, 0)
	topics := fakeTopics{"t": {ID: topicID("t"), Partitions: 6}}
	for _, tc := range []struct {
		name string
		mod  func(*Metadata, *ConsumerConfig)
	}{
		{"protocol type", func(md *Metadata, _ *ConsumerConfig) { md.ProtocolType = "connect" }},
		{"metadata", func(md *Metadata, _ *ConsumerConfig) { md.Members[0].Subscription = []byte{0} }},
		{"assignment", func(md *Metadata, _ *ConsumerConfig) { md.Members[1].Assignment = []byte{0, 0, 0} }},
		{"partition assigned twice", func(md *Metadata, _ *ConsumerConfig) { md.Members[1].Assignment = consumerAssignment(2, 3) }},
		{"members max", func(_ *Metadata, c *ConsumerConfig) { c.MembersMax = 2 }},
	} {
		md, cfg := classicMetadata(), testConsumerConfig()
		tc.mod(&md, &cfg)
		if _, err := ConsumerGroupFromClassic(md, cfg, topics, now); !errors.Is(err, ErrNotConsumerGroup) {
			t.Errorf("%s: %v, want ErrNotConsumerGroup", tc.name, err)
		}
	}
	// Partitions of topics that are gone are dropped, the rest kept.
	md := classicMetadata()
	md.Members[0].Assignment = consumerAssignment(0, 1, 2, 17)
	g, err := ConsumerGroupFromClassic(md, testConsumerConfig(), topics, now)
	if err != nil {
		t.Fatal(err)
	}
	if o := owners(t, g); len(o) != 6 {
		t.Fatalf("owners %v", o)
	}
}

// TestGroupHandOver: a classic group handed over to a KIP-848 group answers its parked requests with
// ErrRebalanceInProgress, turns Empty with its generation, and asks for the Empty group's record.
func TestGroupHandOver(t *testing.T) {
	h := newHarness(t, testConfig())
	ref, id := h.joinNew(joinReq("a", ""))
	first := h.mustJoin(ref, nil)
	h.mustSync(h.sync(id, first.Generation, MemberAssignment{MemberID: id, Assignment: consumerAssignment(0)}), nil)
	h.wantState(Stable)
	ref2, _ := h.joinNew(joinReq("b", ""))
	h.wantState(PreparingRebalance)
	if md := h.g.Snapshot(); len(md.Members) != 2 || md.Generation != first.Generation {
		t.Fatalf("snapshot %+v", md)
	}
	records := len(h.records)
	h.apply(h.g.HandOver())
	h.mustJoin(ref2, ErrRebalanceInProgress)
	h.wantState(Empty)
	if h.g.Generation() != first.Generation || h.g.ProtocolType() != "consumer" {
		t.Fatalf("after the hand-over: generation %d, protocol type %q", h.g.Generation(), h.g.ProtocolType())
	}
	if len(h.records) != records+1 || len(h.records[records].Metadata.Members) != 0 || h.records[records].Tombstone {
		t.Fatalf("records after the hand-over: %+v", h.records[records:])
	}
}
