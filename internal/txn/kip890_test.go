package txn

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestTxnVerifyPartitions(t *testing.T) {
	x := begun(t)
	errs, err := x.VerifyPartitions(7, 0, []TopicPartition{tpA, tpB})
	if err != nil || errs[0] != nil || !errors.Is(errs[1], ErrInvalidTxnState) {
		t.Fatalf("Ongoing over tpA: %v %v", errs, err)
	}
	if _, err := x.VerifyPartitions(7, 1, []TopicPartition{tpA}); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("another epoch: %v", err)
	}
	if _, err := x.VerifyPartitions(8, 0, []TopicPartition{tpA}); !errors.Is(err, ErrInvalidProducerIDMapping) {
		t.Fatalf("another producer id: %v", err)
	}
	// A record being written does not hide what is durable.
	out := x.AddPartitions(t0, 7, 0, []TopicPartition{tpB})
	if errs, err := x.VerifyPartitions(7, 0, []TopicPartition{tpA, tpB}); err != nil || errs[0] != nil || errs[1] == nil {
		t.Fatalf("while tpB's add is written: %v %v", errs, err)
	}
	stored(t, x, out)
	stored(t, x, x.EndTxn(t0, 7, 0, true))
	if errs, _ := x.VerifyPartitions(7, 0, []TopicPartition{tpA}); !errors.Is(errs[0], ErrInvalidTxnState) {
		t.Fatalf("PrepareCommit: a transaction that is ending takes no new batch: %v", errs[0])
	}
	stored(t, x, x.MarkersWritten(t0))
	if errs, _ := x.VerifyPartitions(7, 0, []TopicPartition{tpA}); !errors.Is(errs[0], ErrInvalidTxnState) {
		t.Fatalf("CompleteCommit: %v", errs[0])
	}
	if _, err := NewTxn("none").VerifyPartitions(7, 0, []TopicPartition{tpA}); !errors.Is(err, ErrInvalidProducerIDMapping) {
		t.Fatalf("unknown id: %v", err)
	}
}

// begunV2 returns an id with producer 7 at epoch 0 and a TV2 transaction over tpA, begun by an
// implicit add.
func begunV2(t *testing.T) *Txn {
	t.Helper()
	x := NewTxn("tx")
	stored(t, x, x.InitProducerID(t0, InitRequest{Timeout: time.Minute, ProducerID: NoProducerID, NewProducerID: 7}))
	stored(t, x, x.AddPartitionsAs(t0, 7, 0, []TopicPartition{tpA}, TV2))
	if v := x.Metadata().ClientTransactionVersion; v != TV2 {
		t.Fatalf("client transaction version %d after an implicit add", v)
	}
	return x
}

func TestTxnEndTxnV2BumpsAndRetries(t *testing.T) {
	x := begunV2(t)
	if eff := stored(t, x, x.EndTxnV2(t0, 7, 0, true, NoProducerID)); !eff.Markers {
		t.Fatal("no markers after PrepareCommit")
	}
	m := x.Metadata()
	if pid, epoch := m.ProducerAfterEnd(); m.State != PrepareCommit || m.ProducerEpoch != 1 || pid != 7 || epoch != 1 {
		t.Fatalf("after EndTxn v5: %+v, next producer %d/%d", m, pid, epoch)
	}
	wantErr(t, x.EndTxnV2(t0, 7, 0, true, NoProducerID), ErrConcurrentTransactions)
	wantErr(t, x.EndTxnV2(t0, 7, 0, false, NoProducerID), ErrInvalidTxnState)
	stored(t, x, x.MarkersWritten(t0))
	wantErr(t, x.EndTxnV2(t0, 7, 0, true, NoProducerID), nil)
	wantErr(t, x.EndTxnV2(t0, 7, 0, false, NoProducerID), ErrInvalidTxnState)
	// At the bumped epoch: no transaction to commit, and another epoch is fenced.
	wantErr(t, x.EndTxnV2(t0, 7, 1, true, NoProducerID), ErrInvalidTxnState)
	wantErr(t, x.EndTxnV2(t0, 7, 2, false, NoProducerID), ErrProducerFenced)
	// A reloaded coordinator answers the retry too.
	y := RestoreTxn(x.Metadata())
	wantErr(t, y.EndTxnV2(t0, 7, 0, true, NoProducerID), nil)

	// An abort with no transaction (the client is unsure) bumps the epoch with no partitions.
	stored(t, x, x.EndTxnV2(t0, 7, 1, false, NoProducerID))
	if m := x.Metadata(); m.State != PrepareAbort || m.ProducerEpoch != 2 || len(m.Partitions) != 0 {
		t.Fatalf("abort from CompleteCommit: %+v", m)
	}
	stored(t, x, x.MarkersWritten(t0))
	wantErr(t, x.EndTxnV2(t0, 7, 0, true, NoProducerID), ErrProducerFenced)
	stored(t, x, x.AddPartitionsAs(t0, 7, 2, []TopicPartition{tpB}, TV2))
}

func TestTxnEndTxnV2EpochOverflow(t *testing.T) {
	x := RestoreTxn(Metadata{
		ID: "tx", ProducerID: 7, ProducerEpoch: epochExhausted, PreviousProducerID: NoProducerID, NextProducerID: NoProducerID,
		ClientTransactionVersion: TV2, State: Ongoing, Partitions: []TopicPartition{tpA}, Timeout: time.Minute, Start: t0,
	})
	wantErr(t, x.EndTxnV2(t0, 7, epochExhausted, true, NoProducerID), ErrProducerIDNeeded)
	stored(t, x, x.EndTxnV2(t0, 7, epochExhausted, true, 11))
	m := x.Metadata()
	if pid, epoch := m.ProducerAfterEnd(); m.ProducerID != 7 || m.ProducerEpoch != math.MaxInt16 || pid != 11 || epoch != 0 {
		t.Fatalf("Prepare at the exhausted epoch: %+v, next producer %d/%d", m, pid, epoch)
	}
	stored(t, x, x.MarkersWritten(t0))
	if m := x.Metadata(); m.State != CompleteCommit || m.ProducerID != 11 || m.ProducerEpoch != 0 || m.PreviousProducerID != 7 || m.NextProducerID != NoProducerID {
		t.Fatalf("Complete after the overflow: %+v", m)
	}
	wantErr(t, x.EndTxnV2(t0, 7, epochExhausted, true, NoProducerID), nil)
	wantErr(t, RestoreTxn(x.Metadata()).EndTxnV2(t0, 7, epochExhausted, true, NoProducerID), nil)
	stored(t, x, x.AddPartitionsAs(t0, 11, 0, []TopicPartition{tpA}, TV2))
}

func TestTxnEndTxnV2FenceIsNoRetry(t *testing.T) {
	x := begunV2(t)
	stored(t, x, x.Timeout(t0.Add(time.Hour)))
	if m := x.Metadata(); m.State != PrepareAbort || m.ProducerEpoch != 1 {
		t.Fatalf("timeout: %+v", m)
	}
	// The producer's EndTxn at its epoch is fenced, not taken for a retry of a bump.
	wantErr(t, x.EndTxnV2(t0, 7, 0, false, NoProducerID), ErrProducerFenced)
}
