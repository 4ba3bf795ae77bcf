package test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/sharestate"
)

// shareBenchRecords is how many records each group consumes in one round.
const shareBenchRecords = 20000

// BenchmarkShareStateAcrossNodes measures what a share-partition pays when its state is coordinated on
// another node: three nodes, a topic of one partition at RF 3, and two share groups on it, one whose
// share-partition's state is led by the data leader itself (every write a local call), one whose
// state is led by another node (every load and write a WriteShareGroupState over the network). In
// each round 20,000 records of 1 KiB are produced, then each group's one franz-go share consumer
// takes them all, accepting each poll (the acknowledgements ride on its next ShareFetch, as in normal
// use), the two groups in alternating order. It reports the median µs a record of each and the
// median ratio remote/local of the rounds.
func BenchmarkShareStateAcrossNodes(b *testing.B) {
	ctx := testContext(b, 10*time.Minute)
	nodes := startGroupCluster(ctx, b, "--share-groups")
	const topic = "sb"
	createLedTopic(ctx, b, nodes, topic, 1)
	meta := waitAgree(ctx, b, nodes, fullISR(topic))
	id := topicOf(b, meta, topic).TopicID
	leader := leaders(b, meta, topic)[0]

	// A probe's first fetch creates __share_group_state.
	probe := newShareMember(b, nodes, "probe", "sg-probe", topic)
	pctx, stopProbe := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		probe.run(pctx, newShareHistory(), func(int32) {})
	}()
	meta = waitAgree(ctx, b, nodes, fullISR(topic, sharestate.StateTopic))
	stopProbe()
	<-done
	probe.cl.Close()
	stateLeaders := leaders(b, meta, sharestate.StateTopic)
	n := int32(len(stateLeaders))
	var local, remote string
	for i := 0; local == "" || remote == ""; i++ {
		g := fmt.Sprintf("sg-%d", i)
		switch l := stateLeaders[statePartition(g, id, 0, n)]; {
		case l == leader && local == "":
			local = g
		case l != leader && remote == "":
			remote = g
		}
	}

	prod, err := kgo.NewClient(append(clusterClientOpts(nodes), kgo.ProducerLinger(5*time.Millisecond))...)
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Close()
	consumers := map[string]*kgo.Client{}
	for _, g := range []string{local, remote} {
		cl, err := kgo.NewClient(append(clusterClientOpts(nodes), kgo.ShareGroup(g), kgo.ConsumeTopics(topic),
			kgo.FetchMaxWait(100*time.Millisecond))...)
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		consumers[g] = cl
	}
	// consume polls g's consumer until it has taken want records that are not warm-ups, accepting each
	// poll, and returns how long that took.
	consume := func(g string, want int) time.Duration {
		cl := consumers[g]
		start := time.Now()
		got := 0
		for got < want {
			if ctx.Err() != nil {
				b.Fatalf("group %s took %d of %d records: %v", g, got, want, ctx.Err())
			}
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				if !strings.HasPrefix(string(r.Value), "warm") {
					got++
				}
			})
			cl.MarkAcks(kgo.AckAccept)
		}
		return time.Since(start)
	}
	// Warm-up: both share-partitions start at the log end when first fetched.
	for _, g := range []string{local, remote} {
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		for {
			if err := prod.ProduceSync(wctx, &kgo.Record{Topic: topic, Value: []byte("warm")}).FirstErr(); err != nil {
				b.Fatalf("warm-up: %v", err)
			}
			pc, pcancel := context.WithTimeout(wctx, 300*time.Millisecond)
			fs := consumers[g].PollFetches(pc)
			pcancel()
			consumers[g].MarkAcks(kgo.AckAccept)
			if fs.NumRecords() > 0 {
				break
			}
		}
		cancel()
	}

	value := make([]byte, 1024)
	var localUS, remoteUS, ratios []float64
	round := 0
	for b.Loop() {
		for i := range shareBenchRecords {
			prod.Produce(ctx, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "%d", i), Value: value}, nil)
		}
		if err := prod.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		order := []string{local, remote}
		if round%2 == 1 {
			slices.Reverse(order)
		}
		took := map[string]time.Duration{}
		for _, g := range order {
			took[g] = consume(g, shareBenchRecords)
		}
		l := float64(took[local].Microseconds()) / shareBenchRecords
		r := float64(took[remote].Microseconds()) / shareBenchRecords
		b.Logf("round %d: local %.1f µs a record, remote %.1f (%.2f×)", round, l, r, r/l)
		localUS, remoteUS, ratios = append(localUS, l), append(remoteUS, r), append(ratios, r/l)
		round++
	}
	median := func(vs []float64) float64 {
		vs = slices.Clone(vs)
		slices.Sort(vs)
		return vs[len(vs)/2]
	}
	b.ReportMetric(median(localUS), "local-µs/record")
	b.ReportMetric(median(remoteUS), "remote-µs/record")
	b.ReportMetric(median(ratios), "remote/local")
}
