package group

import (
	"fmt"
	"iter"
	"maps"
	"regexp"
	"slices"
	"time"
)

// Defaults of the KIP-848 group settings, Kafka's.
const (
	// DefaultConsumerSessionTimeout is group.consumer.session.timeout.ms.
	DefaultConsumerSessionTimeout = 45 * time.Second
	// DefaultConsumerHeartbeatInterval is group.consumer.heartbeat.interval.ms.
	DefaultConsumerHeartbeatInterval = 5 * time.Second
)

// Member epochs of ConsumerGroupHeartbeat with a meaning of their own.
const (
	// JoinEpoch joins or rejoins the group.
	JoinEpoch = 0
	// LeaveEpoch leaves the group.
	LeaveEpoch = -1
	// StaticLeaveEpoch leaves the group as a static member that means to come back; weir removes the
	// member as for LeaveEpoch.
	StaticLeaveEpoch = -2
)

// ConsumerConfig holds a KIP-848 group's settings; the coordinator gives every group the same.
type ConsumerConfig struct {
	// SessionTimeout removes a member that does not heartbeat within it; zero means the default.
	SessionTimeout time.Duration
	// HeartbeatInterval is what members are told to heartbeat at; zero means the default.
	HeartbeatInterval time.Duration
	// MembersMax caps the members (group.consumer.max.size); zero means no cap.
	MembersMax int
	// ClassicSessionTimeoutMin and ClassicSessionTimeoutMax bound the session timeout of a classic
	// member's JoinGroup, as Config's bounds do in a classic group; zero means the default.
	ClassicSessionTimeoutMin time.Duration
	ClassicSessionTimeoutMax time.Duration
	// NewMemberID makes the member id of a ConsumerGroupHeartbeat v0 join, which carries none. Required.
	NewMemberID func(prefix string) string
}

func (c *ConsumerConfig) normalize() error {
	if c.SessionTimeout == 0 {
		c.SessionTimeout = DefaultConsumerSessionTimeout
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = DefaultConsumerHeartbeatInterval
	}
	if c.ClassicSessionTimeoutMin == 0 {
		c.ClassicSessionTimeoutMin = DefaultSessionTimeoutMin
	}
	if c.ClassicSessionTimeoutMax == 0 {
		c.ClassicSessionTimeoutMax = DefaultSessionTimeoutMax
	}
	switch {
	case c.NewMemberID == nil:
		return fmt.Errorf("%w: NewMemberID is nil", ErrInvalidConfig)
	case c.SessionTimeout < 0 || c.HeartbeatInterval < 0 || c.MembersMax < 0:
		return fmt.Errorf("%w: negative consumer session timeout, heartbeat interval or members max", ErrInvalidConfig)
	case c.ClassicSessionTimeoutMin < 0 || c.ClassicSessionTimeoutMax < c.ClassicSessionTimeoutMin:
		return fmt.Errorf("%w: classic session timeout bounds [%v, %v]", ErrInvalidConfig,
			c.ClassicSessionTimeoutMin, c.ClassicSessionTimeoutMax)
	case c.HeartbeatInterval >= c.SessionTimeout:
		return fmt.Errorf("%w: consumer heartbeat interval %v is not below the session timeout %v",
			ErrInvalidConfig, c.HeartbeatInterval, c.SessionTimeout)
	}
	return nil
}

// Topics is the cluster's topics as a heartbeat sees them.
type Topics interface {
	// Lookup returns the topic named name; false when there is none.
	Lookup(name string) (TopicInfo, bool)
	// All yields every topic, for regular expression subscriptions.
	All() iter.Seq2[string, TopicInfo]
}

// ConsumerHeartbeat is the part of a ConsumerGroupHeartbeat request the group needs. The nil fields
// mean "unchanged since the last heartbeat".
type ConsumerHeartbeat struct {
	// MemberID is empty only on a v0 join, when the coordinator makes one.
	MemberID    string
	MemberEpoch int32
	InstanceID  string
	RackID      *string
	// RebalanceTimeout below zero means unchanged.
	RebalanceTimeout time.Duration
	SubscribedTopics []string
	SubscribedRegex  *string
	ServerAssignor   *string
	// Owned is the partitions the member owns; nil: unchanged.
	Owned      []TopicPartitions
	ClientID   string
	ClientHost string
}

// full reports whether the request states the member's whole state: the client's answer to a
// possibly lost response, which is then answered with the whole assignment.
func (r *ConsumerHeartbeat) full() bool {
	return r.RebalanceTimeout >= 0 || r.SubscribedTopics != nil || r.SubscribedRegex != nil || r.Owned != nil
}

// ConsumerHeartbeatResponse answers a ConsumerHeartbeat. On error only Err is set.
type ConsumerHeartbeatResponse struct {
	Err               error
	MemberID          string
	MemberEpoch       int32
	HeartbeatInterval time.Duration
	// Assignment is the member's whole assignment when sent; nil: unchanged.
	Assignment []TopicPartitions
}

// memberState is where a member stands in its reconciliation.
type memberState int8

const (
	// reconciled: the member has its target assignment, or what of it is free, at its epoch.
	reconciled memberState = iota
	// unrevoked: the member must give up partitions before it moves on; it stays at its epoch.
	unrevoked
	// unreleased: the member is at the assignment epoch but waits for partitions others still own.
	unreleased
)

func (s memberState) String() string {
	switch s {
	case reconciled:
		return "stable"
	case unrevoked:
		return "unrevoked_partitions"
	case unreleased:
		return "unreleased_partitions"
	default:
		return fmt.Sprintf("memberState(%d)", int8(s))
	}
}

// consumerMember is one member of a ConsumerGroup.
type consumerMember struct {
	id, instance, rack   string
	clientID, clientHost string
	epoch, prevEpoch     int32
	state                memberState
	rebalance            time.Duration
	topics               []string
	regex                string
	re                   *regexp.Regexp
	assignor             string
	assigned, revoking   partSet
	// since holds, for each partition of assigned and revoking, the member epoch it was given at.
	since map[tidp]int32
	// sent is the assignment last sent to the member.
	sent          partSet
	sessionEnd    time.Time
	revocationEnd time.Time
	// classic is set for a member that speaks the classic protocol (consumer_classic.go).
	classic *classicState
}

// subscribes reports whether the member subscribes to topic name.
func (m *consumerMember) subscribes(name string) bool {
	return slices.Contains(m.topics, name) || m.re != nil && m.re.MatchString(name)
}

// ConsumerGroup is one KIP-848 consumer group's state machine: its members, the group epoch, the target
// assignment the group's assignor computed at the assignment epoch, and each member's reconciliation
// towards its target (docs/groups.md, "KIP-848 consumer groups"). It does no I/O and reads no clock; one
// owner drives it. A partition is owned by at most one member at any time: the one it is assigned to,
// or the one that must still revoke it.
type ConsumerGroup struct {
	id              string
	cfg             ConsumerConfig
	epoch           int32
	assignmentEpoch int32
	assignor        string
	members         map[string]*consumerMember
	instances       map[string]*consumerMember
	// target is each member's target assignment at the assignment epoch.
	target map[string]partSet
	// owners maps each owned partition to its member.
	owners map[tidp]string
	// topics is the metadata of the subscribed topics as the group last saw it.
	topics map[string]TopicInfo
}

// NewConsumerGroup returns a KIP-848 group without members.
func NewConsumerGroup(id string, cfg ConsumerConfig) (*ConsumerGroup, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	return &ConsumerGroup{
		id: id, cfg: cfg, assignor: assignors[0],
		members: map[string]*consumerMember{}, instances: map[string]*consumerMember{},
		target: map[string]partSet{}, owners: map[tidp]string{}, topics: map[string]TopicInfo{},
	}, nil
}

// Empty reports whether the group has no members.
func (g *ConsumerGroup) Empty() bool { return len(g.members) == 0 }

// Heartbeat handles a ConsumerGroupHeartbeat at now, with the cluster's topics as they are now.
func (g *ConsumerGroup) Heartbeat(now time.Time, req ConsumerHeartbeat, topics Topics) ConsumerHeartbeatResponse {
	switch req.MemberEpoch {
	case JoinEpoch:
		return g.join(now, req, topics)
	case LeaveEpoch, StaticLeaveEpoch:
		m := g.members[req.MemberID]
		if m == nil || m.classic != nil {
			return ConsumerHeartbeatResponse{Err: fmt.Errorf("%w: %q", ErrUnknownMemberID, req.MemberID)}
		}
		g.remove(m)
		return ConsumerHeartbeatResponse{MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}
	}
	m := g.members[req.MemberID]
	if m == nil || m.classic != nil {
		return ConsumerHeartbeatResponse{Err: fmt.Errorf("%w: %q", ErrUnknownMemberID, req.MemberID)}
	}
	resend := false
	switch {
	case req.MemberEpoch == m.epoch:
	case req.MemberEpoch == m.prevEpoch && (req.Owned == nil || setOf(req.Owned).subsetOf(m.assigned)):
		// The answer that moved the member on was lost: it gets it again.
		resend = true
	default:
		return ConsumerHeartbeatResponse{Err: fmt.Errorf("%w: member %q sent epoch %d, its epoch is %d",
			ErrFencedMemberEpoch, m.id, req.MemberEpoch, m.epoch)}
	}
	if err := validateSubscription(req); err != nil {
		return ConsumerHeartbeatResponse{Err: err}
	}
	changed := g.update(m, req)
	return g.answer(now, m, req, topics, changed, resend)
}

// join adds a member, or resets one that rejoins (its partitions are freed and given again).
func (g *ConsumerGroup) join(now time.Time, req ConsumerHeartbeat, topics Topics) ConsumerHeartbeatResponse {
	if err := validateJoin(req); err != nil {
		return ConsumerHeartbeatResponse{Err: err}
	}
	if req.MemberID == "" {
		req.MemberID = g.cfg.NewMemberID(req.ClientID)
	}
	m := g.members[req.MemberID]
	if req.InstanceID != "" {
		switch held := g.instances[req.InstanceID]; {
		case held == nil || held == m:
		case held.classic != nil:
			// A static classic member restarted with the consumer protocol (a rolling upgrade): its
			// old incarnation, which does not leave on close, is replaced; the join grows the epoch
			// once, and the assignor gives the new member the partitions it freed.
			g.drop(held)
		default:
			return ConsumerHeartbeatResponse{Err: fmt.Errorf("%w: instance %q is held by member %q",
				ErrUnreleasedInstanceID, req.InstanceID, held.id)}
		}
	}
	changed := false
	if m == nil {
		if g.cfg.MembersMax > 0 && len(g.members) >= g.cfg.MembersMax {
			return ConsumerHeartbeatResponse{Err: fmt.Errorf("%w: %d members", ErrGroupMaxSize, len(g.members))}
		}
		m = &consumerMember{id: req.MemberID, assigned: partSet{}, revoking: partSet{}, since: map[tidp]int32{}}
		g.members[m.id] = m
		changed = true
	} else {
		g.release(m.assigned)
		g.release(m.revoking)
		m.assigned, m.revoking, m.state, m.epoch, m.prevEpoch, m.sent = partSet{}, partSet{}, reconciled, 0, 0, nil
		m.classic = nil
		clear(m.since)
	}
	if m.instance != "" && m.instance != req.InstanceID {
		delete(g.instances, m.instance)
	}
	if g.update(m, req) {
		changed = true
	}
	if m.instance != "" {
		g.instances[m.instance] = m
	}
	return g.answer(now, m, req, topics, changed, true)
}

// validateJoin checks what a join must have whatever the group: no owned partitions, a subscription, a
// rebalance timeout, and a subscription validateSubscription accepts.
func validateJoin(req ConsumerHeartbeat) error {
	switch {
	case req.Owned == nil || len(req.Owned) > 0:
		return fmt.Errorf("%w: owned partitions must be empty when joining", ErrInvalidRequest)
	case req.SubscribedTopics == nil && req.SubscribedRegex == nil:
		return fmt.Errorf("%w: a join names no subscription", ErrInvalidRequest)
	case req.RebalanceTimeout < 0:
		return fmt.Errorf("%w: a join names no rebalance timeout", ErrInvalidRequest)
	}
	return validateSubscription(req)
}

// validateSubscription checks what update could not apply: the regular expression and the assignor.
func validateSubscription(req ConsumerHeartbeat) error {
	if req.SubscribedRegex != nil && *req.SubscribedRegex != "" {
		if _, err := regexp.Compile(*req.SubscribedRegex); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidRegularExpression, err)
		}
	}
	if a := req.ServerAssignor; a != nil && *a != "" && !slices.Contains(assignors, *a) {
		return fmt.Errorf("%w: %q", ErrUnsupportedAssignor, *a)
	}
	return nil
}

// update applies what req changes of m's subscription and settings, which validateSubscription
// checked, and reports whether the subscription or the assignor changed.
func (g *ConsumerGroup) update(m *consumerMember, req ConsumerHeartbeat) bool {
	changed := false
	if req.SubscribedRegex != nil && *req.SubscribedRegex != m.regex {
		m.regex, m.re, changed = *req.SubscribedRegex, nil, true
		if m.regex != "" {
			m.re = regexp.MustCompile(m.regex)
		}
	}
	if req.ServerAssignor != nil && *req.ServerAssignor != m.assignor {
		m.assignor, changed = *req.ServerAssignor, true
	}
	if req.SubscribedTopics != nil {
		topics := slices.Clone(req.SubscribedTopics)
		slices.Sort(topics)
		topics = slices.Compact(topics)
		if !slices.Equal(topics, m.topics) {
			m.topics, changed = topics, true
		}
	}
	if req.RebalanceTimeout >= 0 {
		m.rebalance = req.RebalanceTimeout
	}
	if req.RackID != nil {
		m.rack = *req.RackID
	}
	m.instance, m.clientID, m.clientHost = req.InstanceID, req.ClientID, req.ClientHost
	return changed
}

// answer refreshes the group's view of the topics, moves m's reconciliation on and answers m, with its
// whole assignment when resend is set, the request is a full one or the assignment changed since last
// sent.
func (g *ConsumerGroup) answer(now time.Time, m *consumerMember, req ConsumerHeartbeat, topics Topics, changed, resend bool) ConsumerHeartbeatResponse {
	g.refresh(topics, changed)
	m.sessionEnd = now.Add(g.cfg.SessionTimeout)
	var owned partSet
	if req.Owned != nil {
		owned = setOf(req.Owned)
	}
	g.reconcile(now, m, owned)
	resp := ConsumerHeartbeatResponse{MemberID: m.id, MemberEpoch: m.epoch, HeartbeatInterval: g.cfg.HeartbeatInterval}
	if resend || req.full() || m.sent == nil || !m.sent.equal(m.assigned) {
		resp.Assignment = m.assigned.byTopic()
		m.sent = maps.Clone(m.assigned)
	}
	return resp
}

// refresh updates the group's view of the subscribed topics: a changed subscription (changed), or
// changed metadata of the subscribed topics, grows the group epoch.
func (g *ConsumerGroup) refresh(topics Topics, changed bool) {
	if seen := g.subscribedTopics(topics); changed || !maps.Equal(seen, g.topics) {
		g.topics = seen
		g.bump()
	}
}

// subscribedTopics is the metadata of every topic some member subscribes to, as topics has it.
func (g *ConsumerGroup) subscribedTopics(topics Topics) map[string]TopicInfo {
	out := map[string]TopicInfo{}
	regex := false
	for _, m := range g.members {
		for _, t := range m.topics {
			if info, ok := topics.Lookup(t); ok {
				out[t] = info
			}
		}
		regex = regex || m.re != nil
	}
	if regex {
		for name, info := range topics.All() {
			if _, ok := out[name]; ok {
				continue
			}
			for _, m := range g.members {
				if m.re != nil && m.re.MatchString(name) {
					out[name] = info
					break
				}
			}
		}
	}
	return out
}

// bump grows the group epoch and computes the target assignment at it.
func (g *ConsumerGroup) bump() {
	g.epoch++
	g.assignor = g.chosenAssignor()
	ids := slices.Sorted(maps.Keys(g.members))
	members := make([]assignMember, 0, len(ids))
	for _, id := range ids {
		m := g.members[id]
		am := assignMember{id: id}
		for name := range g.topics {
			if m.subscribes(name) {
				am.topics = append(am.topics, name)
			}
		}
		slices.Sort(am.topics)
		members = append(members, am)
	}
	g.target = assign(g.assignor, members, g.topics, g.target)
	g.assignmentEpoch = g.epoch
}

// chosenAssignor is the assignor most members name; ties and a group naming none get the earlier in
// assignors.
func (g *ConsumerGroup) chosenAssignor() string {
	votes := map[string]int{}
	for _, m := range g.members {
		if m.assignor != "" {
			votes[m.assignor]++
		}
	}
	best := assignors[0]
	for _, a := range assignors[1:] {
		if votes[a] > votes[best] {
			best = a
		}
	}
	return best
}

// reconcile moves m towards its target assignment, revocation first (docs/groups.md, "Incremental
// reconciliation"). owned is what the member's request says it owns; nil, when it does not say, counts
// as owning everything it was given, as Kafka counts it.
func (g *ConsumerGroup) reconcile(now time.Time, m *consumerMember, owned partSet) {
	if m.state == unrevoked {
		if owned == nil || owned.intersects(m.revoking) {
			return
		}
		g.release(m.revoking)
		for tp := range m.revoking {
			delete(m.since, tp)
		}
		m.revoking, m.state = partSet{}, reconciled
	}
	if m.state == reconciled && m.epoch == g.assignmentEpoch {
		return
	}
	target := g.target[m.id]
	keep, revoke, waiting := partSet{}, partSet{}, false
	for tp := range m.assigned {
		if target.has(tp) {
			keep[tp] = struct{}{}
		} else {
			revoke[tp] = struct{}{}
		}
	}
	if len(revoke) > 0 && (owned == nil || owned.intersects(revoke)) {
		m.assigned, m.revoking, m.state = keep, revoke, unrevoked
		m.revocationEnd = now.Add(m.rebalance)
		return
	}
	g.release(revoke)
	for tp := range revoke {
		delete(m.since, tp)
	}
	for tp := range target {
		if keep.has(tp) {
			continue
		}
		if _, taken := g.owners[tp]; taken {
			waiting = true
			continue
		}
		keep[tp] = struct{}{}
		g.owners[tp] = m.id
		m.since[tp] = g.assignmentEpoch
	}
	if m.epoch != g.assignmentEpoch {
		m.prevEpoch, m.epoch = m.epoch, g.assignmentEpoch
	}
	m.assigned, m.state = keep, reconciled
	if waiting {
		m.state = unreleased
	}
}

// release frees partitions a member gave up.
func (g *ConsumerGroup) release(s partSet) {
	for tp := range s {
		delete(g.owners, tp)
	}
}

// remove takes m out of the group, freeing its partitions, and grows the group epoch.
func (g *ConsumerGroup) remove(m *consumerMember) {
	g.drop(m)
	g.bump()
}

// drop takes m out of the group, freeing its partitions, and leaves the epoch to the caller.
func (g *ConsumerGroup) drop(m *consumerMember) {
	g.release(m.assigned)
	g.release(m.revoking)
	delete(g.members, m.id)
	if m.instance != "" && g.instances[m.instance] == m {
		delete(g.instances, m.instance)
	}
	delete(g.target, m.id)
}

// Tick removes the members whose session ended by now, those that did not revoke within their
// rebalance timeout, and classic members that did not rejoin within theirs when told to.
func (g *ConsumerGroup) Tick(now time.Time) {
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[id]
		if !now.Before(m.sessionEnd) || m.state == unrevoked && !now.Before(m.revocationEnd) || m.classic.rejoinOverdue(now) {
			g.remove(m)
		}
	}
}

// Deadline is when Tick is next needed; zero when the group has no members.
func (g *ConsumerGroup) Deadline() time.Time {
	var d time.Time
	take := func(t time.Time) {
		if d.IsZero() || t.Before(d) {
			d = t
		}
	}
	for _, m := range g.members {
		take(m.sessionEnd)
		if m.state == unrevoked {
			take(m.revocationEnd)
		}
		if m.classic != nil && !m.classic.rejoinEnd.IsZero() {
			take(m.classic.rejoinEnd)
		}
	}
	return d
}

// ValidateMember checks that an OffsetCommit or OffsetFetch naming memberID at epoch comes from a member
// of the group at its current epoch. Epoch -1 without a member id (an admin's) is accepted only while the
// group has no members.
func (g *ConsumerGroup) ValidateMember(memberID string, epoch int32) error {
	if memberID == "" && epoch < 0 && len(g.members) == 0 {
		return nil
	}
	m := g.members[memberID]
	switch {
	case m == nil:
		return fmt.Errorf("%w: %q", ErrUnknownMemberID, memberID)
	case epoch != m.epoch:
		return fmt.Errorf("%w: member %q sent epoch %d, its epoch is %d", ErrStaleMemberEpoch, memberID, epoch, m.epoch)
	}
	return nil
}

// ValidateCommit checks an OffsetCommit of partitions naming memberID at epoch, as Kafka 4.3 does
// (KIP-1251): the member's current epoch is always accepted; an older one is accepted when every
// partition committed is one the member owns and was given at or before that epoch, since a client may
// commit while the answer that moved its epoch on is still on its way. Anything else is
// ErrStaleMemberEpoch (ErrUnknownMemberID for a member the group lacks). Epoch -1 without a member id
// (an admin's) is accepted only while the group has no members.
func (g *ConsumerGroup) ValidateCommit(memberID string, epoch int32, partitions []TopicPartition) error {
	err := g.ValidateMember(memberID, epoch)
	m := g.members[memberID]
	if err == nil || m == nil || epoch > m.epoch || epoch < 0 {
		return err
	}
	for _, tp := range partitions {
		info, ok := g.topics[tp.Topic]
		given, owned := m.since[tidp{info.ID, tp.Partition}]
		if !ok || !owned || given > epoch {
			return fmt.Errorf("%w: member %q sent epoch %d, its epoch is %d, and %s-%d was not its at that epoch",
				ErrStaleMemberEpoch, memberID, epoch, m.epoch, tp.Topic, tp.Partition)
		}
	}
	return nil
}

// SubscribedTopics is the set of topic names the members subscribe to (regular expressions matched
// against the topics the group last saw).
func (g *ConsumerGroup) SubscribedTopics() map[string]bool {
	out := map[string]bool{}
	for _, m := range g.members {
		for _, t := range m.topics {
			out[t] = true
		}
	}
	for name := range g.topics {
		out[name] = true
	}
	return out
}

// ConsumerState is a KIP-848 group's state as ConsumerGroupDescribe and ListGroups name it.
func (g *ConsumerGroup) ConsumerState() string {
	if len(g.members) == 0 {
		return "Empty"
	}
	for _, m := range g.members {
		if m.state != reconciled || m.epoch != g.assignmentEpoch {
			return "Reconciling"
		}
	}
	return "Stable"
}

// ConsumerMemberDescription is one member in a ConsumerDescription.
type ConsumerMemberDescription struct {
	MemberID, InstanceID, RackID string
	ClientID, ClientHost         string
	MemberEpoch                  int32
	// Classic is set for a member that speaks the classic protocol.
	Classic          bool
	SubscribedTopics []string
	SubscribedRegex  string
	// Assignment is what the member owns now (its pending revocations included); Target its target.
	Assignment, Target []TopicPartitions
}

// ConsumerDescription is what ConsumerGroupDescribe reports for a group.
type ConsumerDescription struct {
	Group           string
	State           string
	Epoch           int32
	AssignmentEpoch int32
	Assignor        string
	// Members are in member id order.
	Members []ConsumerMemberDescription
}

// Describe reports the group for ConsumerGroupDescribe.
func (g *ConsumerGroup) Describe() ConsumerDescription {
	d := ConsumerDescription{Group: g.id, State: g.ConsumerState(), Epoch: g.epoch, AssignmentEpoch: g.assignmentEpoch,
		Assignor: g.assignor}
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[id]
		owned := maps.Clone(m.assigned)
		maps.Copy(owned, m.revoking)
		d.Members = append(d.Members, ConsumerMemberDescription{
			MemberID: m.id, InstanceID: m.instance, RackID: m.rack, ClientID: m.clientID, ClientHost: m.clientHost,
			MemberEpoch: m.epoch, Classic: m.classic != nil, SubscribedTopics: slices.Clone(m.topics), SubscribedRegex: m.regex,
			Assignment: owned.byTopic(), Target: g.target[m.id].byTopic(),
		})
	}
	return d
}
