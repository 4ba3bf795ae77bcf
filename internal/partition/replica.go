package partition

import (
	"context"
	"fmt"
	"log/slog"
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
	// HighWatermark, LastStableOffset and LogStartOffset are the replica's offsets at the read.
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
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
type Replica struct {
	log     *storage.Log
	topic   string
	part    int32
	self    int32
	logger  *slog.Logger
	isrCh   ISRChanger
	clock   Clock
	lagMax  time.Duration
	hw      atomic.Int64
	durable atomic.Int64
	epochA  atomic.Int32
	leading atomic.Bool
	ctx     context.Context
	cancel  context.CancelFunc
	workers sync.WaitGroup

	mu sync.Mutex
	// producers is the idempotent-producer state.
	producers *producers
	// advancing is set while the goroutine that follows the log's durability runs.
	advancing bool
	closed    bool
	// gen grows with every role or epoch change; an acks=all wait completes only in its own gen.
	gen uint64
	// stated is set once SetState ran: until then the replica is Open's single-node leader.
	stated bool
	// The partition state from the image (docs/replication.md, "State each replica keeps").
	role           role
	epoch          int32
	leader         int32
	replicas       []int32
	isr            []int32
	partitionEpoch int32
	minISR         int
	live           map[int32]bool
	// Leader only: followers' progress, the LEO when this epoch began, the ISR change in flight.
	followers  map[int32]*followerProgress
	epochStart int64
	altering   bool
	pendingAdd int32
	// Follower only: set until the OffsetForLeaderEpoch round of this epoch is done; fetchFrom is
	// the fetch offset after a reset past the log end (-1 when the log end is).
	needTruncate bool
	fetchFrom    int64

	watchMu   sync.Mutex
	watchers  map[int]chan<- struct{}
	nextWatch int
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
		log:        log,
		topic:      opts.Topic,
		part:       opts.Partition,
		self:       opts.NodeID,
		logger:     logger.With("topic", opts.Topic, "partition", opts.Partition),
		isrCh:      opts.ISR,
		clock:      clk,
		lagMax:     lagMax,
		ctx:        ctx,
		cancel:     cancel,
		producers:  newProducers(),
		watchers:   map[int]chan<- struct{}{},
		role:       roleLeader,
		leader:     opts.NodeID,
		replicas:   []int32{opts.NodeID},
		isr:        []int32{opts.NodeID},
		minISR:     1,
		followers:  map[int32]*followerProgress{},
		pendingAdd: controller.NoLeader,
		fetchFrom:  -1,
	}
	r.leading.Store(true)
	if err := r.rebuildProducers(); err != nil {
		cancel()
		return nil, err
	}
	durable := min(log.DurableEndOffset(), log.EndOffset())
	r.durable.Store(durable)
	if hw < 0 {
		hw = durable
	}
	hw = min(hw, log.EndOffset())
	r.hw.Store(max(hw, log.StartOffset()))
	log.SetCleanableEnd(r.hw.Load())
	r.epochStart = log.EndOffset()
	return r, nil
}

// rebuildProducers replaces the producer state with one read from the log's batch headers.
func (r *Replica) rebuildProducers() error {
	p := newProducers()
	err := r.log.ScanBatches(r.log.StartOffset(), func(h record.Header) bool {
		p.update(h)
		return true
	})
	if err != nil {
		return fmt.Errorf("partition: %s-%d: rebuild producer state: %w", r.topic, r.part, err)
	}
	p.evictBefore(r.log.StartOffset())
	r.producers = p
	return nil
}

// Append appends one batch as AppendAcks does with AcksAll.
func (r *Replica) Append(batch []byte) (Appended, func(ctx context.Context) error, error) {
	return r.AppendAcks(batch, AcksAll)
}

// AppendAcks appends one record batch (as received, magic 2) on the leader, after checking it
// against the producer state, and stamps it with the leader epoch. It returns the offsets and a
// wait function for the acks level: AcksLeader waits until the append is durable on this node,
// AcksAll until the high watermark covers it (docs/replication.md, "Produce"). A retry of one of a
// producer's last five batches returns the original offsets with Duplicate set and appends nothing;
// its wait function waits for the original. Errors: ErrNotLeader, ErrNotEnoughReplicas (AcksAll with
// the ISR below min.insync.replicas, nothing appended), producer-state and storage errors.
func (r *Replica) AppendAcks(batch []byte, acks Acks) (Appended, func(ctx context.Context) error, error) {
	h, err := record.ParseHeader(batch)
	if err != nil {
		return Appended{}, nil, fmt.Errorf("partition: %w", err)
	}
	if h.Size() != len(batch) {
		return Appended{}, nil, fmt.Errorf("partition: %w: %d bytes hold more than one batch of %d", record.ErrInvalidRecord, len(batch), h.Size())
	}
	if h.LastOffsetDelta < 0 {
		return Appended{}, nil, fmt.Errorf("partition: %w: last offset delta %d", record.ErrInvalidRecord, h.LastOffsetDelta)
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return Appended{}, nil, ErrClosed
	}
	if r.role != roleLeader {
		r.mu.Unlock()
		return Appended{}, nil, fmt.Errorf("%w: %s-%d is a %s at epoch %d", ErrNotLeader, r.topic, r.part, r.role, r.epoch)
	}
	if acks == AcksAll && len(r.isr) < r.minISR {
		r.mu.Unlock()
		return Appended{}, nil, fmt.Errorf("%w: %s-%d ISR %v, min.insync.replicas %d", ErrNotEnoughReplicas, r.topic, r.part, r.isr, r.minISR)
	}
	gen := r.gen
	if h.ProducerID >= 0 && !h.Control() {
		dup, err := r.producers.check(h)
		if err != nil || dup != nil {
			// The log validates what it appends; a batch it will not see is validated here, so a
			// damaged batch is reported as such rather than as a sequence problem or a duplicate.
			if _, verr := record.Validate(batch); verr != nil {
				err, dup = fmt.Errorf("partition: %w", verr), nil
			}
		}
		if err != nil {
			r.mu.Unlock()
			return Appended{}, nil, err
		}
		if dup != nil {
			r.mu.Unlock()
			a := Appended{
				BaseOffset: dup.firstOffset, LastOffset: dup.lastOffset, LogAppendTime: -1,
				LogStartOffset: r.log.StartOffset(), Duplicate: true,
			}
			return a, r.waiter(dup.lastOffset+1, acks, gen), nil
		}
	}
	res, err := r.log.Append(batch, r.epoch)
	if err != nil {
		r.mu.Unlock()
		return Appended{}, nil, fmt.Errorf("partition: %s-%d: %w", r.topic, r.part, err)
	}
	h.BaseOffset = res.FirstOffset
	r.producers.update(h)
	r.startAdvanceLocked()
	r.mu.Unlock()
	// Parked follower fetches read up to the log end: wake them.
	r.notify()
	a := Appended{
		BaseOffset: res.FirstOffset, LastOffset: res.LastOffset, LogAppendTime: res.LogAppendTime,
		LogStartOffset: r.log.StartOffset(),
	}
	return a, r.waiter(res.LastOffset+1, acks, gen), nil
}

// startAdvanceLocked starts the goroutine that follows the log's durability, unless it runs.
// Callers hold mu.
func (r *Replica) startAdvanceLocked() {
	if r.advancing || r.closed {
		return
	}
	r.advancing = true
	r.workers.Add(1)
	go r.advance()
}

// waiter returns the wait function of an append that ends at end, made in generation gen.
func (r *Replica) waiter(end int64, acks Acks, gen uint64) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		if err := r.log.WaitDurable(ctx, end); err != nil {
			return fmt.Errorf("partition: %s-%d: %w", r.topic, r.part, err)
		}
		r.setDurable(end)
		if acks != AcksAll {
			return nil
		}
		// The durable append has usually raised the high watermark already (a single replica, a
		// follower that fetched meanwhile): answer without registering a watch.
		if done, err := r.committed(end, gen); done {
			return err
		}
		ch := make(chan struct{}, 1)
		stop := r.Watch(ch)
		defer stop()
		for {
			if done, err := r.committed(end, gen); done {
				return err
			}
			select {
			case <-ch:
			case <-ctx.Done():
				return fmt.Errorf("partition: %s-%d: waiting for the ISR: %w", r.topic, r.part, ctx.Err())
			case <-r.ctx.Done():
				return ErrClosed
			}
		}
	}
}

// committed reports whether an acks=all wait for end, begun in generation gen, is over, and how.
func (r *Replica) committed(end int64, gen uint64) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed:
		return true, ErrClosed
	case r.gen != gen || r.role != roleLeader:
		return true, fmt.Errorf("%w: %s-%d lost leadership (now %s at epoch %d) before offset %d was committed",
			ErrNotLeader, r.topic, r.part, r.role, r.epoch, end-1)
	case r.hw.Load() < end:
		return false, nil
	case len(r.isr) < r.minISR:
		return true, fmt.Errorf("%w: %s-%d ISR %v, min.insync.replicas %d", ErrNotEnoughReplicasAfterAppend, r.topic, r.part, r.isr, r.minISR)
	}
	return true, nil
}

// advance follows the log's durability up to its end offset and recomputes the high watermark,
// and exits once it has caught up; appends start it again when needed.
func (r *Replica) advance() {
	defer r.workers.Done()
	for {
		r.mu.Lock()
		end := r.log.EndOffset()
		if r.closed || r.durable.Load() >= end {
			r.advancing = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		if err := r.log.WaitDurable(r.ctx, end); err != nil {
			if r.ctx.Err() == nil {
				r.logger.Error("high watermark stalled", "err", err)
			}
			r.mu.Lock()
			r.advancing = false
			r.mu.Unlock()
			return
		}
		r.setDurable(end)
	}
}

// setDurable records that the log is durable below end and moves the high watermark if that lets it.
func (r *Replica) setDurable(end int64) {
	for {
		cur := r.durable.Load()
		if end <= cur || end > r.log.EndOffset() {
			break
		}
		if r.durable.CompareAndSwap(cur, end) {
			break
		}
	}
	r.updateHW()
}

// updateHW recomputes the leader's high watermark (a follower's moves with fetch responses).
func (r *Replica) updateHW() {
	r.mu.Lock()
	if r.role != roleLeader || r.closed {
		r.mu.Unlock()
		return
	}
	hw := r.hwCandidateLocked()
	r.mu.Unlock()
	r.raiseHW(hw)
}

// raiseHW moves the high watermark to end if that is higher and wakes the watchers.
func (r *Replica) raiseHW(end int64) {
	for {
		cur := r.hw.Load()
		if end <= cur {
			return
		}
		if r.hw.CompareAndSwap(cur, end) {
			break
		}
	}
	// The compactor cleans only below the high watermark, so a truncation above it never meets a
	// rewritten segment.
	r.log.SetCleanableEnd(end)
	r.notify()
}

// notify wakes every watcher (parked fetches, acks=all waits).
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
// all below the high watermark (committedOnly: below the last stable offset, the same today). An
// offset at or above the high watermark but not past the log end gives an empty result; one outside
// [LogStartOffset, LogEndOffset] gives an error wrapping storage.ErrOffsetOutOfRange. Read does not
// check the role: the API layer calls CheckLeader first for clients.
func (r *Replica) Read(offset int64, maxBytes int, committedOnly bool) (ReadResult, error) {
	hw := r.hw.Load()
	return r.readBelow(offset, maxBytes, hw, hw)
}

// readBelow reads from offset up to limit, reporting hw.
func (r *Replica) readBelow(offset int64, maxBytes int, limit, hw int64) (ReadResult, error) {
	res := ReadResult{HighWatermark: hw, LastStableOffset: hw, LogStartOffset: r.log.StartOffset()}
	if offset < res.LogStartOffset || offset > r.log.EndOffset() {
		return res, fmt.Errorf("partition: %s-%d: offset %d outside [%d, %d]: %w",
			r.topic, r.part, offset, res.LogStartOffset, r.log.EndOffset(), storage.ErrOffsetOutOfRange)
	}
	if offset >= limit {
		return res, nil
	}
	b, err := r.log.Read(offset, maxBytes, limit)
	if err != nil {
		return res, fmt.Errorf("partition: %s-%d: %w", r.topic, r.part, err)
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

// LastStableOffset is the offset below which read_committed consumers read; the high watermark until
// transactions exist.
func (r *Replica) LastStableOffset() int64 { return r.hw.Load() }

// LogStartOffset is the first offset still in the log.
func (r *Replica) LogStartOffset() int64 { return r.log.StartOffset() }

// LogEndOffset is the offset the next appended record gets.
func (r *Replica) LogEndOffset() int64 { return r.log.EndOffset() }

// LeaderEpoch is the partition's leader epoch as this replica knows it (from the image); the leader
// stamps it into appended batches.
func (r *Replica) LeaderEpoch() int32 { return r.epochA.Load() }

// IsLeader reports whether the replica leads its partition.
func (r *Replica) IsLeader() bool { return r.leading.Load() }

// CheckLeader checks a client's view of the partition: its current leader epoch (-1: unchecked)
// against the replica's (ErrFencedLeaderEpoch when older, ErrUnknownLeaderEpoch when newer, as
// KIP-320 asks), then that this replica leads (ErrNotLeader).
func (r *Replica) CheckLeader(currentEpoch int32) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.checkLeaderLocked(currentEpoch)
}

func (r *Replica) checkLeaderLocked(currentEpoch int32) error {
	switch {
	case r.closed:
		return ErrClosed
	case currentEpoch >= 0 && currentEpoch < r.epoch:
		return fmt.Errorf("%w: %d, %s-%d is at %d", ErrFencedLeaderEpoch, currentEpoch, r.topic, r.part, r.epoch)
	case currentEpoch > r.epoch:
		return fmt.Errorf("%w: %d, %s-%d is at %d", ErrUnknownLeaderEpoch, currentEpoch, r.topic, r.part, r.epoch)
	case r.role != roleLeader:
		return fmt.Errorf("%w: %s-%d is a %s at epoch %d", ErrNotLeader, r.topic, r.part, r.role, r.epoch)
	}
	return nil
}

// OffsetForTime returns the first readable offset whose batch has a timestamp at or after ts, and
// false when there is none below the high watermark.
func (r *Replica) OffsetForTime(ts int64) (int64, bool, error) {
	hw := r.hw.Load()
	off, ok, err := r.log.OffsetForTime(ts)
	if err != nil {
		return 0, false, fmt.Errorf("partition: %s-%d: %w", r.topic, r.part, err)
	}
	if !ok || off >= hw {
		return 0, false, nil
	}
	return off, true, nil
}

// DeleteRecords moves the log start offset to before (-1: the high watermark) and returns the new
// log start offset (the low watermark). before must not pass the high watermark
// (storage.ErrOffsetOutOfRange otherwise); a before below the current start changes nothing.
// Followers follow the leader's log start through their fetches.
func (r *Replica) DeleteRecords(before int64) (int64, error) {
	hw := r.hw.Load()
	if before == -1 {
		before = hw
	}
	if before < 0 || before > hw {
		return 0, fmt.Errorf("partition: %s-%d: delete before %d, high watermark %d: %w",
			r.topic, r.part, before, hw, storage.ErrOffsetOutOfRange)
	}
	if before > r.log.StartOffset() {
		if err := r.log.AdvanceStart(before); err != nil {
			return 0, fmt.Errorf("partition: %s-%d: %w", r.topic, r.part, err)
		}
	}
	r.dropProducersBelowStart()
	return r.log.StartOffset(), nil
}

func (r *Replica) dropProducersBelowStart() {
	r.mu.Lock()
	r.producers.evictBefore(r.log.StartOffset())
	r.mu.Unlock()
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch: the largest epoch at or below epoch and the offset
// where it ends; (-1, -1) when unknown. On a leader that has not appended in its own epoch yet, the
// epoch is taken to start at the log end (KIP-279).
func (r *Replica) EndOffsetForEpoch(epoch int32) (int32, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.endOffsetForEpochLocked(epoch)
}

func (r *Replica) endOffsetForEpochLocked(epoch int32) (int32, int64) {
	if r.role == roleLeader {
		if epoch > r.epoch {
			return -1, -1
		}
		if latest := r.log.LatestEpoch(); latest < r.epoch && epoch > latest {
			// Nothing appended in this epoch yet: it starts at the log end, where the latest ends.
			switch {
			case epoch == r.epoch:
				return r.epoch, r.log.EndOffset()
			case latest >= 0:
				return latest, r.log.EndOffset()
			}
			return -1, -1
		}
	}
	return r.log.EndOffsetForEpoch(epoch)
}

// SetConfig changes the log's config.
func (r *Replica) SetConfig(cfg storage.Config) error {
	if err := r.log.SetConfig(cfg); err != nil {
		return fmt.Errorf("partition: %s-%d: %w", r.topic, r.part, err)
	}
	return nil
}

// maintain runs the log's periodic work (retention, roll by age, interval syncs) and forgets the
// producers whose batches retention removed.
func (r *Replica) maintain() error {
	if err := r.log.Maintain(); err != nil {
		return fmt.Errorf("partition: %s-%d: %w", r.topic, r.part, err)
	}
	r.dropProducersBelowStart()
	return nil
}

// stop ends the replica's goroutines and reports whether it was still open.
func (r *Replica) stop() bool {
	r.mu.Lock()
	wasOpen := !r.closed
	r.closed = true
	r.gen++
	r.leading.Store(false)
	r.mu.Unlock()
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
		return fmt.Errorf("partition: %s-%d: %w", r.topic, r.part, err)
	}
	return nil
}

// Delete stops the replica and deletes its log and directory.
func (r *Replica) Delete() error {
	r.stop()
	if err := r.log.Delete(); err != nil {
		return fmt.Errorf("partition: %s-%d: %w", r.topic, r.part, err)
	}
	return nil
}
