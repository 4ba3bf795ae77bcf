package share

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

func TestShareRecordEncoding(t *testing.T) {
	for _, r := range []Record{
		{Snapshot: true, Seq: 1, LeaderEpoch: 0, StartOffset: 0, End: 0},
		{Snapshot: true, Seq: math.MaxInt32, LeaderEpoch: math.MaxInt32, StartOffset: math.MaxInt64 - WindowMax, End: math.MaxInt64,
			Batches: []Batch{{First: math.MaxInt64 - 1, Last: math.MaxInt64 - 1, State: Archived, DeliveryCount: math.MaxInt16}}},
		{Seq: 7, Slot: 3, LeaderEpoch: 2, StartOffset: 100, End: 200, Batches: []Batch{
			{First: 100, Last: 120, State: Available, DeliveryCount: 1},
			{First: 121, Last: 121, State: Acknowledged, DeliveryCount: 2},
			{First: 150, Last: 199, State: Archived, DeliveryCount: 5},
		}},
	} {
		b := r.Encode()
		got, err := DecodeRecord(b)
		if err != nil {
			t.Fatalf("DecodeRecord(%+v): %v", r, err)
		}
		if !recordsEqual(got, r) {
			t.Fatalf("round trip\n got %+v\nwant %+v", got, r)
		}
	}
}

func TestShareRecordCorrupt(t *testing.T) {
	good := Record{Seq: 1, Slot: 1, LeaderEpoch: 1, StartOffset: 10, End: 20, Batches: []Batch{{First: 12, Last: 13, State: Acknowledged, DeliveryCount: 1}}}
	enc := good.Encode()
	with := func(mut func(*Record)) []byte {
		r := good
		r.Batches = append([]Batch(nil), good.Batches...)
		mut(&r)
		return r.Encode()
	}
	cases := map[string][]byte{
		"empty":                   nil,
		"truncated header":        enc[:valueHeaderLen-1],
		"no batch count":          enc[:valueHeaderLen],
		"truncated batch":         enc[:len(enc)-1],
		"trailing byte":           append(bytes.Clone(enc), 0),
		"unknown version":         append([]byte{1}, enc[1:]...),
		"unknown kind":            append([]byte{0, 2}, enc[2:]...),
		"snapshot with a slot":    with(func(r *Record) { r.Snapshot = true }),
		"update without a slot":   with(func(r *Record) { r.Slot = 0 }),
		"negative round":          with(func(r *Record) { r.Seq = -1 }),
		"negative start":          with(func(r *Record) { r.StartOffset, r.Batches = -1, nil }),
		"end before start":        with(func(r *Record) { r.End, r.Batches = 9, nil }),
		"window too long":         with(func(r *Record) { r.End = r.StartOffset + WindowMax + 1 }),
		"batch past the end":      with(func(r *Record) { r.Batches[0].Last = 20 }),
		"acquired state":          with(func(r *Record) { r.Batches[0].State = Acquired }),
		"unknown state":           with(func(r *Record) { r.Batches[0].State = 9 }),
		"more batches than bytes": append(bytes.Clone(enc[:valueHeaderLen]), 0xff, 0x01),
	}
	for name, b := range cases {
		if r, err := DecodeRecord(b); !errors.Is(err, ErrCorruptRecord) {
			t.Errorf("%s: DecodeRecord = %+v, %v; want ErrCorruptRecord", name, r, err)
		}
	}
}

func TestShareKeyEncoding(t *testing.T) {
	k := Key{Group: "billing", TopicID: [16]byte{1, 2, 3, 15: 9}, Partition: 7, Slot: 499}
	got, err := DecodeKey(k.Encode())
	if err != nil || got != k {
		t.Fatalf("DecodeKey = %+v, %v; want %+v", got, err, k)
	}
	enc := k.Encode()
	cases := map[string][]byte{
		"empty":              nil,
		"unknown version":    append([]byte{1}, enc[1:]...),
		"truncated":          enc[:len(enc)-1],
		"trailing byte":      append(bytes.Clone(enc), 0),
		"empty group":        Key{Partition: 1}.Encode(),
		"invalid UTF-8":      Key{Group: "\xff"}.Encode(),
		"negative partition": Key{Group: "g", Partition: -1}.Encode(),
		"negative slot":      Key{Group: "g", Slot: -1}.Encode(),
	}
	for name, b := range cases {
		if k, err := DecodeKey(b); !errors.Is(err, ErrCorruptRecord) {
			t.Errorf("%s: DecodeKey = %+v, %v; want ErrCorruptRecord", name, k, err)
		}
	}
}

// FuzzShareDecode feeds arbitrary bytes to both decoders: they return an error or a value that encodes
// back to the same bytes and that Durable.Apply takes without panicking.
func FuzzShareDecode(f *testing.F) {
	f.Add(Record{Snapshot: true, Seq: 1, StartOffset: 3, End: 9, Batches: []Batch{{First: 4, Last: 6, State: Archived, DeliveryCount: 2}}}.Encode())
	f.Add(Record{Seq: 1, Slot: 1, StartOffset: 3, End: 9}.Encode())
	f.Add(Key{Group: "g", Partition: 1, Slot: 2}.Encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := DecodeRecord(b); err == nil {
			if !bytes.Equal(r.Encode(), b) {
				t.Fatalf("%x decodes to %+v, which encodes to %x", b, r, r.Encode())
			}
			var d Durable
			if err := d.Apply(Record{Snapshot: true, Seq: r.Seq, LeaderEpoch: r.LeaderEpoch, StartOffset: r.StartOffset, End: r.StartOffset}); err != nil {
				t.Fatal(err)
			}
			_ = d.Apply(r)
		}
		if k, err := DecodeKey(b); err == nil && !bytes.Equal(k.Encode(), b) {
			t.Fatalf("%x decodes to key %+v, which encodes to %x", b, k, k.Encode())
		}
	})
}
