package partition

import (
	"errors"
	"testing"

	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/storage"
	"github.com/weir-mq/weir/internal/vfs"
)

func TestReplicaWriteMarker(t *testing.T) {
	r := openReplica(t, vfs.NewMem(), storage.DefaultConfig())
	appendWait(t, r, batchSpec{producerID: 7, epoch: 1, seq: 0, records: 2, timestamp: 1})
	a, wait, err := r.WriteMarker(Marker{ProducerID: 7, ProducerEpoch: 1, CoordinatorEpoch: 3, Commit: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := wait(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if a.BaseOffset != 2 || a.LastOffset != 2 {
		t.Fatalf("marker at %d-%d, want 2-2", a.BaseOffset, a.LastOffset)
	}
	res, err := r.Read(2, 1<<20, false)
	if err != nil {
		t.Fatal(err)
	}
	m, err := record.ParseMarker(res.Records)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Commit || m.CoordinatorEpoch != 3 {
		t.Fatalf("marker read back %+v", m)
	}
}

func TestReplicaAppendCoordinatorChecksTheEpoch(t *testing.T) {
	r := openReplica(t, vfs.NewMem(), storage.DefaultConfig())
	appendWait(t, r, batchSpec{producerID: 7, epoch: 2, seq: 0, records: 1, timestamp: 1})
	stale := batchSpec{producerID: 7, epoch: 1, seq: -1, records: 1, timestamp: 1}
	if _, _, err := r.AppendCoordinator(stale.encode()); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("AppendCoordinator at an older epoch: %v, want ErrInvalidProducerEpoch", err)
	}
	cur := batchSpec{producerID: 7, epoch: 2, seq: -1, records: 1, timestamp: 1}
	a, wait, err := r.AppendCoordinator(cur.encode())
	if err != nil {
		t.Fatal(err)
	}
	if err := wait(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if a.BaseOffset != 1 {
		t.Fatalf("appended at %d, want 1", a.BaseOffset)
	}
	// The coordinator's batch did not disturb the producer's sequence: its next batch follows seq 0.
	appendWait(t, r, batchSpec{producerID: 7, epoch: 2, seq: 1, records: 1, timestamp: 1})
}
