package group

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/coordshard"
	"github.com/weir-mq/weir/internal/partition"
)

// shard coordinates the groups of one partition of __consumer_offsets that this node leads. Its Owner
// (coordshard) reads the partition back, replaying it into loaded; then every group's state machine and
// offsets are the owner goroutine's: it serves the requests submitted to it in order, fires the group
// timers (which arrive as messages from the Clock) and expires old offsets. Writes go to the log from the
// owner, and their completions come back to it as messages, in write order.
type shard struct {
	*coordshard.Owner
	c    *Coordinator
	p    int32
	log  Log
	rand *rand.Rand
	gcfg Config

	// Owned by the owner goroutine.
	loading  *loaded
	groups   map[string]*groupState
	shares   map[string]*shareGroupState
	openTxns openTxns
	nextRef  Ref
	joins    map[Ref]func(JoinResponse, error)
	syncs    map[Ref]func(SyncResponse, error)
	armedAt  time.Time
	expireAt time.Time
}

// groupState is one group with its committed offsets and the offsets its open transactions staged.
type groupState struct {
	g       *Group
	offsets map[TopicPartition]committed
	// staged holds, by producer id, the offsets of transactions not yet ended by a marker; they are
	// invisible to OffsetFetch.
	staged map[int64]map[TopicPartition]committed
	// writing counts, per partition, the commits (plain or transactional) written and not yet durable.
	writing    map[TopicPartition]int
	lastState  State
	emptySince time.Time
	deadline   time.Time
	// cg is the group's KIP-848 membership, nil until its first ConsumerGroupHeartbeat and again once
	// a classic member joins the group without KIP-848 members; cgEmpty is whether it last had none,
	// and cgDeadline is when its Tick is due.
	cg         *ConsumerGroup
	cgEmpty    bool
	cgDeadline time.Time
}

func (c *Coordinator) newShard(p int32, l Log, r *rand.Rand) *shard {
	s := &shard{
		c: c, p: p, log: l, rand: r,
		loading:  newLoaded(),
		groups:   map[string]*groupState{},
		shares:   map[string]*shareGroupState{},
		openTxns: openTxns{},
		joins:    map[Ref]func(JoinResponse, error){},
		syncs:    map[Ref]func(SyncResponse, error){},
	}
	s.gcfg = c.cfg.groupConfig(s.newMemberID)
	s.Owner = coordshard.NewOwner(l, coordshard.Hooks{
		Load:   func(b []byte) (int64, error) { return s.loading.applyBatches(b) },
		Loaded: s.finishLoad, Timer: s.onTimer, Unload: s.unload,
	})
	return s
}

// newMemberID is prefix, a dash and a random UUID, as Kafka forms member ids.
func (s *shard) newMemberID(prefix string) string {
	var b [16]byte
	for i := 0; i < 16; i += 8 {
		v := s.rand.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// unload unloads every group as the shard stops, answering their waiting requests.
func (s *shard) unload() {
	for _, gs := range s.groups {
		s.apply(gs, gs.g.Unload())
	}
	s.groups = map[string]*groupState{}
	s.shares = map[string]*shareGroupState{}
}

// writeFailed is the error of a request whose write to the offsets partition failed: ErrNotCoordinator
// when the replica no longer leads (the client then finds the new coordinator), the partition's error
// itself for a transaction's offsets whose producer epoch is stale (the producer is fenced), else
// ErrCoordinatorNotAvailable.
func writeFailed(err error) error {
	switch {
	case errors.Is(err, partition.ErrNotLeader) || errors.Is(err, partition.ErrClosed):
		return fmt.Errorf("%w: %w", ErrNotCoordinator, err)
	case errors.Is(err, partition.ErrInvalidProducerEpoch):
		return err
	}
	return fmt.Errorf("%w: %w", ErrCoordinatorNotAvailable, err)
}

// write appends entries as one batch and calls done on the owner once they are durable or failed.
func (s *shard) write(now time.Time, entries []entry, done func(error)) {
	_, wait, err := s.log.Append(encodeBatch(entries, now))
	s.awaitAppend(wait, err, done)
}

// awaitAppend calls done on the owner once an append is durable or failed: when the append itself failed
// (err), at once.
func (s *shard) awaitAppend(wait func(context.Context) error, err error, done func(error)) {
	if err != nil {
		done(fmt.Errorf("group: write to %s-%d: %w", OffsetsTopic, s.p, err))
		return
	}
	s.Await(wait, done)
}

// finishLoad rebuilds the groups from what the load read, up to offset to; loadErr, when set, stopped
// the load early.
func (s *shard) finishLoad(to int64, loadErr error) {
	if loadErr != nil {
		s.c.log.Error("group: loading stopped early; offsets after this point are not restored",
			"partition", s.p, "offset", to, "err", loadErr)
	}
	now := s.c.clock.Now()
	if s.loading.skipped > 0 {
		s.c.log.Warn("group: skipped records of an unknown format", "partition", s.p, "records", s.loading.skipped)
	}
	for id, lg := range s.loading.groups {
		var g *Group
		var err error
		if lg.metadata != nil {
			g, err = Restore(s.gcfg, *lg.metadata, now)
			if err != nil {
				s.c.log.Warn("group: group metadata not restored", "group", id, "err", err)
			}
		}
		if g == nil {
			if g, err = New(id, s.gcfg); err != nil {
				continue
			}
		}
		gs := &groupState{g: g, offsets: lg.offsets, staged: lg.staged, writing: map[TopicPartition]int{},
			lastState: g.State(), emptySince: lg.stateSince, cgEmpty: true}
		if gs.emptySince.IsZero() {
			gs.emptySince = now
		}
		s.groups[id] = gs
		s.apply(gs, g.Tick(now))
	}
	s.restoreShares(s.loading.shares)
	s.openTxns = s.loading.open
	s.loading = nil
	s.expireAt = now.Add(s.c.cfg.RetentionCheckInterval)
	s.arm(now, s.expireAt)
	s.c.log.Info("group: coordinating", "partition", s.p, "leader_epoch", s.Epoch(), "groups", len(s.groups),
		"share_groups", len(s.shares), "loaded_to", to)
}

// arm makes sure a timer fires at or before d.
func (s *shard) arm(now, d time.Time) {
	if d.IsZero() || (!s.armedAt.IsZero() && !d.Before(s.armedAt)) {
		return
	}
	s.armedAt = d
	s.SetTimer(s.c.clock.After(max(d.Sub(now), 0)))
}

// onTimer fires the groups' timers now due and expires offsets when the check is due.
func (s *shard) onTimer() {
	now := s.c.clock.Now()
	s.armedAt = time.Time{}
	for _, gs := range s.groups {
		if !gs.deadline.IsZero() && !now.Before(gs.deadline) {
			s.apply(gs, gs.g.Tick(now))
		}
	}
	s.tickConsumers(now)
	s.tickShares(now)
	if !now.Before(s.expireAt) {
		s.expire(now)
		s.expireAt = now.Add(s.c.cfg.RetentionCheckInterval)
	}
	s.arm(now, s.expireAt)
	for _, gs := range s.groups {
		s.arm(now, gs.deadline)
		s.arm(now, gs.cgDeadline)
	}
	for _, sg := range s.shares {
		s.arm(now, sg.g.Deadline())
	}
}

// apply delivers a Group's Output: responses to their waiting requests, records to the log (their
// outcome back to the Group through Stored), and the next timer.
func (s *shard) apply(gs *groupState, out Output) {
	now := s.c.clock.Now()
	for _, r := range out.Joins {
		if reply, ok := s.joins[r.Ref]; ok {
			delete(s.joins, r.Ref)
			reply(r, nil)
		}
	}
	for _, r := range out.Syncs {
		if reply, ok := s.syncs[r.Ref]; ok {
			delete(s.syncs, r.Ref)
			reply(r, nil)
		}
	}
	if len(out.Records) > 0 {
		entries := make([]entry, len(out.Records))
		tickets := make([]uint64, len(out.Records))
		for i, rec := range out.Records {
			entries[i] = groupEntry(rec, now)
			tickets[i] = rec.Ticket
		}
		s.write(now, entries, func(err error) {
			for _, t := range tickets {
				s.apply(gs, gs.g.Stored(s.c.clock.Now(), t, err))
			}
		})
	}
	if st := gs.g.State(); st != gs.lastState {
		if st == Empty {
			gs.emptySince = now
		}
		gs.lastState = st
	}
	gs.deadline = out.Deadline
	s.arm(now, out.Deadline)
}

func (s *shard) group(id string) *groupState {
	gs := s.groups[id]
	if gs == nil {
		g, err := New(id, s.gcfg)
		if err != nil {
			// The config was checked by NewCoordinator.
			panic(fmt.Sprintf("group: config rejected after it was checked: %v", err))
		}
		gs = &groupState{
			g: g, offsets: map[TopicPartition]committed{}, staged: map[int64]map[TopicPartition]committed{},
			writing: map[TopicPartition]int{}, lastState: Empty, emptySince: s.c.clock.Now(), cgEmpty: true,
		}
		s.groups[id] = gs
	}
	return gs
}

func (s *shard) join(group string, req JoinRequest, reply func(JoinResponse, error)) {
	if err := s.shareHeld(group, "classic"); err != nil {
		reply(JoinResponse{Err: err, Generation: -1}, nil)
		return
	}
	if s.groups[group] == nil && req.MemberID != "" {
		reply(JoinResponse{Err: ErrUnknownMemberID, Generation: -1}, nil)
		return
	}
	gs := s.group(group)
	if gs.hasConsumers() {
		reply(s.classicJoin(gs, req), nil)
		return
	}
	gs.cg = nil
	s.nextRef++
	req.Ref = s.nextRef
	s.joins[req.Ref] = reply
	s.apply(gs, gs.g.Join(s.c.clock.Now(), req))
}

func (s *shard) sync(group string, req SyncRequest, reply func(SyncResponse, error)) {
	gs := s.groups[group]
	if gs == nil {
		reply(SyncResponse{Err: ErrUnknownMemberID}, nil)
		return
	}
	if gs.hasConsumers() {
		now := s.c.clock.Now()
		reply(gs.cg.ClassicSync(now, req), nil)
		s.consumerChanged(gs, now)
		return
	}
	s.nextRef++
	req.Ref = s.nextRef
	s.syncs[req.Ref] = reply
	s.apply(gs, gs.g.Sync(s.c.clock.Now(), req))
}

func (s *shard) heartbeat(group string, req HeartbeatRequest) error {
	gs := s.groups[group]
	if gs == nil {
		return ErrUnknownMemberID
	}
	if gs.hasConsumers() {
		now := s.c.clock.Now()
		err := gs.cg.ClassicHeartbeat(now, req)
		s.consumerChanged(gs, now)
		return err
	}
	out, err := gs.g.Heartbeat(s.c.clock.Now(), req)
	s.apply(gs, out)
	return err
}

func (s *shard) leave(group string, members []LeaveMember) ([]error, error) {
	gs := s.groups[group]
	if gs == nil {
		errs := make([]error, len(members))
		for i := range errs {
			errs[i] = ErrUnknownMemberID
		}
		return errs, nil
	}
	if gs.hasConsumers() {
		now := s.c.clock.Now()
		errs := gs.cg.ClassicLeave(members)
		s.consumerChanged(gs, now)
		return errs, nil
	}
	out, errs := gs.g.Leave(s.c.clock.Now(), members)
	s.apply(gs, out)
	return errs, nil
}

func (s *shard) commit(group string, who CommitRequest, offsets []OffsetCommit, reply func([]error, error)) {
	if err := s.shareHeld(group, "classic"); err != nil {
		reply(nil, err)
		return
	}
	now := s.c.clock.Now()
	gs := s.groups[group]
	if gs == nil && who.Generation >= 0 {
		reply(nil, ErrIllegalGeneration)
		return
	}
	gs = s.group(group)
	var err error
	if gs.hasConsumers() {
		err = validateConsumerCommit(gs, who, offsets, false)
	} else {
		var out Output
		out, err = gs.g.ValidateCommit(now, who)
		s.apply(gs, out)
	}
	if err != nil {
		reply(nil, err)
		return
	}
	errs, entries, written := s.offsetEntries(group, offsets, now)
	if len(entries) == 0 {
		reply(errs, nil)
		return
	}
	gs.startWriting(offsets, written)
	a, wait, err := s.log.Append(encodeBatch(entries, now))
	s.awaitAppend(wait, err, func(err error) {
		gs.endWriting(offsets, written)
		for j, i := range written {
			if err != nil {
				errs[i] = writeFailed(err)
				continue
			}
			o := offsets[i]
			gs.offsets[o.TopicPartition] = o.committed(now, a.BaseOffset+int64(j))
		}
		reply(errs, nil)
	})
}

// offsetEntries returns the records of the offsets to write, committed at now, and their indexes in
// offsets; errs holds ErrOffsetMetadataTooLarge for each offset whose metadata is over the limit.
func (s *shard) offsetEntries(group string, offsets []OffsetCommit, now time.Time) (errs []error, entries []entry, written []int) {
	errs = make([]error, len(offsets))
	for i, o := range offsets {
		if len(o.Metadata) > s.c.cfg.OffsetMetadataMax {
			errs[i] = fmt.Errorf("%w: %d bytes, at most %d", ErrOffsetMetadataTooLarge, len(o.Metadata), s.c.cfg.OffsetMetadataMax)
			continue
		}
		entries = append(entries, offsetEntry(group, o.TopicPartition, o.committed(now, 0)))
		written = append(written, i)
	}
	return errs, entries, written
}

// committed is o committed at now, in the record at recordOffset of the offsets partition.
func (o OffsetCommit) committed(now time.Time, recordOffset int64) committed {
	return committed{
		offset: o.Offset, leaderEpoch: o.LeaderEpoch, metadata: o.Metadata, commitTime: now, recordOffset: recordOffset,
	}
}

// startWriting counts the partitions of offsets[i], for each i in written, as being written.
func (gs *groupState) startWriting(offsets []OffsetCommit, written []int) {
	for _, i := range written {
		gs.writing[offsets[i].TopicPartition]++
	}
}

// endWriting undoes startWriting once the write has ended.
func (gs *groupState) endWriting(offsets []OffsetCommit, written []int) {
	for _, i := range written {
		tp := offsets[i].TopicPartition
		if gs.writing[tp]--; gs.writing[tp] == 0 {
			delete(gs.writing, tp)
		}
	}
}

// unstable reports whether a commit of tp is being written or staged by an open transaction: an
// OffsetFetch that requires stable offsets gets ErrUnstableOffsetCommit for it.
func (gs *groupState) unstable(tp TopicPartition) bool {
	if gs.writing[tp] > 0 {
		return true
	}
	for _, txn := range gs.staged {
		if _, ok := txn[tp]; ok {
			return true
		}
	}
	return false
}

// fetchOffsets returns group's committed offsets of partitions (all of them when nil). With requireStable,
// a partition whose offset may still change (see groupState.unstable) gets ErrUnstableOffsetCommit and
// offset -1 instead.
func (s *shard) fetchOffsets(group string, partitions []TopicPartition, requireStable bool) []FetchedOffset {
	gs := s.groups[group]
	if partitions == nil {
		if gs == nil {
			return nil
		}
		for tp := range gs.offsets {
			partitions = append(partitions, tp)
		}
		slices.SortFunc(partitions, func(a, b TopicPartition) int {
			if c := strings.Compare(a.Topic, b.Topic); c != 0 {
				return c
			}
			return int(a.Partition - b.Partition)
		})
	}
	out := make([]FetchedOffset, len(partitions))
	for i, tp := range partitions {
		out[i] = FetchedOffset{TopicPartition: tp, Offset: -1, LeaderEpoch: -1}
		if gs == nil {
			continue
		}
		if requireStable && gs.unstable(tp) {
			out[i].Err = ErrUnstableOffsetCommit
			continue
		}
		if c, ok := gs.offsets[tp]; ok {
			out[i].Offset, out[i].LeaderEpoch, out[i].Metadata = c.offset, c.leaderEpoch, c.metadata
		}
	}
	return out
}

func (s *shard) deleteOffsets(group string, partitions []TopicPartition, reply func([]error, error)) {
	gs := s.groups[group]
	if gs == nil {
		reply(nil, ErrGroupNotFound)
		return
	}
	errs := make([]error, len(partitions))
	var subscribed map[string]bool
	switch gs.g.State() {
	case Dead:
		reply(nil, ErrGroupNotFound)
		return
	case Empty:
	case PreparingRebalance, CompletingRebalance, Stable:
		if gs.g.ProtocolType() != consumerProtocolType {
			reply(nil, ErrNonEmptyGroup)
			return
		}
		subscribed = subscribedTopics(gs.g.Describe())
	}
	if gs.hasConsumers() {
		subscribed = gs.cg.SubscribedTopics()
	}
	now := s.c.clock.Now()
	var entries []entry
	for i, tp := range partitions {
		if subscribed != nil && (subscribed[tp.Topic] || subscribed[""]) {
			errs[i] = ErrGroupSubscribedToTopic
			continue
		}
		if _, ok := gs.offsets[tp]; ok {
			delete(gs.offsets, tp)
			entries = append(entries, entry{key: offsetKey(group, tp)})
		}
	}
	if len(entries) == 0 {
		reply(errs, nil)
		return
	}
	s.write(now, entries, func(err error) {
		if err != nil {
			reply(nil, writeFailed(err))
			return
		}
		reply(errs, nil)
	})
}

// deleteTopicOffsets deletes every group's committed offsets of the topics named (deleted topics):
// tombstones for their keys, in one write. A failed write is logged; the offsets are gone from memory
// all the same, and come back from the log at the next load.
func (s *shard) deleteTopicOffsets(topics map[string]bool) {
	var entries []entry
	for group, gs := range s.groups {
		for tp := range gs.offsets {
			if topics[tp.Topic] {
				delete(gs.offsets, tp)
				entries = append(entries, entry{key: offsetKey(group, tp)})
			}
		}
	}
	if len(entries) == 0 {
		return
	}
	s.write(s.c.clock.Now(), entries, func(err error) {
		if err != nil {
			s.c.log.Warn("group: the offsets of a deleted topic were not deleted", "partition", s.p, "offsets", len(entries), "err", err)
		}
	})
}

// subscribedTopics is the set of topics the members of a consumer group subscribe to; the key "" stands
// for "unknown", when a member's subscription is not readable (not Stable, or not a known encoding).
func subscribedTopics(d Description) map[string]bool {
	out := map[string]bool{}
	for _, m := range d.Members {
		var md kmsg.ConsumerMemberMetadata
		if d.State != Stable || md.ReadFrom(m.Metadata) != nil {
			out[""] = true
			continue
		}
		for _, t := range md.Topics {
			out[t] = true
		}
	}
	return out
}

func (s *shard) describe(group string) Description {
	gs := s.groups[group]
	if gs == nil {
		return Description{Group: group, State: Dead}
	}
	return gs.g.Describe()
}

func (s *shard) deleteGroup(group string, reply func(struct{}, error)) {
	gs := s.groups[group]
	if gs == nil {
		reply(struct{}{}, ErrGroupNotFound)
		return
	}
	if gs.hasConsumers() {
		reply(struct{}{}, ErrNonEmptyGroup)
		return
	}
	out, err := gs.g.Delete()
	if err != nil {
		s.apply(gs, out)
		reply(struct{}{}, err)
		return
	}
	delete(s.groups, group)
	s.write(s.c.clock.Now(), s.tombstones(group, gs), func(err error) {
		if err != nil {
			err = writeFailed(err)
		}
		reply(struct{}{}, err)
	})
}

// tombstones deletes a group's metadata and every offset it has.
func (s *shard) tombstones(group string, gs *groupState) []entry {
	entries := []entry{{key: groupKey(group)}}
	for tp := range gs.offsets {
		entries = append(entries, entry{key: offsetKey(group, tp)})
	}
	return entries
}

func (s *shard) list() []Listing {
	out := s.listShares()
	for id, gs := range s.groups {
		if gs.hasConsumers() {
			out = append(out, Listing{Group: id, ProtocolType: consumerProtocolType, StateName: gs.cg.ConsumerState(), Type: TypeConsumer})
			continue
		}
		out = append(out, Listing{Group: id, ProtocolType: gs.g.ProtocolType(), State: gs.g.State(), StateName: gs.g.State().String(),
			Type: TypeClassic})
	}
	return out
}

// expire drops the offsets of Empty groups older than the retention (counted from when the group became
// Empty, or for a group that never had members from each commit), and deletes Empty groups left with no
// offsets, writing tombstones for both. Offsets staged by open transactions never expire, and keep their
// group.
func (s *shard) expire(now time.Time) {
	retention := s.c.cfg.OffsetsRetention
	var entries []entry
	for id, gs := range s.groups {
		if gs.g.State() != Empty || gs.hasConsumers() || len(gs.writing) > 0 {
			continue
		}
		for tp, c := range gs.offsets {
			base := c.commitTime
			if gs.g.ProtocolType() != "" || gs.cg != nil {
				base = gs.emptySince
			}
			if now.Sub(base) >= retention {
				delete(gs.offsets, tp)
				entries = append(entries, entry{key: offsetKey(id, tp)})
			}
		}
		if len(gs.offsets) == 0 && len(gs.staged) == 0 {
			if _, err := gs.g.Delete(); err == nil {
				delete(s.groups, id)
				entries = append(entries, entry{key: groupKey(id)})
			}
		}
	}
	if len(entries) == 0 {
		return
	}
	s.c.log.Info("group: expired offsets and groups", "partition", s.p, "tombstones", len(entries))
	s.write(now, entries, func(err error) {
		if err != nil {
			s.c.log.Warn("group: writing expiry tombstones", "partition", s.p, "err", err)
		}
	})
}
