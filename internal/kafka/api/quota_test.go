package api_test

import (
	"context"
	"crypto/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/server"
)

// quotaRate is the byte-rate quota of the enforcement tests.
const quotaRate = 512 << 10

// startQuotaNode runs a node measuring rates over 11 samples of 100ms, so that a quota takes hold
// within a second rather than Kafka's ten.
func startQuotaNode(t *testing.T) *server.Node {
	t.Helper()
	cfg := nodeConfig(t.TempDir())
	cfg.QuotaWindowNum, cfg.QuotaWindowSize = 11, 100*time.Millisecond
	return startNodeWith(t, cfg)
}

func setClientQuota(t *testing.T, adm *kadm.Client, client, key string, v float64) {
	t.Helper()
	res, err := adm.AlterClientQuotas(testCtx(t), []kadm.AlterClientQuotaEntry{{
		Entity: quotaEntity(noEntity, kmsg.StringPtr(client)), Ops: []kadm.AlterClientQuotaOp{{Key: key, Value: v}}}})
	if err == nil {
		err = res[0].Err
	}
	if err != nil {
		t.Fatalf("set %s of client %s: %v", key, client, err)
	}
}

// rateMeter counts bytes and tells the rate between two instants after its start.
type rateMeter struct {
	start time.Time
	mu    sync.Mutex
	at    []time.Duration
	total []int64
	sum   int64
}

func newRateMeter() *rateMeter { return &rateMeter{start: time.Now()} }

func (m *rateMeter) add(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sum += int64(n)
	m.at, m.total = append(m.at, time.Since(m.start)), append(m.total, m.sum)
}

// between is the bytes per second counted from `from` to `to` after the start.
func (m *rateMeter) between(from, to time.Duration) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var a, b int64
	for i, at := range m.at {
		if at <= from {
			a = m.total[i]
		}
		if at <= to {
			b = m.total[i]
		}
	}
	return float64(b-a) / (to - from).Seconds()
}

// produceFor produces 16 KiB records as client for d, counting the acknowledged bytes.
func produceFor(ctx context.Context, t *testing.T, n *server.Node, topic, client string, d time.Duration) *rateMeter {
	cl := newClient(t, n, kgo.ClientID(client), kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MaxBufferedRecords(4))
	m := newRateMeter()
	value := make([]byte, 16<<10)
	_, _ = rand.Read(value)
	for time.Since(m.start) < d && ctx.Err() == nil {
		cl.Produce(ctx, &kgo.Record{Value: value}, func(r *kgo.Record, err error) {
			if err == nil {
				m.add(len(r.Value))
			}
		})
	}
	return m
}

func TestQuotaProduceThrottlesToRate(t *testing.T) {
	n := startQuotaNode(t)
	adm := newAdmin(t, n)
	createTopic(t, adm, "q", 1, nil)
	setClientQuota(t, adm, "slow", "producer_byte_rate", quotaRate)
	ctx := testCtx(t)
	const run = 4 * time.Second
	var slow, fast *rateMeter
	var wg sync.WaitGroup
	wg.Go(func() { slow = produceFor(ctx, t, n, "q", "slow", run) })
	wg.Go(func() { fast = produceFor(ctx, t, n, "q", "fast", run) })
	wg.Wait()
	slowRate, fastRate := slow.between(time.Second, run), fast.between(time.Second, run)
	t.Logf("slow %.0f B/s (quota %d), fast %.0f B/s", slowRate, quotaRate, fastRate)
	if slowRate < 0.75*quotaRate || slowRate > 1.25*quotaRate {
		t.Errorf("the limited producer ran at %.0f B/s, want %d ±25%%", slowRate, quotaRate)
	}
	if fastRate < 2*quotaRate {
		t.Errorf("the unlimited producer beside it ran at %.0f B/s, want at least twice the other's quota", fastRate)
	}
}

func TestQuotaFetchThrottlesToRate(t *testing.T) {
	n := startQuotaNode(t)
	adm := newAdmin(t, n)
	createTopic(t, adm, "q", 1, nil)
	ctx := testCtx(t)
	loader := newClient(t, n, kgo.DefaultProduceTopic("q"), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(64<<10))
	value := make([]byte, 16<<10)
	_, _ = rand.Read(value)
	const records = 512 // 8 MiB: more than the limited consumer reads in the run
	for range records {
		loader.Produce(ctx, &kgo.Record{Value: value}, nil)
	}
	if err := loader.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	setClientQuota(t, adm, "slow", "consumer_byte_rate", quotaRate)
	const run = 4 * time.Second
	consume := func(client string) *rateMeter {
		cl := newClient(t, n, kgo.ClientID(client), kgo.ConsumeTopics("q"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxBytes(64<<10), kgo.FetchMaxPartitionBytes(64<<10))
		m := newRateMeter()
		got := 0
		for time.Since(m.start) < run && got < records && ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) { got++; m.add(len(r.Value)) })
		}
		return m
	}
	var slow, fast *rateMeter
	var fastDone atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() { slow = consume("slow") })
	wg.Go(func() { fast = consume("fast"); fastDone.Store(int64(time.Since(fast.start))) })
	wg.Wait()
	slowRate := slow.between(time.Second, run)
	fastRate := float64(fast.sum) / time.Duration(fastDone.Load()).Seconds()
	t.Logf("slow %.0f B/s (quota %d), fast %.0f B/s (%d bytes)", slowRate, quotaRate, fastRate, fast.sum)
	if slowRate < 0.75*quotaRate || slowRate > 1.25*quotaRate {
		t.Errorf("the limited consumer read at %.0f B/s, want %d ±25%%", slowRate, quotaRate)
	}
	if fastRate < 2*quotaRate {
		t.Errorf("the unlimited consumer beside it read at %.0f B/s, want at least twice the other's quota", fastRate)
	}
}

func TestQuotaThrottleTimeAndMute(t *testing.T) {
	n := startQuotaNode(t)
	adm := newAdmin(t, n)
	createTopic(t, adm, "q", 1, nil)
	rc := dialRaw(t, n)
	values := make([]string, 10)
	for i := range values {
		values[i] = string(make([]byte, 1024))
	}
	batch := testBatch(batchSpec{values: values})
	if p := produceRaw(t, rc, 9, "q", 0, batch); p.ErrorCode != 0 {
		t.Fatalf("produce without a quota: %d", p.ErrorCode)
	}
	setClientQuota(t, adm, "test", "producer_byte_rate", 1024) // rawConn's client id
	req := func() *kmsg.ProduceRequest {
		r := kmsg.NewPtrProduceRequest()
		r.Version, r.Acks, r.TimeoutMillis = 9, 1, 5000
		tp := kmsg.NewProduceRequestTopic()
		tp.Topic = "q"
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Records = batch
		tp.Partitions = append(tp.Partitions, pp)
		r.Topics = append(r.Topics, tp)
		return r
	}
	first := rc.do(req()).(*kmsg.ProduceResponse)
	if first.ThrottleMillis <= 0 || first.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("a produce over the quota: throttle %d ms, code %d; want a throttle time and success",
			first.ThrottleMillis, first.Topics[0].Partitions[0].ErrorCode)
	}
	start := time.Now()
	second := rc.do(req()).(*kmsg.ProduceResponse)
	waited := time.Since(start)
	if waited < time.Duration(first.ThrottleMillis)*time.Millisecond*8/10 {
		t.Fatalf("a request sent at once despite a throttle of %d ms was answered after %v: the connection was not muted",
			first.ThrottleMillis, waited)
	}
	if second.ThrottleMillis <= 0 {
		t.Fatalf("the second produce over the quota: throttle %d ms", second.ThrottleMillis)
	}
	f := kmsg.NewPtrFetchRequest()
	f.Version, f.ReplicaID, f.MaxBytes = 11, -1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "q"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	f.Topics = append(f.Topics, ft)
	if r := rc.do(f).(*kmsg.FetchResponse); r.ThrottleMillis != 0 {
		t.Fatalf("a fetch without a consumer quota: throttle %d ms", r.ThrottleMillis)
	}
	setClientQuota(t, adm, "test", "consumer_byte_rate", 1024)
	if r := rc.do(f).(*kmsg.FetchResponse); r.ThrottleMillis <= 0 || len(r.Topics[0].Partitions[0].RecordBatches) == 0 {
		t.Fatalf("a fetch over the consumer quota: throttle %d ms, %d bytes", r.ThrottleMillis, len(r.Topics[0].Partitions[0].RecordBatches))
	}
}

func TestQuotaUserOfThePrincipal(t *testing.T) {
	n := startQuotaNode(t)
	adm := newAdmin(t, n)
	createTopic(t, adm, "q", 1, nil)
	set := func(e kadm.ClientQuotaEntity, v float64) {
		t.Helper()
		res, err := adm.AlterClientQuotas(testCtx(t), []kadm.AlterClientQuotaEntry{{Entity: e,
			Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: v}}}})
		if err == nil {
			err = res[0].Err
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	rc := dialRaw(t, n)
	batch := testBatch(batchSpec{values: []string{string(make([]byte, 8192))}})
	throttle := func() int32 {
		t.Helper()
		r := kmsg.NewPtrProduceRequest()
		r.Version, r.Acks, r.TimeoutMillis = 9, 1, 5000
		tp := kmsg.NewProduceRequestTopic()
		tp.Topic = "q"
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Records = batch
		tp.Partitions = append(tp.Partitions, pp)
		r.Topics = append(r.Topics, tp)
		resp := rc.do(r).(*kmsg.ProduceResponse)
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("produce: code %d", code)
		}
		return resp.ThrottleMillis
	}
	// The connection is User:ANONYMOUS with client id "test": a quota on the user comes before one on
	// the client id, and one on both before either.
	set(quotaEntity(noEntity, kmsg.StringPtr("test")), 1<<40)
	set(quotaEntity(kmsg.StringPtr("ANONYMOUS")), 1024)
	if ms := throttle(); ms <= 0 {
		t.Fatalf("over user ANONYMOUS's quota: throttle %d ms", ms)
	}
	set(quotaEntity(kmsg.StringPtr("ANONYMOUS"), kmsg.StringPtr("test")), 1<<40)
	if ms := throttle(); ms != 0 {
		t.Fatalf("under the quota of user ANONYMOUS's client test: throttle %d ms", ms)
	}
}

func TestQuotaRequestTimeThrottleAndMute(t *testing.T) {
	n := startQuotaNode(t)
	adm := newAdmin(t, n)
	createTopic(t, adm, "q", 1, nil)
	rc := dialRaw(t, n)
	metadata := func() *kmsg.MetadataResponse {
		r := kmsg.NewPtrMetadataRequest()
		r.Version = 9
		return rc.do(r).(*kmsg.MetadataResponse)
	}
	if m := metadata(); m.ThrottleMillis != 0 {
		t.Fatalf("metadata without a quota: throttle %d ms", m.ThrottleMillis)
	}
	// 0.01 % of a thread is 100µs of handler time a second: a few Metadata requests are over it.
	setClientQuota(t, adm, "test", "request_percentage", 0.01)
	var throttle int32
	for range 200 {
		if throttle = metadata().ThrottleMillis; throttle > 0 {
			break
		}
	}
	// A throttle for request time is at most one sample (100ms here), not the whole window.
	if throttle <= 0 || throttle > 100 {
		t.Fatalf("metadata over request_percentage 0.01: throttle %d ms, want 1-100", throttle)
	}
	// ApiVersions is exempt: answered at once, neither counted nor throttled.
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version, av.ClientSoftwareName, av.ClientSoftwareVersion = 3, "test", "1"
	if r := rc.do(av).(*kmsg.ApiVersionsResponse); r.ThrottleMillis != 0 || r.ErrorCode != 0 {
		t.Fatalf("ApiVersions under a request quota: throttle %d ms, code %d", r.ThrottleMillis, r.ErrorCode)
	}
	start := time.Now()
	m := metadata()
	if waited := time.Since(start); waited < time.Duration(throttle)*time.Millisecond*8/10 {
		t.Fatalf("a Metadata sent at once after a throttle of %d ms was answered after %v: the client was not muted",
			throttle, waited)
	}
	if m.ThrottleMillis <= 0 {
		t.Fatalf("the next metadata over the quota: throttle %d ms", m.ThrottleMillis)
	}
	// Over both quotas, a produce is throttled by the larger: its bytes' throttle is the whole window,
	// 1.1s, the request time's at most 100ms and more than none (the metric grows); their sum would be
	// more.
	setClientQuota(t, adm, "test", "producer_byte_rate", 1024)
	before := quotaThrottleSeconds(t, n.HTTPAddr(), "request")
	p := kmsg.NewPtrProduceRequest()
	p.Version, p.Acks, p.TimeoutMillis = 9, 1, 5000
	tp := kmsg.NewProduceRequestTopic()
	tp.Topic = "q"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = testBatch(batchSpec{values: []string{string(make([]byte, 64<<10))}})
	tp.Partitions = append(tp.Partitions, pp)
	p.Topics = append(p.Topics, tp)
	r := rc.do(p).(*kmsg.ProduceResponse)
	if code := r.Topics[0].Partitions[0].ErrorCode; code != 0 || r.ThrottleMillis != 1100 {
		t.Fatalf("a produce over both quotas: throttle %d ms, code %d; want 1100 ms, the larger, and success",
			r.ThrottleMillis, code)
	}
	if after := quotaThrottleSeconds(t, n.HTTPAddr(), "request"); after <= before {
		t.Fatalf("weir_quota_throttle_seconds_total{kind=\"request\"} %v before the produce and %v after: its request time was not throttled",
			before, after)
	}
}

// quotaThrottleSeconds reads weir_quota_throttle_seconds_total{kind} from the node's /metrics.
func quotaThrottleSeconds(t *testing.T, httpAddr, kind string) float64 {
	t.Helper()
	return metricValue(t, httpAddr, `weir_quota_throttle_seconds_total{kind="`+kind+`"}`)
}
