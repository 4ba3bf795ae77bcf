package group

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Classic members of a KIP-848 group (docs/groups.md, "Online upgrade and downgrade"): a classic group
// whose members are all consumers becomes a ConsumerGroup when a consumer-protocol member joins it
// (ConsumerGroupFromClassic), and its classic members stay, served through JoinGroup, SyncGroup,
// Heartbeat and LeaveGroup translated onto the group's reconciliation; once its members are all
// classic again it becomes a classic group (Downgrade). A classic member's epoch is its generation.

// classicState is what a classic member has beyond a KIP-848 member.
type classicState struct {
	session time.Duration
	// protocols are the member's, in its order of preference; the first is the one it is answered with.
	protocols []Protocol
	// rejoinEnd, once the member was told to rejoin (ErrRebalanceInProgress), is when it is removed if
	// it has not; zero: not told since its last join.
	rejoinEnd time.Time
}

// rejoinOverdue reports whether c is a classic member's that was told to rejoin and has not by now.
func (c *classicState) rejoinOverdue(now time.Time) bool {
	return c != nil && !c.rejoinEnd.IsZero() && !now.Before(c.rejoinEnd)
}

// protocol is the name of the protocol the member is answered with.
func (c *classicState) protocol() string { return c.protocols[0].Name }

// ConsumerGroupFromClassic converts a classic group with members, as Group.Snapshot reports it, into a
// KIP-848 group of classic members whose sessions start at now: the generation becomes the group, the
// assignment and every member's epoch, and each member's assignment its current and target assignment,
// by topic id as topics has them (partitions of topics topics lacks are dropped). A group whose protocol
// type is not "consumer", a member whose metadata or assignment does not decode, a partition assigned to
// two members, or more members than cfg.MembersMax, gets ErrNotConsumerGroup.
func ConsumerGroupFromClassic(md Metadata, cfg ConsumerConfig, topics Topics, now time.Time) (*ConsumerGroup, error) {
	g, err := NewConsumerGroup(md.Group, cfg)
	if err != nil {
		return nil, err
	}
	switch {
	case md.ProtocolType != consumerProtocolType:
		return nil, fmt.Errorf("%w: protocol type %q is not %q", ErrNotConsumerGroup, md.ProtocolType, consumerProtocolType)
	case g.cfg.MembersMax > 0 && len(md.Members) >= g.cfg.MembersMax:
		return nil, fmt.Errorf("%w: %d members, at most %d", ErrNotConsumerGroup, len(md.Members), g.cfg.MembersMax)
	}
	g.epoch, g.assignmentEpoch = md.Generation, md.Generation
	for _, mm := range md.Members {
		var sub kmsg.ConsumerMemberMetadata
		if err := sub.ReadFrom(mm.Subscription); err != nil {
			return nil, fmt.Errorf("%w: member %q metadata: %w", ErrNotConsumerGroup, mm.MemberID, err)
		}
		assigned, err := decodeAssignment(mm.Assignment, topics)
		if err != nil {
			return nil, fmt.Errorf("%w: member %q assignment: %w", ErrNotConsumerGroup, mm.MemberID, err)
		}
		m := &consumerMember{
			id: mm.MemberID, instance: mm.InstanceID, clientID: mm.ClientID, clientHost: mm.ClientHost,
			epoch: md.Generation, prevEpoch: md.Generation, rebalance: mm.RebalanceTimeout,
			topics: sortedTopics(sub.Topics), assigned: assigned, revoking: partSet{}, since: map[tidp]int32{},
			sessionEnd: now.Add(mm.SessionTimeout),
			classic: &classicState{session: mm.SessionTimeout,
				protocols: []Protocol{{Name: md.Protocol, Metadata: bytes.Clone(mm.Subscription)}}},
		}
		for tp := range assigned {
			if other, taken := g.owners[tp]; taken {
				return nil, fmt.Errorf("%w: members %q and %q are both assigned partition %d of a topic",
					ErrNotConsumerGroup, other, m.id, tp.p)
			}
			g.owners[tp], m.since[tp] = m.id, md.Generation
		}
		g.members[m.id], g.target[m.id] = m, maps.Clone(assigned)
		if m.instance != "" {
			g.instances[m.instance] = m
		}
	}
	// g.topics stays empty: the next refresh sees the subscribed topics as changed and grows the epoch,
	// so the target assignment is recomputed at the first request.
	return g, nil
}

// decodeAssignment is a ConsumerMemberAssignment's partitions by topic id; zero bytes are an empty
// assignment (a member the leader gave nothing).
func decodeAssignment(b []byte, topics Topics) (partSet, error) {
	out := partSet{}
	if len(b) == 0 {
		return out, nil
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil {
		return nil, err
	}
	for _, t := range a.Topics {
		addPartitions(out, topics, t.Topic, t.Partitions)
	}
	return out, nil
}

// addPartitions adds partitions of the topic named name to s, when topics has it and has them.
func addPartitions(s partSet, topics Topics, name string, partitions []int32) {
	info, ok := topics.Lookup(name)
	if !ok {
		return
	}
	for _, p := range partitions {
		if p >= 0 && p < info.Partitions {
			s[tidp{info.ID, p}] = struct{}{}
		}
	}
}

// sortedTopics is names sorted without duplicates, never nil.
func sortedTopics(names []string) []string {
	out := append([]string{}, names...)
	slices.Sort(out)
	return slices.Compact(out)
}

// classicMember is the classic member a Sync or Heartbeat names, at its generation.
func (g *ConsumerGroup) classicMember(memberID, instanceID string, generation int32) (*consumerMember, error) {
	m := g.members[memberID]
	switch {
	case instanceID != "" && g.instances[instanceID] != nil && g.instances[instanceID] != m:
		return nil, fmt.Errorf("%w: instance %q is held by member %q", ErrFencedInstanceID, instanceID,
			g.instances[instanceID].id)
	case m == nil || m.classic == nil:
		return nil, fmt.Errorf("%w: %q", ErrUnknownMemberID, memberID)
	case instanceID != "" && m.instance != instanceID:
		return nil, fmt.Errorf("%w: member %q is not instance %q", ErrFencedInstanceID, memberID, instanceID)
	case generation != m.epoch:
		return nil, fmt.Errorf("%w: member %q sent generation %d, its epoch is %d", ErrIllegalGeneration,
			memberID, generation, m.epoch)
	}
	return m, nil
}

// ClassicJoin handles a JoinGroup of a classic member at now, with the cluster's topics: it adds the
// member (a new id when it names none) or updates it, reads its subscription and the partitions it owns
// from its first protocol's metadata, and reconciles it as a heartbeat naming those partitions would.
// The answer is at once: the member's epoch as the generation, its first protocol, and no leader.
func (g *ConsumerGroup) ClassicJoin(now time.Time, req JoinRequest, topics Topics) JoinResponse {
	fail := func(err error) JoinResponse { return JoinResponse{Ref: req.Ref, Err: err, Generation: -1} }
	if req.SessionTimeout < g.cfg.ClassicSessionTimeoutMin || req.SessionTimeout > g.cfg.ClassicSessionTimeoutMax {
		return fail(fmt.Errorf("%w: %v", ErrInvalidSessionTimeout, req.SessionTimeout))
	}
	if req.ProtocolType != consumerProtocolType || len(req.Protocols) == 0 {
		return fail(fmt.Errorf("%w: a KIP-848 group takes protocol type %q with protocols", ErrInconsistentProtocol,
			consumerProtocolType))
	}
	var sub kmsg.ConsumerMemberMetadata
	if err := sub.ReadFrom(req.Protocols[0].Metadata); err != nil {
		return fail(fmt.Errorf("%w: protocol %q metadata: %w", ErrInconsistentProtocol, req.Protocols[0].Name, err))
	}
	var m *consumerMember
	if req.MemberID != "" {
		if m = g.members[req.MemberID]; m == nil || m.classic == nil {
			return fail(fmt.Errorf("%w: %q", ErrUnknownMemberID, req.MemberID))
		}
	}
	if held := g.instances[req.InstanceID]; req.InstanceID != "" && held != nil && held != m {
		if m != nil || held.classic == nil {
			return fail(fmt.Errorf("%w: instance %q is held by member %q", ErrFencedInstanceID, req.InstanceID, held.id))
		}
		// A static classic member restarted: it takes over its old incarnation, with a new member id,
		// what it was assigned and its epoch, so that its restart moves no partition.
		m = g.rename(held, g.cfg.NewMemberID(req.InstanceID))
	}
	changed := false
	if m == nil {
		if g.cfg.MembersMax > 0 && len(g.members) >= g.cfg.MembersMax {
			return fail(fmt.Errorf("%w: %d members", ErrGroupMaxSize, len(g.members)))
		}
		m = &consumerMember{id: g.cfg.NewMemberID(cmp.Or(req.InstanceID, req.ClientID)), assigned: partSet{},
			revoking: partSet{}, since: map[tidp]int32{}}
		g.members[m.id] = m
		changed = true
	}
	if m.instance != "" && m.instance != req.InstanceID {
		delete(g.instances, m.instance)
	}
	m.classic = &classicState{session: req.SessionTimeout, protocols: cloneProtocols(req.Protocols)}
	hb := ConsumerHeartbeat{InstanceID: req.InstanceID, RackID: sub.Rack, SubscribedTopics: sortedTopics(sub.Topics),
		RebalanceTimeout: rebalanceOrSession(req.RebalanceTimeout, req.SessionTimeout), ClientID: req.ClientID,
		ClientHost: req.ClientHost}
	if g.update(m, hb) {
		changed = true
	}
	if m.instance != "" {
		g.instances[m.instance] = m
	}
	owned := partSet{}
	for _, o := range sub.OwnedPartitions {
		addPartitions(owned, topics, o.Topic, o.Partitions)
	}
	g.refresh(topics, changed)
	m.sessionEnd = now.Add(req.SessionTimeout)
	g.reconcile(now, m, owned)
	return JoinResponse{Ref: req.Ref, MemberID: m.id, Generation: m.epoch, ProtocolType: consumerProtocolType,
		Protocol: m.classic.protocol()}
}

// rename gives member m the id id, in every index of the group; its old id is then unknown.
func (g *ConsumerGroup) rename(m *consumerMember, id string) *consumerMember {
	delete(g.members, m.id)
	if target, ok := g.target[m.id]; ok {
		delete(g.target, m.id)
		g.target[id] = target
	}
	m.id = id
	g.members[id] = m
	for _, s := range []partSet{m.assigned, m.revoking} {
		for tp := range s {
			g.owners[tp] = id
		}
	}
	return m
}

// ClassicSync handles a SyncGroup of a classic member at now: the member at its epoch gets its current
// assignment, without what it must still revoke, as a ConsumerMemberAssignment v0 by topic name.
func (g *ConsumerGroup) ClassicSync(now time.Time, req SyncRequest) SyncResponse {
	m, err := g.classicMember(req.MemberID, req.InstanceID, req.Generation)
	if err != nil {
		return SyncResponse{Ref: req.Ref, Err: err}
	}
	if req.ProtocolType != "" && req.ProtocolType != consumerProtocolType || req.Protocol != "" && req.Protocol != m.classic.protocol() {
		return SyncResponse{Ref: req.Ref, Err: fmt.Errorf("%w: member %q uses %q %q", ErrInconsistentProtocol, m.id,
			consumerProtocolType, m.classic.protocol())}
	}
	m.sessionEnd = now.Add(m.classic.session)
	return SyncResponse{Ref: req.Ref, ProtocolType: consumerProtocolType, Protocol: m.classic.protocol(),
		Assignment: g.encodeAssignment(m.assigned)}
}

// encodeAssignment is s as a ConsumerMemberAssignment v0, topics by name in name order; partitions of
// topics the group no longer sees are left out.
func (g *ConsumerGroup) encodeAssignment(s partSet) []byte {
	names := make(map[[16]byte]string, len(g.topics))
	for name, info := range g.topics {
		names[info.ID] = name
	}
	byName := map[string][]int32{}
	for _, tp := range s.sorted() {
		if name, ok := names[tp.id]; ok {
			byName[name] = append(byName[name], tp.p)
		}
	}
	a := kmsg.NewConsumerMemberAssignment()
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		t := kmsg.NewConsumerMemberAssignmentTopic()
		t.Topic, t.Partitions = name, byName[name]
		a.Topics = append(a.Topics, t)
	}
	return a.AppendTo(nil)
}

// ClassicHeartbeat handles a Heartbeat of a classic member at now: the member at its epoch renews its
// session, and gets ErrRebalanceInProgress when rejoining would move it (its epoch is behind the
// assignment epoch, it must revoke, or partitions of its target it waits for are free); it must then
// rejoin within its rebalance timeout.
func (g *ConsumerGroup) ClassicHeartbeat(now time.Time, req HeartbeatRequest) error {
	m, err := g.classicMember(req.MemberID, req.InstanceID, req.Generation)
	if err != nil {
		return err
	}
	m.sessionEnd = now.Add(m.classic.session)
	if !g.classicMustRejoin(m) {
		return nil
	}
	if m.classic.rejoinEnd.IsZero() {
		m.classic.rejoinEnd = now.Add(m.rebalance)
	}
	return fmt.Errorf("%w: member %q is at epoch %d, the assignment at %d", ErrRebalanceInProgress, m.id, m.epoch,
		g.assignmentEpoch)
}

// classicMustRejoin reports whether a JoinGroup of classic member m would move its reconciliation on.
func (g *ConsumerGroup) classicMustRejoin(m *consumerMember) bool {
	switch m.state {
	case unrevoked:
		return true
	case unreleased:
		for tp := range g.target[m.id] {
			if _, taken := g.owners[tp]; !taken {
				return true
			}
		}
	case reconciled:
	}
	return m.epoch != g.assignmentEpoch
}

// ClassicLeave handles a LeaveGroup naming classic members: each is removed, freeing its partitions;
// one error per member named (ErrUnknownMemberID for one that is not a classic member of the group,
// ErrFencedInstanceID for a member id that is not the instance's).
func (g *ConsumerGroup) ClassicLeave(members []LeaveMember) []error {
	errs := make([]error, len(members))
	for i, lm := range members {
		m := g.members[lm.MemberID]
		if lm.MemberID == "" {
			m = g.instances[lm.InstanceID]
		}
		switch {
		case m == nil || m.classic == nil:
			errs[i] = fmt.Errorf("%w: %q", ErrUnknownMemberID, lm.MemberID)
		case lm.InstanceID != "" && m.instance != lm.InstanceID:
			errs[i] = fmt.Errorf("%w: member %q is not instance %q", ErrFencedInstanceID, m.id, lm.InstanceID)
		default:
			g.remove(m)
		}
	}
	return errs
}

// Downgrade makes classic, an Empty classic group of g's id, the classic group of g's members once they
// are all classic (docs/groups.md, "Online upgrade and downgrade"; Group.Adopt): each member with its
// metadata for a protocol every member supports (the first such of the first member's, in member id
// order), its timeouts and what it owns; the generation is the highest member epoch, so that a member
// at it is told by its next heartbeat to rejoin, and the classic group starts a rebalance at now, whose
// Output is returned. false, and nothing changes, when g has a KIP-848 member or no members, or its
// members share no protocol.
func (g *ConsumerGroup) Downgrade(classic *Group, now time.Time) (Output, bool) {
	if len(g.members) == 0 {
		return Output{}, false
	}
	for _, m := range g.members {
		if m.classic == nil {
			return Output{}, false
		}
	}
	ids := slices.Sorted(maps.Keys(g.members))
	protocol := ""
	for _, p := range g.members[ids[0]].classic.protocols {
		if !slices.ContainsFunc(ids, func(id string) bool { return !hasProtocol(g.members[id].classic.protocols, p.Name) }) {
			protocol = p.Name
			break
		}
	}
	if protocol == "" {
		return Output{}, false
	}
	md := Metadata{Group: g.id, ProtocolType: consumerProtocolType, Protocol: protocol, Leader: ids[0]}
	for _, id := range ids {
		m := g.members[id]
		owned := maps.Clone(m.assigned)
		maps.Copy(owned, m.revoking)
		md.Generation = max(md.Generation, m.epoch)
		md.Members = append(md.Members, MemberMetadata{MemberID: m.id, InstanceID: m.instance, ClientID: m.clientID,
			ClientHost: m.clientHost, SessionTimeout: m.classic.session, RebalanceTimeout: m.rebalance,
			Subscription: protocolMetadata(m.classic.protocols, protocol), Assignment: g.encodeAssignment(owned)})
	}
	out, err := classic.Adopt(md, now)
	if err != nil {
		// The caller passes the group's Empty classic group, and every member has an id, a session
		// timeout and its own instance id.
		panic(fmt.Sprintf("group: downgrade of %q refused: %v", g.id, err))
	}
	return out, true
}
