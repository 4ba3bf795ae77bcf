package test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// throttleRates are the values of T, the follower.replication.throttled.rate BenchmarkThrottledMove
// sets, one sub-benchmark each.
var throttleRates = []int64{2 << 20, 8 << 20, 32 << 20}

const (
	// throttleCopyFor is how long the move should take at T: the bulk partition is filled with
	// T×throttleCopyFor bytes.
	throttleCopyFor = 12 * time.Second
	// throttleRecordBytes is the value size of the bulk partition's records.
	throttleRecordBytes = 1 << 10
	// steadyRate is the records a second the latency producer offers, steadyValueBytes their size.
	steadyRate       = 2000
	steadyValueBytes = 256
	// steadyBefore is the window before the move whose latencies are the baseline; steadyWarmup
	// goes before it and is not counted; steadyAfter is the window after the move.
	steadyBefore = 10 * time.Second
	steadyWarmup = 3 * time.Second
	steadyAfter  = 10 * time.Second
)

// throttleResult is one round of BenchmarkThrottledMove.
type throttleResult struct {
	// copyRate is the new replica's growth in bytes a second between 10 % and 90 % of the partition.
	copyRate float64
	// p99Before, p99Copy, p99Move and p99After are the latency producer's 99th percentiles in the
	// window before the move; from the move's start until it completes (the copy and the ISR change);
	// from its start until the removed replica's directory is gone (the whole move, its deletion
	// included); and in the window after it, a control for the machine's noise.
	p99Before, p99Copy, p99Move, p99After time.Duration
}

// BenchmarkThrottledMove is issue 14's throttle measurement on real `weir` processes, at each of
// throttleRates. Three nodes; a partition on nodes 1 and 2 (led by 1) is filled with T×12 s of 1 KiB
// records; an acks=all producer offers 2,000 records a second of 256 bytes to a second partition on
// nodes 1 and 2, led by 1; after a 10 s baseline, `weir cluster reassign --execute --throttle T` moves
// the filled partition to nodes 1 and 3. Node 3's DescribeLogDirs is sampled every 100 ms. It reports
// the copy rate between 10 % and 90 % of the partition (the start and the end left out) and its ratio
// to T; the producer's p99 latency in the 10 s before the move; during the copy (until
// ListPartitionReassignments no longer lists the move) and during the whole move (until node 2 has
// deleted its replica), each with its ratio to the p99 before; and in the 10 s after, a control for
// the machine's noise. With several iterations it reports the medians. The issue asks a copy rate
// within ±20 % of T and a p99 during the move at most twice the p99 before.
func BenchmarkThrottledMove(b *testing.B) {
	for _, rate := range throttleRates {
		b.Run(fmt.Sprintf("T=%dMiB", rate>>20), func(b *testing.B) { benchmarkThrottledMove(b, rate) })
	}
}

// benchmarkThrottledMove runs BenchmarkThrottledMove's rounds at T = rate bytes a second.
func benchmarkThrottledMove(b *testing.B, rate int64) {
	var results []throttleResult
	for b.Loop() {
		r := throttledMoveRound(b, rate)
		b.Logf("copy %.2f MiB/s (%.2f of T); p99 before %v, copy %v (%.2f×), move %v (%.2f×), after %v",
			r.copyRate/(1<<20), r.copyRate/float64(rate), r.p99Before, r.p99Copy, float64(r.p99Copy)/float64(r.p99Before),
			r.p99Move, float64(r.p99Move)/float64(r.p99Before), r.p99After)
		results = append(results, r)
	}
	median := func(f func(throttleResult) float64) float64 {
		vs := make([]float64, len(results))
		for i, r := range results {
			vs[i] = f(r)
		}
		slices.Sort(vs)
		return vs[len(vs)/2]
	}
	b.ReportMetric(median(func(r throttleResult) float64 { return r.copyRate / (1 << 20) }), "copy-MiB/s")
	b.ReportMetric(median(func(r throttleResult) float64 { return r.copyRate / float64(rate) }), "copy/T")
	b.ReportMetric(median(func(r throttleResult) float64 { return r.p99Before.Seconds() * 1000 }), "p99-before-ms")
	b.ReportMetric(median(func(r throttleResult) float64 { return r.p99Copy.Seconds() * 1000 }), "p99-copy-ms")
	b.ReportMetric(median(func(r throttleResult) float64 { return float64(r.p99Copy) / float64(r.p99Before) }), "p99-copy/before")
	b.ReportMetric(median(func(r throttleResult) float64 { return r.p99Move.Seconds() * 1000 }), "p99-move-ms")
	b.ReportMetric(median(func(r throttleResult) float64 { return float64(r.p99Move) / float64(r.p99Before) }), "p99-move/before")
	b.ReportMetric(median(func(r throttleResult) float64 { return r.p99After.Seconds() * 1000 }), "p99-after-ms")
}

// throttledMoveRound runs one round of BenchmarkThrottledMove at T = rate on a cluster of its own and
// kills the cluster's nodes before returning.
func throttledMoveRound(b *testing.B, rate int64) throttleResult {
	ctx := testContext(b, 3*time.Minute)
	c := startMoveCluster(ctx, b, 3)
	defer func() {
		for _, n := range c.nodes {
			if n.alive() {
				n.kill()
			}
		}
	}()
	createPlaced(ctx, b, c.nodes[0], "bulk", []int32{1, 2})
	createPlaced(ctx, b, c.nodes[0], "steady", []int32{1, 2})
	waitAgree(ctx, b, c.nodes, func(resp *kmsg.MetadataResponse) bool {
		return len(topicOfResp(resp, "bulk").Partitions) == 1 && len(topicOfResp(resp, "steady").Partitions) == 1 && settled(resp)
	})
	admCl := c.client()
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	fillPartition(ctx, b, c, "bulk", 0, int64(float64(rate)*throttleCopyFor.Seconds()))
	total := replicaBytes(ctx, b, adm, 1, "bulk")

	p := startSteadyProducer(c, "steady")
	defer p.stop()
	time.Sleep(steadyWarmup)
	cpuFrom := nodesCPU(b, c.nodes)
	time.Sleep(steadyBefore)
	cpuBefore := nodesCPU(b, c.nodes)

	plan := filepath.Join(b.TempDir(), "plan.json")
	if err := os.WriteFile(plan, []byte(`{"version":1,"partitions":[{"topic":"bulk","partition":0,"replicas":[1,3]}]}`), 0o600); err != nil {
		b.Fatalf("write the plan: %v", err)
	}
	began := time.Now()
	out, errOut, err := c.weir(ctx, "cluster", "reassign", "--reassignment-json-file", plan, "--execute",
		"--throttle", fmt.Sprint(rate))
	if err != nil || !strings.Contains(out, "bulk-0: moving") {
		b.Fatalf("weir cluster reassign: %v\n%s%s", err, out, errOut)
	}
	samples := sampleCopy(ctx, b, adm, 3, "bulk", total)
	copied := samples[len(samples)-1].at
	completed := waitMoved(ctx, b, adm, "bulk")
	cpuCopy := nodesCPU(b, c.nodes)
	removed := waitRemoved(ctx, b, c.nodes[1], "bulk-0")
	time.Sleep(steadyAfter)
	p.stop()

	r := throttleResult{
		copyRate:  steadyCopyRate(b, samples, total),
		p99Before: p.percentile(began.Add(-steadyBefore), began, 0.99),
		p99Copy:   p.percentile(began, completed, 0.99),
		p99Move:   p.percentile(began, removed, 0.99),
		p99After:  p.percentile(removed, removed.Add(steadyAfter), 0.99),
	}
	slowAt, slow := p.slowest(began.Add(-steadyBefore), removed.Add(steadyAfter))
	b.Logf("%d bytes copied in %v (%.2f MiB/s over the whole copy), move complete after %v, node 2's replica deleted after %v; "+
		"producer p50 before %v, during the move %v, after %v; slowest record %v, sent %v after the move's start",
		total, copied.Sub(began).Round(time.Millisecond), float64(total)/copied.Sub(began).Seconds()/(1<<20),
		completed.Sub(began).Round(time.Millisecond), removed.Sub(began).Round(time.Millisecond),
		p.percentile(began.Add(-steadyBefore), began, 0.5), p.percentile(began, removed, 0.5),
		p.percentile(removed, removed.Add(steadyAfter), 0.5), slow.Round(time.Millisecond), slowAt.Sub(began).Round(time.Millisecond))
	load, _ := os.ReadFile("/proc/loadavg")
	loads := strings.Fields(string(load))
	b.Logf("CPU of nodes 1-3 in cores before the move %s, during the copy %s; the machine's load average %s",
		cpuShares(cpuFrom, cpuBefore, steadyBefore), cpuShares(cpuBefore, cpuCopy, completed.Sub(began)),
		strings.Join(loads[:min(3, len(loads))], " "))
	if n := p.nFailed(); n > 0 {
		b.Errorf("%d of the steady producer's records failed, though its leader stayed in place", n)
	}
	return r
}

// nodesCPU returns the CPU time (user and system) each of nodes' processes has used so far, from
// /proc/PID/stat in clock ticks of 10 ms (USER_HZ is 100 on Linux).
func nodesCPU(tb testing.TB, nodes []*node) []time.Duration {
	tb.Helper()
	out := make([]time.Duration, len(nodes))
	for i, n := range nodes {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n.proc.cmd.Process.Pid))
		if err != nil {
			tb.Fatalf("node %d: %v", n.id, err)
		}
		// the fields after the command name, which is in parentheses and may hold spaces
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		var user, system int64
		if _, err := fmt.Sscan(fields[11], &user); err != nil {
			tb.Fatalf("node %d: utime in %q: %v", n.id, stat, err)
		}
		if _, err := fmt.Sscan(fields[12], &system); err != nil {
			tb.Fatalf("node %d: stime in %q: %v", n.id, stat, err)
		}
		out[i] = time.Duration(user+system) * 10 * time.Millisecond
	}
	return out
}

// cpuShares formats, per node, the CPU used between two nodesCPU samples over wall, in cores.
func cpuShares(from, to []time.Duration, wall time.Duration) string {
	shares := make([]string, len(from))
	for i := range from {
		shares[i] = fmt.Sprintf("%.2f", (to[i]-from[i]).Seconds()/wall.Seconds())
	}
	return strings.Join(shares, "/")
}

// createPlaced creates a topic through n with a partition on each of placement's replica lists (the
// first replica its preferred leader).
func createPlaced(ctx context.Context, tb testing.TB, n *node, topic string, placement ...[]int32) {
	tb.Helper()
	cl := n.newClient(tb)
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for p, replicas := range placement {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(p), replicas
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	req.Topics = append(req.Topics, rt)
	retryAdmin(ctx, tb, "create "+topic, func() error {
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			// a retry of a request that was applied before its answer was lost
			if err = kerr.ErrorForCode(resp.Topics[0].ErrorCode); errors.Is(err, kerr.TopicAlreadyExists) {
				err = nil
			}
		}
		return err
	})
}

// fillPartition writes at least nBytes of throttleRecordBytes random records, uncompressed, to
// partition of topic, acks=all: what is copied is then what was written.
func fillPartition(ctx context.Context, tb testing.TB, c *moveCluster, topic string, partition int32, nBytes int64) {
	tb.Helper()
	cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
	defer cl.Close()
	values := make([]byte, 1<<20+throttleRecordBytes)
	rand.Read(values)
	var mu sync.Mutex
	var failed error
	for i := range nBytes / throttleRecordBytes {
		at := i * 997 % (1 << 20)
		value := values[at : at+throttleRecordBytes]
		cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: partition, Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				failed = err
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		tb.Fatalf("fill %s: %v", topic, err)
	}
	if failed != nil {
		tb.Fatalf("fill %s: %v", topic, failed)
	}
}

// replicaBytes is the size of partition 0 of topic on broker, from its DescribeLogDirs; 0 while the
// broker does not host it.
func replicaBytes(ctx context.Context, tb testing.TB, adm *kadm.Client, broker int32, topic string) int64 {
	tb.Helper()
	var size int64
	retryAdmin(ctx, tb, "describe log dirs", func() error {
		dirs, err := adm.DescribeBrokerLogDirs(ctx, broker, kadm.TopicsSet{topic: {0: {}}})
		size = 0
		dirs.Each(func(d kadm.DescribedLogDir) {
			if p, ok := d.Topics.Lookup(topic, 0); ok {
				size += p.Size
			}
		})
		return err
	})
	return size
}

// waitMoved waits until partition 0 of topic is no longer listed as moving and returns when it saw so.
func waitMoved(ctx context.Context, tb testing.TB, adm *kadm.Client, topic string) time.Time {
	tb.Helper()
	for {
		var moving kadm.ListPartitionReassignmentsResponses
		retryAdmin(ctx, tb, "list reassignments", func() (err error) {
			moving, err = adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {0: {}}})
			return err
		})
		if len(moving[topic]) == 0 {
			return time.Now()
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("the move of %s-0 does not complete: %v", topic, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitRemoved waits until n's data directory holds no directory named after the replica dir, renamed
// away for deletion or not, and returns when it saw so.
func waitRemoved(ctx context.Context, tb testing.TB, n *node, dir string) time.Time {
	tb.Helper()
	for {
		entries, err := os.ReadDir(n.dataDir)
		if err != nil {
			tb.Fatalf("node %d: %v", n.id, err)
		}
		if !slices.ContainsFunc(entries, func(e os.DirEntry) bool { return strings.HasPrefix(e.Name(), dir) }) {
			return time.Now()
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("node %d still holds %s: %v", n.id, dir, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// sizeSample is a replica's size at a moment.
type sizeSample struct {
	at    time.Time
	bytes int64
}

// sampleCopy samples the size of partition 0 of topic on broker every 100 ms until it holds total
// bytes, and returns the samples, the last the first at total.
func sampleCopy(ctx context.Context, tb testing.TB, adm *kadm.Client, broker int32, topic string, total int64) []sizeSample {
	tb.Helper()
	var samples []sizeSample
	for {
		size := replicaBytes(ctx, tb, adm, broker, topic)
		samples = append(samples, sizeSample{at: time.Now(), bytes: size})
		if size >= total {
			return samples
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("broker %d holds %d of %d bytes of %s: %v", broker, size, total, topic, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// steadyCopyRate is the copy rate in bytes a second between the first samples at 10 % and at 90 % of
// total: the start (the throttle's empty bucket, the first fetch) and the end are left out.
func steadyCopyRate(tb testing.TB, samples []sizeSample, total int64) float64 {
	tb.Helper()
	from := slices.IndexFunc(samples, func(s sizeSample) bool { return s.bytes >= total/10 })
	to := slices.IndexFunc(samples, func(s sizeSample) bool { return s.bytes >= total*9/10 })
	if from < 0 || to <= from {
		tb.Fatalf("too few samples of the copy to measure its rate: %v", samples)
	}
	return float64(samples[to].bytes-samples[from].bytes) / samples[to].at.Sub(samples[from].at).Seconds()
}

// steadyProducer offers steadyRate records a second to partition 0 of a topic with an idempotent
// acks=all producer and keeps, for each acknowledged record, when Produce was called and how long the
// acknowledgement took.
type steadyProducer struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	sent    []time.Time
	latency []time.Duration
	failed  int
}

// startSteadyProducer starts a steadyProducer on topic.
func startSteadyProducer(c *moveCluster, topic string) *steadyProducer {
	p := &steadyProducer{done: make(chan struct{}),
		cl: c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(60*steadyRate))}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	value := []byte(strings.Repeat("s", steadyValueBytes))
	go func() {
		defer close(p.done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		began, offered := time.Now(), 0
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for due := int(time.Since(began).Seconds() * steadyRate); offered < due; offered++ {
				sent := time.Now()
				p.cl.TryProduce(context.Background(), &kgo.Record{Topic: topic, Value: value}, func(_ *kgo.Record, err error) {
					took := time.Since(sent)
					p.mu.Lock()
					defer p.mu.Unlock()
					if err != nil {
						p.failed++
						return
					}
					p.sent = append(p.sent, sent)
					p.latency = append(p.latency, took)
				})
			}
		}
	}()
	return p
}

// stop stops offering records, waits up to 10 s for the answers to those offered, and closes the
// client. It may be called more than once.
func (p *steadyProducer) stop() {
	if p.cancel == nil {
		return
	}
	p.cancel()
	<-p.done
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = p.cl.Flush(ctx)
	p.cl.Close()
	p.cancel = nil
}

// percentile is the q quantile of the latencies of the records acknowledged that were sent in
// [from, to); 0 when there are none.
func (p *steadyProducer) percentile(from, to time.Time, q float64) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var in []time.Duration
	for i, at := range p.sent {
		if !at.Before(from) && at.Before(to) {
			in = append(in, p.latency[i])
		}
	}
	if len(in) == 0 {
		return 0
	}
	slices.Sort(in)
	return in[min(int(q*float64(len(in))), len(in)-1)]
}

// slowest returns when the slowest record acknowledged of those sent in [from, to) was sent, and its
// latency.
func (p *steadyProducer) slowest(from, to time.Time) (time.Time, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var at time.Time
	var worst time.Duration
	for i, sent := range p.sent {
		if !sent.Before(from) && sent.Before(to) && p.latency[i] > worst {
			at, worst = sent, p.latency[i]
		}
	}
	return at, worst
}

// nFailed is how many records were not acknowledged.
func (p *steadyProducer) nFailed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed
}
