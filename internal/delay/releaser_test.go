package delay

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// memLog is a delay partition in memory: a record's entry, or a progress record, at each offset, as
// the replica's log holds them. Release fails once, at the call failAt, releasing nothing.
type memLog struct {
	mu        sync.Mutex
	log       []memRecord
	published []int64 // when each offset was appended, Unix ms
	released  []released
	calls     int
	failAt    int
	watch     chan<- struct{}
}

// memRecord is one offset of a memLog: an entry, or a progress record.
type memRecord struct {
	e        Entry
	progress *Progress
}

type released struct {
	e  Entry
	at int64
}

var errInjected = errors.New("injected release failure")

func (l *memLog) Load(context.Context) (Progress, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.log) - 1; i >= 0; i-- {
		if p := l.log[i].progress; p != nil {
			return *p, nil
		}
	}
	return Initial(0), nil
}

func (l *memLog) Scan(_ context.Context, from int64) ([]Entry, int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	to := min(int64(len(l.log)), from+3)
	var out []Entry
	for off := from; off < to; off++ {
		if l.log[off].progress == nil {
			out = append(out, l.log[off].e)
		}
	}
	return out, max(from, to), nil
}

func (l *memLog) Release(_ context.Context, es []Entry) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if l.calls == l.failAt {
		return errInjected
	}
	for _, e := range es {
		l.released = append(l.released, released{e: e, at: time.Now().UnixMilli()})
	}
	return nil
}

func (l *memLog) Save(_ context.Context, p Progress) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.log = append(l.log, memRecord{progress: &p})
	l.published = append(l.published, time.Now().UnixMilli())
	return nil
}

func (l *memLog) Watch(ch chan<- struct{}) func() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.watch = ch
	return func() {}
}

// append publishes records due at dues, waking the releaser.
func (l *memLog) append(dues []int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range dues {
		l.log = append(l.log, memRecord{e: Entry{Due: d, Offset: int64(len(l.log))}})
		l.published = append(l.published, time.Now().UnixMilli())
	}
	if l.watch != nil {
		select {
		case l.watch <- struct{}{}:
		default:
		}
	}
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// TestDelayReleaserOnTime runs a Releaser in a synctest bubble (the bubble's time, so exact) over
// 60 records published in two waves 2 s apart, due from 0.5 s before to 5 s after their publication
// in random order, through a heap of 8 and rounds of 4, with the third release failing (nothing of
// it released): the releaser is started again from its last progress, as DelayReleasers does. Every
// record is released at its due time to the millisecond, a late one when it is published, none
// before, each exactly once.
func TestDelayReleaserOnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 4))
		l := &memLog{failAt: 3}
		wave := func() []int64 {
			var dues []int64
			for range 30 {
				dues = append(dues, time.Now().UnixMilli()-500+int64(rng.IntN(5500)))
			}
			return dues
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		restarts := 0
		go func() {
			defer close(done)
			for {
				err := NewReleaser(l, realClock{}, Options{IndexMax: 8, ReleaseMax: 4}).Run(ctx)
				if ctx.Err() != nil {
					return
				}
				if !errors.Is(err, errInjected) {
					t.Errorf("run: %v", err)
					return
				}
				restarts++
			}
		}()
		l.append(wave())
		time.Sleep(2 * time.Second)
		l.append(wave())
		time.Sleep(10 * time.Second)
		cancel()
		<-done

		l.mu.Lock()
		defer l.mu.Unlock()
		if restarts != 1 {
			t.Fatalf("%d restarts after one injected failure", restarts)
		}
		count := map[int64]int{}
		for _, r := range l.released {
			count[r.e.Offset]++
			if want := max(r.e.Due, l.published[r.e.Offset]); r.at < r.e.Due || r.at > want+1 {
				t.Errorf("offset %d due %d, published %d, released at %d", r.e.Offset, r.e.Due, l.published[r.e.Offset], r.at)
			}
		}
		for off, r := range l.log {
			if r.progress == nil && count[int64(off)] != 1 {
				t.Errorf("offset %d released %d times", off, count[int64(off)])
			}
		}
	})
}

// TestDelayReleaserStats: a Releaser's Stats report the pending records its index holds (at most
// IndexMax) and the earliest due time among them, and Released sees every record once, after its
// release, at its due time; once all are released it holds none.
func TestDelayReleaserStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &memLog{}
		var mu sync.Mutex
		late := map[int64]int64{}
		r := NewReleaser(l, realClock{}, Options{IndexMax: 8, ReleaseMax: 4, Released: func(es []Entry, at time.Time) {
			mu.Lock()
			defer mu.Unlock()
			for _, e := range es {
				late[e.Offset] = at.UnixMilli() - e.Due
			}
		}})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = r.Run(ctx)
		}()
		start := time.Now().UnixMilli()
		var dues []int64
		for i := range 20 {
			dues = append(dues, start+int64(1000+100*(19-i)))
		}
		l.append(dues)
		time.Sleep(100 * time.Millisecond)
		if s := r.Stats(); s.Held == 0 || s.Held > 8 || s.NextDue != start+1000 {
			t.Fatalf("before any is due: %+v, want 1 to 8 held, the next due at %d", s, start+1000)
		}
		time.Sleep(5 * time.Second)
		cancel()
		<-done
		if s := r.Stats(); s != (Stats{}) {
			t.Fatalf("after every record was released: %+v, want none held", s)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(late) != len(dues) {
			t.Fatalf("Released saw %d records, want %d", len(late), len(dues))
		}
		for off, ms := range late {
			if ms != 0 {
				t.Errorf("offset %d released %d ms after its due time", off, ms)
			}
		}
	})
}
