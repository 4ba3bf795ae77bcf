package share

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var (
	topicA = TopicInfo{ID: [16]byte{0xa}, Partitions: 2}
	topicB = TopicInfo{ID: [16]byte{0xb}, Partitions: 5}
)

// meta is a Topics over a map the test changes.
type meta map[string]TopicInfo

func (m meta) lookup(name string) (TopicInfo, bool) {
	ti, ok := m[name]
	return ti, ok
}

func newGroup(t *testing.T, cfg GroupConfig) *Group {
	t.Helper()
	g, err := NewGroup("g", cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func beat(t *testing.T, g *Group, md meta, now time.Time, req HeartbeatRequest) HeartbeatResponse {
	t.Helper()
	resp := g.Heartbeat(req, md.lookup, now)
	if resp.Err != nil {
		t.Fatalf("Heartbeat(%+v): %v", req, resp.Err)
	}
	return resp
}

func join(t *testing.T, g *Group, md meta, now time.Time, id string, topics ...string) HeartbeatResponse {
	t.Helper()
	return beat(t, g, md, now, HeartbeatRequest{MemberID: id, MemberEpoch: JoinEpoch, Subscribed: topics, ClientID: "c-" + id})
}

// parts prints an assignment as topic:partitions.
func parts(as []TopicAssignment) string {
	s := ""
	for _, a := range as {
		s += fmt.Sprintf("%s:%v ", a.Topic, a.Partitions)
	}
	return s
}

func TestShareGroupJoinAndLeave(t *testing.T) {
	md := meta{"a": topicA}
	g := newGroup(t, GroupConfig{})
	if g.State() != GroupEmpty || g.ID() != "g" {
		t.Fatalf("new group %s %s", g.ID(), g.State())
	}
	r1 := join(t, g, md, t0, "m1", "a")
	if r1.MemberID != "m1" || r1.MemberEpoch != 1 || r1.HeartbeatInterval != DefaultHeartbeatInterval || parts(r1.Assignment) != "a:[0 1] " {
		t.Fatalf("first join = %+v %s", r1, parts(r1.Assignment))
	}
	if r1.Assignment[0].TopicID != topicA.ID {
		t.Fatalf("topic id %v", r1.Assignment[0].TopicID)
	}
	// Three more members on two partitions: each partition goes to two members.
	for _, id := range []string{"m2", "m3", "m4"} {
		join(t, g, md, t0, id, "a")
	}
	if g.epoch != 4 {
		t.Fatalf("group epoch %d after four joins", g.epoch)
	}
	// m1 learns its new assignment on its next heartbeat, at the group's epoch.
	r := beat(t, g, md, t0, HeartbeatRequest{MemberID: "m1", MemberEpoch: 1})
	if r.MemberEpoch != 4 || parts(r.Assignment) != "a:[0] " {
		t.Fatalf("m1's heartbeat = %+v %s", r, parts(r.Assignment))
	}
	// A heartbeat at the current epoch carries no assignment; one naming the subscription does.
	if r := beat(t, g, md, t0, HeartbeatRequest{MemberID: "m1", MemberEpoch: 4}); r.Assignment != nil || r.MemberEpoch != 4 {
		t.Fatalf("keepalive = %+v", r)
	}
	if r := beat(t, g, md, t0, HeartbeatRequest{MemberID: "m1", MemberEpoch: 4, Subscribed: []string{"a"}}); parts(r.Assignment) != "a:[0] " {
		t.Fatalf("full heartbeat = %+v", r)
	}
	// The previous epoch is still accepted (the answer that moved the member may be lost), and gets the
	// assignment again.
	if r := beat(t, g, md, t0, HeartbeatRequest{MemberID: "m1", MemberEpoch: 1}); r.MemberEpoch != 4 || parts(r.Assignment) != "a:[0] " {
		t.Fatalf("heartbeat at the previous epoch = %+v", r)
	}
	d := g.Describe()
	counts := map[int32]int{}
	for _, m := range d.Members {
		for _, p := range m.Assignment[0].Partitions {
			counts[p]++
		}
	}
	if d.State != GroupStable || d.GroupEpoch != 4 || d.AssignmentEpoch != 4 || d.Assignor != "simple" || len(d.Members) != 4 || counts[0] != 2 || counts[1] != 2 {
		t.Fatalf("Describe = %+v (members per partition %v)", d, counts)
	}
	if m := d.Members[3]; m.MemberID != "m4" || m.ClientID != "c-m4" || m.MemberEpoch != 4 || !slices.Equal(m.Subscribed, []string{"a"}) {
		t.Fatalf("last member %+v", m)
	}

	r = beat(t, g, md, t0, HeartbeatRequest{MemberID: "m2", MemberEpoch: LeaveEpoch})
	if r.MemberEpoch != LeaveEpoch || r.MemberID != "m2" {
		t.Fatalf("leave = %+v", r)
	}
	if len(g.Describe().Members) != 3 || g.epoch != 5 {
		t.Fatalf("after a leave: %+v", g.Describe())
	}
	for _, id := range []string{"m1", "m3", "m4"} {
		beat(t, g, md, t0, HeartbeatRequest{MemberID: id, MemberEpoch: LeaveEpoch})
	}
	if g.State() != GroupEmpty {
		t.Fatalf("state %s after every member left", g.State())
	}
}

func TestShareGroupErrors(t *testing.T) {
	md := meta{"a": topicA}
	g := newGroup(t, GroupConfig{MembersMax: 1})
	join(t, g, md, t0, "m1", "a")
	cases := []struct {
		name string
		req  HeartbeatRequest
		want error
	}{
		{"empty member id", HeartbeatRequest{MemberEpoch: JoinEpoch, Subscribed: []string{"a"}}, ErrInvalidRequest},
		{"join without topics", HeartbeatRequest{MemberID: "m2", MemberEpoch: JoinEpoch}, ErrInvalidRequest},
		{"join past the max size", HeartbeatRequest{MemberID: "m2", MemberEpoch: JoinEpoch, Subscribed: []string{"a"}}, ErrGroupMaxSize},
		{"heartbeat of an unknown member", HeartbeatRequest{MemberID: "m2", MemberEpoch: 1}, ErrUnknownMemberID},
		{"leave of an unknown member", HeartbeatRequest{MemberID: "m2", MemberEpoch: LeaveEpoch}, ErrUnknownMemberID},
		{"a future epoch", HeartbeatRequest{MemberID: "m1", MemberEpoch: 7}, ErrFencedMemberEpoch},
		{"another negative epoch", HeartbeatRequest{MemberID: "m1", MemberEpoch: -2}, ErrFencedMemberEpoch},
	}
	for _, c := range cases {
		before := fmt.Sprintf("%+v", g.Describe())
		if r := g.Heartbeat(c.req, md.lookup, t0.Add(time.Second)); !errors.Is(r.Err, c.want) || r.MemberID != "" {
			t.Errorf("%s: %+v, want %v", c.name, r, c.want)
		}
		if after := fmt.Sprintf("%+v", g.Describe()); after != before {
			t.Errorf("%s changed the group:\n%s\nwas\n%s", c.name, after, before)
		}
	}
	if d := g.Deadline(); d != t0.Add(DefaultSessionTimeout) {
		t.Fatalf("a refused heartbeat moved the session: %v", d)
	}
	for _, cfg := range []GroupConfig{{SessionTimeout: -1}, {HeartbeatInterval: -1}, {MembersMax: -1}} {
		if _, err := NewGroup("g", cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewGroup(%+v) = %v", cfg, err)
		}
	}
}

func TestShareGroupSessions(t *testing.T) {
	md := meta{"a": topicA}
	g := newGroup(t, GroupConfig{SessionTimeout: 10 * time.Second})
	join(t, g, md, t0, "m1", "a")
	join(t, g, md, t0.Add(3*time.Second), "m2", "a")
	if d := g.Deadline(); d != t0.Add(10*time.Second) {
		t.Fatalf("Deadline = %v", d)
	}
	beat(t, g, md, t0.Add(9*time.Second), HeartbeatRequest{MemberID: "m1", MemberEpoch: 1})
	if gone := g.Expire(t0.Add(13*time.Second-time.Nanosecond), md.lookup); gone != nil {
		t.Fatalf("expired early: %v", gone)
	}
	if gone := g.Expire(t0.Add(13*time.Second), md.lookup); !slices.Equal(gone, []string{"m2"}) {
		t.Fatalf("Expire = %v", gone)
	}
	if r := beat(t, g, md, t0.Add(14*time.Second), HeartbeatRequest{MemberID: "m1", MemberEpoch: 2}); r.MemberEpoch != 3 || parts(r.Assignment) != "a:[0 1] " {
		t.Fatalf("after m2 expired m1 gets = %+v %s", r, parts(r.Assignment))
	}
	if r := g.Heartbeat(HeartbeatRequest{MemberID: "m2", MemberEpoch: 2}, md.lookup, t0.Add(14*time.Second)); !errors.Is(r.Err, ErrUnknownMemberID) {
		t.Fatalf("expired member's heartbeat: %+v", r)
	}
	g.Expire(t0.Add(time.Minute), md.lookup)
	if !g.Deadline().IsZero() || g.State() != GroupEmpty {
		t.Fatalf("Deadline %v, state %s", g.Deadline(), g.State())
	}
}

// TestShareGroupSetConfig changes the session timeout and heartbeat interval of a group with a member:
// the next heartbeat answers the new interval and starts the new timeout; the deadline of the last
// heartbeat before the change stays; a bad config changes nothing.
func TestShareGroupSetConfig(t *testing.T) {
	md := meta{"a": topicA}
	g := newGroup(t, GroupConfig{})
	if r := join(t, g, md, t0, "m1", "a"); r.HeartbeatInterval != DefaultHeartbeatInterval {
		t.Fatalf("join answered interval %v", r.HeartbeatInterval)
	}
	if err := g.SetConfig(GroupConfig{SessionTimeout: 50 * time.Second, HeartbeatInterval: 7 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if d := g.Deadline(); d != t0.Add(DefaultSessionTimeout) {
		t.Fatalf("Deadline after the change = %v, want the last heartbeat's", d)
	}
	if r := beat(t, g, md, t0.Add(time.Second), HeartbeatRequest{MemberID: "m1", MemberEpoch: 1}); r.HeartbeatInterval != 7*time.Second {
		t.Fatalf("heartbeat answered interval %v", r.HeartbeatInterval)
	}
	if d := g.Deadline(); d != t0.Add(51*time.Second) {
		t.Fatalf("Deadline = %v, want the new timeout from the heartbeat", d)
	}
	if err := g.SetConfig(GroupConfig{SessionTimeout: -time.Second}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("SetConfig of a negative timeout: %v", err)
	}
	if r := beat(t, g, md, t0.Add(2*time.Second), HeartbeatRequest{MemberID: "m1", MemberEpoch: 1}); r.HeartbeatInterval != 7*time.Second {
		t.Fatalf("after a refused change the heartbeat answered %v", r.HeartbeatInterval)
	}
}

func TestShareGroupMetadataChanges(t *testing.T) {
	md := meta{"a": topicA}
	g := newGroup(t, GroupConfig{})
	join(t, g, md, t0, "m1", "a", "b")
	if r := join(t, g, md, t0, "m2", "a"); parts(r.Assignment) != "a:[1] " {
		t.Fatalf("m2 = %s", parts(r.Assignment))
	}
	// b appears: the next heartbeat sees it, bumps the epoch, and m1 gets b's partitions.
	md["b"] = topicB
	if r := beat(t, g, md, t0, HeartbeatRequest{MemberID: "m1", MemberEpoch: 1}); r.MemberEpoch != 3 || parts(r.Assignment) != "a:[0] b:[0 1 2 3 4] " {
		t.Fatalf("m1 after b appeared = %+v %s", r, parts(r.Assignment))
	}
	// a grows to 4 partitions.
	md["a"] = TopicInfo{ID: topicA.ID, Partitions: 4}
	if r := beat(t, g, md, t0, HeartbeatRequest{MemberID: "m2", MemberEpoch: 2}); r.MemberEpoch != 4 || parts(r.Assignment) != "a:[1 3] " {
		t.Fatalf("m2 after a grew = %+v %s", r, parts(r.Assignment))
	}
	// A subscription change moves the member's topics.
	if r := beat(t, g, md, t0, HeartbeatRequest{MemberID: "m1", MemberEpoch: 3, Subscribed: []string{"b"}}); r.MemberEpoch != 5 || parts(r.Assignment) != "b:[0 1 2 3 4] " {
		t.Fatalf("m1 after subscribing to b only = %+v %s", r, parts(r.Assignment))
	}
	// b deleted: m1 has nothing.
	delete(md, "b")
	if r := beat(t, g, md, t0, HeartbeatRequest{MemberID: "m1", MemberEpoch: 5}); r.MemberEpoch != 6 || r.Assignment == nil || len(r.Assignment) != 0 {
		t.Fatalf("m1 after b was deleted = %+v", r)
	}
}

func TestShareGroupAssignorSticky(t *testing.T) {
	md := meta{"b": topicB}
	g := newGroup(t, GroupConfig{})
	for _, id := range []string{"m1", "m2"} {
		join(t, g, md, t0, id, "b")
	}
	before := g.target
	join(t, g, md, t0, "m3", "b")
	moved := 0
	for _, id := range []string{"m1", "m2"} {
		for _, p := range before[id][0].Partitions {
			if !slices.Contains(g.target[id][0].Partitions, p) {
				moved++
			}
		}
	}
	if moved != 1 || len(g.target["m3"][0].Partitions) != 1 {
		t.Fatalf("a third member took %v, and %d partitions moved; before %v", g.target["m3"], moved, before)
	}
}

// TestShareAssignTopic checks the simple assignor's bounds over random groups, with random previous
// assignments: every partition has a member, every member a partition, and the spread is even.
func TestShareAssignTopic(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		nm, np := 1+rnd.IntN(12), int32(1+rnd.IntN(12))
		members := make([]string, nm)
		prev := map[string][]int32{}
		for i := range members {
			members[i] = fmt.Sprintf("m%02d", i)
			for range rnd.IntN(int(np) + 1) {
				prev[members[i]] = append(prev[members[i]], int32(rnd.IntN(int(np)+2)))
			}
		}
		out := assignTopic(members, np, prev)
		perPart := make([]int, np)
		lo, hi := 1<<30, 0
		for _, m := range members {
			ps := out[m]
			lo, hi = min(lo, len(ps)), max(hi, len(ps))
			for _, p := range ps {
				perPart[p]++
			}
		}
		plo, phi := slices.Min(perPart), slices.Max(perPart)
		switch {
		case lo < 1 || plo < 1:
			t.Fatalf("%d members, %d partitions: a member or partition left out: %v", nm, np, out)
		case hi-lo > 1 || phi-plo > 1:
			t.Fatalf("%d members, %d partitions: uneven %v", nm, np, out)
		case nm < int(np) && phi != 1, nm >= int(np) && hi != 1:
			t.Fatalf("%d members, %d partitions: %v", nm, np, out)
		}
	}
	if out := assignTopic(nil, 3, nil); len(out) != 0 {
		t.Fatalf("no members: %v", out)
	}
}

// TestShareGroupRestore: a group restored from its record is empty at the recorded epoch (its
// assignment epoch too), a join moves the epoch past it, and a negative epoch is refused.
func TestShareGroupRestore(t *testing.T) {
	md := meta{"a": topicA}
	g, err := RestoreGroup("g", GroupConfig{}, 7)
	if err != nil {
		t.Fatal(err)
	}
	d := g.Describe()
	if g.State() != GroupEmpty || g.Epoch() != 7 || d.GroupEpoch != 7 || d.AssignmentEpoch != 7 || len(d.Members) != 0 {
		t.Fatalf("restored: %+v, epoch %d", d, g.Epoch())
	}
	if r := join(t, g, md, time.Unix(0, 0), "m1", "a"); r.MemberEpoch != 8 || g.Epoch() != 8 {
		t.Fatalf("a join after the restore: %+v, group epoch %d; want 8", r, g.Epoch())
	}
	if _, err := RestoreGroup("g", GroupConfig{}, -1); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("a negative epoch: %v, want ErrInvalidRequest", err)
	}
	if _, err := RestoreGroup("g", GroupConfig{SessionTimeout: -1}, 1); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("a bad config: %v, want ErrInvalidConfig", err)
	}
}
