package test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/storage"
)

// The replication tests run three nodes (all controller voters, session timeout 2s, clusterArgs),
// one topic with one partition, replication factor 3 and min.insync.replicas=2, and an idempotent
// acks=all franz-go producer that writes unique values one at a time and records every
// acknowledgement. After each scenario checkHistory reads the partition back from its leader and
// compareReplicas stops the cluster and compares the replicas' log files offset by offset.

// replTopic is the topic every replication test writes.
const replTopic = "repl"

// acked is one record the acks=all producer had acknowledged, and when.
type acked struct {
	partition int32
	offset    int64
	value     string
	at        time.Time
}

// history is what the producer did: every acknowledged record in acknowledgement order and the
// count of failed attempts.
type history struct {
	mu   sync.Mutex
	recs []acked
	errs int
	next int // the number of the next value to produce
}

func (h *history) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.recs)
}

func (h *history) snapshot() []acked {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.recs)
}

// firstAckAfter is the time of the first acknowledgement after t, and false when there is none.
func (h *history) firstAckAfter(t time.Time) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.recs {
		if r.at.After(t) {
			return r.at, true
		}
	}
	return time.Time{}, false
}

// replCluster is three nodes serving replTopic and the producer writing to it.
type replCluster struct {
	nodes   []*node
	stopped map[int32]bool // nodes held by SIGSTOP
	hist    history
	prod    *kgo.Client
	cancel  context.CancelFunc // stops the producer loop; nil while it does not run
	done    chan struct{}
}

// newReplCluster starts the cluster, creates replTopic and starts the producer.
func newReplCluster(ctx context.Context, t testing.TB) *replCluster {
	t.Helper()
	c := &replCluster{nodes: startCluster(t, 3, 3), stopped: map[int32]bool{}}
	waitAgree(ctx, t, c.nodes, hasBrokers(1, 2, 3))
	cl := c.nodes[0].newClient(t)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for {
		resp, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, replTopic)
		if err == nil {
			err = resp.Err
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("create %s: %v", replTopic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var seeds []string
	for _, n := range c.nodes {
		seeds = append(seeds, n.kafkaAddr())
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0), kgo.RetryTimeout(60*time.Second), kgo.ProducerBatchCompression(kgo.NoCompression()),
		// A request to a stopped or dead leader is given up after about 4s instead of kgo's default
		// 10s+30s, so the producer moves to the new leader soon after the election.
		kgo.ProduceRequestTimeout(2*time.Second), kgo.RequestTimeoutOverhead(2*time.Second),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	c.prod = prod
	t.Cleanup(func() {
		c.stopProducer()
		prod.Close()
	})
	c.startProducer(ctx)
	return c
}

// startProducer runs the producer loop until stopProducer.
func (c *replCluster) startProducer(ctx context.Context) {
	pctx, cancel := context.WithCancel(ctx)
	c.cancel, c.done = cancel, make(chan struct{})
	go func() {
		defer close(c.done)
		for pctx.Err() == nil {
			c.hist.mu.Lock()
			v := fmt.Sprintf("v%07d", c.hist.next)
			c.hist.next++
			c.hist.mu.Unlock()
			rctx, rcancel := context.WithTimeout(pctx, 20*time.Second)
			r, err := c.prod.ProduceSync(rctx, &kgo.Record{Topic: replTopic, Value: []byte(v)}).First()
			rcancel()
			at := time.Now()
			c.hist.mu.Lock()
			if err == nil {
				c.hist.recs = append(c.hist.recs, acked{partition: r.Partition, offset: r.Offset, value: v, at: at})
			} else {
				c.hist.errs++
			}
			c.hist.mu.Unlock()
		}
	}()
}

// stopProducer stops the producer loop and waits for it.
func (c *replCluster) stopProducer() {
	if c.cancel == nil {
		return
	}
	c.cancel()
	<-c.done
	c.cancel = nil
}

// waitAcks waits until the producer has n more acknowledgements than when it was called.
func (c *replCluster) waitAcks(ctx context.Context, t testing.TB, n int) {
	t.Helper()
	want := c.hist.count() + n
	for c.hist.count() < want {
		if ctx.Err() != nil {
			t.Fatalf("producer stuck at %d acknowledged records, want %d", c.hist.count(), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// live returns the running nodes that are not stopped.
func (c *replCluster) live() []*node {
	var out []*node
	for _, n := range c.nodes {
		if n.alive() && !c.stopped[n.id] {
			out = append(out, n)
		}
	}
	return out
}

func (c *replCluster) isLive(n *node) bool { return slices.Contains(c.live(), n) }

// partitionMeta returns partition 0 of replTopic from resp, and false when resp lacks it.
func partitionMeta(resp *kmsg.MetadataResponse) (kmsg.MetadataResponseTopicPartition, bool) {
	for _, tp := range resp.Topics {
		if tp.Topic != nil && *tp.Topic == replTopic && len(tp.Partitions) > 0 {
			return tp.Partitions[0], true
		}
	}
	return kmsg.MetadataResponseTopicPartition{}, false
}

// leader returns the node that currently leads partition 0 and its leader epoch. Each live node is
// asked with a fresh Metadata request; the answer with the highest leader epoch wins (a node that
// has not yet applied the latest election names an older leader at an older epoch), and the node it
// names must be live and name itself leader at that epoch in its own answer.
func (c *replCluster) leader(ctx context.Context, t testing.TB) (*node, int32) {
	t.Helper()
	for ctx.Err() == nil {
		var best kmsg.MetadataResponseTopicPartition
		best.LeaderEpoch = -1
		for _, n := range c.live() {
			if p, ok := partitionMeta(metadata(ctx, t, n)); ok && p.ErrorCode == 0 && p.Leader > 0 && p.LeaderEpoch > best.LeaderEpoch {
				best = p
			}
		}
		if best.LeaderEpoch >= 0 && int(best.Leader) <= len(c.nodes) {
			l := c.nodes[best.Leader-1]
			if c.isLive(l) {
				if p, ok := partitionMeta(metadata(ctx, t, l)); ok && p.Leader == l.id && p.LeaderEpoch == best.LeaderEpoch {
					return l, best.LeaderEpoch
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no live leader for %s", replTopic)
	return nil, 0
}

// waitNewLeader waits until a live node leads at an epoch above epoch.
func (c *replCluster) waitNewLeader(ctx context.Context, t testing.TB, epoch int32) (*node, int32) {
	t.Helper()
	for {
		l, e := c.leader(ctx, t)
		if e > epoch {
			return l, e
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitFullISR waits until the leader's own metadata has every replica in the ISR.
func (c *replCluster) waitFullISR(ctx context.Context, t testing.TB) {
	t.Helper()
	for {
		l, _ := c.leader(ctx, t)
		if p, ok := partitionMeta(metadata(ctx, t, l)); ok && len(p.ISR) == len(c.nodes) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("ISR of %s never full again", replTopic)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// signal sends sig to a running node; SIGSTOP and SIGCONT are tracked for live.
func (c *replCluster) signal(t testing.TB, n *node, sig syscall.Signal) {
	t.Helper()
	if n.proc == nil {
		t.Fatalf("node %d: %v while not running", n.id, sig)
	}
	if err := n.proc.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("node %d: %v: %v", n.id, sig, err)
	}
	c.stopped[n.id] = sig == syscall.SIGSTOP
}

// restartAll starts every stopped node again, launching them together (no voter serves before a
// quorum of voters runs).
func (c *replCluster) restartAll() {
	for _, n := range c.nodes {
		if !n.alive() {
			n.launch()
		}
	}
	for _, n := range c.nodes {
		n.waitHealthy()
	}
}

// checkHistory reads partition 0 back from its leader and checks that every acknowledged record is
// at its acknowledged offset, exactly once, in acknowledgement order, and that offsets increase.
func (c *replCluster) checkHistory(ctx context.Context, t testing.TB) {
	t.Helper()
	// The snapshot comes first: every record it holds is below the end offset readAll then reads to.
	recs := c.hist.snapshot()
	l, _ := c.leader(ctx, t)
	got := l.readAll(ctx, t, replTopic)[0]
	byOffset := map[int64]string{}
	seen := map[string]int{}
	for i, r := range got {
		if i > 0 && r.Offset <= got[i-1].Offset {
			t.Fatalf("offsets not increasing at %d", r.Offset)
		}
		byOffset[r.Offset] = string(r.Value)
		seen[string(r.Value)]++
	}
	for i, a := range recs {
		if a.partition != 0 {
			t.Fatalf("acknowledged %s on partition %d of a one-partition topic", a.value, a.partition)
		}
		if byOffset[a.offset] != a.value {
			t.Fatalf("acknowledged %s at %d, read %q there", a.value, a.offset, byOffset[a.offset])
		}
		if seen[a.value] != 1 {
			t.Fatalf("acknowledged %s read %d times", a.value, seen[a.value])
		}
		if i > 0 && a.offset <= recs[i-1].offset {
			t.Fatalf("acknowledged %s at %d after %s at %d", a.value, a.offset, recs[i-1].value, recs[i-1].offset)
		}
	}
	t.Logf("history: %d acknowledged, %d failed attempts, %d records read from node %d", len(recs), c.hist.errs, len(got), l.id)
}

// compareReplicas stops the producer, waits until every replica is in the ISR again (so each has
// truncated what it held beyond its leader and caught up to the high watermark), kills every node,
// and reads each node's log of partition 0 from a copy of its directory with internal/storage. No
// offset may hold two different records on different replicas, and every replica must hold every
// acknowledged record at its offset. The nodes stay down; restartAll brings them back.
func (c *replCluster) compareReplicas(ctx context.Context, t testing.TB) {
	t.Helper()
	c.stopProducer()
	c.waitFullISR(ctx, t)
	for _, n := range c.nodes {
		n.kill()
	}
	logs := make([]map[int64]string, len(c.nodes))
	for i, n := range c.nodes {
		logs[i] = readReplica(t, filepath.Join(n.dataDir, replTopic+"-0"))
	}
	for _, a := range c.hist.snapshot() {
		for i, lg := range logs {
			if lg[a.offset] != a.value {
				t.Fatalf("node %d holds %q at %d, acknowledged %s there", c.nodes[i].id, lg[a.offset], a.offset, a.value)
			}
		}
	}
	compared := 0
	for off, v := range logs[0] {
		for i, lg := range logs[1:] {
			if w, ok := lg[off]; ok && w != v {
				t.Fatalf("offset %d: node %d holds %q, node %d holds %q", off, c.nodes[0].id, v, c.nodes[i+1].id, w)
			}
		}
		compared++
	}
	for i, lg := range logs[1:] {
		for off, w := range lg {
			if v, ok := logs[0][off]; ok && v != w {
				t.Fatalf("offset %d: node %d holds %q, node %d holds %q", off, c.nodes[0].id, v, c.nodes[i+1].id, w)
			}
		}
	}
	t.Logf("replicas agree: %d, %d and %d records, %d offsets compared", len(logs[0]), len(logs[1]), len(logs[2]), compared)
}

// readReplica opens a copy of a replica's directory with internal/storage (recovery runs on the copy,
// never on the node's files) and returns every record's value by offset.
func readReplica(t testing.TB, dir string) map[int64]string {
	t.Helper()
	cp := filepath.Join(t.TempDir(), filepath.Base(dir))
	if err := os.CopyFS(cp, os.DirFS(dir)); err != nil {
		t.Fatalf("copy %s: %v", dir, err)
	}
	lg, err := storage.Open(cp, storage.DefaultConfig(), storage.Options{})
	if err != nil {
		t.Fatalf("open a copy of %s: %v", dir, err)
	}
	defer lg.Close()
	out := map[int64]string{}
	end := lg.EndOffset()
	for off := lg.StartOffset(); off < end; {
		b, err := lg.Read(off, 1<<20, end)
		if err != nil || len(b) == 0 {
			t.Fatalf("read %s at %d: %v", dir, off, err)
		}
		for batch, err := range record.Batches(b) {
			if err != nil {
				t.Fatalf("%s at %d: %v", dir, off, err)
			}
			h, err := record.ParseHeader(batch)
			if err != nil {
				t.Fatalf("%s at %d: %v", dir, off, err)
			}
			if h.Compression() != 0 {
				t.Fatalf("%s: batch at %d compressed (codec %d); the producer sends none", dir, h.BaseOffset, h.Compression())
			}
			recs, err := record.DecodeRecords(record.Body(batch), int(h.NumRecords))
			if err != nil {
				t.Fatalf("%s: batch at %d: %v", dir, h.BaseOffset, err)
			}
			for _, r := range recs {
				out[h.BaseOffset+int64(r.OffsetDelta)] = string(r.Value)
			}
			off = max(off, h.NextOffset())
		}
	}
	return out
}

// median returns the middle of ds.
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// killLeaderCycle kills the current leader with -9, waits for a new leader and the first
// acknowledgement after the kill, restarts the old leader, and returns the time from the kill to
// that acknowledgement (the partition's unavailability).
func (c *replCluster) killLeaderCycle(ctx context.Context, t testing.TB, i int) time.Duration {
	t.Helper()
	c.waitAcks(ctx, t, 10)
	l, epoch := c.leader(ctx, t)
	l.kill()
	killed := time.Now()
	next, nextEpoch := c.waitNewLeader(ctx, t, epoch)
	var down time.Duration
	for {
		if at, ok := c.hist.firstAckAfter(killed); ok {
			down = at.Sub(killed)
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("kill %d: no acknowledgement after node %d died", i, l.id)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("kill %d: node %d led at epoch %d; node %d leads at epoch %d; first ack after %v", i, l.id, epoch, next.id, nextEpoch, down)
	l.restart()
	return down
}

// TestReplicationKillLeader kills the partition's current leader with -9 ten times while the
// producer runs, restarting it each time; every acknowledged record is read back at its offset
// once, in order, and the replicas' logs agree. It logs the unavailability per kill (kill -9 to the
// next acknowledged acks=all write), whose median the replication note reports.
func TestReplicationKillLeader(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	c := newReplCluster(ctx, t)
	var downs []time.Duration
	for i := range 10 {
		downs = append(downs, c.killLeaderCycle(ctx, t, i+1))
	}
	c.waitAcks(ctx, t, 10)
	c.checkHistory(ctx, t)
	c.compareReplicas(ctx, t)
	t.Logf("unavailability per leader kill: median %v of %d (%v)", median(downs), len(downs), downs)
}

// TestReplicationKillFollower kills a follower with -9 twice; acks=all writes go on with the two
// others (the dead follower leaves the ISR when its session expires), and it catches up and rejoins
// after its restart.
func TestReplicationKillFollower(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	c := newReplCluster(ctx, t)
	for i := range 2 {
		c.waitFullISR(ctx, t)
		c.waitAcks(ctx, t, 10)
		l, _ := c.leader(ctx, t)
		f := c.nodes[int(l.id)%len(c.nodes)]
		f.kill()
		c.waitAcks(ctx, t, 20)
		t.Logf("kill %d: follower %d dead, leader %d went on", i+1, f.id, l.id)
		if i == 0 {
			checkUnderReplicated(ctx, t, l, f)
		}
		f.restart()
	}
	c.waitAcks(ctx, t, 10)
	c.checkHistory(ctx, t)
	c.compareReplicas(ctx, t)
}

// checkUnderReplicated waits until the leader's /metrics shows its partition under-replicated with
// the dead follower out of the ISR, then checks that `weir cluster status` on the leader says so.
func checkUnderReplicated(ctx context.Context, t testing.TB, l, dead *node) {
	t.Helper()
	wants := []string{
		"weir_under_replicated_partitions 1",
		fmt.Sprintf(`weir_replica_in_isr{partition="0",replica="%d",topic="%s"} 0`, dead.id, replTopic),
		fmt.Sprintf(`weir_replica_lag_records{partition="0",replica="%d",topic="%s"} `, dead.id, replTopic),
	}
	var body string
	for {
		body = httpBody(ctx, t, "http://"+l.ports.HTTP+"/metrics")
		missing := ""
		for _, w := range wants {
			if !strings.Contains(body, w) {
				missing = w
			}
		}
		if missing == "" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("leader %d /metrics never showed %q:\n%s", l.id, missing, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	out := clusterStatus(ctx, t, l)
	if !strings.Contains(out, fmt.Sprintf("replicas led by node %d: 1 under-replicated", l.id)) ||
		!strings.Contains(out, "under-replicated partitions: 1") {
		t.Errorf("weir cluster status on the leader:\n%s", out)
	}
}

// httpBody returns the body of a GET of url.
func httpBody(ctx context.Context, t testing.TB, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v", url, resp.Status, err)
	}
	return string(b)
}

// TestReplicationKillController kills the controller leader with -9 twice; a new controller is
// elected and the partition keeps taking acks=all writes.
func TestReplicationKillController(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	c := newReplCluster(ctx, t)
	for i := range 2 {
		c.waitAcks(ctx, t, 10)
		victim := controllerOf(ctx, t, c.nodes, c.isLive)
		victim.kill()
		c.waitAcks(ctx, t, 20)
		next := controllerOf(ctx, t, c.nodes, c.isLive)
		t.Logf("kill %d: controller %d dead, controller now %d", i+1, victim.id, next.id)
		victim.restart()
	}
	c.waitAcks(ctx, t, 10)
	c.checkHistory(ctx, t)
	c.compareReplicas(ctx, t)
}

// TestReplicationKillAll kills every node at once with -9 and restarts them all, twice; nothing
// acknowledged is lost (the default flush policy syncs before any acknowledgement).
func TestReplicationKillAll(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	c := newReplCluster(ctx, t)
	for i := range 2 {
		c.waitAcks(ctx, t, 20)
		for _, n := range c.nodes {
			n.kill()
		}
		t.Logf("kill %d: every node dead after %d acknowledged", i+1, c.hist.count())
		c.restartAll()
	}
	c.waitAcks(ctx, t, 20)
	c.checkHistory(ctx, t)
	c.compareReplicas(ctx, t)
}

// TestReplicationZombieLeader stops the leader with SIGSTOP past its session timeout, so that
// another node is elected, sends the stopped leader an acks=all produce, and resumes it: that
// write must be refused, not acknowledged, and the old leader must rejoin as a follower.
func TestReplicationZombieLeader(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	c := newReplCluster(ctx, t)
	c.waitAcks(ctx, t, 20)
	zombie, epoch := c.leader(ctx, t)
	conn := dialRaw(t, zombie)
	c.signal(t, zombie, syscall.SIGSTOP)
	next, nextEpoch := c.waitNewLeader(ctx, t, epoch)
	c.waitAcks(ctx, t, 20)
	t.Logf("node %d stopped at epoch %d; node %d leads at epoch %d", zombie.id, epoch, next.id, nextEpoch)

	// The request waits in the socket until the zombie runs again, and is then served from
	// whatever image the zombie has at that moment.
	const corr = 7
	conn.sendProduceV7(replTopic, corr, 5_000, recordBatch(false))
	c.signal(t, zombie, syscall.SIGCONT)
	p := conn.readProduceV7(corr)
	if p.ErrorCode == 0 {
		t.Fatalf("the zombie leader acknowledged an acks=all write at offset %d", p.BaseOffset)
	}
	t.Logf("the zombie answered the acks=all write with error code %d", p.ErrorCode)

	c.waitFullISR(ctx, t)
	c.waitAcks(ctx, t, 20)
	c.checkHistory(ctx, t)
	c.compareReplicas(ctx, t)
}

// TestReplicationTwoDown kills both followers with -9: the leader is left alone, below
// min.insync.replicas (and the controller without a quorum), so acks=all writes are refused or time
// out and none is acknowledged until a follower is back.
func TestReplicationTwoDown(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	c := newReplCluster(ctx, t)
	c.waitAcks(ctx, t, 20)
	l, _ := c.leader(ctx, t)
	var down []*node
	for _, n := range c.nodes {
		if n != l {
			n.kill()
			down = append(down, n)
		}
	}
	killed := time.Now()

	probe := l.newClient(t, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(),
		kgo.RecordDeliveryTimeout(4*time.Second), kgo.ProduceRequestTimeout(2*time.Second))
	defer probe.Close()
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err := probe.ProduceSync(pctx, &kgo.Record{Topic: replTopic, Value: []byte("probe")}).First()
	cancel()
	if err == nil {
		t.Fatalf("acks=all write acknowledged by node %d alone", l.id)
	}
	t.Logf("acks=all write to node %d alone: %v", l.id, err)
	// In-flight acknowledgements of writes replicated before the kills may still arrive just after
	// them; none may arrive after this grace.
	grace := killed.Add(time.Second)
	time.Sleep(2 * time.Second)
	if at, ok := c.hist.firstAckAfter(grace); ok {
		t.Fatalf("a record was acknowledged %v after two of three nodes died", at.Sub(killed))
	}
	for _, n := range down {
		n.restart()
	}
	c.waitAcks(ctx, t, 20)
	c.checkHistory(ctx, t)
	c.compareReplicas(ctx, t)
}

// TestReplicationSoak runs WEIR_SOAK_CYCLES (default 200) fault cycles on one cluster when
// WEIR_SOAK=1: leader kill, follower kill, controller kill and all-nodes kill in turn, the history
// checked every ten cycles and the replicas compared at the end.
func TestReplicationSoak(t *testing.T) {
	if os.Getenv("WEIR_SOAK") != "1" {
		t.Skip("set WEIR_SOAK=1 for the replication soak")
	}
	cycles := 200
	if v, err := strconv.Atoi(os.Getenv("WEIR_SOAK_CYCLES")); err == nil && v > 0 {
		cycles = v
	}
	ctx := testContext(t, time.Duration(cycles)*30*time.Second)
	c := newReplCluster(ctx, t)
	var downs []time.Duration
	began := time.Now()
	for i := range cycles {
		switch i % 4 {
		case 0, 2:
			downs = append(downs, c.killLeaderCycle(ctx, t, i+1))
		case 1:
			c.waitAcks(ctx, t, 10)
			l, _ := c.leader(ctx, t)
			f := c.nodes[int(l.id)%len(c.nodes)]
			f.kill()
			c.waitAcks(ctx, t, 10)
			f.restart()
		default:
			c.waitAcks(ctx, t, 10)
			if i%20 == 19 {
				for _, n := range c.nodes {
					n.kill()
				}
				c.restartAll()
				continue
			}
			victim := controllerOf(ctx, t, c.nodes, c.isLive)
			victim.kill()
			c.waitAcks(ctx, t, 10)
			victim.restart()
		}
		if i%10 == 9 {
			c.checkHistory(ctx, t)
		}
	}
	c.waitAcks(ctx, t, 10)
	c.checkHistory(ctx, t)
	c.compareReplicas(ctx, t)
	t.Logf("soak: %d cycles in %v; unavailability per leader kill: median %v of %d", cycles, time.Since(began), median(downs), len(downs))
}

// benchResult is the part of `weir bench produce --json` the replication measurement reads.
type benchResult struct {
	Records       int64   `json:"records"`
	Errors        int64   `json:"errors"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
	Latency       *struct {
		P50 float64 `json:"p50"`
		P99 float64 `json:"p99"`
	} `json:"latency_ms"`
}

// benchProduce runs `weir bench produce --json` against the nodes with extra flags.
func benchProduce(ctx context.Context, t testing.TB, nodes []*node, args ...string) benchResult {
	t.Helper()
	var seeds []string
	for _, n := range nodes {
		seeds = append(seeds, n.kafkaAddr())
	}
	cmd := exec.CommandContext(ctx, weirBin, append([]string{"bench", "produce", "--json", "--interval", "0",
		"--brokers", strings.Join(seeds, ",")}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("weir bench produce %v: %v\n%s%s", args, err, out, stderr.String())
	}
	var r benchResult
	if err := json.Unmarshal(out, &r); err != nil || r.Latency == nil {
		t.Fatalf("weir bench produce %v: %v\n%s", args, err, out)
	}
	return r
}

// TestReplicationThroughput measures, when WEIR_REPL_BENCH=1, acks=all produce throughput on a
// topic with replication factor 3 (min.insync.replicas=2) and on one with replication factor 1 on
// the same three-node cluster in the same run, then the p99 ack latency of the RF=3 topic at half
// its maximum rate. WEIR_REPL_BENCH_DURATION sets each run's length (default 10s).
func TestReplicationThroughput(t *testing.T) {
	if os.Getenv("WEIR_REPL_BENCH") != "1" {
		t.Skip("set WEIR_REPL_BENCH=1 to measure replicated produce throughput")
	}
	dur := "10s"
	if v := os.Getenv("WEIR_REPL_BENCH_DURATION"); v != "" {
		dur = v
	}
	ctx := testContext(t, 10*time.Minute)
	nodes := startCluster(t, 3, 3)
	waitAgree(ctx, t, nodes, hasBrokers(1, 2, 3))
	// The topics are created here and known to every node before bench starts: bench's producers
	// may ask any node.
	adm := nodes[0].admin(t)
	for topic, rf := range map[string]int16{"bench-rf3": 3, "bench-rf1": 1} {
		var cfg map[string]*string
		if rf == 3 {
			cfg = map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}
		}
		resp, err := adm.CreateTopic(ctx, 3, rf, cfg, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
	}
	waitAgree(ctx, t, nodes, func(resp *kmsg.MetadataResponse) bool {
		n := 0
		for _, tp := range resp.Topics {
			for _, p := range tp.Partitions {
				if p.Leader >= 0 && p.ErrorCode == 0 {
					n++
				}
			}
		}
		return n == 6
	})
	common := []string{"--duration", dur, "--size", "1024", "--producers", "3", "--acks", "all"}
	rf3 := benchProduce(ctx, t, nodes, append(common, "--topic", "bench-rf3")...)
	rf1 := benchProduce(ctx, t, nodes, append(common, "--topic", "bench-rf1")...)
	half := benchProduce(ctx, t, nodes, append(common, "--topic", "bench-rf3",
		"--rate", strconv.FormatFloat(rf3.RecordsPerSec/2, 'f', 0, 64))...)
	t.Logf("RF=3 acks=all: %.0f records/s (%.1f MB/s), p50 %.2f ms, p99 %.2f ms, %d errors",
		rf3.RecordsPerSec, rf3.MBPerSec, rf3.Latency.P50, rf3.Latency.P99, rf3.Errors)
	t.Logf("RF=1 acks=all: %.0f records/s (%.1f MB/s), p50 %.2f ms, p99 %.2f ms, %d errors",
		rf1.RecordsPerSec, rf1.MBPerSec, rf1.Latency.P50, rf1.Latency.P99, rf1.Errors)
	t.Logf("RF=3 / RF=1 throughput: %.2f", rf3.RecordsPerSec/rf1.RecordsPerSec)
	t.Logf("RF=3 acks=all at %.0f records/s (half the maximum): %.0f records/s, p50 %.2f ms, p99 %.2f ms",
		rf3.RecordsPerSec/2, half.RecordsPerSec, half.Latency.P50, half.Latency.P99)
}
