package api_test

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/compress"
	"github.com/weir-mq/weir/internal/record"
)

// storedBatch is one batch as a raw Fetch returns it: its header and its decompressed records.
type storedBatch struct {
	header  record.Header
	records []record.Record
}

// fetchStored reads topic[0] from offset 0 with a raw Fetch (v12, so zstd may come back) and decodes
// every batch, control batches included.
func fetchStored(t *testing.T, rc *rawConn, topic string) []storedBatch {
	t.Helper()
	resp := rc.do(fetchRequest(12, topic, 0, 0, 0)).(*kmsg.FetchResponse)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("fetch %s: %v", topic, kerr.ErrorForCode(p.ErrorCode))
	}
	var out []storedBatch
	for b, err := range record.Batches(p.RecordBatches) {
		if err != nil {
			t.Fatalf("fetch %s: %v", topic, err)
		}
		h, err := record.Validate(b)
		if err != nil {
			t.Fatalf("fetch %s: stored batch: %v", topic, err)
		}
		body, err := compress.Decode(compress.Codec(h.Compression()), record.Body(b), 64<<20)
		if err != nil {
			t.Fatalf("fetch %s: %s batch: %v", topic, compress.Codec(h.Compression()), err)
		}
		recs, err := record.DecodeRecords(body, int(h.NumRecords))
		if err != nil {
			t.Fatalf("fetch %s: records: %v", topic, err)
		}
		out = append(out, storedBatch{h, recs})
	}
	return out
}

// producedRecords are the records the compression tests send: keys, values, headers and their own
// timestamps (a second apart, all within the default window).
func producedRecords(topic string, n int) []*kgo.Record {
	base := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	out := make([]*kgo.Record, n)
	for i := range out {
		out[i] = &kgo.Record{
			Topic: topic, Key: []byte("key-" + strconv.Itoa(i)),
			Value:     bytes.Repeat([]byte(fmt.Sprintf("value %d; ", i)), 20),
			Headers:   []kgo.RecordHeader{{Key: "h", Value: []byte(strconv.Itoa(i))}},
			Timestamp: base.Add(time.Duration(i) * time.Second),
		}
	}
	return out
}

// sameRecord compares what a consumer read with what was produced.
func sameRecord(got, want *kgo.Record) bool {
	return bytes.Equal(got.Key, want.Key) && bytes.Equal(got.Value, want.Value) && got.Timestamp.Equal(want.Timestamp) &&
		len(got.Headers) == 1 && got.Headers[0].Key == want.Headers[0].Key && bytes.Equal(got.Headers[0].Value, want.Headers[0].Value)
}

// TestAPIProduceRecompresses has franz-go produce batches of one codec to topics whose
// compression.type asks for another (or producer, or the same) and checks with a raw Fetch that the
// stored batches are in the topic's codec with the same records, and with a consumer that it reads
// back what was produced.
func TestAPIProduceRecompresses(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	rc := dialRaw(t, n)
	ctx := testCtx(t)
	tests := []struct {
		topicType string
		producer  kgo.CompressionCodec
		want      compress.Codec
	}{
		{"zstd", kgo.NoCompression(), compress.Zstd},
		{"lz4", kgo.GzipCompression(), compress.LZ4},
		{"uncompressed", kgo.SnappyCompression(), compress.None},
		{"gzip", kgo.ZstdCompression(), compress.Gzip},
		{"snappy", kgo.Lz4Compression(), compress.Snappy},
		{"producer", kgo.Lz4Compression(), compress.LZ4},
		{"zstd", kgo.ZstdCompression(), compress.Zstd},
	}
	for i, tc := range tests {
		topic := fmt.Sprintf("conv-%d-%s", i, tc.topicType)
		createTopic(t, adm, topic, 1, map[string]*string{"compression.type": kadm.StringPtr(tc.topicType)})
		cl := newClient(t, n, kgo.ProducerBatchCompression(tc.producer))
		want := producedRecords(topic, 30)
		for _, r := range want[:10] {
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("%s: produce: %v", topic, err)
			}
		}
		if err := cl.ProduceSync(ctx, want[10:]...).FirstErr(); err != nil {
			t.Fatalf("%s: produce: %v", topic, err)
		}
		var stored []record.Record
		for _, b := range fetchStored(t, rc, topic) {
			if c := compress.Codec(b.header.Compression()); c != tc.want {
				t.Fatalf("%s: a batch at %d stored as %s, want %s", topic, b.header.BaseOffset, c, tc.want)
			}
			for _, r := range b.records {
				if ts := b.header.BaseTimestamp + r.TimestampDelta; ts != want[len(stored)].Timestamp.UnixMilli() {
					t.Fatalf("%s: stored record %d has timestamp %d", topic, len(stored), ts)
				}
				stored = append(stored, r)
			}
		}
		if len(stored) != len(want) {
			t.Fatalf("%s: %d records stored, want %d", topic, len(stored), len(want))
		}
		got := consumeN(t, n, topic, kgo.NewOffset().AtStart(), len(want))
		for j := range want {
			if !sameRecord(got[j], want[j]) || got[j].Offset != int64(j) {
				t.Fatalf("%s: record %d read back as %+v, want %+v", topic, j, got[j], want[j])
			}
		}
	}
}

// TestAPIProduceRecompressIdempotentRetry sends one idempotent gzip batch twice to a zstd topic: the
// retry is answered with the first offsets and nothing more is written.
func TestAPIProduceRecompressIdempotentRetry(t *testing.T) {
	n := startNode(t)
	createTopic(t, newAdmin(t, n), "idem-zstd", 1, map[string]*string{"compression.type": kadm.StringPtr("zstd")})
	rc := dialRaw(t, n)
	init := kmsg.NewPtrInitProducerIDRequest()
	init.Version = 4
	pid := rc.do(init).(*kmsg.InitProducerIDResponse).ProducerID
	batch := func(seq int32, vals ...string) []byte {
		return compressedBatch(t, compress.Gzip, batchSpec{idempotent: true, producerID: pid, sequence: seq,
			timestamp: time.Now().UnixMilli(), values: vals})
	}
	for _, s := range []struct {
		name   string
		batch  []byte
		offset int64
	}{
		{"first", batch(0, "a", "b"), 0},
		{"retry", batch(0, "a", "b"), 0},
		{"next", batch(2, "c"), 2},
		{"retry of next", batch(2, "c"), 2},
	} {
		p := produceRaw(t, rc, 9, "idem-zstd", 0, s.batch)
		if p.ErrorCode != 0 || p.BaseOffset != s.offset {
			t.Fatalf("%s: %v at %d, want offset %d", s.name, kerr.ErrorForCode(p.ErrorCode), p.BaseOffset, s.offset)
		}
	}
	stored := fetchStored(t, rc, "idem-zstd")
	if len(stored) != 2 || stored[0].header.NumRecords != 2 || stored[1].header.NumRecords != 1 {
		t.Fatalf("stored batches %+v, want two of 2 and 1 records", stored)
	}
	for _, b := range stored {
		h := b.header
		if compress.Codec(h.Compression()) != compress.Zstd || h.ProducerID != pid || h.ProducerEpoch != 0 {
			t.Fatalf("stored header %+v: want zstd with producer %d epoch 0", h, pid)
		}
	}
	if stored[1].header.BaseSequence != 2 || string(stored[1].records[0].Value) != "c" {
		t.Fatalf("second batch: sequence %d, value %q", stored[1].header.BaseSequence, stored[1].records[0].Value)
	}
}

// TestAPIProduceRecompressTransactions runs franz-go's transactional producer, uncompressed, against an
// lz4 topic: a committed and an aborted transaction; a read_committed consumer sees exactly the
// committed records and the stored data batches are lz4 and transactional.
func TestAPIProduceRecompressTransactions(t *testing.T) {
	n := startTxnNode(t)
	createTopic(t, newAdmin(t, n), "t", 1, map[string]*string{"compression.type": kadm.StringPtr("lz4")})
	cl := newClient(t, n, kgo.TransactionalID("conv-tx"), kgo.DefaultProduceTopic("t"),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx := testCtx(t)
	for i, end := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort, kgo.TryCommit} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for j := range 3 {
			if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("%d-%d", i, j))).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
		if err := cl.EndTransaction(ctx, end); err != nil {
			t.Fatalf("end transaction %d: %v", i, err)
		}
	}
	got := consumeN(t, n, "t", kgo.NewOffset().AtStart(), 6, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	for i, r := range got {
		if want := fmt.Sprintf("%d-%d", i/3*2, i%3); string(r.Value) != want {
			t.Fatalf("read_committed record %d: %q, want %q", i, r.Value, want)
		}
	}
	data := 0
	for _, b := range fetchStored(t, dialRaw(t, n), "t") {
		if b.header.Control() {
			continue
		}
		data++
		if compress.Codec(b.header.Compression()) != compress.LZ4 || !b.header.Transactional() || b.header.ProducerID < 0 {
			t.Fatalf("stored data batch %+v: want lz4, transactional, with its producer", b.header)
		}
	}
	if data != 9 {
		t.Fatalf("%d data batches stored, want 9", data)
	}
}

// TestAPIProduceRecompressRefusals: a compressed payload that does not decompress is CORRUPT_MESSAGE,
// records that do not match the header's count INVALID_RECORD, and a batch too large once
// decompressed for an uncompressed topic MESSAGE_TOO_LARGE; nothing is written.
func TestAPIProduceRecompressRefusals(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	createTopic(t, adm, "to-zstd", 1, map[string]*string{"compression.type": kadm.StringPtr("zstd")})
	createTopic(t, adm, "to-none", 1, map[string]*string{"compression.type": kadm.StringPtr("uncompressed"),
		"max.message.bytes": kadm.StringPtr("4096")})
	createTopic(t, adm, "windowed", 1, map[string]*string{"message.timestamp.before.max.ms": kadm.StringPtr("60000")})
	rc := dialRaw(t, n)
	now := time.Now().UnixMilli()
	good := compressedBatch(t, compress.Gzip, batchSpec{timestamp: now, values: []string{"a", "b"}})
	corrupt := withBody(good, compress.Gzip, []byte("not gzip at all"))
	body, err := compress.Decode(compress.Gzip, record.Body(good), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	zbody, err := compress.Encode(compress.Zstd, body[:len(body)-1])
	if err != nil {
		t.Fatal(err)
	}
	short := withBody(good, compress.Zstd, zbody)
	big := compressedBatch(t, compress.Zstd, batchSpec{timestamp: now, values: []string{string(bytes.Repeat([]byte("x"), 8000))}})
	for _, tc := range []struct {
		topic string
		batch []byte
		want  *kerr.Error
	}{
		{"to-zstd", corrupt, kerr.CorruptMessage},
		{"windowed", corrupt, kerr.CorruptMessage},
		{"to-none", short, kerr.InvalidRecord},
		{"to-none", big, kerr.MessageTooLarge},
	} {
		p := produceRaw(t, rc, 9, tc.topic, 0, tc.batch)
		if p.ErrorCode != tc.want.Code {
			t.Errorf("%s: %v (%v), want %v", tc.topic, kerr.ErrorForCode(p.ErrorCode), deref(p.ErrorMessage), tc.want)
		}
	}
	ends, err := adm.ListEndOffsets(testCtx(t), "to-zstd", "to-none", "windowed")
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset != 0 {
			t.Errorf("%s: end offset %d (%v) after refused batches, want 0", o.Topic, o.Offset, o.Err)
		}
	})
	if p := produceRaw(t, rc, 9, "to-zstd", 0, good); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("the good batch: %v at %d", kerr.ErrorForCode(p.ErrorCode), p.BaseOffset)
	}
}

// TestAPIProduceTimestampWindow produces through franz-go records outside a topic's timestamp window:
// INVALID_TIMESTAMP and nothing appended; records inside it, and any record on a LogAppendTime topic,
// are taken.
func TestAPIProduceTimestampWindow(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	ctx := testCtx(t)
	str := kadm.StringPtr
	for _, tc := range []struct {
		topic   string
		configs map[string]*string
		codec   kgo.CompressionCodec
		offset  time.Duration
		refused bool
	}{
		{"before", map[string]*string{"message.timestamp.before.max.ms": str("60000")}, kgo.NoCompression(), -time.Hour, true},
		{"before-zstd", map[string]*string{"message.timestamp.before.max.ms": str("60000")}, kgo.ZstdCompression(), -time.Hour, true},
		{"before-ok", map[string]*string{"message.timestamp.before.max.ms": str("60000")}, kgo.NoCompression(), -time.Second, false},
		{"after", map[string]*string{"message.timestamp.after.max.ms": str("60000")}, kgo.NoCompression(), time.Hour, true},
		{"after-lz4", map[string]*string{"message.timestamp.after.max.ms": str("60000")}, kgo.Lz4Compression(), time.Hour, true},
		{"default-after", nil, kgo.SnappyCompression(), 2 * time.Hour, true},
		{"default-before", nil, kgo.NoCompression(), -365 * 24 * time.Hour, false},
		{"difference", map[string]*string{"message.timestamp.difference.max.ms": str("60000")}, kgo.NoCompression(), -time.Hour, true},
		{"difference-after", map[string]*string{"message.timestamp.difference.max.ms": str("60000")}, kgo.GzipCompression(), time.Hour, true},
		{"recompressed", map[string]*string{"compression.type": str("zstd"), "message.timestamp.before.max.ms": str("60000")},
			kgo.GzipCompression(), -time.Hour, true},
		{"append-time", map[string]*string{"message.timestamp.type": str("LogAppendTime"),
			"message.timestamp.before.max.ms": str("60000")}, kgo.NoCompression(), -time.Hour, false},
	} {
		createTopic(t, adm, tc.topic, 1, tc.configs)
		// Both records must travel in one batch, the unit a refusal applies to: the linger keeps the
		// first from leaving alone on a loaded machine.
		cl := newClient(t, n, kgo.ProducerBatchCompression(tc.codec), kgo.RecordRetries(0), kgo.ProducerLinger(200*time.Millisecond))
		now := time.Now()
		recs := []*kgo.Record{
			{Topic: tc.topic, Value: []byte("in window"), Timestamp: now},
			{Topic: tc.topic, Value: []byte("the odd one"), Timestamp: now.Add(tc.offset)},
		}
		err := cl.ProduceSync(ctx, recs...).FirstErr()
		if tc.refused != errors.Is(err, kerr.InvalidTimestamp) || !tc.refused && err != nil {
			t.Errorf("%s: produce a record %v away: %v, want refused %v", tc.topic, tc.offset, err, tc.refused)
		}
		ends, err := adm.ListEndOffsets(ctx, tc.topic)
		if err != nil {
			t.Fatal(err)
		}
		want := int64(2)
		if tc.refused {
			want = 0
		}
		if end, _ := ends.Lookup(tc.topic, 0); end.Offset != want {
			t.Errorf("%s: end offset %d, want %d", tc.topic, end.Offset, want)
		}
	}
}

// TestAPIFlushMessagesOne: a topic with flush.messages=1 on a node whose logs default to never
// syncing describes weir.flush.policy=always (kadm) and syncs its log before every acks=1 answer, while
// a topic under the default, or with flush.ms, does not.
func TestAPIFlushMessagesOne(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	ctx := testCtx(t)
	set, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "weir.log.flush.policy", Value: kadm.StringPtr("never")}})
	if err != nil || set[0].Err != nil {
		t.Fatalf("alter broker: %v %v", err, set[0].Err)
	}
	createTopic(t, adm, "synced", 1, map[string]*string{"flush.messages": kadm.StringPtr("1")})
	createTopic(t, adm, "lazy", 1, nil)
	createTopic(t, adm, "periodic", 1, map[string]*string{"flush.ms": kadm.StringPtr("600000")})
	rcs, err := adm.DescribeTopicConfigs(ctx, "synced", "lazy", "periodic")
	if err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]struct {
		policy string
		source kmsg.ConfigSource
	}{
		"synced":   {"always", kmsg.ConfigSourceDynamicTopicConfig},
		"lazy":     {"never", kmsg.ConfigSourceDynamicDefaultBrokerConfig},
		"periodic": {"interval", kmsg.ConfigSourceDynamicTopicConfig},
	} {
		rc, err := rcs.On(topic, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range rc.Configs {
			if c.Key == "weir.flush.policy" && (c.MaybeValue() != want.policy || c.Source != want.source) {
				t.Errorf("%s: weir.flush.policy %s from %v, want %s from %v", topic, c.MaybeValue(), c.Source, want.policy, want.source)
			}
		}
	}
	cl := newClient(t, n, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	const produces = 20
	synced := func(topic string) uint64 {
		before := n.Replicas().Stats().Sync.Logs.Sum
		for i := range produces {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
				t.Fatalf("produce to %s: %v", topic, err)
			}
		}
		return uint64(n.Replicas().Stats().Sync.Logs.Sum - before)
	}
	if got := synced("synced"); got < produces {
		t.Errorf("flush.messages=1: %d log syncs for %d acks=1 produces, want one each", got, produces)
	}
	for _, topic := range []string{"lazy", "periodic"} {
		if got := synced(topic); got >= produces/2 {
			t.Errorf("%s: %d log syncs for %d acks=1 produces, want next to none", topic, got, produces)
		}
	}
}

// compressedBatch is testBatch with its records section compressed with c.
func compressedBatch(t *testing.T, c compress.Codec, s batchSpec) []byte {
	t.Helper()
	plain := testBatch(s)
	body, err := compress.Encode(c, record.Body(plain))
	if err != nil {
		t.Fatal(err)
	}
	return withBody(plain, c, body)
}

// withBody rebuilds batch around body, compressed with c, with a correct CRC.
func withBody(batch []byte, c compress.Codec, body []byte) []byte {
	h, err := record.ParseHeader(batch)
	if err != nil {
		panic(err)
	}
	return record.AppendBatch(nil, h.WithCompression(int8(c)), body)
}

// deref is *s, or "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// BenchmarkAPIProduceRecompress produces b.N records of 1 KiB of JSON-like text with acks=1 through an
// in-process node, from a franz-go producer compressing with one codec to a topic whose
// compression.type is another, or producer, or the same: the whole produce path, client included, so
// the ratio of a converting pair to its producer baseline is what a topic's compression.type costs.
func BenchmarkAPIProduceRecompress(b *testing.B) {
	n := startNodeWith(b, nodeConfig(b.TempDir()))
	admin, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()))
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	value := make([]byte, 0, 1024)
	for i := 0; len(value) < 1000; i++ {
		value = fmt.Appendf(value, `{"user":%d,"event":"click","page":"/item/%d"},`, i*7919%1000, i*31%97)
	}
	for i, bc := range []struct {
		name     string
		producer kgo.CompressionCodec
		topic    string
	}{
		{"uncompressed-to-producer", kgo.NoCompression(), "producer"},
		{"uncompressed-to-zstd", kgo.NoCompression(), "zstd"},
		{"uncompressed-to-lz4", kgo.NoCompression(), "lz4"},
		{"gzip-to-producer", kgo.GzipCompression(), "producer"},
		{"gzip-to-lz4", kgo.GzipCompression(), "lz4"},
		{"zstd-to-producer", kgo.ZstdCompression(), "producer"},
		{"zstd-to-zstd", kgo.ZstdCompression(), "zstd"},
	} {
		topic := fmt.Sprintf("bench-%d-%s", i, bc.name)
		resp, err := adm.CreateTopic(b.Context(), 1, 1, map[string]*string{"compression.type": kadm.StringPtr(bc.topic)}, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.DefaultProduceTopic(topic),
				kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.ProducerBatchCompression(bc.producer))
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			b.SetBytes(int64(len(value)))
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			var errOnce sync.Once
			var firstErr error
			for range b.N {
				wg.Add(1)
				cl.Produce(b.Context(), &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
					if err != nil {
						errOnce.Do(func() { firstErr = err })
					}
					wg.Done()
				})
			}
			wg.Wait()
			b.StopTimer()
			if firstErr != nil {
				b.Fatal(firstErr)
			}
		})
	}
}
