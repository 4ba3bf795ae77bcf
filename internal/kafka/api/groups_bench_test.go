package api_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkGroupJoinToStable measures, per op, the time from three members starting to join a new
// group on a 12-partition topic until every partition is assigned and the group is Stable.
func BenchmarkGroupJoinToStable(b *testing.B) {
	n := startGroupNode(b, b.TempDir())
	adm := kadm.NewClient(newBenchClient(b, n.KafkaAddr()))
	if _, err := adm.CreateTopic(context.Background(), 12, 1, nil, "bench-join"); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		groupID := fmt.Sprintf("bench-join-%d", i)
		var assigned atomic.Int64
		var clients []*kgo.Client
		start := time.Now()
		for m := range 3 {
			cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.ConsumerGroup(groupID), kgo.ConsumeTopics("bench-join"),
				kgo.ClientID(fmt.Sprintf("m%d", m)), kgo.HeartbeatInterval(100*time.Millisecond),
				kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
					assigned.Add(int64(len(a["bench-join"])))
				}),
				kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
					assigned.Add(-int64(len(r["bench-join"])))
				}))
			if err != nil {
				b.Fatal(err)
			}
			clients = append(clients, cl)
		}
		for {
			if assigned.Load() == 12 {
				gs, err := adm.DescribeGroups(context.Background(), groupID)
				if err == nil && gs[groupID].State == "Stable" && len(gs[groupID].Members) == 3 && membersAssigned(gs[groupID]) {
					break
				}
			}
			time.Sleep(time.Millisecond)
			if time.Since(start) > time.Minute {
				b.Fatal("group never stable")
			}
		}
		b.StopTimer()
		var wg sync.WaitGroup
		for _, cl := range clients {
			wg.Add(1)
			go func() { defer wg.Done(); cl.Close() }()
		}
		wg.Wait()
		b.StartTimer()
	}
}

func membersAssigned(d kadm.DescribedGroup) bool {
	for _, m := range d.Members {
		if ca, ok := m.Assigned.AsConsumer(); !ok || len(ca.Topics) == 0 {
			return false
		}
	}
	return true
}

// BenchmarkGroupOffsetCommit measures OffsetCommit throughput from 10 concurrent consumers, each
// committing one partition's offset for its own group and waiting for the answer (durable).
func BenchmarkGroupOffsetCommit(b *testing.B) {
	n := startGroupNode(b, b.TempDir())
	cl := newBenchClient(b, n.KafkaAddr())
	if _, err := kadm.NewClient(cl).CreateTopic(context.Background(), 10, 1, nil, "bench-commit"); err != nil {
		b.Fatal(err)
	}
	const consumers = 10
	clients := make([]*kgo.Client, consumers)
	for i := range clients {
		clients[i] = newBenchClient(b, n.KafkaAddr())
	}
	var next atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for c := range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				req := kmsg.NewPtrOffsetCommitRequest()
				req.Group, req.Generation = fmt.Sprintf("bench-commit-%d", c), -1
				rt := kmsg.NewOffsetCommitRequestTopic()
				rt.Topic = "bench-commit"
				rp := kmsg.NewOffsetCommitRequestTopicPartition()
				rp.Partition, rp.Offset = int32(c), next.Load()
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(context.Background(), clients[c])
				if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
					b.Errorf("commit: %v %+v", err, resp)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commits/s")
}

func newBenchClient(b *testing.B, addr string) *kgo.Client {
	b.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return cl
}
