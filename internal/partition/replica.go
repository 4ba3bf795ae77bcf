package partition

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/storage"
)

// Options are a Replica's collaborators.
type Options struct {
	// Topic and Partition name the replica in logs and errors.
	Topic     string
	Partition int32
	// Logger receives the replica's messages; nil means slog.Default().
	Logger *slog.Logger
}

// Appended is the outcome of an append.
type Appended struct {
	// BaseOffset and LastOffset are the offsets the batch's first and last records got (for a
	// duplicate, the offsets of the original append).
	BaseOffset int64
	LastOffset int64
	// LogAppendTime is the broker time stamped into the batch, or -1 when the batch keeps its
	// create times (always -1 today).
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

// Replica is one partition replica hosted by this node; today always the leader.
type Replica struct {
	log     *storage.Log
	topic   string
	part    int32
	logger  *slog.Logger
	epoch   int32
	hw      atomic.Int64
	ctx     context.Context
	cancel  context.CancelFunc
	workers sync.WaitGroup

	mu sync.Mutex
	// producers is the idempotent-producer state.
	producers *producers
	// advancing is set while the goroutine that moves the high watermark for unwaited appends runs.
	advancing bool
	closed    bool

	watchMu   sync.Mutex
	watchers  map[int]chan<- struct{}
	nextWatch int
}

// Open wraps an open log. It rebuilds the producer state from the batch headers in the log and
// starts with the high watermark at the log's durable end offset. The Replica owns log from then on:
// Close closes it.
func Open(log *storage.Log, opts Options) (*Replica, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Replica{
		log:       log,
		topic:     opts.Topic,
		part:      opts.Partition,
		logger:    logger.With("topic", opts.Topic, "partition", opts.Partition),
		ctx:       ctx,
		cancel:    cancel,
		producers: newProducers(),
		watchers:  map[int]chan<- struct{}{},
	}
	err := log.ScanBatches(log.StartOffset(), func(h record.Header) bool {
		r.producers.update(h)
		return true
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("partition: %s-%d: rebuild producer state: %w", opts.Topic, opts.Partition, err)
	}
	r.producers.evictBefore(log.StartOffset())
	r.hw.Store(min(log.DurableEndOffset(), log.EndOffset()))
	log.SetCleanableEnd(r.hw.Load())
	return r, nil
}

// Append appends one record batch (as received, magic 2) after checking it against the producer
// state. It returns the offsets and a wait function that blocks until the batch is durable under the
// log's flush policy and below the high watermark (acks=-1 and acks=1 on one node call it; acks=0
// does not). A retry of one of a producer's last five batches returns the original offsets with
// Duplicate set and appends nothing; its wait function waits for the original.
func (r *Replica) Append(batch []byte) (Appended, func(ctx context.Context) error, error) {
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
			return a, r.waiter(dup.lastOffset + 1), nil
		}
	}
	res, err := r.log.Append(batch, r.epoch)
	if err != nil {
		r.mu.Unlock()
		return Appended{}, nil, fmt.Errorf("partition: %s-%d: %w", r.topic, r.part, err)
	}
	h.BaseOffset = res.FirstOffset
	r.producers.update(h)
	if !r.advancing {
		r.advancing = true
		r.workers.Add(1)
		go r.advance()
	}
	r.mu.Unlock()
	a := Appended{
		BaseOffset: res.FirstOffset, LastOffset: res.LastOffset, LogAppendTime: -1,
		LogStartOffset: r.log.StartOffset(),
	}
	return a, r.waiter(res.LastOffset + 1), nil
}

// waiter returns a function that waits until the log is durable up to end and the high watermark
// covers it.
func (r *Replica) waiter(end int64) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		if r.hw.Load() >= end {
			return nil
		}
		if err := r.log.WaitDurable(ctx, end); err != nil {
			return fmt.Errorf("partition: %s-%d: %w", r.topic, r.part, err)
		}
		r.raiseHW(end)
		return nil
	}
}

// advance moves the high watermark up to the log end offset for appends nobody waits on (acks 0 and
// 1), and exits once it has caught up; Append starts it again when needed.
func (r *Replica) advance() {
	defer r.workers.Done()
	for {
		r.mu.Lock()
		end := r.log.EndOffset()
		if r.closed || r.hw.Load() >= end {
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
		r.raiseHW(end)
	}
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
// [LogStartOffset, LogEndOffset] gives an error wrapping storage.ErrOffsetOutOfRange.
func (r *Replica) Read(offset int64, maxBytes int, committedOnly bool) (ReadResult, error) {
	hw := r.hw.Load()
	res := ReadResult{HighWatermark: hw, LastStableOffset: hw, LogStartOffset: r.log.StartOffset()}
	limit := hw
	if committedOnly {
		limit = res.LastStableOffset
	}
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
// advances, so a parked fetch can wake up. stop unregisters it.
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

// LeaderEpoch is the epoch the replica stamps into appended batches; 0 on a single node.
func (r *Replica) LeaderEpoch() int32 { return r.epoch }

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

// EndOffsetForEpoch answers OffsetForLeaderEpoch: the largest epoch at or below epoch and the end
// offset of that epoch.
func (r *Replica) EndOffsetForEpoch(epoch int32) (int32, int64) {
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
	r.mu.Unlock()
	r.cancel()
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
