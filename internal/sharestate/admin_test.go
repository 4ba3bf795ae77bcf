package sharestate

import (
	"errors"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/share"
)

// TestShareStateReset: an admin's Reset sets the start offset with an empty window, is read back by a
// new coordinator, and refuses the writes of the leader restored before it (ErrStateReset, nothing
// appended) until a leader reads the state again; Summary reads without fencing.
func TestShareStateReset(t *testing.T) {
	e := newEnv(t)
	c := e.start(sp)
	old, err := share.New(share.Config{}, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	persist(t, c, old)
	old.Acquire("m1", 4, 10, t0)
	if _, err := old.Acknowledge("m1", []share.AckBatch{{First: 1, Last: 1, Types: []share.AckType{share.AckAccept}}}, t0); err != nil {
		t.Fatal(err)
	}
	persist(t, c, old)
	d, err := c.Summary(testCtx(t), sp)
	if err != nil || d.StartOffset() != 0 || d.Completed() != 1 {
		t.Fatalf("Summary before the reset: %v, %v", d, err)
	}

	if err := c.Reset(testCtx(t), sp, 42); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	end := e.logEnd()
	if _, err := old.Acknowledge("m1", []share.AckBatch{{First: 0, Last: 0, Types: []share.AckType{share.AckAccept}}}, t0); err != nil {
		t.Fatal(err)
	}
	r, _ := old.Persist()
	if err := c.Write(testCtx(t), sp, r); !errors.Is(err, ErrStateReset) {
		t.Fatalf("the old leader's update after the reset: %v, want ErrStateReset", err)
	}
	old.PersistFailed()
	r, _ = old.Persist()
	if err := c.Write(testCtx(t), sp, r); !errors.Is(err, ErrStateReset) {
		t.Fatalf("the old leader's snapshot after the reset: %v, want ErrStateReset", err)
	}
	if got := e.logEnd(); got != end {
		t.Fatalf("refused writes moved the log end from %d to %d", end, got)
	}
	if d, err := c.Summary(testCtx(t), sp); err != nil || d.StartOffset() != 42 || d.Completed() != 0 || d.LeaderEpoch() != 1 {
		t.Fatalf("Summary after the reset: %v, %v", d, err)
	}

	// A leader reads the reset state (which ends the fence) and writes on from it.
	d, err = c.Read(testCtx(t), sp, 1)
	if err != nil || d.StartOffset() != 42 {
		t.Fatalf("Read after the reset: %v, %v", d, err)
	}
	cur, _, err := share.Restore(share.Config{}, d, 1)
	if err != nil {
		t.Fatal(err)
	}
	persist(t, c, cur)
	c.Close()
	if d, err := e.start(sp).Summary(testCtx(t), sp); err != nil || d.StartOffset() != 42 {
		t.Fatalf("Summary after a reload: %v, %v", d, err)
	}
}

// TestShareStateDelete: Delete removes the state (reads and summaries find none, here and after a
// reload), refuses the old leader's writes so that they cannot bring it back, and lets a new leader
// create the share-partition afresh.
func TestShareStateDelete(t *testing.T) {
	e := newEnv(t)
	c := e.start(sp)
	if err := c.Delete(testCtx(t), sp); err != nil {
		t.Fatalf("Delete without state: %v", err)
	}
	old, err := share.New(share.Config{UpdatesPerSnapshot: 10}, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	persist(t, c, old)
	old.Acquire("m1", 2, 10, t0)
	if _, err := old.Acknowledge("m1", []share.AckBatch{{First: 3, Last: 4, Types: []share.AckType{share.AckAccept}}}, t0); err != nil {
		t.Fatal(err)
	}
	persist(t, c, old)

	if err := c.Delete(testCtx(t), sp); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := c.Summary(testCtx(t), sp); !errors.Is(err, ErrNoState) {
		t.Fatalf("Summary after Delete: %v", err)
	}
	old.PersistFailed()
	r, _ := old.Persist()
	if err := c.Write(testCtx(t), sp, r); !errors.Is(err, ErrStateReset) {
		t.Fatalf("the old leader's snapshot after Delete: %v, want ErrStateReset", err)
	}
	if _, err := c.Read(testCtx(t), sp, 1); !errors.Is(err, ErrNoState) {
		t.Fatalf("Read after Delete: %v", err)
	}
	c.Close()
	c = e.start(sp)
	if _, err := c.Summary(testCtx(t), sp); !errors.Is(err, ErrNoState) {
		t.Fatalf("Summary after Delete and a reload: %v", err)
	}
	fresh, err := share.New(share.Config{}, 9, 1)
	if err != nil {
		t.Fatal(err)
	}
	r, _ = fresh.Persist()
	if err := c.Create(testCtx(t), sp, r); err != nil {
		t.Fatalf("Create after Delete: %v", err)
	}
	if d, err := c.Summary(testCtx(t), sp); err != nil || d.StartOffset() != 9 {
		t.Fatalf("Summary of the new state: %v, %v", d, err)
	}
}

// TestShareStateTopicDeleted: when an image drops a topic the image before it had (the topic deleted),
// the coordinator removes the state of its share-partitions, as Delete does, here and after a reload,
// and keeps the state of another topic's share-partition and of one whose topic it never saw.
func TestShareStateTopicDeleted(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	ids := map[string]controller.TopicID{}
	for _, name := range []string{"orders", "kept"} {
		tp, err := e.store.CreateTopic(ctx, name, 1, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = tp.ID
	}
	orders := SharePartition{Group: "billing", TopicID: ids["orders"], Partition: 0}
	kept := SharePartition{Group: "billing", TopicID: ids["kept"], Partition: 0}
	c := e.start(sp)
	for _, x := range []SharePartition{orders, kept, sp} {
		p, err := share.New(share.Config{}, 5, 1)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := p.Persist()
		if err := c.Write(ctx, x, r); err != nil {
			t.Fatalf("Write %s: %v", x, err)
		}
	}
	if err := e.store.DeleteTopic(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	img := e.store.Image()
	e.replicas.Submit(img)
	if err := e.replicas.WaitReconciled(ctx, img.Version); err != nil {
		t.Fatal(err)
	}
	c.Reconcile(img)
	for {
		_, err := c.Summary(ctx, orders)
		if errors.Is(err, ErrNoState) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the deleted topic's share-partition still has state: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	check := func(c *Coordinator) {
		t.Helper()
		for _, x := range []SharePartition{kept, sp} {
			if d, err := c.Summary(ctx, x); err != nil || d.StartOffset() != 5 {
				t.Fatalf("Summary of %s: %v, %v", x, d, err)
			}
		}
		if _, err := c.Summary(ctx, orders); !errors.Is(err, ErrNoState) {
			t.Fatalf("Summary of the deleted topic's share-partition: %v, want ErrNoState", err)
		}
	}
	check(c)
	c.Close()
	check(e.start(sp))
}
