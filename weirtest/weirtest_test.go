package weirtest_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/weirtest"
)

// TestConsumerGroupRoundTrip is what an application's test does: a topic, records produced with
// acks=all, a consumer group that reads them all and commits, and a second client of the same group
// that starts after the commit and finds nothing left.
func TestConsumerGroupRoundTrip(t *testing.T) {
	node := weirtest.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	resp, err := http.Get("http://" + node.HTTPAddr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz of a started node: %s", resp.Status)
	}

	producer, err := kgo.NewClient(kgo.SeedBrokers(node.Addr()), kgo.DefaultProduceTopic("events"))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	if _, err := kadm.NewClient(producer).CreateTopic(ctx, 3, 1, nil, "events"); err != nil {
		t.Fatal(err)
	}
	const n = 100
	for i := range n {
		producer.Produce(ctx, &kgo.Record{Value: []byte{byte(i)}}, nil)
	}
	if err := producer.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	consume := func() int {
		cl, err := kgo.NewClient(kgo.SeedBrokers(node.Addr()), kgo.ConsumerGroup("app"), kgo.ConsumeTopics("events"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		seen := 0
		pollCtx, stop := context.WithTimeout(ctx, 3*time.Second)
		defer stop()
		for seen < n && pollCtx.Err() == nil {
			fetches := cl.PollFetches(pollCtx)
			seen += fetches.NumRecords()
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return seen
	}
	if got := consume(); got != n {
		t.Fatalf("the group's first consumer read %d records, want %d", got, n)
	}
	if got := consume(); got != 0 {
		t.Fatalf("a consumer after the commit read %d records, want none", got)
	}
}

// TestStartReopens checks that a node started on the directory of a closed one serves its records.
func TestStartReopens(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	write := func() *weirtest.Node {
		node, err := weirtest.Start(ctx, dir, weirtest.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return node
	}
	node := write()
	cl, err := kgo.NewClient(kgo.SeedBrokers(node.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "kept"); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "kept", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if err := node.Close(); err != nil {
		t.Fatal(err)
	}
	if err := node.Close(); err != nil {
		t.Fatalf("a second Close: %v, want nil", err)
	}

	node = write()
	defer node.Close()
	cl, err = kgo.NewClient(kgo.SeedBrokers(node.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	if end, ok := ends.Lookup("kept", 0); !ok || end.Err != nil || end.Offset != 1 {
		t.Fatalf("end offset of the reopened topic: %+v, want 1", end)
	}
}

// BenchmarkStartToMetadata measures a node's start in a fresh directory up to the first Metadata
// answer a client gets from it, and its Close.
func BenchmarkStartToMetadata(b *testing.B) {
	ctx := b.Context()
	for b.Loop() {
		node, err := weirtest.Start(ctx, b.TempDir(), weirtest.Options{})
		if err != nil {
			b.Fatal(err)
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(node.Addr()))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := kadm.NewClient(cl).BrokerMetadata(ctx); err != nil {
			b.Fatal(err)
		}
		cl.Close()
		if err := node.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
