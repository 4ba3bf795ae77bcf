package controller

import (
	"sort"
	"sync"
	"time"
)

// sessions is the controller leader's in-memory view of broker liveness. It is not part of the
// replicated state: a session expiring is decided here and proposed as FenceBroker. Times are
// passed in, so the tracker is deterministic under a test clock.
type sessions struct {
	timeout time.Duration

	mu   sync.Mutex
	byID map[int32]*session
}

type session struct {
	deadline  time.Time
	lastSeen  time.Time
	raftState string
	applied   uint64
	// commit and prevCommit are the leader's commit index when the last heartbeat arrived and when
	// the one before it did: a broker whose applied index has reached prevCommit has the metadata log
	// to within a heartbeat interval.
	commit, prevCommit uint64
}

func newSessions(timeout time.Duration) *sessions {
	return &sessions{timeout: timeout, byID: map[int32]*session{}}
}

// reset gives every broker in ids a fresh session starting at now and forgets the others: what a
// new leader does before it fences anyone.
func (s *sessions) reset(now time.Time, ids []int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	byID := make(map[int32]*session, len(ids))
	for _, id := range ids {
		old := s.byID[id]
		ns := &session{deadline: now.Add(s.timeout)}
		if old != nil {
			ns.lastSeen, ns.raftState, ns.applied = old.lastSeen, old.raftState, old.applied
		}
		byID[id] = ns
	}
	s.byID = byID
}

// touch records a heartbeat (or registration) of id at now, reporting applied, while the leader's
// commit index is commit.
func (s *sessions) touch(id int32, now time.Time, raftState string, applied, commit uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.byID[id]
	if ss == nil {
		ss = &session{}
		s.byID[id] = ss
	}
	ss.deadline = now.Add(s.timeout)
	ss.lastSeen = now
	if raftState != "" {
		ss.raftState = raftState
	}
	if applied > ss.applied {
		ss.applied = applied
	}
	ss.prevCommit, ss.commit = ss.commit, commit
}

// expired returns the brokers whose session deadline is not after now, sorted.
func (s *sessions) expired(now time.Time) []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int32
	for id, ss := range s.byID {
		if !ss.deadline.After(now) {
			out = append(out, id)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// get returns a copy of id's session.
func (s *sessions) get(id int32) (session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.byID[id]
	if !ok {
		return session{}, false
	}
	return *ss, true
}

// forget drops id's session (a broker that is not in the image).
func (s *sessions) forget(id int32) {
	s.mu.Lock()
	delete(s.byID, id)
	s.mu.Unlock()
}
