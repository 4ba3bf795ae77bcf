package group

import (
	"slices"
	"time"
)

// Join handles a JoinGroup request. Its response is in the Output at once (errors, KIP-394's member id, a
// member rejoining a generation it is already in) or in the Output of a later call, when the join phase
// completes.
func (g *Group) Join(now time.Time, req JoinRequest) Output {
	var out Output
	g.join(now, req, &out)
	return g.finish(out)
}

func (g *Group) join(now time.Time, req JoinRequest, out *Output) {
	switch {
	case g.state == Dead:
		joinFailed(req.Ref, ErrCoordinatorNotAvailable, out)
	case req.SessionTimeout < g.cfg.SessionTimeoutMin || req.SessionTimeout > g.cfg.SessionTimeoutMax:
		joinFailed(req.Ref, ErrInvalidSessionTimeout, out)
	case !g.supports(req.ProtocolType, req.Protocols):
		joinFailed(req.Ref, ErrInconsistentProtocol, out)
	case req.MemberID == "":
		g.joinNew(now, req, out)
	default:
		if _, ok := g.pending[req.MemberID]; ok {
			if req.InstanceID != "" {
				// Pending ids are handed to dynamic members only.
				joinFailed(req.Ref, ErrUnknownMemberID, out)
				return
			}
			delete(g.pending, req.MemberID)
			g.addMember(now, req, req.MemberID, out)
			return
		}
		g.joinKnown(now, req, out)
	}
}

func joinFailed(ref Ref, err error, out *Output) {
	out.Joins = append(out.Joins, JoinResponse{Ref: ref, Err: err, Generation: -1})
}

// supports reports whether a member with these protocols may be in the group: same protocol type, and at
// least one protocol every member supports.
func (g *Group) supports(protocolType string, protocols []Protocol) bool {
	if protocolType == "" || len(protocols) == 0 {
		return false
	}
	if len(g.members) == 0 {
		return true
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range protocols {
		if g.everyMemberSupports(p.Name) {
			return true
		}
	}
	return false
}

func (g *Group) everyMemberSupports(name string) bool {
	for _, m := range g.members {
		if !hasProtocol(m.protocols, name) {
			return false
		}
	}
	return true
}

func hasProtocol(ps []Protocol, name string) bool {
	return slices.ContainsFunc(ps, func(p Protocol) bool { return p.Name == name })
}

// joinNew handles a join without a member id: a static member's restart, a KIP-394 handshake, or a member
// added at once (JoinGroup v0-v3, or a new static member).
func (g *Group) joinNew(now time.Time, req JoinRequest, out *Output) {
	if req.InstanceID != "" {
		if m := g.instances[req.InstanceID]; m != nil {
			g.replaceStatic(now, m, req, out)
			return
		}
	}
	if g.cfg.MembersMax > 0 && len(g.members)+len(g.pending) >= g.cfg.MembersMax {
		joinFailed(req.Ref, ErrGroupMaxSize, out)
		return
	}
	prefix := req.ClientID
	if req.InstanceID != "" {
		prefix = req.InstanceID
	}
	id, ok := g.newMemberID(prefix)
	if !ok {
		joinFailed(req.Ref, ErrCoordinatorNotAvailable, out)
		return
	}
	if req.InstanceID == "" && req.Version >= 4 {
		g.pending[id] = now.Add(req.SessionTimeout)
		out.Joins = append(out.Joins, JoinResponse{Ref: req.Ref, Err: ErrMemberIDRequired, MemberID: id, Generation: -1})
		return
	}
	g.addMember(now, req, id, out)
}

func (g *Group) newMemberID(prefix string) (string, bool) {
	for range newIDAttempts {
		id := g.cfg.NewMemberID(prefix)
		if _, pending := g.pending[id]; id != "" && !pending && g.byID[id] == nil {
			return id, true
		}
	}
	return "", false
}

func (g *Group) addMember(now time.Time, req JoinRequest, id string, out *Output) {
	if len(g.members) == 0 {
		g.protocolType = req.ProtocolType
	}
	m := &member{id: id, instance: req.InstanceID, deadline: now.Add(req.SessionTimeout)}
	g.update(m, req)
	g.addToIndex(m)
	if g.state == PreparingRebalance && !g.delayUntil.IsZero() {
		g.newMemberAdded = true
	}
	g.parkJoin(m, req.Ref, out)
	g.rebalance(now, out)
}

// joinKnown handles a join from a member id the group has.
func (g *Group) joinKnown(now time.Time, req JoinRequest, out *Output) {
	if g.fencedInstance(req.InstanceID, req.MemberID) {
		joinFailed(req.Ref, ErrFencedInstanceID, out)
		return
	}
	m := g.byID[req.MemberID]
	if m == nil || (req.InstanceID != "" && g.instances[req.InstanceID] == nil) {
		joinFailed(req.Ref, ErrUnknownMemberID, out)
		return
	}
	m.deadline = now.Add(m.session)
	switch g.state {
	case PreparingRebalance:
		g.update(m, req)
		g.parkJoin(m, req.Ref, out)
		g.tryCompleteJoin(now, out)
	case CompletingRebalance:
		if protocolsEqual(m.protocols, req.Protocols) {
			// It missed its response; give it the current generation again.
			out.Joins = append(out.Joins, g.joinResponse(req.Ref, m, false))
			return
		}
		g.update(m, req)
		g.parkJoin(m, req.Ref, out)
		g.prepareRebalance(now, out)
	case Stable:
		if m.id != g.leader && protocolsEqual(m.protocols, req.Protocols) {
			resp := g.joinResponse(req.Ref, m, false)
			resp.Members = nil
			out.Joins = append(out.Joins, resp)
			return
		}
		// A leader's join is how a client asks for a rebalance (new topics matching its subscription).
		g.update(m, req)
		g.parkJoin(m, req.Ref, out)
		g.prepareRebalance(now, out)
	case Empty, Dead:
		joinFailed(req.Ref, ErrUnknownMemberID, out)
	}
}

// replaceStatic gives a restarted static member a new member id, fencing the old one. Its assignment is
// kept without a rebalance if the group is Stable and its metadata is unchanged.
func (g *Group) replaceStatic(now time.Time, m *member, req JoinRequest, out *Output) {
	id, ok := g.newMemberID(req.InstanceID)
	if !ok {
		joinFailed(req.Ref, ErrCoordinatorNotAvailable, out)
		return
	}
	g.answerParked(m, ErrFencedInstanceID, out)
	oldProtocols := m.protocols
	delete(g.byID, m.id)
	if g.leader == m.id {
		g.leader = id
	}
	m.id = id
	g.byID[id] = m
	g.update(m, req)
	m.deadline = now.Add(m.session)
	g.parkJoin(m, req.Ref, out)
	switch g.state {
	case Stable:
		if g.selectProtocol() == g.protocol &&
			sameSubscription(g.protocolType, protocolMetadata(oldProtocols, g.protocol), m.metadataFor(g.protocol)) {
			ticket := g.record(nil, out)
			g.held[ticket] = heldJoin{memberID: id, generation: g.generation}
			return
		}
		g.prepareRebalance(now, out)
	case CompletingRebalance:
		g.prepareRebalance(now, out)
	case PreparingRebalance:
		g.tryCompleteJoin(now, out)
	case Empty, Dead:
		// A group without members has no static member to replace.
		g.dropMember(m, ErrUnknownMemberID, out)
	}
}

func (g *Group) update(m *member, req JoinRequest) {
	m.clientID, m.clientHost = req.ClientID, req.ClientHost
	m.protocols = cloneProtocols(req.Protocols)
	m.session = req.SessionTimeout
	m.rebalance = rebalanceOrSession(req.RebalanceTimeout, req.SessionTimeout)
}

// parkJoin holds m's join until the join phase completes; an older parked join of m is superseded.
func (g *Group) parkJoin(m *member, ref Ref, out *Output) {
	if m.awaitingJoin && m.joinRef != ref {
		joinFailed(m.joinRef, ErrRebalanceInProgress, out)
	}
	m.joinRef, m.awaitingJoin = ref, true
}

// rebalance starts a rebalance, or re-checks the join phase if one is running.
func (g *Group) rebalance(now time.Time, out *Output) {
	switch g.state {
	case Empty, CompletingRebalance, Stable:
		g.prepareRebalance(now, out)
	case PreparingRebalance:
		g.tryCompleteJoin(now, out)
	case Dead:
	}
}

func (g *Group) prepareRebalance(now time.Time, out *Output) {
	fromEmpty := g.state == Empty
	for _, m := range g.members {
		if m.awaitingSync {
			m.awaitingSync = false
			out.Syncs = append(out.Syncs, SyncResponse{Ref: m.syncRef, Err: ErrRebalanceInProgress})
		}
		m.owesSync = false
	}
	g.syncTicket, g.syncAssignments, g.syncDeadline = 0, nil, time.Time{}
	g.state = PreparingRebalance
	timeout := g.rebalanceTimeout()
	g.joinDeadline = now.Add(timeout)
	g.delayUntil, g.delayRemaining, g.newMemberAdded = time.Time{}, 0, false
	if fromEmpty && g.cfg.InitialRebalanceDelay > 0 {
		g.delayUntil = now.Add(min(g.cfg.InitialRebalanceDelay, timeout))
		g.delayRemaining = max(timeout-g.cfg.InitialRebalanceDelay, 0)
	}
	g.tryCompleteJoin(now, out)
}

// tryCompleteJoin ends the join phase early once every member and pending member id has joined.
func (g *Group) tryCompleteJoin(now time.Time, out *Output) {
	if g.state != PreparingRebalance || !g.delayUntil.IsZero() {
		return
	}
	if len(g.members) > 0 {
		if len(g.pending) > 0 {
			return
		}
		for _, m := range g.members {
			if !m.awaitingJoin {
				return
			}
		}
	}
	g.completeJoin(now, out)
}

// endInitialDelay extends the initial delay if members joined during it, else ends the join phase.
func (g *Group) endInitialDelay(now time.Time, out *Output) {
	if g.newMemberAdded && g.delayRemaining > 0 {
		d := min(g.cfg.InitialRebalanceDelay, g.delayRemaining)
		g.delayUntil = now.Add(d)
		g.delayRemaining -= d
		g.newMemberAdded = false
		return
	}
	g.delayUntil = time.Time{}
	g.completeJoin(now, out)
}

// completeJoin ends the join phase: dynamic members that did not rejoin are removed, and the next
// generation starts with every remaining member (static members keep their place until their session
// expires).
func (g *Group) completeJoin(now time.Time, out *Output) {
	for _, m := range slices.Clone(g.members) {
		if !m.awaitingJoin && m.instance == "" {
			g.dropMember(m, ErrUnknownMemberID, out)
		}
	}
	if len(g.members) > 0 && !g.electLeader() {
		// Only static members that did not rejoin are left: wait for them or their sessions.
		g.joinDeadline = now.Add(g.rebalanceTimeout())
		return
	}
	g.generation++
	g.delayUntil = time.Time{}
	if len(g.members) == 0 {
		g.state, g.protocol, g.leader = Empty, "", ""
		g.record(nil, out)
		return
	}
	g.state = CompletingRebalance
	g.protocol = g.selectProtocol()
	g.syncDeadline = now.Add(g.rebalanceTimeout())
	for _, m := range g.members {
		m.deadline = now.Add(m.session)
		m.owesSync = true
		if m.awaitingJoin {
			m.awaitingJoin = false
			out.Joins = append(out.Joins, g.joinResponse(m.joinRef, m, false))
		}
	}
}

// electLeader keeps the leader if it rejoined, else picks the earliest member that did.
func (g *Group) electLeader() bool {
	if m := g.byID[g.leader]; m != nil && m.awaitingJoin {
		return true
	}
	for _, m := range g.members {
		if m.awaitingJoin {
			g.leader = m.id
			return true
		}
	}
	return false
}

// selectProtocol picks, among the protocols every member supports, the one most members prefer; a tie
// goes to the one listed first by the earliest member.
func (g *Group) selectProtocol() string {
	if len(g.members) == 0 {
		return ""
	}
	var candidates []string
	for _, p := range g.members[0].protocols {
		if g.everyMemberSupports(p.Name) && !slices.Contains(candidates, p.Name) {
			candidates = append(candidates, p.Name)
		}
	}
	votes := make(map[string]int, len(candidates))
	for _, m := range g.members {
		for _, p := range m.protocols {
			if slices.Contains(candidates, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := ""
	for _, c := range candidates {
		if best == "" || votes[c] > votes[best] {
			best = c
		}
	}
	return best
}

// joinResponse is m's successful response for the current generation; the leader gets every member.
func (g *Group) joinResponse(ref Ref, m *member, skipAssignment bool) JoinResponse {
	resp := JoinResponse{
		Ref:            ref,
		MemberID:       m.id,
		Generation:     g.generation,
		ProtocolType:   g.protocolType,
		Protocol:       g.protocol,
		Leader:         g.leader,
		SkipAssignment: skipAssignment,
	}
	if m.id == g.leader {
		resp.Members = make([]JoinedMember, 0, len(g.members))
		for _, x := range g.members {
			resp.Members = append(resp.Members, JoinedMember{MemberID: x.id, InstanceID: x.instance, Metadata: x.metadataFor(g.protocol)})
		}
	}
	return resp
}
