package test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestJavaShareReadCommitted: two Java KafkaShareConsumers (kafka-clients 4.x) in a share group with
// share.isolation.level=read_committed, on a topic of two partitions of a weir process that a franz-go
// transactional producer writes to, committing some transactions and aborting others, with records
// produced outside any transaction between them. The consumers get and accept every committed and
// non-transactional record exactly once and no record of an aborted transaction; while a transaction is
// open they get nothing written at or after it, and once it commits they get its records and those after
// it. The Java client has no isolation setting of its own for share groups: which records it sees is
// the broker's choice alone.
func TestJavaShareReadCommitted(t *testing.T) {
	cp := javaClasspath(t)
	ctx := testContext(t, 3*time.Minute)
	n := startNode(t, nodeOptions{Args: []string{"--share-groups"}})
	const topic, group = "share-txn-java", "share-txn-java-group"
	n.createTopic(ctx, t, topic, 2, nil)
	plain := n.client(t, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	txn := n.client(t, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.TransactionalID("share-txn-java"))
	setShareGroupConfigs(ctx, t, plain, group, "share.isolation.level", "read_committed", "share.auto.offset.reset", "earliest")
	produce := func(cl *kgo.Client, prefix string, n int) []string {
		t.Helper()
		values := make([]string, n)
		recs := make([]*kgo.Record, n)
		for i := range values {
			values[i] = fmt.Sprintf("%s-%03d", prefix, i)
			recs[i] = &kgo.Record{Topic: topic, Value: []byte(values[i])}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		return values
	}
	var want, aborted []string
	for round := range 20 {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		end, values := kgo.TryCommit, produce(txn, fmt.Sprintf("c%02d", round), 10)
		if round%2 == 1 {
			end, values = kgo.TryAbort, produce(txn, fmt.Sprintf("a%02d", round), 10)
		}
		if err := txn.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
		if end == kgo.TryCommit {
			want = append(want, values...)
		} else {
			aborted = append(aborted, values...)
		}
		want = append(want, produce(plain, fmt.Sprintf("p%02d", round), 4)...)
	}
	// open on both partitions while the consumers run
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	late := append(produce(txn, "open", 4), produce(plain, "after", 4)...)

	consumers := make([]*javaShareConsumer, 2)
	for i := range consumers {
		name := fmt.Sprintf("share-txn-%d", i)
		consumers[i] = startShareConsumer(t, javaCommand(ctx, cp, "ShareConsumer", n.kafkaAddr(), topic, group, name), name)
	}
	accepted := func() map[string]int {
		out := map[string]int{}
		for _, c := range consumers {
			for _, d := range c.deliveries() {
				if d.ack == "accept" {
					out[d.value]++
				} else {
					t.Errorf("%s: %+v, want only accepts", c.name, d)
				}
			}
		}
		return out
	}
	waitFor(ctx, t, "every committed record to be accepted", func() bool {
		got := accepted()
		return !slices.ContainsFunc(want, func(v string) bool { return got[v] == 0 })
	})
	// records at or after the open transaction stay back however long the consumers poll
	time.Sleep(time.Second)
	for v := range accepted() {
		if strings.HasPrefix(v, "open-") || strings.HasPrefix(v, "after-") {
			t.Errorf("%s delivered while its transaction, or one before it, was open", v)
		}
	}
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	want = append(want, late...)
	waitFor(ctx, t, "the records of the committed transaction and after it to be accepted", func() bool {
		got := accepted()
		return !slices.ContainsFunc(want, func(v string) bool { return got[v] == 0 })
	})
	for _, c := range consumers {
		c.stop(ctx, t)
	}
	got := accepted()
	for _, v := range want {
		if got[v] != 1 {
			t.Errorf("%s accepted %d times, want once", v, got[v])
		}
	}
	for _, v := range aborted {
		if got[v] != 0 {
			t.Errorf("%s, of an aborted transaction, delivered", v)
		}
	}
	for _, c := range consumers {
		c.mu.Lock()
		if len(c.failed) > 0 {
			t.Errorf("%s: acknowledgements the broker refused: %v", c.name, c.failed)
		}
		c.mu.Unlock()
	}
}
