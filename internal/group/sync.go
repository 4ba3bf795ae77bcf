package group

import (
	"bytes"
	"fmt"
	"slices"
	"time"
)

// consumerProtocolType is the protocol type of Kafka consumers, whose assignments have a known format.
const consumerProtocolType = "consumer"

// emptyConsumerAssignment is an encoded ConsumerMemberAssignment v0 with no topics and null user data.
// Some clients cannot decode zero bytes (research G11).
var emptyConsumerAssignment = []byte{0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}

// Sync handles a SyncGroup request. A member's response is in the Output at once while the group is
// Stable or on error; during CompletingRebalance every response waits for the leader's assignment and for
// the record holding it (see Stored).
func (g *Group) Sync(now time.Time, req SyncRequest) Output {
	var out Output
	if err := g.validateSync(req); err != nil {
		out.Syncs = append(out.Syncs, SyncResponse{Ref: req.Ref, Err: err})
		return g.finish(out)
	}
	m := g.byID[req.MemberID]
	m.deadline = now.Add(m.session)
	switch g.state {
	case PreparingRebalance:
		out.Syncs = append(out.Syncs, SyncResponse{Ref: req.Ref, Err: ErrRebalanceInProgress})
	case CompletingRebalance:
		if m.awaitingSync && m.syncRef != req.Ref {
			out.Syncs = append(out.Syncs, SyncResponse{Ref: m.syncRef, Err: ErrRebalanceInProgress})
		}
		m.syncRef, m.awaitingSync, m.owesSync = req.Ref, true, false
		if m.id == g.leader && g.syncTicket == 0 {
			g.syncAssignments = g.assignmentsFrom(req.Assignments)
			g.syncTicket = g.record(g.syncAssignments, &out)
		}
	case Stable:
		m.owesSync = false
		out.Syncs = append(out.Syncs, g.syncResponse(req.Ref, m))
	case Empty, Dead:
		out.Syncs = append(out.Syncs, SyncResponse{Ref: req.Ref, Err: ErrUnknownMemberID})
	}
	return g.finish(out)
}

func (g *Group) validateSync(req SyncRequest) error {
	switch {
	case g.state == Dead:
		return ErrCoordinatorNotAvailable
	case g.fencedInstance(req.InstanceID, req.MemberID):
		return ErrFencedInstanceID
	case g.byID[req.MemberID] == nil:
		return ErrUnknownMemberID
	case req.Generation != g.generation:
		return ErrIllegalGeneration
	case req.ProtocolType != "" && req.ProtocolType != g.protocolType,
		req.Protocol != "" && req.Protocol != g.protocol:
		return ErrInconsistentProtocol
	}
	return nil
}

// assignmentsFrom keeps the leader's assignment for every current member (others are ignored), empty for
// the members it left out.
func (g *Group) assignmentsFrom(given []MemberAssignment) map[string][]byte {
	out := make(map[string][]byte, len(g.members))
	for _, a := range given {
		if g.byID[a.MemberID] != nil {
			out[a.MemberID] = bytes.Clone(a.Assignment)
		}
	}
	for _, m := range g.members {
		if len(out[m.id]) == 0 && g.protocolType == consumerProtocolType {
			out[m.id] = emptyConsumerAssignment
		} else if out[m.id] == nil {
			out[m.id] = []byte{}
		}
	}
	return out
}

func (g *Group) syncResponse(ref Ref, m *member) SyncResponse {
	return SyncResponse{Ref: ref, ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: m.assignment}
}

// Stored reports the outcome of writing the Record with this ticket. The leader's assignment takes effect
// (the group turns Stable and the parked SyncGroups are answered) only once its record is stored; if the
// write failed, they get ErrCoordinatorNotAvailable and the group rebalances. A static member's restart
// is answered likewise. Tickets of other records, or of records a rebalance made stale, are ignored.
func (g *Group) Stored(now time.Time, ticket uint64, err error) Output {
	var out Output
	if ticket != 0 && ticket == g.syncTicket && g.state == CompletingRebalance {
		g.syncStored(now, err, &out)
		return g.finish(out)
	}
	h, ok := g.held[ticket]
	if !ok {
		return g.finish(out)
	}
	delete(g.held, ticket)
	m := g.byID[h.memberID]
	if m == nil || !m.awaitingJoin || g.state != Stable || g.generation != h.generation {
		// A rebalance started since: the member's join is answered when it completes.
		return g.finish(out)
	}
	m.awaitingJoin = false
	if err != nil {
		joinFailed(m.joinRef, fmt.Errorf("%w: %w", ErrCoordinatorNotAvailable, err), &out)
		return g.finish(out)
	}
	out.Joins = append(out.Joins, g.joinResponse(m.joinRef, m, m.id == g.leader))
	return g.finish(out)
}

func (g *Group) syncStored(now time.Time, err error, out *Output) {
	assignments := g.syncAssignments
	g.syncTicket, g.syncAssignments = 0, nil
	if err != nil {
		failed := fmt.Errorf("%w: %w", ErrCoordinatorNotAvailable, err)
		for _, m := range g.members {
			if m.awaitingSync {
				m.awaitingSync = false
				out.Syncs = append(out.Syncs, SyncResponse{Ref: m.syncRef, Err: failed})
			}
		}
		g.prepareRebalance(now, out)
		return
	}
	g.state = Stable
	for _, m := range g.members {
		m.assignment = assignments[m.id]
		if m.awaitingSync {
			m.awaitingSync = false
			m.deadline = now.Add(m.session)
			out.Syncs = append(out.Syncs, g.syncResponse(m.syncRef, m))
		}
	}
}

// expireSync removes the members that did not send SyncGroup within the rebalance timeout after their
// generation completed, and rebalances.
func (g *Group) expireSync(now time.Time, out *Output) {
	for _, m := range slices.Clone(g.members) {
		if m.owesSync {
			g.dropMember(m, ErrUnknownMemberID, out)
		}
	}
	g.prepareRebalance(now, out)
}
