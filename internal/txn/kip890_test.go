package txn

import (
	"errors"
	"testing"
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
