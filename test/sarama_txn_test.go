package test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
)

// saramaCopyConfig is sarama's producer config for the copy: idempotent with acks=all and one request
// in flight, as sarama requires for idempotence, and transactional when txnID is set.
func saramaCopyConfig(txnID string) *sarama.Config {
	cfg := saramaConfig()
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Idempotent = true
	cfg.Producer.Retry.Max = 10
	cfg.Producer.Retry.Backoff = 100 * time.Millisecond
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Transaction.ID = txnID
	cfg.Producer.Transaction.Timeout = 30 * time.Second
	return cfg
}

// saramaCopy is one step of the sarama copy: it sends values to topic out and moves the group's offset
// of partition 0 of topic in to next, in a transaction that ends with commit or abort, or, without a
// transaction (plain), with the offset committed by sarama's offset manager.
type saramaCopy struct {
	t        *testing.T
	prod     sarama.SyncProducer
	offsets  sarama.PartitionOffsetManager // nil for a transactional producer
	in, out  string
	group    string
	consumed []*sarama.ConsumerMessage
}

func (c *saramaCopy) step(values []string, from, to int, commit bool) {
	c.t.Helper()
	txn := c.prod.IsTransactional()
	if txn {
		if err := c.prod.BeginTxn(); err != nil {
			c.t.Fatalf("sarama BeginTxn: %v", err)
		}
	}
	msgs := make([]*sarama.ProducerMessage, len(values))
	for i, v := range values {
		msgs[i] = &sarama.ProducerMessage{Topic: c.out, Partition: 0, Value: sarama.StringEncoder(v)}
	}
	if err := c.prod.SendMessages(msgs); err != nil {
		c.t.Fatalf("sarama send %d records in a transaction: %v", len(msgs), err)
	}
	if !txn {
		c.offsets.MarkOffset(int64(to), "")
		return
	}
	// The committed step adds each consumed message (AddMessageToTxn); the aborted one adds the offset
	// directly (AddOffsetsToTxn): both requests reach the coordinator.
	if commit {
		for _, m := range c.consumed[from:to] {
			if err := c.prod.AddMessageToTxn(m, c.group, nil); err != nil {
				c.t.Fatalf("sarama AddMessageToTxn(offset %d): %v", m.Offset, err)
			}
		}
		if err := c.prod.CommitTxn(); err != nil {
			c.t.Fatalf("sarama CommitTxn: %v", err)
		}
		return
	}
	offsets := map[string][]*sarama.PartitionOffsetMetadata{c.in: {{Partition: 0, Offset: int64(to)}}}
	if err := c.prod.AddOffsetsToTxn(offsets, c.group); err != nil {
		c.t.Fatalf("sarama AddOffsetsToTxn: %v", err)
	}
	if err := c.prod.AbortTxn(); err != nil {
		c.t.Fatalf("sarama AbortTxn: %v", err)
	}
}

// TestSaramaTxn copies 20 records with sarama's transactional producer on one node: a committed
// transaction with the first ten and their offsets (AddMessageToTxn), an aborted one with the last ten
// under other values and the end offset (AddOffsetsToTxn), and a committed one with the last ten. A
// read_committed sarama consumer then sees exactly the twenty copied records in order, and the group
// has committed offset 20.
func TestSaramaTxn(t *testing.T) { saramaTxn(t, "sarama-txn") }

// TestSaramaCopyPlain runs TestSaramaTxn's path with an idempotent producer that is not transactional
// and offsets committed by sarama's offset manager; there is no aborted step.
func TestSaramaCopyPlain(t *testing.T) { saramaTxn(t, "") }

func saramaTxn(t *testing.T, txnID string) {
	ctx := testContext(t, 90*time.Second)
	n := startNode(t, nodeOptions{})
	mode := "plain"
	if txnID != "" {
		mode = "txn"
	}
	in, out, group := "sarama-"+mode+"-in", "sarama-"+mode+"-out", "sarama-"+mode
	n.createTopic(ctx, t, in, 1, nil)
	n.createTopic(ctx, t, out, 1, nil)
	const count = 20
	var recs []*kgo.Record
	for i := range count {
		recs = append(recs, &kgo.Record{Topic: in, Value: fmt.Appendf(nil, "%d", i)})
	}
	if err := n.client(t).ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	client, err := sarama.NewClient([]string{n.kafkaAddr()}, saramaCopyConfig(txnID))
	if err != nil {
		t.Fatalf("sarama client: %v", err)
	}
	defer client.Close()
	consumed := saramaConsume(ctx, t, client, in, count)
	prod, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		t.Fatalf("sarama producer (transactional id %q): %v", txnID, err)
	}
	defer prod.Close()
	c := &saramaCopy{t: t, prod: prod, in: in, out: out, group: group, consumed: consumed}
	var om sarama.OffsetManager
	if txnID == "" {
		om, err = sarama.NewOffsetManagerFromClient(group, client)
		if err != nil {
			t.Fatal(err)
		}
		defer om.Close()
		pom, err := om.ManagePartition(in, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer pom.Close()
		c.offsets = pom
	}
	copied := func(from, to int) []string {
		var vs []string
		for _, m := range consumed[from:to] {
			vs = append(vs, "copied-"+string(m.Value))
		}
		return vs
	}
	c.step(copied(0, 10), 0, 10, true)
	var aborted []string
	if txnID != "" {
		for _, m := range consumed[10:] {
			aborted = append(aborted, "aborted-"+string(m.Value))
		}
		c.step(aborted, 10, count, false)
	}
	c.step(copied(10, count), 10, count, true)
	if om != nil {
		om.Commit()
	}

	reader := saramaConfig()
	reader.Consumer.IsolationLevel = sarama.ReadCommitted
	got := saramaReadAllWith(ctx, t, n, reader, out, count)
	if want := copied(0, count); !slices.Equal(got, want) {
		t.Errorf("read_committed sarama consumer read %v, want %v", got, want)
	}
	if txnID != "" {
		// The aborted records are in the log between the two committed halves.
		all := saramaReadAllWith(ctx, t, n, saramaConfig(), out, count+10)
		want := append(append(copied(0, 10), aborted...), copied(10, count)...)
		if !slices.Equal(all, want) {
			t.Errorf("read_uncommitted sarama consumer read %v, want %v", all, want)
		}
	}
	committed, err := n.admin(t).FetchOffsets(ctx, group)
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", group, err)
	}
	if o, ok := committed.Lookup(in, 0); !ok || o.At != count {
		t.Errorf("group %s committed %+v of %s[0], want %d", group, o, in, count)
	}
}

// saramaConsume reads count messages of partition 0 of topic from the oldest with client.
func saramaConsume(ctx context.Context, t *testing.T, client sarama.Client, topic string, count int) []*sarama.ConsumerMessage {
	t.Helper()
	c, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		t.Fatalf("sarama consumer: %v", err)
	}
	defer c.Close()
	pc, err := c.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatalf("sarama consume %s[0]: %v", topic, err)
	}
	defer pc.Close()
	var out []*sarama.ConsumerMessage
	for len(out) < count {
		select {
		case m := <-pc.Messages():
			out = append(out, m)
		case err := <-pc.Errors():
			t.Fatalf("sarama consume %s[0]: %v", topic, err)
		case <-ctx.Done():
			t.Fatalf("sarama read %d of %d records of %s: %v", len(out), count, topic, ctx.Err())
		}
	}
	return out
}

// saramaReadAllWith reads count record values of partition 0 of topic from the oldest with a sarama
// consumer of cfg, then waits a second and fails if more arrive.
func saramaReadAllWith(ctx context.Context, t *testing.T, n *node, cfg *sarama.Config, topic string, count int) []string {
	t.Helper()
	c, err := sarama.NewConsumer([]string{n.kafkaAddr()}, cfg)
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
	more := time.After(time.Hour)
	for {
		select {
		case m := <-pc.Messages():
			out = append(out, string(m.Value))
			if len(out) == count {
				more = time.After(time.Second)
			}
		case err := <-pc.Errors():
			t.Fatalf("sarama consume %s[0]: %v", topic, err)
		case <-more:
			return out
		case <-ctx.Done():
			t.Fatalf("sarama read %d of %d records of %s: %v", len(out), count, topic, ctx.Err())
		}
	}
}
