package partition

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-mq/weir/internal/clock"
	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/storage"
)

// Clock is the time source of replication: follower lag in the ISR check and the fetchers' back-off.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// ISRChanger proposes ISR changes to the controller; *controller.Store is one.
type ISRChanger interface {
	AlterPartition(ctx context.Context, req controller.AlterPartition) (*controller.PartitionState, error)
}

// DefaultReplicaLagMax is Kafka's replica.lag.time.max.ms default.
const DefaultReplicaLagMax = 30 * time.Second

// alterTimeout bounds one AlterPartition proposal.
const alterTimeout = 10 * time.Second

// Options are a Replica's collaborators.
type Options struct {
	// Topic and Partition name the replica in logs and errors.
	Topic     string
	Partition int32
	// Logger receives the replica's messages; nil means slog.Default().
	Logger *slog.Logger
	// NodeID is this broker; it matters once the replica follows a controller image (SetState).
	NodeID int32
	// ISR proposes ISR changes; nil means the leader never changes its ISR (a single node).
	ISR ISRChanger
	// Clock is the time source; nil means the wall clock.
	Clock Clock
	// ReplicaLagMax is replica.lag.time.max.ms; 0 means DefaultReplicaLagMax.
	ReplicaLagMax time.Duration
	// Lease, when set, reports whether the broker holds its controller lease and when the lease ends
	// (controller.Store.Lease; a zero end with held true is a lease without end). While the broker does
	// not hold it, the replica does not act as a leader whatever its image says: produce, fetch and
	// OffsetForLeaderEpoch get ErrNotLeader and IsLeader is false, because the controller may already
	// have elected another leader (docs/replication.md, "The isolated leader"). A produce's acks=all
	// append (AppendAcks, AppendTxn) waiting for its ISR when the lease ends gets ErrNotLeader then.
	Lease func() (until time.Time, held bool)
}

// Acks is a produce's acknowledgement level.
type Acks int8

// The acks levels Append knows. acks=0 is AcksLeader whose wait nobody calls.
const (
	// AcksLeader: the wait returns once the leader's append is durable under the log's policy.
	AcksLeader Acks = 1
	// AcksAll: the wait returns once the high watermark covers the batch (every ISR member has it).
	AcksAll Acks = -1
)

// Appended is the outcome of an append.
type Appended struct {
	// BaseOffset and LastOffset are the offsets the batch's first and last records got (for a
	// duplicate, the offsets of the original append).
	BaseOffset int64
	LastOffset int64
	// LogAppendTime is the broker time stamped into the batch (message.timestamp.type=LogAppendTime),
	// or -1 when the batch keeps its create times.
	LogAppendTime int64
	// LogStartOffset is the log start offset after the append.
	LogStartOffset int64
	// Duplicate is set when the batch was a retry of one already appended; nothing was written.
	Duplicate bool
}

// ReadResult is what Read returns.
type ReadResult struct {
	// Records holds whole batches, as stored; empty when nothing is readable at the offset yet.
	Records []byte
	// Section, set only by the Section reads and nil when nothing is readable, holds the batches in
	// the log's file instead of Records; the caller releases it.
	Section *storage.Section
	// HighWatermark, LastStableOffset and LogStartOffset are the replica's offsets at the read.
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
	// Aborted lists, for a committedOnly read that returned records, every aborted transaction whose
	// range overlaps them, in the order of their markers; nil otherwise.
	Aborted []AbortedTxn
}

// role is what the replica does for its partition.
type role uint8

const (
	roleLeader role = iota
	roleFollower
	// roleNone: the image names no leader; the replica serves nothing and fetches nothing.
	roleNone
)

func (r role) String() string {
	switch r {
	case roleLeader:
		return RoleLeader
	case roleFollower:
		return RoleFollower
	default:
		return RoleNone
	}
}

// Replica is one partition replica hosted by this node: the leader of its partition or a follower
// (docs/replication.md). A Replica opened with Open alone is a leader whose ISR is itself, as on a
// single node; SetState makes it follow a controller image.
//
// Its state is a core, changed only by the replica's owner: whichever goroutine holds the owner's turn
// (docs/locks.md). A caller that finds the turn free runs its event itself; one that finds it taken
// queues the event for the holder and waits, and events queued when a holder finishes are run by an
// owner goroutine started for them, which exits once the queue is empty. So an idle replica costs no
// goroutine, and the log is written, truncated and reset by one goroutine at a time with no lock held.
// Readers see the high watermark and a published view of the role without taking the turn.
type Replica struct {
	log    *storage.Log
	topic  string
	part   int32
	logger *slog.Logger
	isrCh  ISRChanger
	clock  Clock
	lease  func() (time.Time, bool)
	ctx    context.Context
	cancel context.CancelFunc
	// workers are the goroutines the owner starts: ISR proposals and the durability follower.
	workers sync.WaitGroup

	hw   atomic.Int64
	view atomic.Pointer[replicaView]
	// leaderHW is the high watermark of the last answer from the leader, while following.
	leaderHW atomic.Int64
	// txn is the transaction state readers see: the last stable offset and the aborted index.
	txn atomic.Pointer[txnView]
	// tracking is set while the durability follower runs.
	tracking atomic.Bool

	// mu guards the turn (busy), the queued events and stopped. It is a leaf, held for a few
	// instructions: events run after it is released.
	mu      sync.Mutex
	busy    bool
	queue   []queued
	spare   []queued
	stopped bool

	// Owned by the turn's holder.
	c     *core
	waits map[uint64]chan error

	watchMu   sync.Mutex
	watchers  map[int]chan<- struct{}
	nextWatch int
}

// replicaView is what readers see of the core, published by the owner after an event changes it.
type replicaView struct {
	closed       bool
	role         role
	epoch        int32
	leader       int32
	needTruncate bool
	fetchFrom    int64
}

// txnView is what readers see of the producer state, published by the owner after an event changes it.
type txnView struct {
	lso int64
	// oldestID and oldestFirst name the oldest open transaction, when hasOpen.
	oldestID    int64
	oldestFirst int64
	hasOpen     bool
	// aborted is a prefix of the producers' aborted index (the owner only appends past it).
	aborted []abortedRange
}

// Open wraps an open log. It rebuilds the producer state from the batch headers in the log and
// starts as the leader at epoch 0 of an ISR holding only itself, with the high watermark at the log's
// durable end offset. The Replica owns log from then on: Close closes it.
func Open(log *storage.Log, opts Options) (*Replica, error) {
	return open(log, opts, -1)
}

// open is Open starting from a checkpointed high watermark (capped at the log end); a negative hw
// means the log's durable end offset.
func open(log *storage.Log, opts Options, hw int64) (*Replica, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	clk := opts.Clock
	if clk == nil {
		clk = clock.System{}
	}
	lagMax := opts.ReplicaLagMax
	if lagMax <= 0 {
		lagMax = DefaultReplicaLagMax
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Replica{
		log:      log,
		topic:    opts.Topic,
		part:     opts.Partition,
		logger:   logger.With("topic", opts.Topic, "partition", opts.Partition),
		isrCh:    opts.ISR,
		clock:    clk,
		lease:    opts.Lease,
		ctx:      ctx,
		cancel:   cancel,
		waits:    map[uint64]chan error{},
		watchers: map[int]chan<- struct{}{},
	}
	durable := min(log.DurableEndOffset(), log.EndOffset())
	if hw < 0 {
		hw = durable
	}
	p, aborted, err := r.rebuildProducers(hw)
	if err == nil {
		err = r.setAborted(aborted)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	r.c = newCore(log, opts.NodeID, lagMax, opts.ISR != nil, p, durable, hw)
	r.hw.Store(r.c.hw)
	r.publish()
	r.publishTxn()
	return r, nil
}

// rebuildProducers reads the producer state, open transactions and the aborted index included, from the
// log's batch headers and its transaction markers, with the high watermark at hw. It also returns every
// aborted transaction the log holds, those the log start has passed included, for the log's transaction
// index.
func (r *Replica) rebuildProducers(hw int64) (*producers, []abortedRange, error) {
	p := newProducers()
	var rerr error
	err := r.log.ScanBatches(r.log.StartOffset(), func(h record.Header) bool {
		var m *record.Marker
		if h.Control() {
			b, err := r.log.Read(h.BaseOffset, h.Size(), h.NextOffset())
			if err != nil {
				rerr = err
				return false
			}
			m = markerOf(h, b)
		}
		p.update(h, m)
		p.settle(hw)
		return true
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return nil, nil, r.errorf("rebuild producer state: %w", err)
	}
	all := p.aborted
	p.evictBefore(r.log.StartOffset())
	return p, all, nil
}

// setAborted gives the log the aborted transactions the open scan found, so that its .txnindex files
// agree with them (storage.Log.SetAborted).
func (r *Replica) setAborted(as []abortedRange) error {
	es := make([]storage.TxnIndexEntry, len(as))
	for i, a := range as {
		es[i] = a.entry()
	}
	if err := r.log.SetAborted(es); err != nil {
		return r.errorf("transaction index: %w", err)
	}
	return nil
}

// errorf wraps an error with the replica's name.
func (r *Replica) errorf(format string, args ...any) error {
	return fmt.Errorf("partition: %s-%d: "+format, append([]any{r.topic, r.part}, args...)...)
}

// do runs event as the owner and returns once it ran, or ErrClosed when the replica stopped first.
func (r *Replica) do(event func()) error {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return ErrClosed
	}
	if !r.busy {
		r.busy = true
		r.mu.Unlock()
		r.step(event)
		r.release()
		return nil
	}
	done := make(chan struct{})
	r.queue = append(r.queue, queued{event: event, done: done})
	r.mu.Unlock()
	<-done
	return nil
}

// queued is an event waiting for the owner's turn, with the channel its caller waits on (nil for a
// posted event), closed once the event's step is over: what the step published (the high watermark,
// the role) is then visible to the caller, as it is to one that ran its event itself.
type queued struct {
	event func()
	done  chan struct{}
}

// post queues event for the owner without waiting for it; it reports false when the replica stopped.
func (r *Replica) post(event func()) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return false
	}
	r.queue = append(r.queue, queued{event: event})
	if !r.busy {
		r.busy = true
		go r.own()
	}
	return true
}

// release gives up the turn, handing it to an owner goroutine when events are queued.
func (r *Replica) release() {
	r.mu.Lock()
	if len(r.queue) == 0 {
		r.busy = false
	} else {
		go r.own()
	}
	r.mu.Unlock()
}

// own runs the queued events until there are none.
func (r *Replica) own() {
	for {
		r.mu.Lock()
		events := r.queue
		if len(events) == 0 {
			r.busy = false
			r.mu.Unlock()
			return
		}
		r.queue, r.spare = r.spare[:0], nil
		r.mu.Unlock()
		for i, q := range events {
			r.step(q.event)
			if q.done != nil {
				close(q.done)
			}
			events[i] = queued{}
		}
		r.mu.Lock()
		r.spare = events[:0]
		r.mu.Unlock()
	}
}

// step runs one event and carries out what the core decided in it.
func (r *Replica) step(event func()) {
	event()
	rd := r.c.takeReady()
	for _, n := range rd.notes {
		r.logger.Log(context.Background(), n.level, n.msg, n.args...)
	}
	if rd.alter != nil {
		r.proposeISR(*rd.alter)
	}
	if rd.hwMoved {
		r.hw.Store(r.c.hw)
	}
	// Readers see the event's high watermark, role and last stable offset before any wait it answers
	// returns: a producer told its batch is committed then finds it below them.
	r.publish()
	lsoMoved := r.publishTxn()
	for _, a := range rd.answered {
		if ch, ok := r.waits[a.id]; ok {
			delete(r.waits, a.id)
			ch <- a.err
		}
	}
	if lsoMoved || rd.hwMoved || rd.wake {
		r.notify()
	}
}

// publishTxn makes the core's last stable offset, oldest open transaction and aborted index visible to
// readers when they changed, and reports whether the last stable offset moved. The compactor cleans
// only below the last stable offset (at most the high watermark): a truncation above it never meets a
// rewritten segment, and no open transaction's records are cleaned.
func (r *Replica) publishTxn() bool {
	p := r.c.producers
	v := txnView{lso: r.c.lso(), aborted: p.aborted}
	v.oldestID, v.oldestFirst, v.hasOpen = p.oldestOpen()
	cur := r.txn.Load()
	if cur != nil && cur.lso == v.lso && cur.oldestID == v.oldestID && cur.oldestFirst == v.oldestFirst &&
		cur.hasOpen == v.hasOpen && sameAborted(cur.aborted, v.aborted) {
		return false
	}
	r.txn.Store(&v)
	if cur == nil || cur.lso != v.lso {
		r.log.SetCleanableEnd(v.lso)
		return true
	}
	return false
}

// sameAborted reports whether a and b are the same slice of the aborted index.
func sameAborted(a, b []abortedRange) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// publish makes the core's role visible to readers when it changed.
func (r *Replica) publish() {
	c := r.c
	v := replicaView{closed: c.closed, role: c.role, epoch: c.epoch, leader: c.leader,
		needTruncate: c.needTruncate, fetchFrom: c.fetchFrom}
	if cur := r.view.Load(); cur == nil || *cur != v {
		r.view.Store(&v)
	}
}

// Append appends one batch as AppendAcks does with AcksAll, for a coordinator: its wait does not end
// with the broker's lease (a coordinator steps down by its own lease check, and a write it waits for
// through a brief lapse still counts once the ISR has it).
func (r *Replica) Append(batch []byte) (Appended, func(ctx context.Context) error, error) {
	c, err := record.Check(batch)
	if err != nil {
		return Appended{}, nil, fmt.Errorf("partition: %w", err)
	}
	return r.appendAcks(c, AcksAll, false)
}

// AppendAcks appends one record batch (magic 2, validated by record.Check) on the leader, after
// checking it against the producer state, and stamps it with the leader epoch. It returns the offsets
// and a wait function for the acks level: AcksLeader waits until the append is durable on this node,
// AcksAll until the high watermark covers it (docs/replication.md, "Produce"). A retry of one of a
// producer's last five batches returns the original offsets with Duplicate set and appends nothing;
// its wait function waits for the original. An AcksAll wait ends with ErrNotLeader when the broker's
// lease does (Options.Lease): the producer is to look for the new leader. Errors: ErrNotLeader,
// ErrNotEnoughReplicas (AcksAll with the ISR below min.insync.replicas, nothing appended),
// producer-state and storage errors.
func (r *Replica) AppendAcks(batch record.Checked, acks Acks) (Appended, func(ctx context.Context) error, error) {
	return r.appendAcks(batch, acks, true)
}

// appendAcks is AppendAcks; produce tells whether the append is a client's produce, whose AcksAll wait
// ends with the broker's lease.
func (r *Replica) appendAcks(batch record.Checked, acks Acks, produce bool) (Appended, func(ctx context.Context) error, error) {
	if err := r.leaseHeld(); err != nil {
		return Appended{}, nil, err
	}
	var (
		a    Appended
		wait func(ctx context.Context) error
		err  error
	)
	if derr := r.do(func() { a, wait, err = r.appendOwned(batch, acks, produce) }); derr != nil {
		return Appended{}, nil, derr
	}
	return a, wait, err
}

// WriteMarker appends m as a transaction marker (a control batch of the producer) on the leader, with
// the wait function of an acks=all append: the marker is taken once the high watermark covers it. A
// TV2 marker must carry an epoch newer than the producer's open transaction here (KIP-1228).
func (r *Replica) WriteMarker(m Marker) (Appended, func(ctx context.Context) error, error) {
	b := record.AppendMarker(nil, m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Commit, r.clock.Now().UnixMilli())
	c, err := record.Check(b)
	if err != nil {
		return Appended{}, nil, r.errorf("%w", err)
	}
	if err := r.leaseHeld(); err != nil {
		return Appended{}, nil, err
	}
	var (
		a    Appended
		wait func(ctx context.Context) error
	)
	rm := record.Marker{Commit: m.Commit, CoordinatorEpoch: m.CoordinatorEpoch}
	if derr := r.do(func() {
		if err = r.c.admitMarker(c.Header, rm, m.TransactionVersion); err != nil {
			err = r.errorf("%w", err)
			return
		}
		r.c.producers.markerWritten(m.ProducerID, m.ProducerEpoch, m.TransactionVersion)
		a, wait, err = r.write(c, AcksAll, false)
	}); derr != nil {
		return Appended{}, nil, derr
	}
	return a, wait, err
}

// AppendCoordinator appends, at acks=all, a batch that a coordinator wrote on a producer's behalf: a
// transaction's offsets in __consumer_offsets, transactional, of the producer's id and epoch and with no
// sequence (-1), as Kafka's group coordinator writes them. Only the producer's epoch is checked.
func (r *Replica) AppendCoordinator(batch []byte) (Appended, func(ctx context.Context) error, error) {
	c, err := record.Check(batch)
	if err != nil {
		return Appended{}, nil, r.errorf("%w", err)
	}
	if err := r.leaseHeld(); err != nil {
		return Appended{}, nil, err
	}
	var (
		a    Appended
		wait func(ctx context.Context) error
	)
	if derr := r.do(func() {
		if err = r.c.admitCoordinator(c.Header); err != nil {
			err = r.errorf("%w", err)
			return
		}
		a, wait, err = r.write(c, AcksAll, false)
	}); derr != nil {
		return Appended{}, nil, derr
	}
	return a, wait, err
}

// appendOwned is AppendAcks on the owner.
func (r *Replica) appendOwned(batch record.Checked, acks Acks, produce bool) (Appended, func(ctx context.Context) error, error) {
	c := r.c
	if batch.Header.Control() {
		m, err := record.ParseMarker(batch.Bytes)
		if err != nil {
			return Appended{}, nil, r.errorf("%w", err)
		}
		if err := c.admitMarker(batch.Header, m, 0); err != nil {
			return Appended{}, nil, r.errorf("%w", err)
		}
		c.producers.markerWritten(batch.Header.ProducerID, batch.Header.ProducerEpoch, 0)
		return r.write(batch, AcksAll, produce)
	}
	dup, err := c.admit(batch.Header, acks)
	if err != nil {
		return Appended{}, nil, r.errorf("%w", err)
	}
	if dup != nil {
		a := Appended{
			BaseOffset: dup.firstOffset, LastOffset: dup.lastOffset, LogAppendTime: -1,
			LogStartOffset: r.log.StartOffset(), Duplicate: true,
		}
		return a, r.waiter(dup.lastOffset+1, acks, produce), nil
	}
	return r.write(batch, acks, produce)
}

// write appends an admitted batch on the owner and returns its offsets and its wait function (see
// waiter for produce).
func (r *Replica) write(batch record.Checked, acks Acks, produce bool) (Appended, func(ctx context.Context) error, error) {
	c := r.c
	res, err := r.log.AppendChecked(batch, c.epoch)
	if err != nil {
		return Appended{}, nil, r.errorf("%w", err)
	}
	h := batch.Header
	h.BaseOffset = res.FirstOffset
	if ab, ok := c.appended(h, markerOf(h, batch.Bytes)); ok {
		if err := r.log.AddAborted(ab.entry()); err != nil {
			return Appended{}, nil, r.errorf("transaction index: %w", err)
		}
	}
	r.trackDurability()
	a := Appended{
		BaseOffset: res.FirstOffset, LastOffset: res.LastOffset, LogAppendTime: res.LogAppendTime,
		LogStartOffset: res.LogStartOffset,
	}
	return a, r.waiter(res.LastOffset+1, acks, produce), nil
}

// waiter returns, on the owner, the wait function of an append that ends at end. With produce, an
// AcksAll wait also ends, with ErrNotLeader, when the broker's lease does.
func (r *Replica) waiter(end int64, acks Acks, produce bool) func(ctx context.Context) error {
	if acks != AcksAll {
		return func(ctx context.Context) error {
			if err := r.log.WaitDurable(ctx, end); err != nil {
				return r.errorf("%w", err)
			}
			// Hand the durable point to the core before answering, rather than leave it to the
			// durability follower: a leader whose ISR is itself then has its high watermark past the
			// batch when the producer hears of it, as Kafka's has, so a ListOffsets or a fetch right
			// after the answer sees it. A replica closed meanwhile still has the batch durable.
			_ = r.do(func() { r.c.durableAt(end) })
			return nil
		}
	}
	id, done, err := r.c.awaitCommit(end, r.c.gen)
	if done {
		if err != nil {
			err = r.errorf("%w", err)
		}
		return func(context.Context) error { return err }
	}
	ch := make(chan error, 1)
	r.waits[id] = ch
	committed := func(err error) error {
		if err != nil {
			return r.errorf("%w", err)
		}
		return nil
	}
	abandon := func(err error) error {
		r.post(func() {
			r.c.forget(id)
			delete(r.waits, id)
		})
		return err
	}
	// A produce's wait also ends when the broker's lease does: a leader cut off from the controller
	// has stepped down and will not see its ISR again before the controller elects another leader, so
	// the producer is told NOT_LEADER_OR_FOLLOWER at once and looks for the new leader rather than
	// waiting out its request's timeout, once per request it has in flight.
	return func(ctx context.Context) error {
		for {
			var lapse <-chan time.Time
			var err error
			if produce {
				lapse, err = r.leaseEnd()
			}
			if err != nil {
				select {
				case cerr := <-ch:
					return committed(cerr)
				default:
				}
				return abandon(r.errorf("waiting for the ISR: %w", err))
			}
			select {
			case cerr := <-ch:
				return committed(cerr)
			case <-ctx.Done():
				return abandon(r.errorf("waiting for the ISR: %w", ctx.Err()))
			case <-lapse:
			}
		}
	}
}

// leaseEnd returns a channel that fires when the broker's lease, as it stands now, ends (nil for a
// replica without a lease to lose), or leaseHeld's error when the broker does not hold it.
func (r *Replica) leaseEnd() (<-chan time.Time, error) {
	if r.lease == nil {
		return nil, nil
	}
	until, held := r.lease()
	if !held {
		return nil, r.leaseHeld()
	}
	if until.IsZero() {
		return nil, nil
	}
	return r.clock.After(until.Sub(r.clock.Now())), nil
}

// trackDurability starts, on the owner, the goroutine that follows the log's durability up to its end
// and hands each durable point to the core, unless it runs. It exits once it has caught up.
func (r *Replica) trackDurability() {
	if r.c.closed || !r.tracking.CompareAndSwap(false, true) {
		return
	}
	r.workers.Add(1)
	go func() {
		defer r.workers.Done()
		for {
			end := r.log.EndOffset()
			if err := r.log.WaitDurable(r.ctx, end); err != nil {
				if r.ctx.Err() == nil {
					r.logger.Error("high watermark stalled", "err", err)
					r.post(func() { r.c.logFailed(err) })
				}
				r.tracking.Store(false)
				return
			}
			if !r.post(func() { r.c.durableAt(end) }) {
				r.tracking.Store(false)
				return
			}
			if r.log.EndOffset() > end {
				continue
			}
			r.tracking.Store(false)
			// An append between the check and the store found the follower running: take it back.
			if r.log.EndOffset() <= end || !r.tracking.CompareAndSwap(false, true) {
				return
			}
		}
	}()
}

// notify wakes every watcher (parked fetches).
func (r *Replica) notify() {
	r.watchMu.Lock()
	for _, ch := range r.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	r.watchMu.Unlock()
}

// Read returns whole batches from offset up to maxBytes (at least one batch if any is readable),
// all below the high watermark (committedOnly: below the last stable offset, with the aborted
// transactions overlapping what it returns in Aborted). An offset at or above that bound but not past
// the log end gives an empty result; one outside [LogStartOffset, LogEndOffset] gives an error wrapping
// storage.ErrOffsetOutOfRange. Read does not check the role: the API layer calls CheckLeader first for
// clients.
func (r *Replica) Read(offset int64, maxBytes int, committedOnly bool) (ReadResult, error) {
	return r.read(offset, maxBytes, committedOnly, false)
}

// ReadSection is Read with the batches left in the log's file: Records stays empty and Section, when
// not nil, holds what Read would have returned, for the caller to send and then release.
func (r *Replica) ReadSection(offset int64, maxBytes int, committedOnly bool) (ReadResult, error) {
	return r.read(offset, maxBytes, committedOnly, true)
}

func (r *Replica) read(offset int64, maxBytes int, committedOnly, pin bool) (ReadResult, error) {
	hw := r.hw.Load()
	tv := r.txn.Load()
	lso := min(tv.lso, hw)
	if !committedOnly {
		return r.readBelow(offset, maxBytes, hw, hw, lso, pin)
	}
	res, err := r.readBelow(offset, maxBytes, lso, hw, lso, pin)
	switch {
	case err != nil:
	case len(res.Records) > 0:
		res.Aborted = abortedIn(tv.aborted, offset, recordsEnd(res.Records))
	case res.Section != nil:
		res.Aborted = abortedIn(tv.aborted, offset, res.Section.NextOffset())
	}
	return res, err
}

// recordsEnd is the offset after the last whole batch in b.
func recordsEnd(b []byte) int64 {
	end := int64(-1)
	for h := range batchMarkers(b) {
		end = h.NextOffset()
	}
	return end
}

// abortedIn returns the aborted transactions of index (in marker order) whose range overlaps [from, to):
// first offset below to, marker at or after from. It stops at the first whose last stable offset is at
// or past to: every transaction aborted after it began at or after that offset.
func abortedIn(index []abortedRange, from, to int64) []AbortedTxn {
	i, _ := slices.BinarySearchFunc(index, from, func(a abortedRange, off int64) int { return cmp.Compare(a.last, off) })
	var out []AbortedTxn
	for _, a := range index[i:] {
		if a.first < to {
			out = append(out, AbortedTxn{ProducerID: a.producerID, FirstOffset: a.first})
		}
		if a.lso >= to {
			break
		}
	}
	return out
}

// readBelow reads from offset up to limit, reporting hw and lso; pin leaves the batches in a
// storage.Section instead of copying them.
func (r *Replica) readBelow(offset int64, maxBytes int, limit, hw, lso int64, pin bool) (ReadResult, error) {
	res := ReadResult{HighWatermark: hw, LastStableOffset: lso, LogStartOffset: r.log.StartOffset()}
	if offset < res.LogStartOffset || offset > r.log.EndOffset() {
		return res, r.errorf("offset %d outside [%d, %d]: %w",
			offset, res.LogStartOffset, r.log.EndOffset(), storage.ErrOffsetOutOfRange)
	}
	if offset >= limit {
		return res, nil
	}
	if pin {
		s, err := r.log.ReadSection(offset, maxBytes, limit)
		if err != nil {
			return res, r.errorf("%w", err)
		}
		res.Section = s
		return res, nil
	}
	b, err := r.log.Read(offset, maxBytes, limit)
	if err != nil {
		return res, r.errorf("%w", err)
	}
	res.Records = b
	return res, nil
}

// Watch registers ch to receive a value (sent without blocking) every time the high watermark
// advances, the leader appends, or the replica's role changes, so a parked fetch can wake up. stop
// unregisters it.
func (r *Replica) Watch(ch chan<- struct{}) (stop func()) {
	r.watchMu.Lock()
	id := r.nextWatch
	r.nextWatch++
	r.watchers[id] = ch
	r.watchMu.Unlock()
	return func() {
		r.watchMu.Lock()
		delete(r.watchers, id)
		r.watchMu.Unlock()
	}
}

// HighWatermark is the offset below which records are readable.
func (r *Replica) HighWatermark() int64 { return r.hw.Load() }

// LastStableOffset is the offset below which read_committed consumers read: the high watermark, or the
// first offset of the oldest open transaction when that is lower.
func (r *Replica) LastStableOffset() int64 { return min(r.txn.Load().lso, r.hw.Load()) }

// OldestOpenTxn returns the producer whose open transaction began first and the offset it began at; ok
// is false when no transaction is open. The gap between the high watermark and that offset is how far
// read_committed consumers lag.
func (r *Replica) OldestOpenTxn() (producerID int64, firstOffset int64, ok bool) {
	v := r.txn.Load()
	return v.oldestID, v.oldestFirst, v.hasOpen
}

// ProducerState is one active producer of a partition as DescribeProducers reports it.
type ProducerState struct {
	ProducerID    int64
	ProducerEpoch int16
	// LastSequence is the sequence of the producer's latest batch at its epoch, -1 when none.
	LastSequence int32
	// LastTimestamp is the max timestamp of the producer's latest batch.
	LastTimestamp int64
	// CoordinatorEpoch is that of the producer's latest marker, -1 when none.
	CoordinatorEpoch int32
	// CurrentTxnStartOffset is the first offset of its open transaction, -1 when none.
	CurrentTxnStartOffset int64
}

// Producers returns the partition's active producers, by producer id.
func (r *Replica) Producers() ([]ProducerState, error) {
	var out []ProducerState
	if err := r.do(func() {
		for id, e := range r.c.producers.m {
			ps := ProducerState{ProducerID: id, ProducerEpoch: e.epoch, LastSequence: -1,
				LastTimestamp: e.lastTimestamp, CoordinatorEpoch: e.coordinatorEpoch,
				CurrentTxnStartOffset: e.txnFirstOffset}
			if n := len(e.batches); n > 0 {
				ps.LastSequence = e.batches[n-1].lastSeq
			}
			out = append(out, ps)
		}
	}); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b ProducerState) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return out, nil
}

// LogStartOffset is the first offset still in the log.
func (r *Replica) LogStartOffset() int64 { return r.log.StartOffset() }

// LogEndOffset is the offset the next appended record gets.
func (r *Replica) LogEndOffset() int64 { return r.log.EndOffset() }

// LeaderEpoch is the partition's leader epoch as this replica knows it (from the image); the leader
// stamps it into appended batches.
func (r *Replica) LeaderEpoch() int32 { return r.view.Load().epoch }

// IsLeader reports whether the replica leads its partition (and the broker holds its lease).
func (r *Replica) IsLeader() bool {
	v := r.view.Load()
	return !v.closed && v.role == roleLeader && r.leaseHeld() == nil
}

// CheckLeader checks a client's view of the partition: its current leader epoch (-1: unchecked)
// against the replica's (ErrFencedLeaderEpoch when older, ErrUnknownLeaderEpoch when newer, as
// KIP-320 asks), then that this replica leads (ErrNotLeader), which it does only while the broker
// holds its lease.
func (r *Replica) CheckLeader(currentEpoch int32) error {
	v := r.view.Load()
	if err := checkLeader(v.closed, v.role, v.epoch, currentEpoch); err != nil {
		return r.errorf("%w", err)
	}
	return r.leaseHeld()
}

// leaseHeld is nil while the broker holds its controller lease, ErrNotLeader otherwise.
func (r *Replica) leaseHeld() error {
	if r.lease == nil {
		return nil
	}
	if _, held := r.lease(); held {
		return nil
	}
	return r.errorf("%w: the broker's controller lease ran out (the controller is unreachable)", ErrNotLeader)
}

// OffsetForTime returns the first readable offset whose batch has a timestamp at or after ts, and
// false when there is none below the high watermark.
func (r *Replica) OffsetForTime(ts int64) (int64, bool, error) {
	hw := r.hw.Load()
	off, ok, err := r.log.OffsetForTime(ts)
	if err != nil {
		return 0, false, r.errorf("%w", err)
	}
	if !ok || off >= hw {
		return 0, false, nil
	}
	return off, true, nil
}

// DeleteRecords moves the log start offset to before (-1: the last stable offset) and returns the new
// log start offset (the low watermark). before must not pass the last stable offset, so an open
// transaction keeps its records (storage.ErrOffsetOutOfRange otherwise); a before below the current
// start changes nothing. Followers follow the leader's log start through their fetches.
func (r *Replica) DeleteRecords(before int64) (int64, error) {
	var err error
	derr := r.do(func() {
		lso := r.c.lso()
		if before == -1 {
			before = lso
		}
		if before < 0 || before > lso {
			err = r.errorf("delete before %d, last stable offset %d (high watermark %d): %w", before, lso, r.c.hw, storage.ErrOffsetOutOfRange)
			return
		}
		if before > r.log.StartOffset() {
			if aerr := r.log.AdvanceStart(before); aerr != nil {
				err = r.errorf("%w", aerr)
				return
			}
		}
		r.c.startMoved()
	})
	if derr != nil {
		return 0, derr
	}
	if err != nil {
		return 0, err
	}
	return r.log.StartOffset(), nil
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch: the largest epoch at or below epoch and the offset
// where it ends; (-1, -1) when unknown. On a leader that has not appended in its own epoch yet, the
// epoch is taken to start at the log end (KIP-279).
func (r *Replica) EndOffsetForEpoch(epoch int32) (int32, int64) {
	v := r.view.Load()
	return endOffsetForEpoch(v.role, v.epoch, r.log, epoch)
}

// SetConfig changes the log's config.
func (r *Replica) SetConfig(cfg storage.Config) error {
	if err := r.log.SetConfig(cfg); err != nil {
		return r.errorf("%w", err)
	}
	return nil
}

// maintain runs the log's periodic work (retention, roll by age, interval syncs) and forgets the
// producers whose batches retention removed.
func (r *Replica) maintain() error {
	start := r.log.StartOffset()
	if err := r.log.Maintain(); err != nil {
		return r.errorf("%w", err)
	}
	if r.log.StartOffset() > start {
		r.post(r.c.startMoved)
	}
	return nil
}

// stop ends the replica's goroutines and reports whether it was still open.
func (r *Replica) stop() bool {
	wasOpen := false
	_ = r.do(func() {
		wasOpen = !r.c.closed
		r.c.close()
		r.mu.Lock()
		r.stopped = true
		r.mu.Unlock()
	})
	r.cancel()
	r.notify()
	r.workers.Wait()
	return wasOpen
}

// Close stops the replica and closes its log (syncing it). Later calls return ErrClosed.
func (r *Replica) Close() error {
	if !r.stop() {
		return ErrClosed
	}
	if err := r.log.Close(); err != nil {
		return r.errorf("%w", err)
	}
	return nil
}

// Delete stops the replica and deletes its log and directory.
func (r *Replica) Delete() error {
	r.stop()
	if err := r.log.Delete(); err != nil {
		return r.errorf("%w", err)
	}
	return nil
}
