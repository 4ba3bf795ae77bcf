package api_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/server"
	"github.com/weir-mq/weir/internal/share"
)

// prioFull runs TestSharePriorityBacklog at issue 17's scale, as far as a window holds it: 60,000
// priority-0 records then 1,000 priority-9 ones, under a window of share.WindowMax records.
var prioFull = flag.Bool("share.prio.full", false, "run TestSharePriorityBacklog with 60,000 + 1,000 records")

// shareReady starts a share consumer of group on topic and returns once the share-partition exists
// (a warm-up record delivered): records produced after that are all delivered to the group. The
// consumer is closed before it returns, its warm-up accepted.
func shareReady(t *testing.T, n *server.Node, prod *kgo.Client, group, topic string) {
	t.Helper()
	c := shareConsumer(t, n, group, topic)
	warmUp(t, prod, topic, 1, []*kgo.Client{c}, make(chan *kgo.Record, 64))
	c.Close()
}

// deliveryHeaders is the config of a topic whose weir.* delivery headers share groups act on.
func deliveryHeaders() map[string]*string {
	on := "true"
	return map[string]*string{"weir.delivery.headers.enable": &on}
}

// TestSharePriorityBacklog: a backlog of N priority-0 records, then M priority-9 records, consumed by
// one franz-go share consumer from the start: every priority-9 record is delivered before K of the
// priority-0 ones are (without priority, all N would come first). The backlog fits the window
// (share.partition.max.record.locks), which is what priority sees.
func TestSharePriorityBacklog(t *testing.T) {
	backlog, high, k, window := 1800, 100, 600, 0
	if *prioFull {
		backlog, high, k, window = 60000, 1000, 5000, share.WindowMax
	}
	cfg := nodeConfig(t.TempDir())
	cfg.SharePartition.RecordLocksMax = window
	n := startNodeWith(t, cfg)
	adm := newAdmin(t, n)
	const topic, group = "share-prio", "sg-prio"
	createTopic(t, adm, topic, 1, deliveryHeaders())
	prod := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	shareReady(t, n, prod, group, topic)

	ctx := testCtx(t)
	produce := func(count int, prio string) {
		var wg sync.WaitGroup
		var failed error
		var mu sync.Mutex
		for i := range count {
			wg.Add(1)
			r := &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("p%s-%d", prio, i))}
			if prio != "" {
				r.Headers = []kgo.RecordHeader{{Key: "weir.priority", Value: []byte(prio)}}
			}
			prod.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
				}
				wg.Done()
			})
		}
		wg.Wait()
		if failed != nil {
			t.Fatalf("produce: %v", failed)
		}
	}
	produce(backlog, "")
	produce(high, "9")

	c := shareConsumer(t, n, group, topic)
	low, highSeen, lowBeforeLastHigh := 0, 0, -1
	for highSeen < high || low < k+1 && low < backlog {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("received %d priority-9 and %d priority-0 records: %v", highSeen, low, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			switch {
			case strings.HasPrefix(string(r.Value), "p9-"):
				highSeen++
				if highSeen == high {
					lowBeforeLastHigh = low
				}
			case strings.HasPrefix(string(r.Value), "p-"):
				low++
			}
		})
	}
	t.Logf("%d priority-0 records delivered before the last of %d priority-9 ones (backlog %d)", lowBeforeLastHigh, high, backlog)
	if lowBeforeLastHigh > k {
		t.Fatalf("%d priority-0 records delivered before the last priority-9 one, want at most %d", lowBeforeLastHigh, k)
	}
}

// TestSharePriorityAgingConfig: a topic's weir.priority.aging.ms reaches the share-partition. 1,800
// priority-0 records are tracked by a first fetch (of 100, record_limit mode); 100 priority-9 records
// follow 50 ms later. At the default aging (10 s) the priority-9 records overtake the priority-0 ones
// left; at 1 ms the priority-0 records have aged to 9 by then, and win the tie by offset: all of them
// come first.
func TestSharePriorityAgingConfig(t *testing.T) {
	for _, tc := range []struct {
		aging string
		all   bool
	}{{"", false}, {"1", true}} {
		n := startNode(t)
		adm := newAdmin(t, n)
		topic, group := "share-aging"+tc.aging, "sg-aging"+tc.aging
		cfg := deliveryHeaders()
		if tc.aging != "" {
			cfg["weir.priority.aging.ms"] = &tc.aging
		}
		createTopic(t, adm, topic, 1, cfg)
		prod := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
		shareReady(t, n, prod, group, topic)
		ctx := testCtx(t)
		produceAll := func(count int, prio string) {
			recs := make([]*kgo.Record, count)
			for i := range recs {
				recs[i] = &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("p%s-%d", prio, i))}
				if prio != "" {
					recs[i].Headers = []kgo.RecordHeader{{Key: "weir.priority", Value: []byte(prio)}}
				}
			}
			if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		const backlog, high = 1800, 100
		produceAll(backlog, "")
		// record_limit mode, 100 a fetch: the first fetch does not take the whole backlog's batch
		c := newClient(t, n, kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(200*time.Millisecond),
			kgo.ShareMaxRecords(100), kgo.ShareMaxRecordsStrict())
		low, highSeen, lowBeforeLastHigh := 0, 0, -1
		count := func(fs kgo.Fetches) {
			fs.EachRecord(func(r *kgo.Record) {
				switch {
				case strings.HasPrefix(string(r.Value), "p9-"):
					highSeen++
					if highSeen == high {
						lowBeforeLastHigh = low
					}
				case strings.HasPrefix(string(r.Value), "p-"):
					low++
				}
			})
		}
		for low == 0 {
			count(c.PollFetches(ctx))
			if ctx.Err() != nil {
				t.Fatal(ctx.Err())
			}
		}
		produceAll(high, "9")
		time.Sleep(50 * time.Millisecond)
		for highSeen < high {
			count(c.PollFetches(ctx))
			if ctx.Err() != nil {
				t.Fatalf("aging %q: received %d priority-9 and %d priority-0 records", tc.aging, highSeen, low)
			}
		}
		t.Logf("aging %q: %d priority-0 records before the last priority-9 one", tc.aging, lowBeforeLastHigh)
		if all := lowBeforeLastHigh == backlog; all != tc.all {
			t.Fatalf("aging %q: %d of %d priority-0 records before the last priority-9 one", tc.aging, lowBeforeLastHigh, backlog)
		}
	}
}

// TestShareDeliverAt: records with weir.deliver-at 2 to 4.5 s ahead, one with weir.delay-ms and two
// without either are consumed by a franz-go share consumer: none arrives before its due time (taken
// by the client when the poll returns it, on the same machine as the broker's clock), the plain ones,
// produced last, arrive before any delayed one, and every delayed one arrives. The lateness is logged.
func TestShareDeliverAt(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	const topic, group = "share-delay", "sg-delay"
	createTopic(t, adm, topic, 1, deliveryHeaders())
	prod := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	shareReady(t, n, prod, group, topic)
	c := shareConsumer(t, n, group, topic)

	ctx := testCtx(t)
	start := time.Now()
	due := map[string]time.Time{}
	for i := range 6 {
		at := start.Add(2*time.Second + time.Duration(i)*500*time.Millisecond).Truncate(time.Millisecond)
		v := fmt.Sprintf("at-%d", i)
		due[v] = at
		r := &kgo.Record{Topic: topic, Value: []byte(v), Headers: []kgo.RecordHeader{{Key: "weir.deliver-at", Value: []byte(strconv.FormatInt(at.UnixMilli(), 10))}}}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	r := &kgo.Record{Topic: topic, Value: []byte("delay"), Timestamp: start, Headers: []kgo.RecordHeader{{Key: "weir.delay-ms", Value: []byte("2500")}}}
	due["delay"] = start.Add(2500 * time.Millisecond).Truncate(time.Millisecond)
	if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	produceShare(t, prod, topic, 0, "plain-0", "plain-1")

	var late []time.Duration
	for got := 0; got < len(due)+2; {
		fs := c.PollFetches(ctx)
		arrived := time.Now()
		if ctx.Err() != nil {
			t.Fatalf("received %d of %d records: %v", got, len(due)+2, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			if strings.HasPrefix(v, "warm") {
				return
			}
			got++
			at, delayed := due[v]
			switch {
			case !delayed:
				if len(late) > 0 {
					t.Errorf("%s, due at once, arrived after %d delayed records", v, len(late))
				}
			case arrived.Before(at):
				t.Errorf("%s arrived %v before its due time", v, at.Sub(arrived))
			default:
				late = append(late, arrived.Sub(at))
			}
		})
	}
	slices.Sort(late)
	t.Logf("lateness of %d delayed records: min %v, p50 %v, max %v", len(late), late[0], late[len(late)/2], late[len(late)-1])
}

// TestShareDeliveryHeadersRefused: a raw Produce of a batch one of whose records has a bad weir.*
// header is refused with INVALID_RECORD and nothing of it appended, while the request's other
// partition, whose batch is good, is appended; a deliver-at in the past is accepted.
func TestShareDeliveryHeadersRefused(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	const topic = "share-bad-headers"
	createTopic(t, adm, topic, 2, deliveryHeaders())
	cl := newClient(t, n)
	ctx := testCtx(t)
	now := time.Now().UnixMilli()
	good := record.RecordHeader{Key: []byte("weir.priority"), Value: []byte("3")}
	bad := []struct {
		name string
		h    record.RecordHeader
	}{
		{"priority 10", record.RecordHeader{Key: []byte("weir.priority"), Value: []byte("10")}},
		{"priority x", record.RecordHeader{Key: []byte("weir.priority"), Value: []byte("x")}},
		{"priority -1", record.RecordHeader{Key: []byte("weir.priority"), Value: []byte("-1")}},
		{"deliver-at not a number", record.RecordHeader{Key: []byte("weir.deliver-at"), Value: []byte("soon")}},
		{"deliver-at beyond 7 days", record.RecordHeader{Key: []byte("weir.deliver-at"), Value: []byte(strconv.FormatInt(now+8*24*3600*1000, 10))}},
		{"delay-ms beyond 7 days", record.RecordHeader{Key: []byte("weir.delay-ms"), Value: []byte(strconv.FormatInt(8*24*3600*1000, 10))}},
		{"delay-ms negative", record.RecordHeader{Key: []byte("weir.delay-ms"), Value: []byte("-5")}},
		{"delay-ms overflowing", record.RecordHeader{Key: []byte("weir.delay-ms"), Value: []byte("99999999999999999999")}},
	}
	ends := func() [2]int64 {
		offs, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		var out [2]int64
		offs.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
		return out
	}
	for i, tc := range bad {
		before := ends()
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		for p, hs := range [][]record.RecordHeader{{good}, {good, tc.h}} {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition = int32(p)
			rp.Records = headerBatch(now, hs)
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		codes := [2]int16{}
		for _, p := range resp.Topics[0].Partitions {
			codes[p.Partition] = p.ErrorCode
		}
		if codes[0] != 0 || codes[1] != kerr.InvalidRecord.Code {
			t.Fatalf("%s: codes %v, want [0 %d] (INVALID_RECORD)", tc.name, codes, kerr.InvalidRecord.Code)
		}
		after := ends()
		if after[0] != before[0]+2 || after[1] != before[1] {
			t.Fatalf("%s (%d): end offsets %v then %v, want partition 0 two up and 1 unmoved", tc.name, i, before, after)
		}
	}
	// the same through franz-go, whose batches are snappy-compressed: checked decompressed
	r := &kgo.Record{Topic: topic, Value: []byte("c"), Headers: []kgo.RecordHeader{{Key: "weir.priority", Value: []byte("10")}}}
	before := ends()
	if err := cl.ProduceSync(ctx, r).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("compressed produce of priority 10: %v, want INVALID_RECORD", err)
	}
	if after := ends(); after != before {
		t.Fatalf("end offsets %v then %v after a refused compressed batch", before, after)
	}
	// a deliver-at in the past is due now, not refused
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = headerBatch(now, []record.RecordHeader{{Key: []byte("weir.deliver-at"), Value: []byte("1")}})
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("deliver-at in the past: %v %v", resp, err)
	}
	// on a topic without weir.delivery.headers.enable the headers are ordinary ones: accepted as they are
	createTopic(t, adm, "share-ordinary-headers", 1, nil)
	r = &kgo.Record{Topic: "share-ordinary-headers", Value: []byte("c"), Headers: []kgo.RecordHeader{{Key: "weir.priority", Value: []byte("10")}}}
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatalf("priority 10 on a topic without delivery headers: %v, want it accepted", err)
	}
}

// TestShareDeliveryHeadersIgnored: on a topic without weir.delivery.headers.enable a share group hands
// records out in offset order whatever their weir.priority and weir.deliver-at headers say.
func TestShareDeliveryHeadersIgnored(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	const topic, group = "share-headers-off", "sg-headers-off"
	createTopic(t, adm, topic, 1, nil)
	prod := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	shareReady(t, n, prod, group, topic)
	ctx := testCtx(t)
	later := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	recs := []*kgo.Record{
		{Topic: topic, Value: []byte("first")},
		{Topic: topic, Value: []byte("second"), Headers: []kgo.RecordHeader{{Key: "weir.priority", Value: []byte("9")}}},
		{Topic: topic, Value: []byte("third"), Headers: []kgo.RecordHeader{{Key: "weir.deliver-at", Value: []byte(later)}}},
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c := shareConsumer(t, n, group, topic)
	var got []string
	for len(got) < len(recs) {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("got %v, want all three records", got)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) != "warm" {
				got = append(got, string(r.Value))
			}
		})
	}
	if !slices.Equal(got, []string{"first", "second", "third"}) {
		t.Fatalf("got %v, want offset order with the headers ignored", got)
	}
}

// headerBatch is an uncompressed batch of two records at ts, the first with headers hs[0], the
// second (when given) with hs[1:].
func headerBatch(ts int64, hs []record.RecordHeader) []byte {
	var body []byte
	body = record.AppendRecord(body, record.Record{Value: []byte("a"), Headers: hs[:1]})
	body = record.AppendRecord(body, record.Record{OffsetDelta: 1, Value: []byte("b"), Headers: hs[1:]})
	h := record.Header{LastOffsetDelta: 1, BaseTimestamp: ts, MaxTimestamp: ts, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, NumRecords: 2}
	return record.AppendBatch(nil, h, body)
}

// TestShareDeliverAtAcrossRestart: a restored share-partition tracks its records again before it hands
// any out. Offsets 0 and 2 are plain, 1 is due 6 s after the produce; a member acquires 0 and 2,
// accepts 0, and the node restarts on its data directory. After the restart another member's fetches
// get 2 again (its second delivery) and 1 only once it is due, though the restored window holds it
// Available.
func TestShareDeliverAtAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	n := startNodeIn(t, dir)
	adm := newAdmin(t, n)
	const topic, group = "share-delay-restart", "sg-delay-restart"
	createTopic(t, adm, topic, 1, deliveryHeaders())
	id := topicID(t, adm, topic)
	prod := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	cl := newClient(t, n)
	doShareFetch(t, cl, shareFetchReq(group, "m", 0, id))
	due := time.Now().Add(6 * time.Second).Truncate(time.Millisecond)
	produceShare(t, prod, topic, 0, "a")
	r := &kgo.Record{Topic: topic, Value: []byte("b"), Headers: []kgo.RecordHeader{{Key: "weir.deliver-at", Value: []byte(strconv.FormatInt(due.UnixMilli(), 10))}}}
	if err := prod.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	produceShare(t, prod, topic, 0, "c")
	acq := doShareFetch(t, cl, shareFetchReq(group, "m", 1, id)).Topics[0].Partitions[0].AcquiredRecords
	if len(acq) != 2 || acq[0].FirstOffset != 0 || acq[0].LastOffset != 0 || acq[1].FirstOffset != 2 || acq[1].LastOffset != 2 {
		t.Fatalf("acquired %+v, want 0 and 2", acq)
	}
	// accepting 0 writes the window [1, 3) to the state: 1 Available, never delivered, 2 held
	if resp := doShareFetch(t, cl, shareFetchReq(group, "m", 2, id, ackBatch(0, 0, 1))); resp.Topics[0].Partitions[0].AcknowledgeErrorCode != 0 {
		t.Fatalf("accept 0: %v", kerr.ErrorForCode(resp.Topics[0].Partitions[0].AcknowledgeErrorCode))
	}
	cl.Close()
	prod.Close()
	if err := n.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	n = startNodeIn(t, dir)
	cl = newClient(t, n)
	ctx := testCtx(t)
	var got []int64
	for epoch := int32(0); !slices.Contains(got, 1); epoch++ {
		resp := doShareFetch(t, cl, shareFetchReq(group, "m2", epoch, id))
		arrived := time.Now()
		if ctx.Err() != nil {
			t.Fatalf("acquired %v after the restart", got)
		}
		if resp.ErrorCode != 0 || len(resp.Topics) == 0 {
			continue
		}
		for _, a := range resp.Topics[0].Partitions[0].AcquiredRecords {
			for off := a.FirstOffset; off <= a.LastOffset; off++ {
				if off == 1 && arrived.Before(due) {
					t.Fatalf("offset 1 handed out %v before its due time", due.Sub(arrived))
				}
				if off != 1 && arrived.After(due) {
					t.Fatalf("the node took past the due time to restart: the test proves nothing")
				}
				got = append(got, off)
			}
		}
	}
	if !slices.Equal(got, []int64{2, 1}) {
		t.Fatalf("acquired %v after the restart, want 2, then 1", got)
	}
}

// BenchmarkShareDeliverAtLateness measures how late delayed records arrive at a franz-go share
// consumer on one in-process node: each op produces 200 records whose weir.deliver-at is spread over
// 1 to 3 s ahead, and receives them all (accepting each poll). It reports the lateness of every
// record (arrival at the client minus its due time) as p50-ms, p99-ms and max-ms, and fails on a
// record that arrived early. Issue 17's target: p99 within 200 ms.
func BenchmarkShareDeliverAtLateness(b *testing.B) {
	n := startNodeWith(b, nodeConfig(b.TempDir()))
	ctx := context.Background()
	if _, err := kadm.NewClient(newBenchClient(b, n.KafkaAddr())).CreateTopic(ctx, 1, 1, deliveryHeaders(), "dbench"); err != nil {
		b.Fatal(err)
	}
	prod := newBenchClient(b, n.KafkaAddr())
	cons, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.ShareGroup("dbench"), kgo.ConsumeTopics("dbench"))
	if err != nil {
		b.Fatal(err)
	}
	defer cons.Close()
	warmUp(b, prod, "dbench", 1, []*kgo.Client{cons}, make(chan *kgo.Record, 1))
	const perOp = 200
	var late []time.Duration
	for b.Loop() {
		start := time.Now()
		due := map[string]time.Time{}
		recs := make([]*kgo.Record, perOp)
		for i := range recs {
			at := start.Add(time.Second + time.Duration(i)*10*time.Millisecond).Truncate(time.Millisecond)
			v := strconv.Itoa(i)
			due[v] = at
			recs[i] = &kgo.Record{Topic: "dbench", Value: []byte(v), Headers: []kgo.RecordHeader{{Key: "weir.deliver-at", Value: []byte(strconv.FormatInt(at.UnixMilli(), 10))}}}
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
		for len(due) > 0 {
			fs := cons.PollFetches(ctx)
			arrived := time.Now()
			if err := fs.Err(); err != nil {
				b.Fatal(err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				at, ok := due[string(r.Value)]
				if !ok {
					return
				}
				if arrived.Before(at) {
					b.Fatalf("record %s arrived %v early", r.Value, at.Sub(arrived))
				}
				late = append(late, arrived.Sub(at))
				delete(due, string(r.Value))
			})
		}
	}
	slices.Sort(late)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(late[len(late)/2]), "p50-ms")
	b.ReportMetric(ms(late[len(late)*99/100]), "p99-ms")
	b.ReportMetric(ms(late[len(late)-1]), "max-ms")
}
