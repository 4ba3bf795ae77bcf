package api_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// These tests drive franz-go's transactional producer, whose batches are transactional: they need
// Produce to take transactional batches (the partition side of transactions), as
// docs/transactions.md divides the work.

// TestTxnClientCommitAndAbort runs franz-go's transactional producer: a committed and an aborted
// transaction, each ending in its marker.
func TestTxnClientCommitAndAbort(t *testing.T) {
	n := startTxnNode(t)
	createTopic(t, newAdmin(t, n), "t", 1, nil)
	cl := newClient(t, n, kgo.TransactionalID("client-tx"), kgo.DefaultProduceTopic("t"), kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx := testCtx(t)
	for i, end := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for j := range 3 {
			if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("%d-%d", i, j))).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
		if err := cl.EndTransaction(ctx, end); err != nil {
			t.Fatalf("end transaction %d: %v", i, err)
		}
	}
	r := dialTxn(t, n)
	r.waitState("client-tx", "CompleteAbort")
	ms := markers(t, n, "t", 0)
	if len(ms) != 2 || !ms[0].Commit || ms[1].Commit {
		t.Fatalf("markers %+v", ms)
	}
	got := consumeN(t, n, "t", kgo.NewOffset().AtStart(), 6)
	if len(got) != 6 {
		t.Fatalf("read_uncommitted read %d records", len(got))
	}
}

// TestTxnClientFenced: a second producer with the same transactional id fences the first, whose
// commit then fails.
func TestTxnClientFenced(t *testing.T) {
	n := startTxnNode(t)
	createTopic(t, newAdmin(t, n), "t", 1, nil)
	ctx := testCtx(t)
	opts := []kgo.Opt{kgo.TransactionalID("shared"), kgo.DefaultProduceTopic("t")}
	checkFenced(ctx, t, newClient(t, n, opts...), newClient(t, n, opts...))
}

// checkFenced has zombie produce in a transaction, then live, a producer with the same transactional
// id, produce and commit its own; zombie's commit must then fail as fenced.
func checkFenced(ctx context.Context, t *testing.T, zombie, live *kgo.Client) {
	t.Helper()
	if err := zombie.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := zombie.ProduceSync(ctx, kgo.StringRecord("zombie")).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	if err := live.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := live.ProduceSync(ctx, kgo.StringRecord("live")).FirstErr(); err != nil {
		t.Fatalf("produce of the new producer: %v", err)
	}
	if err := live.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("the new producer's commit: %v", err)
	}
	err := zombie.EndTransaction(ctx, kgo.TryCommit)
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("the fenced producer's commit: %v, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", err)
	}
}

// TestTxnClientTimeout: a transaction left open is aborted at its timeout.
func TestTxnClientTimeout(t *testing.T) {
	n := startTxnNode(t)
	createTopic(t, newAdmin(t, n), "t", 1, nil)
	ctx := testCtx(t)
	cl := newClient(t, n, kgo.TransactionalID("slow"), kgo.DefaultProduceTopic("t"), kgo.TransactionTimeout(time.Second))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, kgo.StringRecord("left open")).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	r := dialTxn(t, n)
	if d := r.waitState("slow", "CompleteAbort"); d.ProducerEpoch != 1 {
		t.Fatalf("after the timeout: epoch %d", d.ProducerEpoch)
	}
	if ms := markers(t, n, "t", 0); len(ms) != 1 || ms[0].Commit {
		t.Fatalf("markers %+v", ms)
	}
	described, err := newAdmin(t, n).DescribeTransactions(ctx, "slow")
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := described["slow"]; !ok || d.State != "CompleteAbort" {
		t.Fatalf("kadm described %+v", described)
	}
}
