package wire

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// readBufferBytes is the read buffer of a connection: small requests that arrive together are
	// read with one system call.
	readBufferBytes = 16 << 10
	// writeBufferKeepBytes is the largest write buffer a connection keeps between responses; a larger
	// one (a big fetch response) is dropped after use rather than pinned.
	writeBufferKeepBytes = 1 << 20
)

var (
	errDraining   = errors.New("wire: server is shutting down")
	errIdle       = errors.New("wire: connection idle")
	errPanic      = errors.New("wire: panic while serving a request")
	errWrongReply = errors.New("wire: reply answers another api key")
)

// pendingReply is one handled request waiting for its response to be written.
type pendingReply struct {
	reply         Reply
	key           int16
	version       int16
	correlationID int32
	unsupported   bool
	rawToken      bool
	// frame is the pooled buffer of a Produce's frame, which its records alias: given back once the
	// Reply was called and its response written, or dropped by a failed connection. Nil for any
	// other request, whose byte fields a handler may keep (a group member's metadata).
	frame *[]byte
}

// conn is one client connection: a reader goroutine (readLoop) and a writer goroutine (writeLoop)
// joined by the replies queue. The connection ends by cancelling ctx, which closes the socket; the
// reader then closes replies, and the writer calls every Reply left before it exits.
type conn struct {
	srv *Server
	nc  net.Conn
	// tcp is the TCP connection under nc when nothing between them changes the bytes (a plaintext
	// listener), for sending Sections with sendfile; nil otherwise.
	tcp *net.TCPConn
	// gatherer is the socket under nc on a TLS listener, which gathers a large response's records
	// into few writes; nil otherwise.
	gatherer *recordGatherer
	remote   net.Addr
	log      *slog.Logger
	ctx      context.Context
	cancel   context.CancelFunc
	// closed is closed once the socket is, which follows the cancellation of ctx.
	closed  chan struct{}
	replies chan pendingReply
	// inflight counts replies handed to the writer and not yet finished: while it is positive the
	// connection is not idle.
	inflight atomic.Int32
	// draining is set by Shutdown: the reader stops at the next frame and the writer finishes.
	draining atomic.Bool
	// deadlineMu orders the reader re-arming its read deadline after Shutdown moved it to the past.
	deadlineMu sync.Mutex
	// active is set by the reader whenever bytes arrive; only the reader touches it.
	active bool
	// session is the connection's security state; only the reader touches it.
	session Session
}

func newConn(ctx context.Context, s *Server, nc net.Conn, l Listener) *conn {
	var tcp *net.TCPConn
	var gatherer *recordGatherer
	if l.Protocol.TLS() {
		gatherer = &recordGatherer{Conn: nc}
		nc = tls.Server(gatherer, l.TLS)
	} else {
		tcp = plainTCP(nc)
	}
	c := &conn{
		srv:      s,
		nc:       nc,
		tcp:      tcp,
		gatherer: gatherer,
		remote:   nc.RemoteAddr(),
		session:  Session{Listener: l.Name, Protocol: l.Protocol, principal: AnonymousPrincipal},
		log:      s.logger().With("remote", nc.RemoteAddr().String(), "listener", l.Name),
		replies:  make(chan pendingReply, s.maxPendingReplies()),
	}
	c.ctx, c.cancel = context.WithCancel(ctx)
	c.closed = make(chan struct{})
	context.AfterFunc(c.ctx, func() {
		_ = nc.Close()
		close(c.closed)
	})
	return c
}

// plainTCP returns the TCP connection under an accepted plaintext connection: nc itself, or what a
// wrapper's NetConn returns, as a listener that only counts its connections wraps them. A wrapper
// offers NetConn only when it writes bytes unchanged.
func plainTCP(nc net.Conn) *net.TCPConn {
	for {
		switch c := nc.(type) {
		case *net.TCPConn:
			return c
		case interface{ NetConn() net.Conn }:
			nc = c.NetConn()
		default:
			return nil
		}
	}
}

// abort closes the connection at once; pending Replies see a cancelled context.
func (c *conn) abort() {
	c.cancel()
}

// drain makes the reader stop reading and the writer finish the replies already queued.
func (c *conn) drain() {
	c.deadlineMu.Lock()
	defer c.deadlineMu.Unlock()
	c.draining.Store(true)
	_ = c.nc.SetReadDeadline(time.Unix(1, 0))
}

// rearm moves the read deadline one idle timeout ahead, unless the connection is draining.
func (c *conn) rearm() bool {
	c.deadlineMu.Lock()
	defer c.deadlineMu.Unlock()
	if c.draining.Load() {
		return false
	}
	_ = c.nc.SetReadDeadline(c.srv.clock().Now().Add(c.srv.idleTimeout()))
	return true
}

// Read reads from the socket under the idle rule: a read deadline passing closes the connection only
// if no byte arrived and no reply was pending during the last idle period; otherwise the deadline is
// moved on. conn is its own io.Reader so that bufio can sit on top without an allocation.
func (c *conn) Read(p []byte) (int, error) {
	for {
		n, err := c.nc.Read(p)
		if n > 0 {
			c.active = true
			return n, err
		}
		if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
			return n, err
		}
		if c.draining.Load() {
			return 0, errDraining
		}
		if !c.active && c.inflight.Load() == 0 {
			return 0, errIdle
		}
		c.active = false
		if !c.rearm() {
			return 0, errDraining
		}
	}
}

// readLoop reads, decodes and handles requests in arrival order until the connection ends or
// drains, then closes the replies queue.
func (c *conn) readLoop() {
	defer close(c.replies)
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("wire: panic while reading a request; closing the connection",
				"panic", r, "stack", string(debug.Stack()))
			c.abort()
		}
	}()
	if tc, ok := c.nc.(*tls.Conn); ok && !c.handshake(tc) {
		return
	}
	if !c.rearm() {
		return
	}
	br := bufio.NewReaderSize(c, readBufferBytes)
	dec := decoder{supports: c.srv.Handler.Supports}
	limit := c.srv.maxFirstRequestBytes()
	for !c.draining.Load() {
		frame, pooled, err := readPooledFrame(br, limit)
		if err != nil {
			c.readFailed(err)
			return
		}
		req, err := c.request(&dec, frame)
		if err != nil {
			c.decodeFailed(req, err)
			return
		}
		if why := c.session.admit(req.Key, c.srv.clock().Now()); why != "" {
			c.log.Warn("wire: refused; closing the connection", "reason", why, "key", req.Key,
				"principal", c.session.principal)
			c.abort()
			return
		}
		req.Remote = c.remote
		req.Principal = c.session.principal
		req.Listener = c.session.Listener
		req.Session = &c.session
		if !req.Unsupported {
			limit = c.srv.maxRequestBytes()
		}
		reply := c.srv.Handler.Handle(c.ctx, req)
		if reply == nil {
			putFrameBuf(pooled)
			if c.session.closeAfter {
				return
			}
			continue
		}
		p := pendingReply{
			reply:         reply,
			key:           req.Key,
			version:       req.Version,
			correlationID: req.CorrelationID,
			unsupported:   req.Unsupported,
			rawToken:      req.RawToken,
			frame:         pooled,
		}
		c.inflight.Add(1)
		select {
		case c.replies <- p:
		case <-c.ctx.Done():
			c.inflight.Add(-1)
			c.call(c.ctx, p)
			putFrameBuf(p.frame)
			return
		}
		if c.session.closeAfter {
			// The writer writes the replies queued so far, then closes the connection.
			return
		}
	}
}

// request decodes a frame: a Kafka request, or a bare SASL token after a SaslHandshake v0, which
// becomes a SaslAuthenticate v0 request.
func (c *conn) request(dec *decoder, frame []byte) (*Request, error) {
	if !c.session.rawTokens {
		return dec.decode(frame)
	}
	body := kmsg.NewPtrSASLAuthenticateRequest()
	body.SASLAuthBytes = frame
	return &Request{Key: body.Key(), Body: body, RawToken: true}, nil
}

// handshake runs the TLS handshake within the server's handshake timeout and takes the principal
// from a verified client certificate. It reports whether the connection may go on; when not, it
// has logged why and closed it.
func (c *conn) handshake(tc *tls.Conn) bool {
	_ = tc.SetDeadline(c.srv.clock().Now().Add(c.srv.handshakeTimeout()))
	if err := tc.HandshakeContext(c.ctx); err != nil {
		if c.ctx.Err() == nil {
			c.log.Warn("wire: TLS handshake failed; closing the connection", "err", err)
		}
		c.abort()
		return false
	}
	_ = tc.SetDeadline(time.Time{})
	if st := tc.ConnectionState(); len(st.VerifiedChains) > 0 {
		c.session.principal = "User:" + st.PeerCertificates[0].Subject.String()
	}
	return true
}

// readFailed logs why reading a frame failed and closes the connection (unless it is draining, in
// which case the writer closes it after the last reply).
func (c *conn) readFailed(err error) {
	switch {
	case errors.Is(err, errDraining):
		return
	case c.ctx.Err() != nil:
	case errors.Is(err, io.EOF):
		c.log.Debug("wire: client closed the connection")
	case errors.Is(err, errIdle):
		c.log.Info("wire: closing idle connection", "idle", c.srv.idleTimeout())
	case errors.Is(err, errNegativeSize), errors.Is(err, errFrameTooLarge), errors.Is(err, errTruncatedFrame):
		c.log.Warn("wire: bad frame; closing the connection", "err", err)
	default:
		c.log.Info("wire: read failed; closing the connection", "err", err)
	}
	c.abort()
}

// decodeFailed logs why a frame is not a request weir serves and closes the connection.
// Unknown keys and versions are logged at Info: kafka-python probes a broker's version that way.
func (c *conn) decodeFailed(req *Request, err error) {
	level := slog.LevelWarn
	if errors.Is(err, errUnknownKey) || errors.Is(err, errUnsupportedVersion) {
		level = slog.LevelInfo
	}
	if req == nil {
		c.log.Log(c.ctx, level, "wire: bad request; closing the connection", "err", err)
	} else {
		c.log.Log(c.ctx, level, "wire: bad request; closing the connection", "err", err,
			"key", req.Key, "version", req.Version, "correlation_id", req.CorrelationID)
	}
	c.abort()
}

// writeLoop calls the queued Replies in order and writes their responses, until the reader closes
// the queue; then it closes the connection and returns once the socket is closed. After a failure it
// keeps calling the remaining Replies (with the cancelled context) without writing, so that every
// Reply is called exactly once.
func (c *conn) writeLoop() {
	defer func() {
		c.abort()
		<-c.closed
	}()
	var buf []byte
	ss := &sections{}
	ctx := context.WithValue(c.ctx, sectionsKey{}, ss)
	failed := false
	for p := range c.replies {
		resp := c.call(ctx, p)
		if resp != nil && !failed && c.ctx.Err() == nil {
			var err error
			switch hint := sizeHint(resp); {
			case len(ss.list) > 0:
				err = c.writeSections(p, resp, ss.list)
			case hint > writeBufferKeepBytes:
				big := getBigBuf(hint)
				*big, err = c.write(*big, p, resp)
				putBigBuf(big)
			default:
				buf, err = c.write(buf[:0], p, resp)
				if cap(buf) > writeBufferKeepBytes {
					buf = nil
				}
			}
			if err != nil {
				failed = true
				c.writeFailed(p, err)
			}
		}
		ss.release()
		putFrameBuf(p.frame)
		c.inflight.Add(-1)
	}
}

// writeSections writes a Fetch response whose records are in Sections: from the files to the socket on a
// plaintext TCP connection, otherwise read into one pooled buffer and written from it (TLS encrypts
// what it is given, so the bytes must pass through memory there).
func (c *conn) writeSections(p pendingReply, resp kmsg.Response, secs []placedSection) (err error) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("wire: panic while encoding a response", "panic", r, "stack", string(debug.Stack()))
			err = errPanic
		}
	}()
	if resp.Key() != p.key {
		return fmt.Errorf("%w: %d", errWrongReply, resp.Key())
	}
	resp.SetVersion(p.version)
	f, err := frameSections(nil, p.correlationID, resp, secs)
	if err != nil {
		return err
	}
	if err := c.nc.SetWriteDeadline(c.srv.clock().Now().Add(c.srv.idleTimeout())); err != nil {
		return fmt.Errorf("wire: write: %w", err)
	}
	if c.tcp != nil {
		if err := f.sendTo(c.tcp); err != nil {
			return fmt.Errorf("wire: write: %w", err)
		}
		return nil
	}
	big := getBigBuf(f.size())
	defer putBigBuf(big)
	if *big, err = f.appendTo(*big); err != nil {
		return fmt.Errorf("wire: write: %w", err)
	}
	return c.writeFrame(*big)
}

// writeFrame writes one encoded response to the socket; on a TLS connection, a response of several
// records is sealed into few socket writes (recordGatherer).
func (c *conn) writeFrame(b []byte) error {
	var err error
	if c.gatherer != nil && len(b) > tlsRecordBytes {
		err = c.gatherer.gather(func() error {
			_, err := c.nc.Write(b)
			return err
		})
	} else {
		_, err = c.nc.Write(b)
	}
	if err != nil {
		return fmt.Errorf("wire: write: %w", err)
	}
	return nil
}

// call runs one Reply, turning a panic into a logged, closed connection.
func (c *conn) call(ctx context.Context, p pendingReply) (resp kmsg.Response) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("wire: panic in a reply; closing the connection", "panic", r,
				"key", p.key, "version", p.version, "stack", string(debug.Stack()))
			c.abort()
			resp = nil
		}
	}()
	return p.reply(ctx)
}

// write encodes resp into buf and writes it. The response is set to the request's version, except
// for the version 0 answer to an unsupported ApiVersions request.
func (c *conn) write(buf []byte, p pendingReply, resp kmsg.Response) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("wire: panic while encoding a response", "panic", r, "stack", string(debug.Stack()))
			out, err = buf[:0], errPanic
		}
	}()
	if resp.Key() != p.key {
		return buf, fmt.Errorf("%w: %d", errWrongReply, resp.Key())
	}
	if !p.unsupported {
		resp.SetVersion(p.version)
	}
	if p.rawToken {
		auth, ok := resp.(*kmsg.SASLAuthenticateResponse)
		if !ok || auth.ErrorCode != 0 {
			return buf, nil
		}
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(auth.SASLAuthBytes)))
		buf = append(buf, auth.SASLAuthBytes...)
	} else if buf, err = appendResponse(buf, p.correlationID, resp); err != nil {
		return buf, err
	}
	if err := c.nc.SetWriteDeadline(c.srv.clock().Now().Add(c.srv.idleTimeout())); err != nil {
		return buf, fmt.Errorf("wire: write: %w", err)
	}
	return buf, c.writeFrame(buf)
}

func (c *conn) writeFailed(p pendingReply, err error) {
	if c.ctx.Err() == nil && !errors.Is(err, errPanic) {
		level := slog.LevelInfo
		if errors.Is(err, errWrongReply) || errors.Is(err, errResponseTooLarge) {
			level = slog.LevelError
		}
		c.log.Log(c.ctx, level, "wire: cannot write a response; closing the connection", "err", err,
			"key", p.key, "version", p.version, "correlation_id", p.correlationID)
	}
	c.abort()
}
