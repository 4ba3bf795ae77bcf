// Package wire serves the Kafka protocol's framing on TCP connections: it reads size-prefixed
// requests, parses their headers (v1, or v2 for flexible versions), decodes their bodies with kmsg,
// hands them to a Handler in arrival order and writes the responses back in request order.
//
// Each connection has a reader goroutine, which reads, decodes and calls Handler.Handle, and a writer
// goroutine, which calls the returned Replies one at a time and writes what they return. Between them
// sits a bounded queue of pending replies, so a slow Reply (a parked fetch, a produce waiting for
// acks=all) lets later requests be handled but never reorders responses, and a client that pipelines
// without reading its responses is eventually stopped from sending more.
//
// Anything a client can send that is not a well-formed request the Handler supports closes that
// connection, with the reason logged; it never affects other connections and never panics.
//
// The client side of the same framing is a Client, for weir's own calls to other brokers: it writes
// a request with its header, reads the response frame through the same size-checked reader, checks
// its correlation id and decodes it, one request at a time, within the caller's context.
package wire

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/weir-mq/weir/internal/clock"
)

// Defaults for the zero values of the Server's limits.
const (
	DefaultMaxRequestBytes      = 100 << 20
	DefaultMaxFirstRequestBytes = 1 << 20
	DefaultMaxPendingReplies    = 64
	DefaultIdleTimeout          = 10 * time.Minute
	DefaultHandshakeTimeout     = 10 * time.Second
)

// acceptBackoffMax bounds the wait after a failed Accept (out of file descriptors, say).
const acceptBackoffMax = time.Second

// abortWait is how long Shutdown, once its context has ended and it has closed the remaining
// connections, waits for their goroutines (Replies and Handle calls told to stop by their cancelled
// context) before it gives up on them.
const abortWait = time.Second

var (
	// ErrNoHandler is returned by Serve when the Server has no Handler.
	ErrNoHandler = errors.New("wire: server has no handler")
	// ErrNoTLSConfig is returned by ServeListener for an SSL or SASL_SSL listener without a TLS
	// configuration.
	ErrNoTLSConfig = errors.New("wire: TLS listener without a TLS configuration")
	// ErrServerClosed is returned by Serve when it is called after Shutdown.
	ErrServerClosed = errors.New("wire: server closed")
	// ErrAbandoned is returned by Shutdown, and by Serve stopped by its context, when connections
	// still had a Handle call or a Reply running abortWait after they were closed: a handler that
	// ignores its cancelled context. Their goroutines are left behind.
	ErrAbandoned = errors.New("wire: connections abandoned with a request still running")
)

// Clock is the time source of the Server: it arms idle deadlines and paces accept retries.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// Server serves the Kafka protocol to the connections of one or more listeners. Set its fields
// before the first Serve and do not change them afterwards.
type Server struct {
	// Handler serves the decoded requests. It is required.
	Handler Handler
	// Logger receives the reasons connections are closed; slog.Default() when nil.
	Logger *slog.Logger
	// MaxRequestBytes is the largest request frame accepted once a connection has sent one valid
	// request (DefaultMaxRequestBytes when 0).
	MaxRequestBytes int32
	// MaxFirstRequestBytes is the largest frame accepted before that, so that a stray HTTP or TLS
	// client cannot make the server allocate much (DefaultMaxFirstRequestBytes when 0; never more
	// than MaxRequestBytes).
	MaxFirstRequestBytes int32
	// MaxPendingReplies bounds the replies of one connection that are handled but not yet written;
	// its reader stops reading while the bound is reached (DefaultMaxPendingReplies when 0).
	MaxPendingReplies int
	// IdleTimeout closes a connection that has sent nothing and has no reply pending for this long
	// (DefaultIdleTimeout when 0). It also bounds how long writing one response may take.
	IdleTimeout time.Duration
	// HandshakeTimeout bounds a TLS handshake (DefaultHandshakeTimeout when 0), so that a client
	// that connects to a TLS listener and stalls holds nothing for long.
	HandshakeTimeout time.Duration
	// Clock is the time source; the system clock when nil.
	Clock Clock

	mu        sync.Mutex
	closing   bool
	done      chan struct{} // closed by Shutdown
	abandoned chan struct{} // closed by Shutdown when it gives up on connections that do not end
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	wg        sync.WaitGroup // every connection goroutine of every Serve
}

func (s *Server) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

func (s *Server) clock() Clock {
	if s.Clock != nil {
		return s.Clock
	}
	return clock.System{}
}

func (s *Server) maxRequestBytes() int32 {
	if s.MaxRequestBytes > 0 {
		return s.MaxRequestBytes
	}
	return DefaultMaxRequestBytes
}

func (s *Server) maxFirstRequestBytes() int32 {
	first := s.MaxFirstRequestBytes
	if first <= 0 {
		first = DefaultMaxFirstRequestBytes
	}
	return min(first, s.maxRequestBytes())
}

func (s *Server) maxPendingReplies() int {
	if s.MaxPendingReplies > 0 {
		return s.MaxPendingReplies
	}
	return DefaultMaxPendingReplies
}

func (s *Server) handshakeTimeout() time.Duration {
	if s.HandshakeTimeout > 0 {
		return s.HandshakeTimeout
	}
	return DefaultHandshakeTimeout
}

func (s *Server) idleTimeout() time.Duration {
	if s.IdleTimeout > 0 {
		return s.IdleTimeout
	}
	return DefaultIdleTimeout
}

// initLocked prepares the Server's bookkeeping; s.mu is held.
func (s *Server) initLocked() {
	if s.done == nil {
		s.done = make(chan struct{})
		s.abandoned = make(chan struct{})
		s.listeners = make(map[net.Listener]struct{})
		s.conns = make(map[*conn]struct{})
	}
}

// Serve serves ln as the PLAINTEXT listener named PLAINTEXT: ServeListener with PlaintextListener.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	return s.ServeListener(ctx, ln, PlaintextListener)
}

// ServeListener accepts connections on ln, as l describes them (a TLS handshake first on an SSL or
// SASL_SSL listener, SASL before anything else on a SASL one), and serves them until ctx is done or
// Shutdown is called. When ctx is done, ln and every connection it accepted are closed at once
// (their Replies see a cancelled context); after Shutdown, connections are drained as Shutdown
// describes. It closes ln and returns once every goroutine it started has ended: nil when stopped
// by ctx or Shutdown, ErrServerClosed when called after Shutdown, ErrNoTLSConfig for a TLS listener
// without a TLS configuration, or the error that made Accept fail. It does not wait for goroutines
// Shutdown gave up on, nor, once ctx is done, for longer than abortWait: then it returns
// ErrAbandoned. A Server may serve several listeners at once, each with its own ServeListener.
func (s *Server) ServeListener(ctx context.Context, ln net.Listener, l Listener) error {
	if s.Handler == nil {
		return ErrNoHandler
	}
	if l.Protocol.TLS() && l.TLS == nil {
		_ = ln.Close()
		return fmt.Errorf("%w: listener %s is %s", ErrNoTLSConfig, l.Name, l.Protocol)
	}
	s.mu.Lock()
	s.initLocked()
	if s.closing {
		s.mu.Unlock()
		_ = ln.Close()
		return ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	done, abandoned := s.done, s.abandoned
	s.mu.Unlock()

	lnClosed := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = ln.Close()
		close(lnClosed)
	})
	var wg sync.WaitGroup
	err := s.acceptLoop(ctx, ln, l, done, &wg)
	if !stop() {
		<-lnClosed
	}
	_ = ln.Close()
	s.mu.Lock()
	delete(s.listeners, ln)
	s.mu.Unlock()
	ended := waitChan(&wg)
	select {
	case <-ended:
		return err
	case <-abandoned:
		return err
	case <-ctx.Done():
	}
	select {
	case <-ended:
		return err
	case <-abandoned:
		return err
	case <-s.clock().After(abortWait):
		return errors.Join(err, s.abandon(ctx.Err()))
	}
}

// acceptLoop accepts until ln is closed or accepting fails for good, starting two goroutines per
// connection counted in wg.
func (s *Server) acceptLoop(ctx context.Context, ln net.Listener, l Listener, done <-chan struct{}, wg *sync.WaitGroup) error {
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || isClosed(done) {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("wire: listener closed: %w", err)
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), acceptBackoffMax)
			s.logger().Warn("wire: accept failed, retrying", "addr", ln.Addr().String(), "err", err, "backoff", backoff)
			select {
			case <-s.clock().After(backoff):
			case <-ctx.Done():
				return nil
			case <-done:
				return nil
			}
			continue
		}
		backoff = 0
		c := s.track(ctx, nc, l)
		if c == nil {
			_ = nc.Close()
			continue
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer s.wg.Done()
			c.readLoop()
			<-c.closed
			c.session.closed()
		}()
		go func() {
			defer wg.Done()
			defer s.wg.Done()
			c.writeLoop()
			s.untrack(c)
		}()
	}
}

// track registers a new connection, or returns nil when the server is shutting down.
func (s *Server) track(ctx context.Context, nc net.Conn, l Listener) *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil
	}
	c := newConn(ctx, s, nc, l)
	s.conns[c] = struct{}{}
	s.wg.Add(2)
	return c
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// Shutdown stops the Server gracefully: it closes every listener, stops reading from every
// connection, lets every request already read get its reply written, then closes the connections.
// If ctx ends first, the remaining connections are closed at once (their Replies see a cancelled
// context). Shutdown returns after every connection goroutine has ended: nil, or ctx's error when
// it had to cut the drain short. Goroutines still running abortWait after their connection was
// closed (a Reply or Handle call that ignores its context) are left behind: Shutdown then returns
// ErrAbandoned, wrapping ctx's error, and Serve returns too.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.initLocked()
	if !s.closing {
		s.closing = true
		close(s.done)
	}
	for ln := range s.listeners {
		_ = ln.Close()
	}
	s.mu.Unlock()
	for _, c := range s.connections() {
		c.drain()
	}

	finished := waitChan(&s.wg)
	select {
	case <-finished:
		return nil
	case <-ctx.Done():
	}
	for _, c := range s.connections() {
		c.abort()
	}
	select {
	case <-finished:
		return ctx.Err()
	case <-s.clock().After(abortWait):
	}
	return s.abandon(ctx.Err())
}

// abandon gives up on the connections still running, logs them and returns the ErrAbandoned that
// says so, wrapping cause.
func (s *Server) abandon(cause error) error {
	s.mu.Lock()
	if !isClosed(s.abandoned) {
		close(s.abandoned)
	}
	s.mu.Unlock()
	cs := s.connections()
	for _, c := range cs {
		c.log.Error("wire: connection abandoned: a request is still being handled after it was closed")
	}
	return fmt.Errorf("%w: %d connections: %w", ErrAbandoned, len(cs), cause)
}

// waitChan returns a channel that is closed once wg's count is zero.
func waitChan(wg *sync.WaitGroup) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		wg.Wait()
		close(ch)
	}()
	return ch
}

// connections returns the connections being served, so that they can be told to stop without
// s.mu held.
func (s *Server) connections() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		cs = append(cs, c)
	}
	return cs
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
