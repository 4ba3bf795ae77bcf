package group

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/storage"
)

// shard coordinates the groups of one partition of __consumer_offsets that this node leads. Its owner
// goroutine (run) holds every group's state machine and offsets: it first reads the partition back from
// its start up to the log end offset the new leader has, waiting until the high watermark covers that end
// (so that it serves only committed data, never a tail another replica may not have), then serves the requests submitted to it in order, fires the group timers (which arrive as
// messages from the Clock) and expires old offsets. Writes go to the log from the owner; a second
// goroutine (waiter) waits for each write to be durable, in write order, and hands its completion back to
// the owner as a message.
type shard struct {
	c     *Coordinator
	p     int32
	log   Log
	epoch int32
	rand  *rand.Rand
	gcfg  Config

	// mu guards the inbox; it is never held while a message runs.
	mu     sync.Mutex
	inbox  []message
	closed bool
	wake   chan struct{}
	quit   chan struct{}
	done   chan struct{}

	// wmu guards the writes waiting for durability.
	wmu     sync.Mutex
	writes  []pendingWrite
	wclosed bool
	wwake   chan struct{}
	wdone   chan struct{}

	// Owned by run.
	loaded     bool
	loadOffset int64
	loadEnd    int64
	loading    *loaded
	groups     map[string]*groupState
	openTxns   openTxns
	nextRef    Ref
	joins      map[Ref]func(JoinResponse, error)
	syncs      map[Ref]func(SyncResponse, error)
	armedAt    time.Time
	timer      <-chan time.Time
	expireAt   time.Time
}

// message is one unit of work for the owner. stopped tells a request that the shard no longer
// coordinates; internal messages (write completions) always run as if not stopped.
type message struct {
	fn       func(stopped bool)
	internal bool
}

type pendingWrite struct {
	wait func(context.Context) error
	done func(error)
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
}

func (c *Coordinator) newShard(p int32, l Log, r *rand.Rand) *shard {
	s := &shard{
		c: c, p: p, log: l, epoch: l.LeaderEpoch(), rand: r,
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
		wwake: make(chan struct{}, 1), wdone: make(chan struct{}),
		loadOffset: -1, loading: newLoaded(),
		groups:   map[string]*groupState{},
		openTxns: openTxns{},
		joins:    map[Ref]func(JoinResponse, error){},
		syncs:    map[Ref]func(SyncResponse, error){},
	}
	s.gcfg = c.cfg.groupConfig(s.newMemberID)
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

// submit queues a request; false once the shard no longer takes requests.
func (s *shard) submit(fn func(stopped bool)) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	s.inbox = append(s.inbox, message{fn: fn})
	s.mu.Unlock()
	s.signal()
	return true
}

// submitInternal queues a write completion; the owner runs these until the waiter has finished.
func (s *shard) submitInternal(fn func()) {
	s.mu.Lock()
	s.inbox = append(s.inbox, message{fn: func(bool) { fn() }, internal: true})
	s.mu.Unlock()
	s.signal()
}

func (s *shard) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// close stops the shard and waits for it: groups are unloaded, waiting requests answered with
// ErrNotCoordinator, and writes in flight completed.
func (s *shard) close() {
	close(s.quit)
	<-s.done
}

// drain runs every queued message.
func (s *shard) drain(stopped bool) {
	s.mu.Lock()
	msgs := s.inbox
	s.inbox = nil
	s.mu.Unlock()
	for _, m := range msgs {
		m.fn(stopped && !m.internal)
	}
}

// leads reports whether the shard's replica still leads in the epoch the shard was loaded for; requests
// are served only then (the image that moves leadership away unloads the shard soon after).
func (s *shard) leads() bool {
	return s.log.IsLeader() && s.log.LeaderEpoch() == s.epoch
}

func (s *shard) run() {
	defer close(s.done)
	go s.waiter()
	hwMoved := make(chan struct{}, 1)
	stopWatch := s.log.Watch(hwMoved)
	for !s.loaded {
		select {
		case <-s.quit:
			stopWatch()
			s.stop()
			return
		default:
		}
		if s.loadStep() {
			s.drain(false)
			continue
		}
		// The high watermark is below what is left to load: answer the requests meanwhile and wait.
		select {
		case <-hwMoved:
		case <-s.wake:
			s.drain(false)
		case <-s.quit:
			stopWatch()
			s.stop()
			return
		}
	}
	stopWatch()
	for {
		select {
		case <-s.wake:
			s.drain(false)
		case <-s.timer:
			s.onTimer()
		case <-s.quit:
			s.stop()
			return
		}
	}
}

// stop unloads every group and finishes the writes in flight.
func (s *shard) stop() {
	for _, gs := range s.groups {
		s.apply(gs, gs.g.Unload())
	}
	s.groups = map[string]*groupState{}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.wmu.Lock()
	s.wclosed = true
	s.wmu.Unlock()
	select {
	case s.wwake <- struct{}{}:
	default:
	}
	for {
		select {
		case <-s.wake:
			s.drain(true)
		case <-s.wdone:
			s.drain(true)
			return
		}
	}
}

// waiter waits for each write to be durable, in write order, and hands the outcome to the owner.
func (s *shard) waiter() {
	defer close(s.wdone)
	for {
		s.wmu.Lock()
		ws := s.writes
		s.writes = nil
		closed := s.wclosed
		s.wmu.Unlock()
		for _, w := range ws {
			err := w.wait(context.Background())
			done := w.done
			s.submitInternal(func() { done(err) })
		}
		if len(ws) > 0 {
			continue
		}
		if closed {
			return
		}
		<-s.wwake
	}
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
	s.await(wait, err, done)
}

// await hands an append's wait function to the waiter, which calls done on the owner once the append is
// durable or failed; when the append itself failed (err), it calls done with err at once.
func (s *shard) await(wait func(context.Context) error, err error, done func(error)) {
	if err != nil {
		done(fmt.Errorf("group: write to %s-%d: %w", OffsetsTopic, s.p, err))
		return
	}
	s.wmu.Lock()
	s.writes = append(s.writes, pendingWrite{wait: wait, done: done})
	s.wmu.Unlock()
	select {
	case s.wwake <- struct{}{}:
	default:
	}
}

// loadStep reads the next chunk of the partition, from its start up to the log end offset it had when the
// load began; once the high watermark covers that end the groups are rebuilt and the shard serves. It
// reports false, having read nothing, when the next chunk is still above the high watermark.
func (s *shard) loadStep() bool {
	if s.loadOffset < 0 {
		s.loadOffset = s.log.LogStartOffset()
		s.loadEnd = s.log.LogEndOffset()
	}
	if s.loadOffset < s.loadEnd {
		if s.loadOffset >= s.log.HighWatermark() {
			return false
		}
		res, err := s.log.Read(s.loadOffset, loadReadBytes, false)
		if errors.Is(err, storage.ErrOffsetOutOfRange) && s.loadOffset < s.log.LogStartOffset() {
			s.loadOffset = s.log.LogStartOffset()
			return true
		}
		if err == nil && len(res.Records) > 0 {
			var next int64
			next, err = s.loading.applyBatches(res.Records)
			if next > s.loadOffset {
				s.loadOffset = next
			}
			if err == nil {
				return true
			}
		}
		if err != nil {
			s.c.log.Error("group: loading stopped early; offsets after this point are not restored",
				"partition", s.p, "offset", s.loadOffset, "err", err)
		}
	}
	s.finishLoad()
	return true
}

func (s *shard) finishLoad() {
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
			lastState: g.State(), emptySince: lg.stateSince}
		if gs.emptySince.IsZero() {
			gs.emptySince = now
		}
		s.groups[id] = gs
		s.apply(gs, g.Tick(now))
	}
	s.openTxns = s.loading.open
	s.loading = nil
	s.loaded = true
	s.expireAt = now.Add(s.c.cfg.RetentionCheckInterval)
	s.arm(now, s.expireAt)
	s.c.log.Info("group: coordinating", "partition", s.p, "leader_epoch", s.epoch, "groups", len(s.groups),
		"loaded_to", s.loadOffset)
}

// arm makes sure a timer fires at or before d.
func (s *shard) arm(now, d time.Time) {
	if d.IsZero() || (!s.armedAt.IsZero() && !d.Before(s.armedAt)) {
		return
	}
	s.armedAt = d
	s.timer = s.c.clock.After(max(d.Sub(now), 0))
}

func (s *shard) onTimer() {
	now := s.c.clock.Now()
	s.armedAt, s.timer = time.Time{}, nil
	for _, gs := range s.groups {
		if !gs.deadline.IsZero() && !now.Before(gs.deadline) {
			s.apply(gs, gs.g.Tick(now))
		}
	}
	if !now.Before(s.expireAt) {
		s.expire(now)
		s.expireAt = now.Add(s.c.cfg.RetentionCheckInterval)
	}
	s.arm(now, s.expireAt)
	for _, gs := range s.groups {
		s.arm(now, gs.deadline)
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
			writing: map[TopicPartition]int{}, lastState: Empty, emptySince: s.c.clock.Now(),
		}
		s.groups[id] = gs
	}
	return gs
}

func (s *shard) join(group string, req JoinRequest, reply func(JoinResponse, error)) {
	if s.groups[group] == nil && req.MemberID != "" {
		reply(JoinResponse{Err: ErrUnknownMemberID, Generation: -1}, nil)
		return
	}
	gs := s.group(group)
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
	out, errs := gs.g.Leave(s.c.clock.Now(), members)
	s.apply(gs, out)
	return errs, nil
}

func (s *shard) commit(group string, who CommitRequest, offsets []OffsetCommit, reply func([]error, error)) {
	now := s.c.clock.Now()
	gs := s.groups[group]
	if gs == nil && who.Generation >= 0 {
		reply(nil, ErrIllegalGeneration)
		return
	}
	gs = s.group(group)
	out, err := gs.g.ValidateCommit(now, who)
	s.apply(gs, out)
	if err != nil {
		reply(nil, err)
		return
	}
	errs := make([]error, len(offsets))
	var entries []entry
	var written []int
	for i, o := range offsets {
		if len(o.Metadata) > s.c.cfg.OffsetMetadataMax {
			errs[i] = fmt.Errorf("%w: %d bytes, at most %d", ErrOffsetMetadataTooLarge, len(o.Metadata), s.c.cfg.OffsetMetadataMax)
			continue
		}
		c := committed{offset: o.Offset, leaderEpoch: o.LeaderEpoch, metadata: o.Metadata, commitTime: now}
		entries = append(entries, offsetEntry(group, o.TopicPartition, c))
		written = append(written, i)
	}
	if len(entries) == 0 {
		reply(errs, nil)
		return
	}
	gs.startWriting(offsets, written)
	a, wait, err := s.log.Append(encodeBatch(entries, now))
	s.await(wait, err, func(err error) {
		gs.endWriting(offsets, written)
		for j, i := range written {
			if err != nil {
				errs[i] = writeFailed(err)
				continue
			}
			o := offsets[i]
			gs.offsets[o.TopicPartition] = committed{
				offset: o.Offset, leaderEpoch: o.LeaderEpoch, metadata: o.Metadata, commitTime: now,
				recordOffset: a.BaseOffset + int64(j),
			}
		}
		reply(errs, nil)
	})
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
	out := make([]Listing, 0, len(s.groups))
	for id, gs := range s.groups {
		out = append(out, Listing{Group: id, ProtocolType: gs.g.ProtocolType(), State: gs.g.State()})
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
		if gs.g.State() != Empty || len(gs.writing) > 0 {
			continue
		}
		for tp, c := range gs.offsets {
			base := c.commitTime
			if gs.g.ProtocolType() != "" {
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
