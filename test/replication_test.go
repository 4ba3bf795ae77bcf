package test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// acked is one record an acks=all producer had acknowledged.
type acked struct {
	offset int64
	value  string
}

// ackedLog runs an idempotent acks=all producer until stopped and records what was acknowledged.
type ackedLog struct {
	mu   sync.Mutex
	recs []acked
	errs int
}

func (a *ackedLog) run(ctx context.Context, cl *kgo.Client, topic string) {
	for i := 0; ctx.Err() == nil; i++ {
		v := fmt.Sprintf("v%07d", i)
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		res := cl.ProduceSync(rctx, &kgo.Record{Topic: topic, Value: []byte(v)})
		cancel()
		r, err := res.First()
		a.mu.Lock()
		if err == nil {
			a.recs = append(a.recs, acked{offset: r.Offset, value: v})
		} else {
			a.errs++
		}
		a.mu.Unlock()
	}
}

func (a *ackedLog) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.recs)
}

// leaderOf returns the node leading partition 0 of topic, as node n's metadata says.
func leaderOf(ctx context.Context, t testing.TB, nodes []*node, topic string) *node {
	t.Helper()
	for ctx.Err() == nil {
		for _, n := range nodes {
			if !n.alive() {
				continue
			}
			resp := metadata(ctx, t, n)
			for _, tp := range resp.Topics {
				if tp.Topic == nil || *tp.Topic != topic || len(tp.Partitions) == 0 {
					continue
				}
				if l := tp.Partitions[0].Leader; l > 0 && int(l) <= len(nodes) && nodes[l-1].alive() {
					return nodes[l-1]
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no live leader for %s", topic)
	return nil
}

// TestReplicationKillLeader kills the leader of an RF=3, min.insync.replicas=2 partition with -9
// again and again while an idempotent acks=all producer runs, restarting it each time, then reads
// the partition back: every acknowledged record is at its acknowledged offset, exactly once, in order.
func TestReplicationKillLeader(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	nodes := startCluster(t, 3, 3)
	const topic = "repl"
	cl := nodes[0].newClient(t)
	adm := kadm.NewClient(cl)
	for {
		resp, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, topic)
		if err == nil {
			err = resp.Err
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cl.Close()
	seeds := []string{nodes[0].kafkaAddr(), nodes[1].kafkaAddr(), nodes[2].kafkaAddr()}
	prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0), kgo.RetryTimeout(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var log ackedLog
	pctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		log.run(pctx, prod, topic)
	}()
	kills := 3
	for i := range kills {
		before := log.count()
		for log.count() < before+20 && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
		l := leaderOf(ctx, t, nodes, topic)
		t.Logf("kill %d: node %d leads, %d acknowledged", i+1, l.id, log.count())
		l.kill()
		next := leaderOf(ctx, t, nodes, topic)
		t.Logf("kill %d: node %d leads after node %d died", i+1, next.id, l.id)
		l.restart()
	}
	before := log.count()
	for log.count() < before+20 && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	<-done
	if ctx.Err() != nil {
		t.Fatalf("producer made no progress: %d acknowledged", log.count())
	}
	got := leaderOf(ctx, t, nodes, topic).readAll(ctx, t, topic)[0]
	byOffset := map[int64]string{}
	seen := map[string]int{}
	for i, r := range got {
		if i > 0 && r.Offset <= got[i-1].Offset {
			t.Fatalf("offsets not increasing at %d", r.Offset)
		}
		byOffset[r.Offset] = string(r.Value)
		seen[string(r.Value)]++
	}
	for _, a := range log.recs {
		if byOffset[a.offset] != a.value {
			t.Fatalf("acknowledged %s at %d, read %q there", a.value, a.offset, byOffset[a.offset])
		}
		if seen[a.value] != 1 {
			t.Fatalf("acknowledged %s read %d times", a.value, seen[a.value])
		}
	}
	t.Logf("%d acknowledged, %d failed attempts, %d records read, %d leader kills", len(log.recs), log.errs, len(got), kills)
}
