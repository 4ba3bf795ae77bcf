package test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/compress"
	"github.com/weir-mq/weir/internal/record"
)

// storedCodecs fetches topic[0] from offset 0 with a raw Fetch and returns the codec of each stored
// batch and the number of records in all of them.
func storedCodecs(ctx context.Context, t testing.TB, cl *kgo.Client, topic string) ([]compress.Codec, int) {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.ReplicaID = -1
	req.MaxBytes = 16 << 20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 16 << 20
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("fetch %s: %v", topic, err)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		t.Fatalf("fetch %s: %v", topic, err)
	}
	var codecs []compress.Codec
	n := 0
	for b, err := range record.Batches(p.RecordBatches) {
		if err != nil {
			t.Fatalf("fetch %s: %v", topic, err)
		}
		h, err := record.Validate(b)
		if err != nil {
			t.Fatalf("fetch %s: %v", topic, err)
		}
		codecs = append(codecs, compress.Codec(h.Compression()))
		n += int(h.NumRecords)
	}
	return codecs, n
}

// TestKcatCompressionType runs a real node with topics whose compression.type differs from what the
// producers send: franz-go's uncompressed batches to a zstd topic and kcat's gzip batches to an lz4
// topic. A raw Fetch shows every stored batch in the topic's codec, and kcat reads back keys, values
// and timestamps exactly as produced.
func TestKcatCompressionType(t *testing.T) {
	requireTool(t, "kcat")
	ctx := testContext(t, 90*time.Second)
	n := startNode(t, nodeOptions{})
	n.createTopic(ctx, t, "to-zstd", 1, map[string]string{"compression.type": "zstd"})
	n.createTopic(ctx, t, "to-lz4", 1, map[string]string{"compression.type": "lz4"})
	cl := n.newClient(t, kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
	defer cl.Close()

	base := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	var want strings.Builder
	var recs []*kgo.Record
	for i := range 200 {
		r := &kgo.Record{Topic: "to-zstd", Key: fmt.Appendf(nil, "k%d", i),
			Value: []byte(strings.Repeat(fmt.Sprintf("value-%d.", i), 10)), Timestamp: base.Add(time.Duration(i) * time.Millisecond)}
		recs = append(recs, r)
		fmt.Fprintf(&want, "%s|%s|%d\n", r.Key, r.Value, r.Timestamp.UnixMilli())
	}
	for _, chunk := range [][]*kgo.Record{recs[:1], recs[1:50], recs[50:]} {
		if err := cl.ProduceSync(ctx, chunk...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	codecs, count := storedCodecs(ctx, t, cl, "to-zstd")
	if count != len(recs) {
		t.Fatalf("%d records stored, want %d", count, len(recs))
	}
	for _, c := range codecs {
		if c != compress.Zstd {
			t.Fatalf("stored codecs %v, want zstd only", codecs)
		}
	}
	if got := kcat(ctx, t, n, "", "-C", "-t", "to-zstd", "-o", "beginning", "-e", "-q", "-f", `%k|%s|%T\n`); got != want.String() {
		t.Errorf("kcat read back from the zstd topic:\n%s\nwant:\n%s", got, want.String())
	}

	lines := seqLines(300)
	kcat(ctx, t, n, lines, "-P", "-t", "to-lz4", "-z", "gzip", "-X", "acks=all")
	codecs, count = storedCodecs(ctx, t, cl, "to-lz4")
	if count != 300 {
		t.Fatalf("%d records stored in the lz4 topic, want 300", count)
	}
	for _, c := range codecs {
		if c != compress.LZ4 {
			t.Fatalf("stored codecs %v, want lz4 only", codecs)
		}
	}
	if got := kcat(ctx, t, n, "", "-C", "-t", "to-lz4", "-o", "beginning", "-e", "-q"); got != lines {
		t.Errorf("kcat read back %d lines from the lz4 topic, want 1..300 in order", strings.Count(got, "\n"))
	}
}
