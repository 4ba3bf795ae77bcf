package group

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/clock/clocktest"
	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/coordshard"
	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/vfs"
)

const coordDataDir = "/var/weir"

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// coordEnv is one node's metadata store and replicas on an in-memory filesystem, with coordinators
// started on them.
type coordEnv struct {
	t        *testing.T
	clock    *clocktest.Manual
	store    *controller.Store
	replicas *partition.Manager
	cfg      CoordinatorConfig
}

func newCoordEnv(t *testing.T, cfg CoordinatorConfig) *coordEnv {
	t.Helper()
	return newCoordEnvOn(t, cfg, vfs.NewMem())
}

// newCoordEnvOn is newCoordEnv on the filesystem fsys.
func newCoordEnvOn(t *testing.T, cfg CoordinatorConfig, fsys vfs.FS) *coordEnv {
	t.Helper()
	clock := clocktest.NewManual(epoch)
	store, err := controller.OpenLocal(fsys, filepath.Join(coordDataDir, "controller"), controller.Broker{NodeID: 1, Host: "h", Port: 9092}, clock)
	if err != nil {
		t.Fatal(err)
	}
	replicas, err := partition.NewManager(coordDataDir, partition.ManagerOptions{FS: fsys, Logger: quietLog, MaintainTicks: make(chan time.Time)})
	if err != nil {
		t.Fatal(err)
	}
	replicas.Submit(store.Image())
	if err := replicas.WaitReconciled(coordCtx(t), store.Image().Version); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = replicas.Close()
		_ = store.Close()
	})
	return &coordEnv{t: t, clock: clock, store: store, replicas: replicas, cfg: cfg}
}

// start returns a coordinator of the env, closed when the test ends.
func (e *coordEnv) start() *Coordinator {
	e.t.Helper()
	c, err := NewCoordinator(Options{
		NodeID: 1, Metadata: e.store, Replicas: e.replicas, Clock: e.clock,
		Rand: rand.New(rand.NewPCG(1, 2)), Config: e.cfg, Logger: quietLog,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	c.Reconcile(e.store.Image())
	e.t.Cleanup(c.Close)
	return c
}

func coordCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds; the bound is only a guard against a hang.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx := coordCtx(t)
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("never: %s", what)
		case <-time.After(time.Millisecond):
		}
	}
}

func TestCoordinatorPartitionFor(t *testing.T) {
	cases := []struct {
		group string
		n     int32
		want  int32
	}{
		{"", 50, 0},
		{"hello", 50, 99162322 % 50},  // Java: "hello".hashCode() == 99162322
		{"polygenelubricants", 50, 0}, // hashCode() == Integer.MIN_VALUE: Kafka's abs gives 0
		{"Aa", 7, 2112 % 7},
		{"é", 50, 233 % 50},
		{"😀", 50, (0xd83d*31 + 0xde00) % 50}, // two UTF-16 units
		{"group-with-negative-hash-zzzzzzzz", 1, 0},
	}
	for _, c := range cases {
		if got := PartitionFor(c.group, c.n); got != c.want {
			t.Errorf("PartitionFor(%q, %d) = %d, want %d", c.group, c.n, got, c.want)
		}
		if got := PartitionFor(c.group, c.n); got < 0 || got >= c.n {
			t.Errorf("PartitionFor(%q, %d) = %d out of range", c.group, c.n, got)
		}
	}
}

func TestCoordinatorCreatesOffsetsTopic(t *testing.T) {
	e := newCoordEnv(t, CoordinatorConfig{OffsetsPartitions: 3})
	c := e.start()
	ctx := coordCtx(t)
	if _, err := c.FetchOffsets(ctx, "g", nil); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("fetch before the topic exists: %v, want ErrNotCoordinator", err)
	}
	p, err := c.Locate(ctx, "g")
	if err != nil || p != PartitionFor("g", 3) {
		t.Fatalf("Locate: %d, %v", p, err)
	}
	topic, ok := e.store.Image().Topic(OffsetsTopic)
	if !ok || !topic.Internal || topic.Partitions != 3 || topic.Configs["cleanup.policy"] != "compact" {
		t.Fatalf("offsets topic %+v", topic)
	}
	if _, err := c.FetchOffsets(ctx, "g", nil); err != nil {
		t.Fatalf("fetch after Locate: %v", err)
	}
}

// joinStable makes member id of group Stable alone with a v3 join (no KIP-394 round) and a sync.
func joinStable(t *testing.T, c *Coordinator, group string) JoinResponse {
	t.Helper()
	return joinStableSession(t, c, group, testSession)
}

func joinStableSession(t *testing.T, c *Coordinator, group string, session time.Duration) JoinResponse {
	t.Helper()
	ctx := coordCtx(t)
	jr := c.Join(ctx, group, JoinRequest{
		Version: 3, ClientID: "cl", ProtocolType: "consumer",
		Protocols:      []Protocol{{Name: "range", Metadata: []byte{0, 1}}},
		SessionTimeout: session, RebalanceTimeout: testRebalance,
	})
	if jr.Err != nil {
		t.Fatalf("join: %v", jr.Err)
	}
	sr := c.Sync(ctx, group, SyncRequest{MemberID: jr.MemberID, Generation: jr.Generation,
		Assignments: []MemberAssignment{{MemberID: jr.MemberID, Assignment: []byte("mine")}}})
	if sr.Err != nil {
		t.Fatalf("sync: %v", sr.Err)
	}
	return jr
}

func TestCoordinatorLoadRestoresGroupsAndOffsets(t *testing.T) {
	e := newCoordEnv(t, CoordinatorConfig{OffsetsPartitions: 2})
	c := e.start()
	ctx := coordCtx(t)
	if _, err := c.Locate(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	jr := joinStable(t, c, "g")
	who := CommitRequest{MemberID: jr.MemberID, Generation: jr.Generation}
	tp := TopicPartition{Topic: "t", Partition: 3}
	for _, off := range []int64{5, 9} {
		errs, err := c.Commit(ctx, "g", who, []OffsetCommit{{TopicPartition: tp, Offset: off, LeaderEpoch: 2, Metadata: "m"}})
		if err != nil || errs[0] != nil {
			t.Fatalf("commit %d: %v %v", off, err, errs)
		}
	}
	// A simple commit of another group, and a group deleted with its offsets.
	if errs, err := c.Commit(ctx, "simple", CommitRequest{Generation: -1}, []OffsetCommit{{TopicPartition: tp, Offset: 1, LeaderEpoch: -1}}); err != nil || errs[0] != nil {
		t.Fatalf("simple commit: %v %v", err, errs)
	}
	if errs, err := c.Commit(ctx, "gone", CommitRequest{Generation: -1}, []OffsetCommit{{TopicPartition: tp, Offset: 1, LeaderEpoch: -1}}); err != nil || errs[0] != nil {
		t.Fatalf("commit gone: %v %v", err, errs)
	}
	if err := c.Delete(ctx, "gone"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	c.Close()

	c2 := e.start()
	var got []FetchedOffset
	eventually(t, "the new coordinator loads", func() bool {
		var err error
		got, err = c2.FetchOffsets(ctx, "g", nil)
		return err == nil
	})
	if len(got) != 1 || got[0].TopicPartition != tp || got[0].Offset != 9 || got[0].LeaderEpoch != 2 || got[0].Metadata != "m" {
		t.Fatalf("offsets after load: %+v", got)
	}
	d, err := c2.Describe(ctx, "g")
	if err != nil || d.State != Stable || len(d.Members) != 1 || d.Members[0].MemberID != jr.MemberID ||
		string(d.Members[0].Assignment) != "mine" || d.Generation != jr.Generation {
		t.Fatalf("group after load: %+v, %v", d, err)
	}
	// The restored member keeps its generation: its heartbeat and commit are accepted.
	if err := c2.Heartbeat(ctx, "g", HeartbeatRequest{MemberID: jr.MemberID, Generation: jr.Generation}); err != nil {
		t.Fatalf("heartbeat after load: %v", err)
	}
	if d, _ := c2.Describe(ctx, "gone"); d.State != Dead {
		t.Fatalf("deleted group after load: %+v", d)
	}
	if got, _ := c2.FetchOffsets(ctx, "simple", []TopicPartition{tp}); got[0].Offset != 1 {
		t.Fatalf("simple group's offset after load: %+v", got)
	}
	// Its session runs from the load: without heartbeats it expires and the group empties.
	e.clock.Advance(testSession + time.Second)
	eventually(t, "the restored member's session expires", func() bool {
		d, err := c2.Describe(ctx, "g")
		return err == nil && d.State == Empty
	})
}

func TestCoordinatorLoadInProgress(t *testing.T) {
	e := newCoordEnv(t, CoordinatorConfig{OffsetsPartitions: 1})
	c := e.start()
	ctx := coordCtx(t)
	if _, err := c.Locate(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	// Fill the partition with more than one load step of commits.
	meta := string(make([]byte, 4000))
	for i := range 300 {
		tp := TopicPartition{Topic: "t", Partition: int32(i)}
		if errs, err := c.Commit(ctx, "g", CommitRequest{Generation: -1}, []OffsetCommit{{TopicPartition: tp, Offset: int64(i), LeaderEpoch: -1, Metadata: meta}}); err != nil || errs[0] != nil {
			t.Fatalf("commit: %v %v", err, errs)
		}
	}
	c.Close()

	// Hold the load back with the high watermark: a request meanwhile is answered with
	// ErrLoadInProgress; after the load, read in more than one step, the offsets are all there.
	r, _ := e.replicas.Replica(OffsetsTopic, 0)
	g := &gatedLog{Replica: r}
	g.hwCap.Store(0)
	c2, err := NewCoordinator(Options{NodeID: 1, Metadata: e.store, Replicas: e.replicas, Clock: e.clock, Rand: rand.New(rand.NewPCG(3, 4)), Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	s := runShardOn(t, e, c2, g)
	fetch := func() ([]FetchedOffset, error) {
		return callShard(ctx, s, true, func(s *shard, reply func([]FetchedOffset, error)) { reply(s.fetchOffsets("g", nil, false), nil) })
	}
	if _, err := fetch(); !errors.Is(err, ErrLoadInProgress) {
		t.Fatalf("request during load: %v, want ErrLoadInProgress", err)
	}
	g.set(r.LogEndOffset(), true)
	var got []FetchedOffset
	eventually(t, "the load completes", func() bool {
		got, err = fetch()
		return err == nil
	})
	if len(got) != 300 || got[299].Offset != 299 {
		t.Fatalf("after load: %d offsets", len(got))
	}
}

// runShardOn makes c, whose __consumer_offsets has one partition, run its shard of partition 0 over l
// instead of the replica itself, and closes c when the test ends.
func runShardOn(t *testing.T, e *coordEnv, c *Coordinator, l Log) *shard {
	t.Helper()
	c.topic = coordshard.NewTopic(coordshard.TopicConfig[*shard]{
		Name: OffsetsTopic, NodeID: 1, Metadata: e.store, Replicas: e.replicas, Logger: quietLog,
		NewShard: func(p int32, _ *partition.Replica) *shard { return c.newShard(p, l, rand.New(rand.NewPCG(5, 6))) },
	})
	c.Reconcile(e.store.Image())
	t.Cleanup(c.Close)
	s, ok := c.topic.Shard(0)
	if !ok {
		t.Fatal("no shard for partition 0")
	}
	return s
}

func TestCoordinatorOffsetsRetention(t *testing.T) {
	e := newCoordEnv(t, CoordinatorConfig{OffsetsPartitions: 1, OffsetsRetention: time.Hour, RetentionCheckInterval: time.Minute})
	c := e.start()
	ctx := coordCtx(t)
	if _, err := c.Locate(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{Topic: "t", Partition: 0}
	commit := func(group string, off int64) {
		t.Helper()
		if errs, err := c.Commit(ctx, group, CommitRequest{Generation: -1}, []OffsetCommit{{TopicPartition: tp, Offset: off, LeaderEpoch: -1}}); err != nil || errs[0] != nil {
			t.Fatalf("commit: %v %v", err, errs)
		}
	}
	commit("old", 1)
	e.clock.Advance(50 * time.Minute)
	commit("young", 2)
	// A group with a live member keeps its offsets however old they are.
	jr := joinStableSession(t, c, "live", 20*time.Minute)
	if errs, err := c.Commit(ctx, "live", CommitRequest{MemberID: jr.MemberID, Generation: jr.Generation}, []OffsetCommit{{TopicPartition: tp, Offset: 3, LeaderEpoch: -1}}); err != nil || errs[0] != nil {
		t.Fatalf("member commit: %v %v", err, errs)
	}
	for range 6 {
		e.clock.Advance(5 * time.Minute)
		if err := c.Heartbeat(ctx, "live", HeartbeatRequest{MemberID: jr.MemberID, Generation: jr.Generation}); err != nil {
			t.Fatalf("heartbeat: %v", err)
		}
	}
	eventually(t, "the old group's offsets expire", func() bool {
		got, err := c.FetchOffsets(ctx, "old", []TopicPartition{tp})
		return err == nil && got[0].Offset == -1
	})
	for _, g := range []string{"young", "live"} {
		if got, _ := c.FetchOffsets(ctx, g, []TopicPartition{tp}); got[0].Offset == -1 {
			t.Fatalf("group %s lost its offset", g)
		}
	}
	ls, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if l.Group == "old" {
			t.Fatal("expired group still listed")
		}
	}
	// The expiry is durable: a new coordinator does not bring the offset back.
	c.Close()
	c2 := e.start()
	eventually(t, "reload", func() bool {
		got, err := c2.FetchOffsets(ctx, "old", []TopicPartition{tp})
		return err == nil && got[0].Offset == -1
	})
}

func TestCoordinatorCloseAnswersParkedJoins(t *testing.T) {
	e := newCoordEnv(t, CoordinatorConfig{OffsetsPartitions: 1})
	c := e.start()
	ctx := coordCtx(t)
	if _, err := c.Locate(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	joinStable(t, c, "g")
	done := make(chan JoinResponse, 1)
	go func() {
		done <- c.Join(ctx, "g", JoinRequest{Version: 3, ClientID: "b", ProtocolType: "consumer",
			Protocols: []Protocol{{Name: "range"}}, SessionTimeout: testSession, RebalanceTimeout: testRebalance})
	}()
	eventually(t, "the second join parks the group in PreparingRebalance", func() bool {
		d, err := c.Describe(ctx, "g")
		return err == nil && d.State == PreparingRebalance
	})
	c.Close()
	if r := <-done; !errors.Is(r.Err, ErrNotCoordinator) {
		t.Fatalf("parked join after Close: %v, want ErrNotCoordinator", r.Err)
	}
	if _, err := c.Describe(ctx, "g"); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("request after Close: %v, want ErrNotCoordinator", err)
	}
}

func TestCoordinatorBadInput(t *testing.T) {
	e := newCoordEnv(t, CoordinatorConfig{OffsetsPartitions: 1, OffsetMetadataMax: 10})
	c := e.start()
	ctx := coordCtx(t)
	if _, err := c.Locate(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{Topic: "t", Partition: 0}
	if r := c.Join(ctx, "", JoinRequest{Version: 3}); !errors.Is(r.Err, ErrInvalidGroupID) {
		t.Errorf("join with empty group id: %v", r.Err)
	}
	if err := c.Heartbeat(ctx, "nope", HeartbeatRequest{MemberID: "m", Generation: 1}); !errors.Is(err, ErrUnknownMemberID) {
		t.Errorf("heartbeat to unknown group: %v", err)
	}
	if _, err := c.Commit(ctx, "nope", CommitRequest{MemberID: "m", Generation: 4}, []OffsetCommit{{TopicPartition: tp}}); !errors.Is(err, ErrIllegalGeneration) {
		t.Errorf("member commit to unknown group: %v", err)
	}
	if err := c.Delete(ctx, "nope"); !errors.Is(err, ErrGroupNotFound) {
		t.Errorf("delete unknown group: %v", err)
	}
	jr := joinStable(t, c, "g")
	if _, err := c.Commit(ctx, "g", CommitRequest{MemberID: jr.MemberID, Generation: jr.Generation + 1}, []OffsetCommit{{TopicPartition: tp}}); !errors.Is(err, ErrIllegalGeneration) {
		t.Errorf("commit with a wrong generation: %v", err)
	}
	if _, err := c.Commit(ctx, "g", CommitRequest{Generation: -1}, []OffsetCommit{{TopicPartition: tp}}); !errors.Is(err, ErrUnknownMemberID) {
		t.Errorf("simple commit to a group with members: %v", err)
	}
	errs, err := c.Commit(ctx, "g", CommitRequest{MemberID: jr.MemberID, Generation: jr.Generation}, []OffsetCommit{
		{TopicPartition: tp, Offset: 1, Metadata: "way too much metadata"},
		{TopicPartition: TopicPartition{Topic: "t", Partition: 1}, Offset: 2, Metadata: "ok"},
	})
	if err != nil || !errors.Is(errs[0], ErrOffsetMetadataTooLarge) || errs[1] != nil {
		t.Errorf("oversized metadata: %v %v", err, errs)
	}
	if err := c.Delete(ctx, "g"); !errors.Is(err, ErrNonEmptyGroup) {
		t.Errorf("delete a group with members: %v", err)
	}
	if errs, err := c.DeleteOffsets(ctx, "g", []TopicPartition{tp}); err != nil || !errors.Is(errs[0], ErrGroupSubscribedToTopic) {
		t.Errorf("delete offsets of a live group: %v %v", err, errs)
	}
}

// __consumer_offsets is created with the replication coordshard.Replication gives: on one node, one
// replica and min.insync.replicas 1.
func TestCoordinatorOffsetsReplication(t *testing.T) {
	e := newCoordEnv(t, CoordinatorConfig{OffsetsPartitions: 1})
	c := e.start()
	if _, err := c.Locate(coordCtx(t), "g"); err != nil {
		t.Fatal(err)
	}
	topic, _ := e.store.Image().Topic(OffsetsTopic)
	if st, _ := topic.Partition(0); len(st.Replicas) != 1 || topic.Configs["min.insync.replicas"] != "1" {
		t.Fatalf("offsets topic on one node: replicas %v, configs %v", st.Replicas, topic.Configs)
	}
}

// gatedLog is a replica whose high watermark the test holds back and whose leadership it can take away.
// Only HighWatermark is capped (Read still reads below the real one), so a cap is meaningful only at or
// below the first offset the shard has not read.
type gatedLog struct {
	*partition.Replica
	hwCap     atomic.Int64
	notLeader atomic.Bool
	mu        sync.Mutex
	watchers  []chan<- struct{}
}

func (g *gatedLog) HighWatermark() int64 { return min(g.Replica.HighWatermark(), g.hwCap.Load()) }

func (g *gatedLog) IsLeader() bool { return !g.notLeader.Load() && g.Replica.IsLeader() }

func (g *gatedLog) Watch(ch chan<- struct{}) func() {
	g.mu.Lock()
	g.watchers = append(g.watchers, ch)
	g.mu.Unlock()
	return g.Replica.Watch(ch)
}

// set changes the cap and leadership and signals the watchers, as the replica does.
func (g *gatedLog) set(hwCap int64, leader bool) {
	g.hwCap.Store(hwCap)
	g.notLeader.Store(!leader)
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, ch := range g.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// A new leader loads up to its log end only once its high watermark covers it, answering
// COORDINATOR_LOAD_IN_PROGRESS meanwhile; a shard whose replica no longer leads answers NOT_COORDINATOR.
func TestCoordinatorLoadWaitsForHighWatermark(t *testing.T) {
	e := newCoordEnv(t, CoordinatorConfig{OffsetsPartitions: 1})
	c := e.start()
	ctx := coordCtx(t)
	if _, err := c.Locate(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{Topic: "t", Partition: 0}
	for off := range int64(20) {
		if errs, err := c.Commit(ctx, "g", CommitRequest{Generation: -1}, []OffsetCommit{{TopicPartition: tp, Offset: off, LeaderEpoch: -1}}); err != nil || errs[0] != nil {
			t.Fatalf("commit: %v %v", err, errs)
		}
	}
	c.Close()

	r, _ := e.replicas.Replica(OffsetsTopic, 0)
	end := r.LogEndOffset()
	g := &gatedLog{Replica: r}
	// The high watermark has not caught up with what the replica holds (a follower just made leader).
	g.hwCap.Store(0)
	c2, err := NewCoordinator(Options{NodeID: 1, Metadata: e.store, Replicas: e.replicas, Clock: e.clock, Rand: rand.New(rand.NewPCG(3, 4)), Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	s := c2.newShard(0, g, rand.New(rand.NewPCG(5, 6)))
	go s.Run()
	defer s.Close()
	fetch := func() ([]FetchedOffset, error) {
		return callShard(ctx, s, true, func(s *shard, reply func([]FetchedOffset, error)) {
			reply(s.fetchOffsets("g", []TopicPartition{tp}, false), nil)
		})
	}
	for range 3 {
		if _, err := fetch(); !errors.Is(err, ErrLoadInProgress) {
			t.Fatalf("fetch with the high watermark at 0 of %d: %v, want ErrLoadInProgress", end, err)
		}
	}
	g.set(end, true)
	var got []FetchedOffset
	eventually(t, "the load completes once the high watermark covers the log end", func() bool {
		got, err = fetch()
		return err == nil
	})
	if got[0].Offset != 19 {
		t.Fatalf("offset after load: %+v", got)
	}
	g.set(end, false)
	if _, err := fetch(); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("fetch once the replica no longer leads: %v, want ErrNotCoordinator", err)
	}
	if errs, err := callShard(ctx, s, false, func(s *shard, reply func([]error, error)) {
		s.commit("g", CommitRequest{Generation: -1}, []OffsetCommit{{TopicPartition: tp, Offset: 30, LeaderEpoch: -1}}, reply)
	}); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("commit once the replica no longer leads: %v %v, want ErrNotCoordinator", errs, err)
	}
}

func TestCoordinatorWriteFailed(t *testing.T) {
	if err := writeFailed(fmt.Errorf("x: %w", partition.ErrNotLeader)); !errors.Is(err, ErrNotCoordinator) || errors.Is(err, ErrCoordinatorNotAvailable) {
		t.Errorf("lost leadership: %v", err)
	}
	if err := writeFailed(partition.ErrNotEnoughReplicas); !errors.Is(err, ErrCoordinatorNotAvailable) {
		t.Errorf("not enough replicas: %v", err)
	}
	if err := writeFailed(fmt.Errorf("x: %w", partition.ErrInvalidProducerEpoch)); !errors.Is(err, partition.ErrInvalidProducerEpoch) || errors.Is(err, ErrCoordinatorNotAvailable) {
		t.Errorf("stale producer epoch: %v", err)
	}
}

// staleMeta is a node whose image has not yet caught up with the controller.
type staleMeta struct {
	*controller.Store
	img *controller.Image
}

func (m staleMeta) Image() *controller.Image { return m.img }

// A node asked about a group while another node has just created __consumer_offsets, which its own
// image does not show yet, answers COORDINATOR_NOT_AVAILABLE (retriable), not TOPIC_ALREADY_EXISTS.
func TestCoordinatorLocateWhileAnotherNodeCreates(t *testing.T) {
	e := newCoordEnv(t, CoordinatorConfig{OffsetsPartitions: 1})
	before := e.store.Image()
	if _, err := e.start().Locate(coordCtx(t), "g"); err != nil {
		t.Fatal(err)
	}
	late, err := NewCoordinator(Options{NodeID: 1, Metadata: staleMeta{e.store, before}, Replicas: e.replicas,
		Clock: e.clock, Rand: rand.New(rand.NewPCG(7, 8)), Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	if _, err := late.Locate(coordCtx(t), "g"); !errors.Is(err, ErrCoordinatorNotAvailable) {
		t.Fatalf("Locate with a stale image: %v, want ErrCoordinatorNotAvailable", err)
	}
}

// heldFS, once holding, holds the creation of the offsets partitions' directories until release is
// closed.
type heldFS struct {
	vfs.FS
	holding atomic.Bool
	release chan struct{}
	once    sync.Once
}

func (f *heldFS) MkdirAll(dir string) error {
	if f.holding.Load() && strings.HasPrefix(filepath.Base(dir), OffsetsTopic) {
		<-f.release
	}
	return f.FS.MkdirAll(dir)
}

func (f *heldFS) let() { f.once.Do(func() { close(f.release) }) }

// The request that creates __consumer_offsets never opens its replicas: it hands the image to the node's
// reconciler and waits for the pass only while its ctx lasts, so it answers while the partitions are still
// being created. Once the reconciler has opened them, the coordinator reconciled with the image leads.
func TestCoordinatorLocateLeavesOpeningToTheReconciler(t *testing.T) {
	fsys := &heldFS{FS: vfs.NewMem(), release: make(chan struct{})}
	e := newCoordEnvOn(t, CoordinatorConfig{OffsetsPartitions: 1}, fsys)
	t.Cleanup(fsys.let) // before the env's cleanup, which closes the Manager and so waits for the pass
	c := e.start()
	fsys.holding.Store(true)
	ctx, cancel := context.WithTimeout(coordCtx(t), 200*time.Millisecond)
	defer cancel()
	located := make(chan error, 1)
	go func() {
		_, err := c.Locate(ctx, "g")
		located <- err
	}()
	select {
	case err := <-located:
		if err != nil {
			t.Fatalf("Locate: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Locate did not answer while the offsets partition was being created")
	}
	if _, ok := e.replicas.Replica(OffsetsTopic, 0); ok {
		t.Fatal("the offsets partition is open although its directory is still held")
	}
	fsys.let()
	img := e.store.Image()
	if err := e.replicas.WaitReconciled(coordCtx(t), img.Version); err != nil {
		t.Fatal(err)
	}
	c.Reconcile(img)
	if _, err := c.FetchOffsets(coordCtx(t), "g", nil); err != nil {
		t.Fatalf("fetch once the reconciler opened the partition: %v", err)
	}
}

// heldCreate is a metadata store whose CreateTopicSpec waits for release, reporting each call on entered.
type heldCreate struct {
	*controller.Store
	entered chan struct{}
	release chan struct{}
}

func (m heldCreate) CreateTopicSpec(ctx context.Context, spec controller.TopicSpec, validateOnly bool) (*controller.Topic, error) {
	m.entered <- struct{}{}
	<-m.release
	return m.Store.CreateTopicSpec(ctx, spec, validateOnly)
}

// While one request proposes __consumer_offsets, another waits for it without proposing the topic too, and
// gives up when its own ctx ends rather than when the proposal does.
func TestCoordinatorLocateWaitsForTheCreationInFlight(t *testing.T) {
	e := newCoordEnv(t, CoordinatorConfig{OffsetsPartitions: 1})
	meta := heldCreate{Store: e.store, entered: make(chan struct{}, 2), release: make(chan struct{})}
	c, err := NewCoordinator(Options{NodeID: 1, Metadata: meta, Replicas: e.replicas, Clock: e.clock,
		Rand: rand.New(rand.NewPCG(9, 10)), Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	first := make(chan error, 1)
	go func() {
		_, err := c.Locate(coordCtx(t), "g")
		first <- err
	}()
	<-meta.entered
	ctx, cancel := context.WithTimeout(coordCtx(t), 50*time.Millisecond)
	defer cancel()
	second := make(chan error, 1)
	go func() {
		_, err := c.Locate(ctx, "h")
		second <- err
	}()
	select {
	case err := <-second:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Locate during another's creation, its ctx ended: %v, want DeadlineExceeded", err)
		}
	case <-time.After(10 * time.Second):
		close(meta.release)
		t.Fatal("Locate during another's creation waited past its ctx")
	}
	close(meta.release)
	if err := <-first; err != nil {
		t.Fatalf("the creating Locate: %v", err)
	}
	if _, err := c.Locate(coordCtx(t), "h"); err != nil {
		t.Fatalf("Locate once the topic exists: %v", err)
	}
	if n := len(meta.entered); n != 0 {
		t.Fatalf("the topic was proposed %d more times", n)
	}
}
