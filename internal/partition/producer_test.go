package partition

import (
	"errors"
	"math"
	"testing"

	"github.com/weir-mq/weir/internal/record"
)

func hdr(pid int64, epoch int16, seq int32, n int32, base int64) record.Header {
	return record.Header{
		BaseOffset: base, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq,
		LastOffsetDelta: n - 1, NumRecords: n, Magic: record.Magic,
	}
}

func TestProducerCheck(t *testing.T) {
	type step struct {
		h       record.Header
		wantErr error
		wantDup int64 // first offset of the duplicate, -1 for none
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"in order", []step{
			{hdr(1, 0, 0, 3, 0), nil, -1},
			{hdr(1, 0, 3, 2, 3), nil, -1},
			{hdr(1, 0, 5, 1, 5), nil, -1},
		}},
		{"unknown producer may start anywhere", []step{
			{hdr(7, 2, 42, 1, 0), nil, -1},
			{hdr(7, 2, 43, 1, 1), nil, -1},
		}},
		{"retry of the last batch", []step{
			{hdr(1, 0, 0, 3, 0), nil, -1},
			{hdr(1, 0, 3, 2, 3), nil, -1},
			{hdr(1, 0, 3, 2, 99), nil, 3},
		}},
		{"retry of the oldest of five", []step{
			{hdr(1, 0, 0, 1, 10), nil, -1},
			{hdr(1, 0, 1, 1, 11), nil, -1},
			{hdr(1, 0, 2, 1, 12), nil, -1},
			{hdr(1, 0, 3, 1, 13), nil, -1},
			{hdr(1, 0, 4, 1, 14), nil, -1},
			{hdr(1, 0, 0, 1, 99), nil, 10},
		}},
		{"a sixth batch forgets the first", []step{
			{hdr(1, 0, 0, 1, 10), nil, -1},
			{hdr(1, 0, 1, 1, 11), nil, -1},
			{hdr(1, 0, 2, 1, 12), nil, -1},
			{hdr(1, 0, 3, 1, 13), nil, -1},
			{hdr(1, 0, 4, 1, 14), nil, -1},
			{hdr(1, 0, 5, 1, 15), nil, -1},
			{hdr(1, 0, 0, 1, 99), ErrOutOfOrderSequence, -1},
			{hdr(1, 0, 1, 1, 99), nil, 11},
		}},
		{"gap", []step{
			{hdr(1, 0, 0, 2, 0), nil, -1},
			{hdr(1, 0, 3, 1, 2), ErrOutOfOrderSequence, -1},
		}},
		{"same first sequence, different length is not a duplicate", []step{
			{hdr(1, 0, 0, 2, 0), nil, -1},
			{hdr(1, 0, 0, 3, 2), ErrOutOfOrderSequence, -1},
		}},
		{"older epoch is fenced", []step{
			{hdr(1, 3, 0, 1, 0), nil, -1},
			{hdr(1, 2, 1, 1, 1), ErrInvalidProducerEpoch, -1},
		}},
		{"new epoch starts at zero", []step{
			{hdr(1, 0, 0, 5, 0), nil, -1},
			{hdr(1, 1, 5, 1, 5), ErrOutOfOrderSequence, -1},
			{hdr(1, 1, 0, 1, 5), nil, -1},
			{hdr(1, 1, 1, 1, 6), nil, -1},
		}},
		{"sequence wraps", []step{
			{hdr(1, 0, math.MaxInt32-1, 2, 0), nil, -1},
			{hdr(1, 0, 0, 1, 2), nil, -1},
		}},
		{"negative epoch or sequence", []step{
			{hdr(1, -1, 0, 1, 0), ErrInvalidProducerEpoch, -1},
			{hdr(1, 0, -1, 1, 0), ErrOutOfOrderSequence, -1},
		}},
		{"producers are independent", []step{
			{hdr(1, 0, 0, 1, 0), nil, -1},
			{hdr(2, 0, 0, 1, 1), nil, -1},
			{hdr(1, 0, 1, 1, 2), nil, -1},
			{hdr(2, 0, 2, 1, 3), ErrOutOfOrderSequence, -1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProducers()
			for i, s := range tt.steps {
				dup, err := p.check(s.h)
				if !errors.Is(err, s.wantErr) || (s.wantErr == nil && err != nil) {
					t.Fatalf("step %d: err %v, want %v", i, err, s.wantErr)
				}
				if err != nil {
					continue
				}
				switch {
				case s.wantDup >= 0 && (dup == nil || dup.firstOffset != s.wantDup):
					t.Fatalf("step %d: duplicate %+v, want first offset %d", i, dup, s.wantDup)
				case s.wantDup < 0 && dup != nil:
					t.Fatalf("step %d: unexpected duplicate %+v", i, dup)
				case dup == nil:
					p.update(s.h, nil)
				}
			}
		})
	}
}

func TestProducerControlAndEvict(t *testing.T) {
	p := newProducers()
	p.update(hdr(1, 0, 0, 2, 0), nil)
	txn := hdr(1, 0, 2, 1, 2)
	txn.Attributes = 0x10
	p.update(txn, nil)
	if e := p.m[1]; e.txnFirstOffset != 2 {
		t.Fatalf("txn first offset %d, want 2", e.txnFirstOffset)
	}
	marker := hdr(1, 0, -1, 1, 3)
	marker.Attributes = 0x30
	p.update(marker, &record.Marker{Commit: true})
	if e := p.m[1]; e.txnFirstOffset != -1 || e.lastOffset != 3 || len(e.batches) != 2 {
		t.Fatalf("after marker: %+v", e)
	}
	if _, err := p.check(hdr(1, 0, 3, 1, 4)); err != nil {
		t.Fatalf("sequence after a marker: %v", err)
	}
	p.update(hdr(2, 0, 0, 1, 10), nil)
	p.evictBefore(4)
	if _, ok := p.m[1]; ok {
		t.Fatal("producer 1 survived eviction below 4")
	}
	if _, ok := p.m[2]; !ok {
		t.Fatal("producer 2 evicted")
	}
}
