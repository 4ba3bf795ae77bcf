package sharestate

import (
	"errors"
	"testing"

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
