package group

import (
	"bytes"
	"fmt"
	"slices"
	"time"
)

// Defaults Kafka uses for the group coordinator's settings.
const (
	DefaultSessionTimeoutMin     = 6 * time.Second
	DefaultSessionTimeoutMax     = 30 * time.Minute
	DefaultInitialRebalanceDelay = 3 * time.Second
)

// newIDAttempts bounds how often Join asks Config.NewMemberID for an id no member or pending member has.
const newIDAttempts = 8

// Config holds a group's settings; the coordinator gives every group the same.
type Config struct {
	// SessionTimeoutMin and SessionTimeoutMax bound a member's session timeout
	// (group.min.session.timeout.ms, group.max.session.timeout.ms); zero means the default.
	SessionTimeoutMin time.Duration
	SessionTimeoutMax time.Duration
	// InitialRebalanceDelay is how long a rebalance out of Empty waits for more members, extended by as
	// much each time one joins, up to the rebalance timeout (group.initial.rebalance.delay.ms; Kafka's
	// default is DefaultInitialRebalanceDelay). Zero: no wait.
	InitialRebalanceDelay time.Duration
	// MembersMax caps members plus pending member ids (group.max.size); zero means no cap.
	MembersMax int
	// NewMemberID returns a fresh, unique member id starting with prefix (the client id, or the instance id
	// of a static member); Kafka appends a random UUID. Required.
	NewMemberID func(prefix string) string
}

func (c *Config) normalize() error {
	if c.SessionTimeoutMin == 0 {
		c.SessionTimeoutMin = DefaultSessionTimeoutMin
	}
	if c.SessionTimeoutMax == 0 {
		c.SessionTimeoutMax = DefaultSessionTimeoutMax
	}
	switch {
	case c.NewMemberID == nil:
		return fmt.Errorf("%w: NewMemberID is nil", ErrInvalidConfig)
	case c.SessionTimeoutMin < 0 || c.SessionTimeoutMax < c.SessionTimeoutMin:
		return fmt.Errorf("%w: session timeout bounds [%v, %v]", ErrInvalidConfig, c.SessionTimeoutMin, c.SessionTimeoutMax)
	case c.InitialRebalanceDelay < 0 || c.MembersMax < 0:
		return fmt.Errorf("%w: negative initial rebalance delay or members max", ErrInvalidConfig)
	}
	return nil
}

// member is one group member. Its parked requests are answered exactly once.
type member struct {
	id         string
	instance   string
	clientID   string
	clientHost string
	protocols  []Protocol
	session    time.Duration
	rebalance  time.Duration
	// deadline is when the session expires; it does not run while a Join or Sync is parked.
	deadline     time.Time
	joinRef      Ref
	awaitingJoin bool
	syncRef      Ref
	awaitingSync bool
	// owesSync is set when a generation completes and cleared by the member's SyncGroup.
	owesSync   bool
	assignment []byte
}

func (m *member) metadataFor(protocol string) []byte {
	return protocolMetadata(m.protocols, protocol)
}

// heldJoin is a static member's join response waiting for the record of its new member id.
type heldJoin struct {
	memberID   string
	generation int32
}

// Group is one consumer group's state machine. It does no I/O, starts no goroutine and reads no clock:
// every input carries the current time and every result is an Output. It is not safe for concurrent use;
// one owner drives it.
type Group struct {
	id           string
	cfg          Config
	state        State
	protocolType string
	protocol     string
	generation   int32
	leader       string

	members   []*member // in join order
	byID      map[string]*member
	instances map[string]*member
	// pending holds KIP-394 member ids handed out and not yet used, with their expiry.
	pending map[string]time.Time

	// joinDeadline ends PreparingRebalance; delayUntil, when set, is the initial delay (it ends it instead).
	joinDeadline   time.Time
	delayUntil     time.Time
	delayRemaining time.Duration
	newMemberAdded bool

	// syncDeadline removes members that still owe a SyncGroup.
	syncDeadline time.Time
	// syncTicket is the record of the leader's assignment being written (0: none); syncAssignments are
	// that assignment, applied when the record is stored.
	syncTicket      uint64
	syncAssignments map[string][]byte

	tickets uint64
	held    map[uint64]heldJoin
}

// New returns an Empty group.
func New(id string, cfg Config) (*Group, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	return &Group{
		id:        id,
		cfg:       cfg,
		byID:      make(map[string]*member),
		instances: make(map[string]*member),
		pending:   make(map[string]time.Time),
		held:      make(map[uint64]heldJoin),
	}, nil
}

// Restore rebuilds a group from its last metadata record, as a new coordinator does: Stable with the
// recorded members, assignments and generation (their sessions start at now), or Empty without members.
func Restore(cfg Config, md Metadata, now time.Time) (*Group, error) {
	g, err := New(md.Group, cfg)
	if err != nil {
		return nil, err
	}
	if err := g.restore(md, now); err != nil {
		return nil, err
	}
	return g, nil
}

// Adopt makes an Empty group without members the classic group of md's members, their sessions
// starting at now, and starts a rebalance in which every member must rejoin: a KIP-848 group whose
// members are all classic is downgraded so (ConsumerGroup.Downgrade). The group keeps counting its
// records' tickets, so a record still being written from before is not mistaken for a new one.
// ErrNonEmptyGroup for a group with members, ErrInvalidRecord for metadata of another group or that
// Restore would refuse; the group is then unchanged.
func (g *Group) Adopt(md Metadata, now time.Time) (Output, error) {
	switch {
	case g.state != Empty || len(g.members) > 0:
		return g.finish(Output{}), fmt.Errorf("%w: %q is %v", ErrNonEmptyGroup, g.id, g.state)
	case md.Group != g.id:
		return g.finish(Output{}), fmt.Errorf("%w: metadata of %q for group %q", ErrInvalidRecord, md.Group, g.id)
	}
	if err := g.restore(md, now); err != nil {
		return g.finish(Output{}), err
	}
	var out Output
	if g.state == Stable {
		g.prepareRebalance(now, &out)
	}
	return g.finish(out), nil
}

// restore fills an Empty group without members from md: Stable with md's members, or Empty without.
// It checks md whole before it changes anything.
func (g *Group) restore(md Metadata, now time.Time) error {
	if len(md.Members) > 0 && (md.Protocol == "" || md.ProtocolType == "") {
		return fmt.Errorf("%w: group %q has members but no protocol", ErrInvalidRecord, md.Group)
	}
	ids, instances := map[string]bool{}, map[string]bool{}
	for _, mm := range md.Members {
		if mm.MemberID == "" || ids[mm.MemberID] || mm.SessionTimeout <= 0 {
			return fmt.Errorf("%w: group %q member %q", ErrInvalidRecord, md.Group, mm.MemberID)
		}
		if mm.InstanceID != "" && instances[mm.InstanceID] {
			return fmt.Errorf("%w: group %q instance %q twice", ErrInvalidRecord, md.Group, mm.InstanceID)
		}
		ids[mm.MemberID] = true
		if mm.InstanceID != "" {
			instances[mm.InstanceID] = true
		}
	}
	g.protocolType, g.generation = md.ProtocolType, md.Generation
	if len(md.Members) == 0 {
		return nil
	}
	for _, mm := range md.Members {
		g.addToIndex(&member{
			id:         mm.MemberID,
			instance:   mm.InstanceID,
			clientID:   mm.ClientID,
			clientHost: mm.ClientHost,
			protocols:  []Protocol{{Name: md.Protocol, Metadata: bytes.Clone(mm.Subscription)}},
			session:    mm.SessionTimeout,
			rebalance:  rebalanceOrSession(mm.RebalanceTimeout, mm.SessionTimeout),
			deadline:   now.Add(mm.SessionTimeout),
			assignment: bytes.Clone(mm.Assignment),
		})
	}
	g.state, g.protocol, g.leader = Stable, md.Protocol, md.Leader
	if g.byID[g.leader] == nil {
		g.leader = g.members[0].id
	}
	return nil
}

// ID returns the group id.
func (g *Group) ID() string { return g.id }

// State returns the group's state.
func (g *Group) State() State { return g.state }

// ProtocolType returns the protocol type of the group's members ("consumer" for consumers); it is kept
// while the group is Empty and may be empty for a group that only has commits.
func (g *Group) ProtocolType() string { return g.protocolType }

// Generation returns the current generation id.
func (g *Group) Generation() int32 { return g.generation }

// Describe reports the group for DescribeGroups.
func (g *Group) Describe() Description {
	d := Description{
		Group:        g.id,
		State:        g.state,
		ProtocolType: g.protocolType,
		Generation:   g.generation,
		Leader:       g.leader,
		Members:      make([]MemberDescription, 0, len(g.members)),
	}
	if g.state == Stable {
		d.Protocol = g.protocol
	}
	for _, m := range g.members {
		md := MemberDescription{MemberID: m.id, InstanceID: m.instance, ClientID: m.clientID, ClientHost: m.clientHost}
		if g.state == Stable {
			md.Metadata, md.Assignment = m.metadataFor(g.protocol), m.assignment
		}
		d.Members = append(d.Members, md)
	}
	return d
}

// Tick handles everything due at now: expired pending member ids, the end of the join phase, members that
// never sent SyncGroup, and expired sessions.
func (g *Group) Tick(now time.Time) Output {
	var out Output
	// Each round removes a member or ends a phase; the bound only guards against a logic error.
	for range len(g.members) + len(g.pending) + 4 {
		if !g.tickOnce(now, &out) {
			break
		}
	}
	return g.finish(out)
}

func (g *Group) tickOnce(now time.Time, out *Output) bool {
	if g.state == Dead {
		return false
	}
	progressed := false
	for id, expiry := range g.pending {
		if !now.Before(expiry) {
			delete(g.pending, id)
			progressed = true
		}
	}
	if progressed {
		g.tryCompleteJoin(now, out)
	}
	switch g.state {
	case PreparingRebalance:
		if !g.delayUntil.IsZero() && !now.Before(g.delayUntil) {
			g.endInitialDelay(now, out)
			return true
		}
		if g.delayUntil.IsZero() && !now.Before(g.joinDeadline) {
			g.completeJoin(now, out)
			return true
		}
	case CompletingRebalance, Stable:
		if g.owesSync() && !now.Before(g.syncDeadline) {
			g.expireSync(now, out)
			return true
		}
	case Empty, Dead:
	}
	for _, m := range slices.Clone(g.members) {
		if g.byID[m.id] != m || m.awaitingJoin || m.awaitingSync || now.Before(m.deadline) {
			continue
		}
		g.removeMember(now, m, ErrUnknownMemberID, out)
		progressed = true
	}
	return progressed
}

// Delete makes an Empty group Dead and asks for its tombstone (DeleteGroups).
func (g *Group) Delete() (Output, error) {
	switch g.state {
	case Dead:
		return g.finish(Output{}), ErrGroupNotFound
	case Empty:
	case PreparingRebalance, CompletingRebalance, Stable:
		return g.finish(Output{}), ErrNonEmptyGroup
	}
	var out Output
	g.state = Dead
	clear(g.pending)
	g.tickets++
	out.Records = append(out.Records, Record{Ticket: g.tickets, Tombstone: true, Metadata: Metadata{Group: g.id}})
	return g.finish(out), nil
}

// Unload makes the group Dead because this node stops coordinating it, answering every parked request
// with ErrNotCoordinator. Nothing is written.
func (g *Group) Unload() Output {
	var out Output
	for _, m := range g.members {
		g.answerParked(m, ErrNotCoordinator, &out)
	}
	g.state = Dead
	g.members = nil
	clear(g.byID)
	clear(g.instances)
	clear(g.pending)
	clear(g.held)
	g.syncTicket, g.syncAssignments = 0, nil
	return g.finish(out)
}

// finish sets the deadline of the Tick the caller owes.
func (g *Group) finish(out Output) Output {
	out.Deadline = g.nextDeadline()
	return out
}

func (g *Group) nextDeadline() time.Time {
	var d time.Time
	take := func(t time.Time) {
		if !t.IsZero() && (d.IsZero() || t.Before(d)) {
			d = t
		}
	}
	if g.state == Dead {
		return d
	}
	for _, expiry := range g.pending {
		take(expiry)
	}
	switch g.state {
	case PreparingRebalance:
		if !g.delayUntil.IsZero() {
			take(g.delayUntil)
		} else {
			take(g.joinDeadline)
		}
	case CompletingRebalance, Stable:
		if g.owesSync() {
			take(g.syncDeadline)
		}
	case Empty, Dead:
	}
	for _, m := range g.members {
		if !m.awaitingJoin && !m.awaitingSync {
			take(m.deadline)
		}
	}
	return d
}

func (g *Group) addToIndex(m *member) {
	g.members = append(g.members, m)
	g.byID[m.id] = m
	if m.instance != "" {
		g.instances[m.instance] = m
	}
}

// dropMember removes m, answering its parked requests with err, and leaves the state alone.
func (g *Group) dropMember(m *member, err error, out *Output) {
	g.answerParked(m, err, out)
	g.members = slices.DeleteFunc(g.members, func(x *member) bool { return x == m })
	delete(g.byID, m.id)
	if m.instance != "" && g.instances[m.instance] == m {
		delete(g.instances, m.instance)
	}
	if g.leader == m.id {
		g.leader = ""
	}
}

// removeMember drops m and moves the group on: a rebalance, or a join phase that may now be complete.
func (g *Group) removeMember(now time.Time, m *member, err error, out *Output) {
	g.dropMember(m, err, out)
	g.rebalance(now, out)
}

func (g *Group) answerParked(m *member, err error, out *Output) {
	if m.awaitingJoin {
		m.awaitingJoin = false
		out.Joins = append(out.Joins, JoinResponse{Ref: m.joinRef, Err: err, Generation: -1})
	}
	if m.awaitingSync {
		m.awaitingSync = false
		out.Syncs = append(out.Syncs, SyncResponse{Ref: m.syncRef, Err: err})
	}
}

func (g *Group) owesSync() bool {
	return slices.ContainsFunc(g.members, func(m *member) bool { return m.owesSync })
}

// rebalanceTimeout is the longest rebalance timeout among members.
func (g *Group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalance)
	}
	return d
}

// fencedInstance reports whether instance belongs to a static member with another member id.
func (g *Group) fencedInstance(instance, memberID string) bool {
	if instance == "" {
		return false
	}
	m := g.instances[instance]
	return m != nil && m.id != memberID
}

// record asks the caller to write the group's metadata; assignments, when not nil, replace the members'.
func (g *Group) record(assignments map[string][]byte, out *Output) uint64 {
	md := g.Snapshot()
	if assignments != nil {
		for i := range md.Members {
			md.Members[i].Assignment = assignments[md.Members[i].MemberID]
		}
	}
	g.tickets++
	out.Records = append(out.Records, Record{Ticket: g.tickets, Metadata: md})
	return g.tickets
}

// Snapshot is the group's metadata as its record has it: each member with its metadata for the
// group's protocol and its current assignment. The slices are the group's, not to be modified.
func (g *Group) Snapshot() Metadata {
	md := Metadata{
		Group:        g.id,
		ProtocolType: g.protocolType,
		Protocol:     g.protocol,
		Generation:   g.generation,
		Leader:       g.leader,
		Members:      make([]MemberMetadata, 0, len(g.members)),
	}
	for _, m := range g.members {
		md.Members = append(md.Members, MemberMetadata{
			MemberID:         m.id,
			InstanceID:       m.instance,
			ClientID:         m.clientID,
			ClientHost:       m.clientHost,
			SessionTimeout:   m.session,
			RebalanceTimeout: m.rebalance,
			Subscription:     m.metadataFor(g.protocol),
			Assignment:       m.assignment,
		})
	}
	return md
}

// HandOver empties the group because its members moved to a KIP-848 group (ConsumerGroupFromClassic
// over its Snapshot): their parked requests get ErrRebalanceInProgress (the clients rejoin), and the
// record of the Empty group is asked for, so that no later coordinator restores the members. The
// generation and protocol type are kept.
func (g *Group) HandOver() Output {
	var out Output
	if g.state == Dead {
		return g.finish(out)
	}
	for _, m := range g.members {
		g.answerParked(m, ErrRebalanceInProgress, &out)
	}
	g.members = nil
	clear(g.byID)
	clear(g.instances)
	clear(g.pending)
	clear(g.held)
	g.state, g.protocol, g.leader = Empty, "", ""
	g.syncTicket, g.syncAssignments, g.syncDeadline = 0, nil, time.Time{}
	g.joinDeadline, g.delayUntil, g.delayRemaining, g.newMemberAdded = time.Time{}, time.Time{}, 0, false
	g.record(nil, &out)
	return g.finish(out)
}

func rebalanceOrSession(rebalance, session time.Duration) time.Duration {
	if rebalance <= 0 {
		return session
	}
	return rebalance
}

func protocolMetadata(protocols []Protocol, name string) []byte {
	for _, p := range protocols {
		if p.Name == name {
			return p.Metadata
		}
	}
	return nil
}

func cloneProtocols(ps []Protocol) []Protocol {
	out := make([]Protocol, len(ps))
	for i, p := range ps {
		out[i] = Protocol{Name: p.Name, Metadata: bytes.Clone(p.Metadata)}
	}
	return out
}

func protocolsEqual(a, b []Protocol) bool {
	return slices.EqualFunc(a, b, func(x, y Protocol) bool {
		return x.Name == y.Name && bytes.Equal(x.Metadata, y.Metadata)
	})
}
