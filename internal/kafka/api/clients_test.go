package api_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// produceSync produces recs and fails the test on any error.
func produceSync(t *testing.T, cl *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// keyed returns n records over nKeys keys whose values count up per key: "k3/0", "k3/1", ...
func keyed(topic string, n, nKeys int) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		k := "k" + strconv.Itoa(i%nKeys)
		recs[i] = &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte(k + "/" + strconv.Itoa(i/nKeys))}
	}
	return recs
}

// checkPerKeyOrder checks that every key's values arrive in produce order, and all of them.
func checkPerKeyOrder(t *testing.T, recs []*kgo.Record, n, nKeys int) {
	t.Helper()
	if len(recs) != n {
		t.Fatalf("got %d records, want %d", len(recs), n)
	}
	next := map[string]int{}
	for _, r := range recs {
		k := string(r.Key)
		want := k + "/" + strconv.Itoa(next[k])
		if string(r.Value) != want {
			t.Fatalf("key %s: got %q, want %q (partition %d offset %d)", k, r.Value, want, r.Partition, r.Offset)
		}
		next[k]++
	}
	for i := range nKeys {
		if got := next["k"+strconv.Itoa(i)]; got != n/nKeys {
			t.Fatalf("key k%d: %d records, want %d", i, got, n/nKeys)
		}
	}
}

// checkAckedOffsets checks that every record read sits at the partition and offset its produce was
// acknowledged with; values are unique.
func checkAckedOffsets(t *testing.T, sent, got []*kgo.Record) {
	t.Helper()
	type at struct {
		partition int32
		offset    int64
	}
	acked := make(map[string]at, len(sent))
	for _, r := range sent {
		acked[string(r.Value)] = at{r.Partition, r.Offset}
	}
	for _, r := range got {
		a, ok := acked[string(r.Value)]
		if !ok {
			t.Fatalf("read %q at partition %d offset %d, never produced", r.Value, r.Partition, r.Offset)
		}
		if a != (at{r.Partition, r.Offset}) {
			t.Fatalf("%q acknowledged at partition %d offset %d, read at partition %d offset %d", r.Value, a.partition, a.offset, r.Partition, r.Offset)
		}
	}
}

func TestAPIKgoProduceConsumeAcks(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	// acked says whether the broker answers with offsets (acks=0 gets no answer).
	cases := []struct {
		name  string
		acked bool
		opts  []kgo.Opt
	}{
		{"acks0", false, []kgo.Opt{kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite()}},
		{"acks1", true, []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}},
		{"acksAll", true, []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite()}},
		{"idempotent", true, nil},
	}
	const nRecs, nKeys = 400, 8
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			topic := "acks-" + c.name
			createTopic(t, adm, topic, 4, nil)
			cl := newClient(t, n, append([]kgo.Opt{kgo.DefaultProduceTopic(topic)}, c.opts...)...)
			sent := keyed(topic, nRecs, nKeys)
			produceSync(t, cl, sent...)
			got := consumeN(t, n, topic, kgo.NewOffset().AtStart(), nRecs)
			checkPerKeyOrder(t, got, nRecs, nKeys)
			if c.acked {
				checkAckedOffsets(t, sent, got)
			}
		})
	}
}

func TestAPIKgoCompressionRoundTrip(t *testing.T) {
	n := startNode(t)
	codecs := map[string]kgo.CompressionCodec{
		"gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			topic := "codec-" + name
			cl := newClient(t, n, kgo.ProducerBatchCompression(codec), kgo.AllowAutoTopicCreation())
			recs := make([]*kgo.Record, 200)
			for i := range recs {
				recs[i] = &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s record %d, compressible compressible compressible", name, i)}
			}
			produceSync(t, cl, recs...)
			got := consumeN(t, n, topic, kgo.NewOffset().AtStart(), len(recs))
			for i, r := range got {
				if string(r.Value) != string(recs[i].Value) || r.Offset != int64(i) {
					t.Fatalf("record %d: offset %d value %q, want offset %d value %q", i, r.Offset, r.Value, i, recs[i].Value)
				}
			}
		})
	}
}

func TestAPIKgoConsumeFromLatestAndTimestamp(t *testing.T) {
	n := startNode(t)
	const topic = "positions"
	createTopic(t, newAdmin(t, n), topic, 1, nil)
	cl := newClient(t, n, kgo.DefaultProduceTopic(topic))
	base := time.UnixMilli(1_700_000_000_000)
	var old []*kgo.Record
	for i := range 10 {
		old = append(old, &kgo.Record{Value: []byte("old" + strconv.Itoa(i)), Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	// One record per produce, so each batch carries its own timestamp.
	for _, r := range old {
		produceSync(t, cl, r)
	}

	t.Run("timestamp", func(t *testing.T) {
		got := consumeN(t, n, topic, kgo.NewOffset().AfterMilli(base.Add(5*time.Second).UnixMilli()), 5)
		if string(got[0].Value) != "old5" || got[0].Offset != 5 {
			t.Fatalf("from timestamp: first record offset %d %q, want offset 5 old5", got[0].Offset, got[0].Value)
		}
	})

	t.Run("latest", func(t *testing.T) {
		cons := newClient(t, n, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
		ctx := testCtx(t)
		// The consumer resolves "latest" at some point after it starts: keep producing new records
		// until it sees one. Whatever it sees first must be new, never one of the old ten.
		for ctx.Err() == nil {
			produceSync(t, cl, &kgo.Record{Value: []byte("new")})
			pollCtx, cancel := context.WithTimeout(ctx, time.Second)
			recs := cons.PollFetches(pollCtx).Records()
			cancel()
			if len(recs) > 0 {
				if string(recs[0].Value) != "new" || recs[0].Offset < 10 {
					t.Fatalf("from latest: got offset %d %q, want a new record at offset 10 or later", recs[0].Offset, recs[0].Value)
				}
				return
			}
		}
		t.Fatal("no record from latest")
	})
}

// TestAPIKgoLogAppendTime checks message.timestamp.type=LogAppendTime: the broker stamps its own clock over
// the producer's timestamps (compressed batches too, since the stamp lies in the batch header), and a
// consumer sees the broker's time on every record.
func TestAPIKgoLogAppendTime(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	lat := "LogAppendTime"
	createTopic(t, adm, "lat", 1, map[string]*string{"message.timestamp.type": &lat})
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	before := time.Now().Add(-time.Second)
	cl := newClient(t, n, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	produceSync(t, cl,
		&kgo.Record{Topic: "lat", Value: []byte("a"), Timestamp: old},
		&kgo.Record{Topic: "lat", Value: []byte("b"), Timestamp: old})
	for _, r := range consumeN(t, n, "lat", kgo.NewOffset().AtStart(), 2) {
		if r.Timestamp.Before(before) || r.Attrs.TimestampType() != 1 {
			t.Errorf("record %q: timestamp %v, type %d; want the broker's append time (after %v), type 1",
				r.Value, r.Timestamp, r.Attrs.TimestampType(), before)
		}
	}
}
