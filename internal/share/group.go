package share

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Defaults Kafka uses for share group membership (group.share.session.timeout.ms,
// group.share.heartbeat.interval.ms).
const (
	DefaultSessionTimeout    = 45 * time.Second
	DefaultHeartbeatInterval = 5 * time.Second
)

// Assignor is the name ShareGroupDescribe reports for the assignor every share group uses.
const Assignor = "simple"

// GroupConfig holds a share group's membership settings.
type GroupConfig struct {
	// SessionTimeout removes a member that has not heartbeated for it; zero means
	// DefaultSessionTimeout.
	SessionTimeout time.Duration
	// HeartbeatInterval is what members are told to heartbeat at; zero means
	// DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	// MembersMax caps the members (group.share.max.size); zero means no cap.
	MembersMax int
}

func (c *GroupConfig) normalize() error {
	if c.SessionTimeout == 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.SessionTimeout < 0 || c.HeartbeatInterval < 0 || c.MembersMax < 0 {
		return fmt.Errorf("%w: %+v", ErrInvalidConfig, *c)
	}
	return nil
}

// GroupState is a share group's state as ShareGroupDescribe names it.
type GroupState int8

// The share group states.
const (
	// GroupEmpty: no members.
	GroupEmpty GroupState = iota
	// GroupStable: members, each with its share of the target assignment.
	GroupStable
)

// String returns Kafka's name for the state.
func (s GroupState) String() string {
	switch s {
	case GroupEmpty:
		return "Empty"
	case GroupStable:
		return "Stable"
	default:
		return fmt.Sprintf("GroupState(%d)", int8(s))
	}
}

// TopicInfo is what the assignor needs of a topic: its id and partition count.
type TopicInfo struct {
	ID         [16]byte
	Partitions int32
}

// Topics looks up a topic by name in the caller's current metadata; false when there is none.
type Topics func(name string) (TopicInfo, bool)

// TopicAssignment is the partitions of one topic assigned to a member.
type TopicAssignment struct {
	TopicID    [16]byte
	Topic      string
	Partitions []int32
}

// Leave and join epochs of ShareGroupHeartbeat.
const (
	// JoinEpoch is the member epoch of a join (or rejoin).
	JoinEpoch = 0
	// LeaveEpoch is the member epoch of a leave, and the epoch the answer to a leave carries.
	LeaveEpoch = -1
)

// HeartbeatRequest is the part of a ShareGroupHeartbeat the group needs.
type HeartbeatRequest struct {
	// MemberID is the client's, the same for the consumer's whole life.
	MemberID string
	// MemberEpoch is JoinEpoch to join, LeaveEpoch to leave, else the member's epoch.
	MemberEpoch int32
	// RackID is nil when unchanged.
	RackID *string
	// Subscribed is nil when unchanged; a join must name at least one topic.
	Subscribed []string
	ClientID   string
	ClientHost string
}

// HeartbeatResponse answers a HeartbeatRequest. On error only Err is set.
type HeartbeatResponse struct {
	Err               error
	MemberID          string
	MemberEpoch       int32
	HeartbeatInterval time.Duration
	// Assignment is the member's whole assignment, sent when the epoch answered is not the one the
	// request carried or the request named its subscription; nil: unchanged.
	Assignment []TopicAssignment
}

// MemberDescription is one member as ShareGroupDescribe reports it.
type MemberDescription struct {
	MemberID    string
	RackID      *string
	MemberEpoch int32
	ClientID    string
	ClientHost  string
	Subscribed  []string
	Assignment  []TopicAssignment
}

// GroupDescription is a share group as ShareGroupDescribe reports it.
type GroupDescription struct {
	Group           string
	State           GroupState
	GroupEpoch      int32
	AssignmentEpoch int32
	Assignor        string
	Members         []MemberDescription
}

type groupMember struct {
	id              string
	rack            *string
	clientID        string
	clientHost      string
	subscribed      []string
	epoch, previous int32
	assignment      []TopicAssignment
	deadline        time.Time
}

// Group is one share group's membership state machine at its group coordinator: members join, heartbeat
// and leave with ShareGroupHeartbeat, and the simple assignor gives each subscribed partition to one or
// more members. It does no I/O, starts no goroutine and reads no clock. It is not safe for concurrent
// use; one owner drives it.
//
// Epochs: a join, a leave, an expiry, a subscription change or a change of a subscribed topic's
// partitions bumps the group epoch and recomputes the target assignment at that epoch. A member moves
// to the target's epoch, and gets its part of the target, on its next heartbeat: a share-partition may
// have many members, so nothing waits for another member to give a partition up. A heartbeat may carry
// the member's current epoch or its previous one (the answer that moved it may have been lost).
type Group struct {
	id      string
	cfg     GroupConfig
	epoch   int32
	members map[string]*groupMember
	// target is the assignment computed at targetEpoch, per member id.
	target      map[string][]TopicAssignment
	targetEpoch int32
	// topics is what the target was computed from: each subscribed topic's id and partition count.
	topics map[string]TopicInfo
}

// NewGroup returns an empty share group.
func NewGroup(id string, cfg GroupConfig) (*Group, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	return &Group{id: id, cfg: cfg, members: map[string]*groupMember{}, target: map[string][]TopicAssignment{}, topics: map[string]TopicInfo{}}, nil
}

// RestoreGroup returns a share group read back from its record at a new coordinator: empty, at the
// group epoch recorded (its members rejoin and move the epoch past it).
func RestoreGroup(id string, cfg GroupConfig, epoch int32) (*Group, error) {
	g, err := NewGroup(id, cfg)
	if err != nil {
		return nil, err
	}
	if epoch < 0 {
		return nil, fmt.Errorf("%w: group epoch %d", ErrInvalidRequest, epoch)
	}
	g.epoch, g.targetEpoch = epoch, epoch
	return g, nil
}

// ID returns the group id.
func (g *Group) ID() string { return g.id }

// Epoch returns the group epoch, the one its record holds.
func (g *Group) Epoch() int32 { return g.epoch }

// SetConfig replaces the group's membership settings (share.session.timeout.ms and
// share.heartbeat.interval.ms changed). A member's heartbeat answers the new interval, and its session
// runs for the new timeout from that heartbeat on; the deadline set by its last heartbeat stays.
func (g *Group) SetConfig(cfg GroupConfig) error {
	if err := cfg.normalize(); err != nil {
		return err
	}
	g.cfg = cfg
	return nil
}

// State returns Empty without members, else Stable.
func (g *Group) State() GroupState {
	if len(g.members) == 0 {
		return GroupEmpty
	}
	return GroupStable
}

// Heartbeat handles a ShareGroupHeartbeat at now, with topics the caller's current metadata.
func (g *Group) Heartbeat(req HeartbeatRequest, topics Topics, now time.Time) HeartbeatResponse {
	switch {
	case req.MemberID == "":
		return HeartbeatResponse{Err: fmt.Errorf("%w: empty member id", ErrInvalidRequest)}
	case req.MemberEpoch == JoinEpoch && len(req.Subscribed) == 0:
		return HeartbeatResponse{Err: fmt.Errorf("%w: a join must name the subscribed topics", ErrInvalidRequest)}
	case req.MemberEpoch == LeaveEpoch:
		if g.members[req.MemberID] == nil {
			return HeartbeatResponse{Err: fmt.Errorf("%w: %q", ErrUnknownMemberID, req.MemberID)}
		}
		g.remove(req.MemberID, topics)
		return HeartbeatResponse{MemberID: req.MemberID, MemberEpoch: LeaveEpoch, HeartbeatInterval: g.cfg.HeartbeatInterval}
	}
	m := g.members[req.MemberID]
	switch {
	case m == nil && req.MemberEpoch != JoinEpoch:
		return HeartbeatResponse{Err: fmt.Errorf("%w: %q", ErrUnknownMemberID, req.MemberID)}
	case m == nil && g.cfg.MembersMax > 0 && len(g.members) >= g.cfg.MembersMax:
		return HeartbeatResponse{Err: fmt.Errorf("%w: %d members", ErrGroupMaxSize, len(g.members))}
	case m != nil && req.MemberEpoch != JoinEpoch && req.MemberEpoch != m.epoch && req.MemberEpoch != m.previous:
		return HeartbeatResponse{Err: fmt.Errorf("%w: epoch %d, member at %d", ErrFencedMemberEpoch, req.MemberEpoch, m.epoch)}
	}
	changed := false
	if m == nil {
		m = &groupMember{id: req.MemberID}
		g.members[m.id] = m
		changed = true
	}
	if req.MemberEpoch == JoinEpoch {
		m.epoch, m.previous = 0, 0
	}
	if req.Subscribed != nil {
		subs := slices.Clone(req.Subscribed)
		slices.Sort(subs)
		subs = slices.Compact(subs)
		if !slices.Equal(subs, m.subscribed) {
			m.subscribed, changed = subs, true
		}
	}
	if req.RackID != nil {
		m.rack = req.RackID
	}
	m.clientID, m.clientHost = req.ClientID, req.ClientHost
	m.deadline = now.Add(g.cfg.SessionTimeout)
	if changed || g.topicsChanged(topics) {
		g.reassign(topics)
	}
	if m.epoch != g.targetEpoch {
		m.previous, m.epoch = m.epoch, g.targetEpoch
		m.assignment = g.target[m.id]
	}
	resp := HeartbeatResponse{MemberID: m.id, MemberEpoch: m.epoch, HeartbeatInterval: g.cfg.HeartbeatInterval}
	if req.MemberEpoch != m.epoch || req.Subscribed != nil {
		resp.Assignment = orEmpty(m.assignment)
	}
	return resp
}

func orEmpty(a []TopicAssignment) []TopicAssignment {
	if a == nil {
		return []TopicAssignment{}
	}
	return a
}

// Expire removes the members whose session ended at or before now, and returns their ids (sorted): their
// share sessions end and the records they hold are released.
func (g *Group) Expire(now time.Time, topics Topics) []string {
	var gone []string
	for id, m := range g.members {
		if !m.deadline.After(now) {
			gone = append(gone, id)
		}
	}
	slices.Sort(gone)
	for _, id := range gone {
		g.remove(id, topics)
	}
	return gone
}

// Deadline returns the earliest session deadline, when Expire has work; zero without members.
func (g *Group) Deadline() time.Time {
	var d time.Time
	for _, m := range g.members {
		if d.IsZero() || m.deadline.Before(d) {
			d = m.deadline
		}
	}
	return d
}

func (g *Group) remove(id string, topics Topics) {
	delete(g.members, id)
	g.reassign(topics)
}

// topicsChanged reports whether a subscribed topic's id or partition count is not what the target was
// computed from.
func (g *Group) topicsChanged(topics Topics) bool {
	for name, was := range g.topics {
		if now, ok := topics(name); !ok || now != was {
			return true
		}
	}
	for _, m := range g.members {
		for _, name := range m.subscribed {
			if _, known := g.topics[name]; !known {
				if _, ok := topics(name); ok {
					return true
				}
			}
		}
	}
	return false
}

// reassign bumps the group epoch and computes the target assignment at it.
func (g *Group) reassign(topics Topics) {
	g.epoch++
	ids := make([]string, 0, len(g.members))
	subscribers := map[string][]string{}
	for id, m := range g.members {
		ids = append(ids, id)
		for _, name := range m.subscribed {
			subscribers[name] = append(subscribers[name], id)
		}
	}
	slices.Sort(ids)
	target := make(map[string][]TopicAssignment, len(ids))
	g.topics = map[string]TopicInfo{}
	for _, name := range slices.Sorted(maps.Keys(subscribers)) {
		info, ok := topics(name)
		if !ok || info.Partitions <= 0 {
			continue
		}
		g.topics[name] = info
		subs := subscribers[name]
		slices.Sort(subs)
		for id, parts := range assignTopic(subs, info.Partitions, g.previous(name, info.ID)) {
			target[id] = append(target[id], TopicAssignment{TopicID: info.ID, Topic: name, Partitions: parts})
		}
	}
	g.target, g.targetEpoch = target, g.epoch
}

// previous returns, per member id, the partitions of topic it had in the last target.
func (g *Group) previous(topic string, id [16]byte) map[string][]int32 {
	prev := map[string][]int32{}
	for member, as := range g.target {
		for _, a := range as {
			if a.Topic == topic && a.TopicID == id {
				prev[member] = a.Partitions
			}
		}
	}
	return prev
}

// assignTopic is the simple assignor for one topic: every partition goes to at least one member and
// every member gets at least one partition. With fewer members than partitions, each partition has one
// member and members get ⌊P/M⌋ or ⌈P/M⌉ partitions; otherwise each member has one partition and
// partitions get ⌊M/P⌋ or ⌈M/P⌉ members. Pairs of prev are kept while those bounds allow. members is
// sorted; the result's partitions are sorted.
func assignTopic(members []string, partitions int32, prev map[string][]int32) map[string][]int32 {
	out := make(map[string][]int32, len(members))
	if len(members) == 0 {
		return out
	}
	if len(members) < int(partitions) {
		keep := make([][]int, partitions)
		for h, m := range members {
			for _, p := range prev[m] {
				if p < partitions {
					keep[p] = append(keep[p], h)
				}
			}
		}
		for p, h := range spread(len(members), keep) {
			out[members[h]] = append(out[members[h]], int32(p))
		}
	} else {
		keep := make([][]int, len(members))
		for i, m := range members {
			for _, p := range prev[m] {
				if p < partitions {
					keep[i] = append(keep[i], int(p))
				}
			}
		}
		for i, p := range spread(int(partitions), keep) {
			out[members[i]] = []int32{int32(p)}
		}
	}
	for _, parts := range out {
		slices.Sort(parts)
	}
	return out
}

// spread gives each of len(keep) items one of holders holders, so that every holder has ⌊I/H⌋ or
// ⌈I/H⌉ items (I >= H), keeping each item with a holder of keep[item] (its holders before, in order of
// preference) while those bounds allow. It returns each item's holder.
func spread(holders int, keep [][]int) []int {
	items := len(keep)
	q, r := items/holders, items%holders
	count := make([]int, holders)
	ceil := 0
	room := func(h int) bool { return count[h] < q || count[h] == q && ceil < r }
	take := func(h int) {
		if count[h] == q {
			ceil++
		}
		count[h]++
	}
	owner := make([]int, items)
	for i, hs := range keep {
		owner[i] = -1
		for _, h := range hs {
			if room(h) {
				take(h)
				owner[i] = h
				break
			}
		}
	}
	for i := range owner {
		if owner[i] >= 0 {
			continue
		}
		best := -1
		for h := range holders {
			if room(h) && (best < 0 || count[h] < count[best]) {
				best = h
			}
		}
		take(best)
		owner[i] = best
	}
	return owner
}

// Describe reports the group for ShareGroupDescribe, members sorted by id.
func (g *Group) Describe() GroupDescription {
	d := GroupDescription{Group: g.id, State: g.State(), GroupEpoch: g.epoch, AssignmentEpoch: g.targetEpoch, Assignor: Assignor}
	for _, m := range g.members {
		d.Members = append(d.Members, MemberDescription{
			MemberID: m.id, RackID: m.rack, MemberEpoch: m.epoch, ClientID: m.clientID, ClientHost: m.clientHost,
			Subscribed: slices.Clone(m.subscribed), Assignment: slices.Clone(m.assignment),
		})
	}
	slices.SortFunc(d.Members, func(a, b MemberDescription) int { return cmp.Compare(a.MemberID, b.MemberID) })
	return d
}
