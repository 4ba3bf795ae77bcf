package delay

import (
	"context"
	"sync/atomic"
	"time"
)

// Log is one delay partition's log at its leader, and the way to its target topic.
type Log interface {
	// Load returns the last progress written to the partition, or Initial of its log start when
	// there is none.
	Load(ctx context.Context) (Progress, error)
	// Scan reads the committed records from offset from (the log start when from is below it), as
	// many as one read returns, and returns the entries of those at or after from in offset order and
	// the offset after the last batch read (from itself when nothing is readable yet). Control
	// batches and progress records carry no entry.
	Scan(ctx context.Context, from int64) ([]Entry, int64, error)
	// Release copies the records of es, in that order, to the target topic and returns once the
	// copies are committed there.
	Release(ctx context.Context, es []Entry) error
	// Save writes p to the partition and returns once it is committed.
	Save(ctx context.Context, p Progress) error
	// Watch registers ch to receive, without blocking, a value when the partition's records may
	// have moved; stop unregisters it.
	Watch(ch chan<- struct{}) (stop func())
}

// Clock is the time a Releaser releases by.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// Options tune a Releaser; zero fields take the defaults below.
type Options struct {
	// IndexMax is the most entries held in memory (HeapMax).
	IndexMax int
	// ReleaseMax is the most records released in one round before progress is saved
	// (ReleaseRoundMax).
	ReleaseMax int
	// Poll bounds the wait for records before the partition is read again, in case a Watch signal
	// was missed (PollInterval).
	Poll time.Duration
	// Released, when set, is called after each release is committed in the target, with the entries
	// released and the clock's time then: the node's metrics count them and their lateness. It must
	// not keep es nor block.
	Released func(es []Entry, at time.Time)
}

// Stats is what a running Releaser holds, for the node's metrics.
type Stats struct {
	// Held is the number of pending records it holds in memory: its index's (Index.Held, at most
	// IndexMax, so a lower bound of the pending records when more are pending) and those of the
	// round being released. A Run that failed keeps its last Stats.
	Held int
	// NextDue is the due time (Unix milliseconds) of the earliest pending record, 0 when it holds
	// none.
	NextDue int64
}

// Defaults of Options.
const (
	// HeapMax entries of 16 bytes: the index holds at most 1.6 MB per partition.
	HeapMax = 100_000
	// ReleaseRoundMax bounds the records copied between two progress records, and so the records a
	// crash can release twice.
	ReleaseRoundMax = 500
	// PollInterval is the longest a releaser sleeps without reading its partition.
	PollInterval = time.Second
)

// Releaser releases one delay partition's records at their due times. Run drives it; Stats may be
// called from any goroutine.
type Releaser struct {
	log   Log
	clock Clock
	opts  Options
	// held and nextDue are Stats, set by Run after each round.
	held, nextDue atomic.Int64
}

// NewReleaser returns the releaser of the partition behind log.
func NewReleaser(log Log, clock Clock, opts Options) *Releaser {
	if opts.IndexMax == 0 {
		opts.IndexMax = HeapMax
	}
	if opts.ReleaseMax == 0 {
		opts.ReleaseMax = ReleaseRoundMax
	}
	if opts.Poll == 0 {
		opts.Poll = PollInterval
	}
	return &Releaser{log: log, clock: clock, opts: opts}
}

// Stats returns what the releaser held after its last round.
func (r *Releaser) Stats() Stats {
	return Stats{Held: int(r.held.Load()), NextDue: r.nextDue.Load()}
}

// publish sets the Stats: the entries x holds and those of out, a round being released (pending until
// its release is committed; a failed one stays pending for the next Run).
func (r *Releaser) publish(x *Index, out []Entry) {
	n, first, ok := x.Held()
	next := int64(0)
	if ok {
		next = first.Due
	}
	for _, e := range out {
		if next == 0 || e.Due < next {
			next = e.Due
		}
	}
	r.held.Store(int64(n + len(out)))
	r.nextDue.Store(next)
}

// Run loads the last progress, then until ctx ends reads new records, refills the index when it
// runs low, releases what is due (late records first, then in due order) and saves the progress
// after each release. It sleeps until the earliest due time, a new record or the poll interval.
// Any error of the log ends it, with the progress last saved as the place a new Run starts from:
// what was released since is released again (at-least-once).
func (r *Releaser) Run(ctx context.Context) error {
	p, err := r.log.Load(ctx)
	if err != nil {
		return err
	}
	x := NewIndex(r.opts.IndexMax, p)
	wake := make(chan struct{}, 1)
	stop := r.log.Watch(wake)
	defer stop()
	var out []Entry
	for ctx.Err() == nil {
		busy, err := r.step(ctx, x, &out)
		if err != nil {
			return err
		}
		r.publish(x, nil)
		if busy {
			continue
		}
		wait := r.opts.Poll
		if e, ok := x.Peek(); ok {
			wait = min(wait, time.Duration(e.Due-r.clock.Now().UnixMilli())*time.Millisecond)
		}
		select {
		case <-ctx.Done():
		case <-wake:
		case <-r.clock.After(max(wait, time.Millisecond)):
		}
	}
	return ctx.Err()
}

// step does one round: read, refill, release, save. It reports whether there may be more to do at
// once.
func (r *Releaser) step(ctx context.Context, x *Index, out *[]Entry) (bool, error) {
	*out = (*out)[:0]
	from := x.ScanEnd()
	es, next, err := r.log.Scan(ctx, from)
	if err != nil {
		return false, err
	}
	for _, e := range es {
		if x.Add(e) {
			*out = append(*out, e)
		}
	}
	x.Skip(next)
	busy := next > from
	if from, _, ok := x.Refilling(); ok {
		es, next, err := r.log.Scan(ctx, from)
		if err != nil {
			return false, err
		}
		x.Refilled(es, next)
		busy = true
	}
	now := r.clock.Now().UnixMilli()
	for len(*out) < r.opts.ReleaseMax {
		e, ok := x.Peek()
		if !ok || e.Due > now {
			break
		}
		*out = append(*out, x.Pop())
	}
	if len(*out) == 0 {
		return busy, nil
	}
	r.publish(x, *out)
	if err := r.log.Release(ctx, *out); err != nil {
		return false, err
	}
	if r.opts.Released != nil {
		r.opts.Released(*out, r.clock.Now())
	}
	return true, r.log.Save(ctx, x.Progress())
}
