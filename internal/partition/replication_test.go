package partition

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/storage"
	"github.com/weir-mq/weir/internal/vfs"
)

// simCluster is an in-process cluster: one Manager per node on its own in-memory filesystem, one
// shared image changed with controller.Apply (the controller's own pure function), and a transport
// that calls the leader's replicas directly. Nodes can be taken down (unreachable, no image updates)
// and brought back.
type simCluster struct {
	t     *testing.T
	mu    sync.Mutex
	img   *controller.Image
	nodes map[int32]*simNode
	clock *simClock
}

// simClock is a settable clock whose After is real: only the fetchers' back-off waits on it.
type simClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *simClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *simClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// advance moves the clock and returns the new time.
func (c *simClock) advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

type simNode struct {
	id   int32
	m    *Manager
	fs   *vfs.Mem
	down bool
	isr  chan time.Time
}

func newSimCluster(t *testing.T, n int) *simCluster {
	c := &simCluster{t: t, img: controller.NewImage("sim", 1), nodes: map[int32]*simNode{},
		clock: &simClock{t: time.UnixMilli(1e12)}}
	for id := int32(1); id <= int32(n); id++ {
		c.apply(controller.RegisterBroker{Broker: controller.Broker{NodeID: id, Host: "n", Port: id, Incarnation: "a"}})
	}
	for id := int32(1); id <= int32(n); id++ {
		c.startNode(id)
	}
	t.Cleanup(func() {
		for _, nd := range c.nodes {
			if nd.m != nil {
				_ = nd.m.Close()
			}
		}
	})
	return c
}

func (c *simCluster) startNode(id int32) {
	nd := c.nodes[id]
	if nd == nil {
		nd = &simNode{id: id, fs: vfs.NewMem()}
		c.nodes[id] = nd
	}
	nd.isr = make(chan time.Time)
	m, err := NewManager("/data", ManagerOptions{FS: nd.fs, Clock: c.clock, Logger: quiet, NodeID: id, ISR: c,
		Transport: simTransport{c}, MaintainTicks: make(chan time.Time), ISRTicks: nd.isr, ReplicaLagMax: time.Second})
	if err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	nd.m, nd.down = m, false
	img := c.img
	c.mu.Unlock()
	if err := m.Reconcile(img); err != nil {
		c.t.Fatal(err)
	}
}

// crash stops a node's Manager as a kill -9 would leave its disk: only synced bytes survive.
func (c *simCluster) crash(id int32) {
	nd := c.nodes[id]
	c.mu.Lock()
	nd.down = true
	m := nd.m
	nd.m = nil
	crashed := nd.fs.CrashClone(rand.New(rand.NewPCG(uint64(id), 1)), vfs.CrashOptions{})
	c.mu.Unlock()
	_ = m.Close()
	nd.fs = crashed
}

// apply changes the image and publishes it to every node that is up.
func (c *simCluster) apply(cmd controller.Command) {
	c.t.Helper()
	c.mu.Lock()
	img, err := controller.Apply(c.img, cmd)
	if err != nil {
		c.mu.Unlock()
		c.t.Fatalf("apply %T: %v", cmd, err)
	}
	c.img = img
	c.mu.Unlock()
	c.publish(img)
}

func (c *simCluster) publish(img *controller.Image) {
	for _, nd := range c.nodes {
		c.mu.Lock()
		m, down := nd.m, nd.down
		c.mu.Unlock()
		if m != nil && !down {
			_ = m.Reconcile(img)
		}
	}
}

// AlterPartition is the controller's side of ISR changes.
func (c *simCluster) AlterPartition(_ context.Context, req controller.AlterPartition) (*controller.PartitionState, error) {
	c.mu.Lock()
	img, err := controller.Apply(c.img, req)
	if err != nil {
		c.mu.Unlock()
		return nil, err
	}
	c.img = img
	c.mu.Unlock()
	go c.publish(img)
	st, _ := img.Topics[req.Topic].Partition(req.Partition)
	return st, nil
}

func (c *simCluster) state(topic string, p int32) *controller.PartitionState {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, _ := c.img.Topics[topic].Partition(p)
	return st
}

func (c *simCluster) createTopic(name string, replicas []int32, minISR int) {
	c.apply(controller.CreateTopic{Name: name, ID: controller.TopicID{1, byte(len(name))}, Partitions: 1,
		ReplicationFactor: int16(len(replicas)), Replicas: [][]int32{replicas},
		Configs: map[string]string{controller.ConfigMinInsyncReplicas: strconv.Itoa(minISR)}})
}

func (c *simCluster) replica(id int32, topic string) *Replica {
	c.t.Helper()
	r, ok := c.nodes[id].m.Replica(topic, 0)
	if !ok {
		c.t.Fatalf("node %d hosts no %s-0", id, topic)
	}
	return r
}

// simTransport calls the leader node's replicas as the API layer would.
type simTransport struct{ c *simCluster }

func (t simTransport) Dial(_ context.Context, addr string) (LeaderConn, error) {
	i := strings.LastIndexByte(addr, ':')
	id, err := strconv.Atoi(addr[i+1:])
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrLeaderUnreachable, addr)
	}
	return &simConn{c: t.c, id: int32(id)}, nil
}

type simConn struct {
	c  *simCluster
	id int32
}

func (s *simConn) node() (*Manager, error) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	nd := s.c.nodes[s.id]
	if nd == nil || nd.down || nd.m == nil {
		return nil, fmt.Errorf("%w: node %d down", ErrLeaderUnreachable, s.id)
	}
	return nd.m, nil
}

func (s *simConn) Close() error { return nil }

func (s *simConn) Fetch(ctx context.Context, req FetchRequest) ([]FetchedPartition, error) {
	m, err := s.node()
	if err != nil {
		return nil, err
	}
	var out []FetchedPartition
	var watch []*Replica
	for _, p := range req.Partitions {
		fp := FetchedPartition{Topic: p.Topic, Partition: p.Partition, HighWatermark: -1, LogStartOffset: -1}
		r, ok := m.Replica(p.Topic, p.Partition)
		if !ok {
			fp.Err = ErrNotLeader
			out = append(out, fp)
			continue
		}
		d, readable, err := r.FollowerFetch(req.ReplicaID, p.FetchOffset, p.CurrentLeaderEpoch, p.LastFetchedEpoch)
		fp.HighWatermark, fp.LogStartOffset = r.HighWatermark(), r.LogStartOffset()
		switch {
		case err != nil:
			fp.Err = err
		case !readable:
			fp.Diverging = &d
		default:
			limit := 1 << 20
			if p.MaxBytes > 0 {
				limit = min(limit, int(p.MaxBytes))
			}
			res, err := r.ReadReplica(p.FetchOffset, limit)
			fp.Err, fp.Records, fp.HighWatermark = err, res.Records, r.HighWatermark()
			watch = append(watch, r)
		}
		out = append(out, fp)
	}
	empty := true
	for _, fp := range out {
		if fp.Err != nil || fp.Diverging != nil || len(fp.Records) > 0 {
			empty = false
		}
	}
	if empty && len(watch) > 0 {
		// Park briefly, as a leader parks a fetch with nothing new, then let the fetcher come back.
		ch := make(chan struct{}, 1)
		for _, r := range watch {
			defer r.Watch(ch)()
		}
		select {
		case <-ch:
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	// A node taken down while the fetch was served is unreachable for its answer too: what it read
	// after that (a batch the test appends for nobody to fetch) never reaches the follower.
	if _, err := s.node(); err != nil {
		return nil, err
	}
	return out, nil
}

func (s *simConn) OffsetForLeaderEpoch(_ context.Context, req EpochRequest) (EpochEnd, error) {
	m, err := s.node()
	if err != nil {
		return EpochEnd{}, err
	}
	r, ok := m.Replica(req.Topic, req.Partition)
	if !ok {
		return EpochEnd{}, ErrNotLeader
	}
	return r.LeaderEndOffsetForEpoch(req.CurrentLeaderEpoch, req.LeaderEpoch)
}

// produce appends on the partition's current leader with acks=all and waits.
func (c *simCluster) produce(topic string, s batchSpec) (Appended, error) {
	c.t.Helper()
	leader := c.state(topic, 0).Leader
	r := c.replica(leader, topic)
	a, wait, err := r.AppendAcks(s.checked(), AcksAll)
	if err != nil {
		return a, err
	}
	return a, wait(testCtx(c.t))
}

// eventually polls cond; a replication step needs a fetch round or two.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx := testCtx(t)
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("never: %s", what)
		case <-time.After(time.Millisecond):
		}
	}
}

// logBytes is the whole log of a replica, for comparing replicas batch by batch.
func logBytes(t *testing.T, r *Replica) []byte {
	t.Helper()
	b, err := r.log.Read(r.LogStartOffset(), 1<<30, r.LogEndOffset())
	if err != nil && !errors.Is(err, storage.ErrOffsetOutOfRange) {
		t.Fatal(err)
	}
	return b
}

func sameLogs(t *testing.T, c *simCluster, topic string, ids ...int32) {
	t.Helper()
	want := logBytes(t, c.replica(ids[0], topic))
	for _, id := range ids[1:] {
		eventually(t, fmt.Sprintf("node %d's log equals node %d's", id, ids[0]), func() bool {
			return bytes.Equal(logBytes(t, c.replica(id, topic)), want)
		})
	}
}

func TestReplicationAcksAllReachesEveryISRMember(t *testing.T) {
	c := newSimCluster(t, 3)
	c.createTopic("t", []int32{1, 2, 3}, 2)
	for i := range 5 {
		a, err := c.produce("t", plain(2, int64(i)))
		if err != nil {
			t.Fatal(err)
		}
		if a.BaseOffset != int64(2*i) {
			t.Fatalf("append %d at %d", i, a.BaseOffset)
		}
		// acks=all returned: the high watermark covers the batch, so every ISR member has it durably.
		for _, id := range []int32{2, 3} {
			if r := c.replica(id, "t"); r.log.DurableEndOffset() < a.LastOffset+1 {
				t.Fatalf("node %d durable end %d after the ack of %d", id, r.log.DurableEndOffset(), a.LastOffset)
			}
		}
	}
	sameLogs(t, c, "t", 1, 2, 3)
	if hw := c.replica(1, "t").HighWatermark(); hw != 10 {
		t.Fatalf("leader high watermark %d", hw)
	}
	if err := c.replica(2, "t").CheckLeader(-1); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("a follower serves clients: %v", err)
	}
	if _, _, err := c.replica(2, "t").AppendAcks(plain(1, 1).checked(), AcksLeader); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("a follower took a produce: %v", err)
	}
}

func TestReplicationNotEnoughReplicas(t *testing.T) {
	c := newSimCluster(t, 3)
	c.createTopic("t", []int32{1, 2, 3}, 2)
	if _, err := c.produce("t", plain(1, 1)); err != nil {
		t.Fatal(err)
	}
	c.crash(2)
	c.apply(controller.FenceBroker{NodeID: 2})
	c.crash(3)
	c.apply(controller.FenceBroker{NodeID: 3})
	st := c.state("t", 0)
	if !slices.Equal(st.ISR, []int32{1}) || len(st.ELR) == 0 {
		t.Fatalf("state after fencing two followers: %+v", st)
	}
	leo := c.replica(1, "t").LogEndOffset()
	if _, err := c.produce("t", plain(1, 2)); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("acks=all with ISR %v: %v", st.ISR, err)
	}
	if c.replica(1, "t").LogEndOffset() != leo {
		t.Fatal("a refused acks=all batch was appended")
	}
	if _, wait, err := c.replica(1, "t").AppendAcks(plain(1, 3).checked(), AcksLeader); err != nil || wait(testCtx(t)) != nil {
		t.Fatalf("acks=1 with a small ISR: %v", err)
	}
}

func TestReplicationZombieLeaderCannotAcknowledge(t *testing.T) {
	c := newSimCluster(t, 3)
	c.createTopic("t", []int32{1, 2, 3}, 2)
	if _, err := c.produce("t", plain(1, 1)); err != nil {
		t.Fatal(err)
	}
	old := c.replica(1, "t")
	// The leader is cut off (SIGSTOP): followers cannot reach it, and it sees no image.
	c.mu.Lock()
	c.nodes[1].down = true
	c.mu.Unlock()
	_, wait, err := old.AppendAcks(plain(1, 2).checked(), AcksAll)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- wait(testCtx(t)) }()
	c.apply(controller.FenceBroker{NodeID: 1})
	st := c.state("t", 0)
	if st.Leader == 1 {
		t.Fatalf("no new leader: %+v", st)
	}
	if _, err := c.produce("t", plain(1, 3)); err != nil {
		t.Fatalf("new leader %d: %v", st.Leader, err)
	}
	select {
	case err := <-done:
		t.Fatalf("the zombie's wait ended before it saw the new epoch: %v", err)
	default:
	}
	// SIGCONT: the old leader sees the image and becomes a follower; its waiter fails.
	c.mu.Lock()
	c.nodes[1].down = false
	img := c.img
	c.mu.Unlock()
	if err := c.nodes[1].m.Reconcile(img); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrNotLeader) {
		t.Fatalf("zombie wait: %v", err)
	}
	// It truncates its unacknowledged batch and follows the new leader's log.
	sameLogs(t, c, "t", st.Leader, 1)
}

// TestReplicationDoubleFailover is KIP-101's case: a follower that restarts must not truncate to its
// own high watermark, or a quick second failover loses acknowledged records.
func TestReplicationDoubleFailover(t *testing.T) {
	c := newSimCluster(t, 2)
	c.createTopic("t", []int32{1, 2}, 1)
	for i := range 3 {
		if _, err := c.produce("t", plain(1, int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	// Node 2 has every record, but its high watermark may lag the leader's by a fetch round.
	c.crash(2)
	c.startNode(2)
	if got := c.replica(2, "t").LogEndOffset(); got != 3 {
		t.Fatalf("follower log end after restart %d", got)
	}
	c.crash(1)
	c.apply(controller.FenceBroker{NodeID: 1})
	st := c.state("t", 0)
	if st.Leader != 2 {
		t.Fatalf("leader %d after the first leader died", st.Leader)
	}
	r := c.replica(2, "t")
	if r.LogEndOffset() != 3 {
		t.Fatalf("new leader lost acknowledged records: log end %d", r.LogEndOffset())
	}
	if _, err := c.produce("t", plain(1, 9)); err != nil {
		t.Fatal(err)
	}
	c.startNode(1)
	c.apply(controller.UnfenceBroker{NodeID: 1})
	sameLogs(t, c, "t", 2, 1)
	if r.LogEndOffset() != 4 {
		t.Fatalf("log end %d", r.LogEndOffset())
	}
}

// TestReplicationBackToBackElections is KIP-279's case: leadership changes twice with no write in
// between while a follower holds records of an epoch the others never had.
func TestReplicationBackToBackElections(t *testing.T) {
	c := newSimCluster(t, 3)
	c.createTopic("t", []int32{1, 2, 3}, 1)
	if _, err := c.produce("t", plain(2, 1)); err != nil {
		t.Fatal(err)
	}
	sameLogs(t, c, "t", 1, 2, 3)
	// Leader 1 appends a batch nobody fetches, then dies.
	c.mu.Lock()
	c.nodes[1].down = true
	c.mu.Unlock()
	if _, _, err := c.replica(1, "t").AppendAcks(plain(3, 2).checked(), AcksLeader); err != nil {
		t.Fatal(err)
	}
	c.crash(1)
	c.apply(controller.FenceBroker{NodeID: 1})
	first := c.state("t", 0)
	// The new leader dies before writing anything; a third one is elected.
	c.crash(first.Leader)
	c.apply(controller.FenceBroker{NodeID: first.Leader})
	second := c.state("t", 0)
	if second.Leader == controller.NoLeader || second.LeaderEpoch != first.LeaderEpoch+1 {
		t.Fatalf("second election: %+v", second)
	}
	c.startNode(1)
	c.apply(controller.UnfenceBroker{NodeID: 1})
	sameLogs(t, c, "t", second.Leader, 1)
	if got := c.replica(1, "t").LogEndOffset(); got != 2 {
		t.Fatalf("old leader kept its unreplicated batch: log end %d", got)
	}
	if _, err := c.produce("t", plain(1, 3)); err != nil {
		t.Fatal(err)
	}
	sameLogs(t, c, "t", second.Leader, 1)
}

func TestReplicationIdempotentProducerAcrossFailover(t *testing.T) {
	c := newSimCluster(t, 3)
	c.createTopic("t", []int32{1, 2, 3}, 2)
	first, err := c.produce("t", idem(7, 0, 0, 3))
	if err != nil {
		t.Fatal(err)
	}
	c.crash(1)
	c.apply(controller.FenceBroker{NodeID: 1})
	dup, err := c.produce("t", idem(7, 0, 0, 3))
	if err != nil {
		t.Fatal(err)
	}
	if !dup.Duplicate || dup.BaseOffset != first.BaseOffset {
		t.Fatalf("retry on the new leader: %+v, first %+v", dup, first)
	}
	if _, err := c.produce("t", idem(7, 0, 5, 1)); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap on the new leader: %v", err)
	}
}

func TestReplicationISRShrinkAndExpand(t *testing.T) {
	c := newSimCluster(t, 3)
	c.createTopic("t", []int32{1, 2, 3}, 2)
	if _, err := c.produce("t", plain(1, 1)); err != nil {
		t.Fatal(err)
	}
	sameLogs(t, c, "t", 1, 2, 3)
	// Node 3 stops fetching (alive, but unreachable); after the lag limit the leader drops it.
	c.crash(3)
	if _, _, err := c.replica(1, "t").AppendAcks(plain(1, 2).checked(), AcksLeader); err != nil {
		t.Fatal(err)
	}
	c.nodes[1].isr <- c.clock.advance(2 * time.Second)
	eventually(t, "ISR without node 3", func() bool { return slices.Equal(c.state("t", 0).ISR, []int32{1, 2}) })
	// Node 2 lags too, but the ISR never shrinks below min.insync.replicas.
	c.crash(2)
	now := c.clock.advance(2 * time.Second)
	c.nodes[1].isr <- now
	c.nodes[1].isr <- now
	if isr := c.state("t", 0).ISR; !slices.Equal(isr, []int32{1, 2}) {
		t.Fatalf("ISR shrank to %v with min.insync.replicas 2", isr)
	}
	// Both come back, catch up and rejoin.
	c.startNode(2)
	c.startNode(3)
	eventually(t, "ISR back to three", func() bool { return len(c.state("t", 0).ISR) == 3 })
	if _, err := c.produce("t", plain(1, 3)); err != nil {
		t.Fatal(err)
	}
	sameLogs(t, c, "t", 1, 2, 3)
}

func TestReplicationTruncationPoint(t *testing.T) {
	// The local epoch cache: epoch 1 from 0, epoch 3 from 10, epoch 5 from 20; log end 30.
	local := func(e int32) (int32, int64) {
		switch {
		case e < 1:
			return e, 0
		case e < 3:
			return 1, 10
		case e < 5:
			return 3, 20
		}
		return 5, 30
	}
	cases := []struct {
		leader EpochEnd
		want   int64
	}{
		{EpochEnd{5, 30}, 30},  // same log
		{EpochEnd{5, 25}, 25},  // the leader's epoch 5 ended earlier
		{EpochEnd{5, 40}, 30},  // the leader has more: nothing to cut
		{EpochEnd{3, 25}, 20},  // the leader never had epoch 5: cut where local epoch 3 ends
		{EpochEnd{4, 22}, 20},  // the leader's epoch 4 is not here: local epoch 3 ends at 20
		{EpochEnd{1, 8}, 8},    // the leader's epoch 1 ended before local's
		{EpochEnd{-1, -1}, 0},  // undefined: to the log start, never to a high watermark
		{EpochEnd{0, 0}, 0},    // nothing in common
		{EpochEnd{3, 100}, 20}, // more of epoch 3 on the leader, but local epoch 5 follows at 20
	}
	for _, tc := range cases {
		if got := truncationPoint(tc.leader, local, 0, 30); got != tc.want {
			t.Errorf("leader %+v: truncate to %d, want %d", tc.leader, got, tc.want)
		}
	}
}

func TestReplicationShrinkISR(t *testing.T) {
	lagging := func(ids ...int32) func(int32) bool {
		return func(id int32) bool { return slices.Contains(ids, id) }
	}
	cases := []struct {
		isr    []int32
		minISR int
		lag    []int32
		want   []int32
	}{
		{[]int32{1, 2, 3}, 1, []int32{3}, []int32{1, 2}},
		{[]int32{1, 2, 3}, 1, []int32{2, 3}, []int32{1}},
		{[]int32{1, 2, 3}, 2, []int32{2, 3}, []int32{1, 2}},
		{[]int32{1, 2}, 2, []int32{2}, []int32{1, 2}},
		{[]int32{1, 2, 3}, 1, []int32{1}, []int32{1, 2, 3}}, // never the leader
		{[]int32{1}, 1, nil, []int32{1}},
	}
	for _, tc := range cases {
		if got := shrinkISR(tc.isr, 1, tc.minISR, lagging(tc.lag...)); !slices.Equal(got, tc.want) {
			t.Errorf("shrink %v min %d lagging %v: %v, want %v", tc.isr, tc.minISR, tc.lag, got, tc.want)
		}
	}
}

func TestReplicationLeaderEpochAnswers(t *testing.T) {
	r := openReplica(t, vfs.NewMem(), storage.DefaultConfig())
	appendWait(t, r, plain(2, 1)) // epoch 0: [0, 2)
	st := &controller.PartitionState{Replicas: []int32{0}, Leader: 0, LeaderEpoch: 3, ISR: []int32{0}, PartitionEpoch: 1}
	r.SetState(State{Partition: st, MinISR: 1})
	// Epoch 3 has no batch yet: it starts at the log end, and epochs 1 and 2 map to epoch 0's end.
	for _, tc := range []struct {
		ask  int32
		want EpochEnd
	}{{0, EpochEnd{0, 2}}, {2, EpochEnd{0, 2}}, {3, EpochEnd{3, 2}}, {4, EpochEnd{-1, -1}}} {
		got, err := r.LeaderEndOffsetForEpoch(3, tc.ask)
		if err != nil || got != tc.want {
			t.Errorf("epoch %d: %+v %v, want %+v", tc.ask, got, err, tc.want)
		}
	}
	if _, err := r.LeaderEndOffsetForEpoch(2, 0); !errors.Is(err, ErrFencedLeaderEpoch) {
		t.Errorf("older current epoch: %v", err)
	}
	if _, err := r.LeaderEndOffsetForEpoch(4, 0); !errors.Is(err, ErrUnknownLeaderEpoch) {
		t.Errorf("newer current epoch: %v", err)
	}
	appendWait(t, r, plain(1, 2))
	h, err := record.ParseHeader(logBytes(t, r)[len(logBytes(t, r))-len(plain(1, 2).encode()):])
	if err != nil || h.PartitionLeaderEpoch != 3 {
		t.Fatalf("batch stamped with epoch %d (%v)", h.PartitionLeaderEpoch, err)
	}
	if d, ok := r.CheckDivergence(3, 1); ok || d != (EpochEnd{0, 2}) {
		t.Errorf("consumer past the end of epoch 0 at offset 3: %+v %v", d, ok)
	}
	if _, ok := r.CheckDivergence(2, 0); !ok {
		t.Error("consumer at the end of epoch 0 diverges")
	}
}

func TestReplicationHWCheckpoint(t *testing.T) {
	hws := map[replicaKey]int64{{"a", 0}: 5, {"b-c", 12}: 0}
	got, err := parseHWCheckpoint(encodeHWCheckpoint(hws))
	if err != nil || len(got) != 2 || got[replicaKey{"a", 0}] != 5 || got[replicaKey{"b-c", 12}] != 0 {
		t.Fatalf("round trip: %v %v", got, err)
	}
	for _, bad := range []string{"", "1\n0\n", "0\n2\na 0 1\n", "0\n1\na x 1\n", "0\n1\na 0 -1\n", "0\n1\na 0\n"} {
		if _, err := parseHWCheckpoint([]byte(bad)); !errors.Is(err, storage.ErrCorruption) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
