package controller

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// The first byte of every connection to a controller listener says which protocol follows.
const (
	streamRaft byte = 0x01
	streamRPC  byte = 0x02
)

// muxFirstByteTimeout bounds how long an accepted connection may take to send its first byte.
const muxFirstByteTimeout = 5 * time.Second

// mux accepts connections on the controller listener and routes each by its first byte: Raft
// connections to the stream layer, RPC connections to serveRPC.
type mux struct {
	ln net.Listener
	// advertised is the address other nodes dial, which Raft's transport reports as its own.
	advertised string
	raftConn   chan net.Conn
	serveRPC   func(net.Conn)
	// serverTLS and clientTLS, when set, are the listener's mutual TLS (RaftConfig.ServerTLS and
	// ClientTLS): every accepted connection completes a handshake before its first byte is read, and
	// Raft dials with clientTLS. log receives refused handshakes.
	serverTLS, clientTLS *tls.Config
	log                  *slog.Logger

	done      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

func newMux(ln net.Listener, serveRPC func(net.Conn), advertised string) *mux {
	return &mux{ln: ln, advertised: advertised, raftConn: make(chan net.Conn), serveRPC: serveRPC, done: make(chan struct{})}
}

// run accepts until the listener closes; it starts one goroutine per connection, joined by close.
func (m *mux) run() {
	for {
		conn, err := m.ln.Accept()
		if err != nil {
			return
		}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.route(conn)
		}()
	}
}

func (m *mux) route(conn net.Conn) {
	var b [1]byte
	_ = conn.SetDeadline(time.Now().Add(muxFirstByteTimeout))
	if m.serverTLS != nil {
		tc := tls.Server(conn, m.serverTLS)
		if err := tc.Handshake(); err != nil {
			m.log.Warn("controller: refused a connection: TLS handshake failed", "remote", conn.RemoteAddr().String(), "err", err)
			_ = conn.Close()
			return
		}
		conn = tc
	}
	if _, err := conn.Read(b[:]); err != nil {
		_ = conn.Close()
		return
	}
	_ = conn.SetDeadline(time.Time{})
	switch b[0] {
	case streamRaft:
		select {
		case m.raftConn <- conn:
		case <-m.done:
			_ = conn.Close()
		}
	case streamRPC:
		m.serveRPC(conn)
	default:
		_ = conn.Close()
	}
}

// close stops accepting and waits for the per-connection goroutines (RPC connections are closed by
// their server when the node shuts down).
func (m *mux) close() {
	m.closeOnce.Do(func() {
		close(m.done)
		_ = m.ln.Close()
	})
	m.wg.Wait()
}

// raftLayer is the raft.StreamLayer over a mux.
type raftLayer struct{ m *mux }

var _ raft.StreamLayer = raftLayer{}

// Accept implements net.Listener: it returns the next Raft connection.
func (l raftLayer) Accept() (net.Conn, error) {
	select {
	case c := <-l.m.raftConn:
		return c, nil
	case <-l.m.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener. The mux owns the listener; closing the layer closes the mux.
func (l raftLayer) Close() error {
	l.m.closeOnce.Do(func() {
		close(l.m.done)
		_ = l.m.ln.Close()
	})
	return nil
}

// Addr implements net.Listener: the advertised address, which Raft puts in its configuration.
func (l raftLayer) Addr() net.Addr { return advertisedAddr(l.m.advertised) }

// advertisedAddr is a TCP address given as text.
type advertisedAddr string

// Network implements net.Addr.
func (advertisedAddr) Network() string { return "tcp" }

// String implements net.Addr.
func (a advertisedAddr) String() string { return string(a) }

// Dial implements raft.StreamLayer: it connects to address and announces a Raft stream.
func (l raftLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return dialStream(context.Background(), string(address), streamRaft, timeout, l.m.clientTLS)
}

// dialStream connects to a controller listener, completes the TLS handshake when tlsConfig is set
// (verifying the peer for addr's host unless tlsConfig names a server), and writes the stream kind
// byte.
func dialStream(ctx context.Context, addr string, kind byte, timeout time.Duration, tlsConfig *tls.Config) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if tlsConfig != nil {
		if conn, err = clientHandshake(ctx, conn, addr, tlsConfig); err != nil {
			return nil, err
		}
	}
	if _, err := conn.Write([]byte{kind}); err != nil {
		_ = conn.Close()
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, nil
}

// clientHandshake runs the client side of a TLS handshake on conn, closing conn when it fails.
func clientHandshake(ctx context.Context, conn net.Conn, addr string, tlsConfig *tls.Config) (net.Conn, error) {
	cfg := tlsConfig
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			_ = conn.Close()
			return nil, err
		}
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
	}
	return tc, nil
}
