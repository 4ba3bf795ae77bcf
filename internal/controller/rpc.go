package controller

import (
	"context"
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

// rpcClient calls other nodes' controller RPC over one persistent connection per address; calls to
// one address are serialized.
type rpcClient struct {
	timeout time.Duration

	mu    sync.Mutex
	conns map[string]*rpcConn
}

type rpcConn struct {
	mu   sync.Mutex
	conn net.Conn
}

func newRPCClient(timeout time.Duration) *rpcClient {
	return &rpcClient{timeout: timeout, conns: map[string]*rpcConn{}}
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
	c.mu.Lock()
	rc := c.conns[addr]
	if rc == nil {
		rc = &rpcConn{}
		c.conns[addr] = rc
	}
	c.mu.Unlock()

	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.conn == nil {
		conn, err := dialStream(ctx, addr, streamRPC, c.timeout)
		if err != nil {
			return "", fmt.Errorf("%w: dial %s: %w", ErrRPC, addr, err)
		}
		rc.conn = conn
	}
	// conn, not rc.conn: the deadline func may run after this call has closed the connection and
	// cleared rc.conn.
	conn := rc.conn
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	var resp rpcResponse
	err = writeFrame(conn, rpcRequest{Method: method, Body: body})
	if err == nil {
		err = readFrame(conn, &resp)
	}
	stop()
	if err != nil {
		_ = conn.Close()
		rc.conn = nil
		if ctx.Err() != nil {
			return "", fmt.Errorf("%w: %s to %s: %w", ErrTimeout, method, addr, ctx.Err())
		}
		return "", fmt.Errorf("%s to %s: %w", method, addr, err)
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

// close drops every connection.
func (c *rpcClient) close() {
	c.mu.Lock()
	conns := c.conns
	c.conns = map[string]*rpcConn{}
	c.mu.Unlock()
	for _, rc := range conns {
		rc.mu.Lock()
		if rc.conn != nil {
			_ = rc.conn.Close()
			rc.conn = nil
		}
		rc.mu.Unlock()
	}
}
