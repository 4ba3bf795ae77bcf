package record_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/record/recordtest"
)

func sampleRecords() []record.Record {
	return []record.Record{
		{TimestampDelta: 0, OffsetDelta: 0, Key: []byte("k1"), Value: []byte("v1")},
		{TimestampDelta: -5, OffsetDelta: 1, Key: nil, Value: []byte{}},
		{TimestampDelta: 1 << 40, OffsetDelta: 2, Key: []byte{}, Value: nil,
			Headers: []record.RecordHeader{{Key: []byte("h"), Value: nil}, {Key: []byte{}, Value: []byte("x")}}},
	}
}

func TestDecodeRecordsRoundTrip(t *testing.T) {
	recs := sampleRecords()
	var body []byte
	for _, r := range recs {
		body = record.AppendRecord(body, r)
	}
	got, err := record.DecodeRecords(body, len(recs))
	if err != nil {
		t.Fatalf("DecodeRecords: %v", err)
	}
	if !reflect.DeepEqual(got, recs) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, recs)
	}
	if got[1].Key != nil || got[2].Value != nil || got[2].Key == nil {
		t.Fatalf("null and empty fields confused: %+v", got)
	}
}

// TestDecodeRecordsMatchesKmsg checks the layout against franz-go's encoder, as clients write it.
func TestDecodeRecordsMatchesKmsg(t *testing.T) {
	var body []byte
	for _, r := range sampleRecords() {
		k := kmsg.Record{Attributes: r.Attributes, TimestampDelta64: r.TimestampDelta, OffsetDelta: r.OffsetDelta,
			Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			k.Headers = append(k.Headers, kmsg.Header{Key: string(h.Key), Value: h.Value})
		}
		k.Length = int32(len(k.AppendTo(nil)) - 1)
		body = k.AppendTo(body)
	}
	var ours []byte
	for _, r := range sampleRecords() {
		ours = record.AppendRecord(ours, r)
	}
	if !bytes.Equal(body, ours) {
		t.Fatalf("encodings differ:\nkmsg %x\nours %x", body, ours)
	}
	if _, err := record.DecodeRecords(body, 3); err != nil {
		t.Fatalf("decoding kmsg records: %v", err)
	}
}

func TestDecodeRecordsRejects(t *testing.T) {
	good := record.AppendRecord(nil, record.Record{Key: []byte("key"), Value: []byte("value")})
	cases := map[string]struct {
		body []byte
		n    int
	}{
		"empty":          {nil, 1},
		"too few":        {good, 2},
		"trailing bytes": {append(append([]byte{}, good...), 0), 1},
		"negative count": {good, -1},
		"truncated":      {good[:len(good)-1], 1},
		"length past":    {append([]byte{0x7e}, good[1:]...), 1},
		"key past":       {[]byte{0x0a, 0, 0, 0, 0x20, 0, 0, 0}, 1},
		"bad varint":     {[]byte{0x0e, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 1},
	}
	for name, c := range cases {
		if _, err := record.DecodeRecords(c.body, c.n); !errors.Is(err, record.ErrInvalidRecord) {
			t.Errorf("%s: err %v, want ErrInvalidRecord", name, err)
		}
	}
}

func TestAppendBatchValidates(t *testing.T) {
	var body []byte
	for i, r := range sampleRecords() {
		r.OffsetDelta = int32(i)
		body = record.AppendRecord(body, r)
	}
	h := record.Header{BaseOffset: 40, PartitionLeaderEpoch: 3, LastOffsetDelta: 2, BaseTimestamp: 10, MaxTimestamp: 12,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, NumRecords: 3}
	b := record.AppendBatch([]byte("prefix"), h, body)
	got, err := record.Validate(b[len("prefix"):])
	if err != nil {
		t.Fatalf("Validate: %v", err)
	}
	h.Length, h.Magic, h.CRC = got.Length, record.Magic, got.CRC
	if got != h {
		t.Fatalf("header %+v, want %+v", got, h)
	}
	if !bytes.Equal(record.Body(b[len("prefix"):]), body) {
		t.Fatal("Body differs from the records appended")
	}
	spec := recordtest.Batch(recordtest.Spec{Records: 4, ValueBytes: 2})
	sh, _ := record.Validate(spec)
	if recs, err := record.DecodeRecords(record.Body(spec), int(sh.NumRecords)); err != nil || len(recs) != 4 {
		t.Fatalf("recordtest batch: %d records, %v", len(recs), err)
	}
}

func FuzzDecodeRecords(f *testing.F) {
	var body []byte
	for _, r := range sampleRecords() {
		body = record.AppendRecord(body, r)
	}
	f.Add(body, 3)
	f.Add(record.Body(recordtest.Batch(recordtest.Spec{Records: 2, ValueBytes: 3})), 2)
	f.Add([]byte{}, 0)
	f.Add([]byte{0x0e, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 1)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		recs, err := record.DecodeRecords(b, n)
		if err != nil {
			if !errors.Is(err, record.ErrInvalidRecord) {
				t.Fatalf("error %v does not wrap ErrInvalidRecord", err)
			}
			return
		}
		if len(recs) != n {
			t.Fatalf("decoded %d records, asked for %d", len(recs), n)
		}
		var again []byte
		for _, r := range recs {
			again = record.AppendRecord(again, r)
		}
		back, err := record.DecodeRecords(again, n)
		if err != nil || !reflect.DeepEqual(normalize(back), normalize(recs)) {
			t.Fatalf("re-encoding changed the records: %v", err)
		}
	})
}

// normalize makes empty header lists comparable whether nil or not.
func normalize(recs []record.Record) []record.Record {
	out := make([]record.Record, len(recs))
	for i, r := range recs {
		if len(r.Headers) == 0 {
			r.Headers = nil
		}
		out[i] = r
	}
	return out
}

// TestAppendRecordSizes checks that AppendRecord's length prefix is the length of what follows it at
// the edges of the varint sizes, and that a record appended where there is room allocates nothing.
func TestAppendRecordSizes(t *testing.T) {
	for _, n := range []int{0, 1, 63, 64, 127, 128, 8191, 8192, 1 << 20} {
		for _, delta := range []int64{0, -1, 63, -64, 64, 1 << 40, -(1 << 40)} {
			r := record.Record{TimestampDelta: delta, OffsetDelta: int32(n), Key: make([]byte, n%200), Value: make([]byte, n),
				Headers: []record.RecordHeader{{Key: []byte("h"), Value: nil}, {Key: make([]byte, n%300), Value: []byte("v")}}}
			b := record.AppendRecord(nil, r)
			length, m := binary.Varint(b)
			if m <= 0 || int(length) != len(b)-m {
				t.Fatalf("value of %d bytes, delta %d: length prefix %d, %d bytes follow it", n, delta, length, len(b)-m)
			}
			got, err := record.DecodeRecords(b, 1)
			if err != nil || len(got[0].Value) != n || got[0].TimestampDelta != delta || len(got[0].Headers) != 2 {
				t.Fatalf("value of %d bytes, delta %d: decoded %+v, %v", n, delta, got, err)
			}
		}
	}
	r := record.Record{Key: []byte("key"), Value: make([]byte, 1024)}
	buf := make([]byte, 0, 4096)
	if allocs := testing.AllocsPerRun(100, func() { buf = record.AppendRecord(buf[:0], r) }); allocs != 0 {
		t.Errorf("AppendRecord into a buffer with room: %v allocations, want 0", allocs)
	}
}
