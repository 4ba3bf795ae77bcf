package partition

import (
	"context"
	"errors"
	"testing"

	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/storage"
	"github.com/weir-mq/weir/internal/vfs"
)

func TestProducerVerificationCache(t *testing.T) {
	p := newProducers()
	g, ask := p.verificationFor(1, 0)
	if !ask || g == 0 {
		t.Fatalf("first batch of a transaction: guard %d ask %v, want a guard to ask with", g, ask)
	}
	if err := p.checkVerified(txnHdr(1, 0, 0, 1, 0), g); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("append before the answer: %v", err)
	}
	if g2, ask := p.verificationFor(1, 0); g2 != g || !ask {
		t.Fatalf("a second batch while asking: guard %d ask %v, want %d and to ask", g2, ask, g)
	}
	p.verified(1, g)
	if g2, ask := p.verificationFor(1, 0); g2 != g || ask {
		t.Fatalf("after a positive answer: guard %d ask %v, want %d without asking", g2, ask, g)
	}
	if err := p.checkVerified(txnHdr(1, 0, 0, 1, 0), g); err != nil {
		t.Fatalf("verified append: %v", err)
	}
	p.update(txnHdr(1, 0, 0, 1, 0), nil)
	if g, ask := p.verificationFor(1, 0); g != 0 || ask {
		t.Fatalf("open transaction: guard %d ask %v, want nothing to do", g, ask)
	}
	if _, ask := p.verificationFor(1, 1); !ask {
		t.Fatal("a batch at a newer epoch than the open transaction's is not verified")
	}
	p.markerWritten(1, 1, 0)
	p.update(markerHdr(1, 1, 1), &record.Marker{Commit: true})
	if _, ask := p.verificationFor(1, 1); !ask {
		t.Fatal("the next transaction after a marker is not verified")
	}

	// A marker between the check and the append refuses the append.
	g, _ = p.verificationFor(2, 0)
	p.verified(2, g)
	p.markerWritten(2, 0, 0)
	if err := p.checkVerified(txnHdr(2, 0, 0, 1, 3), g); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("append verified against a transaction that ended since: %v", err)
	}
	// A TV2 marker at the check's epoch ends the transaction before; one past it ends the checked one.
	g, _ = p.verificationFor(4, 1)
	p.markerWritten(4, 1, 2)
	p.verified(4, g)
	if err := p.checkVerified(txnHdr(4, 1, 0, 1, 3), g); err != nil {
		t.Fatalf("append after the TV2 marker of the transaction before: %v", err)
	}
	p.markerWritten(4, 2, 2)
	if err := p.checkVerified(txnHdr(4, 1, 0, 1, 3), g); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("append after a fence's TV2 marker: %v", err)
	}
	// A failed check is forgotten; a guard of another check does not pass.
	g, _ = p.verificationFor(3, 0)
	p.dropVerification(3, g)
	if err := p.checkVerified(txnHdr(3, 0, 0, 1, 3), g); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("append after a failed check: %v", err)
	}
	if g2, ask := p.verificationFor(3, 0); !ask || g2 == g {
		t.Fatalf("after a failed check: guard %d (old %d) ask %v, want a new check", g2, g, ask)
	}
}

func TestReplicaAppendTxnVerifies(t *testing.T) {
	r := openReplica(t, vfs.NewMem(), storage.DefaultConfig())
	ctx := testCtx(t)
	calls := 0
	refuse := errors.New("not in the transaction")
	answer := error(refuse)
	verify := func(context.Context) error { calls++; return answer }
	appendTxn := func(s batchSpec) error {
		t.Helper()
		c, err := record.Check(s.encode())
		if err != nil {
			t.Fatal(err)
		}
		_, wait, err := r.AppendTxn(ctx, c, AcksAll, verify)
		if err == nil {
			err = wait(ctx)
		}
		return err
	}
	if err := appendTxn(txnBatch(1, 0, 0, 1)); !errors.Is(err, refuse) || calls != 1 || r.LogEndOffset() != 0 {
		t.Fatalf("refused verification: %v, %d calls, log end %d", err, calls, r.LogEndOffset())
	}
	answer = nil
	for seq := range int32(3) {
		if err := appendTxn(txnBatch(1, 0, seq, 1)); err != nil {
			t.Fatalf("batch %d: %v", seq, err)
		}
	}
	if calls != 2 {
		t.Fatalf("%d calls to the coordinator for one transaction's three batches, want 1 more than the refusal", calls)
	}
	if err := appendTxn(idem(2, 0, 0, 1)); err != nil || calls != 2 {
		t.Fatalf("an idempotent batch: %v, %d calls", err, calls)
	}
	writeMarker(t, r, Marker{ProducerID: 1, ProducerEpoch: 0, Commit: true})
	if err := appendTxn(txnBatch(1, 0, 3, 1)); err != nil || calls != 3 {
		t.Fatalf("the next transaction: %v, %d calls, want a new check", err, calls)
	}
}

// TestProducerTV2MarkerEpoch: a TV2 marker at the epoch of the producer's open transaction is a late
// marker of the transaction before (KIP-1228); at a bumped epoch, or with nothing open, it is taken.
func TestProducerTV2MarkerEpoch(t *testing.T) {
	p := newProducers()
	p.update(txnHdr(1, 3, 0, 1, 0), nil)
	if err := p.checkMarker(markerHdr(1, 3, 1), record.Marker{Commit: true}, 2); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("TV2 marker at the open transaction's epoch: %v", err)
	}
	if err := p.checkMarker(markerHdr(1, 3, 1), record.Marker{Commit: true}, 0); err != nil {
		t.Fatalf("TV1 marker at the open transaction's epoch: %v", err)
	}
	if err := p.checkMarker(markerHdr(1, 4, 1), record.Marker{Commit: true}, 2); err != nil {
		t.Fatalf("TV2 marker at the bumped epoch: %v", err)
	}
	p.update(markerHdr(1, 4, 1), &record.Marker{Commit: true})
	if err := p.checkMarker(markerHdr(1, 4, 2), record.Marker{Commit: true}, 2); err != nil {
		t.Fatalf("a coordinator's retried TV2 marker, nothing open: %v", err)
	}
}
