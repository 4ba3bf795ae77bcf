package group

import (
	"errors"
	"fmt"
	"iter"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// fakeTopics is a Topics over a map.
type fakeTopics map[string]TopicInfo

func (f fakeTopics) Lookup(name string) (TopicInfo, bool) {
	t, ok := f[name]
	return t, ok
}

func (f fakeTopics) All() iter.Seq2[string, TopicInfo] { return maps.All(f) }

func topicID(name string) [16]byte {
	var id [16]byte
	copy(id[:], name)
	return id
}

func newTestConsumerGroup(t *testing.T) *ConsumerGroup {
	t.Helper()
	n := 0
	g, err := NewConsumerGroup("g", ConsumerConfig{NewMemberID: func(p string) string { n++; return fmt.Sprintf("%s-%d", p, n) }})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func consumerJoin(id string, topics ...string) ConsumerHeartbeat {
	return ConsumerHeartbeat{MemberID: id, MemberEpoch: JoinEpoch, RebalanceTimeout: time.Minute,
		SubscribedTopics: topics, Owned: []TopicPartitions{}}
}

func parts(resp ConsumerHeartbeatResponse) []int32 {
	var out []int32
	for _, t := range resp.Assignment {
		out = append(out, t.Partitions...)
	}
	slices.Sort(out)
	return out
}

// TestConsumerGroupRevokesBeforeAssigning walks the reconciliation of a second member joining: the
// first keeps half of its partitions and stays at its epoch until it reports having revoked the rest;
// only then does the newcomer get them.
func TestConsumerGroupRevokesBeforeAssigning(t *testing.T) {
	g := newTestConsumerGroup(t)
	now := time.Unix(1000, 0)
	topics := fakeTopics{"t": {ID: topicID("t"), Partitions: 6}}
	a := g.Heartbeat(now, consumerJoin("a", "t"), topics)
	if a.Err != nil || a.MemberEpoch != 1 || !slices.Equal(parts(a), []int32{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("first join: %+v, partitions %v", a, parts(a))
	}
	b := g.Heartbeat(now, consumerJoin("b", "t"), topics)
	if b.Err != nil || b.MemberEpoch != 2 || len(parts(b)) != 0 || b.Assignment == nil {
		t.Fatalf("second join: %+v; want epoch 2 and an empty assignment while a owns everything", b)
	}
	// a heartbeats without saying what it owns: it is told to keep three and stays at epoch 1.
	a = g.Heartbeat(now, ConsumerHeartbeat{MemberID: "a", MemberEpoch: 1, RebalanceTimeout: -1}, topics)
	if a.Err != nil || a.MemberEpoch != 1 || len(parts(a)) != 3 {
		t.Fatalf("a while revoking: %+v, partitions %v", a, parts(a))
	}
	kept := parts(a)
	b = g.Heartbeat(now, ConsumerHeartbeat{MemberID: "b", MemberEpoch: 2, RebalanceTimeout: -1}, topics)
	if b.Err != nil || len(parts(b)) != 0 {
		t.Fatalf("b before a revoked: %+v, partitions %v; want none", b, parts(b))
	}
	if s := g.ConsumerState(); s != "Reconciling" {
		t.Fatalf("state %s, want Reconciling", s)
	}
	a = g.Heartbeat(now, ConsumerHeartbeat{MemberID: "a", MemberEpoch: 1, RebalanceTimeout: -1,
		Owned: []TopicPartitions{{TopicID: topicID("t"), Partitions: kept}}}, topics)
	if a.Err != nil || a.MemberEpoch != 2 || !slices.Equal(parts(a), kept) {
		t.Fatalf("a after revoking: %+v, partitions %v", a, parts(a))
	}
	b = g.Heartbeat(now, ConsumerHeartbeat{MemberID: "b", MemberEpoch: 2, RebalanceTimeout: -1}, topics)
	all := append(parts(b), kept...)
	slices.Sort(all)
	if b.Err != nil || len(parts(b)) != 3 || !slices.Equal(all, []int32{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("b after a revoked: %+v, partitions %v (a kept %v)", b, parts(b), kept)
	}
	if s := g.ConsumerState(); s != "Stable" {
		t.Fatalf("state %s, want Stable", s)
	}
}

// TestConsumerGroupEpochChecks covers the member epoch rules of heartbeats and of offset commits.
func TestConsumerGroupEpochChecks(t *testing.T) {
	g := newTestConsumerGroup(t)
	now := time.Unix(1000, 0)
	topics := fakeTopics{"t": {ID: topicID("t"), Partitions: 2}}
	g.Heartbeat(now, consumerJoin("a", "t"), topics)
	g.Heartbeat(now, consumerJoin("b", "t"), topics) // epoch 2; a is still at 1
	hb := func(id string, epoch int32) ConsumerHeartbeatResponse {
		return g.Heartbeat(now, ConsumerHeartbeat{MemberID: id, MemberEpoch: epoch, RebalanceTimeout: -1}, topics)
	}
	if r := hb("a", 7); !errors.Is(r.Err, ErrFencedMemberEpoch) {
		t.Errorf("epoch ahead: %v, want ErrFencedMemberEpoch", r.Err)
	}
	if r := hb("nobody", 1); !errors.Is(r.Err, ErrUnknownMemberID) {
		t.Errorf("unknown member: %v, want ErrUnknownMemberID", r.Err)
	}
	if err := g.ValidateMember("b", 2); err != nil {
		t.Errorf("commit at the member's epoch: %v", err)
	}
	if err := g.ValidateMember("b", 1); !errors.Is(err, ErrStaleMemberEpoch) {
		t.Errorf("commit at an old epoch: %v, want ErrStaleMemberEpoch", err)
	}
	if err := g.ValidateMember("", -1); !errors.Is(err, ErrUnknownMemberID) {
		t.Errorf("admin commit to a group with members: %v, want ErrUnknownMemberID", err)
	}
	// a moves to epoch 2 once it released a partition; a heartbeat at its previous epoch (the answer
	// that moved it on was lost) is accepted and gets that answer again.
	r := hb("a", 1)
	r = g.Heartbeat(now, ConsumerHeartbeat{MemberID: "a", MemberEpoch: 1, RebalanceTimeout: -1,
		Owned: []TopicPartitions{{TopicID: topicID("t"), Partitions: parts(r)}}}, topics)
	if r.Err != nil || r.MemberEpoch != 2 {
		t.Fatalf("a after revoking: %+v", r)
	}
	if r := hb("a", 1); r.Err != nil || r.MemberEpoch != 2 || r.Assignment == nil {
		t.Errorf("a at its previous epoch: %+v, want its assignment again at epoch 2", r)
	}
	// KIP-1251: a commit at an older epoch is accepted for partitions the member had at that epoch.
	kept := TopicPartition{Topic: "t", Partition: parts(r)[0]}
	other := TopicPartition{Topic: "t", Partition: 1 - kept.Partition}
	r = hb("b", 2)
	if r.Err != nil || !slices.Equal(parts(r), []int32{other.Partition}) {
		t.Fatalf("b after a revoked: %+v", r)
	}
	for _, tc := range []struct {
		member string
		epoch  int32
		tp     TopicPartition
		want   error
	}{
		{"a", 1, kept, nil}, {"a", 2, kept, nil}, {"a", 1, other, ErrStaleMemberEpoch}, {"a", 3, kept, ErrStaleMemberEpoch},
		{"b", 2, other, nil}, {"b", 1, other, ErrStaleMemberEpoch}, {"nobody", 2, other, ErrUnknownMemberID},
	} {
		if err := g.ValidateCommit(tc.member, tc.epoch, []TopicPartition{tc.tp}); !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
			t.Errorf("commit of %v by %s at epoch %d: %v, want %v", tc.tp, tc.member, tc.epoch, err, tc.want)
		}
	}
	if r := hb("a", LeaveEpoch); r.Err != nil || r.MemberEpoch != LeaveEpoch {
		t.Errorf("leave: %+v", r)
	}
	if err := g.ValidateMember("a", 2); !errors.Is(err, ErrUnknownMemberID) {
		t.Errorf("commit of a member that left: %v, want ErrUnknownMemberID", err)
	}
}

// TestConsumerGroupBadJoins: each malformed join gets its error and changes nothing.
func TestConsumerGroupBadJoins(t *testing.T) {
	g := newTestConsumerGroup(t)
	now := time.Unix(1000, 0)
	topics := fakeTopics{"t": {ID: topicID("t"), Partitions: 2}}
	g.Heartbeat(now, consumerJoin("a", "t"), topics)
	bad := func(s string) *string { return &s }
	for _, tc := range []struct {
		name string
		req  ConsumerHeartbeat
		want error
	}{
		{"owned nil", ConsumerHeartbeat{MemberID: "b", RebalanceTimeout: time.Minute, SubscribedTopics: []string{"t"}}, ErrInvalidRequest},
		{"owns partitions", ConsumerHeartbeat{MemberID: "b", RebalanceTimeout: time.Minute, SubscribedTopics: []string{"t"},
			Owned: []TopicPartitions{{TopicID: topicID("t"), Partitions: []int32{0}}}}, ErrInvalidRequest},
		{"no subscription", ConsumerHeartbeat{MemberID: "b", RebalanceTimeout: time.Minute, Owned: []TopicPartitions{}}, ErrInvalidRequest},
		{"no rebalance timeout", ConsumerHeartbeat{MemberID: "b", RebalanceTimeout: -1, SubscribedTopics: []string{"t"},
			Owned: []TopicPartitions{}}, ErrInvalidRequest},
		{"bad regex", ConsumerHeartbeat{MemberID: "b", RebalanceTimeout: time.Minute, SubscribedRegex: bad("t("),
			Owned: []TopicPartitions{}}, ErrInvalidRegularExpression},
		{"unknown assignor", ConsumerHeartbeat{MemberID: "b", RebalanceTimeout: time.Minute, SubscribedTopics: []string{"t"},
			ServerAssignor: bad("sticky"), Owned: []TopicPartitions{}}, ErrUnsupportedAssignor},
		{"bad regex of a member", ConsumerHeartbeat{MemberID: "a", MemberEpoch: 1, RebalanceTimeout: -1, SubscribedRegex: bad("[")},
			ErrInvalidRegularExpression},
	} {
		before := g.Describe()
		if r := g.Heartbeat(now, tc.req, topics); !errors.Is(r.Err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, r.Err, tc.want)
		}
		if after := g.Describe(); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("%s changed the group:\n%+v\n%+v", tc.name, before, after)
		}
	}
}

// TestConsumerGroupTimeouts: a silent member is removed at its session timeout, and a member that does
// not revoke is removed at its rebalance timeout, freeing its partitions for the others.
func TestConsumerGroupTimeouts(t *testing.T) {
	g := newTestConsumerGroup(t)
	now := time.Unix(1000, 0)
	topics := fakeTopics{"t": {ID: topicID("t"), Partitions: 4}}
	g.Heartbeat(now, consumerJoin("a", "t"), topics)
	g.Heartbeat(now, consumerJoin("b", "t"), topics)
	g.Heartbeat(now, ConsumerHeartbeat{MemberID: "a", MemberEpoch: 1, RebalanceTimeout: -1}, topics) // a must revoke two
	if d := g.Deadline(); !d.Equal(now.Add(DefaultConsumerSessionTimeout)) {
		t.Fatalf("deadline %v, want the session end", d)
	}
	// b keeps heartbeating; a never reports its revocation and is removed after its rebalance timeout.
	at := now.Add(30 * time.Second)
	g.Heartbeat(at, ConsumerHeartbeat{MemberID: "b", MemberEpoch: 2, RebalanceTimeout: -1}, topics)
	g.Tick(now.Add(time.Minute))
	if len(g.members) != 1 || g.members["b"] == nil {
		t.Fatalf("members after a's rebalance timeout: %v", slices.Sorted(maps.Keys(g.members)))
	}
	r := g.Heartbeat(now.Add(time.Minute), ConsumerHeartbeat{MemberID: "b", MemberEpoch: 2, RebalanceTimeout: -1}, topics)
	if r.Err != nil || len(parts(r)) != 4 {
		t.Fatalf("b after a was removed: %+v", r)
	}
	g.Tick(now.Add(time.Minute + DefaultConsumerSessionTimeout))
	if !g.Empty() || g.ConsumerState() != "Empty" {
		t.Fatalf("b outlived its session: %+v", g.Describe())
	}
}

// TestConsumerAssignors checks the shapes of the two assignors.
func TestConsumerAssignors(t *testing.T) {
	topics := map[string]TopicInfo{"x": {ID: topicID("x"), Partitions: 7}, "y": {ID: topicID("y"), Partitions: 7}}
	members := []assignMember{{"m1", []string{"x", "y"}}, {"m2", []string{"x", "y"}}, {"m3", []string{"x", "y"}}}
	r := assignRange(members, topics)
	for _, tc := range []struct {
		id   string
		want []int32
	}{{"m1", []int32{0, 1, 2}}, {"m2", []int32{3, 4}}, {"m3", []int32{5, 6}}} {
		for _, topic := range []string{"x", "y"} {
			var got []int32
			for tp := range r[tc.id] {
				if tp.id == topicID(topic) {
					got = append(got, tp.p)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("range: %s has %v of %s, want %v", tc.id, got, topic, tc.want)
			}
		}
	}
	u := assignUniform(members, topics, nil)
	for _, m := range members {
		if n := len(u[m.id]); n < 4 || n > 5 {
			t.Errorf("uniform: %s has %d of 14 partitions", m.id, n)
		}
	}
	// A fourth member takes partitions from the others; nobody else's partition moves.
	members = append(members, assignMember{"m4", []string{"x", "y"}})
	u2 := assignUniform(members, topics, u)
	moved := 0
	for _, m := range members[:3] {
		if !u2[m.id].subsetOf(u[m.id]) {
			t.Errorf("uniform: %s gained partitions when m4 joined", m.id)
		}
		moved += len(u[m.id]) - len(u2[m.id])
	}
	if n := len(u2["m4"]); n != moved || n < 3 || n > 4 {
		t.Errorf("uniform: m4 got %d partitions, %d moved", n, moved)
	}
}

// simConsumer is a consumer as the property test models it: it starts on partitions it is given at
// once, but gives up revoked ones only just before its next heartbeat (revoking takes a client time:
// callbacks, a last commit), which it then reports. It reports what it owns when that changed, and at
// random besides. Half the time a revocation takes one heartbeat more (slow is set meanwhile).
type simConsumer struct {
	slow     bool
	id       string
	instance string
	topics   []string
	epoch    int32
	joined   bool
	owned    partSet
	target   partSet
	reported bool
	crashed  bool
	lastBeat time.Time
}

func (c *simConsumer) heartbeat(t *testing.T, g *ConsumerGroup, now time.Time, topics fakeTopics, rng *rand.Rand) {
	if c.target != nil && !c.owned.equal(c.target) {
		if c.slow || rng.IntN(2) == 0 {
			c.owned, c.reported, c.slow = maps.Clone(c.target), false, false
		} else {
			c.slow = true
		}
	}
	req := ConsumerHeartbeat{MemberID: c.id, MemberEpoch: c.epoch, RebalanceTimeout: -1}
	if !c.joined {
		req = consumerJoin(c.id, c.topics...)
		req.InstanceID = c.instance
		if rng.IntN(2) == 0 {
			req.ServerAssignor = new(AssignorUniform)
		}
	} else if !c.reported || rng.IntN(4) == 0 {
		req.Owned = c.owned.byTopic()
	}
	r := g.Heartbeat(now, req, topics)
	c.lastBeat = now
	if r.Err != nil {
		// A client that heartbeats within its session and revokes by its next heartbeat is never fenced.
		t.Fatalf("heartbeat of %s at epoch %d: %v\n%+v", c.id, c.epoch, r.Err, g.Describe())
	}
	c.joined, c.epoch = true, r.MemberEpoch
	if req.Owned != nil {
		c.reported = true
	}
	if r.Assignment != nil {
		c.target = setOf(r.Assignment)
		for tp := range c.target {
			if !c.owned.has(tp) {
				c.owned[tp] = struct{}{}
				c.reported = false
			}
		}
	}
}

// checkOwnership fails when two running clients own one partition, or the group's ownership index
// disagrees with its members.
func checkOwnership(t *testing.T, seed uint64, step int, g *ConsumerGroup, clients []*simConsumer) {
	t.Helper()
	owner := map[tidp]string{}
	for _, c := range clients {
		if c.crashed {
			continue
		}
		for tp := range c.owned {
			if o, ok := owner[tp]; ok {
				t.Fatalf("seed %d step %d: partition %v owned by %s and %s", seed, step, tp, o, c.id)
			}
			owner[tp] = c.id
		}
	}
	index := map[tidp]string{}
	for _, m := range g.members {
		for _, s := range []partSet{m.assigned, m.revoking} {
			for tp := range s {
				if o, ok := index[tp]; ok {
					t.Fatalf("seed %d step %d: partition %v held by members %s and %s", seed, step, tp, o, m.id)
				}
				index[tp] = m.id
			}
		}
	}
	if !maps.Equal(index, g.owners) {
		t.Fatalf("seed %d step %d: owners index %v, members hold %v", seed, step, g.owners, index)
	}
}

// TestConsumerGroupChurnProperty drives a group with seeded random churn (joins, leaves, crashes,
// subscription changes, partitions added) and clients that heartbeat at random: no partition is ever
// owned by two running clients, and once the churn stops the group converges within a bounded number
// of heartbeat rounds to every subscribed partition owned by exactly one member, every member at the
// group epoch, and (identical subscriptions under uniform) counts that differ by at most one.
func TestConsumerGroupChurnProperty(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, seed))
		g := newTestConsumerGroup(t)
		topics := fakeTopics{"a": {ID: topicID("a"), Partitions: 6}, "b": {ID: topicID("b"), Partitions: 3}}
		now := time.Unix(1000, 0)
		var clients []*simConsumer
		subs := [][]string{{"a"}, {"a", "b"}}
		nextID := 0
		for step := range 300 {
			now = now.Add(time.Second)
			switch op := rng.IntN(20); {
			case op == 0 || len(clients) < 2:
				nextID++
				clients = append(clients, &simConsumer{id: fmt.Sprintf("c%d", nextID), topics: subs[rng.IntN(2)], owned: partSet{}})
			case op == 1:
				if c := clients[rng.IntN(len(clients))]; !c.crashed && c.joined {
					g.Heartbeat(now, ConsumerHeartbeat{MemberID: c.id, MemberEpoch: LeaveEpoch}, topics)
					c.crashed = true
				}
			case op == 2:
				clients[rng.IntN(len(clients))].crashed = true
			case op == 3 && rng.IntN(4) == 0:
				info := topics["b"]
				info.Partitions++
				topics["b"] = info
			default:
				if c := clients[rng.IntN(len(clients))]; !c.crashed {
					c.heartbeat(t, g, now, topics, rng)
				}
			}
			// Running clients heartbeat well within their session; crashed ones are removed by Tick.
			for _, c := range clients {
				if !c.crashed && now.Sub(c.lastBeat) > 20*time.Second {
					c.heartbeat(t, g, now, topics, rng)
				}
			}
			if d := g.Deadline(); !d.IsZero() && !now.Before(d) {
				g.Tick(now)
			}
			checkOwnership(t, seed, step, g, clients)
		}
		// Churn stops: the running clients heartbeat every 10 s, and the crashed ones are gone after a
		// session timeout; six rounds more converge the group.
		var live []*simConsumer
		for _, c := range clients {
			if !c.crashed {
				live = append(live, c)
			}
		}
		for round := range 6 + int(DefaultConsumerSessionTimeout/(10*time.Second)) {
			now = now.Add(10 * time.Second)
			for _, c := range live {
				c.heartbeat(t, g, now, topics, rng)
				checkOwnership(t, seed, 1000+round, g, clients)
			}
			if d := g.Deadline(); !d.IsZero() && !now.Before(d) {
				g.Tick(now)
			}
		}
		checkConverged(t, seed, g, live, topics)
	}
}

func checkConverged(t *testing.T, seed uint64, g *ConsumerGroup, live []*simConsumer, topics fakeTopics) {
	t.Helper()
	if len(g.members) != len(live) {
		t.Fatalf("seed %d: %d members, %d running clients", seed, len(g.members), len(live))
	}
	want := partSet{}
	for _, c := range live {
		for _, name := range c.topics {
			for p := range topics[name].Partitions {
				want[tidp{topics[name].ID, p}] = struct{}{}
			}
		}
	}
	got := partSet{}
	for _, c := range live {
		if c.epoch != g.epoch {
			t.Errorf("seed %d: %s at epoch %d, group at %d", seed, c.id, c.epoch, g.epoch)
		}
		maps.Copy(got, c.owned)
	}
	if !got.equal(want) {
		t.Errorf("seed %d: clients own %d partitions, %d subscribed", seed, len(got), len(want))
	}
	if g.ConsumerState() != "Stable" && len(live) > 0 {
		t.Errorf("seed %d: group %s after convergence", seed, g.ConsumerState())
	}
	homogeneous := len(live) > 0 && !slices.ContainsFunc(live, func(c *simConsumer) bool { return !slices.Equal(c.topics, live[0].topics) })
	if homogeneous && g.assignor == AssignorUniform {
		counts := []int{}
		for _, c := range live {
			counts = append(counts, len(c.owned))
		}
		if slices.Max(counts)-slices.Min(counts) > 1 {
			t.Errorf("seed %d: uniform with identical subscriptions gave counts %v", seed, counts)
		}
	}
}
