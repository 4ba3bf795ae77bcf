package record

import (
	"errors"
	"testing"
)

func TestMarkerRoundTrip(t *testing.T) {
	for _, commit := range []bool{true, false} {
		b := AppendMarker(nil, 42, 3, 7, commit, 1_700_000_000_000)
		h, err := Validate(b)
		if err != nil {
			t.Fatalf("Validate: %v", err)
		}
		if !h.Control() || !h.Transactional() || h.ProducerID != 42 || h.ProducerEpoch != 3 || h.BaseSequence != -1 {
			t.Fatalf("header %+v", h)
		}
		m, err := ParseMarker(b)
		if err != nil {
			t.Fatalf("ParseMarker: %v", err)
		}
		if m.Commit != commit || m.CoordinatorEpoch != 7 {
			t.Fatalf("marker %+v, want commit %v epoch 7", m, commit)
		}
	}
}

func TestParseMarkerRefusesDataBatches(t *testing.T) {
	h := Header{PartitionLeaderEpoch: -1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, NumRecords: 1}
	b := AppendBatch(nil, h, AppendRecord(nil, Record{Key: []byte("k"), Value: []byte("v")}))
	if _, err := ParseMarker(b); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("ParseMarker of a data batch: %v, want ErrInvalidRecord", err)
	}
}

func FuzzParseMarker(f *testing.F) {
	f.Add(AppendMarker(nil, 1, 0, 0, true, 0))
	f.Add(AppendMarker(nil, 9, 2, 5, false, 3))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMarker(b)
		if err != nil {
			return
		}
		h, _ := ParseHeader(b)
		again := AppendMarker(nil, h.ProducerID, h.ProducerEpoch, m.CoordinatorEpoch, m.Commit, h.BaseTimestamp)
		if m2, err := ParseMarker(again); err != nil || m2 != m {
			t.Fatalf("re-encoded marker %+v, %v; want %+v", m2, err, m)
		}
	})
}
