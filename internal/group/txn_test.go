package group

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/partition"
)

// txnEnv is a coordinator over one offsets partition, located and loaded, with helpers for
// transactional commits.
type txnEnv struct {
	*coordEnv
	c *Coordinator
}

var (
	tp0 = TopicPartition{Topic: "t", Partition: 0}
	tp1 = TopicPartition{Topic: "t", Partition: 1}
)

func newTxnEnv(t *testing.T, cfg CoordinatorConfig) *txnEnv {
	t.Helper()
	cfg.OffsetsPartitions = 1
	e := newCoordEnv(t, cfg)
	c := e.start()
	if _, err := c.Locate(coordCtx(t), "g"); err != nil {
		t.Fatal(err)
	}
	return &txnEnv{coordEnv: e, c: c}
}

// txnCommit stages offset for tp in group as producer pid (epoch 0), failing the test on any error.
func (e *txnEnv) txnCommit(group string, pid int64, tp TopicPartition, offset int64) {
	e.t.Helper()
	errs, err := e.c.TxnCommit(coordCtx(e.t), group, CommitRequest{Generation: -1}, pid, 0,
		[]OffsetCommit{{TopicPartition: tp, Offset: offset, LeaderEpoch: 1, Metadata: "txn"}})
	if err != nil || errs[0] != nil {
		e.t.Fatalf("txn commit %d of producer %d: %v %v", offset, pid, err, errs)
	}
}

// commit commits offset for tp in group outside any transaction.
func (e *txnEnv) commit(group string, tp TopicPartition, offset int64) {
	e.t.Helper()
	errs, err := e.c.Commit(coordCtx(e.t), group, CommitRequest{Generation: -1},
		[]OffsetCommit{{TopicPartition: tp, Offset: offset, LeaderEpoch: -1}})
	if err != nil || errs[0] != nil {
		e.t.Fatalf("commit %d: %v %v", offset, err, errs)
	}
}

// marker ends producer pid's transaction on the offsets partition.
func (e *txnEnv) marker(pid int64, commit bool) {
	e.t.Helper()
	if err := e.c.WriteMarker(coordCtx(e.t), 0, partition.Marker{ProducerID: pid, CoordinatorEpoch: 1, Commit: commit}); err != nil {
		e.t.Fatalf("marker of producer %d: %v", pid, err)
	}
}

// wantOffset checks group's committed offset of tp, and whether a stable fetch finds it unstable.
func wantOffset(t *testing.T, c *Coordinator, group string, tp TopicPartition, offset int64, unstable bool) {
	t.Helper()
	got, err := c.FetchOffsets(coordCtx(t), group, []TopicPartition{tp})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Offset != offset || got[0].Err != nil {
		t.Fatalf("%s %v: offset %d (err %v), want %d", group, tp, got[0].Offset, got[0].Err, offset)
	}
	stable, err := c.FetchStableOffsets(coordCtx(t), group, []TopicPartition{tp})
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case unstable && (!errors.Is(stable[0].Err, ErrUnstableOffsetCommit) || stable[0].Offset != -1):
		t.Fatalf("%s %v: stable fetch %+v, want ErrUnstableOffsetCommit and offset -1", group, tp, stable[0])
	case !unstable && (stable[0].Err != nil || stable[0].Offset != offset):
		t.Fatalf("%s %v: stable fetch %+v, want offset %d", group, tp, stable[0], offset)
	}
}

func TestTxnOffsetsInvisibleUntilCommit(t *testing.T) {
	e := newTxnEnv(t, CoordinatorConfig{})
	e.txnCommit("g", 7, tp0, 42)
	wantOffset(t, e.c, "g", tp0, -1, true)
	wantOffset(t, e.c, "g", tp1, -1, false)
	// Another producer's marker leaves producer 7's offsets staged.
	e.marker(8, true)
	wantOffset(t, e.c, "g", tp0, -1, true)
	e.marker(7, true)
	wantOffset(t, e.c, "g", tp0, 42, false)
	got, err := e.c.FetchOffsets(coordCtx(t), "g", nil)
	if err != nil || len(got) != 1 || got[0].Metadata != "txn" || got[0].LeaderEpoch != 1 {
		t.Fatalf("all offsets after the commit: %+v, %v", got, err)
	}
	// A retried marker changes nothing.
	e.marker(7, true)
	wantOffset(t, e.c, "g", tp0, 42, false)
}

func TestTxnOffsetsDroppedOnAbort(t *testing.T) {
	e := newTxnEnv(t, CoordinatorConfig{})
	e.commit("g", tp0, 3)
	e.txnCommit("g", 7, tp0, 42)
	e.txnCommit("g", 7, tp1, 43)
	wantOffset(t, e.c, "g", tp0, 3, true)
	e.marker(7, false)
	wantOffset(t, e.c, "g", tp0, 3, false)
	wantOffset(t, e.c, "g", tp1, -1, false)
	// A COMMIT marker after the ABORT finds nothing left to commit.
	e.marker(7, true)
	wantOffset(t, e.c, "g", tp0, 3, false)
}

// When a partition has both a transactional and a plain commit, the one with the later record in
// __consumer_offsets wins once the transaction commits (Kafka's rule).
func TestTxnOffsetsLaterRecordWins(t *testing.T) {
	e := newTxnEnv(t, CoordinatorConfig{})
	// The plain commit comes after the transaction's: it stays.
	e.txnCommit("g", 7, tp0, 10)
	e.commit("g", tp0, 5)
	wantOffset(t, e.c, "g", tp0, 5, true)
	e.marker(7, true)
	wantOffset(t, e.c, "g", tp0, 5, false)
	// The plain commit comes first: the transaction's replaces it.
	e.commit("g", tp1, 5)
	e.txnCommit("g", 7, tp1, 10)
	e.marker(7, true)
	wantOffset(t, e.c, "g", tp1, 10, false)
}

// A new coordinator replays the transactional batches and markers of the log in order: committed
// transactions' offsets (by the later-record rule), aborted ones gone, open ones still staged.
func TestTxnOffsetsSurviveReload(t *testing.T) {
	e := newTxnEnv(t, CoordinatorConfig{})
	tp2, tp3 := TopicPartition{Topic: "u", Partition: 2}, TopicPartition{Topic: "u", Partition: 3}
	e.txnCommit("g", 1, tp0, 10) // committed, but a plain commit comes later
	e.commit("g", tp0, 5)
	e.commit("g", tp1, 5) // a transaction's later commit replaces it
	e.txnCommit("g", 2, tp1, 20)
	e.txnCommit("g", 3, tp2, 30) // aborted
	e.txnCommit("h", 4, tp3, 40) // still open, in a group with nothing else
	e.txnCommit("g", 2, tp2, 21)
	e.marker(1, true)
	e.marker(2, true)
	e.marker(3, false)
	check := func(c *Coordinator) {
		t.Helper()
		wantOffset(t, c, "g", tp0, 5, false)
		wantOffset(t, c, "g", tp1, 20, false)
		wantOffset(t, c, "g", tp2, 21, false)
		wantOffset(t, c, "h", tp3, -1, true)
	}
	check(e.c)
	e.c.Close()

	c2 := e.start()
	eventually(t, "the new coordinator loads", func() bool {
		_, err := c2.FetchOffsets(coordCtx(t), "g", nil)
		return err == nil
	})
	check(c2)
	if d, err := c2.Describe(coordCtx(t), "h"); err != nil || d.State != Empty {
		t.Fatalf("group with only staged offsets after load: %+v, %v", d, err)
	}
	if err := c2.WriteMarker(coordCtx(t), 0, partition.Marker{ProducerID: 4, Commit: true}); err != nil {
		t.Fatal(err)
	}
	wantOffset(t, c2, "h", tp3, 40, false)
	c2.Close()

	c3 := e.start()
	eventually(t, "the third coordinator loads", func() bool {
		_, err := c3.FetchOffsets(coordCtx(t), "h", nil)
		return err == nil
	})
	wantOffset(t, c3, "h", tp3, 40, false)
	wantOffset(t, c3, "g", tp1, 20, false)
}

// Offsets retention never drops staged offsets, nor the group holding them, and a reload agrees.
func TestTxnOffsetsOutliveRetention(t *testing.T) {
	e := newTxnEnv(t, CoordinatorConfig{OffsetsRetention: time.Hour, RetentionCheckInterval: time.Minute})
	e.txnCommit("staged-only", 7, tp0, 42)
	e.commit("mixed", tp0, 1)
	e.commit("mixed", tp1, 2)
	e.txnCommit("mixed", 8, tp1, 20)
	e.commit("plain", tp0, 3)
	e.clock.Advance(2 * time.Hour)
	eventually(t, "the plain group expires", func() bool {
		d, err := e.c.Describe(coordCtx(t), "plain")
		return err == nil && d.State == Dead
	})
	// The mixed group's committed offsets expired; its staged one and the group remain.
	wantOffset(t, e.c, "mixed", tp0, -1, false)
	wantOffset(t, e.c, "mixed", tp1, -1, true)
	for _, g := range []string{"staged-only", "mixed"} {
		if d, err := e.c.Describe(coordCtx(t), g); err != nil || d.State != Empty {
			t.Fatalf("group %s with staged offsets after expiry: %+v, %v", g, d, err)
		}
	}
	e.marker(7, true)
	e.marker(8, true)
	wantOffset(t, e.c, "staged-only", tp0, 42, false)
	wantOffset(t, e.c, "mixed", tp1, 20, false)
	e.c.Close()
	c2 := e.start()
	eventually(t, "reload", func() bool {
		_, err := c2.FetchOffsets(coordCtx(t), "mixed", nil)
		return err == nil
	})
	wantOffset(t, c2, "staged-only", tp0, 42, false)
	wantOffset(t, c2, "mixed", tp0, -1, false)
	wantOffset(t, c2, "mixed", tp1, 20, false)
}

func TestTxnCommitValidation(t *testing.T) {
	e := newTxnEnv(t, CoordinatorConfig{OffsetMetadataMax: 10})
	ctx := coordCtx(t)
	offs := []OffsetCommit{{TopicPartition: tp0, Offset: 1, LeaderEpoch: -1}}
	try := func(group string, who CommitRequest, pid int64, epoch int16) error {
		t.Helper()
		errs, err := e.c.TxnCommit(ctx, group, who, pid, epoch, offs)
		if err == nil {
			err = errs[0]
		}
		return err
	}
	if err := try("", CommitRequest{Generation: -1}, 1, 0); !errors.Is(err, ErrInvalidGroupID) {
		t.Errorf("empty group id: %v", err)
	}
	if err := try("nope", CommitRequest{MemberID: "m", Generation: 1}, 1, 0); !errors.Is(err, ErrUnknownMemberID) {
		t.Errorf("member of an unknown group: %v", err)
	}
	if err := try("g", CommitRequest{Generation: -1}, -1, 0); !errors.Is(err, partition.ErrInvalidProducerEpoch) {
		t.Errorf("no producer id: %v", err)
	}
	if d, _ := e.c.Describe(ctx, "nope"); d.State != Dead {
		t.Errorf("a refused commit created group nope: %+v", d)
	}
	jr := c2join(t, e.c, "g", "inst")
	member := CommitRequest{MemberID: jr.MemberID, InstanceID: "inst", Generation: jr.Generation}
	if err := try("g", CommitRequest{MemberID: jr.MemberID, InstanceID: "inst", Generation: jr.Generation + 1}, 1, 0); !errors.Is(err, ErrIllegalGeneration) {
		t.Errorf("stale generation: %v", err)
	}
	if err := try("g", CommitRequest{MemberID: "other", Generation: jr.Generation}, 1, 0); !errors.Is(err, ErrUnknownMemberID) {
		t.Errorf("unknown member: %v", err)
	}
	if err := try("g", CommitRequest{MemberID: "other", InstanceID: "inst", Generation: jr.Generation}, 1, 0); !errors.Is(err, ErrFencedInstanceID) {
		t.Errorf("fenced instance: %v", err)
	}
	// The member itself, and (before v3) a producer naming no member, may commit into the live group.
	if err := try("g", member, 1, 3); err != nil {
		t.Errorf("member's txn commit: %v", err)
	}
	if err := try("g", CommitRequest{Generation: -1}, 2, 0); err != nil {
		t.Errorf("txn commit without member: %v", err)
	}
	// The partition has seen epoch 3 of producer 1: an older epoch is fenced, and nothing is staged.
	if err := try("g", member, 1, 2); !errors.Is(err, partition.ErrInvalidProducerEpoch) || errors.Is(err, ErrCoordinatorNotAvailable) {
		t.Errorf("stale producer epoch: %v", err)
	}
	errs, err := e.c.TxnCommit(ctx, "g", member, 1, 3, []OffsetCommit{
		{TopicPartition: tp0, Offset: 1, Metadata: "way too much metadata"},
		{TopicPartition: tp1, Offset: 2, Metadata: "ok"},
	})
	if err != nil || !errors.Is(errs[0], ErrOffsetMetadataTooLarge) || errs[1] != nil {
		t.Errorf("oversized metadata: %v %v", err, errs)
	}
	if err := e.c.WriteMarker(ctx, 0, partition.Marker{ProducerID: 1, ProducerEpoch: 3, Commit: true}); err != nil {
		t.Fatal(err)
	}
	wantOffset(t, e.c, "g", tp0, 1, true) // producer 2's offset is still staged
	wantOffset(t, e.c, "g", tp1, 2, false)
}

// c2join makes a static member (instance) of group Stable alone.
func c2join(t *testing.T, c *Coordinator, group, instance string) JoinResponse {
	t.Helper()
	ctx := coordCtx(t)
	jr := c.Join(ctx, group, JoinRequest{
		Version: 5, ClientID: "cl", InstanceID: instance, ProtocolType: "consumer",
		Protocols:      []Protocol{{Name: "range", Metadata: []byte{0, 1}}},
		SessionTimeout: testSession, RebalanceTimeout: testRebalance,
	})
	if jr.Err != nil {
		t.Fatalf("join: %v", jr.Err)
	}
	if sr := c.Sync(ctx, group, SyncRequest{MemberID: jr.MemberID, InstanceID: instance, Generation: jr.Generation}); sr.Err != nil {
		t.Fatalf("sync: %v", sr.Err)
	}
	return jr
}

// A marker for a partition this node does not lead gets ErrNotCoordinator, and one for a partition
// still loading ErrLoadInProgress, so that the marker writer retries.
func TestTxnWriteMarkerRouting(t *testing.T) {
	e := newTxnEnv(t, CoordinatorConfig{})
	e.txnCommit("g", 7, tp0, 42)
	m := partition.Marker{ProducerID: 7, Commit: true}
	if err := e.c.WriteMarker(coordCtx(t), 1, m); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("marker for a partition not led: %v, want ErrNotCoordinator", err)
	}
	e.c.Close()

	r, _ := e.replicas.Replica(OffsetsTopic, 0)
	g := &gatedLog{Replica: r}
	g.hwCap.Store(0)
	c2, err := NewCoordinator(Options{NodeID: 1, Metadata: e.store, Replicas: e.replicas, Clock: e.clock, Rand: rand.New(rand.NewPCG(3, 4)), Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	runShardOn(t, e.coordEnv, c2, g)
	if err := c2.WriteMarker(coordCtx(t), 0, m); !errors.Is(err, ErrLoadInProgress) {
		t.Fatalf("marker while loading: %v, want ErrLoadInProgress", err)
	}
	g.set(r.LogEndOffset(), true)
	eventually(t, "the load completes", func() bool {
		return c2.WriteMarker(coordCtx(t), 0, m) == nil
	})
	wantOffset(t, c2, "g", tp0, 42, false)
	g.set(r.LogEndOffset(), false)
	if err := c2.WriteMarker(coordCtx(t), 0, m); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("marker once the replica no longer leads: %v, want ErrNotCoordinator", err)
	}
}

func TestGroupValidateTxnCommit(t *testing.T) {
	h := newHarness(t, testConfig())
	if err := h.g.ValidateTxnCommit(CommitRequest{Generation: -1}); err != nil {
		t.Fatalf("producer without member, Empty group: %v", err)
	}
	ids := h.stable("a", "b")
	gen := h.g.Generation()
	cases := []struct {
		who  CommitRequest
		want error
	}{
		{CommitRequest{MemberID: ids[0], Generation: gen}, nil},
		{CommitRequest{Generation: -1}, nil}, // unlike OffsetCommit, accepted while the group has members
		{CommitRequest{MemberID: ids[0], Generation: gen - 1}, ErrIllegalGeneration},
		{CommitRequest{MemberID: "x", Generation: gen}, ErrUnknownMemberID},
		{CommitRequest{Generation: gen}, ErrUnknownMemberID},
	}
	for _, c := range cases {
		if err := h.g.ValidateTxnCommit(c.who); !errorsIs(err, c.want) {
			t.Errorf("%+v: %v, want %v", c.who, err, c.want)
		}
	}
	// A new member's join starts a rebalance; the members of the current generation may still commit
	// (no state is changed by the check: the joins stay parked).
	h.join(joinReq("c", ""))
	h.join(joinReq("a", ids[0]))
	if err := h.g.ValidateTxnCommit(CommitRequest{MemberID: ids[1], Generation: gen}); err != nil {
		t.Errorf("during a rebalance: %v", err)
	}
	h.apply(h.g.Unload())
	if err := h.g.ValidateTxnCommit(CommitRequest{Generation: -1}); !errors.Is(err, ErrCoordinatorNotAvailable) {
		t.Errorf("Dead group: %v", err)
	}
}
