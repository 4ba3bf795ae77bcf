package record_test

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/record/recordtest"
)

// kmsgBatch builds a batch with franz-go's encoder, as a client would send it.
func kmsgBatch(records int) []byte {
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           0x10,
		LastOffsetDelta:      int32(records - 1),
		FirstTimestamp:       1000,
		MaxTimestamp:         1000 + int64(records-1),
		ProducerID:           7,
		ProducerEpoch:        1,
		FirstSequence:        3,
		NumRecords:           int32(records),
	}
	var recs []byte
	for i := range records {
		r := kmsg.Record{TimestampDelta64: int64(i), OffsetDelta: int32(i), Key: []byte("k"), Value: []byte("value")}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		recs = r.AppendTo(recs)
	}
	b.Records = recs
	raw := b.AppendTo(nil)
	b.Length = int32(len(raw) - 12)
	raw = b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[17:], record.Checksum(raw))
	return raw
}

func TestRecordValidateKmsgBatch(t *testing.T) {
	raw := kmsgBatch(3)
	h, err := record.Validate(raw)
	if err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if h.NumRecords != 3 || h.LastOffset() != 2 || h.ProducerID != 7 || h.BaseSequence != 3 || !h.Transactional() ||
		h.Control() || h.Compression() != 0 || h.LogAppendTime() || h.Size() != len(raw) {
		t.Fatalf("header %+v", h)
	}
	record.SetBaseOffset(raw, 1000)
	record.SetPartitionLeaderEpoch(raw, 5)
	h, err = record.Validate(raw)
	if err != nil {
		t.Fatalf("Validate after stamping: %v", err)
	}
	if h.BaseOffset != 1000 || h.PartitionLeaderEpoch != 5 || h.LastOffset() != 1002 {
		t.Fatalf("stamped header %+v", h)
	}
}

func TestRecordValidateErrors(t *testing.T) {
	good := recordtest.Batch(recordtest.Spec{Records: 2, ValueBytes: 10, Timestamp: 5})
	mutate := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return b
	}
	recrc := func(f func(b []byte)) []byte {
		return mutate(func(b []byte) {
			f(b)
			binary.BigEndian.PutUint32(b[17:], record.Checksum(b))
		})
	}
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, record.ErrCorrupt},
		{"short header", good[:40], record.ErrCorrupt},
		{"truncated", good[:len(good)-1], record.ErrCorrupt},
		{"trailing bytes", append(append([]byte(nil), good...), 0), record.ErrCorrupt},
		{"length too small", mutate(func(b []byte) { binary.BigEndian.PutUint32(b[8:], 10) }), record.ErrCorrupt},
		{"negative length", mutate(func(b []byte) { binary.BigEndian.PutUint32(b[8:], 0xffffffff) }), record.ErrCorrupt},
		{"magic 1", mutate(func(b []byte) { b[16] = 1 }), record.ErrUnsupportedMagic},
		{"magic 1 short", mutate(func(b []byte) { b[16] = 1 })[:30], record.ErrUnsupportedMagic},
		{"crc", mutate(func(b []byte) { b[len(b)-1] ^= 1 }), record.ErrCorrupt},
		{"count vs delta", recrc(func(b []byte) { binary.BigEndian.PutUint32(b[57:], 3) }), record.ErrInvalidRecord},
		{"zero records", recrc(func(b []byte) {
			binary.BigEndian.PutUint32(b[57:], 0)
			binary.BigEndian.PutUint32(b[23:], 0xffffffff)
		}), record.ErrInvalidRecord},
		{"max ts below base", recrc(func(b []byte) { binary.BigEndian.PutUint64(b[35:], 1) }), record.ErrInvalidRecord},
		{"base ts below -1", recrc(func(b []byte) { binary.BigEndian.PutUint64(b[27:], 0xfffffffffffffff0) }), record.ErrInvalidRecord},
		{"codec 7", recrc(func(b []byte) { b[22] |= 7 }), record.ErrInvalidRecord},
		{"too many records for bytes", recrc(func(b []byte) {
			binary.BigEndian.PutUint32(b[57:], 1000)
			binary.BigEndian.PutUint32(b[23:], 999)
		}), record.ErrInvalidRecord},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := record.Validate(tt.b); !errors.Is(err, tt.want) {
				t.Fatalf("Validate: %v, want %v", err, tt.want)
			}
		})
	}
	if _, err := record.Validate(good); err != nil {
		t.Fatalf("good batch: %v", err)
	}
}

func TestRecordBatchesWalk(t *testing.T) {
	a := recordtest.Batch(recordtest.Spec{Records: 1})
	b := recordtest.Batch(recordtest.Spec{Records: 4, BaseOffset: 1})
	all := append(append([]byte(nil), a...), b...)
	var sizes []int
	for batch, err := range record.Batches(all) {
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(batch))
	}
	if len(sizes) != 2 || sizes[0] != len(a) || sizes[1] != len(b) {
		t.Fatalf("sizes %v", sizes)
	}
	var errs int
	for _, err := range record.Batches(all[:len(all)-3]) {
		if err != nil {
			errs++
		}
	}
	if errs != 1 {
		t.Fatalf("torn tail gave %d errors", errs)
	}
	if _, _, err := record.Split(all[:10]); !errors.Is(err, record.ErrCorrupt) {
		t.Fatalf("Split short: %v", err)
	}
}

func FuzzValidate(f *testing.F) {
	f.Add(recordtest.Batch(recordtest.Spec{Records: 2, ValueBytes: 3}))
	f.Add(kmsgBatch(1))
	f.Add([]byte{})
	f.Add(make([]byte, record.HeaderSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := record.Validate(b)
		c, cerr := record.Check(b)
		if (err == nil) != (cerr == nil) || err == nil && (c.Header != h || len(c.Bytes) != len(b)) {
			t.Fatalf("Check (%+v, %v) disagrees with Validate (%+v, %v)", c.Header, cerr, h, err)
		}
		if err != nil {
			return
		}
		if h.Size() != len(b) || h.NumRecords != h.LastOffsetDelta+1 || record.Checksum(b) != h.CRC {
			t.Fatalf("accepted inconsistent batch %+v of %d bytes", h, len(b))
		}
		for batch, err := range record.Batches(b) {
			if err != nil || len(batch) != len(b) {
				t.Fatalf("Batches disagrees with Validate: %v", err)
			}
		}
	})
}

func TestRecordSetLogAppendTime(t *testing.T) {
	b := recordtest.Batch(recordtest.Spec{Records: 3, ValueBytes: 5, Timestamp: 1000})
	record.SetLogAppendTime(b, 424242)
	h, err := record.Validate(b)
	if err != nil {
		t.Fatalf("Validate after SetLogAppendTime: %v", err)
	}
	if !h.LogAppendTime() || h.MaxTimestamp != 424242 || h.BaseTimestamp != 1000 || h.NumRecords != 3 {
		t.Fatalf("header after SetLogAppendTime: %+v", h)
	}
}

func TestRecordCheck(t *testing.T) {
	b := recordtest.Batch(recordtest.Spec{BaseOffset: 7, Records: 3, ValueBytes: 5, Timestamp: 1000})
	c, err := record.Check(b)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if c.Header.BaseOffset != 7 || c.Header.NumRecords != 3 || c.Header.Size() != len(b) || &c.Bytes[0] != &b[0] || len(c.Bytes) != len(b) {
		t.Fatalf("Check gave %+v over %d bytes", c.Header, len(c.Bytes))
	}
	bad := slices.Clone(b)
	bad[len(bad)-1] ^= 0xff
	for name, tt := range map[string]struct {
		b    []byte
		want error
	}{
		"crc":   {bad, record.ErrCorrupt},
		"torn":  {b[:len(b)-1], record.ErrCorrupt},
		"two":   {append(slices.Clone(b), b...), record.ErrCorrupt},
		"empty": {nil, record.ErrCorrupt},
		"magic": {append(slices.Clone(b[:16]), 1), record.ErrUnsupportedMagic},
		"codec": {recordtest.Batch(recordtest.Spec{Records: 1, Attributes: 0x7}), record.ErrInvalidRecord},
	} {
		if _, err := record.Check(tt.b); !errors.Is(err, tt.want) {
			t.Errorf("%s: Check gave %v, want %v", name, err, tt.want)
		}
	}
}
