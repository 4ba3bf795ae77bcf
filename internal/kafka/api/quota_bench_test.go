package api_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkQuotaProduceRatio produces b.N records of 1 KiB to 4 partitions (acks=all, idempotent)
// to each of four nodes per round, over sixteen rounds in rotating order: one without any quota, one
// with 100 client-id quotas none of which is the producer's (every request resolves its quota and
// finds none), one where the producer's own client id has a producer_byte_rate far above what it
// sends (every produce is measured and never throttled), and one where it has a request_percentage
// far above what it uses (every request's handler time is measured and never throttled). The metrics
// are the CPU time (process user and system: nodes and clients are in this process) and wall time of
// each relative to the node without quotas.
func BenchmarkQuotaProduceRatio(b *testing.B) {
	const topic = "bench-quota"
	const nodes = 4
	var addrs [nodes]string
	for i := range addrs {
		n := startNodeWith(b, nodeConfig(b.TempDir()))
		addrs[i] = n.KafkaAddr()
		createBenchTopicNamed(b, addrs[i], topic)
	}
	var entries []kadm.AlterClientQuotaEntry
	for i := range 100 {
		entries = append(entries, kadm.AlterClientQuotaEntry{Entity: quotaEntity(noEntity, kmsg.StringPtr(fmt.Sprintf("other-%d", i))),
			Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1 << 20}}})
	}
	for i, es := range map[int][]kadm.AlterClientQuotaEntry{
		1: entries,
		2: {{Entity: quotaEntity(noEntity, kmsg.StringPtr("bench")), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1 << 40}}}},
		3: {{Entity: quotaEntity(noEntity, kmsg.StringPtr("bench")), Ops: []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 1e6}}}},
	} {
		res, err := kadm.NewClient(newBenchClientOpts(b, kgo.SeedBrokers(addrs[i]))).AlterClientQuotas(context.Background(), es)
		if err != nil || res[0].Err != nil {
			b.Fatalf("set quotas: %v %v", res, err)
		}
	}
	var cls [nodes]*kgo.Client
	value := make([]byte, 1024)
	for i, addr := range addrs {
		cls[i] = newBenchClientOpts(b, kgo.SeedBrokers(addr), kgo.ClientID("bench"), kgo.DefaultProduceTopic(topic),
			kgo.RequiredAcks(kgo.AllISRAcks()))
		producePlain(b, cls[i], value, 1)
	}
	b.SetBytes(nodes * int64(len(value)))
	b.ResetTimer()
	var cpu, wall [nodes]time.Duration
	const rounds = 16
	for r := range rounds {
		count := b.N / rounds
		if r < b.N%rounds {
			count++
		}
		if count == 0 {
			continue
		}
		for k := range nodes {
			i := (r + k) % nodes
			before := processCPU(b)
			wall[i] += producePlain(b, cls[i], value, count)
			cpu[i] += processCPU(b) - before
		}
	}
	b.StopTimer()
	if cpu[0] > 0 && wall[0] > 0 {
		b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "others-cpu/none-cpu")
		b.ReportMetric(float64(wall[1])/float64(wall[0]), "others/none")
		b.ReportMetric(float64(cpu[2])/float64(cpu[0]), "measured-cpu/none-cpu")
		b.ReportMetric(float64(wall[2])/float64(wall[0]), "measured/none")
		b.ReportMetric(float64(cpu[3])/float64(cpu[0]), "timed-cpu/none-cpu")
		b.ReportMetric(float64(wall[3])/float64(wall[0]), "timed/none")
	}
}
