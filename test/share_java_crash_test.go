package test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestJavaShareConsumerKilled: a Java KafkaShareConsumer that holds a record (weir.e2e.ShareConsumer
// stops at a value ending in "h" without acknowledging it) is killed with kill -9. The broker sees its
// connections close and releases what it held, so a franz-go share consumer of the same group gets the
// record at delivery count 2 well before the record's acquisition lock (30 s) would have expired.
func TestJavaShareConsumerKilled(t *testing.T) {
	cp := javaClasspath(t)
	ctx := testContext(t, 2*time.Minute)
	n := startNode(t, nodeOptions{Args: []string{"--share-groups"}})
	const topic, group = "share-java-crash", "share-java-crash-group"
	n.createTopic(ctx, t, topic, 1, nil)
	prod := n.client(t)
	produce := func(v string) {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	cmd := javaCommand(ctx, cp, "ShareConsumer", n.kafkaAddr(), topic, group, "holder")
	holder := startShareConsumer(t, cmd, "holder")
	// The share-partition starts at the log end when first fetched: warm-up records until the holder
	// accepts one.
	waitFor(ctx, t, "the holder to accept a warm-up record", func() bool {
		produce("warm")
		return len(holder.deliveries()) > 0
	})
	produce("job-h")
	held := func(d javaShareAck) bool { return d.ack == "held" && d.value == "job-h" }
	waitFor(ctx, t, "the holder to hold job-h", func() bool { return slices.ContainsFunc(holder.deliveries(), held) })

	other := n.client(t, kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(200*time.Millisecond))
	got := make(chan *kgo.Record, 16)
	pollCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		for pollCtx.Err() == nil {
			other.PollFetches(pollCtx).EachRecord(func(r *kgo.Record) { got <- r })
		}
	}()
	// Give the franz-go consumer its join and first fetch, then kill the holder.
	time.Sleep(2 * time.Second)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case r := <-got:
			if string(r.Value) != "job-h" {
				continue
			}
			if r.DeliveryCount() != 2 {
				t.Fatalf("job-h redelivered at delivery count %d, want 2", r.DeliveryCount())
			}
			t.Logf("job-h redelivered %v after the kill", time.Since(killed).Round(time.Millisecond))
			return
		case <-deadline:
			t.Fatal("job-h not redelivered within 20 s of the holder's kill -9; its lock is 30 s")
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
}
