package api_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/weir-mq/weir/internal/server"
)

// saramaConfig is sarama at its default protocol version (Kafka 2.8), bounded in time.
func saramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.ClientID = "weir-test"
	cfg.Net.DialTimeout = testTimeout
	cfg.Net.ReadTimeout = testTimeout
	cfg.Net.WriteTimeout = testTimeout
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewHashPartitioner
	cfg.Consumer.MaxWaitTime = 500 * time.Millisecond
	cfg.Metadata.Retry.Backoff = 50 * time.Millisecond
	return cfg
}

// saramaConsumeAll reads n records from every partition of topic, from offset start.
func saramaConsumeAll(t *testing.T, n *server.Node, topic string, start int64, want int) []*sarama.ConsumerMessage {
	t.Helper()
	c, err := sarama.NewConsumer([]string{n.KafkaAddr()}, saramaConfig())
	if err != nil {
		t.Fatalf("sarama consumer: %v", err)
	}
	defer c.Close()
	parts, err := c.Partitions(topic)
	if err != nil {
		t.Fatalf("partitions: %v", err)
	}
	out := make(chan *sarama.ConsumerMessage)
	errs := make(chan error, len(parts))
	var pcs []sarama.PartitionConsumer
	for _, p := range parts {
		pc, err := c.ConsumePartition(topic, p, start)
		if err != nil {
			t.Fatalf("consume partition %d: %v", p, err)
		}
		pcs = append(pcs, pc)
		go func() {
			for {
				select {
				case m, ok := <-pc.Messages():
					if !ok {
						return
					}
					out <- m
				case e, ok := <-pc.Errors():
					if ok {
						errs <- e
					}
					return
				}
			}
		}()
	}
	defer func() {
		for _, pc := range pcs {
			pc.AsyncClose()
		}
		// Unblock senders that raced with the end of the test.
		go func() {
			for range out {
			}
		}()
	}()
	ctx := testCtx(t)
	var got []*sarama.ConsumerMessage
	for len(got) < want {
		select {
		case m := <-out:
			got = append(got, m)
		case err := <-errs:
			t.Fatalf("sarama consume: %v", err)
		case <-ctx.Done():
			t.Fatalf("sarama consumed %d of %d", len(got), want)
		}
	}
	return got
}

func TestAPISaramaProduceConsume(t *testing.T) {
	n := startNode(t)
	cases := []struct {
		name string
		set  func(*sarama.Config)
	}{
		{"acks1", func(c *sarama.Config) { c.Producer.RequiredAcks = sarama.WaitForLocal }},
		{"acksAll", func(c *sarama.Config) { c.Producer.RequiredAcks = sarama.WaitForAll }},
		{"idempotent", func(c *sarama.Config) {
			c.Producer.RequiredAcks = sarama.WaitForAll
			c.Producer.Idempotent = true
			c.Net.MaxOpenRequests = 1
		}},
		{"gzip", func(c *sarama.Config) { c.Producer.Compression = sarama.CompressionGZIP }},
		{"snappy", func(c *sarama.Config) { c.Producer.Compression = sarama.CompressionSnappy }},
		{"lz4", func(c *sarama.Config) { c.Producer.Compression = sarama.CompressionLZ4 }},
		{"zstd", func(c *sarama.Config) { c.Producer.Compression = sarama.CompressionZSTD }},
	}
	const nRecs, nKeys = 200, 4
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			topic := "sarama-" + c.name
			createTopic(t, newAdmin(t, n), topic, 3, nil)
			cfg := saramaConfig()
			c.set(cfg)
			p, err := sarama.NewSyncProducer([]string{n.KafkaAddr()}, cfg)
			if err != nil {
				t.Fatalf("sync producer: %v", err)
			}
			defer p.Close()
			var msgs []*sarama.ProducerMessage
			for i := range nRecs {
				k := "k" + strconv.Itoa(i%nKeys)
				msgs = append(msgs, &sarama.ProducerMessage{
					Topic: topic, Key: sarama.StringEncoder(k), Value: sarama.StringEncoder(k + "/" + strconv.Itoa(i/nKeys)),
				})
			}
			if err := p.SendMessages(msgs); err != nil {
				t.Fatalf("send: %v", err)
			}
			acked := map[string]*sarama.ProducerMessage{}
			for _, m := range msgs {
				v, _ := m.Value.Encode()
				acked[string(v)] = m
			}
			got := saramaConsumeAll(t, n, topic, sarama.OffsetOldest, nRecs)
			next := map[string]int{}
			for _, m := range got {
				k := string(m.Key)
				if want := k + "/" + strconv.Itoa(next[k]); string(m.Value) != want {
					t.Fatalf("key %s: got %q, want %q", k, m.Value, want)
				}
				next[k]++
				if a := acked[string(m.Value)]; a.Partition != m.Partition || a.Offset != m.Offset {
					t.Fatalf("%s acknowledged at partition %d offset %d, read at partition %d offset %d", m.Value, a.Partition, a.Offset, m.Partition, m.Offset)
				}
			}
		})
	}
}

func TestAPISaramaConsumeNewest(t *testing.T) {
	n := startNode(t)
	const topic = "sarama-newest"
	createTopic(t, newAdmin(t, n), topic, 1, nil)
	p, err := sarama.NewSyncProducer([]string{n.KafkaAddr()}, saramaConfig())
	if err != nil {
		t.Fatalf("sync producer: %v", err)
	}
	defer p.Close()
	for i := range 5 {
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder("old" + strconv.Itoa(i))}); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	c, err := sarama.NewConsumer([]string{n.KafkaAddr()}, saramaConfig())
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	defer c.Close()
	// ConsumePartition resolves OffsetNewest before it returns, so what is produced after is all
	// that can arrive.
	pc, err := c.ConsumePartition(topic, 0, sarama.OffsetNewest)
	if err != nil {
		t.Fatalf("consume partition: %v", err)
	}
	defer pc.AsyncClose()
	if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder("new")}); err != nil {
		t.Fatalf("send: %v", err)
	}
	select {
	case m := <-pc.Messages():
		if string(m.Value) != "new" || m.Offset != 5 {
			t.Fatalf("got offset %d %q, want offset 5 new", m.Offset, m.Value)
		}
	case err := <-pc.Errors():
		t.Fatalf("consume: %v", err)
	case <-testCtx(t).Done():
		t.Fatal("nothing consumed from newest")
	}
}
