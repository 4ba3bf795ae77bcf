package api_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestShareKeyOrdered: a share group with weir.share.key.ordered=true, 8 franz-go share consumers on a
// topic of 2 partitions, 1,000 keys of 20 records each. Every consumer sleeps a random 0-2 ms on each
// record before it accepts its poll's records with its next fetch. For every key, the records start
// being processed in the order they were produced, each exactly once, and every consumer gets a fair
// part of the work: an acquisition in a key-ordered group takes at most its share of the acquirable
// records, divided between the members fetching the share-partition.
func TestShareKeyOrdered(t *testing.T) {
	keys, perKey := 1000, 20
	if testing.Short() {
		keys = 200
	}
	n := startNode(t)
	adm := newAdmin(t, n)
	const topic, group = "share-key-ordered", "sg-key-ordered"
	createTopic(t, adm, topic, 2, nil)
	setGroupConfigs(t, newClient(t, n), group, "weir.share.key.ordered", "true", "share.auto.offset.reset", "earliest")
	// 20,000 records handed out a key at a time take 8-30 s here (under -race, beside other tests).
	ctx, cancelAll := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancelAll()
	prod := newClient(t, n, kgo.ProducerLinger(5*time.Millisecond))
	for seq := range perKey {
		for k := range keys {
			prod.Produce(ctx, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%04d", k), Value: []byte(strconv.Itoa(seq))}, nil)
		}
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	total := keys * perKey
	var started atomic.Int64 // the order in which records start being processed
	var mu sync.Mutex
	order := map[string][]int{} // key: the sequence numbers of its records as their processing started
	perConsumer := make([]int, 8)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for c := range perConsumer {
		cl := shareConsumer(t, n, group, topic)
		rng := rand.New(rand.NewPCG(uint64(c), 1))
		wg.Go(func() {
			for cctx.Err() == nil {
				fs := cl.PollFetches(cctx)
				fs.EachRecord(func(r *kgo.Record) {
					seq, _ := strconv.Atoi(string(r.Value))
					mu.Lock()
					order[string(r.Key)] = append(order[string(r.Key)], seq)
					perConsumer[c]++
					mu.Unlock()
					if started.Add(1) == int64(total) {
						cancel()
					}
					time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
				})
				cl.MarkAcks(kgo.AckAccept)
			}
		})
	}
	select {
	case <-cctx.Done():
	case <-ctx.Done():
	}
	cancel()
	wg.Wait()
	if got := started.Load(); got != int64(total) {
		t.Fatalf("%d records processed of %d", got, total)
	}
	mu.Lock()
	defer mu.Unlock()
	for k, seqs := range order {
		for i, seq := range seqs {
			if seq != i {
				t.Fatalf("key %s processed in the order %v, want 0 to %d", k, seqs, perKey-1)
			}
		}
	}
	if len(order) != keys {
		t.Fatalf("%d keys processed, want %d", len(order), keys)
	}
	fair := total / len(perConsumer)
	for c, got := range perConsumer {
		if got < fair/4 {
			t.Errorf("consumer %d processed %d records of %d, under a quarter of its share (%v)", c, got, total, perConsumer)
		}
	}
	t.Logf("records per consumer: %v", strings.Fields(fmt.Sprint(perConsumer)))
}
