package controller

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/weir-mq/weir/internal/vfs"
)

// TimerClock is the clock the Raft store's background loops run on: Now stamps commands and
// sessions, After paces heartbeats and session checks.
type TimerClock interface {
	Clock
	After(d time.Duration) <-chan time.Time
}

// Voter is one controller voter, as --controller-voters names it.
type Voter struct {
	NodeID int32
	Addr   string
}

// ParseVoters parses --controller-voters: "id@host:port" entries separated by commas. An empty
// string is no voters (the node alone).
func ParseVoters(s string) ([]Voter, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var out []Voter
	seen := map[int32]bool{}
	for _, part := range strings.Split(s, ",") {
		idText, addr, ok := strings.Cut(strings.TrimSpace(part), "@")
		id, err := strconv.ParseInt(idText, 10, 32)
		if !ok || err != nil || id < 0 || seen[int32(id)] {
			return nil, fmt.Errorf("%w: controller voter %q", ErrInvalidConfig, part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("%w: controller voter %q: %w", ErrInvalidConfig, part, err)
		}
		seen[int32(id)] = true
		out = append(out, Voter{NodeID: int32(id), Addr: addr})
	}
	return out, nil
}

// Defaults of RaftConfig.
const (
	defaultHeartbeatInterval = 500 * time.Millisecond
	defaultSessionTimeout    = 6 * time.Second
	defaultRPCTimeout        = 5 * time.Second
	defaultRaftTimeout       = 500 * time.Millisecond
	defaultSnapshotThreshold = 1024
	snapshotsRetained        = 2
	// soleVoterElection is the Raft heartbeat and election timeout of a quorum whose only voter is
	// this node until it has elected itself: no other voter can compete or be waiting to be heard, so
	// the wait is only start-up time. Leader, it goes back to RaftTimeout.
	soleVoterElection = 10 * time.Millisecond
)

// RaftConfig configures OpenRaft. Zero durations take the defaults named on each field.
type RaftConfig struct {
	// Self is this node as a broker: node id, advertised Kafka host and port, rack.
	Self Broker
	// Dir is the controller directory, <data-dir>/controller: raft.db and snapshots/ live there.
	// It is unused when LogStore, StableStore and SnapshotStore are all set.
	Dir string
	// Listener is the controller listener; when nil OpenRaft listens on Addr.
	Listener net.Listener
	// Addr is --controller-addr.
	Addr string
	// ServerTLS and ClientTLS, set together, put every connection of the controller listener (Raft
	// and the RPC) under mutual TLS (docs/security.md, Node to node): ServerTLS must require and
	// verify client certificates, ClientTLS must present this node's certificate and verify the
	// peer's. A connection whose handshake fails is closed and logged. Both nil: plain TCP.
	ServerTLS, ClientTLS *tls.Config
	// AdvertisedAddr is the address other nodes dial; empty means the voter entry of this node, or
	// else the listener's address.
	AdvertisedAddr string
	// Voters is --controller-voters; empty means this node alone.
	Voters []Voter
	// Clock paces heartbeats and session checks and stamps commands.
	Clock TimerClock
	// Logger receives the store's and Raft's warnings; nil is slog.Default().
	Logger *slog.Logger
	// HeartbeatInterval is how often the broker heartbeats and the leader checks sessions (500 ms).
	HeartbeatInterval time.Duration
	// SessionTimeout is how long the leader waits for a heartbeat before fencing (6 s).
	SessionTimeout time.Duration
	// RPCTimeout bounds every controller RPC and every Raft apply (5 s).
	RPCTimeout time.Duration
	// RaftTimeout is Raft's heartbeat and election timeout (500 ms); the leader lease is half.
	RaftTimeout time.Duration
	// SnapshotThreshold is how many log entries Raft lets pass between snapshots (1024).
	SnapshotThreshold uint64

	// Transport replaces the TCP Raft transport (tests use raft.NewInmemTransport); the listener
	// then serves only the controller RPC.
	Transport raft.Transport
	// LogStore, StableStore and SnapshotStore replace the on-disk stores (tests use raft's
	// in-memory ones).
	LogStore      raft.LogStore
	StableStore   raft.StableStore
	SnapshotStore raft.SnapshotStore
}

// liveCallTimeout bounds one registration or heartbeat: half of what the session timeout leaves after
// a heartbeat interval, and no more than the RPC timeout. A call to a controller leader that has just
// been cut off hangs until it times out (its packets are dropped, nothing refuses them). Bounded by the
// RPC timeout alone (5 s), it outlasted the session a new leader starts for every broker when it takes
// over, so the new leader fenced every broker, itself among them, and partitions on the majority side
// went without a leader for about ten seconds. Bounded so, the broker's next heartbeat goes to the new
// leader, which Raft names to it meanwhile, well within that session.
func (c *RaftConfig) liveCallTimeout() time.Duration {
	return min(c.RPCTimeout, (c.SessionTimeout-c.HeartbeatInterval)/2)
}

func (c *RaftConfig) withDefaults() {
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = defaultHeartbeatInterval
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = defaultSessionTimeout
	}
	if c.RPCTimeout <= 0 {
		c.RPCTimeout = defaultRPCTimeout
	}
	if c.RaftTimeout <= 0 {
		c.RaftTimeout = defaultRaftTimeout
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = defaultSnapshotThreshold
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// raftNode is the Raft side of a Store: the Raft instance, its FSM, the controller listener, the
// broker's registration and heartbeat loop, and (while this node leads) the session checker.
type raftNode struct {
	cfg    RaftConfig
	store  *Store
	r      *raft.Raft
	fsm    *fsm
	addr   string
	voters map[int32]string
	log    *slog.Logger

	mux        *mux
	rpc        *rpcServer
	client     *rpcClient
	liveClient *rpcClient
	trans      raft.Transport
	ownsTrans  bool
	bolt       *raftboltdb.BoltStore

	sess *sessions
	// soleVoter is set when this node is the quorum's only voter and Raft started with
	// soleVoterElection, which the first leadership replaces by cfg.RaftTimeout.
	soleVoter bool

	incarnation string
	// brokerEpoch is this broker's epoch once registered, 0 before.
	brokerEpoch atomic.Int64
	// lease is this broker's lease (see brokerLease), replaced whole on every change.
	lease atomic.Pointer[brokerLease]
	// liveMu guards retired and calling; it is never held across a call to the leader.
	liveMu sync.Mutex
	// retired is set by fenceSelf: the broker stops registering and heartbeating.
	retired bool
	// calling, while a registration or heartbeat is in flight, is closed once it has ended: fenceSelf
	// waits for it, so that no heartbeat reaches the leader after the fence (a heartbeat from a fenced
	// broker unfences it).
	calling chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// OpenRaft opens the controller as a member of a Raft quorum and starts its listener, its broker
// registration and heartbeats, and its leader duties. The returned Store has the single-node
// Store's API; commands go through Raft (forwarded to the leader from any other node). The image
// stays empty (no ClusterID) until the first controller leader commits: WaitReady waits for that
// and for this broker's registration.
func OpenRaft(cfg RaftConfig) (_ *Store, err error) {
	cfg.withDefaults()
	if cfg.Clock == nil {
		return nil, fmt.Errorf("%w: a clock is required", ErrInvalidConfig)
	}
	if cfg.HeartbeatInterval >= cfg.SessionTimeout {
		return nil, fmt.Errorf("%w: heartbeat interval %s must be shorter than the session timeout %s", ErrInvalidConfig, cfg.HeartbeatInterval, cfg.SessionTimeout)
	}
	n := &raftNode{cfg: cfg, voters: map[int32]string{}, log: cfg.Logger, sess: newSessions(cfg.SessionTimeout)}
	for _, v := range cfg.Voters {
		n.voters[v.NodeID] = v.Addr
	}
	s := &Store{clock: cfg.Clock, rand: rand.Reader, subs: map[int]chan struct{}{}, turn: make(chan struct{}, 1), node: n}
	n.store = s
	inc, err := s.newID()
	if err != nil {
		return nil, err
	}
	n.incarnation = inc.String()
	n.ctx, n.cancel = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			n.close()
		}
	}()

	ln := cfg.Listener
	if ln == nil {
		var lc net.ListenConfig
		if ln, err = lc.Listen(n.ctx, "tcp", cfg.Addr); err != nil {
			return nil, fmt.Errorf("controller: listen on %s: %w", cfg.Addr, err)
		}
	}
	n.addr = cfg.AdvertisedAddr
	if n.addr == "" {
		n.addr = n.voters[cfg.Self.NodeID]
	}
	if n.addr == "" {
		n.addr = ln.Addr().String()
	}
	if len(n.voters) == 0 {
		n.voters[cfg.Self.NodeID] = n.addr
	}
	n.rpc = newRPCServer(n.ctx, n.handle)
	n.mux = newMux(ln, n.rpc.serve, n.addr)
	n.mux.serverTLS, n.mux.clientTLS, n.mux.log = cfg.ServerTLS, cfg.ClientTLS, n.log
	n.client = newRPCClient(cfg.RPCTimeout, cfg.ClientTLS)
	n.liveClient = newRPCClient(cfg.RPCTimeout, cfg.ClientTLS)

	hl := newRaftLogger(n.log, hclog.Warn)
	n.trans = cfg.Transport
	if n.trans == nil {
		n.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream: raftLayer{n.mux}, MaxPool: 3, Timeout: 10 * time.Second, Logger: hl,
		})
		n.ownsTrans = true
	}
	logs, stable, snaps := cfg.LogStore, cfg.StableStore, cfg.SnapshotStore
	if logs == nil || stable == nil || snaps == nil {
		if err := vfs.MkdirAllDurable(vfs.OS, cfg.Dir); err != nil {
			return nil, fmt.Errorf("controller: create %s: %w", cfg.Dir, err)
		}
		if n.bolt, err = raftboltdb.New(raftboltdb.Options{Path: filepath.Join(cfg.Dir, "raft.db")}); err != nil {
			return nil, fmt.Errorf("controller: open raft log: %w", err)
		}
		if snaps, err = raft.NewFileSnapshotStoreWithLogger(cfg.Dir, snapshotsRetained, hl); err != nil {
			return nil, fmt.Errorf("controller: open snapshots: %w", err)
		}
		logs, stable = n.bolt, n.bolt
	}

	rc := raft.DefaultConfig()
	rc.LocalID = serverID(cfg.Self.NodeID)
	rc.HeartbeatTimeout = cfg.RaftTimeout
	rc.ElectionTimeout = cfg.RaftTimeout
	rc.LeaderLeaseTimeout = cfg.RaftTimeout / 2
	if _, self := n.voters[cfg.Self.NodeID]; self && len(n.voters) == 1 && cfg.RaftTimeout > soleVoterElection {
		n.soleVoter = true
		rc.HeartbeatTimeout = soleVoterElection
		rc.ElectionTimeout = soleVoterElection
		rc.LeaderLeaseTimeout = min(rc.LeaderLeaseTimeout, soleVoterElection)
	}
	rc.CommitTimeout = min(cfg.RaftTimeout/10, 50*time.Millisecond)
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	// a voter removed at run time (voters.go) goes on as a non-voter, applying the log, when it is a
	// live broker: Raft's default would shut it down once the change commits
	rc.ShutdownOnRemove = false
	rc.Logger = hl

	n.fsm = newFSM(NewImage("", NoLeader), s.publish)
	s.img.Store(n.fsm.cur.Load())
	hasState, err := raft.HasExistingState(logs, stable, snaps)
	if err != nil {
		return nil, fmt.Errorf("controller: read raft state: %w", err)
	}
	if n.r, err = raft.NewRaft(rc, n.fsm, logs, stable, snaps, n.trans); err != nil {
		return nil, fmt.Errorf("controller: start raft: %w", err)
	}
	if _, voter := n.voters[cfg.Self.NodeID]; voter && !hasState {
		var servers []raft.Server
		for id, addr := range n.voters {
			servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: serverID(id), Address: raft.ServerAddress(addr)})
		}
		if err := n.r.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			return nil, fmt.Errorf("controller: bootstrap: %w", err)
		}
	}
	// The listener's connections wait in its backlog until Raft exists to answer them.
	n.wg.Add(3)
	go func() {
		defer n.wg.Done()
		n.mux.run()
	}()
	go func() {
		defer n.wg.Done()
		n.watchLeadership()
	}()
	go func() {
		defer n.wg.Done()
		n.brokerLoop()
	}()
	return s, nil
}

func serverID(id int32) raft.ServerID { return raft.ServerID(strconv.Itoa(int(id))) }

func parseServerID(id raft.ServerID) (int32, bool) {
	n, err := strconv.ParseInt(string(id), 10, 32)
	return int32(n), err == nil
}

// close stops the loops, Raft, the listener and the stores. It is safe on a half-opened node.
func (n *raftNode) close() {
	n.cancel()
	if n.r != nil {
		_ = n.r.Shutdown().Error()
	}
	if n.rpc != nil {
		n.rpc.close()
	}
	if n.ownsTrans {
		if c, ok := n.trans.(raft.WithClose); ok {
			_ = c.Close()
		}
	}
	if n.mux != nil {
		n.mux.close()
	}
	n.wg.Wait()
	if n.client != nil {
		n.client.close()
		n.liveClient.close()
	}
	if n.bolt != nil {
		_ = n.bolt.Close()
	}
}

func (n *raftNode) isLeader() bool { return n.r.State() == raft.Leader }

// leaderAddr returns the address of the leader this node knows of, "" if none.
func (n *raftNode) leaderAddr() string {
	addr, _ := n.r.LeaderWithID()
	return string(addr)
}

func (n *raftNode) notLeader() error { return &leaderHint{addr: n.leaderAddr()} }

// watchLeadership runs the leader duties while this node leads.
func (n *raftNode) watchLeadership() {
	var duty *leaderDuty
	defer func() { duty.stop() }()
	for {
		select {
		case <-n.ctx.Done():
			return
		case leader := <-n.r.LeaderCh():
			duty.stop()
			duty = nil
			if leader {
				n.endSoleVoterElection()
				duty = n.startDuty()
			}
		}
	}
}

// endSoleVoterElection gives a sole voter, once leader, the configured Raft timeouts back: the leader
// heartbeats its non-voters every tenth of the heartbeat timeout, and a short one would only cost.
func (n *raftNode) endSoleVoterElection() {
	if !n.soleVoter {
		return
	}
	rc := n.r.ReloadableConfig()
	rc.HeartbeatTimeout, rc.ElectionTimeout = n.cfg.RaftTimeout, n.cfg.RaftTimeout
	if err := n.r.ReloadConfig(rc); err != nil {
		n.log.Warn("controller: restoring the Raft timeouts after the sole voter's election", "err", err)
		return
	}
	n.soleVoter = false
}

// leaderDuty is one run of lead, for one term of leadership.
type leaderDuty struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (n *raftNode) startDuty() *leaderDuty {
	ctx, cancel := context.WithCancel(n.ctx)
	d := &leaderDuty{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(d.done)
		n.lead(ctx)
	}()
	return d
}

// stop ends the duty and waits for it; a nil duty is a no-op.
func (d *leaderDuty) stop() {
	if d == nil {
		return
	}
	d.cancel()
	<-d.done
}

// lead is the leader's loop: it records the new controller, gives every broker a fresh session,
// then fences brokers whose sessions expire.
func (n *raftNode) lead(ctx context.Context) {
	if err := n.r.Barrier(n.cfg.RPCTimeout).Error(); err != nil {
		return
	}
	cmd := BecomeController{NodeID: n.cfg.Self.NodeID, Epoch: int64(n.r.CurrentTerm())}
	if n.store.Image().ClusterID == "" {
		id, err := n.store.newID()
		if err != nil {
			n.log.Error("controller: cluster id", "err", err)
			return
		}
		cmd.ClusterID = id.String()
	}
	for {
		_, _, err := n.applyLocal(cmd)
		if err == nil {
			break
		}
		n.log.Warn("controller: become controller", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-n.cfg.Clock.After(n.cfg.HeartbeatInterval):
		}
	}
	var ids []int32
	for _, b := range n.store.Image().Brokers {
		ids = append(ids, b.NodeID)
	}
	n.sess.reset(n.cfg.Clock.Now(), ids)
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.cfg.Clock.After(n.cfg.HeartbeatInterval):
		}
		n.checkSessions()
	}
}

// checkSessions fences every unfenced broker whose session expired.
func (n *raftNode) checkSessions() {
	img := n.store.Image()
	for _, id := range n.sess.expired(n.cfg.Clock.Now()) {
		b, ok := img.Broker(id)
		if !ok {
			n.sess.forget(id)
			continue
		}
		if b.Fenced {
			continue
		}
		if _, _, err := n.applyLocal(FenceBroker{NodeID: id}); err != nil {
			n.log.Warn("controller: fence broker", "node_id", id, "err", err)
			continue
		}
		n.log.Info("controller: fenced broker after session timeout", "node_id", id)
	}
}

// applyLocal proposes cmd through this node's Raft, which must lead, and returns once it is
// committed and applied locally.
func (n *raftNode) applyLocal(cmd Command) (*applyResult, uint64, error) {
	data, err := EncodeCommand(cmd)
	if err != nil {
		return nil, 0, err
	}
	f := n.r.Apply(data, n.cfg.RPCTimeout)
	if err := f.Error(); err != nil {
		switch {
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
			errors.Is(err, raft.ErrLeadershipTransferInProgress):
			return nil, 0, fmt.Errorf("%w: %w", n.notLeader(), err)
		case errors.Is(err, raft.ErrRaftShutdown):
			return nil, 0, fmt.Errorf("%w: %w", ErrClosed, err)
		case errors.Is(err, raft.ErrEnqueueTimeout):
			return nil, 0, fmt.Errorf("%w: %w", ErrTimeout, err)
		default:
			return nil, 0, fmt.Errorf("controller: raft apply: %w", err)
		}
	}
	res, ok := f.Response().(*applyResult)
	if !ok {
		return nil, 0, fmt.Errorf("%w: no apply result", ErrInvalidCommand)
	}
	if res.err != nil {
		return nil, 0, res.err
	}
	return res, f.Index(), nil
}

// propose runs a Store command through Raft: on the leader directly, elsewhere forwarded to the
// leader; either way it returns once this node has applied it.
func (n *raftNode) propose(ctx context.Context, build func(*Image) Command, validateOnly bool) (*Image, int64, error) {
	cur := n.store.Image()
	cmd := build(cur)
	if validateOnly {
		next, err := Apply(cur, cmd)
		return next, cur.NextProducerID, err
	}
	if n.isLeader() {
		res, _, err := n.applyLocal(cmd)
		if err != nil {
			return nil, 0, err
		}
		return res.next, res.firstProducerID, nil
	}
	data, err := EncodeCommand(cmd)
	if err != nil {
		return nil, 0, err
	}
	var resp proposeResponse
	if err := n.callLeader(ctx, n.client, methodPropose, proposeRequest{Command: data}, &resp); err != nil {
		return nil, 0, err
	}
	wctx, cancel := context.WithTimeout(ctx, n.cfg.RPCTimeout)
	defer cancel()
	if err := n.fsm.waitApplied(wctx, resp.Index); err != nil {
		return nil, 0, err
	}
	return n.store.Image(), resp.FirstProducerID, nil
}

// callLeader sends a request to the controller leader: the one this node knows of, else each
// voter in turn, following the leader hints that non-leaders answer with. On the leader itself
// the request is handled in-process.
func (n *raftNode) callLeader(ctx context.Context, c *rpcClient, method string, in, out any) error {
	if n.isLeader() {
		body, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%w: encode %s: %w", ErrRPC, method, err)
		}
		res, err := n.handle(ctx, method, body)
		if err != nil {
			return err
		}
		if out == nil || res == nil {
			return nil
		}
		data, err := json.Marshal(res)
		if err != nil {
			return fmt.Errorf("%w: encode %s: %w", ErrRPC, method, err)
		}
		return json.Unmarshal(data, out)
	}
	var candidates []string
	if a := n.leaderAddr(); a != "" {
		candidates = append(candidates, a)
	}
	for _, v := range n.cfg.Voters {
		candidates = append(candidates, v.Addr)
	}
	tried := map[string]bool{}
	lastErr := error(ErrNotController)
	for i := 0; i < len(candidates) && i < 8; i++ {
		addr := candidates[i]
		if addr == "" || addr == n.addr || tried[addr] {
			continue
		}
		tried[addr] = true
		hint, err := c.call(ctx, addr, method, in, out)
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrNotController) && !errors.Is(err, ErrRPC) && !errors.Is(err, ErrTimeout) {
			return err
		}
		lastErr = err
		if hint != "" && !tried[hint] {
			candidates = append(candidates[:i+1], append([]string{hint}, candidates[i+1:]...)...)
		}
		if ctx.Err() != nil {
			break
		}
	}
	if errors.Is(lastErr, ErrNotController) {
		return lastErr
	}
	return fmt.Errorf("%w: no leader reachable: %w", ErrNotController, lastErr)
}

// handle answers one controller RPC. Only the leader answers; other nodes reply ErrNotController
// with a hint naming the leader they know of.
func (n *raftNode) handle(ctx context.Context, method string, body json.RawMessage) (any, error) {
	if !n.isLeader() {
		return nil, n.notLeader()
	}
	switch method {
	case methodStatus:
		return n.status(), nil
	case methodRegister:
		var req registerRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, fmt.Errorf("%w: register: %w", ErrInvalidCommand, err)
		}
		return n.handleRegister(req)
	case methodHeartbeat:
		var req heartbeatRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, fmt.Errorf("%w: heartbeat: %w", ErrInvalidCommand, err)
		}
		return n.handleHeartbeat(req)
	case methodFence:
		var req fenceRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, fmt.Errorf("%w: fence: %w", ErrInvalidCommand, err)
		}
		return n.handleFence(req)
	case methodAddVoter, methodRemoveVoter:
		return n.handleVoters(method, body)
	case methodPropose:
		var req proposeRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, fmt.Errorf("%w: propose: %w", ErrInvalidCommand, err)
		}
		cmd, err := DecodeCommand(req.Command)
		if err != nil {
			return nil, err
		}
		switch cmd.(type) {
		case BecomeController, RegisterBroker, FenceBroker, UnfenceBroker:
			return nil, fmt.Errorf("%w: %T is proposed by the leader only", ErrInvalidCommand, cmd)
		}
		res, index, err := n.applyLocal(cmd)
		if err != nil {
			return nil, err
		}
		return proposeResponse{Index: index, FirstProducerID: res.firstProducerID}, nil
	default:
		return nil, fmt.Errorf("%w: unknown method %q", ErrRPC, method)
	}
}

func (n *raftNode) handleRegister(req registerRequest) (any, error) {
	b := req.Broker
	if b.Incarnation == "" {
		return nil, fmt.Errorf("%w: registration without an incarnation", ErrInvalidCommand)
	}
	cur, ok := n.store.Image().Broker(b.NodeID)
	if !ok || !sameAddress(cur, b) || cur.Incarnation != b.Incarnation || cur.Fenced {
		if _, _, err := n.applyLocal(RegisterBroker{Broker: b}); err != nil {
			return nil, err
		}
	}
	if req.RaftAddr != "" && !n.votes(b.NodeID) {
		if err := n.ensureNonvoter(b.NodeID, req.RaftAddr); err != nil {
			return nil, err
		}
	}
	n.sess.touch(b.NodeID, n.cfg.Clock.Now(), req.RaftState, req.Applied, n.r.CommitIndex())
	cur, _ = n.store.Image().Broker(b.NodeID)
	return registerResponse{Epoch: cur.Epoch}, nil
}

// ensureNonvoter adds id as a Raft non-voter at addr unless the configuration already has it there.
func (n *raftNode) ensureNonvoter(id int32, addr string) error {
	f := n.r.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("controller: raft configuration: %w", err)
	}
	for _, s := range f.Configuration().Servers {
		if s.ID == serverID(id) && string(s.Address) == addr {
			return nil
		}
	}
	if err := n.r.AddNonvoter(serverID(id), raft.ServerAddress(addr), 0, n.cfg.RPCTimeout).Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
			return fmt.Errorf("%w: %w", n.notLeader(), err)
		}
		return fmt.Errorf("controller: add non-voter %d: %w", id, err)
	}
	return nil
}

func (n *raftNode) handleHeartbeat(req heartbeatRequest) (any, error) {
	b, ok := n.store.Image().Broker(req.NodeID)
	if !ok || b.Incarnation != req.Incarnation || b.Epoch != req.Epoch {
		return nil, fmt.Errorf("%w: broker %d epoch %d", ErrStaleBroker, req.NodeID, req.Epoch)
	}
	n.sess.touch(req.NodeID, n.cfg.Clock.Now(), req.RaftState, req.Applied, n.r.CommitIndex())
	if b.Fenced {
		if _, _, err := n.applyLocal(UnfenceBroker{NodeID: req.NodeID}); err != nil && !errors.Is(err, ErrInvalidCommand) {
			return nil, err
		}
	}
	img := n.store.Image()
	b, _ = img.Broker(req.NodeID)
	return heartbeatResponse{Fenced: b.Fenced, Version: img.Version}, nil
}

// handleFence fences a broker at its own request (its data directory failed) and so moves its
// leaderships at once, instead of when its session expires. The request must name the broker's
// current incarnation and epoch.
func (n *raftNode) handleFence(req fenceRequest) (any, error) {
	b, ok := n.store.Image().Broker(req.NodeID)
	if !ok || b.Incarnation != req.Incarnation || b.Epoch != req.Epoch {
		return nil, fmt.Errorf("%w: broker %d epoch %d", ErrStaleBroker, req.NodeID, req.Epoch)
	}
	if b.Fenced {
		return struct{}{}, nil
	}
	if _, _, err := n.applyLocal(FenceBroker{NodeID: req.NodeID}); err != nil {
		return nil, err
	}
	n.log.Info("controller: fenced broker at its request", "node_id", req.NodeID)
	return struct{}{}, nil
}

// Lease reports whether this broker holds its lease — the controller leader acknowledged a heartbeat
// recently enough that it cannot have fenced the broker yet, and the broker has applied the image of
// that answer — and when the lease ends (the zero time before the first acknowledged heartbeat). A
// broker without its lease must not act as a partition leader or group coordinator: the controller may
// already have elected others (docs/controller.md, "Broker leases"). A Store opened with OpenLocal is
// its own controller and always holds it.
func (s *Store) Lease() (until time.Time, held bool) {
	if s.node == nil {
		return time.Time{}, true
	}
	until = s.node.currentLease().until
	return until, s.clock.Now().Before(until)
}

// Heard reports whether this node, as the controller leader, received a heartbeat (or registration)
// from broker id within the last heartbeat interval. A voluntary leadership move away from a broker the
// leader has not just heard from could overlap that broker's lease: cut off from the quorum, it would
// go on leading until the lease ends, not knowing of the move (docs/controller.md, "Broker leases"). A
// Store opened with OpenLocal has one broker, always heard; a node that does not lead hears no one.
func (s *Store) Heard(id int32) bool {
	if s.node == nil {
		return true
	}
	n := s.node
	if n.r.State() != raft.Leader {
		return false
	}
	ss, ok := n.sess.get(id)
	return ok && !ss.lastSeen.IsZero() && s.clock.Now().Sub(ss.lastSeen) <= n.cfg.HeartbeatInterval
}

// LeaseHeld is Lease's second result.
func (s *Store) LeaseHeld() bool {
	_, held := s.Lease()
	return held
}

// FenceSelf is a broker's controlled exit after its data directory failed (docs/architecture.md,
// durability contract rule 4): this node stops registering and heartbeating for good, and the
// controller leader fences it at once (FenceBroker), electing new leaders from the ISR for every
// partition it led, instead of after its session expires. Call it once, before shutting the node
// down; if it fails (no leader reachable within ctx), the silence of the heartbeats fences the
// broker when its session expires. A node that restarts registers a new incarnation and is
// unfenced. A Store opened with OpenLocal has no quorum to tell: FenceSelf returns nil.
func (s *Store) FenceSelf(ctx context.Context) error {
	if s.node == nil {
		return nil
	}
	if s.closed.Load() {
		return ErrClosed
	}
	return s.node.fenceSelf(ctx)
}

// fenceSelf stops this broker's registrations and heartbeats for good, waits (within ctx) for the one in
// flight, then asks the leader to fence it. A broker that never registered has nothing to fence.
func (n *raftNode) fenceSelf(ctx context.Context) error {
	n.liveMu.Lock()
	n.retired = true
	calling := n.calling
	n.liveMu.Unlock()
	if calling != nil {
		select {
		case <-calling:
		case <-ctx.Done():
			return fmt.Errorf("controller: fence: waiting for the heartbeat in flight: %w", ctx.Err())
		}
	}
	epoch := n.brokerEpoch.Load()
	if epoch == 0 {
		return nil
	}
	req := fenceRequest{NodeID: n.cfg.Self.NodeID, Incarnation: n.incarnation, Epoch: epoch}
	return n.callLeader(ctx, n.liveClient, methodFence, req, nil)
}

// brokerLoop registers this broker with the controller leader (retrying every heartbeat interval
// until a leader answers, and at once whenever the image changes meanwhile, which is how a new
// controller leader shows: a sole voter registers right after electing itself), then heartbeats, the
// first time right after the registration, since a registered broker stays fenced until its first
// heartbeat; a stale-broker answer makes it register again. Once fenceSelf has retired the broker, it
// neither registers nor heartbeats.
func (n *raftNode) brokerLoop() {
	changed, stop := n.store.Subscribe()
	defer stop()
	for {
		if n.liveOnce() {
			continue
		}
		var imageChanged <-chan struct{}
		if n.brokerEpoch.Load() == 0 {
			imageChanged = changed
		}
		select {
		case <-n.ctx.Done():
			return
		case <-imageChanged:
		case <-n.cfg.Clock.After(n.cfg.HeartbeatInterval):
		}
	}
}

// liveOnce registers this broker, or heartbeats once it is registered, unless it is retired. It
// reports whether it has just registered.
func (n *raftNode) liveOnce() (registered bool) {
	n.liveMu.Lock()
	if n.retired {
		n.liveMu.Unlock()
		return false
	}
	calling := make(chan struct{})
	n.calling = calling
	n.liveMu.Unlock()
	defer func() {
		n.liveMu.Lock()
		n.calling = nil
		n.liveMu.Unlock()
		close(calling)
	}()
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.liveCallTimeout())
	defer cancel()
	sent := n.cfg.Clock.Now()
	if n.brokerEpoch.Load() == 0 {
		self := n.cfg.Self
		self.Incarnation = n.incarnation
		var resp registerResponse
		err := n.callLeader(ctx, n.liveClient, methodRegister, registerRequest{
			Broker: self, RaftAddr: n.addr, RaftState: n.r.State().String(), Applied: n.fsm.applied.Load(),
		}, &resp)
		if err == nil && resp.Epoch > 0 {
			n.brokerEpoch.Store(resp.Epoch)
			n.renewLease(sent, resp.Epoch)
			// WaitReady watches subscriptions; registration is part of being ready.
			n.store.notify()
			return true
		}
		return false
	}
	req := heartbeatRequest{
		NodeID: n.cfg.Self.NodeID, Incarnation: n.incarnation, Epoch: n.brokerEpoch.Load(),
		RaftState: n.r.State().String(), Applied: n.fsm.applied.Load(),
	}
	var resp heartbeatResponse
	err := n.callLeader(ctx, n.liveClient, methodHeartbeat, req, &resp)
	switch {
	case errors.Is(err, ErrStaleBroker):
		n.brokerEpoch.Store(0)
	case err == nil && !resp.Fenced:
		n.renewLease(sent, resp.Version)
	}
	return false
}

// brokerLease is how long this broker may act as a leader. An acknowledged heartbeat (or registration)
// sent at t gives until = t + session timeout - one heartbeat interval: the leader fences the broker no
// sooner than a session timeout after it received that heartbeat, so the lease ends before another
// broker can be elected in this one's place (docs/controller.md, "Broker leases"). The answer counts
// only once the broker has applied the image the leader had when it answered (version): an image that
// moved the broker's leaderships while it was cut off must reach it before it leads again. Until
// then the answer waits in pending and the previous lease stands.
//
// Several answers can wait at once: over a slow link the broker applies the images a round trip or
// more behind the leader, so every answer names a version the broker has not applied yet. Each waits
// for its own version, oldest first; keeping only the newest would renew nothing for as long as the
// images move.
type brokerLease struct {
	until time.Time
	// pending are the answers not yet counted, by increasing version (and until).
	pending []pendingLease
}

type pendingLease struct {
	until   time.Time
	version int64
}

// pendingLeasesMax bounds the answers waiting for their images: a broker that many heartbeats behind
// lets the oldest go, which only makes its lease end sooner.
const pendingLeasesMax = 64

// renewLease records an acknowledged heartbeat sent at sent, answered at image version.
func (n *raftNode) renewLease(sent time.Time, version int64) {
	cur := n.currentLease()
	pending := append(slices.Clone(cur.pending), pendingLease{
		until: sent.Add(n.cfg.SessionTimeout - n.cfg.HeartbeatInterval), version: version})
	if len(pending) > pendingLeasesMax {
		pending = pending[len(pending)-pendingLeasesMax:]
	}
	n.lease.Store(&brokerLease{until: cur.until, pending: pending})
}

// currentLease returns the lease, first counting every pending answer whose image this broker has
// applied. Only brokerLoop stores new pending answers; promotions race only with each other and agree.
func (n *raftNode) currentLease() brokerLease {
	l := n.lease.Load()
	if l == nil {
		return brokerLease{}
	}
	applied := n.store.Image().Version
	i := 0
	for i < len(l.pending) && l.pending[i].version <= applied {
		i++
	}
	if i == 0 {
		return *l
	}
	promoted := &brokerLease{until: l.until, pending: l.pending[i:]}
	if u := l.pending[i-1].until; u.After(promoted.until) {
		promoted.until = u
	}
	if n.lease.CompareAndSwap(l, promoted) {
		return *promoted
	}
	return n.currentLease()
}
