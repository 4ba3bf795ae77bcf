package server_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/server"
	"github.com/weir-mq/weir/internal/txn"
)

// jumpClock is the system clock with a wall clock that can be stepped, as `date -s` steps a
// machine's: Now's wall reading moves by the offset and its monotonic reading does not, and timers
// run on the monotonic clock, as Go's do. Go reads the two from different kernel clocks
// (CLOCK_REALTIME and CLOCK_MONOTONIC), so this is what a step of the machine's clock does to a node.
type jumpClock struct{ offset atomic.Int64 }

func (c *jumpClock) Now() time.Time { return stepWall(time.Now(), time.Duration(c.offset.Load())) }

func (c *jumpClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

func (c *jumpClock) jump(to time.Duration) { c.offset.Store(int64(to)) }

// timeRepr is time.Time's layout: a wall field, then ext, which holds the monotonic reading when
// the wall field's top bit says there is one, then the location.
type timeRepr struct {
	wall uint64
	ext  int64
	loc  *time.Location
}

// stepWall returns t with its wall reading moved by d and its monotonic reading unchanged. The
// standard library moves both or drops the monotonic one, so the monotonic reading is copied back
// through time.Time's layout; checkStepWall proves that this worked on the Go it runs on.
func stepWall(t time.Time, d time.Duration) time.Time {
	u := t.Add(d)
	(*timeRepr)(unsafe.Pointer(&u)).ext = (*timeRepr)(unsafe.Pointer(&t)).ext
	return u
}

// checkStepWall fails the test unless stepWall moves the wall reading alone.
func checkStepWall(t *testing.T) {
	t.Helper()
	now := time.Now()
	for _, d := range []time.Duration{time.Hour, -time.Hour} {
		j := stepWall(now, d)
		if j.Sub(now) != 0 || now.Sub(j) != 0 || j.Round(0).Sub(now.Round(0)) != d || j.UnixMilli()-now.UnixMilli() != d.Milliseconds() {
			t.Fatalf("stepWall(%v, %v) = %v: the monotonic reading moved or the wall one did not", now, d, j)
		}
	}
}

// startJumpCluster starts three voters, node 2 on clock; sessions are short so that a lease or
// session timed on the wall clock would end at once at a jump.
func startJumpCluster(ctx context.Context, t *testing.T, clock server.Clock) []*server.Node {
	t.Helper()
	return startVoters(ctx, t, func(i int, cfg server.Config) server.Config {
		cfg.BrokerHeartbeatInterval = 100 * time.Millisecond
		cfg.BrokerSessionTimeout = time.Second
		cfg.LeaderRebalanceInterval = -1
		cfg.Groups = group.CoordinatorConfig{OffsetsPartitions: 3, SessionTimeoutMin: 500 * time.Millisecond}
		cfg.Txn = txn.Config{StatePartitions: 3, AbortInterval: 100 * time.Millisecond}
		if i == 1 {
			cfg.Clock = clock
		}
		return cfg
	})
}

// ledBy returns a partition of topic that node leads, waiting until every partition has a leader.
func ledBy(ctx context.Context, t *testing.T, adm *kadm.Client, topic string, node int32) int32 {
	t.Helper()
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			led, mine := 0, int32(-1)
			for _, p := range md.Topics[topic].Partitions.Sorted() {
				if p.Leader >= 0 {
					led++
				}
				if p.Leader == node {
					mine = p.Partition
				}
			}
			if led == len(md.Topics[topic].Partitions) && led > 0 {
				if mine < 0 {
					t.Fatalf("node %d leads no partition of %s", node, topic)
				}
				return mine
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("partitions of %s without a leader: %v", topic, ctx.Err())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// leaderEpochs returns, for every partition of topic, its leader and leader epoch.
func leaderEpochs(ctx context.Context, t *testing.T, adm *kadm.Client, topic string) map[int32][2]int32 {
	t.Helper()
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	out := map[int32][2]int32{}
	for _, p := range md.Topics[topic].Partitions {
		out[p.Partition] = [2]int32{p.Leader, p.LeaderEpoch}
	}
	return out
}

// coordinatedBy returns a key that node coordinates, as find asks it.
func coordinatedBy(ctx context.Context, t *testing.T, prefix string, node int32, find func(context.Context, ...string) kadm.FindCoordinatorResponses) string {
	t.Helper()
	for i := 0; ctx.Err() == nil; i++ {
		key := prefix + strconv.Itoa(i%64)
		if r, ok := find(ctx, key)[key]; ok && r.Err == nil && r.NodeID == node {
			return key
		}
		if i%64 == 63 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	t.Fatalf("no %s key coordinated by node %d: %v", prefix, node, ctx.Err())
	return ""
}

// TestServerWallClockJump steps the wall clock of one node of three an hour forward, then an hour
// back, then right, while it leads a partition, coordinates a group with a member and a
// transactional id with an open transaction, and a producer writes every partition with acks=all.
// Broker leases and group sessions are timed on the monotonic clock: the node keeps its
// leaderships (no partition changes leader or epoch), the producer gets no error, and the group
// keeps its generation. Transaction timeouts and retention are timed on the wall clock, as in
// Kafka: the forward jump ends the open transaction (its commit is refused), and the node deletes
// the closed segments of the partition it leads whose records are now over retention.ms old by its
// clock.
func TestServerWallClockJump(t *testing.T) {
	checkStepWall(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	jc := &jumpClock{}
	nodes := startJumpCluster(ctx, t, jc)
	seeds := kgo.SeedBrokers(nodes[0].KafkaAddr(), nodes[1].KafkaAddr(), nodes[2].KafkaAddr())
	adm := kadm.NewClient(client(t, nodes[0], seeds))
	const topic, kept = "jump", "jump-retention"
	for name, configs := range map[string]map[string]*string{
		topic: {"min.insync.replicas": kadm.StringPtr("2")},
		kept:  {"retention.ms": kadm.StringPtr("1800000"), "segment.bytes": kadm.StringPtr("1024")},
	} {
		if resp, err := adm.CreateTopic(ctx, 3, 3, configs, name); err != nil || resp.Err != nil {
			t.Fatalf("create %s: %v %v", name, err, resp.Err)
		}
	}
	ledBy(ctx, t, adm, topic, 2)
	keptPart := ledBy(ctx, t, adm, kept, 2)
	prod := client(t, nodes[0], seeds, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 40 {
		r := &kgo.Record{Topic: kept, Partition: keptPart, Value: fmt.Appendf(nil, "%0100d", i)}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", kept, err)
		}
	}

	grp := coordinatedBy(ctx, t, "jump-group-", 2, adm.FindGroupCoordinators)
	member := client(t, nodes[0], seeds, kgo.ConsumerGroup(grp), kgo.ConsumeTopics(topic),
		kgo.SessionTimeout(time.Second), kgo.HeartbeatInterval(100*time.Millisecond))
	memberCtx, stopMember := context.WithCancel(ctx)
	var polling sync.WaitGroup
	polling.Go(func() {
		for memberCtx.Err() == nil {
			member.PollFetches(memberCtx)
		}
	})
	defer func() { stopMember(); polling.Wait() }()
	// generation is the group's state as its coordinator describes it, and the member's id and
	// generation as the member knows them; while waiting for the group to settle, a coordinator
	// still loading its shard (a retriable error) and a group not joined yet (GROUP_ID_NOT_FOUND)
	// are waited out too.
	generation := func(settling bool) string {
		d, err := adm.DescribeGroups(ctx, grp)
		if err == nil {
			err = d.Error()
		}
		if err != nil {
			if settling && (kerr.IsRetriable(err) || errors.Is(err, kerr.GroupIDNotFound)) {
				return err.Error()
			}
			t.Fatalf("describe %s: %v", grp, err)
		}
		id, gen := member.GroupMetadata()
		return fmt.Sprintf("%s, member %s at generation %d", d[grp].State, id, gen)
	}
	stable := generation(true)
	for ; !strings.HasPrefix(stable, "Stable") || strings.HasSuffix(stable, "generation -1"); stable = generation(true) {
		if ctx.Err() != nil {
			t.Fatalf("group %s never stable: %s", grp, stable)
		}
		time.Sleep(50 * time.Millisecond)
	}

	txnID := coordinatedBy(ctx, t, "jump-txn-", 2, adm.FindTxnCoordinators)
	txnProd := client(t, nodes[0], seeds, kgo.TransactionalID(txnID), kgo.TransactionTimeout(20*time.Second))
	if err := txnProd.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txnProd.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatalf("transactional produce: %v", err)
	}

	var acked, failed atomic.Int64
	var produceErr atomic.Value
	prodCtx, stopProd := context.WithCancel(ctx)
	var producing sync.WaitGroup
	producing.Go(func() {
		for i := 0; prodCtx.Err() == nil; i++ {
			r := &kgo.Record{Topic: topic, Partition: int32(i % 3), Value: []byte(strconv.Itoa(i))}
			prod.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil {
					failed.Add(1)
					produceErr.Store(err)
					return
				}
				acked.Add(1)
			})
			time.Sleep(10 * time.Millisecond)
		}
	})
	before := leaderEpochs(ctx, t, adm, topic)
	start := time.Now()
	for _, step := range []time.Duration{time.Hour, -time.Hour, 0} {
		jc.jump(step)
		time.Sleep(3 * time.Second)
	}
	stopProd()
	producing.Wait()
	if err := prod.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	t.Logf("%d records acknowledged over the jumps (%v)", acked.Load(), time.Since(start).Round(time.Millisecond))
	if n := failed.Load(); n > 0 {
		t.Errorf("%d records failed across the jumps, e.g. %v", n, produceErr.Load())
	}
	if after := leaderEpochs(ctx, t, adm, topic); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("leaders and epochs moved across the jumps: %v, then %v", before, after)
	}
	if got := generation(false); got != stable {
		t.Errorf("group %s after the jumps: %s, want %s as before (a session expired)", grp, got, stable)
	}

	err := txnProd.EndTransaction(ctx, kgo.TryCommit)
	if err == nil {
		t.Error("the transaction open across the forward jump committed; its timeout is on the wall clock and had passed")
	}
	t.Logf("commit of the transaction open across the jumps: %v", err)

	var start0 int64
	adm2 := kadm.NewClient(client(t, nodes[1]))
	for start0 == 0 {
		offs, err := adm2.ListStartOffsets(ctx, kept)
		if err == nil {
			if o, ok := offs.Lookup(kept, keptPart); ok && o.Err == nil && o.Offset > 0 {
				start0 = o.Offset
				break
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("node 2 never deleted a segment of %s-%d by its hour-ahead clock: %v", kept, keptPart, errors.Join(err, ctx.Err()))
		}
		jc.jump(time.Hour)
		time.Sleep(500 * time.Millisecond)
	}
	jc.jump(0)
	t.Logf("with its clock an hour ahead, node 2 moved the log start of %s-%d to %d", kept, keptPart, start0)
}
