package sharestate

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/clock/clocktest"
	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/share"
	"github.com/weir-mq/weir/internal/vfs"
)

var (
	t0       = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))
)

// env is one node's metadata store and replicas on an in-memory filesystem.
type env struct {
	t        *testing.T
	clock    *clocktest.Manual
	store    *controller.Store
	replicas *partition.Manager
}

func newEnv(t *testing.T) *env {
	t.Helper()
	fsys := vfs.NewMem()
	clock := clocktest.NewManual(t0)
	store, err := controller.OpenLocal(fsys, filepath.Join("/var/weir", "controller"), controller.Broker{NodeID: 1, Host: "h", Port: 9092}, clock)
	if err != nil {
		t.Fatal(err)
	}
	replicas, err := partition.NewManager("/var/weir", partition.ManagerOptions{FS: fsys, Logger: quietLog, MaintainTicks: make(chan time.Time)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = replicas.Close()
		_ = store.Close()
	})
	return &env{t: t, clock: clock, store: store, replicas: replicas}
}

func testCtx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// start returns a coordinator of the env whose topic exists and whose one partition it leads, loaded.
func (e *env) start(sp SharePartition) *Coordinator {
	e.t.Helper()
	c, err := NewCoordinator(Options{NodeID: 1, Metadata: e.store, Replicas: e.replicas, Clock: e.clock,
		Config: Config{StatePartitions: 1}, Logger: quietLog})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(c.Close)
	if p, err := c.Locate(testCtx(e.t), sp); err != nil || p != 0 {
		e.t.Fatalf("Locate = %d, %v", p, err)
	}
	e.replicas.Submit(e.store.Image())
	if err := e.replicas.WaitReconciled(testCtx(e.t), e.store.Image().Version); err != nil {
		e.t.Fatal(err)
	}
	c.Reconcile(e.store.Image())
	for {
		_, err := c.Read(testCtx(e.t), sp, 1)
		if !errors.Is(err, ErrLoadInProgress) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return c
}

func (e *env) logEnd() int64 {
	r, ok := e.replicas.Replica(StateTopic, 0)
	if !ok {
		e.t.Fatal("no replica of the state topic")
	}
	return r.LogEndOffset()
}

var sp = SharePartition{Group: "billing", TopicID: controller.TopicID{7}, Partition: 3}

// persist writes every record p owes through c.
func persist(t *testing.T, c *Coordinator, p *share.Partition) {
	t.Helper()
	r, ok := p.Persist()
	if !ok {
		t.Fatal("nothing to persist")
	}
	if err := c.Write(testCtx(t), sp, r); err != nil {
		t.Fatalf("Write(%+v): %v", r, err)
	}
}

func TestShareStateWriteReadReload(t *testing.T) {
	e := newEnv(t)
	c := e.start(sp)
	if _, err := c.Read(testCtx(t), sp, 1); !errors.Is(err, ErrNoState) {
		t.Fatalf("Read before any write: %v", err)
	}
	if got := sp.String(); got != "billing:"+(controller.TopicID{7}).String()+":3" {
		t.Fatalf("key %q", got)
	}
	cfg := share.Config{UpdatesPerSnapshot: 2}
	p, err := share.New(cfg, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	persist(t, c, p)
	types := []share.AckType{share.AckAccept, share.AckRelease, share.AckReject}
	for i := range 6 {
		var batches []share.AckBatch
		for _, r := range p.Acquire("m1", 2, 100, t0) {
			for off := r.First; off <= r.Last; off++ {
				batches = append(batches, share.AckBatch{First: off, Last: off, Types: []share.AckType{types[(int(off)+i)%3]}})
			}
		}
		if _, err := p.Acknowledge("m1", batches, t0); err != nil {
			t.Fatal(err)
		}
		persist(t, c, p)
	}
	// Leave a window behind: held, accepted and released records past the start offset.
	got := p.Acquire("m1", 3, 100, t0)
	if _, err := p.Acknowledge("m1", []share.AckBatch{{First: got[0].First + 1, Last: got[0].First + 2, Types: []share.AckType{share.AckAccept, share.AckRelease}}}, t0); err != nil {
		t.Fatal(err)
	}
	persist(t, c, p)
	if p.StartOffset() == 0 || p.End()-p.StartOffset() != 3 {
		t.Fatalf("the written window [%d, %d) tests little", p.StartOffset(), p.End())
	}
	check := func(c *Coordinator) {
		t.Helper()
		d, err := c.Read(testCtx(t), sp, 2)
		if err != nil {
			t.Fatal(err)
		}
		q, _, err := share.Restore(cfg, d, 2)
		if err != nil {
			t.Fatal(err)
		}
		if q.StartOffset() != p.StartOffset() || q.End() != p.End() {
			t.Fatalf("restored window [%d, %d), written [%d, %d)", q.StartOffset(), q.End(), p.StartOffset(), p.End())
		}
		for off := q.StartOffset(); off < q.End(); off++ {
			a, _ := q.Lookup(off)
			b, _ := p.Lookup(off)
			if b.State == share.Acquired {
				b = share.Entry{State: share.Available, DeliveryCount: b.DeliveryCount}
			}
			if a != b {
				t.Fatalf("offset %d restored as %+v, written as %+v", off, a, b)
			}
		}
	}
	check(c)

	// A new coordinator reads the partition back to the same state.
	c.Close()
	check(e.start(sp))
}

func TestShareStateFencesDeposedLeader(t *testing.T) {
	e := newEnv(t)
	c := e.start(sp)
	old, err := share.New(share.Config{}, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	persist(t, c, old)
	old.Acquire("m1", 3, 10, t0)
	persist(t, c, old)

	// The new leader's read fences the deposed leader at once, before the new leader writes: the
	// deposed leader's next record is refused, and nothing is appended.
	d, err := c.Read(testCtx(t), sp, 2)
	if err != nil {
		t.Fatal(err)
	}
	end := e.logEnd()
	if _, err := old.Acknowledge("m1", []share.AckBatch{{First: 0, Last: 2, Types: []share.AckType{share.AckAccept}}}, t0); err != nil {
		t.Fatal(err)
	}
	r, _ := old.Persist()
	if err := c.Write(testCtx(t), sp, r); !errors.Is(err, share.ErrFencedLeaderEpoch) {
		t.Fatalf("the deposed leader's write after the new leader's read: %v", err)
	}
	if got := e.logEnd(); got != end {
		t.Fatalf("the deposed leader's refused write moved the log end from %d to %d", end, got)
	}
	if _, err := c.Read(testCtx(t), sp, 1); !errors.Is(err, share.ErrFencedLeaderEpoch) {
		t.Fatalf("the deposed leader's read: %v", err)
	}
	cur, _, err := share.Restore(share.Config{}, d, 2)
	if err != nil {
		t.Fatal(err)
	}
	persist(t, c, cur)
	end = e.logEnd()
	old.PersistFailed()
	r, _ = old.Persist()
	if err := c.Write(testCtx(t), sp, r); !errors.Is(err, share.ErrFencedLeaderEpoch) {
		t.Fatalf("the deposed leader's snapshot: %v", err)
	}
	// A stray update of no round is refused too.
	if err := c.Write(testCtx(t), sp, share.Record{Seq: 99, Slot: 1, LeaderEpoch: 2}); !errors.Is(err, share.ErrStaleRecord) {
		t.Fatalf("a stray update: %v", err)
	}
	if got := e.logEnd(); got != end {
		t.Fatalf("refused writes moved the log end from %d to %d", end, got)
	}
	if d, _ := c.Read(testCtx(t), sp, 2); d.LeaderEpoch() != 2 || d.StartOffset() != 0 {
		t.Fatalf("state after the refusals: epoch %d, start %d", d.LeaderEpoch(), d.StartOffset())
	}
}

func TestShareStateNotCoordinator(t *testing.T) {
	e := newEnv(t)
	c, err := NewCoordinator(Options{NodeID: 1, Metadata: e.store, Replicas: e.replicas, Clock: e.clock, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Write(testCtx(t), sp, share.Record{Snapshot: true}); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("a write before the topic exists: %v", err)
	}
	if _, err := NewCoordinator(Options{Metadata: e.store, Replicas: e.replicas}); !errors.Is(err, ErrMissingOption) {
		t.Fatalf("NewCoordinator without a clock: %v", err)
	}
}

// TestShareStateCreate: Create writes a leader's first snapshot only while the share-partition has no
// state: a second leader that also read none is refused with ErrStateExists and nothing appended, and
// reads the first leader's state instead, which its read then fences.
func TestShareStateCreate(t *testing.T) {
	e := newEnv(t)
	c := e.start(sp)
	first, err := share.New(share.Config{}, 5, 1)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := first.Persist()
	if err := c.Create(testCtx(t), sp, r); err != nil {
		t.Fatalf("Create with no state: %v", err)
	}
	first.Acquire("m1", 2, 10, t0)
	if _, err := first.Acknowledge("m1", []share.AckBatch{{First: 5, Last: 6, Types: []share.AckType{share.AckAccept}}}, t0); err != nil {
		t.Fatal(err)
	}
	persist(t, c, first)

	second, err := share.New(share.Config{}, 9, 2)
	if err != nil {
		t.Fatal(err)
	}
	end := e.logEnd()
	r, _ = second.Persist()
	if err := c.Create(testCtx(t), sp, r); !errors.Is(err, ErrStateExists) {
		t.Fatalf("Create over state: %v, want ErrStateExists", err)
	}
	if got := e.logEnd(); got != end {
		t.Fatalf("a refused Create moved the log end from %d to %d", end, got)
	}
	d, err := c.Read(testCtx(t), sp, 2)
	if err != nil {
		t.Fatal(err)
	}
	if d.StartOffset() != 7 || d.LeaderEpoch() != 2 {
		t.Fatalf("read after the refused Create: start %d, epoch %d; want the first leader's start 7, fenced at 2", d.StartOffset(), d.LeaderEpoch())
	}
}

// TestParseSharePartition: a coordinator key reads back as the share-partition that wrote it, group
// ids with colons included, and a malformed key is an error.
func TestParseSharePartition(t *testing.T) {
	for _, sp := range []SharePartition{
		{Group: "g", TopicID: controller.TopicID{1, 2, 3}, Partition: 0},
		{Group: "a:b:c", TopicID: controller.TopicID{15: 9}, Partition: 2147483647},
	} {
		got, err := ParseSharePartition(sp.String())
		if err != nil || got != sp {
			t.Fatalf("%s: %+v, %v", sp, got, err)
		}
	}
	id := controller.TopicID{1}.String()
	for _, key := range []string{"", "g", "g:1", "g:" + id, ":" + id + ":1", "g:" + id + ":-1", "g:" + id + ":x",
		"g:" + id + ":2147483648", "g:AAAAAAAAAAAAAAAAAAAAAA:1", "g:" + id + "A:1"} {
		if sp, err := ParseSharePartition(key); err == nil {
			t.Fatalf("%q parsed as %+v", key, sp)
		}
	}
}

// FuzzParseSharePartition: a share-partition key from a client (FindCoordinator key type 2) parses or
// is refused without a panic, and a key that parses names a share-partition whose own key parses back
// to it.
func FuzzParseSharePartition(f *testing.F) {
	f.Add(SharePartition{Group: "g", TopicID: controller.TopicID{1}, Partition: 3}.String())
	f.Add("a:b:c:AAAAAAAAAAAAAAAAAAAAAQ:0")
	f.Add("g:AAAAAAAAAAAAAAAAAAAAAQA:1")
	f.Add(":::")
	f.Fuzz(func(t *testing.T, key string) {
		sp, err := ParseSharePartition(key)
		if err != nil {
			return
		}
		back, err := ParseSharePartition(sp.String())
		if err != nil || back != sp {
			t.Fatalf("%q parsed as %+v, whose key %q parses as %+v, %v", key, sp, sp.String(), back, err)
		}
		if sp.Group == "" || sp.Partition < 0 || sp.TopicID.IsZero() {
			t.Fatalf("%q parsed as %+v", key, sp)
		}
	})
}
