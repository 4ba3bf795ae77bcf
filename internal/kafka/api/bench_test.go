package api_test

import (
	"context"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/server"
)

// BenchmarkAPIProduce produces b.N records of 1 KiB to 4 partitions with acks=all and idempotence,
// through an in-process node with its default durability, as the kfake comparison does.
func BenchmarkAPIProduce(b *testing.B) {
	_, cl := benchNode(b)
	value := make([]byte, 1024)
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	var errOnce sync.Once
	var firstErr error
	for range b.N {
		wg.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
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
}

// BenchmarkAPIConsume reads b.N records of 1 KiB from 4 partitions, produced before the timer starts.
func BenchmarkAPIConsume(b *testing.B) {
	n, cl := benchNode(b)
	value := make([]byte, 1024)
	recs := make([]*kgo.Record, b.N)
	for i := range recs {
		recs[i] = &kgo.Record{Value: value}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.ConsumeTopics("bench"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		b.Fatal(err)
	}
	defer cons.Close()
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	b.ResetTimer()
	for got := 0; got < b.N; {
		fs := cons.PollFetches(context.Background())
		if err := fs.Err(); err != nil {
			b.Fatal(err)
		}
		got += fs.NumRecords()
	}
}

func benchNode(b *testing.B) (*server.Node, *kgo.Client) {
	b.Helper()
	n := startNodeWith(b, nodeConfig(b.TempDir()))
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.DefaultProduceTopic("bench"),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.AllowAutoTopicCreation())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	admin, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()))
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	if err := createBenchTopic(b.Context(), admin); err != nil {
		b.Fatal(err)
	}
	return n, cl
}

func createBenchTopic(ctx context.Context, cl *kgo.Client) error {
	_, err := kadm.NewClient(cl).CreateTopic(ctx, 4, 1, nil, "bench")
	return err
}
