package controller

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// RPC methods of the controller RPC (docs/controller.md, "Network").
const (
	methodRegister  = "register"
	methodHeartbeat = "heartbeat"
	methodPropose   = "propose"
	methodStatus    = "status"
	methodFence     = "fence"
)

// rpcIdleTimeout closes a server-side RPC connection that sent nothing for this long.
const rpcIdleTimeout = 2 * time.Minute

type rpcRequest struct {
	Method string          `json:"method"`
	Body   json.RawMessage `json:"body,omitempty"`
}

type rpcResponse struct {
	Error *wireError `json:"error,omitempty"`
	// Leader is the controller leader's address as the answering node knows it, a hint for a
	// caller that reached a node that does not lead.
	Leader string          `json:"leader,omitempty"`
	Body   json.RawMessage `json:"body,omitempty"`
}

type registerRequest struct {
	Broker Broker `json:"broker"`
	// RaftAddr is the broker's controller address, which the leader adds as a Raft non-voter.
	RaftAddr  string `json:"raft_addr"`
	RaftState string `json:"raft_state"`
	Applied   uint64 `json:"applied"`
}

type registerResponse struct {
	Epoch int64 `json:"epoch"`
}

type heartbeatRequest struct {
	NodeID      int32  `json:"node_id"`
	Incarnation string `json:"incarnation"`
	Epoch       int64  `json:"epoch"`
	RaftState   string `json:"raft_state"`
	Applied     uint64 `json:"applied"`
}

// fenceRequest is a broker's request to be fenced at once (Store.FenceSelf); it names the
// registration it ends, so a stale request never fences a newer incarnation.
type fenceRequest struct {
	NodeID      int32  `json:"node_id"`
	Incarnation string `json:"incarnation"`
	Epoch       int64  `json:"epoch"`
}

type heartbeatResponse struct {
	Fenced bool `json:"fenced"`
	// Version is the leader's image version as it answered: the broker's lease renewed by this answer
	// counts only once the broker has applied that image (every election that moved its leaderships
	// away while it was unreachable included).
	Version int64 `json:"version,omitempty"`
}

type proposeRequest struct {
	Command json.RawMessage `json:"command"`
}

type proposeResponse struct {
	Index           uint64 `json:"index"`
	FirstProducerID int64  `json:"first_producer_id"`
}

// rpcHandler answers one decoded request; a non-nil error is sent as the reply's error.
type rpcHandler func(ctx context.Context, method string, body json.RawMessage) (any, error)

// rpcServer serves controller RPC connections handed over by the mux.
type rpcServer struct {
	handle rpcHandler
	ctx    context.Context

	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
	wg     sync.WaitGroup
}

func newRPCServer(ctx context.Context, handle rpcHandler) *rpcServer {
	return &rpcServer{handle: handle, ctx: ctx, conns: map[net.Conn]bool{}}
}

// serve answers requests on conn, one at a time, until it fails or the server closes.
func (s *rpcServer) serve(conn net.Conn) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = conn.Close()
		return
	}
	s.conns[conn] = true
	s.wg.Add(1)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
		_ = conn.Close()
		s.wg.Done()
	}()
	for {
		_ = conn.SetReadDeadline(time.Now().Add(rpcIdleTimeout))
		var req rpcRequest
		if err := readFrame(conn, &req); err != nil {
			return
		}
		var resp rpcResponse
		out, err := s.handle(s.ctx, req.Method, req.Body)
		if err == nil && out != nil {
			resp.Body, err = json.Marshal(out)
		}
		resp.Error = toWireError(err)
		if le, ok := asLeaderHint(err); ok {
			resp.Leader = le
		}
		_ = conn.SetWriteDeadline(time.Now().Add(defaultRPCTimeout))
		if err := writeFrame(conn, resp); err != nil {
			return
		}
	}
}

// close closes every connection and waits for their goroutines.
func (s *rpcServer) close() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// leaderHint is an ErrNotController that names the leader the answering node knows of.
type leaderHint struct {
	addr string
}

func (h *leaderHint) Error() string {
	return fmt.Sprintf("%s (leader at %q)", ErrNotController.Error(), h.addr)
}
func (h *leaderHint) Unwrap() error { return ErrNotController }

func asLeaderHint(err error) (string, bool) {
	var h *leaderHint
	if !errors.As(err, &h) {
		return "", false
	}
	return h.addr, true
}

// rpcClient calls other nodes' controller RPC over persistent connections, one per call in flight: a
// call takes an idle connection to its address (or dials one) and gives it back when it is done, so
// calls to one address run side by side. Proposals forwarded to the leader must not queue behind each
// other: over a slow link one takes a round trip and a Raft commit, and a node whose partitions all
// change their ISR at once (a follower fell behind on every one) proposes one change per partition.
type rpcClient struct {
	timeout time.Duration
	// tls, when set, is the mutual TLS of the controller listener (RaftConfig.ClientTLS).
	tls *tls.Config

	mu     sync.Mutex
	idle   map[string][]net.Conn
	closed bool
}

// rpcIdleMax bounds the idle connections kept per address.
const rpcIdleMax = 8

func newRPCClient(timeout time.Duration, tlsConfig *tls.Config) *rpcClient {
	return &rpcClient{timeout: timeout, tls: tlsConfig, idle: map[string][]net.Conn{}}
}

// take returns an idle connection to addr, or nil.
func (c *rpcClient) take(addr string) net.Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	conns := c.idle[addr]
	if len(conns) == 0 {
		return nil
	}
	conn := conns[len(conns)-1]
	c.idle[addr] = conns[:len(conns)-1]
	return conn
}

// giveBack keeps conn for the next call to addr, or closes it when enough are kept or the client
// is closed.
func (c *rpcClient) giveBack(addr string, conn net.Conn) {
	c.mu.Lock()
	if !c.closed && len(c.idle[addr]) < rpcIdleMax {
		c.idle[addr] = append(c.idle[addr], conn)
		conn = nil
	}
	c.mu.Unlock()
	if conn != nil {
		_ = conn.Close()
	}
}

// call sends one request to addr and decodes the reply body into out. A remote error comes back as
// an error that errors.Is the sentinel the remote returned; the leader hint, if any, is returned.
func (c *rpcClient) call(ctx context.Context, addr, method string, in, out any) (string, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return "", fmt.Errorf("%w: encode %s: %w", ErrRPC, method, err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	conn := c.take(addr)
	if conn == nil {
		if conn, err = dialStream(ctx, addr, streamRPC, c.timeout, c.tls); err != nil {
			return "", fmt.Errorf("%w: dial %s: %w", ErrRPC, addr, err)
		}
	}
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	var resp rpcResponse
	err = writeFrame(conn, rpcRequest{Method: method, Body: body})
	if err == nil {
		err = readFrame(conn, &resp)
	}
	// When the deadline func has run, the connection's deadline is in the past: it is not reused.
	reusable := stop()
	if err != nil {
		_ = conn.Close()
		if ctx.Err() != nil {
			return "", fmt.Errorf("%w: %s to %s: %w", ErrTimeout, method, addr, ctx.Err())
		}
		return "", fmt.Errorf("%s to %s: %w", method, addr, err)
	}
	if reusable {
		c.giveBack(addr, conn)
	} else {
		_ = conn.Close()
	}
	if resp.Error != nil {
		return resp.Leader, resp.Error.err()
	}
	if out != nil && resp.Body != nil {
		if err := json.Unmarshal(resp.Body, out); err != nil {
			return "", fmt.Errorf("%w: decode %s reply: %w", ErrRPC, method, err)
		}
	}
	return resp.Leader, nil
}

// close drops every idle connection; a call in flight closes its own when it ends.
func (c *rpcClient) close() {
	c.mu.Lock()
	idle := c.idle
	c.idle = map[string][]net.Conn{}
	c.closed = true
	c.mu.Unlock()
	for _, conns := range idle {
		for _, conn := range conns {
			_ = conn.Close()
		}
	}
}
