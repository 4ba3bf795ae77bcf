package api_test

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// acquiredOffsets returns the offsets of partition 0 a ShareFetch answer acquired, with their delivery
// counts, failing the test on an error.
func acquiredOffsets(t *testing.T, resp *kmsg.ShareFetchResponse) map[int64]int16 {
	t.Helper()
	if resp.ErrorCode != 0 {
		t.Fatalf("share fetch: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	out := map[int64]int16{}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if p.ErrorCode != 0 || p.AcknowledgeErrorCode != 0 {
				t.Fatalf("share fetch partition: %v, acknowledgements %v", kerr.ErrorForCode(p.ErrorCode), kerr.ErrorForCode(p.AcknowledgeErrorCode))
			}
			for _, a := range p.AcquiredRecords {
				for o := a.FirstOffset; o <= a.LastOffset; o++ {
					out[o] = a.DeliveryCount
				}
			}
		}
	}
	return out
}

// shareOwners reads weir_share_partition_owners from the node's /metrics (the series, not its HELP
// line, which starts with the same name).
func shareOwners(t *testing.T, addr string) float64 {
	t.Helper()
	return metricValue(t, addr, "\nweir_share_partition_owners")
}

// ownersStay checks, for a few idle periods, that the node keeps want share-partition owners.
func ownersStay(t *testing.T, addr string, want float64, idle time.Duration, why string) {
	t.Helper()
	for range 4 {
		time.Sleep(idle)
		if v := shareOwners(t, addr); v != want {
			t.Fatalf("%s: weir_share_partition_owners = %v, want %v", why, v, want)
		}
	}
}

// waitOwners waits until the node has want share-partition owners.
func waitOwners(t *testing.T, addr string, want float64) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for v := shareOwners(t, addr); v != want; v = shareOwners(t, addr) {
		if time.Now().After(deadline) {
			t.Fatalf("weir_share_partition_owners = %v, want %v", v, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestShareOwnerIdle: a share-partition's owner (with an idle time of 200 ms here, 5 minutes by
// default) stays while a member holds records it acquired, even with no session naming the
// share-partition any more, and while another member's session names it; once neither holds it and it
// has had no work for the idle time, it stops (weir_share_partition_owners drops to 0). The next
// ShareFetch restores it from the committed state: the records accepted or rejected before the stop
// are never handed out again, the released ones come back at their next delivery count (2), and what
// is accepted after the restore stays accepted across a second stop.
func TestShareOwnerIdle(t *testing.T) {
	const idle = 200 * time.Millisecond
	cfg := nodeConfig(t.TempDir())
	cfg.ShareOwnerIdle = idle
	n := startNodeWith(t, cfg)
	adm := newAdmin(t, n)
	cl := newClient(t, n)
	addr := n.HTTPAddr()
	const topic, group = "idle-owner", "sg-idle-owner"
	createTopic(t, adm, topic, 1, nil)
	setGroupConfigs(t, cl, group, "share.auto.offset.reset", "earliest")
	prod := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if err := prod.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(0, 10)
	id := topicID(t, adm, topic)

	// a acquires all ten records.
	held, aEpoch := map[int64]int16{}, int32(0)
	for ctx := testCtx(t); len(held) < 10; aEpoch++ {
		if ctx.Err() != nil {
			t.Fatalf("a acquired %v", held)
		}
		for o, c := range acquiredOffsets(t, doShareFetch(t, cl, shareFetchReq(group, "a", aEpoch, id))) {
			held[o] = c
		}
	}
	// a forgets the share-partition: no session of a names it, but a still holds its records.
	forget := kmsg.NewPtrShareFetchRequest()
	forget.GroupID, forget.MemberID, forget.ShareSessionEpoch, forget.MaxWaitMillis = kmsg.StringPtr(group), kmsg.StringPtr("a"), aEpoch, 10
	ft := kmsg.NewShareFetchRequestForgottenTopicsData()
	ft.TopicID, ft.Partitions = id, []int32{0}
	forget.ForgottenTopicsData = append(forget.ForgottenTopicsData, ft)
	acquiredOffsets(t, doShareFetch(t, cl, forget))
	aEpoch++
	ownersStay(t, addr, 1, idle, "records held")

	// b opens a session on the share-partition and gets nothing: a holds everything.
	if got := acquiredOffsets(t, doShareFetch(t, cl, shareFetchReq(group, "b", 0, id))); len(got) > 0 {
		t.Fatalf("b acquired %v while a holds every record", got)
	}

	// a settles its records with ShareAcknowledge: 0-4 accepted, 5 rejected, 6-9 released.
	ack := shareAckReq(group, "a", aEpoch, id, [3]int64{0, 4, 1}, [3]int64{5, 5, 3}, [3]int64{6, 9, 2})
	resp, err := ack.RequestWith(testCtx(t), cl)
	if err != nil || resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("a's acknowledgements: %v %+v", err, resp)
	}
	ownersStay(t, addr, 1, idle, "b's session")

	// b closes its session: nothing holds the owner any more.
	acquiredOffsets(t, doShareFetch(t, cl, shareFetchReq(group, "b", -1, id)))
	waitOwners(t, addr, 0)

	// c restores the share-partition: only the released records, at their second delivery.
	got, cEpoch := map[int64]int16{}, int32(0)
	for ctx := testCtx(t); len(got) < 4; cEpoch++ {
		if ctx.Err() != nil {
			t.Fatalf("c acquired %v, want 6-9", got)
		}
		for o, c := range acquiredOffsets(t, doShareFetch(t, cl, shareFetchReq(group, "c", cEpoch, id))) {
			got[o] = c
		}
	}
	if want := map[int64]int16{6: 2, 7: 2, 8: 2, 9: 2}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the restore c acquired %v, want %v", got, want)
	}
	if v := shareOwners(t, addr); v != 1 {
		t.Fatalf("weir_share_partition_owners = %v after the restore, want 1", v)
	}
	// c accepts them and closes its session; the owner stops again.
	if more := acquiredOffsets(t, doShareFetch(t, cl, shareFetchReq(group, "c", cEpoch, id, ackBatch(6, 9, 1)))); len(more) > 0 {
		t.Fatalf("c acquired %v after accepting the last records", more)
	}
	acquiredOffsets(t, doShareFetch(t, cl, shareFetchReq(group, "c", -1, id)))
	waitOwners(t, addr, 0)

	// d restores it once more: of a new record and the old ones, only the new one is handed out.
	produce(10, 11)
	var offsets []int64
	for ctx, dEpoch := testCtx(t), int32(0); len(offsets) == 0; dEpoch++ {
		if ctx.Err() != nil {
			t.Fatal("d acquired nothing")
		}
		for o, c := range acquiredOffsets(t, doShareFetch(t, cl, shareFetchReq(group, "d", dEpoch, id))) {
			if c != 1 {
				t.Fatalf("offset %d at delivery count %d", o, c)
			}
			offsets = append(offsets, o)
		}
	}
	if slices.Sort(offsets); !slices.Equal(offsets, []int64{10}) {
		t.Fatalf("d acquired %v, want only the new offset 10", offsets)
	}
}

// BenchmarkShareIdleOwners measures what idle share-partition owners hold and what their stop frees:
// one ShareFetch of a member starts the owners of 200 empty share-partitions (a second one finds them
// all loaded), and the goroutines and the memory in use (heap and stacks, after a GC) are read while
// they run and again once the member closed its session and they stopped (an idle time of 200 ms). It
// reports goroutines and bytes per owner.
func BenchmarkShareIdleOwners(b *testing.B) {
	const parts, idle = 200, 200 * time.Millisecond
	cfg := nodeConfig(b.TempDir())
	cfg.ShareOwnerIdle = idle
	n := startNodeWith(b, cfg)
	cl := newBenchClient(b, n.KafkaAddr())
	ctx := b.Context()
	adm := kadm.NewClient(cl)
	measure := func() (int, uint64) {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return runtime.NumGoroutine(), ms.HeapInuse + ms.StackInuse
	}
	var goroutines, heap float64
	round := 0
	for b.Loop() {
		round++
		topic, group := fmt.Sprintf("idle-owners-%d", round), fmt.Sprintf("sg-idle-owners-%d", round)
		if _, err := adm.CreateTopic(ctx, parts, 1, nil, topic); err != nil {
			b.Fatal(err)
		}
		td, err := adm.ListTopics(ctx, topic)
		if err != nil {
			b.Fatal(err)
		}
		fetch := func(epoch int32) {
			r := kmsg.NewPtrShareFetchRequest()
			r.GroupID, r.MemberID, r.ShareSessionEpoch, r.MaxWaitMillis, r.MaxRecords = &group, kmsg.StringPtr("m"), epoch, 0, 100
			rt := kmsg.NewShareFetchRequestTopic()
			rt.TopicID = td[topic].ID
			for p := range int32(parts) {
				rp := kmsg.NewShareFetchRequestTopicPartition()
				rp.Partition = p
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
			if _, err := r.RequestWith(ctx, cl); err != nil {
				b.Fatal(err)
			}
		}
		fetch(0)
		time.Sleep(time.Second)
		fetch(1)
		runningG, runningHeap := measure()
		fetch(-1)
		time.Sleep(10 * idle)
		stoppedG, stoppedHeap := measure()
		goroutines += float64(runningG-stoppedG) / parts
		heap += (float64(runningHeap) - float64(stoppedHeap)) / parts
	}
	b.ReportMetric(goroutines/float64(round), "goroutines/owner")
	b.ReportMetric(heap/float64(round), "B/owner")
}
