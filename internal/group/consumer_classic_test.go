package group

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
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
			func(x, y TopicPartitions) bool {
				return x.TopicID == y.TopicID && slices.Equal(x.Partitions, y.Partitions)
			}) {
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

// simClassic is a classic consumer in a KIP-848 group as the mixed property test models it: it joins,
// syncs at once, starts on new partitions at once and gives up the ones its assignment lost just before
// its next request (half the time one request later), then rejoins owning what it kept; it rejoins when
// a heartbeat says so. An eager one gives up everything before each join.
type simClassic struct {
	name                 string
	id                   string
	instance             string
	topics               []string
	eager                bool
	gen                  int32
	owned, revoke        partSet
	joined, rejoin, slow bool
	crashed              bool
	lastBeat             time.Time
}

// view is c as checkOwnership and checkConverged see a client.
func (c *simClassic) view() *simConsumer {
	return &simConsumer{id: c.id, topics: c.topics, epoch: c.gen, owned: c.owned, crashed: c.crashed}
}

func (c *simClassic) act(t *testing.T, g *ConsumerGroup, now time.Time, topics fakeTopics, rng *rand.Rand) {
	c.lastBeat = now
	if len(c.revoke) > 0 {
		if !c.slow && rng.IntN(2) == 0 {
			c.slow = true
			c.heartbeat(t, g, now)
			return
		}
		for tp := range c.revoke {
			delete(c.owned, tp)
		}
		c.revoke, c.rejoin, c.slow = nil, true, false
	}
	if !c.joined || c.rejoin {
		c.join(t, g, now, topics)
		return
	}
	c.heartbeat(t, g, now)
}

func (c *simClassic) heartbeat(t *testing.T, g *ConsumerGroup, now time.Time) {
	switch err := g.ClassicHeartbeat(now, HeartbeatRequest{MemberID: c.id, Generation: c.gen}); {
	case errors.Is(err, ErrRebalanceInProgress):
		c.rejoin = true
	case err != nil:
		// A client that heartbeats within its session and rejoins when told is never removed.
		t.Fatalf("heartbeat of classic %s at %d: %v\n%+v", c.name, c.gen, err, g.Describe())
	}
}

func (c *simClassic) join(t *testing.T, g *ConsumerGroup, now time.Time, topics fakeTopics) {
	if c.eager {
		c.owned = partSet{}
	}
	names := map[[16]byte]string{}
	for name, info := range topics {
		names[info.ID] = name
	}
	md := kmsg.NewConsumerMemberMetadata()
	md.Version, md.Topics = 1, c.topics
	for _, tp := range c.owned.byTopic() {
		o := kmsg.NewConsumerMemberMetadataOwnedPartition()
		o.Topic, o.Partitions = names[tp.TopicID], tp.Partitions
		md.OwnedPartitions = append(md.OwnedPartitions, o)
	}
	j := g.ClassicJoin(now, JoinRequest{MemberID: c.id, InstanceID: c.instance, ClientID: c.name, ProtocolType: "consumer",
		Protocols:      []Protocol{{Name: "cooperative-sticky", Metadata: md.AppendTo(nil)}},
		SessionTimeout: 30 * time.Second, RebalanceTimeout: 30 * time.Second}, topics)
	if j.Err != nil {
		t.Fatalf("join of classic %s (%q): %v\n%+v", c.name, c.id, j.Err, g.Describe())
	}
	c.id, c.gen = j.MemberID, j.Generation
	s := g.ClassicSync(now, SyncRequest{MemberID: c.id, Generation: c.gen})
	if s.Err != nil {
		t.Fatalf("sync of classic %s: %v", c.name, s.Err)
	}
	assigned, err := decodeAssignment(s.Assignment, topics)
	if err != nil {
		t.Fatal(err)
	}
	c.revoke = partSet{}
	for tp := range c.owned {
		if !assigned.has(tp) {
			c.revoke[tp] = struct{}{}
		}
	}
	maps.Copy(c.owned, assigned)
	c.joined, c.rejoin = true, false
}

// TestConsumerGroupMixedChurnProperty is TestConsumerGroupChurnProperty with classic members: each seed
// starts from a classic group of two cooperative members converted by a KIP-848 join, then joins
// (KIP-848, cooperative and eager classic, half of the classic ones static), leaves, crashes, restarts
// of static classic members (as classic or with the consumer protocol) and partitions added come at
// random. No
// partition is ever owned by two running clients, and after the churn every subscribed partition is
// owned by exactly one member at the group epoch.
func TestConsumerGroupMixedChurnProperty(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, seed))
		topics := fakeTopics{"a": {ID: topicID("a"), Partitions: 6}, "b": {ID: topicID("b"), Partitions: 3}}
		now := time.Unix(1000, 0)
		md := classicMetadata()
		for i := range md.Members {
			md.Members[i].Subscription = consumerMetadataOf("a")
			md.Members[i].Assignment = assignmentOf("a", int32(3*i), int32(3*i+1), int32(3*i+2))
			md.Members[i].SessionTimeout, md.Members[i].RebalanceTimeout = 30*time.Second, 30*time.Second
		}
		g, err := ConsumerGroupFromClassic(md, testConsumerConfig(), topics, now)
		if err != nil {
			t.Fatal(err)
		}
		var consumers []*simConsumer
		var classics []*simClassic
		for i, mm := range md.Members {
			c := &simClassic{name: mm.MemberID, id: mm.MemberID, topics: []string{"a"}, gen: md.Generation, joined: true,
				owned: partSet{}, lastBeat: now}
			for p := range int32(3) {
				c.owned[tidp{topicID("a"), int32(3*i) + p}] = struct{}{}
			}
			classics = append(classics, c)
		}
		views := func() []*simConsumer {
			out := slices.Clone(consumers)
			for _, c := range classics {
				out = append(out, c.view())
			}
			return out
		}
		subs := [][]string{{"a"}, {"a", "b"}}
		nextID := 0
		for step := range 300 {
			now = now.Add(time.Second)
			switch op := rng.IntN(20); {
			case op == 0:
				nextID++
				consumers = append(consumers, &simConsumer{id: fmt.Sprintf("k%d", nextID), topics: subs[rng.IntN(2)], owned: partSet{}})
			case op == 1:
				nextID++
				c := &simClassic{name: fmt.Sprintf("c%d", nextID), topics: subs[rng.IntN(2)], eager: rng.IntN(2) == 0,
					owned: partSet{}}
				if rng.IntN(2) == 0 {
					c.instance = fmt.Sprintf("i%d", nextID)
				}
				classics = append(classics, c)
			case op == 2 && len(classics) > 0:
				if c := classics[rng.IntN(len(classics))]; !c.crashed && c.joined {
					if errs := g.ClassicLeave([]LeaveMember{{MemberID: c.id}}); errs[0] != nil {
						t.Fatalf("seed %d: leave of %s: %v", seed, c.name, errs[0])
					}
					c.crashed = true
				}
			case op == 3 && len(consumers) > 0:
				consumers[rng.IntN(len(consumers))].crashed = true
			case op == 4 && len(classics) > 0:
				classics[rng.IntN(len(classics))].crashed = true
			case op == 6 && len(classics) > 0:
				// A static classic member restarts, as classic or with the consumer protocol; its old
				// incarnation is gone and did not leave.
				c := classics[rng.IntN(len(classics))]
				if c.crashed || !c.joined || c.instance == "" {
					break
				}
				c.crashed = true
				nextID++
				if rng.IntN(2) == 0 {
					classics = append(classics, &simClassic{name: fmt.Sprintf("c%d", nextID), instance: c.instance,
						topics: c.topics, eager: c.eager, owned: partSet{}})
				} else {
					consumers = append(consumers, &simConsumer{id: fmt.Sprintf("k%d", nextID), instance: c.instance,
						topics: c.topics, owned: partSet{}})
				}
			case op == 5 && rng.IntN(4) == 0:
				info := topics["b"]
				info.Partitions++
				topics["b"] = info
			case op < 12 && len(consumers) > 0:
				if c := consumers[rng.IntN(len(consumers))]; !c.crashed {
					c.heartbeat(t, g, now, topics, rng)
				}
			default:
				if len(classics) > 0 {
					if c := classics[rng.IntN(len(classics))]; !c.crashed {
						c.act(t, g, now, topics, rng)
					}
				}
			}
			for _, c := range consumers {
				if !c.crashed && now.Sub(c.lastBeat) > 20*time.Second {
					c.heartbeat(t, g, now, topics, rng)
				}
			}
			for _, c := range classics {
				if !c.crashed && now.Sub(c.lastBeat) > 10*time.Second {
					c.act(t, g, now, topics, rng)
				}
			}
			if d := g.Deadline(); !d.IsZero() && !now.Before(d) {
				g.Tick(now)
			}
			checkOwnership(t, seed, step, g, views())
		}
		for round := range 8 + int(DefaultConsumerSessionTimeout/(10*time.Second)) {
			now = now.Add(10 * time.Second)
			for _, c := range consumers {
				if !c.crashed {
					c.heartbeat(t, g, now, topics, rng)
				}
			}
			for _, c := range classics {
				if !c.crashed {
					c.act(t, g, now, topics, rng)
				}
			}
			checkOwnership(t, seed, 1000+round, g, views())
			if d := g.Deadline(); !d.IsZero() && !now.Before(d) {
				g.Tick(now)
			}
		}
		var live []*simConsumer
		for _, c := range views() {
			if !c.crashed {
				live = append(live, c)
			}
		}
		checkConverged(t, seed, g, live, topics)
	}
}

// consumerMetadataOf is a consumer's JoinGroup metadata subscribing to topic.
func consumerMetadataOf(topic string) []byte {
	md := kmsg.NewConsumerMemberMetadata()
	md.Topics = []string{topic}
	return md.AppendTo(nil)
}

// assignmentOf is a ConsumerMemberAssignment of partitions of topic.
func assignmentOf(topic string, partitions ...int32) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	at := kmsg.NewConsumerMemberAssignmentTopic()
	at.Topic, at.Partitions = topic, partitions
	a.Topics = append(a.Topics, at)
	return a.AppendTo(nil)
}

// TestConsumerGroupDowngradeToClassic: once the last KIP-848 member of an upgraded group leaves, the
// classic members make a classic group again: at the highest member epoch, with what each owns, in a
// rebalance that they complete as any classic group does.
func TestConsumerGroupDowngradeToClassic(t *testing.T) {
	now := time.Unix(1000, 0)
	topics := fakeTopics{"t": {ID: topicID("t"), Partitions: 6}}
	md := classicMetadata()
	md.Group = "g1"
	g, err := ConsumerGroupFromClassic(md, testConsumerConfig(), topics, now)
	if err != nil {
		t.Fatal(err)
	}
	spare, err := New("g1", testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := g.Downgrade(spare, now); !ok || spare.State() != PreparingRebalance {
		t.Fatalf("a group of classic members only is not downgraded: %v", spare.State())
	}
	g.Heartbeat(now, consumerJoin("k", "t"), topics)
	h := newHarness(t, testConfig())
	if _, ok := g.Downgrade(h.g, now); ok || h.g.State() != Empty {
		t.Fatal("a group with a KIP-848 member was downgraded")
	}
	// c1 moves to epoch 6 and gives k a partition; c2 stays at 5, still owning its three.
	g.ClassicJoin(now, classicJoinReq("c1", 0, 1, 2), topics)
	kept := assignedPartitions(t, g.ClassicSync(now, SyncRequest{MemberID: "c1", Generation: 5}).Assignment)
	if j := g.ClassicJoin(now, classicJoinReq("c1", kept...), topics); j.Generation != 6 {
		t.Fatalf("c1 rejoins: %+v", j)
	}
	k := g.Heartbeat(now, ConsumerHeartbeat{MemberID: "k", MemberEpoch: 6, RebalanceTimeout: -1}, topics)
	if len(parts(k)) != 1 {
		t.Fatalf("k owns %v", parts(k))
	}
	g.Heartbeat(now, ConsumerHeartbeat{MemberID: "k", MemberEpoch: LeaveEpoch}, topics)

	out, ok := g.Downgrade(h.g, now)
	if !ok {
		t.Fatal("not downgraded after the last KIP-848 member left")
	}
	h.apply(out)
	h.wantState(PreparingRebalance)
	cg := h.g
	d := cg.Describe()
	if cg.Generation() != 6 || len(d.Members) != 2 || d.Members[0].MemberID != "c1" {
		t.Fatalf("downgraded: generation %d, %+v", cg.Generation(), d)
	}
	if err := h.heartbeat("c1", 6); !errors.Is(err, ErrRebalanceInProgress) {
		t.Fatalf("c1 heartbeat at its epoch: %v, want ErrRebalanceInProgress", err)
	}
	if err := h.heartbeat("c2", 5); !errors.Is(err, ErrIllegalGeneration) {
		t.Fatalf("c2 heartbeat at its older epoch: %v, want ErrIllegalGeneration", err)
	}
	r1 := h.join(classicJoinReq("c1", kept...))
	r2 := h.join(classicJoinReq("c2", 3, 4, 5))
	j1 := h.mustJoin(r1, nil)
	h.mustJoin(r2, nil)
	if j1.Generation != 7 || j1.Leader != "c1" || j1.Protocol != "cooperative-sticky" || len(j1.Members) != 2 {
		t.Fatalf("c1's join: %+v", j1)
	}
	s1 := h.sync("c1", 7, MemberAssignment{MemberID: "c1", Assignment: consumerAssignment(0, 1, 2)},
		MemberAssignment{MemberID: "c2", Assignment: consumerAssignment(3, 4, 5)})
	s2 := h.sync("c2", 7)
	h.mustSync(s1, nil)
	if got := assignedPartitions(t, h.mustSync(s2, nil).Assignment); !slices.Equal(got, []int32{3, 4, 5}) {
		t.Fatalf("c2 got %v", got)
	}
	h.wantState(Stable)
}

// TestConsumerGroupDowngradeNeedsACommonProtocol: classic members that share no protocol stay in the
// KIP-848 group.
func TestConsumerGroupDowngradeNeedsACommonProtocol(t *testing.T) {
	now := time.Unix(1000, 0)
	topics := fakeTopics{"t": {ID: topicID("t"), Partitions: 6}}
	g, err := ConsumerGroupFromClassic(classicMetadata(), testConsumerConfig(), topics, now)
	if err != nil {
		t.Fatal(err)
	}
	req := classicJoinReq("c1", 0, 1, 2)
	req.Protocols[0].Name = "range"
	g.ClassicJoin(now, req, topics)
	h := newHarness(t, testConfig())
	if _, ok := g.Downgrade(h.g, now); ok || h.g.State() != Empty {
		t.Fatal("members with no protocol in common downgraded")
	}
}

// TestGroupAdopt: a group takes members back only when Empty, only metadata of its own id and only
// whole metadata, and changes nothing otherwise; it keeps counting its tickets.
func TestGroupAdopt(t *testing.T) {
	h := newHarness(t, testConfig())
	ref, id := h.joinNew(joinReq("a", ""))
	h.mustSync(h.sync(id, h.mustJoin(ref, nil).Generation), nil)
	h.apply(h.g.HandOver())
	tickets := h.g.tickets
	md := Metadata{Group: "g1", ProtocolType: "consumer", Protocol: "range", Generation: 9, Members: []MemberMetadata{
		{MemberID: "x", SessionTimeout: testSession}, {MemberID: "y", SessionTimeout: testSession}}}
	for _, tc := range []struct {
		name string
		mod  func(*Metadata)
		want error
	}{
		{"another group", func(m *Metadata) { m.Group = "other" }, ErrInvalidRecord},
		{"no protocol", func(m *Metadata) { m.Protocol = "" }, ErrInvalidRecord},
		{"member twice", func(m *Metadata) { m.Members[1].MemberID = "x" }, ErrInvalidRecord},
		{"no session timeout", func(m *Metadata) { m.Members[1].SessionTimeout = 0 }, ErrInvalidRecord},
	} {
		bad := md
		bad.Members = slices.Clone(md.Members)
		tc.mod(&bad)
		if _, err := h.g.Adopt(bad, h.now); !errors.Is(err, tc.want) || h.g.State() != Empty || len(h.g.members) != 0 {
			t.Fatalf("%s: %v, state %v with %d members; want %v and no change", tc.name, err, h.g.State(), len(h.g.members), tc.want)
		}
	}
	out, err := h.g.Adopt(md, h.now)
	if err != nil {
		t.Fatal(err)
	}
	h.apply(out)
	h.wantState(PreparingRebalance)
	if h.g.Generation() != 9 || h.g.tickets != tickets {
		t.Fatalf("adopted: generation %d, tickets %d (were %d)", h.g.Generation(), h.g.tickets, tickets)
	}
	if _, err := h.g.Adopt(md, h.now); !errors.Is(err, ErrNonEmptyGroup) {
		t.Fatalf("adopting into a group with members: %v", err)
	}
}

// TestConsumerGroupClassicStaticMembers: a static classic member that restarts (a join with its
// instance id and no member id) takes over its old incarnation, partitions and epoch, without a
// rebalance, and the old member id is fenced; a static classic member restarted with the consumer
// protocol (a rolling upgrade) replaces the classic one, whose partitions go to the new member.
func TestConsumerGroupClassicStaticMembers(t *testing.T) {
	now := time.Unix(1000, 0)
	topics := fakeTopics{"t": {ID: topicID("t"), Partitions: 6}}
	md := classicMetadata()
	md.Members[0].InstanceID, md.Members[1].InstanceID = "i1", "i2"
	g, err := ConsumerGroupFromClassic(md, testConsumerConfig(), topics, now)
	if err != nil {
		t.Fatal(err)
	}
	// The first request after the conversion computes the target assignment afresh (epoch 6); the
	// sticky assignor leaves every partition where it is.
	if err := g.ClassicHeartbeat(now, HeartbeatRequest{MemberID: "c1", InstanceID: "i1", Generation: 5}); err != nil {
		t.Fatal(err)
	}
	req := classicJoinReq("")
	req.InstanceID = "i1"
	j := g.ClassicJoin(now, req, topics)
	if j.Err != nil || j.MemberID == "c1" || j.Generation != 6 {
		t.Fatalf("restart of i1: %+v", j)
	}
	s := g.ClassicSync(now, SyncRequest{MemberID: j.MemberID, InstanceID: "i1", Generation: 6})
	if got := assignedPartitions(t, s.Assignment); s.Err != nil || !slices.Equal(got, []int32{0, 1, 2}) {
		t.Fatalf("restarted i1 syncs: %+v, partitions %v", s, got)
	}
	if d := g.Describe(); d.Epoch != 6 || len(d.Members) != 2 {
		t.Fatalf("after the static restart: %+v", d)
	}
	if err := g.ClassicHeartbeat(now, HeartbeatRequest{MemberID: "c1", InstanceID: "i1", Generation: 5}); !errors.Is(err, ErrFencedInstanceID) {
		t.Fatalf("old incarnation of i1: %v, want ErrFencedInstanceID", err)
	}
	if o := owners(t, g); o[0] != j.MemberID {
		t.Fatalf("owners %v", o)
	}

	up := consumerJoin("k2", "t")
	up.InstanceID = "i2"
	k := g.Heartbeat(now, up, topics)
	if k.Err != nil || k.MemberEpoch != 7 {
		t.Fatalf("i2 rejoins with the consumer protocol: %+v", k)
	}
	if err := g.ClassicHeartbeat(now, HeartbeatRequest{MemberID: "c2", Generation: 5}); !errors.Is(err, ErrUnknownMemberID) {
		t.Fatalf("replaced classic i2: %v, want ErrUnknownMemberID", err)
	}
	if got := parts(k); !slices.Equal(got, []int32{3, 4, 5}) {
		t.Fatalf("k2 got %v, want what classic i2 had", got)
	}
	taken := consumerJoin("k3", "t")
	taken.InstanceID = "i2"
	if r := g.Heartbeat(now, taken, topics); !errors.Is(r.Err, ErrUnreleasedInstanceID) {
		t.Fatalf("a join naming a KIP-848 member's instance: %v, want ErrUnreleasedInstanceID", r.Err)
	}
}
