package test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
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

	"github.com/weir-mq/weir/internal/delay"
)

// delayed is one record released from a delay topic, as a consumer of the target topic saw it.
type delayed struct {
	index     int
	deliverAt int64
	source    string // "partition/offset" in the delay topic
	partition int32  // in the target topic
	timestamp int64  // the target record's timestamp: the broker's clock at its release
	received  time.Time
}

// delayCollector reads the target topic from its start and keeps every record it receives.
type delayCollector struct {
	mu  sync.Mutex
	got []delayed
}

func (c *delayCollector) run(ctx context.Context, cl *kgo.Client) {
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		now := time.Now()
		fs.EachRecord(func(r *kgo.Record) {
			d := delayed{partition: r.Partition, timestamp: r.Timestamp.UnixMilli(), received: now, index: -1}
			var part, off string
			for _, h := range r.Headers {
				switch h.Key {
				case "weir.deliver-at":
					d.deliverAt, _ = strconv.ParseInt(string(h.Value), 10, 64)
				case "weir.delay.partition":
					part = string(h.Value)
				case "weir.delay.offset":
					off = string(h.Value)
				}
			}
			d.source = part + "/" + off
			d.index, _ = strconv.Atoi(string(r.Value))
			c.mu.Lock()
			c.got = append(c.got, d)
			c.mu.Unlock()
		})
	}
}

func (c *delayCollector) snapshot() []delayed {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

// wait returns what the collector has once it holds nRecords distinct records, or at deadline.
func (c *delayCollector) wait(nRecords int, deadline time.Time) []delayed {
	for {
		got := c.snapshot()
		seen := map[int]bool{}
		for _, d := range got {
			seen[d.index] = true
		}
		if len(seen) == nRecords || time.Now().After(deadline) {
			return got
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// publishDelayed produces nRecords records to source in random order, record i with key "k<i>",
// value "<i>" and weir.deliver-at due(i).
func publishDelayed(ctx context.Context, t *testing.T, n *node, source string, nRecords int, due func(int) int64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	var recs []*kgo.Record
	for _, i := range rng.Perm(nRecords) {
		recs = append(recs, &kgo.Record{Topic: source, Key: []byte("k" + strconv.Itoa(i)), Value: []byte(strconv.Itoa(i)),
			Headers: []kgo.RecordHeader{{Key: "weir.deliver-at", Value: []byte(strconv.FormatInt(due(i), 10))}}})
	}
	producer := n.newClient(t)
	defer producer.Close()
	if err := producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// TestDelayTopicRelease publishes 200 records to a two-partition delay topic, due 2 s to 10 s
// later in random publish order, kills the node with SIGKILL 5 s in and starts it again, and reads
// the target topic (three partitions) with franz-go. Every record arrives, none before its
// weir.deliver-at by the broker's clock (the released record's timestamp) nor by the consumer's;
// the records of each source partition arrive in each target partition in due order (first copies:
// a copy released again after the kill comes later); a record's key picks its target partition as
// the default partitioner does. It reports how late the records were, those due while the node was
// down apart, and the copies released twice.
func TestDelayTopicRelease(t *testing.T) {
	ctx := testContext(t, 90*time.Second)
	n := startNode(t, nodeOptions{})
	const target, source, nRecords = "delay-out", "delay-in", 200
	n.createTopic(ctx, t, target, 3, nil)
	n.createTopic(ctx, t, source, 2, map[string]string{"weir.delay.target.topic": target})

	consumer := n.newClient(t, kgo.ConsumeTopics(target), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond))
	var c delayCollector
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { c.run(cctx, consumer) })
	defer func() {
		cancel()
		wg.Wait()
		consumer.Close()
	}()

	start := time.Now().Add(2 * time.Second).UnixMilli()
	due := func(i int) int64 { return start + int64(i)*8000/nRecords }
	publishDelayed(ctx, t, n, source, nRecords, due)

	time.Sleep(time.Until(time.UnixMilli(start).Add(3 * time.Second)))
	n.kill()
	killed := time.Now()
	n.restart()
	restarted := time.Now()
	t.Logf("node down from %v to %v after the first due time", killed.Sub(time.UnixMilli(start)).Round(time.Millisecond),
		restarted.Sub(time.UnixMilli(start)).Round(time.Millisecond))

	deadline := time.UnixMilli(due(nRecords - 1)).Add(20 * time.Second)
	var got []delayed
	for time.Now().Before(deadline) {
		got = c.snapshot()
		seen := map[int]bool{}
		for _, d := range got {
			seen[d.index] = true
		}
		if len(seen) == nRecords {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	checkDelayed(t, got, nRecords, 3, due, killed, restarted, 200*time.Millisecond)
}

// checkDelayed checks what a delay topic's test received from a target of nTarget partitions: every
// record, none early, in due order per source and target partition, in the partition its key
// gives; and, unless p99Max is 0, the p99 lateness of every record's release (its timestamp, the
// broker's clock) and of the receipt of those due outside [down, up+1s] by the consumer.
func checkDelayed(t *testing.T, got []delayed, nRecords, nTarget int, due func(int) int64, killed, restarted time.Time, p99Max time.Duration) {
	t.Helper()
	first := map[int]delayed{}
	copies := map[int]int{}
	lastDue := map[string]int64{}
	var lateOn, lateDown, lateRelease []time.Duration
	for _, d := range got {
		if d.index < 0 || d.index >= nRecords || d.deliverAt != due(d.index) {
			t.Fatalf("record %+v is not one published", d)
		}
		if d.timestamp < d.deliverAt || d.received.UnixMilli() < d.deliverAt {
			t.Errorf("record %d due %d released at %d, received at %d: early", d.index, d.deliverAt, d.timestamp, d.received.UnixMilli())
		}
		if want := kgo.StickyKeyPartitioner(nil).ForTopic("").Partition(&kgo.Record{Key: []byte("k" + strconv.Itoa(d.index))}, nTarget); int32(want) != d.partition {
			t.Errorf("record %d in partition %d, the default partitioner gives %d", d.index, d.partition, want)
		}
		copies[d.index]++
		if copies[d.index] > 1 {
			continue
		}
		first[d.index] = d
		pair := strings.SplitN(d.source, "/", 2)[0] + ">" + strconv.Itoa(int(d.partition))
		if d.deliverAt < lastDue[pair] {
			t.Errorf("record %d due %d after one due %d from source and target partitions %s", d.index, d.deliverAt, lastDue[pair], pair)
		}
		lastDue[pair] = d.deliverAt
		lateRelease = append(lateRelease, time.Duration(d.timestamp-d.deliverAt)*time.Millisecond)
		late := d.received.Sub(time.UnixMilli(d.deliverAt))
		if d.deliverAt >= killed.UnixMilli() && d.deliverAt <= restarted.UnixMilli()+1000 {
			lateDown = append(lateDown, late)
		} else {
			lateOn = append(lateOn, late)
		}
	}
	if len(first) != nRecords {
		t.Fatalf("%d of %d records released", len(first), nRecords)
	}
	twice := 0
	for _, c := range copies {
		twice += c - 1
	}
	slices.Sort(lateOn)
	slices.Sort(lateDown)
	slices.Sort(lateRelease)
	pct := func(ds []time.Duration, p float64) time.Duration {
		if len(ds) == 0 {
			return 0
		}
		return ds[min(len(ds)-1, int(float64(len(ds))*p))].Round(time.Millisecond)
	}
	t.Logf("%d records released, %d copies released twice; lateness of the releases (all): p50 %v p99 %v max %v; at the consumer of the %d due while the node ran: p50 %v p99 %v max %v; of the %d due while it was down or starting: max %v",
		len(first), twice, pct(lateRelease, 0.5), pct(lateRelease, 0.99), pct(lateRelease, 1),
		len(lateOn), pct(lateOn, 0.5), pct(lateOn, 0.99), pct(lateOn, 1), len(lateDown), pct(lateDown, 1))
	if p99 := pct(lateRelease, 0.99); p99Max > 0 && p99 > p99Max {
		t.Errorf("p99 lateness %v of the releases, want at most %v", p99, p99Max)
	}
	if p99 := pct(lateOn, 0.99); p99Max > 0 && p99 > p99Max {
		t.Errorf("p99 lateness %v at the consumer of the records due while the node ran, want at most %v", p99, p99Max)
	}
}

// TestDelayTopicMillion publishes 1,000,000 records of 8 bytes, delayed by ten minutes (the topic's
// weir.delivery.delay.ms), to a delay topic of one partition, then one record due at once behind
// them: once that one is released, the releaser has read every pending record. It kills the node
// with SIGKILL, starts it again and releases one more record due at once, which the releaser hands
// out once it has read the million pending records again. It reports the node's resident memory
// (VmRSS and its peak VmHWM from /proc) before, after the first release and after the restart's,
// and fails above delayMillionRSSMax; then, as the peer, the memory of a node given the same records
// on a plain topic, read to the end by a consumer, and after a kill -9 and restart.
func TestDelayTopicMillion(t *testing.T) {
	if testing.Short() {
		t.Skip("a million records: not in -short")
	}
	ctx := testContext(t, 5*time.Minute)
	n := startNode(t, nodeOptions{})
	const target, source, nRecords = "million-out", "million-in", 1_000_000
	n.createTopic(ctx, t, target, 1, nil)
	n.createTopic(ctx, t, source, 1, map[string]string{"weir.delay.target.topic": target, "weir.delivery.delay.ms": "600000"})
	before := procMemory(t, n)

	producer := n.newClient(t, kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(100_000))
	began := time.Now()
	produceMillion(ctx, t, producer, source, nRecords)
	produced := time.Now()
	releaseNow(ctx, t, n, producer, source, target, "now")
	producer.Close()
	after := procMemory(t, n)
	t.Logf("%d records produced in %v; the record due now behind them released %v later; node memory before them: %s; after: %s",
		nRecords, produced.Sub(began).Round(time.Millisecond), time.Since(produced).Round(time.Millisecond), before, after)

	// The restarted node reads the million pending records again (a refill from the progress
	// record) before it releases what is due after them.
	n.kill()
	n.restart()
	restarted := time.Now()
	producer = n.newClient(t)
	releaseNow(ctx, t, n, producer, source, target, "now", "again")
	producer.Close()
	again := procMemory(t, n)
	t.Logf("after a kill -9 and a restart, a record due at once behind the million pending released %v after the restart; node memory: %s",
		time.Since(restarted).Round(time.Millisecond), again)
	for _, m := range []memory{after, again} {
		if m.hwm > delayMillionRSSMax {
			t.Errorf("peak resident memory %d MiB, want at most %d MiB", m.hwm>>20, delayMillionRSSMax>>20)
		}
	}

	// The peer: a node of its own given the same million records on a plain topic, consumed to its
	// end, and a kill -9 and restart.
	peer := startNode(t, nodeOptions{})
	peer.createTopic(ctx, t, "million-plain", 1, nil)
	producer = peer.newClient(t, kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(100_000))
	produceMillion(ctx, t, producer, "million-plain", nRecords)
	producer.Close()
	if got := len(peer.readAll(ctx, t, "million-plain")[0]); got != nRecords {
		t.Fatalf("the plain topic holds %d records, want %d", got, nRecords)
	}
	plain := procMemory(t, peer)
	peer.kill()
	peer.restart()
	plainAgain := procMemory(t, peer)
	t.Logf("peer node, the same records on a plain topic read to the end: %s; after a kill -9 and a restart: %s; peak ratio delay/plain %.2f, after the restarts %.2f",
		plain, plainAgain, float64(after.hwm)/float64(plain.hwm), float64(again.hwm)/float64(plainAgain.hwm))
}

// produceMillion produces n records of 8 bytes to topic, asynchronously, and waits for them all.
func produceMillion(ctx context.Context, t *testing.T, producer *kgo.Client, topic string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	var errOnce sync.Once
	var produceErr error
	value := []byte("12345678")
	for range n {
		wg.Add(1)
		producer.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				errOnce.Do(func() { produceErr = err })
			}
			wg.Done()
		})
	}
	wg.Wait()
	if produceErr != nil {
		t.Fatalf("produce to %s: %v", topic, produceErr)
	}
}

// releaseNow produces a record due at once with the last of values to source, and waits until the
// target topic holds values, read from its start.
func releaseNow(ctx context.Context, t *testing.T, n *node, producer *kgo.Client, source, target string, values ...string) {
	t.Helper()
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	if err := producer.ProduceSync(ctx, &kgo.Record{Topic: source, Value: []byte(values[len(values)-1]),
		Headers: []kgo.RecordHeader{{Key: "weir.deliver-at", Value: []byte(now)}}}).FirstErr(); err != nil {
		t.Fatalf("produce the record due now: %v", err)
	}
	if got := readValues(ctx, t, n, target, len(values)); !slices.Equal(got, values) {
		t.Fatalf("released %q, want %q", got, values)
	}
}

// readValues reads topic from its start until it has k records, and returns their values in the order
// read.
func readValues(ctx context.Context, t *testing.T, n *node, topic string, k int) []string {
	t.Helper()
	consumer := n.newClient(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer consumer.Close()
	var got []string
	for len(got) < k {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("consume %s: %v (read %q)", topic, err, got)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// delayMillionRSSMax is the resident memory bound of TestDelayTopicMillion (docs/queues.md, "Delay
// topics (as built)").
const delayMillionRSSMax = 128 << 20

// memory is a process's resident memory now (VmRSS) and at its peak (VmHWM), in bytes.
type memory struct{ rss, hwm int64 }

func (m memory) String() string {
	return fmt.Sprintf("VmRSS %d MiB, VmHWM %d MiB", m.rss>>20, m.hwm>>20)
}

// procMemory reads the node's VmRSS and VmHWM from /proc/PID/status.
func procMemory(t *testing.T, n *node) memory {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n.proc.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	var m memory
	for line := range strings.Lines(string(status)) {
		f := strings.Fields(line)
		if len(f) != 3 || f[2] != "kB" {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			m.rss = kb << 10
		case "VmHWM:":
			m.hwm = kb << 10
		}
	}
	return m
}

// TestDelayTopicTransactions publishes to a delay topic in two transactions, the first aborted, and
// then one record outside them due last: the target gets the committed transaction's records and
// the last one, never the aborted ones (the releaser reads as a read_committed consumer does).
func TestDelayTopicTransactions(t *testing.T) {
	ctx := testContext(t, 60*time.Second)
	n := startNode(t, nodeOptions{})
	const target, source = "delay-txn-out", "delay-txn-in"
	n.createTopic(ctx, t, target, 1, nil)
	n.createTopic(ctx, t, source, 1, map[string]string{"weir.delay.target.topic": target})
	at := func(d time.Duration) []kgo.RecordHeader {
		return []kgo.RecordHeader{{Key: "weir.deliver-at", Value: []byte(strconv.FormatInt(time.Now().Add(d).UnixMilli(), 10))}}
	}
	txn := n.newClient(t, kgo.TransactionalID("delay-txn"), kgo.DefaultProduceTopic(source))
	for _, end := range []struct {
		name   string
		commit kgo.TransactionEndTry
	}{{"aborted", kgo.TryAbort}, {"committed", kgo.TryCommit}} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatalf("begin: %v", err)
		}
		var recs []*kgo.Record
		for i := range 5 {
			recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "%s-%d", end.name, i), Headers: at(300 * time.Millisecond)})
		}
		if err := txn.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce in a transaction: %v", err)
		}
		if err := txn.EndTransaction(ctx, end.commit); err != nil {
			t.Fatalf("end the %s transaction: %v", end.name, err)
		}
	}
	txn.Close()
	producer := n.newClient(t)
	defer producer.Close()
	if err := producer.ProduceSync(ctx, &kgo.Record{Topic: source, Value: []byte("last"), Headers: at(600 * time.Millisecond)}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	consumer := n.newClient(t, kgo.ConsumeTopics(target), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer consumer.Close()
	var got []string
	for !slices.Contains(got, "last") {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("consume: %v (so far %q)", err, got)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	want := []string{"committed-0", "committed-1", "committed-2", "committed-3", "committed-4", "last"}
	if !slices.Equal(got, want) {
		t.Fatalf("released %q, want %q", got, want)
	}
}

// TestDelayTopicCluster runs a delay topic of one partition, replicated on three nodes, targeting a
// topic of three partitions replicated likewise: 100 records due 2 s to 6 s later; 1 s after the
// first is due, the delay partition's leader is killed with SIGKILL. The new leader's releaser
// resumes from the replicated progress record: every record arrives, none early, in due order per
// target partition. It reports the lateness and the copies released twice.
func TestDelayTopicCluster(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	nodes := startCluster(t, 3, 3)
	waitAgree(ctx, t, nodes, hasBrokers(1, 2, 3))
	const target, source, nRecords = "cdelay-out", "cdelay-in", 100
	for _, c := range []struct {
		topic      string
		partitions int32
	}{{target, 3}, {source, 1}} {
		if err := createTopicRF(ctx, t, nodes[0], c.topic, c.partitions, 3); err != nil {
			t.Fatalf("create %s: %v", c.topic, err)
		}
	}
	adm := nodes[0].admin(t)
	alter, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "weir.delay.target.topic", Value: kadm.StringPtr(target)}}, source)
	if err == nil {
		err = alter[0].Err
	}
	if err != nil {
		t.Fatalf("declare %s a delay topic: %v", source, err)
	}
	view := waitAgree(ctx, t, nodes, func(resp *kmsg.MetadataResponse) bool {
		for _, tp := range resp.Topics {
			for _, p := range tp.Partitions {
				if len(p.ISR) != 3 {
					return false
				}
			}
		}
		return len(resp.Topics) == 2
	})
	leader := nodes[topicOf(t, view, source).Partitions[0].Leader-1]
	survivor := nodes[leader.id%3]

	consumer := survivor.newClient(t, kgo.ConsumeTopics(target), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond))
	var c delayCollector
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { c.run(cctx, consumer) })
	defer func() {
		cancel()
		wg.Wait()
		consumer.Close()
	}()
	start := time.Now().Add(2 * time.Second).UnixMilli()
	due := func(i int) int64 { return start + int64(i)*4000/nRecords }
	publishDelayed(ctx, t, survivor, source, nRecords, due)

	time.Sleep(time.Until(time.UnixMilli(start).Add(time.Second)))
	leader.kill()
	killed := time.Now()
	moved := waitAgree(ctx, t, []*node{survivor}, func(resp *kmsg.MetadataResponse) bool {
		l := topicOf(t, resp, source).Partitions[0].Leader
		return l >= 0 && l != leader.id
	})
	up := time.Now()
	t.Logf("node %d, the delay partition's leader, killed %v after the first due time; node %d leads it %v later",
		leader.id, killed.Sub(time.UnixMilli(start)).Round(time.Millisecond), topicOf(t, moved, source).Partitions[0].Leader, up.Sub(killed).Round(time.Millisecond))
	got := c.wait(nRecords, time.UnixMilli(due(nRecords-1)).Add(30*time.Second))
	checkDelayed(t, got, nRecords, 3, due, killed, up, 0)
}

// TestDelayTopicForgedProgress: a client's record carrying the releaser's own header,
// weir.delay.progress, with a value claiming every earlier record released, is refused with
// INVALID_RECORD (alone in its batch, as the releaser writes it, and beside another record), and the
// records before it are released after a kill -9 and restart, when the releaser loads its progress
// from the log. Taken as progress, the forged record would have made the restarted releaser skip them.
func TestDelayTopicForgedProgress(t *testing.T) {
	ctx := testContext(t, 60*time.Second)
	n := startNode(t, nodeOptions{})
	const target, source = "delay-forged-out", "delay-forged-in"
	n.createTopic(ctx, t, target, 1, nil)
	n.createTopic(ctx, t, source, 1, map[string]string{"weir.delay.target.topic": target})
	producer := n.newClient(t, kgo.DefaultProduceTopic(source))
	defer producer.Close()
	// due once the node has restarted, so that only a releaser that loaded its progress releases them
	due := []byte(strconv.FormatInt(time.Now().Add(5*time.Second).UnixMilli(), 10))
	var recs []*kgo.Record
	for i := range 3 {
		recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "due-%d", i), Headers: []kgo.RecordHeader{{Key: "weir.deliver-at", Value: due}}})
	}
	if err := producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	forged := delay.AppendProgress(nil, delay.Progress{Cursor: delay.Entry{Due: time.Now().Add(time.Hour).UnixMilli(), Offset: 3}, ScanEnd: 3, Low: 3})
	header := []kgo.RecordHeader{{Key: delay.ProgressHeader, Value: forged}}
	if err := producer.ProduceSync(ctx, &kgo.Record{Headers: header}).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("forged progress record: %v, want INVALID_RECORD", err)
	}
	batch := []*kgo.Record{{Value: []byte("plain")}, {Headers: header}}
	if err := producer.ProduceSync(ctx, batch...).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("forged progress record beside another: %v, want INVALID_RECORD", err)
	}
	n.kill()
	n.restart()
	if got, want := readValues(ctx, t, n, target, len(recs)), []string{"due-0", "due-1", "due-2"}; !slices.Equal(got, want) {
		t.Fatalf("released %q, want %q", got, want)
	}
}
