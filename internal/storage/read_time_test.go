package storage

import (
	"bytes"
	"testing"

	"github.com/weir-mq/weir/internal/compress"
	"github.com/weir-mq/weir/internal/record"
)

// TestLogOffsetForTimeFindsTheRecord checks that a timestamp inside a batch answers with the record's own
// offset, for plain and compressed batches, as Kafka's ListOffsets does.
func TestLogOffsetForTimeFindsTheRecord(t *testing.T) {
	for _, codec := range []compress.Codec{compress.None, compress.Gzip, compress.Snappy, compress.LZ4, compress.Zstd} {
		t.Run(codec.String(), func(t *testing.T) {
			l := openLog(t, newMem(t), "/data/t-0", testConfig(), newClock())
			defer l.Close()
			const base = 1_000_000
			if _, err := l.Append(batch(3, 10, base-100), 0); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Append(timedBatch(t, codec, base, 10), 0); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct{ ts, want int64 }{{base - 100, 0}, {base, 3}, {base + 5000, 8}, {base + 4500, 8}, {base + 9000, 12}} {
				off, ok, err := l.OffsetForTime(tc.ts)
				if err != nil || !ok || off != tc.want {
					t.Errorf("OffsetForTime(%d) = %d, %v, %v; want %d", tc.ts, off, ok, err, tc.want)
				}
			}
		})
	}
}

// timedBatch builds a batch of n records whose record i has timestamp base + i seconds, compressed with codec.
func timedBatch(t *testing.T, codec compress.Codec, base int64, n int) []byte {
	t.Helper()
	var body []byte
	for i := range n {
		body = record.AppendRecord(body, record.Record{TimestampDelta: int64(i) * 1000, OffsetDelta: int32(i), Value: []byte{byte(i)}})
	}
	packed, err := compress.Encode(codec, body)
	if err != nil {
		t.Fatal(err)
	}
	h := record.Header{
		Attributes: int16(codec), LastOffsetDelta: int32(n - 1), BaseTimestamp: base,
		MaxTimestamp: base + int64(n-1)*1000, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, NumRecords: int32(n),
	}
	return record.AppendBatch(nil, h, packed)
}

// TestLogReadIntoReusesTheBuffer checks that ReadInto returns what Read returns, in the caller's buffer
// when it is large enough and in a fresh one when it is not.
func TestLogReadIntoReusesTheBuffer(t *testing.T) {
	l := openLog(t, newMem(t), "/data/t-0", testConfig(), newClock())
	defer l.Close()
	for range 5 {
		if _, err := l.Append(batch(4, 50, 1), 0); err != nil {
			t.Fatal(err)
		}
	}
	want, err := l.Read(4, 1<<20, l.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	got, err := l.ReadInto(buf, 4, 1<<20, l.EndOffset())
	if err != nil || !bytes.Equal(got, want) || &got[0] != &buf[0] {
		t.Fatalf("ReadInto into a large buffer: %d bytes, err %v, same storage %v; want %d bytes", len(got), err, err == nil && len(got) > 0 && &got[0] == &buf[0], len(want))
	}
	small := make([]byte, 10)
	got, err = l.ReadInto(small, 4, 1<<20, l.EndOffset())
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("ReadInto into a small buffer: %d bytes, err %v; want %d bytes", len(got), err, len(want))
	}
}
