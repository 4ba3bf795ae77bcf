package server

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weir-mq/weir/internal/clock"
)

// TestWaitImageLeaseBack: without a metadata change, the reconciler's wait ends when a lapsed lease
// comes back, and not while the lease is held.
func TestWaitImageLeaseBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		changes := make(chan struct{}, 1)
		var held atomic.Bool
		ended := make(chan bool, 1)
		go func() { ended <- waitImage(t.Context(), changes, held.Load, clock.System{}) }()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		select {
		case <-ended:
			t.Fatal("the wait ended while the lease was still lapsed")
		default:
		}
		held.Store(true)
		time.Sleep(leaseRecheck)
		synctest.Wait()
		select {
		case ok := <-ended:
			if !ok {
				t.Fatal("the wait reported its context ended")
			}
		default:
			t.Fatal("the wait did not end when the lease came back")
		}

		ctx, cancel := context.WithCancel(t.Context())
		go func() { ended <- waitImage(ctx, changes, held.Load, clock.System{}) }()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		select {
		case <-ended:
			t.Fatal("the wait ended with the lease held and no change")
		default:
		}
		changes <- struct{}{}
		if ok := <-ended; !ok {
			t.Fatal("a change did not end the wait")
		}
		cancel()
		if waitImage(ctx, changes, held.Load, clock.System{}) {
			t.Fatal("the wait went on past its context")
		}
	})
}
