// Package coordshard is the machinery the group and transaction coordinators share: an internal,
// compacted topic created on first use (Topic), and for every partition of it that this node leads one
// owner goroutine (Owner) that reads the partition back and then runs the coordinator's work in order.
// The coordinators keep their state machines, records and requests; this package knows none of them.
//
// An Owner is embedded in a coordinator's shard. Requests reach it as messages (Submit) and run one at
// a time on the owner goroutine; writes are appended by the owner, and a second goroutine waits for each
// to be committed, in write order, and hands the outcome back as a message (Await). Helper goroutines
// (Go) hand their outcomes back the same way. No lock is held while a message runs.
package coordshard

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/storage"
)

// loadReadBytes is how much of the partition one load step reads.
const loadReadBytes = 1 << 20

// Log is one partition of an internal topic as an Owner reads it; *partition.Replica is one.
type Log interface {
	Read(offset int64, maxBytes int, committedOnly bool) (partition.ReadResult, error)
	LogStartOffset() int64
	LogEndOffset() int64
	HighWatermark() int64
	LeaderEpoch() int32
	IsLeader() bool
	// Watch signals ch (without blocking) when the high watermark moves or the role changes.
	Watch(ch chan<- struct{}) (stop func())
}

// Hooks are the coordinator's part of an Owner. Each runs on the owner goroutine.
type Hooks struct {
	// Load applies batches (whole batches, as read from the log) to what the load rebuilds and returns
	// the offset after the last one; an error stops the load there.
	Load func(batches []byte) (next int64, err error)
	// Loaded ends the load: the partition is read up to offset to, and err is the error that stopped
	// the load early, else nil. The owner serves requests once it returns.
	Loaded func(to int64, err error)
	// Timer runs when the timer set with SetTimer fires; the timer is cleared first.
	Timer func()
	// Unload, when set, runs first when the owner stops, while requests can still be answered.
	Unload func()
}

// Owner is the owner goroutine of one led partition of an internal topic (Run). It first reads the
// partition back from its start up to the log end offset the new leader has, waiting until the high
// watermark covers that end (so that it serves only committed data, never a tail another replica may not
// have), then runs the messages submitted to it in order and fires its timer.
type Owner struct {
	log   Log
	epoch int32
	hooks Hooks

	// mu guards the inbox; it is never held while a message runs.
	mu     sync.Mutex
	inbox  []message
	closed bool
	wake   chan struct{}
	quit   chan struct{}
	done   chan struct{}

	// wmu guards the writes waiting to be committed.
	wmu     sync.Mutex
	writes  []pendingWrite
	wclosed bool
	wwake   chan struct{}
	wdone   chan struct{}

	// stopCtx ends, when the owner stops, the helper goroutines (helpers waits for them) and the waits
	// of the writes in flight.
	stopCtx    context.Context
	stopCancel context.CancelFunc
	helpers    sync.WaitGroup

	// Owned by Run.
	loaded     bool
	loadOffset int64
	loadEnd    int64
	timer      <-chan time.Time
}

// message is one unit of work for the owner. stopped tells a request that the owner no longer
// coordinates; internal messages (write and helper completions) always run as if not stopped.
type message struct {
	fn       func(stopped bool)
	internal bool
}

type pendingWrite struct {
	wait func(context.Context) error
	done func(error)
}

// NewOwner returns the owner of l, which leads its partition now: the owner serves for l's current
// leader epoch only (see Leads). Run starts it.
func NewOwner(l Log, h Hooks) *Owner {
	ctx, cancel := context.WithCancel(context.Background())
	return &Owner{
		log: l, epoch: l.LeaderEpoch(), hooks: h,
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
		wwake: make(chan struct{}, 1), wdone: make(chan struct{}),
		stopCtx: ctx, stopCancel: cancel,
		loadOffset: -1,
	}
}

// owner makes every type that embeds *Owner a Shard.
func (o *Owner) owner() *Owner { return o }

// Epoch is the leader epoch the owner was started for: the coordinator epoch of its partition.
func (o *Owner) Epoch() int32 { return o.epoch }

// Leads reports whether the replica still leads in the epoch the owner was started for; requests are
// served only then (the image that moves leadership away stops the owner soon after).
func (o *Owner) Leads() bool {
	return o.log.IsLeader() && o.log.LeaderEpoch() == o.epoch
}

// Loaded reports whether the load has ended. Only messages and hooks may call it.
func (o *Owner) Loaded() bool { return o.loaded }

// Submit queues a request; false once the owner no longer takes requests. fn runs on the owner with
// stopped set when the owner stopped before it ran.
func (o *Owner) Submit(fn func(stopped bool)) bool {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return false
	}
	o.inbox = append(o.inbox, message{fn: fn})
	o.mu.Unlock()
	o.signal()
	return true
}

// SubmitInternal queues a completion; the owner runs these until it has stopped.
func (o *Owner) SubmitInternal(fn func()) {
	o.mu.Lock()
	o.inbox = append(o.inbox, message{fn: func(bool) { fn() }, internal: true})
	o.mu.Unlock()
	o.signal()
}

func (o *Owner) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// Close stops the owner and waits for it: Hooks.Unload runs, queued requests are answered as stopped,
// writes in flight are completed and helper goroutines have ended. Close never waits on replication:
// the waits of the writes in flight end with the owner, and a write not committed by then completes
// with partition.ErrNotLeader (the write may still commit; the next owner reads it back). Its caller
// is the node's image goroutine (Topic.Reconcile), and a write that only a later image could end (a
// shard stopped because the broker lost its lease, while the image still names this node leader and
// its followers have gone to another) would otherwise stop every later image from reaching the node.
func (o *Owner) Close() {
	close(o.quit)
	<-o.done
}

// SetTimer makes the owner run Hooks.Timer when ch fires, in place of any timer set before; nil clears
// it. Only messages and hooks may call it.
func (o *Owner) SetTimer(ch <-chan time.Time) { o.timer = ch }

// Await hands a write's wait function to the waiter goroutine, which calls done on the owner once the
// write is committed or failed; writes complete in the order they were awaited. The context wait is
// given ends when the owner stops (see Close).
func (o *Owner) Await(wait func(context.Context) error, done func(error)) {
	o.wmu.Lock()
	o.writes = append(o.writes, pendingWrite{wait: wait, done: done})
	o.wmu.Unlock()
	select {
	case o.wwake <- struct{}{}:
	default:
	}
}

// Go runs fn in a helper goroutine. fn's ctx ends when the owner stops, and the owner waits for fn to
// return before it runs its last messages, so a completion fn submits with SubmitInternal still runs.
func (o *Owner) Go(fn func(ctx context.Context)) {
	o.helpers.Add(1)
	go func() {
		defer o.helpers.Done()
		fn(o.stopCtx)
	}()
}

// Run is the owner goroutine: it loads the partition, then serves until Close.
func (o *Owner) Run() {
	defer close(o.done)
	go o.waiter()
	hwMoved := make(chan struct{}, 1)
	stopWatch := o.log.Watch(hwMoved)
	for !o.loaded {
		select {
		case <-o.quit:
			stopWatch()
			o.stop()
			return
		default:
		}
		if o.loadStep() {
			o.drain(false)
			continue
		}
		// The high watermark is below what is left to load: answer the requests meanwhile and wait.
		select {
		case <-hwMoved:
		case <-o.wake:
			o.drain(false)
		case <-o.quit:
			stopWatch()
			o.stop()
			return
		}
	}
	stopWatch()
	for {
		select {
		case <-o.wake:
			o.drain(false)
		case <-o.timer:
			o.timer = nil
			o.hooks.Timer()
		case <-o.quit:
			o.stop()
			return
		}
	}
}

// drain runs every queued message.
func (o *Owner) drain(stopped bool) {
	o.mu.Lock()
	msgs := o.inbox
	o.inbox = nil
	o.mu.Unlock()
	for _, m := range msgs {
		m.fn(stopped && !m.internal)
	}
}

// stop unloads, ends the helpers and the waits of the writes in flight, answers the queued requests as
// stopped and finishes the writes.
func (o *Owner) stop() {
	if o.hooks.Unload != nil {
		o.hooks.Unload()
	}
	o.stopCancel()
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.wmu.Lock()
	o.wclosed = true
	o.wmu.Unlock()
	select {
	case o.wwake <- struct{}{}:
	default:
	}
	for {
		select {
		case <-o.wake:
			o.drain(true)
		case <-o.wdone:
			o.helpers.Wait()
			o.drain(true)
			return
		}
	}
}

// waiter waits for each write to be committed, in write order, and hands the outcome to the owner;
// once the owner stops, a write not committed yet fails with partition.ErrNotLeader.
func (o *Owner) waiter() {
	defer close(o.wdone)
	for {
		o.wmu.Lock()
		ws := o.writes
		o.writes = nil
		closed := o.wclosed
		o.wmu.Unlock()
		for _, w := range ws {
			err := w.wait(o.stopCtx)
			if err != nil && o.stopCtx.Err() != nil && errors.Is(err, context.Canceled) {
				err = fmt.Errorf("%w: coordshard: the owner stopped before the write was committed: %w", partition.ErrNotLeader, err)
			}
			done := w.done
			o.SubmitInternal(func() { done(err) })
		}
		if len(ws) > 0 {
			continue
		}
		if closed {
			return
		}
		<-o.wwake
	}
}

// loadStep reads the next chunk of the partition, from its start up to the log end offset it had when
// the load began; once the high watermark covers that end, Hooks.Loaded ends the load. It reports false,
// having read nothing, when the next chunk is still above the high watermark.
func (o *Owner) loadStep() bool {
	if o.loadOffset < 0 {
		o.loadOffset = o.log.LogStartOffset()
		o.loadEnd = o.log.LogEndOffset()
	}
	var err error
	if o.loadOffset < o.loadEnd {
		if o.loadOffset >= o.log.HighWatermark() {
			return false
		}
		var res partition.ReadResult
		res, err = o.log.Read(o.loadOffset, loadReadBytes, false)
		if errors.Is(err, storage.ErrOffsetOutOfRange) && o.loadOffset < o.log.LogStartOffset() {
			o.loadOffset = o.log.LogStartOffset()
			return true
		}
		if err == nil && len(res.Records) > 0 {
			var next int64
			next, err = o.hooks.Load(res.Records)
			if next > o.loadOffset {
				o.loadOffset = next
			}
			if err == nil {
				return true
			}
		}
	}
	o.loaded = true
	o.hooks.Loaded(o.loadOffset, err)
	return true
}
