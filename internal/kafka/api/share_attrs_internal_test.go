package api

import (
	"slices"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/clock/clocktest"
	"github.com/weir-mq/weir/internal/compress"
	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/share"
)

// attrBatch is a checked batch at baseOffset 10 and timestamp ts of one record per header list, each
// record's timestamp ts + its index, compressed with codec.
func attrBatch(t *testing.T, codec compress.Codec, ts int64, hs ...[]record.RecordHeader) record.Checked {
	t.Helper()
	var body []byte
	for i, h := range hs {
		body = record.AppendRecord(body, record.Record{TimestampDelta: int64(i), OffsetDelta: int32(i), Value: []byte("v"), Headers: h})
	}
	enc, err := compress.Encode(codec, body)
	if err != nil {
		t.Fatal(err)
	}
	n := int32(len(hs))
	h := record.Header{BaseOffset: 10, Attributes: int16(codec), LastOffsetDelta: n - 1, BaseTimestamp: ts, MaxTimestamp: ts + int64(n) - 1,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, NumRecords: n}
	c, err := record.Check(record.AppendBatch(nil, h, enc))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func hdr(k, v string) record.RecordHeader {
	return record.RecordHeader{Key: []byte(k), Value: []byte(v)}
}

// TestShareBatchAttrs reads priorities and due times from batches as the share-partition owner does:
// the headers first, then the topic's defaults; a deliver-at wins over a delay; a delay counts from
// the record's timestamp; a header that does not parse counts as absent; the offsets before from are
// left out.
func TestShareBatchAttrs(t *testing.T) {
	recs := [][]record.RecordHeader{
		nil,
		{hdr("weir.priority", "7")},
		{hdr("weir.deliver-at", "5000"), hdr("weir.delay-ms", "1")},
		{hdr("weir.delay-ms", "300")},
		{hdr("weir.priority", "x"), hdr("other", "1")},
	}
	for _, codec := range []compress.Codec{compress.None, compress.Snappy, compress.Zstd} {
		c := attrBatch(t, codec, 1000, recs...)
		plain := controller.DeliveryConfig{Headers: true, PriorityDefault: 2}
		got, err := batchAttrs(nil, c, 10, plain, false)
		if err != nil {
			t.Fatal(err)
		}
		want := []share.Attr{{Priority: 2}, {Priority: 7}, {Priority: 2, Due: 5000}, {Priority: 2, Due: 1003 + 300}, {Priority: 2}}
		if !slices.Equal(got, want) {
			t.Errorf("%s: got %+v\nwant %+v", codec, got, want)
		}
		delayed := controller.DeliveryConfig{Headers: true, DelayMs: 2000}
		got, err = batchAttrs([]share.Attr{{Priority: 9}}, c, 12, delayed, false)
		if err != nil {
			t.Fatal(err)
		}
		want = []share.Attr{{Priority: 9}, {Due: 5000}, {Due: 1003 + 300}, {Due: 1004 + 2000}}
		if !slices.Equal(got, want) {
			t.Errorf("%s from 12 under a topic delay: got %+v\nwant %+v", codec, got, want)
		}
		// Without weir.delivery.headers.enable the headers are ordinary ones: every record has the
		// topic's priority, and its delay counts from the batch's largest timestamp (1004).
		off := controller.DeliveryConfig{PriorityDefault: 2, DelayMs: 2000}
		got, err = batchAttrs(nil, c, 10, off, false)
		if err != nil {
			t.Fatal(err)
		}
		want = slices.Repeat([]share.Attr{{Priority: 2, Due: 1004 + 2000}}, 5)
		if !slices.Equal(got, want) {
			t.Errorf("%s without delivery headers: got %+v\nwant %+v", codec, got, want)
		}
	}
}

// TestShareBatchAttrsKeys: for a key-ordered group every record's key is read, compressed or not and
// whatever its headers: equal keys hash equally, a null key is no key.
func TestShareBatchAttrsKeys(t *testing.T) {
	var body []byte
	for i, k := range [][]byte{[]byte("k1"), nil, []byte("k1"), []byte("k2")} {
		body = record.AppendRecord(body, record.Record{OffsetDelta: int32(i), Key: k, Value: []byte("v")})
	}
	for _, codec := range []compress.Codec{compress.None, compress.Snappy} {
		enc, err := compress.Encode(codec, body)
		if err != nil {
			t.Fatal(err)
		}
		h := record.Header{BaseOffset: 10, Attributes: int16(codec), LastOffsetDelta: 3, BaseTimestamp: 1, MaxTimestamp: 1,
			ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, NumRecords: 4}
		c, err := record.Check(record.AppendBatch(nil, h, enc))
		if err != nil {
			t.Fatal(err)
		}
		got, err := batchAttrs(nil, c, 10, controller.DeliveryConfig{}, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 4 || !got[0].Keyed || got[1].Keyed || !got[2].Keyed || !got[3].Keyed ||
			got[0].Key != got[2].Key || got[0].Key == got[3].Key {
			t.Errorf("%s: got %+v, want keys k1, none, k1, k2", codec, got)
		}
	}
}

// TestShareCheckDelivery checks the produce path's refusals against the clock, that a batch
// without weir.* headers passes whatever else its headers hold, and that a topic without
// weir.delivery.headers.enable refuses none.
func TestShareCheckDelivery(t *testing.T) {
	pc := controller.ProduceConfig{DeliveryHeaders: true, DeliveryDelayMaxMs: 1000}
	clock := clocktest.NewManual(time.UnixMilli(50_000))
	for _, tc := range []struct {
		h  record.RecordHeader
		ok bool
	}{
		{hdr("weir.deliver-at", "51000"), true},
		{hdr("weir.deliver-at", "51001"), false},
		{hdr("weir.deliver-at", "0"), true},
		{hdr("weir.delay-ms", "1000"), true},
		{hdr("weir.delay-ms", "1001"), false},
		{hdr("weir.delay-ms", ""), false},
		{hdr("weir.delay-ms", "+5"), false},
		{hdr("weir.priority", "9"), true},
		{hdr("weir.priority", "09"), false},
		{hdr("weir.other", "anything"), true},
		{hdr("weir.delay.progress", "1"), false},
		{hdr("priority", "10"), true},
	} {
		for _, codec := range []compress.Codec{compress.None, compress.LZ4} {
			err := checkDelivery(attrBatch(t, codec, 1, nil, []record.RecordHeader{tc.h}), pc, clock)
			if (err == nil) != tc.ok {
				t.Errorf("%s %s=%q: %v, want ok %t", codec, tc.h.Key, tc.h.Value, err, tc.ok)
			}
			off := pc
			off.DeliveryHeaders = false
			if err := checkDelivery(attrBatch(t, codec, 1, nil, []record.RecordHeader{tc.h}), off, clock); err != nil {
				t.Errorf("%s %s=%q without delivery headers: %v, want an ordinary header", codec, tc.h.Key, tc.h.Value, err)
			}
		}
	}
}
