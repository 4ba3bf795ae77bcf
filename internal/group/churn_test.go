package group

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"
)

const churnHeartbeat = 3 * time.Second

type clientPhase int

const (
	phaseJoining clientPhase = iota
	phaseSyncing
	phaseStable
	phaseGone // crashed, left or fenced: sends nothing more
)

// simClient behaves like a consumer: join, sync (the leader assigns), heartbeat, rejoin when told to.
type simClient struct {
	name     string
	instance string
	metadata string
	memberID string
	gen      int32
	phase    clientPhase
	ref      Ref // the outstanding Join or Sync
	lastBeat time.Time
}

func (c *simClient) slot() string {
	if c.instance != "" {
		return c.instance
	}
	return c.memberID
}

type churn struct {
	t       *testing.T
	h       *harness
	rng     *rand.Rand
	clients []*simClient
	nNamed  int
	// assigned is, per generation, what its leader gave each slot (instance id or member id) first.
	assigned map[int32]map[string][]byte
}

func newChurn(t *testing.T, seed int64) *churn {
	cfg := testConfig()
	h := newHarness(t, cfg)
	h.holdStores = true
	return &churn{t: t, h: h, rng: rand.New(rand.NewSource(seed)), assigned: map[int32]map[string][]byte{}}
}

func (s *churn) live() []*simClient {
	var out []*simClient
	for _, c := range s.clients {
		if c.phase != phaseGone {
			out = append(out, c)
		}
	}
	return out
}

func (s *churn) request(c *simClient) JoinRequest {
	r := joinReq(c.name, c.memberID)
	r.ProtocolType = "churn"
	r.InstanceID = c.instance
	r.Protocols = []Protocol{{Name: "range", Metadata: []byte(c.metadata)}}
	r.RebalanceTimeout = 15 * time.Second
	return r
}

func (s *churn) join(c *simClient) {
	c.phase = phaseJoining
	c.ref = s.h.join(s.request(c))
}

func (s *churn) start(instance string) {
	s.nNamed++
	c := &simClient{name: fmt.Sprintf("c%d", s.nNamed), instance: instance, metadata: "m0", lastBeat: s.h.now}
	s.clients = append(s.clients, c)
	s.join(c)
}

// react delivers answered requests to their clients until none has news.
func (s *churn) react() {
	for progressed := true; progressed; {
		progressed = false
		for _, c := range s.clients {
			if (c.phase != phaseJoining && c.phase != phaseSyncing) || !s.h.answered(c.ref) {
				continue
			}
			progressed = true
			if c.phase == phaseJoining {
				s.onJoin(c, s.h.joins[c.ref])
			} else if c.phase == phaseSyncing {
				s.onSync(c, s.h.syncs[c.ref])
			}
		}
	}
}

func (s *churn) onJoin(c *simClient, r JoinResponse) {
	switch {
	case errors.Is(r.Err, ErrMemberIDRequired):
		c.memberID = r.MemberID
		s.join(c)
		return
	case r.Err != nil:
		s.onError(c, r.Err)
		return
	}
	c.memberID, c.gen, c.phase, c.lastBeat = r.MemberID, r.Generation, phaseSyncing, s.h.now
	var assignments []MemberAssignment
	if r.Leader == c.memberID && !r.SkipAssignment {
		plan := map[string][]byte{}
		for _, m := range r.Members {
			slot := m.MemberID
			if m.InstanceID != "" {
				slot = m.InstanceID
			}
			plan[slot] = fmt.Appendf(nil, "gen%d/%s/%d", r.Generation, slot, s.rng.Intn(1000))
			assignments = append(assignments, MemberAssignment{MemberID: m.MemberID, Assignment: plan[slot]})
		}
		if s.assigned[r.Generation] == nil {
			s.assigned[r.Generation] = plan
		}
	}
	c.ref = s.h.sync(c.memberID, c.gen, assignments...)
}

func (s *churn) onSync(c *simClient, r SyncResponse) {
	if r.Err != nil {
		s.onError(c, r.Err)
		return
	}
	want, ok := s.assigned[c.gen][c.slot()]
	if !ok || !bytes.Equal(r.Assignment, want) {
		s.t.Fatalf("%s (%s) generation %d got assignment %q, leader gave %q (%v)", c.name, c.memberID, c.gen, r.Assignment, want, ok)
	}
	c.phase, c.lastBeat = phaseStable, s.h.now
}

func (s *churn) onError(c *simClient, err error) {
	switch {
	case errors.Is(err, ErrFencedInstanceID):
		c.phase = phaseGone
	case errors.Is(err, ErrUnknownMemberID):
		c.memberID = ""
		s.join(c)
	case errors.Is(err, ErrRebalanceInProgress), errors.Is(err, ErrIllegalGeneration):
		s.join(c)
	default:
		s.t.Fatalf("%s: unexpected error %v", c.name, err)
	}
}

// beat sends the heartbeats that are due and reacts to their answers.
func (s *churn) beat() {
	for _, c := range s.live() {
		if c.phase != phaseStable || s.h.now.Sub(c.lastBeat) < churnHeartbeat {
			continue
		}
		c.lastBeat = s.h.now
		if err := s.h.heartbeat(c.memberID, c.gen); err != nil {
			s.onError(c, err)
		}
	}
	s.react()
}

func (s *churn) step() {
	live := s.live()
	pick := func() *simClient { return live[s.rng.Intn(len(live))] }
	switch n := s.rng.Intn(100); {
	case n < 8 && len(live) < 12:
		instance := ""
		if s.rng.Intn(3) == 0 {
			instance = fmt.Sprintf("i%d", s.nNamed+1)
		}
		s.start(instance)
	case n < 12 && len(live) > 0:
		c := pick()
		if c.memberID != "" {
			s.h.leave(LeaveMember{MemberID: c.memberID, InstanceID: c.instance})
		}
		c.phase = phaseGone
	case n < 16 && len(live) > 0:
		c := pick()
		c.phase = phaseGone // crashed: silent from now on
		if c.instance != "" && s.rng.Intn(2) == 0 {
			// A static member restarts with its instance id.
			s.nNamed++
			r := &simClient{name: fmt.Sprintf("c%d", s.nNamed), instance: c.instance, metadata: c.metadata, lastBeat: s.h.now}
			if s.rng.Intn(4) == 0 {
				r.metadata += "'"
			}
			s.clients = append(s.clients, r)
			s.join(r)
		}
	case n < 22 && len(live) > 0:
		if c := pick(); c.phase == phaseStable {
			if s.rng.Intn(3) == 0 {
				c.metadata += "+"
			}
			s.join(c)
		}
	case n < 40:
		s.h.store(nil)
	default:
		s.h.advance(time.Duration(s.rng.Intn(2000)) * time.Millisecond)
	}
	s.react()
	s.beat()
	s.checkStable()
}

// checkStable checks that a Stable group holds, for every member, what its generation's leader gave it.
func (s *churn) checkStable() {
	d := s.h.g.Describe()
	if d.State != Stable {
		return
	}
	plan := s.assigned[d.Generation]
	for _, m := range d.Members {
		slot := m.MemberID
		if m.InstanceID != "" {
			slot = m.InstanceID
		}
		if want, ok := plan[slot]; !ok || !bytes.Equal(m.Assignment, want) {
			s.t.Fatalf("stable generation %d: member %s holds %q, leader gave %q", d.Generation, m.MemberID, m.Assignment, want)
		}
	}
}

// settle lets the live clients run undisturbed until the group is Stable with exactly them.
func (s *churn) settle() {
	for range 600 {
		s.h.store(nil)
		s.h.advance(500 * time.Millisecond)
		s.react()
		s.beat()
		s.checkStable()
		if s.settled() {
			return
		}
	}
	s.t.Fatalf("group did not settle: %+v", s.h.g.Describe())
}

func (s *churn) settled() bool {
	d := s.h.g.Describe()
	live := s.live()
	if d.State != Stable || len(d.Members) != len(live) {
		return len(live) == 0 && d.State == Empty
	}
	for _, c := range live {
		if c.phase != phaseStable || c.gen != d.Generation ||
			!slices.ContainsFunc(d.Members, func(m MemberDescription) bool { return m.MemberID == c.memberID }) {
			return false
		}
	}
	return true
}

func TestGroupChurn(t *testing.T) {
	for seed := range int64(20) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			s := newChurn(t, seed)
			for range 1500 {
				s.step()
			}
			s.settle()
			if gen := s.h.g.Generation(); gen < 20 {
				t.Fatalf("only %d generations: the churn is too tame", gen)
			}
			t.Logf("generations %d, records %d, requests %d, clients %d", s.h.g.Generation(), len(s.h.records), s.h.nextRef, len(s.clients))
			// Every request gets exactly one answer (the harness fails on a second).
			s.h.store(nil)
			s.h.apply(s.h.g.Unload())
			for ref := Ref(1); ref <= s.h.nextRef; ref++ {
				if !s.h.answered(ref) {
					t.Fatalf("request %d never answered", ref)
				}
			}
		})
	}
}
