package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/storage"
)

// logView is what the core reads of its local log: offsets and the leader-epoch cache, all held in
// memory. The owner changes the log; the core only looks at it.
type logView interface {
	StartOffset() int64
	EndOffset() int64
	LatestEpoch() int32
	EndOffsetForEpoch(epoch int32) (int32, int64)
}

// core is a replica's state machine (docs/replication.md): role, leader epoch, ISR, high watermark,
// the followers' progress, the producer state and the acks=all waits. It does no I/O, reads no clock
// and starts no goroutine: its methods take one event each (an append, a follower's fetch, a durable
// point, an image, a tick with the time) and record what the owner must do in ready, which the owner
// takes with takeReady after each event. Only the replica's owner goroutine calls it.
type core struct {
	log    logView
	self   int32
	lagMax time.Duration
	// canAlter is set when ISR changes can be proposed (the replica has an ISRChanger).
	canAlter bool

	closed bool
	// stated is set once setState ran: until then the core is Open's single-node leader.
	stated bool
	// gen grows with every role or epoch change; an acks=all wait completes only in its own gen.
	gen uint64

	role           role
	epoch          int32
	leader         int32
	replicas       []int32
	isr            []int32
	partitionEpoch int32
	minISR         int
	live           map[int32]bool

	// hw is the high watermark; durable the offset below which the local log is durable.
	hw      int64
	durable int64

	// Leader only: followers' progress, the LEO when this epoch began, the ISR change in flight.
	followers  map[int32]*followerProgress
	epochStart int64
	altering   bool
	pendingAdd int32

	// Follower only: set until the OffsetForLeaderEpoch round of this epoch is done; fetchFrom is the
	// fetch offset after a reset past the log end (-1 when the log end is).
	needTruncate bool
	fetchFrom    int64

	producers *producers
	// acks are the acks=all waits not yet answered, in registration order.
	acks    []pendingAck
	nextAck uint64

	rd ready
}

// followerProgress is what a leader knows of one follower.
type followerProgress struct {
	// leo is the fetch offset of the follower's latest fetch at this epoch: durable on the follower.
	// -1 until it fetches.
	leo int64
	// lastFetch is the time of its latest fetch; prevLeaderLEO the leader's LEO at that fetch.
	lastFetch     time.Time
	prevLeaderLEO int64
	// lastCaughtUp is the last time its LEO reached the leader's LEO (Kafka's lastCaughtUpTimeMs).
	lastCaughtUp time.Time
}

// pendingAck is an acks=all wait: it is answered once the high watermark reaches end in generation gen,
// or with an error when gen passes first.
type pendingAck struct {
	id  uint64
	end int64
	gen uint64
}

// ready is what the owner must do after an event, in this order: start the ISR proposal, answer the
// acks=all waits, and, when the high watermark moved or the log or role changed, wake the watchers.
type ready struct {
	alter    *controller.AlterPartition
	answered []ackAnswer
	hwMoved  bool
	wake     bool
	notes    []note
}

// ackAnswer is the outcome of one acks=all wait.
type ackAnswer struct {
	id  uint64
	err error
}

// note is a line for the replica's logger: the core logs nothing itself.
type note struct {
	level slog.Level
	msg   string
	args  []any
}

// newCore starts a core as Open's single-node leader at epoch 0 of an ISR holding only self, with the
// high watermark at hw (capped to the log) and the log durable below durable.
func newCore(log logView, self int32, lagMax time.Duration, canAlter bool, p *producers, durable, hw int64) *core {
	c := &core{
		log: log, self: self, lagMax: lagMax, canAlter: canAlter,
		role: roleLeader, leader: self, replicas: []int32{self}, isr: []int32{self}, minISR: 1,
		followers: map[int32]*followerProgress{}, pendingAdd: controller.NoLeader, fetchFrom: -1,
		producers: p, durable: durable,
	}
	c.hw = max(min(hw, log.EndOffset()), log.StartOffset())
	c.epochStart = log.EndOffset()
	return c
}

// takeReady returns what the owner must do and clears it.
func (c *core) takeReady() ready {
	rd := c.rd
	c.rd = ready{}
	return rd
}

func (c *core) note(level slog.Level, msg string, args ...any) {
	c.rd.notes = append(c.rd.notes, note{level: level, msg: msg, args: args})
}

// setState applies the image's view of the partition: a new leader epoch or leader makes the replica
// leader or follower (failing the acks=all waits of the old epoch); at the same epoch the leader takes
// the image's ISR when its partition epoch is newer. An image older than the core's epoch is ignored: a
// broker never acts on a leader epoch older than one it has seen. It reports whether the replica became
// a follower that must truncate before fetching.
func (c *core) setState(s State, now time.Time) bool {
	st := s.Partition
	if c.closed || st.LeaderEpoch < c.epoch {
		return false
	}
	next := roleFollower
	switch st.Leader {
	case c.self:
		next = roleLeader
	case controller.NoLeader:
		next = roleNone
	}
	first := !c.stated
	changed := first || st.LeaderEpoch != c.epoch || next != c.role || st.Leader != c.leader
	c.stated = true
	c.replicas = slices.Clone(st.Replicas)
	c.minISR = int(max(s.MinISR, 1))
	c.live = map[int32]bool{}
	for _, id := range st.Replicas {
		c.live[id] = s.Live == nil || s.Live(id)
	}
	if changed {
		// a replica's first role, as it is opened, is at Debug: the Manager logs how many it opened, and a
		// topic of 10,000 partitions is not 10,000 lines
		level := slog.LevelInfo
		if first {
			level = slog.LevelDebug
		}
		c.note(level, "replica role", "role", next.String(), "leader", st.Leader,
			"leader_epoch", st.LeaderEpoch, "log_end", c.log.EndOffset(), "high_watermark", c.hw)
		c.role, c.epoch, c.leader = next, st.LeaderEpoch, st.Leader
		c.newGen()
		c.followers = map[int32]*followerProgress{}
		c.pendingAdd = controller.NoLeader
		c.needTruncate = next == roleFollower
		c.partitionEpoch = -1
		if next == roleLeader {
			for _, id := range st.Replicas {
				if id != c.self {
					c.followers[id] = &followerProgress{leo: -1, lastCaughtUp: now, prevLeaderLEO: -1}
				}
			}
			c.epochStart = c.log.EndOffset()
		}
		c.rd.wake = true
	} else if next == roleLeader {
		c.followReplicas(now)
	}
	if next == roleLeader && st.PartitionEpoch > c.partitionEpoch {
		c.isr = slices.Clone(st.ISR)
		c.partitionEpoch = st.PartitionEpoch
		if slices.Contains(c.isr, c.pendingAdd) {
			c.pendingAdd = controller.NoLeader
		}
	}
	if next != roleLeader {
		c.isr = slices.Clone(st.ISR)
	}
	c.updateHW()
	return changed && next == roleFollower
}

// followReplicas makes a leader's followers the image's replicas when they change within its epoch, as
// a move adds and removes them (docs/reassignment.md): a new follower starts unknown, a removed one is
// forgotten.
func (c *core) followReplicas(now time.Time) {
	for _, id := range c.replicas {
		if _, ok := c.followers[id]; !ok && id != c.self {
			c.followers[id] = &followerProgress{leo: -1, lastCaughtUp: now, prevLeaderLEO: -1}
		}
	}
	for id := range c.followers {
		if !slices.Contains(c.replicas, id) {
			delete(c.followers, id)
		}
	}
}

// newGen starts a generation: the acks=all waits of the previous one fail.
func (c *core) newGen() {
	c.gen++
	for _, a := range c.acks {
		c.rd.answered = append(c.rd.answered, ackAnswer{id: a.id, err: c.lostLeadership(a.end)})
	}
	c.acks = c.acks[:0]
}

func (c *core) lostLeadership(end int64) error {
	if c.closed {
		return ErrClosed
	}
	return fmt.Errorf("%w: lost leadership (now %s at epoch %d) before offset %d was committed",
		ErrNotLeader, c.role, c.epoch, end-1)
}

// checkLeader checks a client's current leader epoch (-1: unchecked) against the core's, then that it
// leads (KIP-320's order).
func (c *core) checkLeader(currentEpoch int32) error {
	return checkLeader(c.closed, c.role, c.epoch, currentEpoch)
}

func checkLeader(closed bool, r role, epoch, currentEpoch int32) error {
	switch {
	case closed:
		return ErrClosed
	case currentEpoch >= 0 && currentEpoch < epoch:
		return fmt.Errorf("%w: %d, the replica is at %d", ErrFencedLeaderEpoch, currentEpoch, epoch)
	case currentEpoch > epoch:
		return fmt.Errorf("%w: %d, the replica is at %d", ErrUnknownLeaderEpoch, currentEpoch, epoch)
	case r != roleLeader:
		return fmt.Errorf("%w: the replica is a %s at epoch %d", ErrNotLeader, r, epoch)
	}
	return nil
}

// admit decides whether a leader appends a batch: it must lead, have min.insync.replicas members for
// AcksAll, and the producer state must take the batch. A retry of one of the producer's latest batches
// returns the original append (dup), and nothing is to be written.
func (c *core) admit(h record.Header, acks Acks) (dup *batchMeta, err error) {
	if c.closed {
		return nil, ErrClosed
	}
	if c.role != roleLeader {
		return nil, fmt.Errorf("%w: the replica is a %s at epoch %d", ErrNotLeader, c.role, c.epoch)
	}
	if acks == AcksAll && len(c.isr) < c.minISR {
		return nil, fmt.Errorf("%w: ISR %v, min.insync.replicas %d", ErrNotEnoughReplicas, c.isr, c.minISR)
	}
	if h.ProducerID < 0 || h.Control() {
		return nil, nil
	}
	return c.producers.check(h)
}

// admitCoordinator decides whether a leader appends a batch a coordinator wrote on a producer's behalf
// (a transaction's offsets in __consumer_offsets): no sequence to check, only that it leads, the ISR
// for acks=all, and that the producer's epoch is not older than the partition's.
func (c *core) admitCoordinator(h record.Header) error {
	if _, err := c.admit(record.Header{ProducerID: -1}, AcksAll); err != nil {
		return err
	}
	return c.producers.checkEpoch(h)
}

// admitMarker decides whether a leader appends transaction marker m of the producer of h: it must lead
// and have min.insync.replicas members (markers are written at acks=all), and the producer state must
// take the marker of a transaction of version tv (producers.checkMarker).
func (c *core) admitMarker(h record.Header, m record.Marker, tv int8) error {
	if _, err := c.admit(record.Header{ProducerID: -1}, AcksAll); err != nil {
		return err
	}
	return c.producers.checkMarker(h, m, tv)
}

// appended records a batch the owner wrote, its header carrying the offset it got; m is the marker of a
// control batch (nil otherwise). It returns the aborted transaction an ABORT marker closed, if any.
func (c *core) appended(h record.Header, m *record.Marker) (abortedRange, bool) {
	a, ok := c.producers.update(h, m)
	c.rd.wake = true
	return a, ok
}

// lso is the last stable offset: the high watermark, or the first offset of the oldest transaction
// that is open or whose marker the high watermark has not passed, when that is lower.
func (c *core) lso() int64 {
	c.producers.settle(c.hw)
	if first, ok := c.producers.firstUnstable(); ok {
		return min(c.hw, first)
	}
	return c.hw
}

// awaitCommit registers an acks=all wait for the records below end, appended in generation gen. It
// answers at once (done) when it can; otherwise the answer comes in a later ready under id.
func (c *core) awaitCommit(end int64, gen uint64) (id uint64, done bool, err error) {
	if done, err := c.commitOutcome(end, gen); done {
		return 0, true, err
	}
	c.nextAck++
	c.acks = append(c.acks, pendingAck{id: c.nextAck, end: end, gen: gen})
	return c.nextAck, false, nil
}

// forget drops an acks=all wait whose caller gave up.
func (c *core) forget(id uint64) {
	c.acks = slices.DeleteFunc(c.acks, func(a pendingAck) bool { return a.id == id })
}

// commitOutcome reports whether an acks=all wait for end, begun in generation gen, is over, and how.
func (c *core) commitOutcome(end int64, gen uint64) (bool, error) {
	switch {
	case c.closed:
		return true, ErrClosed
	case c.gen != gen || c.role != roleLeader:
		return true, c.lostLeadership(end)
	case c.hw < end:
		return false, nil
	case len(c.isr) < c.minISR:
		return true, fmt.Errorf("%w: ISR %v, min.insync.replicas %d", ErrNotEnoughReplicasAfterAppend, c.isr, c.minISR)
	}
	return true, nil
}

// durableAt records that the local log is durable below end.
func (c *core) durableAt(end int64) {
	if end > c.durable && end <= c.log.EndOffset() {
		c.durable = end
	}
	c.updateHW()
}

// updateHW recomputes a leader's high watermark: min(its durable LEO, the LEO of every other member of
// the effective ISR, the ISR plus a member being added). It does not move while the ISR is smaller than
// min.insync.replicas (or the replica count, if smaller): the controller elects from the ELR, the
// members that left the ISR when it went below that size (KIP-966), and they hold only what was
// committed before. A follower's moves with fetch responses.
func (c *core) updateHW() {
	if c.role != roleLeader || c.closed || len(c.isr) < min(c.minISR, len(c.replicas)) {
		return
	}
	hw := c.durable
	for _, id := range c.effectiveISR() {
		if id == c.self {
			continue
		}
		f, ok := c.followers[id]
		if !ok {
			return
		}
		hw = min(hw, f.leo)
	}
	c.raiseHW(hw)
}

func (c *core) effectiveISR() []int32 {
	if c.pendingAdd == controller.NoLeader || slices.Contains(c.isr, c.pendingAdd) {
		return c.isr
	}
	return append(slices.Clone(c.isr), c.pendingAdd)
}

// raiseHW moves the high watermark to end if that is higher, and answers the acks=all waits it covers.
func (c *core) raiseHW(end int64) {
	if end <= c.hw {
		return
	}
	c.hw = end
	c.rd.hwMoved = true
	kept := c.acks[:0]
	for _, a := range c.acks {
		if done, err := c.commitOutcome(a.end, a.gen); done {
			c.rd.answered = append(c.rd.answered, ackAnswer{id: a.id, err: err})
			continue
		}
		kept = append(kept, a)
	}
	c.acks = kept
}

// followerFetch is the leader's side of a follower's Fetch (docs/replication.md, "Follower fetch"): it
// checks the follower's leader epoch and, when lastFetchedEpoch is set (>= 0), whether the follower's
// log diverged; then it records fetchOffset as the follower's durable LEO, moves the high watermark, and
// proposes the follower for the ISR once it has caught up. A diverging follower gets the epoch and end
// offset to truncate to (ok false) and nothing is recorded.
func (c *core) followerFetch(follower int32, fetchOffset int64, currentEpoch, lastFetchedEpoch int32, now time.Time) (EpochEnd, bool, error) {
	if err := c.checkLeader(currentEpoch); err != nil {
		return EpochEnd{}, false, err
	}
	f, known := c.followers[follower]
	if !known {
		return EpochEnd{}, false, fmt.Errorf("%w: broker %d is not a follower", ErrNotLeader, follower)
	}
	if d, div := c.divergence(fetchOffset, lastFetchedEpoch); div {
		return d, false, nil
	}
	leo, start := c.log.EndOffset(), c.log.StartOffset()
	if fetchOffset > leo || fetchOffset < start {
		return EpochEnd{}, false, fmt.Errorf("follower %d fetch offset %d outside [%d, %d]: %w",
			follower, fetchOffset, start, leo, storage.ErrOffsetOutOfRange)
	}
	switch {
	case fetchOffset >= leo:
		f.lastCaughtUp = now
	case f.prevLeaderLEO >= 0 && fetchOffset >= f.prevLeaderLEO:
		if f.lastFetch.After(f.lastCaughtUp) {
			f.lastCaughtUp = f.lastFetch
		}
	}
	f.leo, f.lastFetch, f.prevLeaderLEO = fetchOffset, now, leo
	c.maybeExpand(follower, f)
	c.updateHW()
	return EpochEnd{}, true, nil
}

// divergence reports whether a position at fetchOffset after lastFetchedEpoch (-1: unchecked) lies past
// the end of that epoch in this log, and where the epoch ends here.
func (c *core) divergence(fetchOffset int64, lastFetchedEpoch int32) (EpochEnd, bool) {
	return divergence(c.role, c.epoch, c.log, fetchOffset, lastFetchedEpoch)
}

func divergence(r role, epoch int32, log logView, fetchOffset int64, lastFetchedEpoch int32) (EpochEnd, bool) {
	if lastFetchedEpoch < 0 {
		return EpochEnd{}, false
	}
	e, end := endOffsetForEpoch(r, epoch, log, lastFetchedEpoch)
	if e == lastFetchedEpoch && end >= fetchOffset {
		return EpochEnd{}, false
	}
	return EpochEnd{Epoch: e, EndOffset: end}, true
}

// endOffsetForEpoch is the largest epoch at or below epoch and the offset where it ends in log; (-1, -1)
// when unknown. On a leader that has not appended in its own epoch yet, the epoch is taken to start at
// the log end (KIP-279).
func endOffsetForEpoch(r role, current int32, log logView, epoch int32) (int32, int64) {
	if r == roleLeader {
		if epoch > current {
			return -1, -1
		}
		if latest := log.LatestEpoch(); latest < current && epoch > latest {
			// Nothing appended in this epoch yet: it starts at the log end, where the latest ends.
			switch {
			case epoch == current:
				return current, log.EndOffset()
			case latest >= 0:
				return latest, log.EndOffset()
			}
			return -1, -1
		}
	}
	return log.EndOffsetForEpoch(epoch)
}

// maybeExpand proposes follower f for the ISR when it is outside it, live, caught up to the high
// watermark and to the start of this epoch, and no ISR change is in flight.
func (c *core) maybeExpand(id int32, f *followerProgress) {
	if !c.canAlter || c.changingISR() || slices.Contains(c.isr, id) || !c.live[id] {
		return
	}
	if f.leo < c.hw || f.leo < c.epochStart {
		return
	}
	c.pendingAdd = id
	c.propose(append(slices.Clone(c.isr), id))
}

// tick drops from the ISR the followers that have not caught up within replica.lag.time.max.ms, never
// below min.insync.replicas (docs/replication.md, "ISR shrink").
func (c *core) tick(now time.Time) {
	if c.closed || c.role != roleLeader || !c.canAlter || c.changingISR() {
		return
	}
	isr := shrinkISR(c.isr, c.self, c.minISR, func(id int32) bool {
		f, ok := c.followers[id]
		return !ok || now.Sub(f.lastCaughtUp) > c.lagMax
	})
	if len(isr) < len(c.isr) {
		c.note(slog.LevelWarn, "shrinking ISR", "isr", c.isr, "new_isr", isr)
		c.propose(isr)
	}
}

// shrinkISR returns isr without the members lagging says are out of sync (never the leader), keeping at
// least minISR members: the ones dropped first are the later ones in isr order.
func shrinkISR(isr []int32, leader int32, minISR int, lagging func(int32) bool) []int32 {
	out := slices.Clone(isr)
	for i := len(out) - 1; i >= 0 && len(out) > minISR; i-- {
		if out[i] != leader && lagging(out[i]) {
			out = slices.Delete(out, i, i+1)
		}
	}
	return out
}

// changingISR reports an ISR change in flight, or an answer that moved leadership away (altered) and
// that the image has not brought yet: no other change may be proposed meanwhile.
func (c *core) changingISR() bool {
	return c.altering || c.pendingAdd != controller.NoLeader
}

// propose asks the owner to send an AlterPartition for isr; altered takes its outcome.
func (c *core) propose(isr []int32) {
	c.altering = true
	c.rd.alter = &controller.AlterPartition{
		Leader: c.self, LeaderEpoch: c.epoch, PartitionEpoch: c.partitionEpoch, ISR: isr,
	}
}

// altered applies the outcome of the ISR proposal: the committed state, or the error that refused it.
func (c *core) altered(isr []int32, st *controller.PartitionState, err error) {
	c.altering = false
	if err != nil {
		c.pendingAdd = controller.NoLeader
		if !errors.Is(err, context.Canceled) {
			c.note(slog.LevelWarn, "ISR change refused", "isr", isr, "err", err)
		}
		c.updateHW()
		return
	}
	// An answer at a newer leader epoch is a move's completion that elected another replica, perhaps
	// the one being added: until the image makes this core a follower, the high watermark keeps
	// waiting for that replica, or this core would acknowledge records the new leader lacks.
	if st.LeaderEpoch == c.epoch {
		c.pendingAdd = controller.NoLeader
	}
	if c.role == roleLeader && c.epoch == st.LeaderEpoch && st.PartitionEpoch > c.partitionEpoch {
		c.isr = slices.Clone(st.ISR)
		c.partitionEpoch = st.PartitionEpoch
	}
	c.note(slog.LevelInfo, "ISR changed", "isr", st.ISR, "partition_epoch", st.PartitionEpoch)
	c.rd.wake = true
	c.updateHW()
}

// position is what a fetcher needs to fetch one partition.
type position struct {
	leader   int32
	epoch    int32
	truncate bool
	// offset is the fetch offset (the log end, or the leader's log start after a reset);
	// lastEpoch the log's latest epoch.
	offset    int64
	lastEpoch int32
}

// position returns the follower's fetch position; ok is false unless it is an open follower.
func (c *core) position() (position, bool) {
	if c.closed || c.role != roleFollower {
		return position{}, false
	}
	p := position{leader: c.leader, epoch: c.epoch, truncate: c.needTruncate,
		offset: max(c.log.EndOffset(), c.fetchFrom), lastEpoch: c.log.LatestEpoch()}
	return p, true
}

// following reports whether the core is an open follower at epoch.
func (c *core) following(epoch int32) bool {
	return !c.closed && c.role == roleFollower && c.epoch == epoch
}

// truncation says where a follower at epoch cuts its log after the leader's answer about an epoch
// (OffsetForLeaderEpoch, or a fetch's diverging epoch): ok is false when it no longer follows at epoch.
// The owner truncates when point is below the log end, then calls truncated.
func (c *core) truncation(epoch int32, answer EpochEnd) (point int64, ok bool) {
	if !c.following(epoch) {
		return 0, false
	}
	return truncationPoint(answer, c.log.EndOffsetForEpoch, c.log.StartOffset(), c.log.EndOffset()), true
}

// truncationPoint is where a follower cuts its log given the leader's answer about an epoch: the
// leader's end of that epoch, or this log's end of it if that is lower (the largest local epoch at or
// below it ends there). An undefined answer cuts to the log start. It never looks at the high watermark
// (KIP-101).
func truncationPoint(leader EpochEnd, localEndFor func(int32) (int32, int64), logStart, leo int64) int64 {
	if leader.Epoch < 0 || leader.EndOffset < 0 {
		return logStart
	}
	point := min(leader.EndOffset, leo)
	if le, end := localEndFor(leader.Epoch); le >= 0 && end >= 0 {
		point = min(point, end)
	}
	return max(point, logStart)
}

// truncated records that the log was cut (now ending at the log's end offset) and the producer state
// rebuilt from it as p; done clears the pending truncation of the epoch.
func (c *core) truncated(p *producers, done bool) {
	end := c.log.EndOffset()
	if c.hw > end {
		c.note(slog.LevelError, "truncation below the high watermark (an unclean election?)", "high_watermark", c.hw, "log_end", end)
		c.hw = end
	}
	c.durable = min(c.durable, end)
	if p != nil {
		c.producers = p
	}
	if done {
		c.needTruncate = false
	}
}

// resetTo records that the log was emptied so that fetching restarts at the leader's log start.
func (c *core) resetTo(leaderStart int64, p *producers) {
	c.fetchFrom = leaderStart
	c.truncated(p, false)
}

// fetchedAppended records what a follower appended from the leader (the batches as written) and learns
// the leader's high watermark. It returns the aborted transactions the batches' ABORT markers closed.
func (c *core) fetchedAppended(records []byte, leaderHW int64) []abortedRange {
	var aborted []abortedRange
	if len(records) > 0 {
		for h, m := range batchMarkers(records) {
			if a, ok := c.producers.update(h, m); ok {
				aborted = append(aborted, a)
			}
		}
		c.fetchFrom = -1
	}
	c.followerHW(leaderHW)
	return aborted
}

// followerHW moves a follower's high watermark to the leader's, capped at its own log end.
func (c *core) followerHW(leaderHW int64) {
	c.raiseHW(min(leaderHW, c.log.EndOffset()))
}

// retruncate makes the follower ask the leader about its epoch again before the next fetch (its fetch
// offset was past the leader's log end).
func (c *core) retruncate(epoch int32) {
	if c.following(epoch) {
		c.needTruncate = true
	}
}

// startMoved forgets the producers whose batches lie wholly below the log start.
func (c *core) startMoved() { c.producers.evictBefore(c.log.StartOffset()) }

// logFailed answers every acks=all wait with the error that took the log offline: nothing more of the
// log becomes durable.
func (c *core) logFailed(err error) {
	for _, a := range c.acks {
		c.rd.answered = append(c.rd.answered, ackAnswer{id: a.id, err: err})
	}
	c.acks = c.acks[:0]
}

// close fails every acks=all wait; the core takes no event after it.
func (c *core) close() {
	c.closed = true
	c.newGen()
}

// batchMarkers yields the header of each whole batch in b, with the transaction marker of a control
// batch (nil for other batches and for a control batch that is not a marker), stopping at the first
// batch that does not parse.
func batchMarkers(b []byte) func(yield func(record.Header, *record.Marker) bool) {
	return func(yield func(record.Header, *record.Marker) bool) {
		for len(b) > 0 {
			h, err := record.ParseHeader(b)
			if err != nil || h.Size() > len(b) {
				return
			}
			if !yield(h, markerOf(h, b[:h.Size()])) {
				return
			}
			b = b[h.Size():]
		}
	}
}

// markerOf returns the transaction marker of batch b with header h, nil when it is not a control batch
// holding one.
func markerOf(h record.Header, b []byte) *record.Marker {
	if !h.Control() {
		return nil
	}
	m, err := record.ParseMarker(b)
	if err != nil {
		return nil
	}
	return &m
}
