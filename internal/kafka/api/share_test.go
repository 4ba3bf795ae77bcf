package api_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/server"
)

// shareConsumer returns a franz-go share consumer of group on topic, closed when the test ends.
func shareConsumer(t *testing.T, n *server.Node, group, topic string) *kgo.Client {
	t.Helper()
	return newClient(t, n, kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(200*time.Millisecond))
}

// produceShare produces one record per value to topic's partition p and waits for each.
func produceShare(t *testing.T, cl *kgo.Client, topic string, p int32, values ...string) {
	t.Helper()
	for _, v := range values {
		r := &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}
		if err := cl.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
			t.Fatalf("produce %q: %v", v, err)
		}
	}
}

// warmUp produces a warm-up record to every partition of topic until the share group's consumers have
// received one from each: a share-partition starts at the log end when it is first fetched
// (share.auto.offset.reset=latest), so records produced before that are never delivered. Records
// received that are not warm-ups go to seen.
func warmUp(t *testing.T, prod *kgo.Client, topic string, partitions int32, consumers []*kgo.Client, seen chan<- *kgo.Record) {
	t.Helper()
	ctx := testCtx(t)
	warmed := map[int32]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	pollCtx, stop := context.WithCancel(ctx)
	for _, c := range consumers {
		wg.Go(func() {
			for pollCtx.Err() == nil {
				fs := c.PollFetches(pollCtx)
				fs.EachRecord(func(r *kgo.Record) {
					if strings.HasPrefix(string(r.Value), "warm") {
						mu.Lock()
						warmed[r.Partition] = true
						mu.Unlock()
						return
					}
					seen <- r
				})
			}
		})
	}
	for {
		mu.Lock()
		done := len(warmed) == int(partitions)
		mu.Unlock()
		if done {
			break
		}
		for p := range partitions {
			produceShare(t, prod, topic, p, "warm")
		}
		select {
		case <-ctx.Done():
			t.Fatalf("share consumers received no warm-up record from some partition: %v", warmed)
		case <-time.After(300 * time.Millisecond):
		}
	}
	stop()
	wg.Wait()
}

// TestShareGroupConsumersAcceptEachRecordOnce: 3 franz-go share consumers of one share group on a
// topic of 2 partitions receive every record of 300 exactly once (each consumer accepts what it
// polls), more consumers than partitions sharing the partitions, and the group describes them.
func TestShareGroupConsumersAcceptEachRecordOnce(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	const topic, group, total = "share-once", "sg-once", 300
	createTopic(t, adm, topic, 2, nil)
	prod := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	consumers := []*kgo.Client{shareConsumer(t, n, group, topic), shareConsumer(t, n, group, topic), shareConsumer(t, n, group, topic)}
	seen := make(chan *kgo.Record, 4*total)
	warmUp(t, prod, topic, 2, consumers, seen)

	ctx := testCtx(t)
	pollCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	perConsumer := make([]int, len(consumers))
	for i, c := range consumers {
		wg.Go(func() {
			for pollCtx.Err() == nil {
				fs := c.PollFetches(pollCtx)
				fs.EachRecord(func(r *kgo.Record) {
					if strings.HasPrefix(string(r.Value), "warm") {
						return
					}
					perConsumer[i]++
					seen <- r
				})
			}
		})
	}
	for i := range total {
		produceShare(t, prod, topic, int32(i%2), fmt.Sprintf("v%d", i))
	}
	got := map[string]int{}
	for len(got) < total {
		select {
		case r := <-seen:
			got[string(r.Value)]++
		case <-ctx.Done():
			t.Fatalf("received %d distinct records of %d", len(got), total)
		}
	}
	// Anything delivered twice would arrive within a lock duration's fraction after the rest.
	time.Sleep(500 * time.Millisecond)
	stop()
	wg.Wait()
	close(seen)
	for r := range seen {
		if !strings.HasPrefix(string(r.Value), "warm") {
			got[string(r.Value)]++
		}
	}
	for v, c := range got {
		if c != 1 {
			t.Errorf("record %s delivered %d times", v, c)
		}
	}
	t.Logf("records per consumer: %v", perConsumer)

	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.GroupIDs = []string{group}
	resp, err := req.RequestWith(testCtx(t), consumers[0])
	if err != nil {
		t.Fatalf("describe: %v", err)
	}
	g := resp.Groups[0]
	if g.ErrorCode != 0 || g.GroupState != "Stable" || len(g.Members) != 3 {
		t.Fatalf("describe: code %d state %q members %d, want Stable with 3", g.ErrorCode, g.GroupState, len(g.Members))
	}
	assigned := map[int32]int{}
	for _, m := range g.Members {
		for _, tp := range m.Assignment.TopicPartitions {
			for _, p := range tp.Partitions {
				assigned[p]++
			}
		}
	}
	if assigned[0] == 0 || assigned[1] == 0 || assigned[0]+assigned[1] < 3 {
		t.Fatalf("assignment %v: want both partitions, every member at least one", assigned)
	}
}
