package coordshard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weir-mq/weir/internal/partition"
)

// fakeLog is a led partition of end one-byte "batches", one per offset, whose high watermark the test
// moves.
type fakeLog struct {
	mu      sync.Mutex
	end     int64
	hw      int64
	watcher chan<- struct{}
}

func (l *fakeLog) Read(offset int64, _ int, _ bool) (partition.ReadResult, error) {
	return partition.ReadResult{Records: []byte{byte(offset)}}, nil
}
func (l *fakeLog) LogStartOffset() int64 { return 0 }
func (l *fakeLog) LogEndOffset() int64   { return l.end }
func (l *fakeLog) LeaderEpoch() int32    { return 4 }
func (l *fakeLog) IsLeader() bool        { return true }

func (l *fakeLog) HighWatermark() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hw
}

func (l *fakeLog) Watch(ch chan<- struct{}) func() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.watcher = ch
	return func() {}
}

// setHW moves the high watermark and signals the watcher, as a replica does.
func (l *fakeLog) setHW(hw int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hw = hw
	if l.watcher != nil {
		select {
		case l.watcher <- struct{}{}:
		default:
		}
	}
}

// call submits fn and returns what it reports, or stopped when the owner no longer takes requests.
func call(t *testing.T, o *Owner, fn func() bool) (result, stopped bool) {
	t.Helper()
	ch := make(chan [2]bool, 1)
	if !o.Submit(func(stopped bool) { ch <- [2]bool{!stopped && fn(), stopped} }) {
		return false, true
	}
	select {
	case r := <-ch:
		return r[0], r[1]
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
		return false, false
	}
}

// The owner reads the partition back one chunk at a time, never above the high watermark, answers
// requests meanwhile, and ends the load at the log end it found.
func TestOwnerLoad(t *testing.T) {
	l := &fakeLog{end: 5}
	var loads []byte
	loadedTo := make(chan int64, 1)
	var o *Owner
	o = NewOwner(l, Hooks{
		Load: func(b []byte) (int64, error) {
			loads = append(loads, b...)
			return int64(b[0]) + 1, nil
		},
		Loaded: func(to int64, err error) {
			if err != nil {
				t.Errorf("load error %v", err)
			}
			loadedTo <- to
		},
	})
	if o.Epoch() != 4 || !o.Leads() {
		t.Fatalf("epoch %d, leads %v", o.Epoch(), o.Leads())
	}
	go o.Run()
	defer o.Close()
	if loaded, stopped := call(t, o, o.Loaded); loaded || stopped {
		t.Fatalf("with the high watermark at 0: loaded %v, stopped %v", loaded, stopped)
	}
	l.setHW(3)
	if loaded, _ := call(t, o, o.Loaded); loaded {
		t.Fatal("loaded with the high watermark below the log end")
	}
	l.setHW(5)
	if to := <-loadedTo; to != 5 {
		t.Fatalf("loaded to %d, want 5", to)
	}
	if loaded, _ := call(t, o, func() bool { return o.Loaded() && string(loads) == "\x00\x01\x02\x03\x04" }); !loaded {
		t.Fatalf("after the load: chunks %v", loads)
	}
}

// Close runs Unload, answers queued requests as stopped, completes the writes in flight and waits
// for the helpers, whose completions still run; later requests are refused.
func TestOwnerClose(t *testing.T) {
	l := &fakeLog{}
	var events []string
	var o *Owner
	o = NewOwner(l, Hooks{
		Load:   func([]byte) (int64, error) { return 0, nil },
		Loaded: func(int64, error) {},
		Unload: func() { events = append(events, "unload") },
	})
	go o.Run()
	ready := make(chan struct{})
	if _, stopped := call(t, o, func() bool {
		o.Await(func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }, func(error) {
			events = append(events, "write")
		})
		o.Go(func(ctx context.Context) {
			close(ready)
			<-ctx.Done()
			o.SubmitInternal(func() { events = append(events, "helper") })
		})
		return true
	}); stopped {
		t.Fatal("stopped before Close")
	}
	<-ready
	o.Close()
	if len(events) != 3 || events[0] != "unload" || !slices.Contains(events, "write") {
		t.Fatalf("events %v, want unload, then the write and the helper", events)
	}
	if o.Submit(func(bool) {}) {
		t.Fatal("a request was taken after Close")
	}
}

// Close does not wait on replication: a write whose wait would end only with its context (a replica's
// acks=all wait whose followers have gone to another leader) completes with partition.ErrNotLeader
// and Close returns. The wait once had no end: a shard stopped because the broker's lease lapsed,
// while the image still named it leader, kept the node's image goroutine in Close for good
// (TestNetFaultSplit, the former leader stuck at leader epoch 0). Run in a bubble, a Close that
// waits for ever fails the test as a deadlock.
func TestOwnerCloseEndsWritesInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := NewOwner(&fakeLog{}, Hooks{
			Load:   func([]byte) (int64, error) { return 0, nil },
			Loaded: func(int64, error) {},
		})
		go o.Run()
		var errs []error
		waiting := make(chan struct{})
		if _, stopped := call(t, o, func() bool {
			o.Await(func(ctx context.Context) error {
				close(waiting)
				<-ctx.Done()
				return fmt.Errorf("waiting for the ISR: %w", ctx.Err())
			}, func(err error) { errs = append(errs, err) })
			o.Await(func(context.Context) error { return nil }, func(err error) { errs = append(errs, err) })
			return true
		}); stopped {
			t.Fatal("stopped before Close")
		}
		<-waiting
		o.Close()
		if len(errs) != 2 || !errors.Is(errs[0], partition.ErrNotLeader) || !errors.Is(errs[0], context.Canceled) || errs[1] != nil {
			t.Fatalf("write outcomes %v, want the one in flight failed with ErrNotLeader, the committed one nil", errs)
		}
	})
}

func TestReplication(t *testing.T) {
	cases := []struct {
		want   int16
		live   int
		rf     int16
		minISR int
	}{
		{3, 1, 1, 1}, // the single-node default
		{3, 2, 2, 1},
		{3, 3, 3, 2},
		{3, 5, 3, 2},
		{5, 5, 5, 2},
		{1, 3, 1, 1},
		{3, 0, 1, 1},
	}
	for _, c := range cases {
		rf, minISR := Replication(c.want, c.live)
		if rf != c.rf || minISR != c.minISR {
			t.Errorf("Replication(%d, %d) = %d, %d; want %d, %d", c.want, c.live, rf, minISR, c.rf, c.minISR)
		}
	}
}
