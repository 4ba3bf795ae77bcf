package controller

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// manualClock is a TimerClock that moves only when the test advances it.
type manualClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []clockWaiter
}

type clockWaiter struct {
	at time.Time
	ch chan time.Time
}

func newManualClock() *manualClock { return &manualClock{now: time.UnixMilli(1_700_000_000_000)} }

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.waiters = append(c.waiters, clockWaiter{at: c.now.Add(d), ch: ch})
	return ch
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		w.ch <- c.now
	}
	c.waiters = kept
}

const (
	testInterval = 500 * time.Millisecond
	testSession  = 2 * time.Second
	// waitMax bounds every wait for Raft in these tests; a healthy run needs a small part of it.
	waitMax = 30 * time.Second
)

// eventually polls cond until it holds, failing the test after waitMax.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitMax)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type testNode struct {
	id     int32
	addr   string
	store  *Store
	trans  *raft.InmemTransport
	logs   *raft.InmemStore
	snaps  raft.SnapshotStore
	voter  bool
	closed bool
}

type testCluster struct {
	t      *testing.T
	clock  *manualClock
	voters []Voter
	nodes  []*testNode
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newTestCluster starts nVoters voters and nOthers non-voting brokers on raft's in-memory transport;
// the controller RPC runs on real listeners on 127.0.0.1.
func newTestCluster(t *testing.T, nVoters, nOthers int) *testCluster {
	t.Helper()
	c := &testCluster{t: t, clock: newManualClock()}
	var lns []net.Listener
	for i := 0; i < nVoters+nOthers; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		id := int32(i + 1)
		n := &testNode{id: id, addr: ln.Addr().String(), voter: i < nVoters, logs: raft.NewInmemStore(), snaps: raft.NewInmemSnapshotStore()}
		_, n.trans = raft.NewInmemTransport(raft.ServerAddress(n.addr))
		if n.voter {
			c.voters = append(c.voters, Voter{NodeID: id, Addr: n.addr})
		}
		c.nodes = append(c.nodes, n)
	}
	c.connectAll()
	for i, n := range c.nodes {
		c.open(n, lns[i])
	}
	t.Cleanup(c.closeAll)
	return c
}

func (c *testCluster) open(n *testNode, ln net.Listener) {
	c.t.Helper()
	s, err := OpenRaft(RaftConfig{
		Self:     Broker{NodeID: n.id, Host: "127.0.0.1", Port: 9000 + n.id},
		Listener: ln, Voters: c.voters, Clock: c.clock, Logger: quietLogger(),
		HeartbeatInterval: testInterval, SessionTimeout: testSession, RPCTimeout: 3 * time.Second,
		RaftTimeout: 150 * time.Millisecond,
		Transport:   n.trans, LogStore: n.logs, StableStore: n.logs, SnapshotStore: n.snaps,
	})
	if err != nil {
		c.t.Fatal(err)
	}
	n.store, n.closed = s, false
}

func (c *testCluster) connectAll() {
	for _, a := range c.nodes {
		for _, b := range c.nodes {
			if a != b {
				a.trans.Connect(raft.ServerAddress(b.addr), b.trans)
			}
		}
	}
}

// isolate cuts n off from every other node's Raft traffic (the controller RPC still works).
func (c *testCluster) isolate(n *testNode) {
	n.trans.DisconnectAll()
	for _, o := range c.nodes {
		if o != n {
			o.trans.Disconnect(raft.ServerAddress(n.addr))
		}
	}
}

func (c *testCluster) stop(n *testNode) {
	c.isolate(n)
	if !n.closed {
		_ = n.store.Close()
		n.closed = true
	}
}

func (c *testCluster) closeAll() {
	for _, n := range c.nodes {
		if !n.closed {
			_ = n.store.Close()
			n.closed = true
		}
	}
}

func (c *testCluster) live() []*testNode {
	var out []*testNode
	for _, n := range c.nodes {
		if !n.closed {
			out = append(out, n)
		}
	}
	return out
}

// leader returns the live node that leads, nil if none does.
func (c *testCluster) leader() *testNode {
	for _, n := range c.live() {
		if n.store.node.isLeader() {
			return n
		}
	}
	return nil
}

// step advances the shared clock by one heartbeat interval and waits (a bounded while) until the
// leader has heard from every live registered broker within the last interval. A broker whose loop
// was busy during the advance re-arms its timer after it and heartbeats on the next step, so the
// test never moves time more than two intervals past a live broker's last heartbeat; the session
// timeout is four.
func (c *testCluster) step() {
	c.t.Helper()
	c.clock.Advance(testInterval)
	since := c.clock.Now().Add(-testInterval)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		l := c.leader()
		if l == nil {
			return
		}
		img := l.store.Image()
		done := true
		for _, n := range c.live() {
			if _, ok := img.Broker(n.id); !ok {
				continue
			}
			if s, ok := l.store.node.sess.get(n.id); !ok || s.lastSeen.Before(since) {
				done = false
			}
		}
		if done {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stepUntil steps the clock until cond holds.
func (c *testCluster) stepUntil(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(waitMax)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out waiting for %s", what)
		}
		c.step()
		time.Sleep(5 * time.Millisecond)
	}
}

// ready steps until every live node is registered, unfenced and knows the cluster id.
func (c *testCluster) ready() {
	c.t.Helper()
	c.stepUntil("every node ready", func() bool {
		for _, n := range c.live() {
			img := n.store.Image()
			if img.ClusterID == "" || n.store.node.brokerEpoch.Load() == 0 {
				return false
			}
			for _, o := range c.live() {
				if b, ok := img.Broker(o.id); !ok || b.Fenced {
					return false
				}
			}
		}
		return true
	})
}

// converged waits until every live node holds the same image, and returns it.
func (c *testCluster) converged() *Image {
	c.t.Helper()
	var img *Image
	eventually(c.t, "images to converge", func() bool {
		var first []byte
		for i, n := range c.live() {
			data, err := encodeImage(n.store.Image())
			if err != nil {
				c.t.Fatal(err)
			}
			if i == 0 {
				first, img = data, n.store.Image()
			} else if !bytes.Equal(first, data) {
				return false
			}
		}
		return true
	})
	return img
}

// retry runs op until it stops failing with a retriable controller error.
func retry(t *testing.T, what string, op func() error) {
	t.Helper()
	deadline := time.Now().Add(waitMax)
	for {
		err := op()
		if err == nil {
			return
		}
		if !errors.Is(err, ErrNotController) && !errors.Is(err, ErrTimeout) && !errors.Is(err, ErrRPC) {
			t.Fatalf("%s: %v", what, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *testCluster) node(id int32) *testNode { return c.nodes[id-1] }

func TestRaftQuorumAgrees(t *testing.T) {
	c := newTestCluster(t, 3, 0)
	c.ready()
	ctx := context.Background()
	var followers []*testNode
	for _, n := range c.nodes {
		if n != c.leader() {
			followers = append(followers, n)
		}
	}
	if len(followers) != 2 {
		t.Fatalf("%d followers", len(followers))
	}
	// Commands from the leader and (forwarded) from both followers.
	var tp *Topic
	retry(t, "create on follower", func() (err error) {
		tp, err = followers[0].store.CreateTopicSpec(ctx, TopicSpec{Name: "orders", Partitions: 6, ReplicationFactor: 3}, false)
		return err
	})
	// The follower that asked sees its change at once.
	if got, ok := followers[0].store.Image().Topic("orders"); !ok || got.ID != tp.ID {
		t.Fatal("forwarded create not visible on the follower that asked")
	}
	leaders := map[int32]int{}
	for _, st := range tp.States {
		leaders[st.Leader]++
		seen := map[int32]bool{}
		for _, r := range st.Replicas {
			seen[r] = true
		}
		if len(seen) != 3 {
			t.Fatalf("replicas %v not on three nodes", st.Replicas)
		}
	}
	if leaders[1] != 2 || leaders[2] != 2 || leaders[3] != 2 {
		t.Fatalf("leaders not spread: %v", leaders)
	}
	if _, err := followers[1].store.CreateTopic(ctx, "orders", 1, nil, false); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("duplicate create through a follower: %v", err)
	}
	retry(t, "alter", func() error {
		return followers[1].store.AlterConfigs(ctx, "orders", map[string]string{"retention.ms": "1000"}, nil, false)
	})
	retry(t, "partitions", func() error { return c.leader().store.CreatePartitions(ctx, "orders", 9, false) })
	firsts := map[int64]bool{}
	for _, n := range c.nodes {
		retry(t, "producer ids", func() error {
			first, err := n.store.AllocateProducerIDs(ctx, 10)
			if err == nil {
				if firsts[first] {
					t.Fatalf("producer id block %d handed out twice", first)
				}
				firsts[first] = true
			}
			return err
		})
	}
	retry(t, "create tmp", func() error {
		_, err := followers[1].store.CreateTopic(ctx, "tmp", 1, nil, false)
		return err
	})
	retry(t, "delete tmp", func() error { return followers[0].store.DeleteTopic(ctx, "tmp") })
	img := c.converged()
	if img.NextProducerID != 30 || len(img.Topics) != 1 || img.Topics["orders"].Partitions != 9 || img.Topics["orders"].Configs["retention.ms"] != "1000" {
		t.Fatalf("converged image %+v", img)
	}
	st, err := followers[0].store.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.ControllerID != c.leader().id || len(st.Nodes) != 3 || len(st.Leaderless) != 0 || len(st.UnderReplicated) != 0 {
		t.Fatalf("status %+v", st)
	}
	for _, ns := range st.Nodes {
		if !ns.Voter || !ns.Registered || ns.Fenced || ns.RaftState == "" {
			t.Fatalf("node status %+v", ns)
		}
	}
}

func TestRaftLeaderPartitioned(t *testing.T) {
	c := newTestCluster(t, 3, 0)
	c.ready()
	ctx := context.Background()
	old := c.leader()
	oldEpoch := old.store.Image().ControllerEpoch
	c.isolate(old)
	var next *testNode
	eventually(t, "a new leader", func() bool {
		for _, n := range c.live() {
			if n != old && n.store.node.isLeader() {
				next = n
				return true
			}
		}
		return false
	})
	retry(t, "create after failover", func() error {
		_, err := next.store.CreateTopic(ctx, "after", 2, nil, false)
		return err
	})
	// The isolated old leader cannot commit anything through its own Raft (it steps down)...
	if _, _, err := old.store.node.applyLocal(CreateTopic{Name: "lost", ID: idB, Partitions: 1, Replicas: [][]int32{{old.id}}}); !errors.Is(err, ErrNotController) {
		t.Fatalf("apply on the isolated old leader: %v", err)
	}
	// ...but the controller RPC still reaches the new leader, so a command from its clients
	// commits; the call times out only because the isolated node cannot apply it locally yet.
	shortCtx, cancel := context.WithTimeout(ctx, time.Second)
	_, err := old.store.CreateTopic(shortCtx, "forwarded", 1, nil, false)
	cancel()
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("forwarded create from the isolated node: %v, want ErrTimeout", err)
	}
	c.connectAll()
	img := c.converged()
	if _, ok := img.Topic("forwarded"); !ok {
		t.Fatal("the forwarded topic is missing")
	}
	// The controller is next's, or a later leader's when an election timed out on a loaded machine
	// after the partition healed; never the isolated term's.
	if _, ok := img.Topic("after"); !ok || img.ControllerEpoch <= oldEpoch {
		t.Fatalf("converged image: topics %v controller %d in term %d, the isolated term %d", img.TopicNames(), img.ControllerID, img.ControllerEpoch, oldEpoch)
	}
	if _, ok := img.Topic("lost"); ok {
		t.Fatal("a command from the isolated leader survived")
	}
}

func TestRaftFencesSilentBroker(t *testing.T) {
	c := newTestCluster(t, 3, 0)
	c.ready()
	ctx := context.Background()
	retry(t, "create", func() error {
		_, err := c.node(1).store.CreateTopicSpec(ctx, TopicSpec{Name: "t", Partitions: 6, ReplicationFactor: 2}, false)
		return err
	})
	var victim *testNode
	for _, n := range c.nodes {
		if n != c.leader() {
			victim = n
			break
		}
	}
	before := c.leader().store.Image()
	c.stop(victim)
	c.stepUntil("the silent broker fenced", func() bool {
		l := c.leader()
		if l == nil {
			return false
		}
		b, _ := l.store.Image().Broker(victim.id)
		return b.Fenced
	})
	img := c.converged()
	for p, st := range img.Topics["t"].States {
		old := before.Topics["t"].States[p]
		if st.Leader == victim.id || contains(st.ISR, victim.id) {
			t.Fatalf("partition %d still has the fenced broker: %+v", p, st)
		}
		if old.Leader == victim.id {
			if !contains(old.ISR, st.Leader) || st.LeaderEpoch != old.LeaderEpoch+1 {
				t.Fatalf("partition %d: new leader %d epoch %d, old %+v", p, st.Leader, st.LeaderEpoch, old)
			}
		}
	}
	st, err := c.leader().store.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.UnderReplicated) == 0 || len(st.Leaderless) != 0 {
		t.Fatalf("status after fencing: %+v", st)
	}
}

func TestRaftNonvoterAppliesStream(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.ready()
	ctx := context.Background()
	nv := c.node(4)
	retry(t, "create via the non-voter", func() error {
		_, err := nv.store.CreateTopic(ctx, "from-nonvoter", 3, nil, false)
		return err
	})
	img := c.converged()
	if _, ok := img.Topic("from-nonvoter"); !ok || len(img.Brokers) != 4 {
		t.Fatalf("image: topics %v brokers %+v", img.TopicNames(), img.Brokers)
	}
	f := c.leader().store.node.r.GetConfiguration()
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	var suffrage []string
	for _, s := range f.Configuration().Servers {
		suffrage = append(suffrage, string(s.ID)+":"+s.Suffrage.String())
	}
	sort.Strings(suffrage)
	want := []string{"1:Voter", "2:Voter", "3:Voter", "4:Nonvoter"}
	if len(suffrage) != 4 || suffrage[3] != want[3] {
		t.Fatalf("raft configuration %v, want %v", suffrage, want)
	}
	if nv.store.node.isLeader() {
		t.Fatal("the non-voter leads")
	}
}

func TestRaftSnapshotRestore(t *testing.T) {
	c := newTestCluster(t, 1, 0)
	c.ready()
	ctx := context.Background()
	n := c.node(1)
	for _, name := range []string{"a", "b", "c"} {
		if _, err := n.store.CreateTopic(ctx, name, 2, map[string]string{"retention.ms": "5"}, false); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.store.AllocateProducerIDs(ctx, 7); err != nil {
		t.Fatal(err)
	}
	before := n.store.Image()
	// FSM level: Persist then Restore into a fresh FSM gives the same image.
	snap, err := n.store.node.fsm.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	var restored *Image
	f := newFSM(NewImage("", NoLeader), func(img *Image) { restored = img })
	if err := f.Restore(io.NopCloser(bytes.NewReader(sink.buf.Bytes()))); err != nil {
		t.Fatal(err)
	}
	assertSameImage(t, before, restored)
	if err := f.Restore(io.NopCloser(bytes.NewReader(sink.buf.Bytes()[:sink.buf.Len()/2]))); !errors.Is(err, ErrCorruptMetadata) {
		t.Fatalf("restore of a torn snapshot: %v", err)
	}

	// Node level: snapshot, restart on the same stores, and the image comes back.
	if err := n.store.node.r.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	_ = n.store.Close()
	_, n.trans = raft.NewInmemTransport(raft.ServerAddress(n.addr))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.open(n, ln)
	// The restarted node leads again and, right after, registers its broker's new incarnation: the
	// image is the snapshot's with those two commands applied.
	oldBroker, _ := before.Broker(1)
	eventually(t, "the restarted node to lead again and register", func() bool {
		b, ok := n.store.Image().Broker(1)
		return n.store.Image().ControllerEpoch > before.ControllerEpoch && ok && b.Incarnation != oldBroker.Incarnation
	})
	after := n.store.Image()
	want, err := Apply(before, BecomeController{NodeID: 1, Epoch: after.ControllerEpoch})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := after.Broker(1)
	if want, err = Apply(want, RegisterBroker{Broker: Broker{NodeID: 1, Host: b.Host, Port: b.Port, Rack: b.Rack, Incarnation: b.Incarnation}}); err != nil {
		t.Fatal(err)
	}
	assertSameImage(t, want, after)
}

func assertSameImage(t *testing.T, want, got *Image) {
	t.Helper()
	a, err := encodeImage(want)
	if err != nil {
		t.Fatal(err)
	}
	b, err := encodeImage(got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("images differ\nwant %s\n got %s", a, b)
	}
}

type memSink struct {
	buf bytes.Buffer
}

func (s *memSink) Write(p []byte) (int, error) { return s.buf.Write(p) }
func (s *memSink) Close() error                { return nil }
func (s *memSink) ID() string                  { return "mem" }
func (s *memSink) Cancel() error               { return nil }

// realClock is the wall clock, for the test over real TCP listeners.
type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

func TestRaftForwardingOverTCP(t *testing.T) {
	var lns []net.Listener
	var voters []Voter
	for id := int32(1); id <= 3; id++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		voters = append(voters, Voter{NodeID: id, Addr: ln.Addr().String()})
	}
	var stores []*Store
	for i, ln := range lns {
		id := int32(i + 1)
		s, err := OpenRaft(RaftConfig{
			Self: Broker{NodeID: id, Host: "127.0.0.1", Port: 9000 + id},
			Dir:  t.TempDir(), Listener: ln, Voters: voters, Clock: realClock{}, Logger: quietLogger(),
			HeartbeatInterval: 50 * time.Millisecond, SessionTimeout: 5 * time.Second, RaftTimeout: 200 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
		t.Cleanup(func() { _ = s.Close() })
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitMax)
	defer cancel()
	for _, s := range stores {
		if err := s.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var follower *Store
	for _, s := range stores {
		if !s.node.isLeader() {
			follower = s
			break
		}
	}
	// Each store is ready once its own registration is applied; the placement of three replicas
	// needs all three registered on the leader the follower forwards to.
	eventually(t, "three live brokers", func() bool {
		for _, s := range stores {
			if len(s.Image().LiveBrokers()) != 3 {
				return false
			}
		}
		return true
	})
	var tp *Topic
	retry(t, "create through a follower", func() (err error) {
		tp, err = follower.CreateTopicSpec(ctx, TopicSpec{Name: "tcp", Partitions: 3, ReplicationFactor: 3}, false)
		return err
	})
	if got, ok := follower.Image().Topic("tcp"); !ok || got.ID != tp.ID || len(got.States[0].Replicas) != 3 {
		t.Fatalf("forwarded topic on the follower: %+v", got)
	}
	if _, err := follower.CreateTopic(ctx, "tcp", 1, nil, false); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("remote error lost its sentinel: %v", err)
	}
	st, err := follower.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.ControllerID == NoLeader || len(st.Nodes) != 3 {
		t.Fatalf("status %+v", st)
	}
	eventually(t, "every node to apply the topic", func() bool {
		for _, s := range stores {
			if _, ok := s.Image().Topic("tcp"); !ok {
				return false
			}
		}
		return true
	})
}

func TestRaftRPCRejectsBadFrames(t *testing.T) {
	c := newTestCluster(t, 1, 0)
	c.ready()
	addr := c.node(1).addr
	dial := func(payload []byte) net.Conn {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Write(payload); err != nil {
			t.Fatal(err)
		}
		return conn
	}
	for _, payload := range [][]byte{
		{streamRPC, 0xff, 0xff, 0xff, 0xff},    // oversized frame
		{streamRPC, 0, 0, 0, 3, '{', '{', '{'}, // bad JSON
		{0x7f, 1, 2, 3},                        // unknown stream
	} {
		conn := dial(payload)
		if n, _ := io.ReadAll(io.LimitReader(conn, 1<<20)); len(n) != 0 {
			t.Fatalf("reply %q to a bad frame", n)
		}
		_ = conn.Close()
	}
	conn := dial(append([]byte{streamRPC, 0, 0, 0, 14}, `{"method":"x"}`...))
	var resp rpcResponse
	if err := readFrame(conn, &resp); err != nil || resp.Error == nil || !errors.Is(resp.Error.err(), ErrRPC) {
		t.Fatalf("unknown method: %+v, %v", resp, err)
	}
	_ = conn.Close()
	client := newRPCClient(time.Second, nil)
	defer client.close()
	var st Status
	if _, err := client.call(context.Background(), addr, methodStatus, struct{}{}, &st); err != nil || st.ControllerID != 1 {
		t.Fatalf("status after bad frames: %+v, %v", st, err)
	}
}

// TestRaftLeaseEndsBeforeTheFence checks the broker lease: a broker holds it while the leader
// acknowledges its heartbeats, and once they stop it runs out before the leader fences the broker (and
// so before any of its partitions gets another leader).
func TestRaftLeaseEndsBeforeTheFence(t *testing.T) {
	c := newTestCluster(t, 3, 0)
	c.ready()
	var victim *testNode
	for _, n := range c.nodes {
		if n != c.leader() {
			victim = n
			break
		}
	}
	c.stepUntil("the lease of every broker", func() bool {
		for _, n := range c.live() {
			if !n.store.LeaseHeld() {
				return false
			}
		}
		return true
	})
	c.stop(victim)
	lost := false
	c.stepUntil("the silent broker fenced", func() bool {
		l := c.leader()
		if l == nil {
			return false
		}
		b, _ := l.store.Image().Broker(victim.id)
		if b.Fenced && !lost {
			until, _ := victim.store.Lease()
			t.Fatalf("broker %d fenced at %v while its lease ran until %v", victim.id, c.clock.Now(), until)
		}
		lost = lost || !victim.store.LeaseHeld()
		return b.Fenced
	})
}

// TestRaftHeard: the controller leader has heard from every live broker within a heartbeat interval,
// stops hearing from one that went silent a heartbeat interval ago, and a follower hears no one.
func TestRaftHeard(t *testing.T) {
	c := newTestCluster(t, 3, 0)
	c.ready()
	leader := c.leader()
	var victim, other *testNode
	for _, n := range c.nodes {
		if n == leader {
			continue
		}
		if victim == nil {
			victim = n
		} else {
			other = n
		}
	}
	c.stepUntil("every broker heard", func() bool {
		l := c.leader()
		return l != nil && l.store.Heard(victim.id) && l.store.Heard(other.id) && l.store.Heard(l.id)
	})
	if other.store.Heard(victim.id) {
		t.Fatalf("follower %d says it heard broker %d", other.id, victim.id)
	}
	c.stop(victim)
	c.stepUntil("the silent broker no longer heard", func() bool {
		l := c.leader()
		return l != nil && !l.store.Heard(victim.id)
	})
	if l := c.leader(); !l.store.Heard(other.id) {
		t.Fatalf("leader %d stopped hearing live broker %d", l.id, other.id)
	}
	if b, _ := c.leader().store.Image().Broker(victim.id); b.Fenced {
		t.Fatalf("broker %d fenced before it stopped being heard", victim.id)
	}
}

// TestRaftLeaseAnswersWaitForTheirImages: when the broker applies images behind the leader (a slow
// link), each heartbeat answer counts once its own image is applied, oldest first; a later answer
// naming a newer image does not throw away an earlier one that is about to count.
func TestRaftLeaseAnswersWaitForTheirImages(t *testing.T) {
	s := &Store{}
	s.img.Store(&Image{Version: 9})
	n := &raftNode{store: s, cfg: RaftConfig{SessionTimeout: 2 * time.Second, HeartbeatInterval: 200 * time.Millisecond}}
	t0 := time.Unix(1000, 0)
	for i, v := range []int64{10, 12, 14} {
		n.renewLease(t0.Add(time.Duration(i)*200*time.Millisecond), v)
	}
	if l := n.currentLease(); !l.until.IsZero() {
		t.Fatalf("lease until %v before any answer's image is applied", l.until)
	}
	for _, c := range []struct {
		applied int64
		until   time.Time
	}{
		{11, t0.Add(1800 * time.Millisecond)},
		{13, t0.Add(2000 * time.Millisecond)},
		{20, t0.Add(2200 * time.Millisecond)},
	} {
		s.img.Store(&Image{Version: c.applied})
		if l := n.currentLease(); !l.until.Equal(c.until) {
			t.Fatalf("image %d applied: lease until %v, want %v", c.applied, l.until, c.until)
		}
	}
}
