package wire

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestWireShutdownIsBounded: whatever a connection is doing when the drain deadline passes (a Reply
// or a Handle call that ignores its cancelled context, a client that never reads its responses),
// Shutdown returns within abortWait of the deadline, and so does Serve. Without the bound, the first
// two cases wait until the handler gives up, which here is never.
func TestWireShutdownIsBounded(t *testing.T) {
	const drain = 100 * time.Millisecond
	bigTopics := make([]string, 20)
	for i := range bigTopics {
		bigTopics[i] = strings.Repeat(string(rune('a'+i)), 30000)
	}
	for _, tc := range []struct {
		name      string
		requests  int
		topics    []string
		stuck     func(h *testHandler, entered chan<- struct{}, release <-chan struct{})
		abandoned bool
	}{
		{
			name:     "reply ignores its context",
			requests: 1,
			topics:   []string{"t"},
			stuck: func(h *testHandler, entered chan<- struct{}, release <-chan struct{}) {
				h.replyHook = func(context.Context, *Request) {
					entered <- struct{}{}
					<-release
				}
			},
			abandoned: true,
		},
		{
			name:     "handle never returns",
			requests: 1,
			topics:   []string{"t"},
			stuck: func(h *testHandler, entered chan<- struct{}, release <-chan struct{}) {
				h.handleHook = func(*Request) {
					entered <- struct{}{}
					<-release
				}
			},
			abandoned: true,
		},
		{
			name:     "client never reads",
			requests: 40,
			topics:   bigTopics,
			stuck:    func(*testHandler, chan<- struct{}, <-chan struct{}) {},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entered, release := make(chan struct{}, 1), make(chan struct{})
			h := &testHandler{called: make(chan struct{}, tc.requests)}
			tc.stuck(h, entered, release)
			ts := startServer(t, h, func(s *Server) { s.MaxFirstRequestBytes = DefaultMaxRequestBytes })
			t.Cleanup(func() { close(release) })
			c := dial(t, ts.addr)
			handled := make(chan struct{})
			go func() {
				defer close(handled)
				for range tc.requests {
					<-h.called
				}
			}()
			for i := range tc.requests {
				write(t, c, encodeRequest(1, int32(i), nil, metadataRequest(tc.topics...), nil))
			}
			if tc.abandoned {
				<-entered
			} else {
				<-handled
			}

			ctx, cancel := context.WithTimeout(context.Background(), drain)
			defer cancel()
			began := time.Now()
			err := ts.srv.Shutdown(ctx)
			took := time.Since(began)
			if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrAbandoned) != tc.abandoned {
				t.Fatalf("Shutdown: %v (abandoned expected: %v)", err, tc.abandoned)
			}
			if limit := drain + abortWait + time.Second; took > limit {
				t.Fatalf("Shutdown took %v, more than %v", took, limit)
			}
			t.Logf("Shutdown returned after %v: %v", took, err)
			if err := ts.wait(t); err != nil {
				t.Fatalf("Serve: %v", err)
			}
			expectClosed(t, c)
		})
	}
}

// TestWireServeContextCancelIsBounded: a Serve stopped by its context does not wait for a Reply that
// ignores the cancellation for longer than abortWait.
func TestWireServeContextCancelIsBounded(t *testing.T) {
	release := make(chan struct{})
	h := &testHandler{called: make(chan struct{}, 1)}
	h.replyHook = func(context.Context, *Request) { <-release }
	ts := startServer(t, h, nil)
	t.Cleanup(func() { close(release) })
	c := dial(t, ts.addr)
	write(t, c, encodeRequest(1, 1, nil, metadataRequest("t"), nil))
	<-h.called
	began := time.Now()
	ts.cancel()
	if err := ts.wait(t); !errors.Is(err, ErrAbandoned) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Serve: %v, want ErrAbandoned wrapping the cancellation", err)
	}
	if took, limit := time.Since(began), abortWait+time.Second; took > limit {
		t.Fatalf("Serve took %v to return, more than %v", took, limit)
	}
	expectClosed(t, c)
}
