package api

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/clock/clocktest"
	"github.com/weir-mq/weir/internal/compress"
	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/record"
)

// convertNow is the broker's time in the conformBatch tests.
var convertNow = time.UnixMilli(1_800_000_000_000)

// defaultProduce is ProduceConfig's defaults, as a topic without configs resolves them.
var defaultProduce = controller.ProduceConfig{Compression: controller.CompressionProducer, MaxMessageBytes: 1048588,
	TimestampBeforeMaxMs: math.MaxInt64, TimestampAfterMaxMs: 3600000}

// textBatch is an idempotent batch of n records of about size bytes of JSON-like text each, with their
// timestamps at ts plus their index in milliseconds, its records section compressed with c.
func textBatch(tb testing.TB, c compress.Codec, n, size int, ts int64) []byte {
	tb.Helper()
	var body []byte
	for i := range n {
		var v []byte
		for len(v) < size {
			v = fmt.Appendf(v, `{"user":%d,"event":"click","page":"/item/%d","ms":%d},`, i*7919%1000, i*31%97, len(v))
		}
		body = record.AppendRecord(body, record.Record{TimestampDelta: int64(i), OffsetDelta: int32(i),
			Key: fmt.Appendf(nil, "key-%d", i), Value: v,
			Headers: []record.RecordHeader{{Key: []byte("trace"), Value: fmt.Appendf(nil, "%x", i)}}})
	}
	enc, err := compress.Encode(c, body)
	if err != nil {
		tb.Fatal(err)
	}
	h := record.Header{PartitionLeaderEpoch: -1, Attributes: 0x10, LastOffsetDelta: int32(n - 1), BaseTimestamp: ts,
		MaxTimestamp: ts + int64(n-1), ProducerID: 7, ProducerEpoch: 2, BaseSequence: 40, NumRecords: int32(n)}
	return record.AppendBatch(nil, h.WithCompression(int8(c)), enc)
}

func checked(tb testing.TB, b []byte) record.Checked {
	tb.Helper()
	c, err := record.Check(b)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func convertBroker() *Broker { return &Broker{clock: clocktest.NewManual(convertNow)} }

// TestProduceConformConverts converts between every pair of codecs and checks that the new batch keeps
// the header's fields but the codec, length and CRC, and the records exactly.
func TestProduceConformConverts(t *testing.T) {
	b := convertBroker()
	names := map[compress.Codec]string{compress.None: "uncompressed", compress.Gzip: "gzip", compress.Snappy: "snappy",
		compress.LZ4: "lz4", compress.Zstd: "zstd"}
	levels := map[compress.Codec]int{compress.Gzip: -1, compress.LZ4: 9, compress.Zstd: 3}
	for from := range names {
		in := checked(t, textBatch(t, from, 20, 300, convertNow.UnixMilli()))
		wantBody, err := compress.Decode(from, record.Body(in.Bytes), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for to, name := range names {
			pc := defaultProduce
			pc.Compression, pc.CompressionLevel = name, levels[to]
			out, err := b.conformBatch(in, pc)
			if err != nil {
				t.Fatalf("%s to %s: %v", from, to, err)
			}
			if from == to {
				if &out.Bytes[0] != &in.Bytes[0] {
					t.Fatalf("%s to itself: the batch was copied", from)
				}
				continue
			}
			h, wh := out.Header, in.Header.WithCompression(int8(to))
			h.Length, h.CRC, wh.Length, wh.CRC = 0, 0, 0, 0
			if h != wh {
				t.Fatalf("%s to %s: header %+v, want %+v", from, to, h, wh)
			}
			body, err := compress.Decode(to, record.Body(out.Bytes), 1<<20)
			if err != nil || string(body) != string(wantBody) {
				t.Fatalf("%s to %s: records differ (%v)", from, to, err)
			}
		}
	}
}

// TestProduceConformTimestampWindow checks the window's edges by a manual clock: a record exactly at a
// bound is taken, one a millisecond beyond is refused, a record without a timestamp is skipped, and
// with the limits at their defaults a kept compressed batch is judged by its header alone.
func TestProduceConformTimestampWindow(t *testing.T) {
	b := convertBroker()
	now := convertNow.UnixMilli()
	window := defaultProduce
	window.TimestampBeforeMaxMs, window.TimestampAfterMaxMs, window.TimestampWindowSet = 1000, 500, true
	for _, tc := range []struct {
		name  string
		pc    controller.ProduceConfig
		codec compress.Codec
		base  int64 // the batch's records are at base, base+1 and base+2
		ok    bool
	}{
		{"at the lower bound", window, compress.None, now - 1000, true},
		{"below it", window, compress.None, now - 1001, false},
		{"below it, compressed", window, compress.Zstd, now - 1001, false},
		{"at the upper bound", window, compress.Gzip, now + 498, true},
		{"above it", window, compress.None, now + 499, false},
		{"default, an hour ahead", defaultProduce, compress.None, now + 3600000 - 2, true},
		{"default, past an hour ahead", defaultProduce, compress.Snappy, now + 3600000 - 1, false},
		{"default, a year back", defaultProduce, compress.LZ4, now - 365*24*3600000, true},
		{"log append time", controller.ProduceConfig{Compression: "producer", LogAppendTime: true,
			TimestampBeforeMaxMs: 1, TimestampAfterMaxMs: 1, TimestampWindowSet: true}, compress.None, 0, true},
	} {
		_, err := b.conformBatch(checked(t, textBatch(t, tc.codec, 3, 10, tc.base)), tc.pc)
		if tc.ok != (err == nil) || err != nil && !errors.Is(err, errTimestampOutOfRange) {
			t.Errorf("%s: %v, want ok %v", tc.name, err, tc.ok)
		}
	}

	// A record without a timestamp (-1) among timestamped ones is skipped, as Kafka skips it.
	var body []byte
	for i, ts := range []int64{now, record.NoTimestamp, now} {
		body = record.AppendRecord(body, record.Record{TimestampDelta: ts - now, OffsetDelta: int32(i), Value: []byte("v")})
	}
	h := record.Header{PartitionLeaderEpoch: -1, LastOffsetDelta: 2, BaseTimestamp: now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, NumRecords: 3}
	if _, err := b.conformBatch(checked(t, record.AppendBatch(nil, h, body)), window); err != nil {
		t.Errorf("a record without a timestamp: %v", err)
	}
}

// TestProduceConformMatchingAllocates checks that a batch in the topic's codec, or under producer,
// costs no allocation, with the timestamp window at its defaults and with one set.
func TestProduceConformMatchingAllocates(t *testing.T) {
	b := convertBroker()
	in := checked(t, textBatch(t, compress.Zstd, 100, 1000, convertNow.UnixMilli()))
	plain := checked(t, textBatch(t, compress.None, 100, 1000, convertNow.UnixMilli()))
	zstd := defaultProduce
	zstd.Compression, zstd.CompressionLevel = "zstd", 3
	window := defaultProduce
	window.TimestampBeforeMaxMs, window.TimestampWindowSet = 60000, true
	for name, run := range map[string]func(){
		"producer":               func() { _, _ = b.conformBatch(in, defaultProduce) },
		"zstd to zstd":           func() { _, _ = b.conformBatch(in, zstd) },
		"uncompressed, windowed": func() { _, _ = b.conformBatch(plain, window) },
		"uncompressed, default":  func() { _, _ = b.conformBatch(plain, defaultProduce) },
	} {
		if allocs := testing.AllocsPerRun(50, run); allocs != 0 {
			t.Errorf("%s: %v allocations per batch, want 0", name, allocs)
		}
	}
}

// BenchmarkProduceConform measures the leader's conversion of one produced batch (100 records of 1 KiB of
// JSON-like text, about 100 KiB before compression) on one core: MB/s of records before compression,
// for batches already in the topic's codec and for batches it recompresses at the codecs' default
// levels. The ratio of the two is the cost of compression.type.
func BenchmarkProduceConform(b *testing.B) {
	br := convertBroker()
	for _, bc := range []struct {
		name     string
		from     compress.Codec
		topic    string
		level    int
		windowed bool
	}{
		{"match/producer", compress.Zstd, "producer", 0, false},
		{"match/zstd", compress.Zstd, "zstd", 3, false},
		{"match/lz4", compress.LZ4, "lz4", 9, false},
		{"match/uncompressed-windowed", compress.None, "uncompressed", 0, true},
		{"match/zstd-windowed", compress.Zstd, "zstd", 3, true},
		{"convert/uncompressed-zstd", compress.None, "zstd", 3, false},
		{"convert/uncompressed-lz4", compress.None, "lz4", 9, false},
		{"convert/gzip-lz4", compress.Gzip, "lz4", 9, false},
		{"convert/snappy-zstd", compress.Snappy, "zstd", 3, false},
		{"convert/zstd-uncompressed", compress.Zstd, "uncompressed", 0, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			in := checked(b, textBatch(b, bc.from, 100, 1024, convertNow.UnixMilli()))
			body, err := compress.Decode(bc.from, record.Body(in.Bytes), 1<<30)
			if err != nil {
				b.Fatal(err)
			}
			pc := defaultProduce
			pc.Compression, pc.CompressionLevel = bc.topic, bc.level
			if bc.windowed {
				pc.TimestampBeforeMaxMs, pc.TimestampWindowSet = 60000, true
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := br.conformBatch(in, pc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzProduceConform feeds conformBatch batches built around any records section, in any codec, with a
// correct CRC (so that they pass record.Check, the produce path's own check before it), converted to every
// codec: it must not panic, and a converted batch must hold the records it was given.
func FuzzProduceConform(f *testing.F) {
	for _, c := range []compress.Codec{compress.None, compress.Gzip, compress.Snappy, compress.LZ4, compress.Zstd} {
		f.Add(record.Body(textBatch(f, c, 3, 20, convertNow.UnixMilli())), uint8(c), uint8(3), uint8(0))
	}
	names := []string{"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"}
	levels := map[string]int{"gzip": -1, "lz4": 1, "zstd": 1}
	b := convertBroker()
	f.Fuzz(func(t *testing.T, body []byte, codec, n, which uint8) {
		now := convertNow.UnixMilli()
		h := record.Header{PartitionLeaderEpoch: -1, LastOffsetDelta: int32(n) - 1, BaseTimestamp: now, MaxTimestamp: now,
			ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, NumRecords: int32(n)}
		in, err := record.Check(record.AppendBatch(nil, h.WithCompression(int8(codec%5)), body))
		if err != nil {
			return
		}
		pc := defaultProduce
		pc.Compression = names[int(which)%len(names)]
		pc.CompressionLevel = levels[pc.Compression]
		pc.TimestampWindowSet = which >= 128
		out, err := b.conformBatch(in, pc)
		if err != nil || &out.Bytes[0] == &in.Bytes[0] {
			return
		}
		want, err := compress.Decode(compress.Codec(in.Header.Compression()), record.Body(in.Bytes), recompressRecordsBytesMax)
		if err != nil {
			t.Fatalf("converted a batch whose records do not decode: %v", err)
		}
		got, err := compress.Decode(compress.Codec(out.Header.Compression()), record.Body(out.Bytes), recompressRecordsBytesMax)
		if err != nil || string(got) != string(want) {
			t.Fatalf("converted batch holds other records (%v)", err)
		}
	})
}
