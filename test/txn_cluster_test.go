package test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// envInt is the positive integer in the environment variable name, or def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// createTopicConfigs creates an RF=rf topic with configs through the first node, retrying
// retriable errors, and waits until every node sees each of its partitions with a leader.
func createTopicConfigs(ctx context.Context, t testing.TB, nodes []*node, topic string, partitions int32, rf int16, configs map[string]string) {
	t.Helper()
	cl := nodes[0].newClient(t)
	defer cl.Close()
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = &v
	}
	adm := kadm.NewClient(cl)
	for {
		resp, err := adm.CreateTopic(ctx, partitions, rf, cfg, topic)
		if err == nil {
			err = resp.Err
		}
		if err == nil {
			break
		}
		if !kerr.IsRetriable(err) && !errors.Is(err, kerr.RequestTimedOut) || ctx.Err() != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitAgree(ctx, t, nodes, topicLed(topic, partitions))
}

// txnCoordinator asks node n for the transaction coordinator of transactional id (FindCoordinator
// key type 1), retrying retriable errors and connection errors until ctx ends.
func txnCoordinator(ctx context.Context, t testing.TB, n *node, id string) int32 {
	t.Helper()
	return askCoordinator(ctx, t, n, 1, id)
}

// clusterClientOpts are the options of a franz-go client seeded with every node, retrying quickly.
func clusterClientOpts(nodes []*node) []kgo.Opt {
	var seeds []string
	for _, n := range nodes {
		seeds = append(seeds, n.kafkaAddr())
	}
	return []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
	}
}

// copyValue is the pipeline's transformation of a value of A into the value it writes to B.
func copyValue(v []byte) []byte { return append([]byte("copied:"), v...) }

// maxCopyRestarts bounds how often the copy pipeline starts a new session after its session failed.
const maxCopyRestarts = 20

// runCopy is the consume-transform-produce loop: every record polled from A is written to B with its
// key and copyValue(value) in the transaction that commits its offset, until ctx ends. Every fourth
// transaction that wrote records is aborted on purpose (the session then rewinds to the committed
// offsets and copies those records again), so that B always holds aborted records for the
// read_committed reader to skip.
//
// A session whose transaction fails to begin or end is failed for good (franz-go's End returns no
// retriable error): like an application that restarts, the loop closes it and starts a new session
// with the same transactional id, whose InitProducerId fences the old producer. After
// maxCopyRestarts such restarts, or if a session cannot be created, it calls fail.
func runCopy(ctx context.Context, newSession func() (*kgo.GroupTransactSession, error), topicB string, errs *groupReads, stats *copyStats, fail func()) {
	for ctx.Err() == nil {
		sess, err := newSession()
		if err != nil {
			errs.noteErr("copy: new session: %v", err)
			fail()
			return
		}
		copyInSession(ctx, sess, topicB, errs, stats)
		sess.Close()
		if ctx.Err() != nil {
			return
		}
		if stats.restarts.Add(1) > maxCopyRestarts {
			errs.noteErr("copy: more than %d sessions failed", maxCopyRestarts)
			fail()
			return
		}
	}
}

// copyInSession runs runCopy's loop in one session until ctx ends or the session fails.
func copyInSession(ctx context.Context, sess *kgo.GroupTransactSession, topicB string, errs *groupReads, stats *copyStats) {
	for nWrote := 0; ctx.Err() == nil; {
		fs := sess.PollRecords(ctx, 2000)
		if ctx.Err() != nil {
			return
		}
		fs.EachError(func(topic string, p int32, err error) {
			errs.noteErr("copy: fetch %s[%d]: %v", topic, p, err)
		})
		if err := sess.Begin(); err != nil {
			errs.noteErr("copy: begin: %v", err)
			return
		}
		promise := kgo.AbortingFirstErrPromise(sess.Client())
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Topic: topicB, Key: r.Key, Value: copyValue(r.Value)}, promise.Promise())
		})
		err := promise.Err()
		if err != nil && ctx.Err() == nil {
			errs.noteErr("copy: produce: %v", err)
		}
		commit := err == nil
		if fs.NumRecords() > 0 {
			nWrote++
			commit = commit && nWrote%4 != 0
		}
		committed, endErr := sess.End(ctx, kgo.TransactionEndTry(commit))
		if committed {
			stats.committed.Add(1)
		} else {
			stats.aborted.Add(1)
		}
		if endErr != nil {
			if ctx.Err() == nil {
				errs.noteErr("copy: end: %v", endErr)
			}
			return
		}
	}
}

// copyStats counts the pipeline's transactions by how they ended, and its restarted sessions.
type copyStats struct {
	committed, aborted, restarts atomic.Int64
}

func (s *copyStats) String() string {
	return fmt.Sprintf("%d transactions committed, %d aborted, %d sessions restarted",
		s.committed.Load(), s.aborted.Load(), s.restarts.Load())
}

// readN reads topic from its start with a franz-go client of the isolation level until it holds want
// records, then polls once more for up to a second and fails if anything else arrives. It returns the
// records per partition in offset order.
func readN(ctx context.Context, t testing.TB, opts []kgo.Opt, topic string, level kgo.IsolationLevel, want int) map[int32][]*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(append(slices.Clone(opts), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(level),
		kgo.FetchMaxWait(500*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out := map[int32][]*kgo.Record{}
	got := 0
	for got < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reader of %s got %d records, want %d: %v", topic, got, want, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Logf("reader of %s[%d]: %v", topic, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition] = append(out[r.Partition], r)
			got++
		})
	}
	extraCtx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if n := cl.PollFetches(extraCtx).NumRecords(); n > 0 {
		t.Errorf("reader of %s got %d records past the %d expected", topic, n, want)
	}
	return out
}

// valuesByKey lists the values of records per key, in partition offset order.
func valuesByKey(parts map[int32][]*kgo.Record) map[string][]string {
	out := map[string][]string{}
	for _, recs := range parts {
		for _, r := range recs {
			out[string(r.Key)] = append(out[string(r.Key)], string(r.Value))
		}
	}
	return out
}

// TestTxnClusterExactlyOnce: on three nodes, a franz-go GroupTransactSession copies topic A to topic B
// (6 partitions each, RF=3, min.insync.replicas=2) in transactions with the group's offsets, reading A
// read_committed, while a producer fills A; it aborts every fourth transaction on purpose, and starts a
// new session (as a restarted application would) when one fails. Meanwhile the leader of a partition of B and the node
// coordinating the transactional id are killed with SIGKILL in turn, each restarted before the next
// kill. At the end a read_committed reader of B holds every record of A exactly once, in A's order
// per key, and the group has committed A's end offsets. WEIR_TXN_RECORDS (default 20000) and
// WEIR_TXN_KILLS (default 4) make the run longer.
func TestTxnClusterExactlyOnce(t *testing.T) {
	nRecords := envInt("WEIR_TXN_RECORDS", 20000)
	nKills := envInt("WEIR_TXN_KILLS", 4)
	// The pipeline's failure cancels ctx, so that every wait below ends at once and reports it.
	ctx, fail := context.WithCancel(testContext(t, 4*time.Minute+time.Duration(nRecords/100+nKills*10)*time.Second))
	defer fail()
	nodes := startGroupCluster(ctx, t)
	const topicA, topicB, group, txnID = "txn-a", "txn-b", "copy", "copy-txn"
	configs := map[string]string{"min.insync.replicas": "2"}
	createTopicConfigs(ctx, t, nodes, topicA, 6, 3, configs)
	createTopicConfigs(ctx, t, nodes, topicB, 6, 3, configs)
	opts := clusterClientOpts(nodes)

	// The producer fills A with keyed records while the pipeline runs (the values of a key count up),
	// spread over about 8s per kill so that every kill meets a running pipeline.
	prod, err := kgo.NewClient(append(slices.Clone(opts), kgo.DefaultProduceTopic(topicA))...)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	const chunk = 500
	pace := time.Duration(nKills) * 8 * time.Second / time.Duration((nRecords+chunk-1)/chunk)
	produced := make(chan error, 1)
	go func() {
		for from := 0; from < nRecords; from += chunk {
			var recs []*kgo.Record
			for i := from; i < min(from+chunk, nRecords); i++ {
				recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%03d", i%300), Value: strconv.AppendInt(nil, int64(i), 10)})
			}
			if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				produced <- fmt.Errorf("produce records %d..%d to %s: %w", from, from+len(recs)-1, topicA, err)
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(pace):
			}
		}
		produced <- nil
	}()

	errs := newGroupReads()
	stats := &copyStats{}
	defer func() {
		if t.Failed() {
			errs.mu.Lock()
			defer errs.mu.Unlock()
			t.Logf("pipeline: %v; errors:\n%s", stats, strings.Join(errs.errs, "\n"))
		}
	}()
	sessionOpts := append(slices.Clone(opts),
		kgo.TransactionalID(txnID), kgo.TransactionTimeout(20*time.Second),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topicA), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(300*time.Millisecond),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(300*time.Millisecond),
		kgo.RebalanceTimeout(10*time.Second),
		// A coordinator that moves loads its partition for seconds; at the 100ms back-off, franz-go's
		// default of 20 retries would give up after 2s and fail the session.
		kgo.RequestRetries(600))
	newSession := func() (*kgo.GroupTransactSession, error) { return kgo.NewGroupTransactSession(sessionOpts...) }
	copyCtx, stopCopy := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		runCopy(copyCtx, newSession, topicB, errs, stats, fail)
	}()
	defer func() {
		stopCopy()
		wg.Wait()
	}()

	admCl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	waitFirstCommit(ctx, t, adm, group, topicA, stats)

	for i := range nKills {
		var victim *node
		if i%2 == 0 {
			leader := leaderOf(ctx, t, nodes, topicB, int32(i/2%6))
			victim = nodes[leader-1]
			t.Logf("kill %d: node %d, leader of %s[%d]", i+1, victim.id, topicB, i/2%6)
		} else {
			coord := txnCoordinator(ctx, t, nodes[(i+1)%3], txnID)
			victim = nodes[coord-1]
			t.Logf("kill %d: node %d, coordinator of transactional id %s", i+1, victim.id, txnID)
		}
		victim.kill()
		time.Sleep(3 * time.Second)
		victim.restart()
		waitAgree(ctx, t, nodes, func(resp *kmsg.MetadataResponse) bool {
			if !hasBrokers(1, 2, 3)(resp) {
				return false
			}
			for _, p := range topicOf(t, resp, topicB).Partitions {
				if len(p.ISR) < 2 || p.Leader < 0 {
					return false
				}
			}
			return true
		})
	}

	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	committed := waitCommitted(ctx, t, adm, group, topicA, errs)
	t.Logf("all %d records produced and their offsets committed (%v); %d kills; %v", nRecords, committed, nKills, stats)
	stopCopy()
	wg.Wait()

	a := valuesByKey(nodes[0].readAll(ctx, t, topicA))
	nA := 0
	for _, vs := range a {
		nA += len(vs)
	}
	if nA != nRecords {
		t.Fatalf("%s holds %d records, want the %d produced", topicA, nA, nRecords)
	}
	b := valuesByKey(readN(ctx, t, opts, topicB, kgo.ReadCommitted(), nA))
	for key, vs := range a {
		want := make([]string, len(vs))
		for i, v := range vs {
			want[i] = string(copyValue([]byte(v)))
		}
		if got := b[key]; !slices.Equal(got, want) {
			t.Errorf("key %s: %s holds %d values %v, want %d values %v (A's, copied, in order)", key, topicB, len(got), abbrev(got), len(want), abbrev(want))
		}
	}
	for key := range b {
		if _, ok := a[key]; !ok {
			t.Errorf("key %s in %s but not in %s", key, topicB, topicA)
		}
	}
	total := int64(0)
	for _, o := range committed {
		total += o
	}
	if total != int64(nRecords) {
		t.Errorf("group %s committed offsets %v add up to %d, want %d", group, committed, total, nRecords)
	}
}

// waitFirstCommit waits up to 60s (less if the pipeline fails and cancels ctx) until the group has
// committed an offset of topic above 0, so that the first transaction is known to work before anything
// is killed. The test's deferred report prints the pipeline's errors if it fails.
func waitFirstCommit(ctx context.Context, t testing.TB, adm *kadm.Client, group, topic string, stats *copyStats) {
	t.Helper()
	deadline, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var last string
	for {
		committed, err := adm.FetchOffsets(deadline, group)
		if err == nil {
			progress := false
			committed.Each(func(o kadm.OffsetResponse) {
				progress = progress || o.Topic == topic && o.Err == nil && o.At > 0
			})
			if progress {
				return
			}
			last = fmt.Sprintf("committed %v", committed)
		} else if deadline.Err() == nil {
			last = err.Error()
		}
		if deadline.Err() != nil {
			t.Fatalf("group %s committed nothing of %s through a transaction (pipeline: %v; last OffsetFetch: %s)",
				group, topic, stats, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// leaderOf is the leader of topic's partition p, as a running node sees it.
func leaderOf(ctx context.Context, t testing.TB, nodes []*node, topic string, p int32) int32 {
	t.Helper()
	for _, n := range nodes {
		if !n.alive() {
			continue
		}
		for _, part := range topicOf(t, metadata(ctx, t, n), topic).Partitions {
			if part.Partition == p && part.Leader > 0 {
				return part.Leader
			}
		}
	}
	t.Fatalf("no running node names a leader of %s[%d]", topic, p)
	return 0
}

// abbrev shortens a long list of values for a failure message.
func abbrev(vs []string) string {
	if len(vs) <= 8 {
		return fmt.Sprint(vs)
	}
	return fmt.Sprintf("%v ... %v", vs[:4], vs[len(vs)-4:])
}
