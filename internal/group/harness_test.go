package group

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	testSession   = 10 * time.Second
	testRebalance = 30 * time.Second
)

// harness drives one Group like its coordinator would, with a fake clock: it records every response (and
// fails on a Ref answered twice), writes records at once unless told to hold them, and fires the timer.
type harness struct {
	t          *testing.T
	g          *Group
	now        time.Time
	nextRef    Ref
	joins      map[Ref]JoinResponse
	syncs      map[Ref]SyncResponse
	records    []Record
	deadline   time.Time
	holdStores bool
	unstored   []Record
	generation int32
}

func sequentialIDs() func(string) string {
	n := 0
	return func(prefix string) string {
		n++
		return fmt.Sprintf("%s-%d", prefix, n)
	}
}

func testConfig() Config {
	return Config{SessionTimeoutMin: time.Second, SessionTimeoutMax: 5 * time.Minute, NewMemberID: sequentialIDs()}
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	g, err := New("g1", cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, g: g, now: epoch, joins: map[Ref]JoinResponse{}, syncs: map[Ref]SyncResponse{}}
}

func (h *harness) apply(out Output) {
	h.t.Helper()
	for _, r := range out.Joins {
		if _, dup := h.joins[r.Ref]; dup {
			h.t.Fatalf("join ref %d answered twice", r.Ref)
		}
		h.joins[r.Ref] = r
	}
	for _, r := range out.Syncs {
		if _, dup := h.syncs[r.Ref]; dup {
			h.t.Fatalf("sync ref %d answered twice", r.Ref)
		}
		h.syncs[r.Ref] = r
	}
	h.deadline = out.Deadline
	checkInvariants(h.t, h.g)
	if gen := h.g.Generation(); gen < h.generation {
		h.t.Fatalf("generation went back from %d to %d", h.generation, gen)
	}
	h.generation = h.g.Generation()
	for _, rec := range out.Records {
		h.records = append(h.records, rec)
		if h.holdStores {
			h.unstored = append(h.unstored, rec)
			continue
		}
		h.apply(h.g.Stored(h.now, rec.Ticket, nil))
	}
}

// store completes the held record writes with err.
func (h *harness) store(err error) {
	h.t.Helper()
	recs := h.unstored
	h.unstored = nil
	for _, rec := range recs {
		h.apply(h.g.Stored(h.now, rec.Ticket, err))
	}
}

// advance moves the clock by d, calling Tick at every deadline on the way.
func (h *harness) advance(d time.Duration) {
	h.t.Helper()
	target := h.now.Add(d)
	for !h.deadline.IsZero() && !h.deadline.After(target) {
		h.now = h.deadline
		h.apply(h.g.Tick(h.now))
	}
	h.now = target
}

func (h *harness) ref() Ref {
	h.nextRef++
	return h.nextRef
}

func joinReq(client, memberID string) JoinRequest {
	return JoinRequest{
		Version:          5,
		MemberID:         memberID,
		ClientID:         client,
		ClientHost:       "/127.0.0.1",
		ProtocolType:     "consumer",
		Protocols:        []Protocol{{Name: "range", Metadata: []byte("sub-" + client)}},
		SessionTimeout:   testSession,
		RebalanceTimeout: testRebalance,
	}
}

func (h *harness) join(req JoinRequest) Ref {
	h.t.Helper()
	req.Ref = h.ref()
	h.apply(h.g.Join(h.now, req))
	return req.Ref
}

// joinNew does the KIP-394 handshake and returns the second join's Ref and the member id.
func (h *harness) joinNew(req JoinRequest) (Ref, string) {
	h.t.Helper()
	first := h.mustJoin(h.join(req), ErrMemberIDRequired)
	req.MemberID = first.MemberID
	return h.join(req), first.MemberID
}

func (h *harness) answered(ref Ref) bool {
	_, j := h.joins[ref]
	_, s := h.syncs[ref]
	return j || s
}

func (h *harness) mustJoin(ref Ref, want error) JoinResponse {
	h.t.Helper()
	r, ok := h.joins[ref]
	if !ok {
		h.t.Fatalf("join %d not answered", ref)
	}
	if !errorsIs(r.Err, want) {
		h.t.Fatalf("join %d: err %v, want %v", ref, r.Err, want)
	}
	return r
}

func (h *harness) sync(memberID string, gen int32, assignments ...MemberAssignment) Ref {
	h.t.Helper()
	ref := h.ref()
	h.apply(h.g.Sync(h.now, SyncRequest{Ref: ref, MemberID: memberID, Generation: gen, Assignments: assignments}))
	return ref
}

func (h *harness) mustSync(ref Ref, want error) SyncResponse {
	h.t.Helper()
	r, ok := h.syncs[ref]
	if !ok {
		h.t.Fatalf("sync %d not answered", ref)
	}
	if !errorsIs(r.Err, want) {
		h.t.Fatalf("sync %d: err %v, want %v", ref, r.Err, want)
	}
	return r
}

func (h *harness) heartbeat(memberID string, gen int32) error {
	h.t.Helper()
	out, err := h.g.Heartbeat(h.now, HeartbeatRequest{MemberID: memberID, Generation: gen})
	h.apply(out)
	return err
}

func (h *harness) leave(members ...LeaveMember) []error {
	h.t.Helper()
	out, errs := h.g.Leave(h.now, members)
	h.apply(out)
	return errs
}

func (h *harness) commit(memberID string, gen int32) error {
	h.t.Helper()
	out, err := h.g.ValidateCommit(h.now, CommitRequest{MemberID: memberID, Generation: gen})
	h.apply(out)
	return err
}

func (h *harness) wantState(want State) {
	h.t.Helper()
	if got := h.g.State(); got != want {
		h.t.Fatalf("state %v, want %v", got, want)
	}
}

// checkInvariants checks the group's internal consistency after every call.
func checkInvariants(t *testing.T, g *Group) {
	t.Helper()
	if len(g.byID) != len(g.members) {
		t.Fatalf("%d members indexed, %d listed", len(g.byID), len(g.members))
	}
	instances := 0
	for _, m := range g.members {
		if g.byID[m.id] != m {
			t.Fatalf("member %q not indexed", m.id)
		}
		if m.instance != "" {
			instances++
			if g.instances[m.instance] != m {
				t.Fatalf("instance %q not indexed", m.instance)
			}
		}
		if _, ok := g.pending[m.id]; ok {
			t.Fatalf("member %q also pending", m.id)
		}
		if m.awaitingSync && g.state != CompletingRebalance {
			t.Fatalf("member %q awaits sync in %v", m.id, g.state)
		}
		if m.awaitingJoin && g.state != PreparingRebalance && g.state != Stable {
			t.Fatalf("member %q awaits join in %v", m.id, g.state)
		}
		if m.owesSync && g.state != CompletingRebalance && g.state != Stable {
			t.Fatalf("member %q owes sync in %v", m.id, g.state)
		}
	}
	if instances != len(g.instances) {
		t.Fatalf("%d static members, %d instances indexed", instances, len(g.instances))
	}
	switch g.state {
	case Empty, Dead:
		if len(g.members) != 0 {
			t.Fatalf("%v group has %d members", g.state, len(g.members))
		}
	case CompletingRebalance, Stable:
		if g.byID[g.leader] == nil {
			t.Fatalf("%v group's leader %q is no member", g.state, g.leader)
		}
		if g.protocol == "" {
			t.Fatalf("%v group has no protocol", g.state)
		}
	case PreparingRebalance:
	}
}

func errorsIs(err, target error) bool {
	if target == nil {
		return err == nil
	}
	return errors.Is(err, target)
}
