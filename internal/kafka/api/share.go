package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/share"
	"github.com/weir-mq/weir/internal/sharestate"
)

// shareKeys are the API keys of share groups (KIP-932): served only with a share-state coordinator.
// 84 and 85 are the share-state coordinator's, which other brokers send; 90-92 the admin's
// (docs/queues.md).
var shareKeys = map[int16]bool{76: true, 77: true, 78: true, 79: true, 84: true, 85: true, 90: true, 91: true, 92: true}

// shareVersionFeature is the finalized feature that tells clients share groups are served (Java's
// KafkaShareConsumer checks it).
const shareVersionFeature = "share.version"

// Errors of share sessions at a partition leader.
var (
	// errShareSessionNotFound: a ShareFetch or ShareAcknowledge at a nonzero epoch for a (group,
	// member) with no share session on this node.
	errShareSessionNotFound = errors.New("api: share session not found")
	// errInvalidShareSessionEpoch: a share session epoch other than the session's next one, or a
	// ShareAcknowledge that would open a session (epoch 0).
	errInvalidShareSessionEpoch = errors.New("api: invalid share session epoch")
)

// Share session epochs (KIP-932): 0 opens a session, -1 closes it.
const (
	shareSessionOpen  = 0
	shareSessionFinal = -1
)

// DefaultShareOwnerIdle is how long a share-partition's owner may go without work (an operation, a
// write, a lock expiry) before it stops, when nothing holds it: no record acquired, no write owed, no
// share session on the node naming its share-partition. Five minutes outlasts the pauses of a bursty
// workload and a rolling restart of its consumers (a session timeout is at most 60 s), so an owner is
// rarely reloaded, which costs a read of the share-state, a fencing write and a read of the records'
// delivery attributes; and it frees the window of a group that went away long before such owners add
// up to much memory.
const DefaultShareOwnerIdle = 5 * time.Minute

// shareOpWait bounds how long a share request waits for a share-partition's owner: its load from the
// share-state coordinator, an acquisition, or the write of an acknowledgement.
const shareOpWait = 10 * time.Second

// shareGroups serves share groups on one node: the share sessions members open here, and an owner per
// share-partition of the partitions led here (sharePart). The membership of the share groups this
// node coordinates is the group coordinator's (group.Coordinator.ShareHeartbeat). Its mutex guards
// only the maps and the sessions' pure state: nothing under it does I/O or waits.
type shareGroups struct {
	store *shareStore
	cfg   share.Config
	// groupCfg is the node's membership settings, under each group's own.
	groupCfg share.GroupConfig
	clock    Clock
	// deadLetters copies archived records to their group's dead-letter topic (share_dlq.go).
	deadLetters deadLetterFunc
	// ownerIdle is how long a share-partition's owner may go without work before it stops, if nothing
	// holds it (retire).
	ownerIdle time.Duration

	mu       sync.Mutex
	sessions map[shareMember]*shareSession
	parts    map[sharestate.SharePartition]*sharePart
	closed   bool
}

// shareMember names a member of a share group, the key of its share session on a node.
type shareMember struct{ group, member string }

// shareSession is a member's share session on this node: the epoch its next request must carry and
// the partitions it fetches from.
type shareSession struct {
	next  int32
	parts []shareTP
}

// shareTP is a partition of a share session, by topic id.
type shareTP struct {
	topic     controller.TopicID
	partition int32
}

// newShareGroups returns the share groups of a broker built from opts, reaching other nodes' share-state
// coordinators over conns; nil without a share-state coordinator or a group coordinator.
func newShareGroups(opts Options, conns *brokerConns) *shareGroups {
	if opts.ShareState == nil || opts.Groups == nil {
		return nil
	}
	return &shareGroups{
		store: &shareStore{nodeID: opts.NodeID, meta: opts.Metadata, coord: opts.ShareState, conns: conns},
		cfg:   opts.SharePartition, groupCfg: opts.ShareGroup, clock: opts.Clock, ownerIdle: cmp.Or(opts.ShareOwnerIdle, DefaultShareOwnerIdle),
		sessions: map[shareMember]*shareSession{}, parts: map[sharestate.SharePartition]*sharePart{},
	}
}

// close stops every share-partition owner; their waiting requests answer NOT_LEADER.
func (s *shareGroups) close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.closed = true
	parts := s.parts
	s.parts = map[sharestate.SharePartition]*sharePart{}
	s.mu.Unlock()
	for _, p := range parts {
		p.stop()
	}
}

// lockDuration is the acquisition lock of group's share-partitions: the group's
// share.record.lock.duration.ms, else the broker's.
func (s *shareGroups) lockDuration(img *controller.Image, group string) time.Duration {
	if d := s.settings(img, group).cfg.LockDuration; d > 0 {
		return d
	}
	return share.DefaultLockDuration
}

// groupConfigDefaults are the group configs this node's settings give a group that sets none
// (weir serve --share-record-lock-duration, --share-delivery-count-limit,
// --share-partition-max-record-locks, --share-session-timeout, --share-heartbeat-interval), for
// DescribeConfigs.
func (s *shareGroups) groupConfigDefaults() map[string]string {
	out := map[string]string{}
	if s == nil {
		return out
	}
	set := func(key string, n int64) {
		if n > 0 {
			out[key] = strconv.FormatInt(n, 10)
		}
	}
	set(controller.GroupConfigShareLockDurationMs, s.cfg.LockDuration.Milliseconds())
	set(controller.GroupConfigShareDeliveryCountLimit, int64(s.cfg.DeliveryCountLimit))
	set(controller.GroupConfigShareRecordLocksMax, int64(s.cfg.RecordLocksMax))
	set(controller.GroupConfigShareSessionTimeoutMs, s.groupCfg.SessionTimeout.Milliseconds())
	set(controller.GroupConfigShareHeartbeatIntervalMs, s.groupCfg.HeartbeatInterval.Milliseconds())
	return out
}

// groupInt returns the integer group config key set on group in img, or false when the group does
// not set it (the node's setting applies).
func groupInt(img *controller.Image, group, key string) (int64, bool) {
	if !img.GroupConfigSet(group, key) {
		return 0, false
	}
	v, _ := img.GroupConfig(group, key)
	n, _ := strconv.ParseInt(v, 10, 64)
	return n, true
}

// membership resolves group's membership settings in img: the group's share.session.timeout.ms and
// share.heartbeat.interval.ms over the node's.
func (s *shareGroups) membership(img *controller.Image, group string) share.GroupConfig {
	out := s.groupCfg
	if ms, ok := groupInt(img, group, controller.GroupConfigShareSessionTimeoutMs); ok {
		out.SessionTimeout = time.Duration(ms) * time.Millisecond
	}
	if ms, ok := groupInt(img, group, controller.GroupConfigShareHeartbeatIntervalMs); ok {
		out.HeartbeatInterval = time.Duration(ms) * time.Millisecond
	}
	return out
}

// shareSettings are what a share-partition's owner takes from its group's configs when it starts: the
// share.Config (the group's lock duration, delivery count limit and window cap over the broker's,
// whether RENEW is allowed, key order), where a share-partition without state starts (reset,
// share.auto.offset.reset: latest, earliest or by_duration:), and whether it hands out only committed
// records (committed, share.isolation.level=read_committed).
type shareSettings struct {
	cfg       share.Config
	reset     string
	committed bool
}

// sameOwner reports whether an owner started with a may go on under b: the settings that decide what
// it tracks (key order, isolation level) are equal. The others are applied in place (share.Partition.Tune),
// and reset matters only to an owner that has not loaded yet.
func (a shareSettings) sameOwner(b shareSettings) bool {
	return a.cfg.KeyOrdered == b.cfg.KeyOrdered && a.committed == b.committed
}

// settings resolves group's share settings in img.
func (s *shareGroups) settings(img *controller.Image, group string) shareSettings {
	out := shareSettings{cfg: s.cfg}
	if ms, ok := groupInt(img, group, controller.GroupConfigShareLockDurationMs); ok {
		out.cfg.LockDuration = time.Duration(ms) * time.Millisecond
	}
	if n, ok := groupInt(img, group, controller.GroupConfigShareDeliveryCountLimit); ok {
		out.cfg.DeliveryCountLimit = int(n)
	}
	if n, ok := groupInt(img, group, controller.GroupConfigShareRecordLocksMax); ok {
		out.cfg.RecordLocksMax = int(n)
	}
	renew, _ := img.GroupConfig(group, controller.GroupConfigShareRenewEnable)
	out.cfg.RenewEnabled = renew == "true"
	out.reset, _ = img.GroupConfig(group, controller.GroupConfigShareAutoOffsetReset)
	ordered, _ := img.GroupConfig(group, controller.GroupConfigShareKeyOrdered)
	out.cfg.KeyOrdered = ordered == "true"
	level, _ := img.GroupConfig(group, controller.GroupConfigShareIsolationLevel)
	out.committed = level == controller.ShareReadCommitted
	return out
}

// session applies a request's share session epoch for m: epoch 0 opens (or reopens) the session with
// add, -1 ends it and returns its partitions, any other epoch must be the session's next and adds add,
// then drops forget. It returns the session's partitions after the change, and the session when the
// request opened it. A ShareAcknowledge may not open a session (fetch false).
//
// The order is Kafka's (ShareSession.update): a partition both named and forgotten leaves the session.
// A client names a partition it no longer fetches to carry its acknowledgements and forgets it in the
// same request (franz-go does, after a revocation); kept in the session, the partition would go on
// acquiring records for the member that the client drops, locked until they expire.
func (s *shareGroups) session(m shareMember, epoch int32, add, forget []shareTP, fetch bool) ([]shareTP, *shareSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[m]
	var opened *shareSession
	switch {
	case epoch == shareSessionOpen && !fetch:
		return nil, nil, fmt.Errorf("%w: ShareAcknowledge at epoch 0", errInvalidShareSessionEpoch)
	case epoch == shareSessionOpen:
		ss = &shareSession{}
		s.sessions[m] = ss
		opened = ss
	case ss == nil:
		return nil, nil, errShareSessionNotFound
	case epoch == shareSessionFinal:
		delete(s.sessions, m)
		return slices.Concat(ss.parts, add), nil, nil
	case epoch != ss.next:
		return nil, nil, fmt.Errorf("%w: %d, the session expects %d", errInvalidShareSessionEpoch, epoch, ss.next)
	}
	ss.next = max(epoch+1, 1)
	for _, tp := range add {
		if !slices.Contains(ss.parts, tp) {
			ss.parts = append(ss.parts, tp)
		}
	}
	ss.parts = slices.DeleteFunc(ss.parts, func(tp shareTP) bool { return slices.Contains(forget, tp) })
	return slices.Clone(ss.parts), opened, nil
}

// endMember ends m's session here, whatever it is, and returns its partitions.
func (s *shareGroups) endMember(m shareMember) []shareTP {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[m]
	if ss == nil {
		return nil
	}
	delete(s.sessions, m)
	return ss.parts
}

// endSession ends m's session ss, if it is still m's session here (a member that opened a new one,
// over another connection perhaps, keeps it), and returns its partitions.
func (s *shareGroups) endSession(m shareMember, ss *shareSession) ([]shareTP, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sessions[m] != ss {
		return nil, false
	}
	delete(s.sessions, m)
	return ss.parts, true
}

// fetchers counts the members of group whose share sessions on this node fetch tp.
func (s *shareGroups) fetchers(group string, tp shareTP) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for m, ss := range s.sessions {
		if m.group == group && slices.Contains(ss.parts, tp) {
			n++
		}
	}
	return n
}

// part returns the owner of sp on replica r, starting one (which loads sp's state) when there is none,
// the one there serves an older leader epoch, or the group's key order or isolation level in img
// changed since it started (the new owner restores the state from the coordinator: the records held
// come back available). A change of the group's other settings is applied to the running owner
// (sharePart.retune) before the caller's operation, keeping the records held.
func (s *shareGroups) part(img *controller.Image, sp sharestate.SharePartition, r *partition.Replica) (*sharePart, error) {
	epoch := r.LeaderEpoch()
	set := s.settings(img, sp.Group)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, partition.ErrClosed
	}
	p := s.parts[sp]
	var old *sharePart
	retune := false
	switch {
	case p == nil || p.epoch != epoch || p.replica != r || p.stopped() || !p.set.sameOwner(set):
		old = p
		p = s.startSharePart(sp, r, epoch, set)
		s.parts[sp] = p
	case p.tuned != set.cfg:
		p.tuned, retune = set.cfg, true
	}
	s.mu.Unlock()
	if old != nil {
		old.stop()
	}
	if retune {
		p.retune(set.cfg)
	}
	return p, nil
}

// retire takes p out of the owners and returns true, if it is still the owner of its share-partition
// and no share session on this node names the share-partition: a member with a session here fetches
// from it again (its acknowledgements ride on its fetches), so its owner stays. Called by an idle
// owner; false keeps it running.
func (s *shareGroups) retire(p *sharePart) bool {
	tp := shareTP{topic: p.sp.TopicID, partition: p.sp.Partition}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.parts[p.sp] != p {
		return false
	}
	for m, ss := range s.sessions {
		if m.group == p.sp.Group && slices.Contains(ss.parts, tp) {
			return false
		}
	}
	delete(s.parts, p.sp)
	return true
}

// shareMembersGone ends the share sessions of the members the group coordinator removed from group
// when their session ended, and releases the records they hold, as a closed connection does
// (shareConnClosed): on this node directly, on every other live node with a WriteShareGroupState
// carrying shareAdminEndMember, the nodes at once. It is called on the coordinator's owner goroutine,
// so the work runs on others. A node that does not answer is logged: its members' records there
// come back when their locks expire.
func (b *Broker) shareMembersGone(group string, members []string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), shareOpWait)
		defer cancel()
		img := b.meta.Image()
		var wg sync.WaitGroup
		for _, br := range img.LiveBrokers() {
			if br.NodeID == b.nodeID {
				continue
			}
			wg.Go(func() {
				for _, id := range members {
					if err := b.shares.store.endMemberAt(ctx, img, br.NodeID, group, id); err != nil {
						b.log.Warn("api: an expired share group member's session at another node was not ended",
							"group", group, "member", id, "node", br.NodeID, "err", err)
					}
				}
			})
		}
		for _, id := range members {
			b.shareEndMember(ctx, img, shareMember{group: group, member: id})
		}
		wg.Wait()
	}()
}

// shareEndMember ends m's share session on this node, if it has one, and releases the records it
// holds in the session's partitions.
func (b *Broker) shareEndMember(ctx context.Context, img *controller.Image, m shareMember) {
	if parts := b.shares.endMember(m); len(parts) > 0 {
		b.shareRelease(ctx, img, m, parts)
	}
}

// ReconcileShares stops the share-partition owners that img leaves without their partition here: the
// topic deleted, the partition led by another node, or the replica's leader epoch moved past the
// owner's (the node reconciles its replicas with img first). Without it such an owner stopped only at
// its next operation or lock expiry, and one with neither lingered with its window in memory. A
// request for the share-partition starts a new owner, as after any stop.
func (b *Broker) ReconcileShares(img *controller.Image) {
	if b.shares == nil {
		return
	}
	stale := b.shares.stale(img)
	if len(stale) == 0 {
		return
	}
	go func() {
		for _, p := range stale {
			p.stop()
		}
	}()
}

// ShareGroupsOn reports whether the broker serves share groups.
func (b *Broker) ShareGroupsOn() bool { return b.shares != nil }

// ShareCounts returns the share-partition owners running on this node and the share sessions open on
// it, for the node's metrics; zero without share groups.
func (b *Broker) ShareCounts() (owners, sessions int) { return b.shares.counts() }

// counts returns the owners and the share sessions; zero on a nil shareGroups.
func (s *shareGroups) counts() (owners, sessions int) {
	if s == nil {
		return 0, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.parts), len(s.sessions)
}

// stale takes out of the owners those img leaves without their partition here, and returns them.
func (s *shareGroups) stale(img *controller.Image) []*sharePart {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*sharePart
	for sp, p := range s.parts {
		if t, ok := img.TopicByID(sp.TopicID); ok {
			if st, ok := t.Partition(sp.Partition); ok && st.Leader == s.store.nodeID && p.leads() {
				continue
			}
		}
		delete(s.parts, sp)
		out = append(out, p)
	}
	return out
}

// shareAcks converts a request's acknowledgement batches to the share package's.
func shareAcks[T any](batches []T, get func(T) (int64, int64, []int8)) []share.AckBatch {
	out := make([]share.AckBatch, 0, len(batches))
	for _, b := range batches {
		first, last, types := get(b)
		ts := make([]share.AckType, len(types))
		for i, t := range types {
			ts[i] = share.AckType(t)
		}
		out = append(out, share.AckBatch{First: first, Last: last, Types: ts})
	}
	return out
}

// withShareFeature adds share.version to an ApiVersions answer of a broker serving share groups.
func (b *Broker) withShareFeature(resp kmsg.Response) kmsg.Response {
	return withFeatureAtOne(resp, shareVersionFeature, b.shares != nil)
}

// shareCoordinatorCheck returns nil when this node coordinates groupID (it leads the group's
// __consumer_offsets partition), else NOT_COORDINATOR or the coordinator's unavailability.
func (b *Broker) shareCoordinatorCheck(ctx context.Context, groupID, listener string) error {
	node, _, _, err := b.coordinatorFor(ctx, coordinatorTypeGroup, groupID, listener)
	if err != nil {
		return err
	}
	if node != b.nodeID {
		return fmt.Errorf("%w: group %q is coordinated by node %d", sharestate.ErrNotCoordinator, groupID, node)
	}
	return nil
}
