package api

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/share"
	"github.com/weir-mq/weir/internal/sharestate"
)

// shareLoadWait bounds how long an operation waits for its share-partition's load before it answers
// COORDINATOR_LOAD_IN_PROGRESS (retriable): a share-state coordinator that is not ready (being
// created, elected, loaded, or moving away from a dead node) keeps the load going.
const shareLoadWait = 2 * time.Second

// shareRetry is how long a share-partition's owner waits before it asks the share-state coordinator
// again while the coordinator is not ready (its partition being created, elected or loaded), and
// before it writes again after a write failed.
const shareRetry = 50 * time.Millisecond

// sharePart is the owner of one share-partition at the leader of its data partition: one goroutine
// holds the share.Partition and runs every operation on it in turn (acquisitions, acknowledgements,
// releases, lock expiries), so the state machine needs no lock. It first loads the share-partition from
// its share-state coordinator, on this node or another (shareStore; share.Restore, or share.New where
// share.auto.offset.reset says, for one without state: startOffset)
// and writes the fencing snapshot at its leader epoch; every change after that is persisted, and an
// operation is answered only once its write is committed. The writes go on behind the operations
// (share.Writes): a second goroutine, the writer, writes one record at a time and answers the
// operations it carries once it is committed, while the owner goes on acquiring; the next record
// carries everything owed meanwhile. A change that made records acquirable again (a release, a lock
// expiry, a member leaving) stops the owner from taking operations until the write that carries it is
// committed. Records a change archives (a rejection, the delivery limit) are first copied to the
// group's dead-letter topic (share_dlq.go). One timer, for the earliest lock deadline, releases
// expired locks. An owner left idle (no work for shareGroups.ownerIdle, nothing held beyond its
// committed state, no share session here naming its share-partition) stops and frees its window; the
// next request for the share-partition starts an owner that restores it.
type sharePart struct {
	sp      sharestate.SharePartition
	replica *partition.Replica
	epoch   int32
	store   *shareStore
	// set is what the owner started with; tuned, guarded by the registry's mutex, is the share.Config
	// last handed to it (set.cfg, then each retune).
	set   shareSettings
	tuned share.Config
	clock Clock
	dlq   deadLetterFunc
	// idle is how long the owner may go without work before it asks retire to let it stop (see
	// idleOwner); retire takes it out of its registry and reports whether it may stop.
	idle   time.Duration
	retire func(*sharePart) bool
	// archived collects what the operation running on the owner archived, for the dead-letter copy
	// before its write; writes keeps the books of the writes owed and in flight. Only the owner
	// goroutine touches them.
	archived []share.Archive
	writes   share.Writes[chan error]

	ops chan shareOp
	// watchMu guards watchers, the channels of the ShareFetches parked on this share-partition: the
	// owner wakes them after an operation that may have made records acquirable.
	watchMu  sync.Mutex
	watchers map[chan<- struct{}]struct{}
	// loaded is closed once the share-partition is loaded and fenced; quit asks the owner to stop
	// (closed once, by stop, which callers in several goroutines may call); done is closed when it has.
	loaded   chan struct{}
	quit     chan struct{}
	quitOnce sync.Once
	done     chan struct{}
}

// startSharePart starts the owner of sp on replica r, led at epoch, in the registry of s.
func (s *shareGroups) startSharePart(sp sharestate.SharePartition, r *partition.Replica, epoch int32, set shareSettings) *sharePart {
	p := &sharePart{sp: sp, replica: r, epoch: epoch, store: s.store, set: set, tuned: set.cfg, clock: s.clock, dlq: s.deadLetters,
		idle: s.ownerIdle, retire: s.retire,
		ops: make(chan shareOp), watchers: map[chan<- struct{}]struct{}{}, loaded: make(chan struct{}), quit: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

// idleOwner reports whether the owner holds nothing that its committed state does not: no record
// acquired (an acquisition is not written, so a restore would give the record back one delivery short),
// no write owed or in flight, none to retry, and no ShareFetch parked on it. An owner that stops then
// loses nothing, and the next one restores exactly its state.
func (p *sharePart) idleOwner(sp *share.Partition, retrying bool) bool {
	if !sp.Deadline().IsZero() || p.writes.Flying() || p.writes.Blocked(sp) || retrying {
		return false
	}
	p.watchMu.Lock()
	defer p.watchMu.Unlock()
	return len(p.watchers) == 0
}

// watch registers ch to receive a value (sent without blocking) every time an acknowledgement, a
// release or a lock expiry may have made records acquirable: released records, or room in a full
// window. stop unregisters it.
func (p *sharePart) watch(ch chan<- struct{}) (stop func()) {
	p.watchMu.Lock()
	p.watchers[ch] = struct{}{}
	p.watchMu.Unlock()
	return func() {
		p.watchMu.Lock()
		delete(p.watchers, ch)
		p.watchMu.Unlock()
	}
}

// notify wakes the watchers.
func (p *sharePart) notify() {
	p.watchMu.Lock()
	defer p.watchMu.Unlock()
	for ch := range p.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// stop ends the owner and waits for it.
func (p *sharePart) stop() {
	p.quitOnce.Do(func() { close(p.quit) })
	<-p.done
}

// shareOp is one operation on the owner: fn, then, when it succeeded and writes says so, the write of
// the record it owes; reply gets the outcome.
type shareOp struct {
	fn     func(*share.Partition) error
	writes opWrites
	reply  chan error
}

// opWrites is what an operation owes: nothing (an acquisition), a write, or a write after the
// dead-letter copy of what it archives (a rejection, a release at the delivery limit): for that one
// the owner keeps a clone of the share-partition to go back to if the copy fails.
type opWrites int8

const (
	opNoWrite opWrites = iota
	opWrite
	opWriteArchives
)

// do runs fn on the owner and returns its error, or the write's when it owes one: ctx's error, or
// ErrNotLeader once the owner has stopped, sharestate.ErrLoadInProgress while it is still loading
// after shareLoadWait.
func (p *sharePart) do(ctx context.Context, writes opWrites, fn func(*share.Partition) error) error {
	return p.submit(ctx, writes, fn)()
}

// submit hands fn to the owner and returns once the owner has taken it, so that an operation submitted
// after it runs after it; wait returns what do returns. For an operation that owes a write, fn runs on
// the owner at once and its answer comes once its write is committed.
func (p *sharePart) submit(ctx context.Context, writes opWrites, fn func(*share.Partition) error) (wait func() error) {
	if err := p.awaitLoad(ctx); err != nil {
		return func() error { return err }
	}
	op := shareOp{fn: fn, writes: writes, reply: make(chan error, 1)}
	select {
	case p.ops <- op:
	case <-p.done:
		return func() error { return partition.ErrNotLeader }
	case <-ctx.Done():
		return func() error { return ctx.Err() }
	}
	return func() error {
		select {
		case err := <-op.reply:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// awaitLoad waits for the owner's load, up to shareLoadWait.
func (p *sharePart) awaitLoad(ctx context.Context) error {
	select {
	case <-p.loaded:
		return nil
	default:
	}
	select {
	case <-p.loaded:
		return nil
	case <-p.done:
		return partition.ErrNotLeader
	case <-ctx.Done():
		return ctx.Err()
	case <-p.clock.After(shareLoadWait):
		return fmt.Errorf("%w: share-partition %s", sharestate.ErrLoadInProgress, p.sp)
	}
}

// stopped reports whether the owner has ended (stopped, or its load failed).
func (p *sharePart) stopped() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// retune applies the group's changed settings to the share-partition on the owner
// (share.Partition.Tune), with the dead-letter copies of what a lowered delivery limit archives and
// the write of the change, and returns once that is committed. When it fails the owner stops, and the
// next operation starts one with the new settings, as a change of key order does.
func (p *sharePart) retune(cfg share.Config) {
	ctx, cancel := context.WithTimeout(context.Background(), shareOpWait)
	defer cancel()
	err := p.do(ctx, opWriteArchives, func(sp *share.Partition) error {
		var err error
		p.archived, err = sp.Tune(cfg)
		return err
	})
	if err != nil {
		p.stop()
	}
}

// acquire hands up to maxRecords records below the high watermark to member, by priority and due
// time once their attributes are tracked (track). In a key-ordered group it takes at most its share of
// what is acquirable, divided between the fetchers (the members fetching the share-partition here).
func (p *sharePart) acquire(ctx context.Context, member string, maxRecords, fetchers int) ([]share.AcquiredRange, error) {
	var out []share.AcquiredRange
	err := p.do(ctx, opNoWrite, func(sp *share.Partition) error {
		now := p.clock.Now()
		hw, err := p.track(sp, now)
		if err != nil {
			return err
		}
		if p.set.cfg.KeyOrdered && fetchers > 1 {
			n := sp.Acquirable(hw, now)
			maxRecords = min(maxRecords, max(1, (n+fetchers-1)/fetchers))
		}
		out = sp.Acquire(member, maxRecords, hw, now)
		return nil
	})
	return out, err
}

// acquireThrough hands member the available records from first through last below the high
// watermark (share.Partition.AcquireThrough) that are due.
func (p *sharePart) acquireThrough(ctx context.Context, member string, first, last int64) ([]share.AcquiredRange, error) {
	var out []share.AcquiredRange
	err := p.do(ctx, opNoWrite, func(sp *share.Partition) error {
		now := p.clock.Now()
		hw, err := p.track(sp, now)
		if err != nil {
			return err
		}
		out = sp.AcquireThrough(member, first, last, hw, now)
		return nil
	})
	return out, err
}

// track reads the records from sp.Tracked() up to the high watermark, within sp.TrackLimit(), and
// gives sp their priorities and due times (batchAttrs, under the topic's delivery configs). It returns
// the bound to acquire below: the high watermark, or less where the records are not tracked (beyond
// the window's cap, or past a read that came back short), so that no record is handed out before its
// due time is known, after a restore too. The batches are read from the log as a fetch reads them;
// each offset is read once in the owner's life. It first moves the share-partition's start up to the
// log's when the log start passed it. Under share.isolation.level=read_committed the bound
// is the last stable offset instead, and the records of aborted transactions and control records are
// marked Skip, which sp archives.
func (p *sharePart) track(sp *share.Partition, now time.Time) (int64, error) {
	if start := p.replica.LogStartOffset(); start > sp.StartOffset() {
		// Retention or DeleteRecords removed records the group had not finished: they are gone, and
		// the window starts at the log's start (the next write records it; a restore moves it again).
		sp.MoveStart(start)
	}
	hw := p.replica.HighWatermark()
	if p.set.committed {
		hw = p.replica.LastStableOffset()
	}
	to := min(hw, sp.TrackLimit())
	if sp.Tracked() >= to {
		return min(hw, sp.Tracked()), nil
	}
	dc := p.delivery()
	keys := p.set.cfg.KeyOrdered
	var attrs []share.Attr
	if !dc.Headers && dc.DelayMs == 0 && !keys && !p.set.committed {
		// Every record has the topic's priority and is due: nothing to read.
		attrs = make([]share.Attr, to-sp.Tracked())
		for i := range attrs {
			attrs[i].Priority = dc.PriorityDefault
		}
		_, err := sp.Track(attrs, now)
		return min(hw, sp.Tracked()), err
	}
	for from := sp.Tracked(); from < to; from = sp.Tracked() {
		res, err := p.replica.Read(from, shareReadChunk, p.set.committed)
		if err != nil {
			return 0, err
		}
		var committed *partition.Committed
		if p.set.committed {
			committed = partition.NewCommitted(res.Aborted)
		}
		attrs = attrs[:0]
		next := from
		for batch, err := range record.Batches(res.Records) {
			if err != nil {
				return 0, fmt.Errorf("%w: %w", record.ErrCorrupt, err)
			}
			h, err := record.ParseHeader(batch)
			if err != nil {
				return 0, err
			}
			skip := committed != nil && committed.Skip(h)
			if h.LastOffset() < next {
				continue
			}
			for ; next < h.BaseOffset && next < to; next++ {
				// offsets compaction removed with their whole batch
				attrs = append(attrs, share.Attr{Priority: dc.PriorityDefault})
			}
			if next >= to {
				break
			}
			if skip {
				for ; next < h.NextOffset(); next++ {
					attrs = append(attrs, share.Attr{Skip: true})
				}
				continue
			}
			if attrs, err = batchAttrs(attrs, record.Checked{Header: h, Bytes: batch}, next, dc, keys); err != nil {
				return 0, err
			}
			next = h.NextOffset()
		}
		if n, err := sp.Track(attrs[:min(int64(len(attrs)), to-from)], now); err != nil || n == 0 {
			break
		}
	}
	return min(hw, sp.Tracked()), nil
}

// acknowledge hands member's acknowledgements to the owner and returns once it has taken them; wait
// returns once they are committed.
func (p *sharePart) acknowledge(ctx context.Context, member string, batches []share.AckBatch) (wait func() error) {
	writes := opWrite
	for _, b := range batches {
		if slices.ContainsFunc(b.Types, func(t share.AckType) bool { return t == share.AckReject || t == share.AckRelease }) {
			writes = opWriteArchives
		}
	}
	return p.submit(ctx, writes, func(sp *share.Partition) error {
		archived, err := sp.Acknowledge(member, batches, p.clock.Now())
		p.archived = archived
		return err
	})
}

// releaseMember hands every record member holds back; it returns once that is committed.
func (p *sharePart) releaseMember(ctx context.Context, member string) error {
	return p.do(ctx, opWriteArchives, func(sp *share.Partition) error {
		p.archived = sp.ReleaseMember(member)
		return nil
	})
}

// run is the owner goroutine: load, then serve operations, lock expiries and the writer's answers
// until stopped. An operation that changes the durable state is applied, noted as owed (writes) and
// handed to the writer with the next record; the owner takes no operation and expires no lock while a
// release is owed or in flight. A write that fails is written again as a snapshot after shareRetry
// while the failure may pass, for up to shareOpWait; past that, or on a failure that will not pass,
// every operation owed is answered with the error and the owner stops: the next operation starts an
// owner that restores the committed state, since an operation applied here cannot be taken back once
// others followed it.
func (p *sharePart) run() {
	defer close(p.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-p.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	sp, err := p.load(ctx)
	if err != nil {
		return
	}
	close(p.loaded)
	in, written, wrote := make(chan shareWrite, 1), make(chan error, 1), make(chan struct{})
	go p.writer(ctx, in, written, wrote)
	stopErr := partition.ErrNotLeader
	defer func() {
		cancel()
		close(in)
		<-wrote
		if p.writes.Flying() {
			// The writer answered the operations of a write it committed.
			if err := <-written; err == nil {
				p.writes.Done(sp, true)
			}
		}
		for _, c := range p.writes.Drop() {
			c <- stopErr
		}
	}()
	var expiry, retry <-chan time.Time
	var armed, failing time.Time
	// The idle check: every p.idle, an owner that did no work since the last check and holds nothing
	// beyond its committed state asks its registry to let it stop (no share session here names its
	// share-partition). One timer per period, not one per operation.
	idle, worked := p.clock.After(p.idle), false
	for {
		ops := p.ops
		if p.writes.Blocked(sp) {
			ops, expiry, armed = nil, nil, time.Time{}
		} else if d := earliest(sp.Deadline(), sp.NextDue(p.clock.Now())); !d.IsZero() && !d.Equal(armed) {
			armed, expiry = d, p.clock.After(max(d.Sub(p.clock.Now()), 0))
		}
		select {
		case <-p.quit:
			return
		case <-idle:
			if !worked && p.idleOwner(sp, retry != nil) && p.retire(p) {
				return
			}
			idle, worked = p.clock.After(p.idle), false
			continue
		case op := <-ops:
			worked = true
			if !p.leads() {
				op.reply <- partition.ErrNotLeader
				return
			}
			if op.writes == opNoWrite {
				op.reply <- op.fn(sp)
				break
			}
			var saved *share.Partition
			if op.writes == opWriteArchives {
				saved = sp.Clone()
			}
			err := op.fn(sp)
			// Only REJECT and RELEASE archive records to report (share.Partition.Acknowledge).
			if err == nil && saved != nil {
				if err = p.copyArchived(ctx); err != nil {
					// Answered with an error: the operation did not happen.
					sp.Rollback(saved)
				}
			}
			p.archived = nil
			if err != nil {
				op.reply <- err
				break
			}
			p.writes.Owe(op.reply)
			p.notify()
		case err := <-written:
			worked = true
			// On success the writer has answered the operations the write carried.
			p.writes.Done(sp, err == nil)
			if err == nil {
				failing = time.Time{}
				p.notify()
				break
			}
			if failing.IsZero() {
				failing = p.clock.Now()
			}
			if errors.Is(err, sharestate.ErrStateReset) || !rewritable(err) || !p.leads() || p.clock.Now().Sub(failing) >= shareOpWait {
				// An admin's reset or delete stops the owner too: the next operation starts an owner
				// that reads the state.
				stopErr = writeFailed(err)
				return
			}
			retry = p.clock.After(shareRetry)
		case <-retry:
			retry = nil
		case <-expiry:
			worked = true
			if !p.leads() {
				return
			}
			armed, expiry = time.Time{}, nil
			saved := sp.Clone()
			p.archived = sp.Expire(p.clock.Now())
			if err := p.copyArchived(ctx); err != nil {
				// The locks expire again once the dead-letter topic may take the copies.
				sp.Rollback(saved)
				armed, expiry = sp.Deadline(), p.clock.After(shareRetry)
			} else {
				p.writes.Owe()
			}
			p.archived = nil
			p.notify()
		}
		if retry == nil {
			p.flush(sp, in)
		}
	}
}

// shareWrite is a record for the writer, with the answers of the operations it carries.
type shareWrite struct {
	rec  share.Record
	done []chan error
}

// flush hands the record owed to the writer when none is in flight, and answers the operations owed
// that changed nothing.
func (p *sharePart) flush(sp *share.Partition, in chan<- shareWrite) {
	r, cs, ok := p.writes.Next(sp)
	if !ok {
		for _, c := range cs {
			c <- nil
		}
		return
	}
	in <- shareWrite{rec: r, done: cs}
}

// writer is the owner's second goroutine: it writes each record the owner hands it (one at a time),
// answers the operations it carries once it is committed, and tells the owner the outcome (written
// has room for it: the owner hands the next record only after it took the outcome). It ends when in
// is closed, and then closes wrote.
func (p *sharePart) writer(ctx context.Context, in <-chan shareWrite, written chan<- error, wrote chan<- struct{}) {
	defer close(wrote)
	for w := range in {
		wctx, cancel := context.WithTimeout(ctx, shareOpWait)
		err := p.store.write(wctx, p.sp, w.rec)
		cancel()
		if err == nil {
			for _, c := range w.done {
				c <- nil
			}
		}
		written <- err
	}
}

// delivery returns the delivery configs of the share-partition's topic as this node resolves them.
func (p *sharePart) delivery() controller.DeliveryConfig {
	img := p.store.meta.Image()
	t, _ := img.TopicByID(p.sp.TopicID)
	return img.DeliveryConfigOn(t, p.store.nodeID)
}

// earliest returns the earlier of two times, zero meaning none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

// leads reports whether the replica is still at the owner's leader epoch: every leader change moves
// the epoch, so an owner whose replica lost the leadership stops at its next operation or lock expiry
// (the new leader restores the share-partition from the coordinator, which refuses this owner's
// writes from then on). A moment without the controller lease does not stop it: the handlers refuse
// requests then (CheckLeader), and the owner keeps its locks for when the lease is back.
func (p *sharePart) leads() bool {
	return p.replica.LeaderEpoch() == p.epoch
}

// load reads the share-partition's state from its coordinator, waiting while the coordinator is not
// ready or an admin's reset came between its read and its write, copies the records the restore
// archived to the dead-letter topic, and writes the snapshot that fences the leaders before this one.
func (p *sharePart) load(ctx context.Context) (*share.Partition, error) {
	for {
		sp, err := p.tryLoad(ctx)
		if err == nil {
			return sp, nil
		}
		if !retriableShareState(err) && !errors.Is(err, sharestate.ErrStateReset) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-p.clock.After(shareRetry):
		}
	}
}

func (p *sharePart) tryLoad(ctx context.Context) (*share.Partition, error) {
	d, err := p.store.read(ctx, p.sp, p.epoch)
	var sp *share.Partition
	write := p.store.write
	// weir.priority.aging.ms is the topic's when the owner loads
	cfg := p.set.cfg
	cfg.PriorityAging = time.Duration(p.delivery().AgingMs) * time.Millisecond
	switch {
	case errors.Is(err, sharestate.ErrNoState):
		// Nothing fenced the older leaders: the first snapshot is written only if none wrote since.
		var start int64
		if start, err = p.startOffset(); err == nil {
			sp, err = share.New(cfg, start, p.epoch)
		}
		write = p.store.create
	case err == nil:
		sp, p.archived, err = share.Restore(cfg, d, p.epoch)
	}
	if err != nil {
		return nil, err
	}
	err = p.copyArchived(ctx)
	p.archived = nil
	if err != nil {
		return nil, err
	}
	if start := p.replica.LogStartOffset(); start > sp.StartOffset() {
		sp.MoveStart(start)
	}
	if r, ok := sp.Persist(); ok {
		if err := write(ctx, p.sp, r); err != nil {
			return nil, err
		}
	}
	return sp, nil
}

// startOffset is where a share-partition without state starts, as share.auto.offset.reset says: the
// log start (earliest), the first batch with a timestamp at most the duration old (by_duration:), or
// the high watermark (latest, and by_duration: when no batch is that recent).
func (p *sharePart) startOffset() (int64, error) {
	if p.set.reset == "earliest" {
		return p.replica.LogStartOffset(), nil
	}
	if d, ok := controller.ShareResetDuration(p.set.reset); ok {
		off, found, err := p.replica.OffsetForTime(p.clock.Now().Add(-d).UnixMilli())
		if err != nil || found {
			return off, err
		}
	}
	return p.replica.HighWatermark(), nil
}

// retriableShareState reports whether a share-state coordinator error may pass with time: the state
// topic being created, its partition elected or loaded here, or state written by another leader
// since this one read none (the load reads it again).
func retriableShareState(err error) bool {
	return errors.Is(err, sharestate.ErrNotCoordinator) || errors.Is(err, sharestate.ErrLoadInProgress) ||
		errors.Is(err, sharestate.ErrCoordinatorNotAvailable) || errors.Is(err, errTopicNotReady) ||
		errors.Is(err, sharestate.ErrStateExists)
}

// writeFailed is the error an operation whose write failed answers: FENCED_LEADER_EPOCH for a deposed
// leader, FENCED_STATE_EPOCH after an admin's reset (the owner then stops), NOT_COORDINATOR, or
// COORDINATOR_NOT_AVAILABLE for the rest (a timeout, a refused record: the client's request was not
// at fault).
func writeFailed(err error) error {
	if errors.Is(err, share.ErrFencedLeaderEpoch) || errors.Is(err, sharestate.ErrNotCoordinator) || errors.Is(err, sharestate.ErrCoordinatorNotAvailable) ||
		errors.Is(err, sharestate.ErrStateReset) {
		return err
	}
	return fmt.Errorf("%w: %v", sharestate.ErrCoordinatorNotAvailable, err)
}

// rewritable reports whether a failed write is written again as a snapshot: a coordinator that may
// become ready, or one that refused an update as not following its state (a snapshot always does),
// but not a fenced leader, which is deposed.
func rewritable(err error) bool {
	return retriableShareState(err) || errors.Is(err, share.ErrStaleRecord) || errors.Is(err, share.ErrCorruptRecord)
}
