package group

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// stable brings members (by client id) into a Stable generation, the first being the leader, and returns
// their member ids.
func (h *harness) stable(clients ...string) []string {
	h.t.Helper()
	ids := make([]string, len(clients))
	refs := make([]Ref, len(clients))
	for i, c := range clients {
		refs[i], ids[i] = h.joinNew(joinReq(c, ""))
	}
	// Members answered by an earlier, smaller generation rejoin, as clients do.
	for h.g.State() == PreparingRebalance {
		for i, c := range clients {
			if h.answered(refs[i]) {
				refs[i] = h.join(joinReq(c, ids[i]))
			}
		}
	}
	gen := h.g.Generation()
	for i := range clients {
		r := h.mustJoin(refs[i], nil)
		if r.Generation != gen {
			h.t.Fatalf("member %s got generation %d, want %d", ids[i], r.Generation, gen)
		}
	}
	var assignments []MemberAssignment
	for _, id := range ids {
		assignments = append(assignments, MemberAssignment{MemberID: id, Assignment: []byte("a-" + id)})
	}
	leader := h.g.Describe().Leader
	syncRefs := make([]Ref, len(ids))
	for i, id := range ids {
		if id != leader {
			syncRefs[i] = h.sync(id, gen)
		}
	}
	for i, id := range ids {
		if id == leader {
			syncRefs[i] = h.sync(id, gen, assignments...)
		}
	}
	for i, id := range ids {
		if got := h.mustSync(syncRefs[i], nil).Assignment; string(got) != "a-"+id {
			h.t.Fatalf("member %s assignment %q", id, got)
		}
	}
	h.wantState(Stable)
	return ids
}

func TestGroupSingleMember(t *testing.T) {
	h := newHarness(t, testConfig())
	first := h.mustJoin(h.join(joinReq("c", "")), ErrMemberIDRequired)
	if first.MemberID != "c-1" || first.Generation != -1 {
		t.Fatalf("first join: %+v", first)
	}
	h.wantState(Empty)
	r := h.mustJoin(h.join(joinReq("c", first.MemberID)), nil)
	if r.Generation != 1 || r.Leader != "c-1" || r.MemberID != "c-1" || r.Protocol != "range" || r.ProtocolType != "consumer" {
		t.Fatalf("join: %+v", r)
	}
	if len(r.Members) != 1 || string(r.Members[0].Metadata) != "sub-c" {
		t.Fatalf("leader members: %+v", r.Members)
	}
	h.wantState(CompletingRebalance)
	if err := h.heartbeat("c-1", 1); err != nil {
		t.Fatalf("heartbeat while completing: %v", err)
	}
	if err := h.commit("c-1", 1); !errors.Is(err, ErrRebalanceInProgress) {
		t.Fatalf("commit while completing: %v", err)
	}
	h.holdStores = true
	s := h.sync("c-1", 1, MemberAssignment{MemberID: "c-1", Assignment: []byte{1, 2, 3}})
	if h.answered(s) || len(h.unstored) != 1 {
		t.Fatalf("sync answered before its record was stored")
	}
	rec := h.unstored[0].Metadata
	if rec.Generation != 1 || rec.Leader != "c-1" || len(rec.Members) != 1 || !bytes.Equal(rec.Members[0].Assignment, []byte{1, 2, 3}) ||
		string(rec.Members[0].Subscription) != "sub-c" {
		t.Fatalf("record: %+v", rec)
	}
	h.store(nil)
	if got := h.mustSync(s, nil).Assignment; !bytes.Equal(got, []byte{1, 2, 3}) {
		t.Fatalf("assignment %v", got)
	}
	h.wantState(Stable)
	for range 5 {
		h.advance(testSession - time.Second)
		if err := h.heartbeat("c-1", 1); err != nil {
			t.Fatalf("heartbeat: %v", err)
		}
	}
	if err := h.commit("c-1", 1); err != nil {
		t.Fatalf("commit: %v", err)
	}
	d := h.g.Describe()
	if d.State != Stable || d.Protocol != "range" || len(d.Members) != 1 || d.Members[0].ClientID != "c" ||
		!bytes.Equal(d.Members[0].Assignment, []byte{1, 2, 3}) || string(d.Members[0].Metadata) != "sub-c" {
		t.Fatalf("describe: %+v", d)
	}
	for st, name := range map[State]string{Empty: "Empty", PreparingRebalance: "PreparingRebalance",
		CompletingRebalance: "CompletingRebalance", Stable: "Stable", Dead: "Dead"} {
		if st.String() != name {
			t.Fatalf("state %d is named %q, want %q", st, st, name)
		}
	}
	if h.g.ID() != "g1" || h.g.ProtocolType() != "consumer" {
		t.Fatalf("id %q, protocol type %q", h.g.ID(), h.g.ProtocolType())
	}
}

func TestGroupTwoMembers(t *testing.T) {
	h := newHarness(t, testConfig())
	a := h.stable("a")[0]
	refB, b := h.joinNew(joinReq("b", ""))
	h.wantState(PreparingRebalance)
	if h.answered(refB) {
		t.Fatal("b answered before a rejoined")
	}
	if err := h.heartbeat(a, 1); !errors.Is(err, ErrRebalanceInProgress) {
		t.Fatalf("heartbeat: %v", err)
	}
	if err := h.commit(a, 1); err != nil {
		t.Fatalf("commit while preparing: %v", err)
	}
	refA := h.join(joinReq("a", a))
	ra, rb := h.mustJoin(refA, nil), h.mustJoin(refB, nil)
	if ra.Generation != 2 || rb.Generation != 2 || ra.Leader != a || rb.Leader != a {
		t.Fatalf("joins: %+v %+v", ra, rb)
	}
	if len(ra.Members) != 2 || len(rb.Members) != 0 || string(ra.Members[1].Metadata) != "sub-b" {
		t.Fatalf("members: leader %+v follower %+v", ra.Members, rb.Members)
	}
	sb := h.sync(b, 2)
	if h.answered(sb) {
		t.Fatal("follower sync answered before the leader's")
	}
	sa := h.sync(a, 2, MemberAssignment{MemberID: b, Assignment: []byte("B")}, MemberAssignment{MemberID: a, Assignment: []byte("A")},
		MemberAssignment{MemberID: "stranger", Assignment: []byte("X")})
	if string(h.mustSync(sa, nil).Assignment) != "A" || string(h.mustSync(sb, nil).Assignment) != "B" {
		t.Fatalf("assignments: %+v %+v", h.syncs[sa], h.syncs[sb])
	}
	h.wantState(Stable)
	if err := h.heartbeat(b, 1); !errors.Is(err, ErrIllegalGeneration) {
		t.Fatalf("old generation heartbeat: %v", err)
	}
	// A follower rejoining with the same metadata gets the current generation back, without a rebalance.
	r := h.mustJoin(h.join(joinReq("b", b)), nil)
	if r.Generation != 2 || len(r.Members) != 0 {
		t.Fatalf("follower rejoin: %+v", r)
	}
	h.wantState(Stable)
	// The leader's rejoin forces a rebalance.
	refA = h.join(joinReq("a", a))
	h.wantState(PreparingRebalance)
	refB = h.join(joinReq("b", b))
	if h.mustJoin(refA, nil).Generation != 3 || h.mustJoin(refB, nil).Generation != 3 {
		t.Fatal("rebalance did not reach generation 3")
	}
}

func TestGroupManyMembers(t *testing.T) {
	const n = 30
	h := newHarness(t, testConfig())
	var clients []string
	for i := range n {
		clients = append(clients, fmt.Sprintf("c%02d", i))
	}
	ids := h.stable(clients...)
	d := h.g.Describe()
	if len(d.Members) != n || d.Leader != ids[0] {
		t.Fatalf("describe: %d members, leader %q", len(d.Members), d.Leader)
	}
	// Old clients (JoinGroup v3) get their member id at once.
	req := joinReq("old", "")
	req.Version = 3
	ref := h.join(req)
	h.wantState(PreparingRebalance)
	for i, id := range ids {
		h.join(joinReq(clients[i], id))
	}
	r := h.mustJoin(ref, nil)
	if r.Generation != h.g.Generation() || r.MemberID == "" || len(h.g.Describe().Members) != n+1 {
		t.Fatalf("old client join: %+v", r)
	}
}

func TestGroupLeave(t *testing.T) {
	h := newHarness(t, testConfig())
	ids := h.stable("a", "b", "c")
	gen := h.g.Generation()
	errs := h.leave(LeaveMember{MemberID: ids[1]}, LeaveMember{MemberID: "nobody"})
	if errs[0] != nil || !errors.Is(errs[1], ErrUnknownMemberID) {
		t.Fatalf("leave errors: %v", errs)
	}
	h.wantState(PreparingRebalance)
	ra := h.join(joinReq("a", ids[0]))
	rc := h.join(joinReq("c", ids[2]))
	if h.mustJoin(ra, nil).Generation != gen+1 || len(h.mustJoin(ra, nil).Members) != 2 || h.mustJoin(rc, nil).Leader != ids[0] {
		t.Fatalf("after leave: %+v", h.joins[ra])
	}
	// A parked join of a member that leaves is answered.
	h.leave(LeaveMember{MemberID: ids[0]})
	h.wantState(PreparingRebalance)
	rc = h.join(joinReq("c", ids[2]))
	r := h.mustJoin(rc, nil)
	if r.Leader != ids[2] || r.Generation != gen+2 {
		t.Fatalf("new leader: %+v", r)
	}
	n := len(h.records)
	h.leave(LeaveMember{MemberID: ids[2]})
	h.wantState(Empty)
	if len(h.records) != n+1 || len(h.records[n].Metadata.Members) != 0 || h.records[n].Metadata.Generation != gen+3 {
		t.Fatalf("empty group record: %+v", h.records[n:])
	}
	if !h.deadline.IsZero() {
		t.Fatalf("empty group asks for a timer at %v", h.deadline)
	}
	// Simple commits are for empty groups only.
	if err := h.commit("", -1); err != nil {
		t.Fatalf("simple commit to empty group: %v", err)
	}
}

func TestGroupSessionTimeout(t *testing.T) {
	h := newHarness(t, testConfig())
	ids := h.stable("a", "b")
	gen := h.g.Generation()
	if want := h.now.Add(testSession); !h.deadline.Equal(want) {
		t.Fatalf("deadline %v, want %v", h.deadline, want)
	}
	for range 3 {
		h.advance(testSession / 2)
		if err := h.heartbeat(ids[0], gen); err != nil && !errors.Is(err, ErrRebalanceInProgress) {
			t.Fatalf("heartbeat a: %v", err)
		}
	}
	h.wantState(PreparingRebalance)
	if err := h.heartbeat(ids[1], gen); !errors.Is(err, ErrUnknownMemberID) {
		t.Fatalf("expired member heartbeat: %v", err)
	}
	r := h.mustJoin(h.join(joinReq("a", ids[0])), nil)
	if r.Generation != gen+1 || len(r.Members) != 1 {
		t.Fatalf("survivor join: %+v", r)
	}
}

func TestGroupRebalanceTimeout(t *testing.T) {
	h := newHarness(t, testConfig())
	ids := h.stable("a", "b")
	gen := h.g.Generation()
	start := h.now
	refC, _ := h.joinNew(joinReq("c", ""))
	refA := h.join(joinReq("a", ids[0]))
	// b keeps heartbeating but never rejoins.
	for h.g.State() == PreparingRebalance {
		if err := h.heartbeat(ids[1], gen); !errors.Is(err, ErrRebalanceInProgress) {
			t.Fatalf("heartbeat: %v", err)
		}
		h.advance(time.Second)
	}
	if took := h.now.Sub(start); took != testRebalance {
		t.Fatalf("join phase took %v, want %v", took, testRebalance)
	}
	h.wantState(CompletingRebalance)
	r := h.mustJoin(refA, nil)
	if len(r.Members) != 2 || h.mustJoin(refC, nil).Generation != gen+1 {
		t.Fatalf("join after rebalance timeout: %+v", r)
	}
	if err := h.heartbeat(ids[1], gen); !errors.Is(err, ErrUnknownMemberID) {
		t.Fatalf("dropped member heartbeat: %v", err)
	}
}

func TestGroupRebalanceTimeoutFallback(t *testing.T) {
	h := newHarness(t, testConfig())
	v0 := func(client, memberID string) JoinRequest {
		r := joinReq(client, memberID)
		r.Version, r.RebalanceTimeout = 0, -1
		return r
	}
	a := h.mustJoin(h.join(v0("a", "")), nil).MemberID
	h.mustSync(h.sync(a, 1), nil)
	start := h.now
	refB := h.join(v0("b", ""))
	h.wantState(PreparingRebalance)
	// a heartbeats but never rejoins: the join phase ends after the session timeout (research G9).
	for h.g.State() == PreparingRebalance {
		if err := h.heartbeat(a, 1); !errors.Is(err, ErrRebalanceInProgress) {
			t.Fatalf("heartbeat: %v", err)
		}
		h.advance(time.Second)
	}
	if took := h.now.Sub(start); took != testSession {
		t.Fatalf("join phase took %v, want %v", took, testSession)
	}
	if r := h.mustJoin(refB, nil); r.Generation != 2 || len(r.Members) != 1 {
		t.Fatalf("join: %+v", r)
	}
}

func TestGroupPendingMemberExpiry(t *testing.T) {
	h := newHarness(t, testConfig())
	ids := h.stable("a")
	first := h.mustJoin(h.join(joinReq("b", "")), ErrMemberIDRequired)
	if want := h.now.Add(testSession); !h.deadline.Equal(want) {
		t.Fatalf("deadline %v, want %v", h.deadline, want)
	}
	// A rebalance waits for the pending member, but not beyond its expiry.
	refA := h.join(joinReq("a", ids[0]))
	h.wantState(PreparingRebalance)
	h.advance(testSession - time.Millisecond)
	h.wantState(PreparingRebalance)
	h.advance(time.Millisecond)
	if r := h.mustJoin(refA, nil); r.Generation != 2 || len(r.Members) != 1 {
		t.Fatalf("join after pending expiry: %+v", r)
	}
	h.mustJoin(h.join(joinReq("b", first.MemberID)), ErrUnknownMemberID)
	// A pending member may also leave.
	second := h.mustJoin(h.join(joinReq("b", "")), ErrMemberIDRequired)
	if errs := h.leave(LeaveMember{MemberID: second.MemberID}); errs[0] != nil {
		t.Fatalf("pending leave: %v", errs)
	}
	if len(h.g.pending) != 0 {
		t.Fatal("pending member kept")
	}
}

func TestGroupSyncTimeout(t *testing.T) {
	h := newHarness(t, testConfig())
	ids := h.stable("a", "b")
	ra := h.join(joinReq("a", ids[0]))
	rb := h.join(joinReq("b", ids[1]))
	gen := h.mustJoin(ra, nil).Generation
	h.mustJoin(rb, nil)
	start := h.now
	// The leader syncs; b heartbeats but never syncs: it is stuck between the phases and is removed
	// at the rebalance timeout.
	h.mustSync(h.sync(ids[0], gen, MemberAssignment{MemberID: ids[0], Assignment: []byte("A")}), nil)
	h.wantState(Stable)
	for h.g.State() == Stable {
		for _, id := range ids {
			if err := h.heartbeat(id, gen); err != nil {
				t.Fatalf("heartbeat %s: %v", id, err)
			}
		}
		h.advance(time.Second)
	}
	if took := h.now.Sub(start); took != testRebalance {
		t.Fatalf("sync timeout after %v, want %v", took, testRebalance)
	}
	if h.g.byID[ids[1]] != nil || h.g.byID[ids[0]] == nil {
		t.Fatal("wrong member removed")
	}
	h.wantState(PreparingRebalance)
	// A leader whose own SyncGroup never comes is removed the same way, though it heartbeats.
	r := h.mustJoin(h.join(joinReq("a", ids[0])), nil)
	h.wantState(CompletingRebalance)
	for h.g.State() == CompletingRebalance {
		if err := h.heartbeat(ids[0], r.Generation); err != nil {
			t.Fatalf("heartbeat: %v", err)
		}
		h.advance(time.Second)
	}
	h.wantState(Empty)
}

func TestGroupStaticRestart(t *testing.T) {
	h := newHarness(t, testConfig())
	static := func(client, inst, memberID string) JoinRequest {
		r := joinReq(client, memberID)
		r.InstanceID = inst
		return r
	}
	ra := h.join(static("a", "ia", ""))
	a := h.mustJoin(ra, nil).MemberID // static members skip MEMBER_ID_REQUIRED
	if a != "ia-1" {
		t.Fatalf("static member id %q", a)
	}
	rb := h.join(static("b", "ib", ""))
	h.join(static("a", "ia", a))
	b := h.mustJoin(rb, nil).MemberID
	gen := h.g.Generation()
	sb := h.sync(b, gen)
	h.sync(a, gen, MemberAssignment{MemberID: a, Assignment: []byte("A")}, MemberAssignment{MemberID: b, Assignment: []byte("B")})
	h.mustSync(sb, nil)
	h.wantState(Stable)

	// b restarts: a new member id, same generation and assignment, no rebalance.
	h.holdStores = true
	rb2 := h.join(static("b", "ib", ""))
	h.wantState(Stable)
	if h.answered(rb2) || len(h.unstored) != 1 {
		t.Fatal("static rejoin answered before its record was stored")
	}
	h.store(nil)
	h.holdStores = false
	r := h.mustJoin(rb2, nil)
	if r.MemberID == b || r.Generation != gen || r.Leader != a || r.SkipAssignment || len(r.Members) != 0 {
		t.Fatalf("static rejoin: %+v", r)
	}
	rec := h.records[len(h.records)-1].Metadata
	if rec.Members[1].MemberID != r.MemberID || string(rec.Members[1].Assignment) != "B" {
		t.Fatalf("record after static rejoin: %+v", rec)
	}
	if err := h.heartbeat(b, gen); !errors.Is(err, ErrUnknownMemberID) {
		t.Fatalf("old member id heartbeat: %v", err)
	}
	if _, err := h.g.Heartbeat(h.now, HeartbeatRequest{MemberID: b, InstanceID: "ib", Generation: gen}); !errors.Is(err, ErrFencedInstanceID) {
		t.Fatalf("old member id with instance heartbeat: %v", err)
	}
	b = r.MemberID
	if got := h.mustSync(h.sync(b, gen), nil).Assignment; string(got) != "B" {
		t.Fatalf("assignment after restart %q", got)
	}
	if errs := h.leave(LeaveMember{MemberID: "wrong", InstanceID: "ib"}); !errors.Is(errs[0], ErrFencedInstanceID) {
		t.Fatalf("leave with wrong member id: %v", errs)
	}

	// The leader restarts: it learns it leads and must skip the assignment.
	ra2 := h.join(static("a", "ia", ""))
	r = h.mustJoin(ra2, nil)
	if r.Leader != r.MemberID || !r.SkipAssignment || len(r.Members) != 2 || h.g.Generation() != gen {
		t.Fatalf("static leader rejoin: %+v", r)
	}
	a = r.MemberID

	// A restart with other metadata rebalances.
	changed := static("b", "ib", "")
	changed.Protocols = []Protocol{{Name: "range", Metadata: []byte("new topics")}}
	rb3 := h.join(changed)
	h.wantState(PreparingRebalance)
	h.join(static("a", "ia", a))
	r = h.mustJoin(rb3, nil)
	if r.Generation != gen+1 {
		t.Fatalf("changed static rejoin: %+v", r)
	}

	// An admin removes a static member by instance id alone (LeaveGroup v3+).
	if errs := h.leave(LeaveMember{InstanceID: "ib"}); errs[0] != nil {
		t.Fatalf("leave by instance: %v", errs)
	}
	if errs := h.leave(LeaveMember{InstanceID: "ib"}); !errors.Is(errs[0], ErrUnknownMemberID) {
		t.Fatalf("second leave by instance: %v", errs)
	}
}

func TestGroupStaticMemberSurvivesRebalance(t *testing.T) {
	h := newHarness(t, testConfig())
	req := joinReq("s", "")
	req.InstanceID = "is"
	s := h.mustJoin(h.join(req), nil).MemberID
	h.mustSync(h.sync(s, 1, MemberAssignment{MemberID: s, Assignment: []byte("S")}), nil)
	refD, d := h.joinNew(joinReq("d", ""))
	// The static member heartbeats but does not rejoin: it stays, and the dynamic newcomer leads
	// generation 2.
	for h.g.State() == PreparingRebalance {
		if err := h.heartbeat(s, 1); !errors.Is(err, ErrRebalanceInProgress) {
			t.Fatalf("heartbeat: %v", err)
		}
		h.advance(testSession / 2)
	}
	r := h.mustJoin(refD, nil)
	if r.Leader != d || len(r.Members) != 2 || r.Generation != 2 {
		t.Fatalf("join: %+v", r)
	}
	if h.g.byID[s] == nil {
		t.Fatal("static member removed by the rebalance timeout")
	}
}

func TestGroupFencing(t *testing.T) {
	h := newHarness(t, testConfig())
	req := joinReq("s", "")
	req.InstanceID = "is"
	s := h.mustJoin(h.join(req), nil).MemberID
	h.mustSync(h.sync(s, 1, MemberAssignment{MemberID: s}), nil)
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"heartbeat unknown member", func() error { return h.heartbeat("x", 1) }, ErrUnknownMemberID},
		{"heartbeat old generation", func() error { return h.heartbeat(s, 0) }, ErrIllegalGeneration},
		{"heartbeat fenced instance", func() error {
			_, err := h.g.Heartbeat(h.now, HeartbeatRequest{MemberID: "x", InstanceID: "is", Generation: 1})
			return err
		}, ErrFencedInstanceID},
		{"sync unknown member", func() error { return h.syncs[h.sync("x", 1)].Err }, ErrUnknownMemberID},
		{"sync old generation", func() error { return h.syncs[h.sync(s, 7)].Err }, ErrIllegalGeneration},
		{"sync other protocol", func() error {
			ref := h.ref()
			h.apply(h.g.Sync(h.now, SyncRequest{Ref: ref, MemberID: s, Generation: 1, Protocol: "roundrobin"}))
			return h.syncs[ref].Err
		}, ErrInconsistentProtocol},
		{"join unknown member", func() error { return h.joins[h.join(joinReq("x", "x-9"))].Err }, ErrUnknownMemberID},
		{"join fenced instance", func() error {
			r := joinReq("s", "x-9")
			r.InstanceID = "is"
			return h.joins[h.join(r)].Err
		}, ErrFencedInstanceID},
		{"join unknown instance with member id", func() error {
			r := joinReq("s", s)
			r.InstanceID = "other"
			return h.joins[h.join(r)].Err
		}, ErrUnknownMemberID},
		{"join session too short", func() error {
			r := joinReq("x", "")
			r.SessionTimeout = time.Millisecond
			return h.joins[h.join(r)].Err
		}, ErrInvalidSessionTimeout},
		{"join session too long", func() error {
			r := joinReq("x", "")
			r.SessionTimeout = time.Hour
			return h.joins[h.join(r)].Err
		}, ErrInvalidSessionTimeout},
		{"commit unknown member", func() error { return h.commit("x", 1) }, ErrUnknownMemberID},
		{"commit old generation", func() error { return h.commit(s, 0) }, ErrIllegalGeneration},
		{"simple commit to a group with members", func() error { return h.commit("", -1) }, ErrUnknownMemberID},
		{"commit by member", func() error { return h.commit(s, 1) }, nil},
		{"leave unknown", func() error { return h.leave(LeaveMember{MemberID: "x"})[0] }, ErrUnknownMemberID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errorsIs(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
	h.wantState(Stable)
}

func TestGroupProtocolSelection(t *testing.T) {
	h := newHarness(t, testConfig())
	withProtocols := func(client, memberID string, names ...string) JoinRequest {
		r := joinReq(client, memberID)
		r.Protocols = nil
		for _, n := range names {
			r.Protocols = append(r.Protocols, Protocol{Name: n, Metadata: []byte(client + "/" + n)})
		}
		return r
	}
	ra, a := h.joinNew(withProtocols("a", "", "sticky", "range"))
	h.mustJoin(ra, nil)
	h.mustSync(h.sync(a, 1), nil)
	rb, b := h.joinNew(withProtocols("b", "", "range", "roundrobin", "sticky"))
	rc, _ := h.joinNew(withProtocols("c", "", "range", "sticky"))
	ra = h.join(withProtocols("a", a, "sticky", "range"))
	r := h.mustJoin(ra, nil)
	if r.Protocol != "range" || string(r.Members[1].Metadata) != "b/range" {
		t.Fatalf("protocol %q, members %+v", r.Protocol, r.Members)
	}
	h.mustJoin(rb, nil)
	h.mustJoin(rc, nil)

	// No common protocol, or another protocol type: refused, the group is untouched.
	h.mustJoin(h.join(withProtocols("d", "", "roundrobin")), ErrInconsistentProtocol)
	other := joinReq("e", "")
	other.ProtocolType = "connect"
	h.mustJoin(h.join(other), ErrInconsistentProtocol)
	noProtocols := joinReq("e", "")
	noProtocols.Protocols = nil
	h.mustJoin(h.join(noProtocols), ErrInconsistentProtocol)
	// A member may not drop the last protocol others share.
	h.mustJoin(h.join(withProtocols("b", b, "roundrobin")), ErrInconsistentProtocol)
	h.wantState(CompletingRebalance)
}

func TestGroupInitialRebalanceDelay(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 3 * time.Second
	h := newHarness(t, cfg)
	refA, _ := h.joinNew(joinReq("a", ""))
	if want := h.now.Add(3 * time.Second); !h.deadline.Equal(want) {
		t.Fatalf("deadline %v, want %v", h.deadline, want)
	}
	h.advance(2 * time.Second)
	refB, _ := h.joinNew(joinReq("b", ""))
	h.advance(time.Second) // the delay is extended once, since b joined
	h.wantState(PreparingRebalance)
	h.advance(3*time.Second - time.Millisecond)
	h.wantState(PreparingRebalance)
	h.advance(time.Millisecond)
	if r := h.mustJoin(refA, nil); len(r.Members) != 2 || r.Generation != 1 {
		t.Fatalf("join: %+v", r)
	}
	h.mustJoin(refB, nil)
}

func TestGroupEmptyConsumerAssignment(t *testing.T) {
	var want kmsg.ConsumerMemberAssignment
	if !bytes.Equal(emptyConsumerAssignment, want.AppendTo(nil)) {
		t.Fatalf("empty assignment %v, kmsg encodes %v", emptyConsumerAssignment, want.AppendTo(nil))
	}
	for _, tt := range []struct {
		protocolType string
		want         []byte
	}{{"consumer", emptyConsumerAssignment}, {"connect", []byte{}}} {
		h := newHarness(t, testConfig())
		req := joinReq("a", "")
		req.ProtocolType = tt.protocolType
		ref, a := h.joinNew(req)
		h.mustJoin(ref, nil)
		got := h.mustSync(h.sync(a, 1), nil).Assignment
		if !bytes.Equal(got, tt.want) || got == nil {
			t.Fatalf("%s: assignment %v, want %v", tt.protocolType, got, tt.want)
		}
		var decoded kmsg.ConsumerMemberAssignment
		if tt.protocolType == "consumer" {
			if err := decoded.ReadFrom(got); err != nil {
				t.Fatalf("decode: %v", err)
			}
		}
	}
}

func TestGroupStoreFailure(t *testing.T) {
	h := newHarness(t, testConfig())
	ids := h.stable("a", "b")
	ra := h.join(joinReq("a", ids[0]))
	rb := h.join(joinReq("b", ids[1]))
	gen := h.mustJoin(ra, nil).Generation
	h.mustJoin(rb, nil)
	h.holdStores = true
	sb := h.sync(ids[1], gen)
	sa := h.sync(ids[0], gen, MemberAssignment{MemberID: ids[0], Assignment: []byte("A2")})
	diskErr := errors.New("disk on fire")
	h.store(diskErr)
	for _, ref := range []Ref{sa, sb} {
		if err := h.mustSync(ref, ErrCoordinatorNotAvailable).Err; !errors.Is(err, diskErr) {
			t.Fatalf("store error not wrapped: %v", err)
		}
	}
	h.wantState(PreparingRebalance)
	if string(h.g.byID[ids[0]].assignment) != "a-"+ids[0] {
		t.Fatal("assignment changed though its record was not stored")
	}
	// A late success for a record the rebalance made stale changes nothing.
	h.apply(h.g.Stored(h.now, h.records[len(h.records)-1].Ticket, nil))
	h.wantState(PreparingRebalance)
}

func TestGroupSupersededRequests(t *testing.T) {
	h := newHarness(t, testConfig())
	ids := h.stable("a", "b")
	r1 := h.join(joinReq("a", ids[0]))
	r2 := h.join(joinReq("a", ids[0]))
	h.mustJoin(r1, ErrRebalanceInProgress)
	h.join(joinReq("b", ids[1]))
	gen := h.mustJoin(r2, nil).Generation
	s1 := h.sync(ids[1], gen)
	s2 := h.sync(ids[1], gen)
	h.mustSync(s1, ErrRebalanceInProgress)
	h.sync(ids[0], gen)
	h.mustSync(s2, nil)
}

func TestGroupMaxSize(t *testing.T) {
	cfg := testConfig()
	cfg.MembersMax = 2
	h := newHarness(t, cfg)
	h.stable("a")
	first := h.mustJoin(h.join(joinReq("b", "")), ErrMemberIDRequired)
	h.mustJoin(h.join(joinReq("c", "")), ErrGroupMaxSize)
	h.join(joinReq("b", first.MemberID)) // the pending member was counted, so it may join
	if len(h.g.members) != 2 {
		t.Fatalf("%d members", len(h.g.members))
	}
}

func TestGroupDeleteAndUnload(t *testing.T) {
	h := newHarness(t, testConfig())
	ids := h.stable("a")
	if _, err := h.g.Delete(); !errors.Is(err, ErrNonEmptyGroup) {
		t.Fatalf("delete non-empty: %v", err)
	}
	h.leave(LeaveMember{MemberID: ids[0]})
	out, err := h.g.Delete()
	if err != nil || len(out.Records) != 1 || !out.Records[0].Tombstone {
		t.Fatalf("delete: %v %+v", err, out)
	}
	h.apply(out)
	h.wantState(Dead)
	if _, err := h.g.Delete(); !errors.Is(err, ErrGroupNotFound) {
		t.Fatalf("delete dead: %v", err)
	}
	h.mustJoin(h.join(joinReq("a", "")), ErrCoordinatorNotAvailable)
	if err := h.heartbeat(ids[0], 1); !errors.Is(err, ErrCoordinatorNotAvailable) {
		t.Fatalf("heartbeat dead: %v", err)
	}

	h = newHarness(t, testConfig())
	ids = h.stable("a", "b")
	ra := h.join(joinReq("a", ids[0]))
	h.apply(h.g.Unload())
	h.mustJoin(ra, ErrNotCoordinator)
	h.wantState(Dead)
	if !h.deadline.IsZero() {
		t.Fatal("dead group wants a timer")
	}
}

func TestGroupRestore(t *testing.T) {
	h := newHarness(t, testConfig())
	ids := h.stable("a", "b")
	rec := h.records[len(h.records)-1].Metadata
	g, err := Restore(testConfig(), rec, h.now)
	if err != nil {
		t.Fatal(err)
	}
	h.g = g
	h.wantState(Stable)
	if got := h.mustSync(h.sync(ids[1], rec.Generation), nil).Assignment; string(got) != "a-"+ids[1] {
		t.Fatalf("restored assignment %q", got)
	}
	if err := h.heartbeat(ids[0], rec.Generation); err != nil {
		t.Fatalf("heartbeat after restore: %v", err)
	}
	bad := rec
	bad.Members = append([]MemberMetadata(nil), rec.Members...)
	bad.Members[1].MemberID = bad.Members[0].MemberID
	if _, err := Restore(testConfig(), bad, h.now); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("restore duplicate members: %v", err)
	}
	if _, err := Restore(Config{}, rec, h.now); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("restore without id generator: %v", err)
	}
	g, err = Restore(testConfig(), Metadata{Group: "g2", ProtocolType: "consumer", Generation: 4}, h.now)
	if err != nil || g.State() != Empty || g.Generation() != 4 {
		t.Fatalf("restore empty: %v %v", err, g)
	}
}

func TestGroupConfig(t *testing.T) {
	ids := sequentialIDs()
	for _, tt := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults", Config{NewMemberID: ids}, true},
		{"no id generator", Config{}, false},
		{"min above max", Config{NewMemberID: ids, SessionTimeoutMin: time.Minute, SessionTimeoutMax: time.Second}, false},
		{"negative delay", Config{NewMemberID: ids, InitialRebalanceDelay: -time.Second}, false},
		{"negative max size", Config{NewMemberID: ids, MembersMax: -1}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g, err := New("g", tt.cfg)
			if tt.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidConfig)) {
				t.Fatalf("err %v", err)
			}
			if tt.ok && (g.cfg.SessionTimeoutMin != DefaultSessionTimeoutMin || g.cfg.SessionTimeoutMax != DefaultSessionTimeoutMax) {
				t.Fatalf("defaults not applied: %+v", g.cfg)
			}
		})
	}
	// An id generator that repeats itself gets the join refused, not a duplicate member.
	h := newHarness(t, Config{SessionTimeoutMin: time.Second, NewMemberID: func(string) string { return "same" }})
	h.mustJoin(h.join(joinReq("a", "")), ErrMemberIDRequired)
	h.mustJoin(h.join(joinReq("b", "")), ErrCoordinatorNotAvailable)
}
