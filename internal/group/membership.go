package group

import "time"

// Heartbeat handles a Heartbeat request: it keeps the member's session alive and tells it whether to
// rejoin (ErrRebalanceInProgress).
func (g *Group) Heartbeat(now time.Time, req HeartbeatRequest) (Output, error) {
	if err := g.validateMember(req.MemberID, req.InstanceID, req.Generation); err != nil {
		return g.finish(Output{}), err
	}
	m := g.byID[req.MemberID]
	m.deadline = now.Add(m.session)
	if g.state == PreparingRebalance {
		return g.finish(Output{}), ErrRebalanceInProgress
	}
	return g.finish(Output{}), nil
}

// validateMember checks a request from a member of the current generation.
func (g *Group) validateMember(memberID, instance string, generation int32) error {
	switch {
	case g.state == Dead:
		return ErrCoordinatorNotAvailable
	case g.fencedInstance(instance, memberID):
		return ErrFencedInstanceID
	case g.byID[memberID] == nil:
		return ErrUnknownMemberID
	case generation != g.generation:
		return ErrIllegalGeneration
	}
	return nil
}

// Leave handles a LeaveGroup request and returns one error per member, in order (nil: it left). A
// member named by InstanceID alone is removed whatever its member id (an admin's removal, v3+).
func (g *Group) Leave(now time.Time, leaving []LeaveMember) (Output, []error) {
	var out Output
	errs := make([]error, len(leaving))
	for i, lm := range leaving {
		errs[i] = g.leave(now, lm, &out)
	}
	return g.finish(out), errs
}

func (g *Group) leave(now time.Time, lm LeaveMember, out *Output) error {
	if g.state == Dead {
		return ErrCoordinatorNotAvailable
	}
	if lm.InstanceID != "" {
		m := g.instances[lm.InstanceID]
		switch {
		case m == nil:
			return ErrUnknownMemberID
		case lm.MemberID != "" && lm.MemberID != m.id:
			return ErrFencedInstanceID
		}
		g.removeMember(now, m, ErrUnknownMemberID, out)
		return nil
	}
	if _, ok := g.pending[lm.MemberID]; ok {
		delete(g.pending, lm.MemberID)
		g.tryCompleteJoin(now, out)
		return nil
	}
	m := g.byID[lm.MemberID]
	if m == nil {
		return ErrUnknownMemberID
	}
	g.removeMember(now, m, ErrUnknownMemberID, out)
	return nil
}

// ValidateCommit checks who sends an OffsetCommit; nil means the offsets may be written. A member's
// commit also keeps its session alive. Commits are accepted during PreparingRebalance, so that members
// can commit before they give up their partitions, but not during CompletingRebalance.
func (g *Group) ValidateCommit(now time.Time, req CommitRequest) (Output, error) {
	if g.state == Dead {
		return g.finish(Output{}), ErrCoordinatorNotAvailable
	}
	if req.Generation < 0 && req.MemberID == "" && req.InstanceID == "" {
		if g.state != Empty {
			// Only members commit for a group that has some.
			return g.finish(Output{}), ErrUnknownMemberID
		}
		return g.finish(Output{}), nil
	}
	if err := g.validateMember(req.MemberID, req.InstanceID, req.Generation); err != nil {
		return g.finish(Output{}), err
	}
	if g.state == CompletingRebalance {
		return g.finish(Output{}), ErrRebalanceInProgress
	}
	m := g.byID[req.MemberID]
	m.deadline = now.Add(m.session)
	return g.finish(Output{}), nil
}

// ValidateTxnCommit checks who sends a TxnOffsetCommit (KIP-447); nil means the offsets may be staged. A
// request naming a member, an instance or a generation (v3+) is checked as a member's commit is; one
// naming none (before v3, or a producer that is no member) is accepted in any state but Dead, since the
// transaction rather than the membership guards it. Nothing changes: the member's session is not renewed.
func (g *Group) ValidateTxnCommit(req CommitRequest) error {
	if g.state == Dead {
		return ErrCoordinatorNotAvailable
	}
	if req.Generation < 0 && req.MemberID == "" && req.InstanceID == "" {
		return nil
	}
	return g.validateMember(req.MemberID, req.InstanceID, req.Generation)
}
