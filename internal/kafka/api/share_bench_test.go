package api_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkShareConsume compares, on one in-process node, reading b.N records of 1 KiB from 2
// partitions with a franz-go share consumer (each poll's records accepted with the next ShareFetch:
// one acknowledgement per batch, each answered once durable in __share_group_state) against a
// classic group consumer. Both first read a warm-up record from each partition; the b.N records are
// produced before the timer starts, and the timer stops at the last record. The consumer's close is
// reported apart, as close-ms: franz-go's share consumer waits for its in-flight ShareFetch, which the
// broker parks for its MaxWait (500 ms by default) once nothing is left to acquire, as Kafka's does,
// while a classic consumer's close does not wait for its fetch.
// Issue 17's target: share ≥ 0.5 × classic.
func BenchmarkShareConsume(b *testing.B) {
	for _, mode := range []string{"classic", "share"} {
		b.Run(mode, func(b *testing.B) {
			n := startNodeWith(b, nodeConfig(b.TempDir()))
			prod := newBenchClient(b, n.KafkaAddr())
			ctx := context.Background()
			if _, err := kadm.NewClient(newBenchClient(b, n.KafkaAddr())).CreateTopic(ctx, 2, 1, nil, "sbench"); err != nil {
				b.Fatal(err)
			}
			var cons *kgo.Client
			var err error
			if mode == "share" {
				cons, err = kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.ShareGroup("sbench"), kgo.ConsumeTopics("sbench"))
			} else {
				cons, err = kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.ConsumerGroup("cbench"), kgo.ConsumeTopics("sbench"),
					kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			}
			if err != nil {
				b.Fatal(err)
			}
			defer cons.Close()
			manual, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err != nil {
				b.Fatal(err)
			}
			defer manual.Close()
			// Both consumers first read a record from each partition: the group is joined (and the
			// share-partitions started) before the timer.
			warmUp(b, manual, "sbench", 2, []*kgo.Client{cons}, make(chan *kgo.Record, 1))
			value := make([]byte, 1024)
			recs := make([]*kgo.Record, b.N)
			for i := range recs {
				recs[i] = &kgo.Record{Topic: "sbench", Value: value}
			}
			if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(value)))
			b.ReportAllocs()
			b.ResetTimer()
			for got := 0; got < b.N; {
				fs := cons.PollFetches(ctx)
				if err := fs.Err(); err != nil {
					b.Fatal(err)
				}
				fs.EachRecord(func(r *kgo.Record) {
					if string(r.Value) != "warm" {
						got++
					}
				})
			}
			b.StopTimer()
			start := time.Now()
			cons.Close()
			b.ReportMetric(float64(time.Since(start))/float64(time.Millisecond), "close-ms")
		})
	}
}
