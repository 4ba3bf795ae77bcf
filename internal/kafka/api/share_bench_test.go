package api_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
// while a classic consumer's close does not wait for its fetch. For the share consumer it also reports
// the median round trip of its ShareFetches in the timed region as the client saw them (fetch-µs,
// from the request's write to the response's end), the broker's part of a round: the acknowledgement's
// write, the acquisition and the read.
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
			rtts := &fetchTimes{}
			if mode == "share" {
				cons, err = kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.ShareGroup("sbench"), kgo.ConsumeTopics("sbench"),
					kgo.WithHooks(rtts))
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
			rtts.start()
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
			if d := rtts.stop(); len(d) > 0 {
				b.ReportMetric(median(d), "fetch-µs")
			}
			start := time.Now()
			cons.Close()
			b.ReportMetric(float64(time.Since(start))/float64(time.Millisecond), "close-ms")
		})
	}
}

// fetchTimes is a franz-go hook that keeps the round trip of every ShareFetch between start and stop.
type fetchTimes struct {
	mu  sync.Mutex
	on  bool
	rtt []float64
}

func (f *fetchTimes) start() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.on, f.rtt = true, nil
}

// stop returns the round trips kept, in microseconds.
func (f *fetchTimes) stop() []float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.on = false
	return f.rtt
}

// OnBrokerE2E keeps a ShareFetch's round trip (kgo.HookBrokerE2E).
func (f *fetchTimes) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	const shareFetchKey = 78
	if key != shareFetchKey || e2e.Err() != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.on {
		f.rtt = append(f.rtt, float64(e2e.DurationE2E())/float64(time.Microsecond))
	}
}

// BenchmarkShareScale measures issue 17's scaling target: a share group reads past the partition
// count. On one in-process node, a topic of 2 partitions; in each round 4,000 records of 1 KiB are
// produced, then read by a share group of 2 franz-go consumers and by another of 8, in alternating
// order. Each consumer spends 1 ms on each record (a sleep, standing for work done elsewhere, so that
// the two cores are not what is measured) before it accepts its poll's records with its next
// ShareFetch. It reports each group's records per second and the median of the rounds' ratios, 8/2
// (the target is at least 3).
func BenchmarkShareScale(b *testing.B) {
	const records, work = 4000, time.Millisecond
	n := startNodeWith(b, nodeConfig(b.TempDir()))
	ctx := context.Background()
	if _, err := kadm.NewClient(newBenchClient(b, n.KafkaAddr())).CreateTopic(ctx, 2, 1, nil, "sscale"); err != nil {
		b.Fatal(err)
	}
	// Batches of at most 16 KiB, the Java producer's default batch.size: a share-partition hands out
	// whole batches (ShareFetch's batch_optimized mode), so batches of a megabyte would go to a few
	// consumers a thousand records at a time.
	manual, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(16<<10))
	if err != nil {
		b.Fatal(err)
	}
	defer manual.Close()
	groups := map[int][]*kgo.Client{}
	for _, size := range []int{2, 8} {
		for range size {
			cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.ShareGroup(fmt.Sprintf("sscale-%d", size)),
				kgo.ConsumeTopics("sscale"), kgo.FetchMaxWait(100*time.Millisecond))
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			groups[size] = append(groups[size], cl)
		}
		warmUp(b, manual, "sscale", 2, groups[size], make(chan *kgo.Record, records))
	}
	// consume runs a group's consumers until they have accepted the round's records between them
	// (a record of an earlier round that a client still held is accepted, not counted).
	consume := func(size int, tag string) time.Duration {
		var got atomic.Int64
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		start := time.Now()
		var wg sync.WaitGroup
		for _, cl := range groups[size] {
			wg.Go(func() {
				for cctx.Err() == nil {
					fs := cl.PollFetches(cctx)
					fs.EachRecord(func(r *kgo.Record) {
						if strings.HasPrefix(string(r.Value), tag) {
							time.Sleep(work)
							if got.Add(1) == records {
								cancel()
							}
						}
					})
					cl.MarkAcks(kgo.AckAccept)
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	var small, large, ratios []float64
	round := 0
	for b.Loop() {
		tag := fmt.Sprintf("round-%d:", round)
		value := append([]byte(tag), make([]byte, 1024-len(tag))...)
		recs := make([]*kgo.Record, records)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: "sscale", Partition: int32(i % 2), Value: value}
		}
		if err := manual.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
		order := []int{2, 8}
		if round%2 == 1 {
			slices.Reverse(order)
		}
		rate := map[int]float64{}
		for _, size := range order {
			rate[size] = records / consume(size, tag).Seconds()
		}
		b.Logf("round %d: 2 consumers %.0f records/s, 8 consumers %.0f (%.2f×)", round, rate[2], rate[8], rate[8]/rate[2])
		small, large, ratios = append(small, rate[2]), append(large, rate[8]), append(ratios, rate[8]/rate[2])
		round++
	}
	b.ReportMetric(median(small), "2-consumers-rec/s")
	b.ReportMetric(median(large), "8-consumers-rec/s")
	b.ReportMetric(median(ratios), "ratio-8/2")
}

// median is the median of vs.
func median(vs []float64) float64 {
	vs = slices.Clone(vs)
	slices.Sort(vs)
	return vs[len(vs)/2]
}
