package test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
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
)

// The network-fault tests run three nodes, each in its own network namespace of a netLab (all
// controller voters; session timeout 2 s as clusterArgs set it), one topic with three partitions,
// replication factor 3 and min.insync.replicas=2, a franz-go producer offering netRate records a
// second at a fixed rate (unique values, keys that each stay on one partition) and a reader that
// polls every partition from offset 0 throughout. Faults cut links between nodes, never between
// the clients and a node. After the last fault heals and every ISR is full again, the producer
// stops, a final read takes every partition from its start, and checkQueue checks the history.

const (
	netTopic      = "netfault"
	netPartitions = 3
	netRate       = 1500 // records offered per second
	// netSession is clusterArgs' --broker-session-timeout.
	netSession = 2 * time.Second
	// netMinAcked is the share of offered records an acks=all run must have acknowledged where a
	// majority stays connected: the 95%. Records sent during a failover wait in the
	// producer and are acknowledged later, so a run misses it only if records are refused or
	// never answered.
	netMinAcked = 0.95
	// netGroup is the group whose committed offsets the committer moves and reads back.
	netGroup = "netfault-commits"
)

// netArgs are clusterArgs plus a replica lag bound shorter than the faults, so a leader cut from
// one follower only (the bridge) drops it from the ISR during the fault instead of after 30 s, and
// a check for timed-out transactions every second instead of every 10 s.
var netArgs = append(slices.Clone(clusterArgs), "--replica-lag-time-max", "3s",
	"--transaction-abort-timed-out-interval", "1s")

// netCluster is the cluster, its clients and the history they write.
type netCluster struct {
	t      testing.TB
	lab    *netLab
	nodes  []*node
	paused map[int32]bool // held by SIGSTOP
	hist   queueHistory

	prod     *kgo.Client
	stopProd context.CancelFunc
	prodDone chan struct{}
	// The transactional producer of the transactional mode.
	stopTxn  context.CancelFunc
	txnDone  chan struct{}
	txn      bool
	stopRead context.CancelFunc
	readers  sync.WaitGroup
	// The committer commits ever higher offsets for netGroup and reads them back throughout.
	stopCommit context.CancelFunc
	commitDone chan struct{}

	errMu sync.Mutex
	errs  map[string]int // client errors by text, for the log

	lossBound int // acks=1: the most records the scenario may lose; set by the scenario

	trace *netTrace // the producer's trace, with netTraceEnv set; nil otherwise
}

// startNetCluster starts the cluster for scenario s, creates netTopic and starts the reader and a
// producer with the scenario's acks (idempotent with acks=all). With s.ownDisks, each node's data
// directory is a tmpfs of its own (netDiskSize), so that one node's disk can be filled. With s.txn,
// a transactional producer and a read_committed reader run too (netfault_txn_test.go).
func startNetCluster(ctx context.Context, t testing.TB, s netScenario) *netCluster {
	t.Helper()
	acks, txn := s.acks, s.txn
	c := &netCluster{t: t, lab: newNetLab(t, 3), paused: map[int32]bool{}, errs: map[string]int{}, txn: txn}
	args := append(slices.Clone(netArgs), s.args...)
	var voters []string
	for i := 1; i <= 3; i++ {
		voters = append(voters, fmt.Sprintf("%d@%s", i, c.lab.ports(i).Controller))
	}
	for i := 1; i <= 3; i++ {
		var dir string
		if s.ownDisks {
			dir = mountDisk(t, netDiskSize)
		}
		c.nodes = append(c.nodes, newNode(t, nodeOptions{NodeID: int32(i), Ports: c.lab.ports(i),
			Voters: strings.Join(voters, ","), Args: args, Wrap: c.lab.wrap(i), DataDir: dir}))
	}
	c.trace = newNetTrace(t, c.nodes)
	for _, n := range c.nodes {
		n.launch()
	}
	for _, n := range c.nodes {
		n.waitHealthy()
	}
	waitAgree(ctx, t, c.nodes, hasBrokers(1, 2, 3))
	adm := kadm.NewClient(c.nodes[0].client(t))
	for {
		resp, err := adm.CreateTopic(ctx, netPartitions, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, netTopic)
		if err == nil {
			err = resp.Err
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("create %s: %v", netTopic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.waitSettled(ctx)
	readCtx, stopRead := context.WithCancel(context.Background())
	c.stopRead = stopRead
	c.startReader(readCtx, "live", kgo.ReadUncommitted())
	if txn {
		c.startReader(readCtx, "live-committed", kgo.ReadCommitted())
	}
	c.startCommitter()
	c.startProducer(acks)
	if txn {
		c.startTxnProducer()
	}
	t.Cleanup(c.stopClients)
	return c
}

// clientOpts are the options every client of the cluster shares: every node a seed, and short
// request timeouts, so that a request to a node that does not answer is given up after about 4 s
// instead of kgo's default 10 s + 30 s.
func (c *netCluster) clientOpts() []kgo.Opt {
	var seeds []string
	for _, n := range c.nodes {
		seeds = append(seeds, n.kafkaAddr())
	}
	return []kgo.Opt{kgo.SeedBrokers(seeds...),
		kgo.ProduceRequestTimeout(2 * time.Second), kgo.RequestTimeoutOverhead(2 * time.Second),
		kgo.MetadataMinAge(100 * time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond })}
}

// noteErr counts a client error.
func (c *netCluster) noteErr(what string, err error) {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	c.errs[what+": "+err.Error()]++
}

// startProducer offers netRate records a second, on a schedule that does not wait for answers:
// the producer buffers up to a minute of records, so a record is refused (sendFailed) only when
// that is full.
func (c *netCluster) startProducer(acks kgo.Acks) {
	opts := append(c.clientOpts(), kgo.RequiredAcks(acks), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(60*netRate))
	if acks != kgo.AllISRAcks() {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	if c.trace != nil {
		opts = append(opts, c.trace.opts()...)
	}
	prod, err := kgo.NewClient(opts...)
	if err != nil {
		c.t.Fatalf("producer: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.prod, c.stopProd, c.prodDone = prod, cancel, make(chan struct{})
	go func() {
		defer close(c.prodDone)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		began, offered := time.Now(), 0
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for due := int(time.Since(began).Seconds() * netRate); offered < due; offered++ {
				c.offer(offered)
			}
		}
	}()
}

// offer hands record i to the producer: partition i mod 3, one of 16 keys of that partition, a
// unique value.
func (c *netCluster) offer(i int) {
	p := int32(i % netPartitions)
	key := fmt.Sprintf("p%d-k%02d", p, i/netPartitions%16)
	value := fmt.Sprintf("v%08d", i)
	seq := c.hist.send(key, value)
	r := &kgo.Record{Topic: netTopic, Partition: p, Key: []byte(key), Value: []byte(value)}
	c.prod.TryProduce(context.Background(), r, func(r *kgo.Record, err error) {
		switch {
		case err == nil:
			c.hist.complete(seq, sendAcked, r.Partition, r.Offset)
		case errors.Is(err, kgo.ErrMaxBuffered):
			c.hist.complete(seq, sendFailed, 0, 0)
		default:
			c.noteErr("produce", err)
			c.hist.complete(seq, sendUnknown, 0, 0)
		}
	})
}

// startReader starts a reader named name that polls every partition from offset 0 at the
// isolation level until ctx ends.
func (c *netCluster) startReader(ctx context.Context, name string, isolation kgo.IsolationLevel) {
	parts := map[int32]kgo.Offset{}
	for p := range int32(netPartitions) {
		parts[p] = kgo.NewOffset().At(0)
	}
	cl, err := kgo.NewClient(append(c.clientOpts(), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{netTopic: parts}),
		kgo.FetchMaxWait(500*time.Millisecond), kgo.FetchIsolationLevel(isolation))...)
	if err != nil {
		c.t.Fatalf("reader %s: %v", name, err)
	}
	committed := isolation == kgo.ReadCommitted()
	c.readers.Add(1)
	go func() {
		defer c.readers.Done()
		defer cl.Close()
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachError(func(_ string, _ int32, err error) {
				if ctx.Err() == nil {
					c.noteErr("fetch", err)
				}
			})
			var ops []pollOp
			fs.EachRecord(func(r *kgo.Record) {
				ops = append(ops, pollOp{reader: name, partition: r.Partition, offset: r.Offset, value: string(r.Value), committed: committed})
			})
			c.hist.poll(ops...)
		}
	}()
}

// startCommitter commits, every 50 ms, the next offset (1, 2, ...) of every partition for netGroup
// (a group without members, as a consumer that manages its own assignment commits), and reads the
// group's committed offsets back every 100 ms, all into the history, until stopped.
func (c *netCluster) startCommitter() {
	cl, err := kgo.NewClient(c.clientOpts()...)
	if err != nil {
		c.t.Fatalf("committer: %v", err)
	}
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithCancel(context.Background())
	c.stopCommit, c.commitDone = cancel, make(chan struct{})
	go func() {
		defer close(c.commitDone)
		defer cl.Close()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for round := int64(1); ctx.Err() == nil; round++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var offs kadm.Offsets
			for p := range int32(netPartitions) {
				offs.Add(kadm.Offset{Topic: netTopic, Partition: p, At: round, LeaderEpoch: -1})
			}
			resp, err := adm.CommitOffsets(ctx, netGroup, offs)
			at := time.Now()
			if err != nil {
				if ctx.Err() == nil {
					c.noteErr("commit", err)
				}
			} else {
				var ops []commitOp
				resp.Each(func(o kadm.OffsetResponse) {
					ops = append(ops, commitOp{partition: o.Partition, offset: o.At, acked: o.Err == nil, at: at})
					if o.Err != nil {
						c.noteErr("commit", o.Err)
					}
				})
				c.hist.commit(ops...)
			}
			if round%2 == 0 {
				c.readCommits(ctx, adm)
			}
		}
	}()
}

// readCommits reads netGroup's committed offsets into the history.
func (c *netCluster) readCommits(ctx context.Context, adm *kadm.Client) {
	sent := time.Now()
	resp, err := adm.FetchOffsets(ctx, netGroup)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		if ctx.Err() == nil {
			c.noteErr("fetch offsets", err)
		}
		return
	}
	var ops []fetchOp
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic == netTopic {
			ops = append(ops, fetchOp{partition: o.Partition, offset: o.At, sent: sent})
		}
	})
	c.hist.fetched(ops...)
}

// stopProducer stops offering, waits up to 30 s for the answers to what was offered, and closes
// the producer (whatever is still unanswered is then indeterminate).
func (c *netCluster) stopProducer() {
	if c.stopProd == nil {
		return
	}
	c.stopProd()
	<-c.prodDone
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.prod.Flush(ctx); err != nil {
		c.t.Logf("producer flush: %v", err)
	}
	c.prod.Close()
	c.stopProd = nil
}

// stopClients stops the producers, the readers and the committer.
func (c *netCluster) stopClients() {
	c.stopProducer()
	c.stopTxnProducer()
	if c.stopCommit != nil {
		c.stopCommit()
		<-c.commitDone
		c.stopCommit = nil
	}
	if c.stopRead != nil {
		c.stopRead()
		c.readers.Wait()
		c.stopRead = nil
	}
}

// live reports whether a node runs and is not paused.
func (c *netCluster) live(n *node) bool { return n.alive() && !c.paused[n.id] }

// partitionOf returns partition p of netTopic from resp.
func partitionOf(resp *kmsg.MetadataResponse, p int32) (kmsg.MetadataResponseTopicPartition, bool) {
	for _, tp := range resp.Topics {
		if tp.Topic != nil && *tp.Topic == netTopic {
			for _, pp := range tp.Partitions {
				if pp.Partition == p {
					return pp, true
				}
			}
		}
	}
	return kmsg.MetadataResponseTopicPartition{}, false
}

// leaderOf returns the node leading partition p and its own view of p: the live nodes are asked,
// the answer with the highest leader epoch wins, and the node it names must be live and name
// itself leader at that epoch (a cut-off node may still name itself at an older epoch).
func (c *netCluster) leaderOf(ctx context.Context, p int32) (*node, kmsg.MetadataResponseTopicPartition) {
	c.t.Helper()
	for ctx.Err() == nil {
		best := kmsg.MetadataResponseTopicPartition{LeaderEpoch: -1}
		for _, n := range c.nodes {
			if !c.live(n) {
				continue
			}
			if pp, ok := partitionOf(metadata(ctx, c.t, n), p); ok && pp.ErrorCode == 0 && pp.Leader > 0 && pp.LeaderEpoch > best.LeaderEpoch {
				best = pp
			}
		}
		if best.LeaderEpoch >= 0 && int(best.Leader) <= len(c.nodes) {
			l := c.nodes[best.Leader-1]
			if c.live(l) {
				if pp, ok := partitionOf(metadata(ctx, c.t, l), p); ok && pp.Leader == l.id && pp.LeaderEpoch == best.LeaderEpoch {
					return l, pp
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("no live leader for %s-%d: %v", netTopic, p, ctx.Err())
	return nil, kmsg.MetadataResponseTopicPartition{}
}

// waitSettled waits until every partition's leader has all three replicas in its ISR.
func (c *netCluster) waitSettled(ctx context.Context) {
	c.t.Helper()
	for p := range int32(netPartitions) {
		for {
			if _, pp := c.leaderOf(ctx, p); len(pp.ISR) == len(c.nodes) {
				break
			}
			if ctx.Err() != nil {
				c.t.Fatalf("ISR of %s-%d never full: %v", netTopic, p, ctx.Err())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// fault runs inject, records its window in the history, and waits until the cluster has
// settled again and every partition has acknowledged a record since, so that no gap between
// acknowledgements spans two faults.
func (c *netCluster) fault(ctx context.Context, name string, inject func()) {
	c.t.Helper()
	start := time.Now()
	if c.trace != nil {
		c.trace.printf("fault begins: %s", name)
	}
	inject()
	end := time.Now()
	if c.trace != nil {
		c.trace.printf("fault ends: %s", name)
	}
	c.hist.fault(name, start, end)
	c.waitSettled(ctx)
	settled := time.Now()
	for !c.hist.ackedSince(settled, netPartitions) {
		if ctx.Err() != nil {
			c.t.Fatalf("%s: no acknowledgement on every partition after it settled: %v", name, ctx.Err())
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Logf("%s: %v, settled %v after healing", name, end.Sub(start).Round(time.Millisecond), settled.Sub(end).Round(time.Millisecond))
}

// cutFor isolates or cuts with cut, waits d, and heals every link.
func (c *netCluster) cutFor(d time.Duration, cut func()) func() {
	return func() {
		cut()
		time.Sleep(d)
		c.lab.healAll()
	}
}

// signal sends sig to a running node; SIGSTOP and SIGCONT are tracked for live.
func (c *netCluster) signal(n *node, sig syscall.Signal) {
	c.t.Helper()
	if err := n.proc.cmd.Process.Signal(sig); err != nil {
		c.t.Fatalf("node %d: %v: %v", n.id, sig, err)
	}
	c.paused[n.id] = sig == syscall.SIGSTOP
}

// fenceLine is how a controller leader logs a broker it fenced for a lapsed session.
var fenceLine = regexp.MustCompile(`msg="controller: fenced broker after session timeout" node_id=(\d+)`)

// fences counts, by broker, the fences for lapsed sessions the nodes have logged so far.
func (c *netCluster) fences() map[int32]int {
	out := map[int32]int{}
	for _, n := range c.nodes {
		for _, m := range fenceLine.FindAllStringSubmatch(n.output.String(), -1) {
			id, _ := strconv.Atoi(m[1])
			out[int32(id)]++
		}
	}
	return out
}

// ledBy counts the partitions n leads.
func (c *netCluster) ledBy(ctx context.Context, n *node) int {
	led := 0
	for p := range int32(netPartitions) {
		if l, _ := c.leaderOf(ctx, p); l == n {
			led++
		}
	}
	return led
}

// finish lets the producers run 2 s more on the healed cluster, stops them, reads every partition
// back from its start (in the transactional mode, once every transaction has ended, and with
// read_committed too) and checks the history.
func (c *netCluster) finish(ctx context.Context) *queueReport {
	c.t.Helper()
	time.Sleep(2 * time.Second)
	c.stopProducer()
	c.stopTxnProducer()
	c.stopCommit()
	<-c.commitDone
	c.stopCommit = nil
	adm := c.nodes[0].admin(c.t)
	c.readCommits(ctx, adm)
	if c.txn {
		c.waitTxnsEnded(ctx, adm)
		c.finalCommittedRead(ctx)
	}
	var ops []pollOp
	for p, recs := range c.nodes[0].readAll(ctx, c.t, netTopic) {
		for _, r := range recs {
			ops = append(ops, pollOp{reader: "final", partition: p, offset: r.Offset, value: string(r.Value)})
		}
	}
	c.stopClients()
	c.hist.poll(ops...)
	r := checkQueue(&c.hist)
	c.errMu.Lock()
	defer c.errMu.Unlock()
	for _, e := range slices.Sorted(maps.Keys(c.errs)) {
		c.t.Logf("client error x%d: %s", c.errs[e], e)
	}
	return r
}

// netScenario is one fault scenario: run injects its faults on a started cluster.
type netScenario struct {
	name string
	acks kgo.Acks
	run  func(ctx context.Context, c *netCluster)
	// ownDisks gives every node a tmpfs of its own as its data directory.
	ownDisks bool
	// txn runs a transactional producer and a read_committed reader alongside (netfault_txn_test.go).
	txn bool
	// args are node flags added to netArgs.
	args []string
}

// netResult is one run of a scenario, for the log and the soak's report.
type netResult struct {
	scenario  string
	acks      kgo.Acks
	report    *queueReport // nil when the run failed before its check
	lossBound int
	took      time.Duration
	failed    bool
}

// netScenarios are the scenarios, in the order the soak cycles them.
var netScenarios = []netScenario{
	{"isolate-leader", kgo.AllISRAcks(), isolateLeader, false, true, nil},
	{"isolate-leader-acks1", kgo.LeaderAck(), isolateLeader, false, false, nil},
	{"split", kgo.AllISRAcks(), split, false, true, nil},
	{"bridge", kgo.AllISRAcks(), bridge, false, false, nil},
	{"flap-pause-kill", kgo.AllISRAcks(), flapPauseKill, false, false, nil},
	{"full-disk", kgo.AllISRAcks(), fullDisk, true, false, nil},
	{"lossy-one-way", kgo.AllISRAcks(), lossyOneWay, false, false, nil},
	{"slow-links", kgo.AllISRAcks(), slowLinks, false, false, nil},
	{"isr-change-fails", kgo.AllISRAcks(), isrChangeFails, false, false, nil},
	// Long form only (TestNetFaultSlowerLinks): 400 ms round trips need a Raft timeout of four.
	{"slower-links", kgo.AllISRAcks(), slowerLinks, false, false, []string{"--controller-raft-timeout", "2s"}},
	// Long form only (TestNetFaultAcks1): the acks=1 exposure of the splits and the bridge.
	{"split-acks1", kgo.LeaderAck(), split, false, false, nil},
	{"bridge-acks1", kgo.LeaderAck(), bridge, false, false, nil},
}

// netStallBound is, by scenario, the longest a partition may go without an acknowledgement during
// any of its faults (each 10 s). In the bridge and the one-way fault the leader of partition 0 is
// cut from a peer while the clients still reach it. When the peer is the controller leader, the
// leader's lease ends a session timeout in, its waiting acks=all produces are answered
// NOT_LEADER_OR_FOLLOWER then, and the producer finds the leader the controller elected meanwhile
// (about 2 s); when the peer is a follower, it leaves the ISR after --replica-lag-time-max (3 s,
// up to 4.5 s measured). A leader that kept its producers waiting for its ISR until the link healed
// (the stalls of issue 19) went the whole fault; 8 s tells the two apart with room for a loaded
// machine.
var netStallBound = map[string]time.Duration{
	"bridge":        8 * time.Second,
	"lossy-one-way": 8 * time.Second,
}

// runNetScenario runs one scenario on a fresh cluster and checks its targets: with acks=all no
// anomaly at all, at least netMinAcked of the offered records acknowledged and no partition longer
// without an acknowledgement than its netStallBound; with acks=1 no more records lost than the
// scenario's bound.
func runNetScenario(t *testing.T, s netScenario) netResult {
	ctx := testContext(t, 4*time.Minute)
	began := time.Now()
	c := startNetCluster(ctx, t, s)
	time.Sleep(3 * time.Second)
	s.run(ctx, c)
	r := c.finish(ctx)
	res := netResult{scenario: s.name, acks: s.acks, report: r, lossBound: c.lossBound, took: time.Since(began)}
	t.Logf("%s (acks=%s): %s", s.name, acksName(s.acks), r)
	if s.acks == kgo.AllISRAcks() {
		if r.total() != 0 {
			t.Errorf("%d anomalies with acks=all", r.total())
		}
		if r.ackedShare() < netMinAcked {
			t.Errorf("%.2f%% of offered records acknowledged, want at least %.0f%%", 100*r.ackedShare(), 100*netMinAcked)
		}
		if bound, ok := netStallBound[s.name]; ok {
			for _, u := range r.unavailable {
				if u.gap > bound {
					t.Errorf("partition %d went %v without an acknowledgement during %s, want at most %v",
						u.partition, u.gap.Round(time.Millisecond), u.fault, bound)
				}
			}
		}
		return res
	}
	lost := r.anomalies[anomalyLost]
	t.Logf("acks=1: %d acknowledged records lost, bound %d", lost, c.lossBound)
	if lost > c.lossBound {
		t.Errorf("acks=1 lost %d acknowledged records, more than the bound %d (the cut-off leader's share of %d records/s for the session timeout %v + 1 s)",
			lost, c.lossBound, netRate, netSession)
	}
	return res
}

func acksName(a kgo.Acks) string {
	if a == kgo.AllISRAcks() {
		return "all"
	}
	return "1"
}

// allowLoss adds to the acks=1 bound what a fault that may cut n off from the controller can lose:
// n's share of the rate for the session timeout plus one second, after which n must have stepped
// down. It returns n's share of the partitions.
func (c *netCluster) allowLoss(ctx context.Context, n *node) float64 {
	share := float64(c.ledBy(ctx, n)) / netPartitions
	c.lossBound += int(share * netRate * (netSession + time.Second).Seconds())
	return share
}

// isolateLeader cuts the node leading partition 0 from its two peers for 12 s; clients still
// reach it. The acks=1 bound is its share of the rate for the session timeout plus one second.
func isolateLeader(ctx context.Context, c *netCluster) {
	l, _ := c.leaderOf(ctx, 0)
	share := c.allowLoss(ctx, l)
	c.fault(ctx, fmt.Sprintf("isolate node %d (leads partition 0 and %.0f%% of the partitions) 12s", l.id, 100*share),
		c.cutFor(12*time.Second, func() { c.lab.isolate(int(l.id)) }))
}

// split cuts the cluster 2|1 twice for 8 s: first with the controller leader alone on the
// minority side, then with it on the majority side. In the first, the majority's new controller
// leader must not fence the majority's brokers: their heartbeats reach it before the sessions it
// starts on taking over end.
func split(ctx context.Context, c *netCluster) {
	ctl := controllerOf(ctx, c.t, c.nodes, c.live)
	fenced := c.fences()
	c.allowLoss(ctx, ctl)
	c.fault(ctx, fmt.Sprintf("split 2|1, controller leader (node %d) in the minority, 8s", ctl.id),
		c.cutFor(8*time.Second, func() { c.lab.isolate(int(ctl.id)) }))
	for id, n := range c.fences() {
		if id != ctl.id && n > fenced[id] {
			c.t.Errorf("node %d, on the majority side, was fenced %d times during the split", id, n-fenced[id])
		}
	}
	ctl = controllerOf(ctx, c.t, c.nodes, c.live)
	minority := c.nodes[int(ctl.id)%len(c.nodes)]
	c.allowLoss(ctx, minority)
	c.fault(ctx, fmt.Sprintf("split 2|1, controller leader (node %d) in the majority, node %d cut off, 8s", ctl.id, minority.id),
		c.cutFor(8*time.Second, func() { c.lab.isolate(int(minority.id)) }))
}

// bridge cuts the leader of partition 0 from one peer for 10 s (the controller leader when that
// is another node), so the third node sees both halves and the halves do not see each other.
func bridge(ctx context.Context, c *netCluster) {
	l, _ := c.leaderOf(ctx, 0)
	other := controllerOf(ctx, c.t, c.nodes, c.live)
	if other == l {
		other = c.nodes[int(l.id)%len(c.nodes)]
	}
	c.allowLoss(ctx, l)
	c.fault(ctx, fmt.Sprintf("bridge: node %d (leads partition 0) and node %d cut apart, the third sees both, 10s", l.id, other.id),
		c.cutFor(10*time.Second, func() { c.lab.cutLink(int(l.id), int(other.id)) }))
}

// flapPauseKill isolates a random node for 1–2 s, heals for 1–2 s, for 10 s; then stops the
// leader of partition 0 with SIGSTOP for 4 s (past its session) and resumes it; then kills the
// controller leader with -9 and restarts it after 2 s.
func flapPauseKill(ctx context.Context, c *netCluster) {
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("WEIR_NETFAULT_SEED"), 10, 64); err == nil {
		seed = v
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	c.fault(ctx, fmt.Sprintf("flapping: a random node cut off 1-2s, healed 1-2s, for 10s (WEIR_NETFAULT_SEED=%d replays the cuts)", seed), func() {
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
			c.lab.isolate(1 + rng.IntN(len(c.nodes)))
			time.Sleep(time.Second + time.Duration(rng.Int64N(int64(time.Second))))
			c.lab.healAll()
			time.Sleep(time.Second + time.Duration(rng.Int64N(int64(time.Second))))
		}
	})
	l, _ := c.leaderOf(ctx, 0)
	c.fault(ctx, fmt.Sprintf("SIGSTOP node %d (leads partition 0) 4s, SIGCONT", l.id), func() {
		c.signal(l, syscall.SIGSTOP)
		time.Sleep(4 * time.Second)
		c.signal(l, syscall.SIGCONT)
	})
	ctl := controllerOf(ctx, c.t, c.nodes, c.live)
	c.fault(ctx, fmt.Sprintf("kill -9 node %d (controller leader), restart after 2s", ctl.id), func() {
		ctl.kill()
		time.Sleep(2 * time.Second)
		ctl.restart()
	})
}

// fullDisk fills the disk of the node leading partition 0 (its own tmpfs) while it serves. A
// write that fails takes its log offline, and the node fences itself and exits non-zero
// (docs/storage.md, "A failed data directory"); its partitions move to the other two. Once the
// node has exited, the disk is emptied and the node restarted.
func fullDisk(ctx context.Context, c *netCluster) {
	l, _ := c.leaderOf(ctx, 0)
	c.fault(ctx, fmt.Sprintf("fill the disk of node %d (leads partition 0)", l.id), func() {
		filler := filepath.Join(l.dataDir, "filler")
		fillDisk(c.t, filler)
		err := l.waitExit(30 * time.Second)
		if err == nil {
			c.t.Errorf("node %d exited with status 0 after its disk filled, want non-zero", l.id)
		}
		if !strings.Contains(l.output.String(), "weir node stopped after its data directory failed") {
			c.t.Errorf("node %d did not log that it stopped for its failed data directory", l.id)
		}
		c.t.Logf("node %d exited after its disk filled: %v", l.id, err)
		if err := os.Remove(filler); err != nil {
			c.t.Fatalf("empty the disk: %v", err)
		}
		l.restart()
	})
}

// lossyOneWay drops 20% of the packets between every two nodes for 10 s (TCP retransmits, so
// requests slow down and some time out), then, for 10 s, every packet the leader of partition 0
// sends to one of its followers, while that follower's packets still reach it: the follower's
// fetches arrive and their answers never do, so it must leave the ISR while the leader keeps serving.
func lossyOneWay(ctx context.Context, c *netCluster) {
	requireTool(c.t, "iptables")
	c.fault(ctx, "20% packet loss between every two nodes, 10s", func() {
		c.lab.lossy(0.2)
		time.Sleep(10 * time.Second)
		c.lab.healFilters()
	})
	l, _ := c.leaderOf(ctx, 0)
	f := c.nodes[int(l.id)%len(c.nodes)]
	c.fault(ctx, fmt.Sprintf("one way: node %d (leads partition 0) cannot send to node %d, 10s", l.id, f.id), func() {
		c.lab.dropOneWay(int(l.id), int(f.id))
		time.Sleep(10 * time.Second)
		c.lab.healFilters()
	})
}

// slowLinks delays every packet between nodes by 100 ms in each direction, 200 ms of latency per
// round trip (replication, Raft and the controller RPC all slow down), for 15 s.
func slowLinks(ctx context.Context, c *netCluster) {
	requireTool(c.t, "iptables")
	c.fault(ctx, "200ms round trips between every two nodes (100ms each way), 15s", func() {
		c.lab.delay(100 * time.Millisecond)
		time.Sleep(15 * time.Second)
		c.lab.healFilters()
	})
}

// slowerLinks is slowLinks at 400 ms round trips (200 ms each way).
func slowerLinks(ctx context.Context, c *netCluster) {
	requireTool(c.t, "iptables")
	c.fault(ctx, "400ms round trips between every two nodes (200ms each way), 15s", func() {
		c.lab.delay(200 * time.Millisecond)
		time.Sleep(15 * time.Second)
		c.lab.healFilters()
	})
}

// TestNetFaultIsolateLeader: scenario (a) of issue 19 with an idempotent acks=all producer, and
// transactions read with read_committed.
func TestNetFaultIsolateLeader(t *testing.T) { runNetScenario(t, netScenarios[0]) }

// TestNetFaultIsolateLeaderAcks1: scenario (a) with acks=1, measuring the records lost.
func TestNetFaultIsolateLeaderAcks1(t *testing.T) { runNetScenario(t, netScenarios[1]) }

// TestNetFaultSplit: 2|1 splits with the controller leader on either side, with transactions.
func TestNetFaultSplit(t *testing.T) { runNetScenario(t, netScenarios[2]) }

// TestNetFaultBridge: one node sees both halves.
func TestNetFaultBridge(t *testing.T) { runNetScenario(t, netScenarios[3]) }

// TestNetFaultFlapPauseKill: flapping links, then SIGSTOP/SIGCONT and kill -9.
func TestNetFaultFlapPauseKill(t *testing.T) { runNetScenario(t, netScenarios[4]) }

// TestNetFaultFullDisk: the disk of a leader fills up.
func TestNetFaultFullDisk(t *testing.T) { runNetScenario(t, netScenarios[5]) }

// TestNetFaultLossyOneWay: packet loss between nodes, then a one-way fault.
func TestNetFaultLossyOneWay(t *testing.T) { runNetScenario(t, netScenarios[6]) }

// TestNetFaultSlowLinks: 200 ms of latency between nodes.
func TestNetFaultSlowLinks(t *testing.T) { runNetScenario(t, netScenarios[7]) }

// TestNetFaultISRChangeFails: a leader whose followers fetch but whose ISR changes fail.
func TestNetFaultISRChangeFails(t *testing.T) { runNetScenario(t, netScenarios[8]) }

// TestNetFaultSlowerLinks: 400 ms of latency between nodes with --controller-raft-timeout 2s, in
// the long form only (WEIR_NETFAULT_SOAK=1).
func TestNetFaultSlowerLinks(t *testing.T) {
	if os.Getenv("WEIR_NETFAULT_SOAK") != "1" {
		t.Skip("set WEIR_NETFAULT_SOAK=1 for the long form's 400 ms round trips")
	}
	runNetScenario(t, netScenarios[9])
}

// TestNetFaultAcks1: the splits and the bridge with acks=1, each within its loss bound, in the
// long form only (WEIR_NETFAULT_SOAK=1).
func TestNetFaultAcks1(t *testing.T) {
	if os.Getenv("WEIR_NETFAULT_SOAK") != "1" {
		t.Skip("set WEIR_NETFAULT_SOAK=1 for the long form's acks=1 splits and bridge")
	}
	for _, s := range netScenarios[10:12] {
		t.Run(s.name, func(t *testing.T) { runNetScenario(t, s) })
	}
}

// TestNetFaultSoak cycles netScenarios, each on a fresh cluster, for WEIR_NETFAULT_SOAK_DURATION
// (default 1h) when WEIR_NETFAULT_SOAK=1, starting no scenario in the last 45 s, and writes a
// report to WEIR_NETFAULT_REPORT (default a file in the temporary directory; the path is logged).
func TestNetFaultSoak(t *testing.T) {
	if os.Getenv("WEIR_NETFAULT_SOAK") != "1" {
		t.Skip("set WEIR_NETFAULT_SOAK=1 (and WEIR_NETFAULT_SOAK_DURATION, default 1h) for the network-fault soak")
	}
	dur := time.Hour
	if v := os.Getenv("WEIR_NETFAULT_SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("WEIR_NETFAULT_SOAK_DURATION: %v", err)
		}
		dur = d
	}
	path := os.Getenv("WEIR_NETFAULT_REPORT")
	if path == "" {
		path = filepath.Join(os.TempDir(), "weir-netfault-soak-"+time.Now().Format("20060102-150405")+".md")
	}
	began := time.Now()
	var results []netResult
	defer func() {
		if err := os.WriteFile(path, []byte(soakReport(began, results)), 0o644); err != nil {
			t.Errorf("write the report: %v", err)
		}
		t.Logf("report: %s", path)
	}()
	for i := 0; time.Until(began.Add(dur)) > 45*time.Second; i++ {
		s := netScenarios[i%len(netScenarios)]
		res := netResult{scenario: s.name, acks: s.acks}
		ok := t.Run(fmt.Sprintf("%03d-%s", i+1, s.name), func(t *testing.T) { res = runNetScenario(t, s) })
		res.failed = !ok
		results = append(results, res)
	}
}

// soakReport is the soak's report: one row per run with its records and anomalies, then the
// unavailability of every fault.
func soakReport(began time.Time, results []netResult) string {
	var b strings.Builder
	failed, records, anomalies := 0, 0, 0
	for _, r := range results {
		if r.failed {
			failed++
		}
		if r.report != nil && r.acks == kgo.AllISRAcks() {
			records += r.report.acked
			anomalies += r.report.total()
		}
	}
	fmt.Fprintf(&b, "# weir network-fault soak\n\nstarted %s, ran %v: %d scenario runs, %d failed; acks=all: %d records acknowledged, %d anomalies\n\n",
		began.Format(time.RFC3339), time.Since(began).Round(time.Second), len(results), failed, records, anomalies)
	b.WriteString("| run | scenario | acks | offered | acknowledged | " + strings.Join(anomalyKinds, " | ") + " | acks=1 loss bound | took | result |\n")
	b.WriteString("|---|---|---|---:|---:|" + strings.Repeat("---:|", len(anomalyKinds)) + "---:|---:|---|\n")
	for i, r := range results {
		verdict := "pass"
		if r.failed {
			verdict = "FAIL"
		}
		if r.report == nil {
			fmt.Fprintf(&b, "| %d | %s | %s | | |%s | | | %s |\n", i+1, r.scenario, acksName(r.acks), strings.Repeat(" |", len(anomalyKinds)), verdict)
			continue
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %d | %d (%.2f%%) |", i+1, r.scenario, acksName(r.acks), r.report.offered, r.report.acked, 100*r.report.ackedShare())
		for _, k := range anomalyKinds {
			fmt.Fprintf(&b, " %d |", r.report.anomalies[k])
		}
		bound := ""
		if r.acks != kgo.AllISRAcks() {
			bound = strconv.Itoa(r.lossBound)
		}
		fmt.Fprintf(&b, " %s | %v | %s |\n", bound, r.took.Round(time.Second), verdict)
	}
	b.WriteString("\n## Unavailability per fault\n\nThe longest time a partition went without an acknowledged write, over the gaps that overlap the fault.\n\n")
	for i, r := range results {
		if r.report == nil {
			continue
		}
		for _, u := range r.report.unavailable {
			fmt.Fprintf(&b, "- run %d, %s: %v (partition %d)\n", i+1, u.fault, u.gap.Round(time.Millisecond), u.partition)
		}
	}
	return b.String()
}
