package test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// values returns the values of records in order.
func values(recs []*kgo.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Value)
	}
	return out
}

// numbered returns prefix-0 ... prefix-(n-1).
func numbered(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// produceValues writes values to partition 0 of topic in order with the given client and returns
// the records as the client finished them (with the offsets the broker acknowledged).
func produceValues(ctx context.Context, t testing.TB, cl *kgo.Client, topic string, vals []string) []*kgo.Record {
	t.Helper()
	rs := make([]*kgo.Record, len(vals))
	for i, v := range vals {
		rs[i] = &kgo.Record{Topic: topic, Partition: 0, Value: []byte(v)}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
	return rs
}

// waitEndOffset waits (bounded by ctx) until partition 0 of topic ends at or after want; acks=0
// produces give no other signal that the broker has appended.
func waitEndOffset(ctx context.Context, t testing.TB, n *node, topic string, want int64) {
	t.Helper()
	for {
		if endOffset(ctx, t, n, topic) >= want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s[0] never reached end offset %d: %v", topic, want, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestE2E drives one weir process with franz-go (kgo, kadm) and sarama: every acks level,
// idempotence, every codec, consuming from earliest, latest and a timestamp, per-key order, topic
// admin and configs, DeleteRecords.
func TestE2E(t *testing.T) {
	ctx := testContext(t, 90*time.Second)
	n := startNode(t, nodeOptions{})
	manual := kgo.RecordPartitioner(kgo.ManualPartitioner())

	// acked says whether the broker answers with the offsets (acks=0 gets no answer).
	acks := []struct {
		name  string
		acked bool
		opts  []kgo.Opt
	}{
		{"acks 0", false, []kgo.Opt{kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite()}},
		{"acks 1", true, []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}},
		{"acks all", true, []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite()}},
		{"acks all idempotent", true, []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks())}},
	}
	for i, tc := range acks {
		t.Run(tc.name, func(t *testing.T) {
			topic := fmt.Sprintf("e2e-acks-%d", i)
			n.createTopic(ctx, t, topic, 1, nil)
			want := numbered(topic, 50)
			sent := produceValues(ctx, t, n.client(t, append(tc.opts, manual)...), topic, want)
			waitEndOffset(ctx, t, n, topic, int64(len(want)))
			got := n.readAll(ctx, t, topic)[0]
			if !slices.Equal(values(got), want) {
				t.Fatalf("read back %v, want %v", values(got), want)
			}
			if !tc.acked {
				return
			}
			for i, r := range sent {
				if r.Offset != got[i].Offset {
					t.Errorf("%s acknowledged at offset %d, read back at %d", r.Value, r.Offset, got[i].Offset)
				}
			}
		})
	}

	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
	}{
		{"gzip", kgo.GzipCompression()},
		{"snappy", kgo.SnappyCompression()},
		{"lz4", kgo.Lz4Compression()},
		{"zstd", kgo.ZstdCompression()},
	}
	for _, tc := range codecs {
		t.Run("compression "+tc.name, func(t *testing.T) {
			topic := "e2e-codec-" + tc.name
			n.createTopic(ctx, t, topic, 1, nil)
			want := numbered(topic, 200)
			produceValues(ctx, t, n.client(t, manual, kgo.ProducerBatchCompression(tc.codec)), topic, want)
			if got := values(n.readAll(ctx, t, topic)[0]); !slices.Equal(got, want) {
				t.Errorf("read back %d records, want the %d produced in order", len(got), len(want))
			}
			got := saramaReadAll(ctx, t, n, topic, len(want))
			if !slices.Equal(got, want) {
				t.Errorf("sarama read back %d records, want the %d produced in order", len(got), len(want))
			}
		})
	}

	t.Run("sarama produce", func(t *testing.T) {
		const topic = "e2e-sarama"
		cfg := saramaConfig()
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		cfg.Producer.Return.Successes = true
		cfg.Producer.Partitioner = sarama.NewManualPartitioner
		p, err := sarama.NewSyncProducer([]string{n.kafkaAddr()}, cfg)
		if err != nil {
			t.Fatalf("sarama producer: %v", err)
		}
		defer p.Close()
		want := numbered(topic, 30)
		for i, v := range want {
			part, off, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder("k"), Value: sarama.StringEncoder(v)})
			if err != nil {
				t.Fatalf("sarama send %s: %v", v, err)
			}
			if part != 0 || off != int64(i) {
				t.Errorf("sarama send %s: partition %d offset %d, want 0 and %d", v, part, off, i)
			}
		}
		if got := values(n.readAll(ctx, t, topic)[0]); !slices.Equal(got, want) {
			t.Errorf("franz-go read back %v, want %v", got, want)
		}
	})

	t.Run("consume by timestamp", func(t *testing.T) {
		const topic = "e2e-timestamps"
		n.createTopic(ctx, t, topic, 1, nil)
		base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
		prod := n.client(t, manual)
		rs := make([]*kgo.Record, 10)
		for i := range rs {
			rs[i] = &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "old-%d", i), Timestamp: base.Add(time.Duration(i) * time.Second)}
		}
		if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		listed, err := n.admin(t).ListOffsetsAfterMilli(ctx, base.Add(5*time.Second).UnixMilli(), topic)
		if err == nil {
			err = listed.Error()
		}
		if o, _ := listed.Lookup(topic, 0); err != nil || o.Offset != 5 {
			t.Errorf("ListOffsets at the 6th record's timestamp: offset %d, err %v; want 5", o.Offset, err)
		}
		byTime := n.client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
			topic: {0: kgo.NewOffset().AfterMilli(base.Add(7 * time.Second).UnixMilli())},
		}))
		if got := pollValues(ctx, t, byTime, 3); !slices.Equal(got, []string{"old-7", "old-8", "old-9"}) {
			t.Errorf("consuming from the 8th record's timestamp read %v, want [old-7 old-8 old-9]", got)
		}
	})

	t.Run("consume from latest", func(t *testing.T) {
		const topic = "e2e-latest"
		n.createTopic(ctx, t, topic, 1, nil)
		prod := n.client(t, manual)
		produceValues(ctx, t, prod, topic, numbered("old", 10))
		// The end offset is resolved by a ListOffsets request the client sends on its own; produce
		// only once its answer is in, so that nothing produced is skipped.
		listRead := brokerRead{key: 2, ch: make(chan struct{}, 1)}
		latest := n.client(t, kgo.WithHooks(listRead),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtEnd()}}))
		select {
		case <-listRead.ch:
		case <-ctx.Done():
			t.Fatalf("consumer from the end never listed offsets: %v", ctx.Err())
		}
		want := numbered("new", 5)
		produceValues(ctx, t, prod, topic, want)
		if got := pollValues(ctx, t, latest, len(want)); !slices.Equal(got, want) {
			t.Errorf("consuming from the end read %v, want %v", got, want)
		}
	})

	t.Run("per-key order", func(t *testing.T) {
		const topic = "e2e-keys"
		n.createTopic(ctx, t, topic, 3, nil)
		cl := n.client(t)
		var rs []*kgo.Record
		for i := range 300 {
			rs = append(rs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "key-%d", i%7), Value: fmt.Appendf(nil, "%05d", i)})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		keyPartition := map[string]int32{}
		last := map[string]string{}
		total := 0
		for p, recs := range n.readAll(ctx, t, topic) {
			for _, r := range recs {
				total++
				k, v := string(r.Key), string(r.Value)
				if q, ok := keyPartition[k]; ok && q != p {
					t.Errorf("key %s in partitions %d and %d", k, q, p)
				}
				keyPartition[k] = p
				if v <= last[k] {
					t.Errorf("key %s: %s after %s", k, v, last[k])
				}
				last[k] = v
			}
		}
		if total != len(rs) {
			t.Errorf("read %d records, want %d", total, len(rs))
		}
	})

	t.Run("topic admin and configs", func(t *testing.T) {
		const topic = "e2e-admin"
		adm := n.admin(t)
		n.createTopic(ctx, t, topic, 1, map[string]string{"retention.ms": "3600000"})
		if got := topicConfig(ctx, t, adm, topic, "retention.ms"); got != "3600000" {
			t.Errorf("retention.ms after create: %q, want 3600000", got)
		}
		v := "7200000"
		alter, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: &v}}, topic)
		if err == nil {
			_, err = alter.On(topic, func(r *kadm.AlterConfigsResponse) error { return r.Err })
		}
		if err != nil {
			t.Fatalf("alter retention.ms: %v", err)
		}
		if got := topicConfig(ctx, t, adm, topic, "retention.ms"); got != v {
			t.Errorf("retention.ms after alter: %q, want %s", got, v)
		}
		parts, err := adm.UpdatePartitions(ctx, 3, topic)
		if err == nil {
			err = parts.Error()
		}
		if err != nil {
			t.Fatalf("grow to 3 partitions: %v", err)
		}
		details, err := adm.ListTopics(ctx, topic)
		if err == nil {
			err = details.Error()
		}
		if err != nil || len(details[topic].Partitions) != 3 {
			t.Errorf("after CreatePartitions: %d partitions (err %v), want 3", len(details[topic].Partitions), err)
		}
		del, err := adm.DeleteTopics(ctx, topic)
		if err == nil {
			err = del.Error()
		}
		if err != nil {
			t.Fatalf("delete %s: %v", topic, err)
		}
		all, err := adm.ListTopics(ctx)
		if err != nil {
			t.Fatalf("list topics: %v", err)
		}
		if all.Has(topic) {
			t.Errorf("%s still listed after DeleteTopics", topic)
		}
	})

	t.Run("delete records", func(t *testing.T) {
		const topic = "e2e-delete-records"
		n.createTopic(ctx, t, topic, 1, nil)
		want := numbered(topic, 20)
		produceValues(ctx, t, n.client(t, manual), topic, want)
		var to kadm.Offsets
		to.AddOffset(topic, 0, 12, -1)
		resp, err := n.admin(t).DeleteRecords(ctx, to)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("DeleteRecords before 12: %v", err)
		}
		if r, _ := resp.Lookup(topic, 0); r.LowWatermark != 12 {
			t.Errorf("low watermark %d, want 12", r.LowWatermark)
		}
		got := n.readAll(ctx, t, topic)[0]
		if len(got) == 0 || got[0].Offset != 12 || !slices.Equal(values(got), want[12:]) {
			t.Errorf("after DeleteRecords read %v, want offsets 12..19", values(got))
		}
	})
}

// TestE2ERestart checks that a clean restart and a kill -9 keep records, topic ids and configs.
func TestE2ERestart(t *testing.T) {
	ctx := testContext(t, 60*time.Second)
	n := startNode(t, nodeOptions{})
	manual := kgo.RecordPartitioner(kgo.ManualPartitioner())
	const topic = "e2e-restart"
	n.createTopic(ctx, t, topic, 2, map[string]string{"retention.ms": "5400000"})
	want := numbered(topic, 40)
	produceValues(ctx, t, n.client(t, manual), topic, want)
	before := topicID(ctx, t, n, topic)
	if before == (kadm.TopicID{}) {
		t.Fatalf("%s has the zero topic id; the restarts below would compare nothing", topic)
	}

	if err := n.terminate(); err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
	n.restart()
	if got := topicID(ctx, t, n, topic); got != before {
		t.Errorf("topic id %s after a clean restart, was %s", got, before)
	}
	if got := topicConfig(ctx, t, n.admin(t), topic, "retention.ms"); got != "5400000" {
		t.Errorf("retention.ms after restart: %q, want 5400000", got)
	}
	if got := values(n.readAll(ctx, t, topic)[0]); !slices.Equal(got, want) {
		t.Errorf("after a clean restart read %v, want %v", got, want)
	}

	more := numbered(topic+"-more", 10)
	produceValues(ctx, t, n.client(t, manual), topic, more)
	n.kill()
	n.restart()
	if got := topicID(ctx, t, n, topic); got != before {
		t.Errorf("topic id %s after kill -9 and restart, was %s", got, before)
	}
	if got := values(n.readAll(ctx, t, topic)[0]); !slices.Equal(got, append(want, more...)) {
		t.Errorf("after kill -9 and restart read %v", got)
	}
}

// pollValues consumes until it has n record values.
func pollValues(ctx context.Context, t testing.TB, cl *kgo.Client, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %v, want %d records: %v", out, n, ctx.Err())
		}
		if err := fs.Err0(); err != nil {
			t.Fatalf("fetch: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	return out
}

// brokerRead is a kgo hook that signals ch after each response to a request of one key is read.
type brokerRead struct {
	key int16
	ch  chan struct{}
}

// OnBrokerRead implements kgo.HookBrokerRead.
func (h brokerRead) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key != h.key || err != nil {
		return
	}
	select {
	case h.ch <- struct{}{}:
	default:
	}
}

// topicConfig is the value of one config of a topic.
func topicConfig(ctx context.Context, t testing.TB, adm *kadm.Client, topic, key string) string {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatalf("describe configs of %s: %v", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		t.Fatalf("describe configs of %s: %v", topic, err)
	}
	for _, c := range rc.Configs {
		if c.Key == key && c.Value != nil {
			return *c.Value
		}
	}
	return ""
}

// topicID is the id Metadata gives for a topic.
func topicID(ctx context.Context, t testing.TB, n *node, topic string) kadm.TopicID {
	t.Helper()
	details, err := n.admin(t).ListTopics(ctx, topic)
	if err == nil {
		err = details.Error()
	}
	if err != nil {
		t.Fatalf("metadata of %s: %v", topic, err)
	}
	return details[topic].ID
}

// saramaConfig is a sarama client config speaking Kafka 2.8's protocol versions.
func saramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.ClientID = "weir-e2e"
	cfg.Net.DialTimeout = 5 * time.Second
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	return cfg
}

// saramaReadAll consumes n record values from partition 0 of topic with sarama, from the oldest.
func saramaReadAll(ctx context.Context, t testing.TB, n *node, topic string, count int) []string {
	t.Helper()
	c, err := sarama.NewConsumer([]string{n.kafkaAddr()}, saramaConfig())
	if err != nil {
		t.Fatalf("sarama consumer: %v", err)
	}
	defer c.Close()
	pc, err := c.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatalf("sarama consume %s[0]: %v", topic, err)
	}
	defer pc.Close()
	var out []string
	for len(out) < count {
		select {
		case m := <-pc.Messages():
			out = append(out, string(m.Value))
		case err := <-pc.Errors():
			t.Fatalf("sarama consume %s[0]: %v", topic, err)
		case <-ctx.Done():
			t.Fatalf("sarama read %d of %d records of %s: %v", len(out), count, topic, ctx.Err())
		}
	}
	return out
}
