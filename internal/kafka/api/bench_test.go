package api_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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

// BenchmarkAPIFetchRaw measures the broker's side of consuming: each op sends one Fetch (v12) for 1 MiB
// from each of 4 partitions of 1 KiB uncompressed records and reads the response frame without decoding
// it, so that the client's work is one read of the bytes. SetBytes is the response's size.
func BenchmarkAPIFetchRaw(b *testing.B) {
	_, n := benchNodeRaw(b)
	var d net.Dialer
	c, err := d.DialContext(b.Context(), "tcp", n.KafkaAddr())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	req := fetchRequest(12, "bench", 0, 0, 0)
	req.MaxBytes = 8 << 20
	for p := int32(1); p < 4; p++ {
		rp := req.Topics[0].Partitions[0]
		rp.Partition = p
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	}
	frame := make([]byte, 4, 256)
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.Key()))
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.Version))
	frame = binary.BigEndian.AppendUint32(frame, 1)
	frame = binary.BigEndian.AppendUint16(frame, 0)
	frame = append(frame, 0)
	frame = req.AppendTo(frame)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	var resp []byte
	var size [4]byte
	roundTrip := func() int {
		if _, err := c.Write(frame); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, size[:]); err != nil {
			b.Fatal(err)
		}
		m := int(binary.BigEndian.Uint32(size[:]))
		if cap(resp) < m {
			resp = make([]byte, m)
		}
		if _, err := io.ReadFull(c, resp[:m]); err != nil {
			b.Fatal(err)
		}
		return m
	}
	b.SetBytes(int64(roundTrip()))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		roundTrip()
	}
}

// BenchmarkAPIProduceRaw measures the broker's side of producing: each op sends one Produce (v9, acks=1)
// of a batch of 240 uncompressed 1 KiB records to each of 4 partitions, a frame of just under 1 MiB, and
// reads the response frame. The topic does not sync (weir.flush.policy=never), so the figure is the
// broker's CPU per request rather than the disk's. SetBytes is the request's size.
func BenchmarkAPIProduceRaw(b *testing.B) {
	n := startNodeWith(b, nodeConfig(b.TempDir()))
	admin, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()))
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	never := "never"
	retain := "67108864"
	cfg := map[string]*string{"weir.flush.policy": &never, "retention.bytes": &retain, "segment.bytes": &retain}
	if _, err := kadm.NewClient(admin).CreateTopic(b.Context(), 4, 1, cfg, "bench"); err != nil {
		b.Fatal(err)
	}
	values := make([]string, 240)
	for i := range values {
		values[i] = string(make([]byte, 1024))
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, 1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "bench"
	for p := range int32(4) {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, testBatch(batchSpec{values: values})
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	frame := make([]byte, 4, 1<<20)
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.Key()))
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.Version))
	frame = binary.BigEndian.AppendUint32(frame, 1)
	frame = binary.BigEndian.AppendUint16(frame, 0)
	frame = append(frame, 0)
	frame = req.AppendTo(frame)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	var d net.Dialer
	c, err := d.DialContext(b.Context(), "tcp", n.KafkaAddr())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	resp := make([]byte, 4096)
	roundTrip := func() []byte {
		if _, err := c.Write(frame); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, resp[:4]); err != nil {
			b.Fatal(err)
		}
		m := int(binary.BigEndian.Uint32(resp))
		if _, err := io.ReadFull(c, resp[:m]); err != nil {
			b.Fatal(err)
		}
		return resp[:m]
	}
	first := req.ResponseKind().(*kmsg.ProduceResponse)
	first.Version = req.Version
	if err := first.ReadFrom(roundTrip()[5:]); err != nil {
		b.Fatal(err)
	}
	for _, p := range first.Topics[0].Partitions {
		if p.ErrorCode != 0 {
			b.Fatalf("partition %d: error code %d", p.Partition, p.ErrorCode)
		}
	}
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		roundTrip()
	}
}

// benchNodeRaw starts a node with the topic "bench" of 4 partitions holding 2 MiB of uncompressed
// 1 KiB records each.
func benchNodeRaw(b *testing.B) (*kgo.Client, *server.Node) {
	n := startNodeWith(b, nodeConfig(b.TempDir()))
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.DefaultProduceTopic("bench"),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	if err := createBenchTopic(b.Context(), cl); err != nil {
		b.Fatal(err)
	}
	value := make([]byte, 1024)
	recs := make([]*kgo.Record, 4*2048)
	for i := range recs {
		recs[i] = &kgo.Record{Value: value}
	}
	if err := cl.ProduceSync(b.Context(), recs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	return cl, n
}
