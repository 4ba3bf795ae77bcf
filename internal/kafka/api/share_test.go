package api_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/server"
	"github.com/weir-mq/weir/internal/share"
)

// shareConsumer returns a franz-go share consumer of group on topic, closed when the test ends.
func shareConsumer(t *testing.T, n *server.Node, group, topic string) *kgo.Client {
	t.Helper()
	return newClient(t, n, kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(200*time.Millisecond))
}

// acceptRecords polls the share consumer c until it has k records, accepts each, and returns their
// values, sorted. It fails the test, with what it got, once ctx ends.
func acceptRecords(ctx context.Context, t *testing.T, c *kgo.Client, k int) []string {
	t.Helper()
	var got []string
	for len(got) < k {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("got %v, want %d records (errors: %v)", got, k, fs.Errors())
		}
		for _, r := range fs.Records() {
			got = append(got, string(r.Value))
			c.MarkAcks(kgo.AckAccept, r)
		}
	}
	slices.Sort(got)
	return got
}

// produceShare produces one record per value to topic's partition p and waits for each.
func produceShare(t *testing.T, cl *kgo.Client, topic string, p int32, values ...string) {
	t.Helper()
	for _, v := range values {
		r := &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}
		if err := cl.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
			t.Fatalf("produce %q: %v", v, err)
		}
	}
}

// warmUp produces a warm-up record to every partition of topic until the share group's consumers have
// received one from each: a share-partition starts at the log end when it is first fetched
// (share.auto.offset.reset=latest), so records produced before that are never delivered. Records
// received that are not warm-ups go to seen.
func warmUp(t testing.TB, prod *kgo.Client, topic string, partitions int32, consumers []*kgo.Client, seen chan<- *kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	warmed := map[int32]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	pollCtx, stop := context.WithCancel(ctx)
	for _, c := range consumers {
		wg.Go(func() {
			for pollCtx.Err() == nil {
				fs := c.PollFetches(pollCtx)
				fs.EachRecord(func(r *kgo.Record) {
					if strings.HasPrefix(string(r.Value), "warm") {
						mu.Lock()
						warmed[r.Partition] = true
						mu.Unlock()
						return
					}
					seen <- r
				})
			}
		})
	}
	for {
		mu.Lock()
		done := len(warmed) == int(partitions)
		mu.Unlock()
		if done {
			break
		}
		for p := range partitions {
			if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("warm")}).FirstErr(); err != nil {
				t.Fatalf("produce warm-up: %v", err)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("share consumers received no warm-up record from some partition: %v", warmed)
		case <-time.After(300 * time.Millisecond):
		}
	}
	stop()
	wg.Wait()
}

// TestShareGroupConsumersAcceptEachRecordOnce: 3 franz-go share consumers of one share group on a
// topic of 2 partitions receive every record of 300 exactly once (each consumer accepts what it
// polls), more consumers than partitions sharing the partitions, and the group describes them.
func TestShareGroupConsumersAcceptEachRecordOnce(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	const topic, group, total = "share-once", "sg-once", 300
	createTopic(t, adm, topic, 2, nil)
	prod := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	consumers := []*kgo.Client{shareConsumer(t, n, group, topic), shareConsumer(t, n, group, topic), shareConsumer(t, n, group, topic)}
	seen := make(chan *kgo.Record, 4*total)
	warmUp(t, prod, topic, 2, consumers, seen)

	ctx := testCtx(t)
	pollCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	perConsumer := make([]int, len(consumers))
	for i, c := range consumers {
		wg.Go(func() {
			for pollCtx.Err() == nil {
				fs := c.PollFetches(pollCtx)
				fs.EachRecord(func(r *kgo.Record) {
					if strings.HasPrefix(string(r.Value), "warm") {
						return
					}
					perConsumer[i]++
					seen <- r
				})
			}
		})
	}
	for i := range total {
		produceShare(t, prod, topic, int32(i%2), fmt.Sprintf("v%d", i))
	}
	got := map[string]int{}
	for len(got) < total {
		select {
		case r := <-seen:
			got[string(r.Value)]++
		case <-ctx.Done():
			t.Fatalf("received %d distinct records of %d", len(got), total)
		}
	}
	// Anything delivered twice would arrive within a lock duration's fraction after the rest.
	time.Sleep(500 * time.Millisecond)
	stop()
	wg.Wait()
	close(seen)
	for r := range seen {
		if !strings.HasPrefix(string(r.Value), "warm") {
			got[string(r.Value)]++
		}
	}
	for v, c := range got {
		if c != 1 {
			t.Errorf("record %s delivered %d times", v, c)
		}
	}
	t.Logf("records per consumer: %v", perConsumer)

	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.GroupIDs = []string{group}
	resp, err := req.RequestWith(testCtx(t), consumers[0])
	if err != nil {
		t.Fatalf("describe: %v", err)
	}
	g := resp.Groups[0]
	if g.ErrorCode != 0 || g.GroupState != "Stable" || len(g.Members) != 3 {
		t.Fatalf("describe: code %d state %q members %d, want Stable with 3", g.ErrorCode, g.GroupState, len(g.Members))
	}
	assigned := map[int32]int{}
	for _, m := range g.Members {
		for _, tp := range m.Assignment.TopicPartitions {
			for _, p := range tp.Partitions {
				assigned[p]++
			}
		}
	}
	if assigned[0] == 0 || assigned[1] == 0 || assigned[0]+assigned[1] < 3 {
		t.Fatalf("assignment %v: want both partitions, every member at least one", assigned)
	}
}

// shareFetchReq is a ShareFetch of member in group at epoch naming topic id's partition 0, with acks
// riding on it.
func shareFetchReq(group, member string, epoch int32, id [16]byte, acks ...kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareFetchRequest {
	r := kmsg.NewPtrShareFetchRequest()
	r.GroupID, r.MemberID, r.ShareSessionEpoch, r.MaxWaitMillis, r.MaxRecords = &group, &member, epoch, 50, 100
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = id
	rp := kmsg.NewShareFetchRequestTopicPartition()
	rp.AcknowledgementBatches = acks
	rt.Partitions = append(rt.Partitions, rp)
	r.Topics = append(r.Topics, rt)
	return r
}

// ackBatch acknowledges [first, last] with one type.
func ackBatch(first, last int64, typ int8) kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch {
	b := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
	b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = first, last, []int8{typ}
	return b
}

// doShareFetch sends r and fails the test on a transport error.
func doShareFetch(t *testing.T, cl *kgo.Client, r *kmsg.ShareFetchRequest) *kmsg.ShareFetchResponse {
	t.Helper()
	resp, err := r.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatalf("share fetch: %v", err)
	}
	return resp
}

// topicID returns topic's id.
// shareAckReq is a ShareAcknowledge of partition 0 of topic id by member at epoch, one batch for each
// {first offset, last offset, acknowledge type}.
func shareAckReq(group, member string, epoch int32, id [16]byte, batches ...[3]int64) *kmsg.ShareAcknowledgeRequest {
	r := kmsg.NewPtrShareAcknowledgeRequest()
	r.GroupID, r.MemberID, r.ShareSessionEpoch = kmsg.StringPtr(group), kmsg.StringPtr(member), epoch
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = id
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	for _, b := range batches {
		ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
		ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = b[0], b[1], []int8{int8(b[2])}
		rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
	}
	rt.Partitions = append(rt.Partitions, rp)
	r.Topics = append(r.Topics, rt)
	return r
}

func topicID(t *testing.T, adm *kadm.Client, topic string) [16]byte {
	t.Helper()
	td, err := adm.ListTopics(testCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	return td[topic].ID
}

// pollValue polls c until it returns the record with value v, which it returns; the other records it
// polls are accepted on the next poll, as franz-go does.
func pollValue(t *testing.T, c *kgo.Client, v string) *kgo.Record {
	t.Helper()
	ctx := testCtx(t)
	for {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("record %q never polled", v)
		}
		for _, r := range fs.Records() {
			if string(r.Value) == v {
				return r
			}
		}
	}
}

// TestShareGroupReleaseRedelivers: a record a franz-go share consumer releases comes back to it with
// delivery count 2, and once accepted does not come back.
func TestShareGroupReleaseRedelivers(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	const topic, group = "share-release", "sg-release"
	createTopic(t, adm, topic, 1, nil)
	prod := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	c := shareConsumer(t, n, group, topic)
	warmUp(t, prod, topic, 1, []*kgo.Client{c}, make(chan *kgo.Record, 100))

	produceShare(t, prod, topic, 0, "r", "next")
	r := pollValue(t, c, "r")
	if r.DeliveryCount() != 1 {
		t.Fatalf("first delivery count %d, want 1", r.DeliveryCount())
	}
	c.MarkAcks(kgo.AckRelease, r)
	again := pollValue(t, c, "r")
	if again.DeliveryCount() != 2 || again.Offset != r.Offset {
		t.Fatalf("redelivered offset %d count %d, want offset %d count 2", again.Offset, again.DeliveryCount(), r.Offset)
	}
	c.MarkAcks(kgo.AckAccept, again)
	if err := c.FlushAcks(testCtx(t)); err != nil {
		t.Fatalf("flush acks: %v", err)
	}
	produceShare(t, prod, topic, 0, "after")
	ctx := testCtx(t)
	for {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("record after never polled")
		}
		for _, rec := range fs.Records() {
			if string(rec.Value) == "r" {
				t.Fatalf("accepted record delivered again (count %d)", rec.DeliveryCount())
			}
			if string(rec.Value) == "after" {
				return
			}
		}
	}
}

// TestShareGroupLockExpiryRedelivers: a record a member acquires and never acknowledges is handed to
// a franz-go share consumer once its lock (1 s here) expires, with delivery count 2; the first member's
// late acknowledgement is then refused with INVALID_RECORD_STATE and changes nothing.
func TestShareGroupLockExpiryRedelivers(t *testing.T) {
	cfg := nodeConfig(t.TempDir())
	cfg.SharePartition.LockDuration = time.Second
	n := startNodeWith(t, cfg)
	adm := newAdmin(t, n)
	const topic, group = "share-expiry", "sg-expiry"
	createTopic(t, adm, topic, 1, nil)
	id := topicID(t, adm, topic)
	prod := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	raw := newClient(t, n)

	// Member a opens its session, which starts the share-partition at the log end, then acquires x.
	if resp := doShareFetch(t, raw, shareFetchReq(group, "a", 0, id)); resp.ErrorCode != 0 || resp.AcquisitionLockTimeoutMillis != 1000 {
		t.Fatalf("open: code %d lock %d ms", resp.ErrorCode, resp.AcquisitionLockTimeoutMillis)
	}
	produceShare(t, prod, topic, 0, "x")
	resp := doShareFetch(t, raw, shareFetchReq(group, "a", 1, id))
	acq := resp.Topics[0].Partitions[0].AcquiredRecords
	if len(acq) != 1 || acq[0].FirstOffset != 0 || acq[0].LastOffset != 0 || acq[0].DeliveryCount != 1 {
		t.Fatalf("member a acquired %+v, want offset 0 once", acq)
	}

	start := time.Now()
	c := shareConsumer(t, n, group, topic)
	r := pollValue(t, c, "x")
	if r.DeliveryCount() != 2 {
		t.Fatalf("redelivered with count %d, want 2", r.DeliveryCount())
	}
	t.Logf("redelivered after %v", time.Since(start))
	c.MarkAcks(kgo.AckAccept, r)
	if err := c.FlushAcks(testCtx(t)); err != nil {
		t.Fatalf("flush acks: %v", err)
	}

	late := doShareFetch(t, raw, shareFetchReq(group, "a", 2, id, ackBatch(0, 0, 1)))
	if code := late.Topics[0].Partitions[0].AcknowledgeErrorCode; code != kerr.InvalidRecordState.Code {
		t.Fatalf("late acknowledgement: %v, want INVALID_RECORD_STATE", kerr.ErrorForCode(code))
	}
}

// TestShareGroupBadInput: stale and unknown share sessions, malformed acknowledgements, unknown topic
// ids and membership errors get Kafka's codes and change nothing.
func TestShareGroupBadInput(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	const topic, group = "share-bad", "sg-bad"
	createTopic(t, adm, topic, 1, nil)
	id := topicID(t, adm, topic)
	prod := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	cl := newClient(t, n)
	ctx := testCtx(t)

	ack := kmsg.NewPtrShareAcknowledgeRequest()
	ack.GroupID, ack.MemberID, ack.ShareSessionEpoch = kmsg.StringPtr(group), kmsg.StringPtr("m"), 1
	if resp, err := ack.RequestWith(ctx, cl); err != nil || resp.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Fatalf("acknowledge without a session: %+v, %v", resp, err)
	}
	ack.ShareSessionEpoch = 0
	if resp, err := ack.RequestWith(ctx, cl); err != nil || resp.ErrorCode != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("acknowledge at epoch 0: %+v, %v", resp, err)
	}

	doShareFetch(t, cl, shareFetchReq(group, "m", 0, id))
	produceShare(t, prod, topic, 0, "a", "b")
	resp := doShareFetch(t, cl, shareFetchReq(group, "m", 1, id))
	if acq := resp.Topics[0].Partitions[0].AcquiredRecords; len(acq) != 1 || acq[0].LastOffset != 1 {
		t.Fatalf("acquired %+v, want offsets 0-1", acq)
	}
	if resp := doShareFetch(t, cl, shareFetchReq(group, "m", 5, id)); resp.ErrorCode != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("fetch at a stale epoch: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	// The session is at epoch 2: the refused fetch at epoch 5 did not move it.
	epoch := int32(2)
	for _, c := range []struct {
		name  string
		batch kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch
		want  int16
	}{
		{"reversed range", ackBatch(1, 0, 1), kerr.InvalidRequest.Code},
		{"unknown type", ackBatch(0, 1, 9), kerr.InvalidRequest.Code},
		{"offset not acquired", ackBatch(0, 2, 1), kerr.InvalidRecordState.Code},
	} {
		resp := doShareFetch(t, cl, shareFetchReq(group, "m", epoch, id, c.batch))
		epoch++
		if got := resp.Topics[0].Partitions[0].AcknowledgeErrorCode; got != c.want {
			t.Fatalf("%s: %v, want %v", c.name, kerr.ErrorForCode(got), kerr.ErrorForCode(c.want))
		}
	}
	// Nothing changed: the member still holds both records and accepts them.
	if got := doShareFetch(t, cl, shareFetchReq(group, "m", epoch, id, ackBatch(0, 1, 1))).Topics[0].Partitions[0].AcknowledgeErrorCode; got != 0 {
		t.Fatalf("accepting the held records after the refusals: %v", kerr.ErrorForCode(got))
	}

	unknown := doShareFetch(t, cl, shareFetchReq(group, "other", 0, [16]byte{1}))
	if got := unknown.Topics[0].Partitions[0].ErrorCode; got != kerr.UnknownTopicID.Code {
		t.Fatalf("unknown topic id: %v", kerr.ErrorForCode(got))
	}

	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.MemberEpoch = group, "hm", 3
	if resp, err := hb.RequestWith(ctx, cl); err != nil || resp.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("heartbeat of an unknown member: %+v, %v", resp, err)
	}
	hb.MemberEpoch, hb.SubscribedTopicNames = 0, []string{topic}
	joined, err := hb.RequestWith(ctx, cl)
	if err != nil || joined.ErrorCode != 0 {
		t.Fatalf("join: %+v, %v", joined, err)
	}
	hb.MemberEpoch, hb.SubscribedTopicNames = joined.MemberEpoch+7, nil
	if resp, err := hb.RequestWith(ctx, cl); err != nil || resp.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Fatalf("heartbeat at a wrong epoch: %+v, %v", resp, err)
	}
}

// TestShareGroupStateSurvivesRestart: acknowledgements are durable in __share_group_state. Member m
// accepts offsets 0-1 of four records, holds 2 and releases 3; after the node restarts on its data
// directory, the share-partition is restored: 0-1 are never handed out again, 2 and 3 are, each at
// its second delivery.
func TestShareGroupStateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	n := startNodeIn(t, dir)
	adm := newAdmin(t, n)
	const topic, group = "share-restart", "sg-restart"
	createTopic(t, adm, topic, 1, nil)
	id := topicID(t, adm, topic)
	prod := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	cl := newClient(t, n)
	doShareFetch(t, cl, shareFetchReq(group, "m", 0, id))
	produceShare(t, prod, topic, 0, "a", "b", "c", "d")
	if acq := doShareFetch(t, cl, shareFetchReq(group, "m", 1, id)).Topics[0].Partitions[0].AcquiredRecords; len(acq) != 1 || acq[0].LastOffset != 3 {
		t.Fatalf("acquired %+v, want 0-3", acq)
	}
	resp, err := shareAckReq(group, "m", 2, id, [3]int64{0, 1, 1}, [3]int64{3, 3, 2}).RequestWith(testCtx(t), cl)
	if err != nil || resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("acknowledge: %+v, %v", resp, err)
	}
	cl.Close()
	prod.Close()
	if err := n.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	n = startNodeIn(t, dir)
	cl = newClient(t, n)
	ctx := testCtx(t)
	for epoch := int32(0); ; epoch++ {
		resp := doShareFetch(t, cl, shareFetchReq(group, "m2", epoch, id))
		if resp.ErrorCode != 0 {
			t.Fatalf("fetch after the restart: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		if len(resp.Topics) == 0 {
			if ctx.Err() != nil {
				t.Fatal("nothing acquired after the restart")
			}
			continue
		}
		rp := resp.Topics[0].Partitions[0]
		acq := rp.AcquiredRecords
		if len(acq) == 0 {
			if ctx.Err() != nil {
				t.Fatalf("nothing acquired after the restart: %v", kerr.ErrorForCode(rp.ErrorCode))
			}
			continue
		}
		if len(acq) != 1 || acq[0].FirstOffset != 2 || acq[0].LastOffset != 3 || acq[0].DeliveryCount != 2 {
			t.Fatalf("acquired after the restart %+v, want offsets 2-3 at delivery count 2", acq)
		}
		return
	}
}

// TestShareApiVersions: the share keys are advertised at the versions served (76 and 77 at v1, 78
// and 79 at v1-2, which franz-go needs to turn share groups on), and share.version is finalized at 1
// from ApiVersions v3 and supported 0-1 from v4.
func TestShareApiVersions(t *testing.T) {
	rc := dialRaw(t, startNode(t))
	for _, v := range []int16{3, 4} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		req.ClientSoftwareName, req.ClientSoftwareVersion = "weir-test", "1.0"
		resp := rc.do(req).(*kmsg.ApiVersionsResponse)
		want := map[int16][2]int16{76: {1, 1}, 77: {1, 1}, 78: {1, 2}, 79: {1, 2}}
		for _, k := range resp.ApiKeys {
			if w, ok := want[k.ApiKey]; ok {
				if k.MinVersion != w[0] || k.MaxVersion != w[1] {
					t.Fatalf("v%d: key %d at %d-%d, want %d-%d", v, k.ApiKey, k.MinVersion, k.MaxVersion, w[0], w[1])
				}
				delete(want, k.ApiKey)
			}
		}
		if len(want) != 0 {
			t.Fatalf("v%d: share keys not advertised: %v", v, want)
		}
		finalized := slices.ContainsFunc(resp.FinalizedFeatures, func(f kmsg.ApiVersionsResponseFinalizedFeature) bool {
			return f.Name == "share.version" && f.MinVersionLevel == 1 && f.MaxVersionLevel == 1
		})
		supported := slices.ContainsFunc(resp.SupportedFeatures, func(f kmsg.ApiVersionsResponseSupportedFeature) bool {
			return f.Name == "share.version" && f.MinVersion == 0 && f.MaxVersion == 1
		})
		if !finalized || supported != (v >= 4) {
			t.Fatalf("v%d: features finalized %+v supported %+v, want share.version 1 (and 0-1 supported from v4)", v, resp.FinalizedFeatures, resp.SupportedFeatures)
		}
	}
}

// TestShareFetchWholeBatches: a batch-optimized ShareFetch (KIP-1206's default mode) acquires past
// MaxRecords to the end of the last log batch it sends, so a client decodes no record it did not
// acquire; a record_limit one acquires exactly MaxRecords, and a later batch-optimized one takes the
// rest of that batch.
func TestShareFetchWholeBatches(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	const topic, group = "share-batches", "sg-batches"
	createTopic(t, adm, topic, 1, nil)
	id := topicID(t, adm, topic)
	cl := newClient(t, n)
	doShareFetch(t, cl, shareFetchReq(group, "m", 0, id))
	rc := dialRaw(t, n)
	values := make([]string, 10)
	for i := range values {
		values[i] = fmt.Sprintf("v%d", i)
	}
	for range 2 {
		if p := produceRaw(t, rc, 9, topic, 0, testBatch(batchSpec{values: values})); p.ErrorCode != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(p.ErrorCode))
		}
	}

	for i, c := range []struct {
		mode       int8
		maxRecords int32
		want       kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	}{
		{0, 3, kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{FirstOffset: 0, LastOffset: 9, DeliveryCount: 1}},
		{1, 3, kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{FirstOffset: 10, LastOffset: 12, DeliveryCount: 1}},
		{0, 1, kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{FirstOffset: 13, LastOffset: 19, DeliveryCount: 1}},
	} {
		req := shareFetchReq(group, "m", int32(i+1), id)
		req.MaxRecords, req.ShareAcquireMode = c.maxRecords, c.mode
		resp := doShareFetch(t, cl, req)
		if resp.Version < 2 {
			t.Fatalf("ShareFetch v%d, want v2 (ShareAcquireMode)", resp.Version)
		}
		rp := resp.Topics[0].Partitions[0]
		if acq := rp.AcquiredRecords; len(acq) != 1 || acq[0].FirstOffset != c.want.FirstOffset || acq[0].LastOffset != c.want.LastOffset || acq[0].DeliveryCount != c.want.DeliveryCount {
			t.Fatalf("mode %d, max %d: acquired %+v, want %+v", c.mode, c.maxRecords, rp.AcquiredRecords, c.want)
		}
		var batch kmsg.RecordBatch
		if err := batch.ReadFrom(rp.Records); err != nil || int(batch.Length)+12 != len(rp.Records) {
			t.Fatalf("mode %d, max %d: records are not one batch (%v)", c.mode, c.maxRecords, err)
		}
		if first, last := batch.FirstOffset, batch.FirstOffset+int64(batch.LastOffsetDelta); first > c.want.FirstOffset || last < c.want.LastOffset {
			t.Fatalf("mode %d, max %d: batch [%d, %d] does not hold the acquired records", c.mode, c.maxRecords, first, last)
		}
	}
}

// TestShareFetchWakesWhenRecordsFree: a ShareFetch parked because nothing is acquirable (the one
// record held by another member, the window of one record full) is answered as soon as that member's
// ShareAcknowledge releases the record or, accepting it, makes room in the window, not at its
// MaxWait of 10 s.
func TestShareFetchWakesWhenRecordsFree(t *testing.T) {
	cfg := nodeConfig(t.TempDir())
	cfg.SharePartition.RecordLocksMax = 1
	n := startNodeWith(t, cfg)
	adm := newAdmin(t, n)
	const topic, group = "share-wake", "sg-wake"
	createTopic(t, adm, topic, 1, nil)
	id := topicID(t, adm, topic)
	prod := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	clients := map[string]*kgo.Client{"a": newClient(t, n), "b": newClient(t, n)}
	epochs := map[string]int32{}
	fetchReq := func(member string, maxWait time.Duration) *kmsg.ShareFetchRequest {
		req := shareFetchReq(group, member, epochs[member], id)
		req.MaxWaitMillis = int32(maxWait / time.Millisecond)
		epochs[member]++
		return req
	}
	fetch := func(member string) *kmsg.ShareFetchResponse {
		return doShareFetch(t, clients[member], fetchReq(member, 0))
	}
	acknowledge := func(member string, typ int8) {
		req := shareAckReq(group, member, epochs[member], id, [3]int64{0, 0, int64(typ)})
		epochs[member]++
		resp, err := req.RequestWith(testCtx(t), clients[member])
		if err != nil || resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("%s acknowledges offset 0: %+v, %v", member, resp, err)
		}
	}
	// parked sends member's fetch with a MaxWait of 10 s, runs free once the fetch had time to park,
	// and returns the fetch's one acquired range and how long the fetch took.
	parked := func(member string, free func()) (kmsg.ShareFetchResponseTopicPartitionAcquiredRecord, time.Duration) {
		start := time.Now()
		req := fetchReq(member, 10*time.Second)
		type answer struct {
			resp *kmsg.ShareFetchResponse
			err  error
		}
		done := make(chan answer, 1)
		ctx := testCtx(t)
		go func() {
			resp, err := req.RequestWith(ctx, clients[member])
			done <- answer{resp, err}
		}()
		select {
		case a := <-done:
			t.Fatalf("%s's fetch answered before records were freed: %+v, %v", member, a.resp, a.err)
		case <-time.After(300 * time.Millisecond):
		}
		free()
		a := <-done
		if a.err != nil {
			t.Fatalf("%s's fetch: %v", member, a.err)
		}
		if len(a.resp.Topics) != 1 || len(a.resp.Topics[0].Partitions) != 1 {
			t.Fatalf("%s's fetch acquired nothing in %v", member, time.Since(start))
		}
		acq := a.resp.Topics[0].Partitions[0].AcquiredRecords
		if len(acq) != 1 {
			t.Fatalf("%s acquired %+v, want one range", member, acq)
		}
		return acq[0], time.Since(start)
	}

	fetch("a")
	fetch("b")
	produceShare(t, prod, topic, 0, "x", "y")
	if acq := fetch("a").Topics[0].Partitions[0].AcquiredRecords; len(acq) != 1 || acq[0].FirstOffset != 0 || acq[0].LastOffset != 0 {
		t.Fatalf("a acquired %+v, want offset 0 (a window of one)", acq)
	}

	got, took := parked("b", func() { acknowledge("a", 2) })
	if got.FirstOffset != 0 || got.LastOffset != 0 || got.DeliveryCount != 2 || took > 5*time.Second {
		t.Fatalf("after a's release, b got [%d, %d] at count %d in %v, want offset 0 at count 2 at once", got.FirstOffset, got.LastOffset, got.DeliveryCount, took)
	}
	got, took = parked("a", func() { acknowledge("b", 1) })
	if got.FirstOffset != 1 || got.LastOffset != 1 || got.DeliveryCount != 1 || took > 5*time.Second {
		t.Fatalf("after b's accept, a got [%d, %d] at count %d in %v, want offset 1 at count 1 at once", got.FirstOffset, got.LastOffset, got.DeliveryCount, took)
	}
}

// TestShareGroupIDsOneNamespace: share, classic and consumer-protocol groups share one namespace, as
// in Kafka, and ListGroups v5 lists each with its type. A share join with the id of a classic group
// (one with only committed offsets) is GROUP_ID_NOT_FOUND, and a classic JoinGroup and a
// consumer-protocol join with a share group's id are GROUP_ID_NOT_FOUND too, with members or, once
// they left, without; DeleteGroups frees the id.
func TestShareGroupIDsOneNamespace(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	const topic = "share-ns"
	createTopic(t, adm, topic, 1, nil)
	cl := newClient(t, n)
	ctx := testCtx(t)

	shareJoin := func(group, member string) *kmsg.ShareGroupHeartbeatResponse {
		t.Helper()
		hb := kmsg.NewPtrShareGroupHeartbeatRequest()
		hb.GroupID, hb.MemberID, hb.MemberEpoch, hb.SubscribedTopicNames = group, member, 0, []string{topic}
		resp, err := hb.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	classicJoin := func(group string) int16 {
		t.Helper()
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.ProtocolType, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = group, "consumer", 10000, 10000
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name = "range"
		req.Protocols = append(req.Protocols, p)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.ErrorCode
	}
	consumerJoin := func(group string) *kmsg.ConsumerGroupHeartbeatResponse {
		t.Helper()
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = group, "c-member-00000000001", 0, 10000
		req.SubscribedTopicNames, req.Topics = []string{topic}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	// A classic group known only by its committed offsets.
	if _, err := adm.CommitOffsets(ctx, "classic-ns", kadm.OffsetsFromRecords(kgo.Record{Topic: topic, Partition: 0, Offset: 0})); err != nil {
		t.Fatal(err)
	}
	if resp := shareJoin("classic-ns", "s1"); resp.ErrorCode != kerr.GroupIDNotFound.Code || resp.ErrorMessage == nil ||
		!strings.Contains(*resp.ErrorMessage, "not a share group") {
		t.Fatalf("share join of a classic group's id: %v %v, want GROUP_ID_NOT_FOUND", kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage)
	}

	joined := shareJoin("share-ns", "s1")
	if joined.ErrorCode != 0 {
		t.Fatalf("share join: %v", kerr.ErrorForCode(joined.ErrorCode))
	}
	if code := classicJoin("share-ns"); code != kerr.GroupIDNotFound.Code {
		t.Fatalf("classic join of a share group's id: %v, want GROUP_ID_NOT_FOUND", kerr.ErrorForCode(code))
	}
	if resp := consumerJoin("share-ns"); resp.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("consumer-protocol join of a share group's id: %v, want GROUP_ID_NOT_FOUND", kerr.ErrorForCode(resp.ErrorCode))
	}

	leave := kmsg.NewPtrShareGroupHeartbeatRequest()
	leave.GroupID, leave.MemberID, leave.MemberEpoch = "share-ns", "s1", -1
	if resp, err := leave.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("share leave: %+v, %v", resp, err)
	}
	if resp := consumerJoin("share-ns"); resp.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("consumer-protocol join of an empty share group's id: %v, want GROUP_ID_NOT_FOUND", kerr.ErrorForCode(resp.ErrorCode))
	}
	if code := classicJoin("share-ns"); code != kerr.GroupIDNotFound.Code {
		t.Fatalf("classic join of an empty share group's id: %v, want GROUP_ID_NOT_FOUND", kerr.ErrorForCode(code))
	}
	if resp, err := adm.DeleteGroup(ctx, "share-ns"); err != nil || resp.Err != nil {
		t.Fatalf("delete the share group: %+v, %v", resp, err)
	}
	if resp := consumerJoin("share-ns"); resp.ErrorCode != 0 {
		t.Fatalf("consumer-protocol join once the share group is deleted: %v %v", kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage)
	}

	// ListGroups v5 shows each group with its type, and filters by type and state.
	if resp := shareJoin("share-listed", "s2"); resp.ErrorCode != 0 {
		t.Fatalf("share join: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	list := func(types, states []string) map[string]string {
		t.Helper()
		req := kmsg.NewPtrListGroupsRequest()
		req.Version, req.TypesFilter, req.StatesFilter = 5, types, states
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("ListGroups: %+v, %v", resp, err)
		}
		out := map[string]string{}
		for _, g := range resp.Groups {
			if _, dup := out[g.Group]; dup {
				t.Fatalf("ListGroups lists %s twice: %+v", g.Group, resp.Groups)
			}
			out[g.Group] = g.GroupType + "/" + g.ProtocolType + "/" + g.GroupState
		}
		return out
	}
	want := map[string]string{"classic-ns": "classic//Empty", "share-ns": "consumer/consumer/Stable", "share-listed": "share/share/Stable"}
	if got := list(nil, nil); !maps.Equal(got, want) {
		t.Fatalf("ListGroups: %v, want %v", got, want)
	}
	if got := list([]string{"SHARE"}, nil); !maps.Equal(got, map[string]string{"share-listed": "share/share/Stable"}) {
		t.Fatalf("ListGroups of type share: %v", got)
	}
	if got := list([]string{"consumer", "classic"}, []string{"empty"}); !maps.Equal(got, map[string]string{"classic-ns": "classic//Empty"}) {
		t.Fatalf("ListGroups of types consumer and classic, state empty: %v", got)
	}
}

// TestShareFetchForgetsNamedPartition: a ShareFetch that names a partition only to acknowledge its
// records and forgets it in the same request (franz-go does so when the partition was revoked with
// acknowledgements pending) applies the acknowledgements and leaves the partition out of the member's
// share session, as Kafka does: the member's next fetch acquires nothing there, and another member gets
// the partition's next record at once. Kept in the session, the partition went on acquiring records for
// the member, which the client drops, each locked until it expired.
func TestShareFetchForgetsNamedPartition(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	const topic, group = "share-forget", "sg-forget"
	createTopic(t, adm, topic, 2, nil)
	id := topicID(t, adm, topic)
	prod := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	raw := newClient(t, n)
	// fetch sends member's ShareFetch at epoch, naming partitions (each with the acknowledgements
	// acks holds for it) and forgetting forget, and returns the answer's partition 1.
	fetch := func(member string, epoch, maxWaitMs int32, partitions []int32, acks map[int32][]kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch, forget ...int32) kmsg.ShareFetchResponseTopicPartition {
		t.Helper()
		r := kmsg.NewPtrShareFetchRequest()
		r.GroupID, r.MemberID, r.ShareSessionEpoch, r.MaxWaitMillis, r.MaxRecords = kmsg.StringPtr(group), kmsg.StringPtr(member), epoch, maxWaitMs, 100
		if len(partitions) > 0 {
			rt := kmsg.NewShareFetchRequestTopic()
			rt.TopicID = id
			for _, p := range partitions {
				rp := kmsg.NewShareFetchRequestTopicPartition()
				rp.Partition, rp.AcknowledgementBatches = p, acks[p]
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
		}
		if len(forget) > 0 {
			ft := kmsg.NewShareFetchRequestForgottenTopicsData()
			ft.TopicID, ft.Partitions = id, forget
			r.ForgottenTopicsData = append(r.ForgottenTopicsData, ft)
		}
		resp := doShareFetch(t, raw, r)
		if resp.ErrorCode != 0 {
			t.Fatalf("%s's fetch at epoch %d: %v", member, epoch, kerr.ErrorForCode(resp.ErrorCode))
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if rp.Partition == 1 {
					return rp
				}
			}
		}
		return kmsg.NewShareFetchResponseTopicPartition()
	}
	acquired := func(rp kmsg.ShareFetchResponseTopicPartition) [][3]int64 {
		var out [][3]int64
		for _, a := range rp.AcquiredRecords {
			out = append(out, [3]int64{a.FirstOffset, a.LastOffset, int64(a.DeliveryCount)})
		}
		return out
	}

	// Member a's session fetches both partitions; the share-partitions start at the log end.
	fetch("a", 0, 0, []int32{0, 1}, nil)
	produceShare(t, prod, topic, 1, "x")
	if got := acquired(fetch("a", 1, 5000, nil, nil)); !slices.Equal(got, [][3]int64{{0, 0, 1}}) {
		t.Fatalf("a acquired %v of partition 1, want offset 0 once", got)
	}
	// a accepts offset 0 of partition 1 and forgets the partition in one request.
	rp := fetch("a", 2, 0, []int32{1}, map[int32][]kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{1: {ackBatch(0, 0, 1)}}, 1)
	if rp.AcknowledgeErrorCode != 0 {
		t.Fatalf("a's acknowledgement of partition 1: %v", kerr.ErrorForCode(rp.AcknowledgeErrorCode))
	}
	produceShare(t, prod, topic, 1, "y")
	if got := acquired(fetch("a", 3, 100, nil, nil)); got != nil {
		t.Fatalf("a acquired %v of the partition 1 it forgot", got)
	}
	if got := acquired(fetch("b", 0, 5000, []int32{1}, nil)); !slices.Equal(got, [][3]int64{{1, 1, 1}}) {
		t.Fatalf("b acquired %v of partition 1, want offset 1 once (not offset 0, accepted)", got)
	}
}

// TestShareLogStartMoves: when DeleteRecords (as retention would) moves a partition's log start past
// records a share group has not read, while the share-partition's owner runs, the group goes on from
// the new log start: a share consumer gets exactly the records left and those produced after, and the
// group's start offset reaches the log's end once they are accepted. Before, the owner kept its window
// below the log start and every ShareFetch answered OFFSET_OUT_OF_RANGE. Both ways an owner tracks
// records: without reading them (no delivery headers) and reading them (weir.delivery.headers.enable).
func TestShareLogStartMoves(t *testing.T) {
	for name, configs := range map[string]map[string]*string{
		"plain":   nil,
		"headers": {"weir.delivery.headers.enable": kadm.StringPtr("true")},
	} {
		t.Run(name, func(t *testing.T) {
			n := startNode(t)
			adm := newAdmin(t, n)
			topic, group := "moving-"+name, "sg-moving-"+name
			createTopic(t, adm, topic, 1, configs)
			cl := newClient(t, n)
			setGroupConfigs(t, cl, group, "share.auto.offset.reset", "earliest")
			ctx := testCtx(t)
			produce := func(prefix string, k int) {
				t.Helper()
				for i := range k {
					if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s%d", prefix, i)}).FirstErr(); err != nil {
						t.Fatal(err)
					}
				}
			}
			consume := func(want []string) {
				t.Helper()
				c := shareConsumer(t, n, group, topic)
				defer c.Close()
				got := acceptRecords(ctx, t, c, len(want))
				if err := c.FlushAcks(ctx); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("got %v, want %v", got, want)
				}
			}
			produce("a", 5)
			consume([]string{"a0", "a1", "a2", "a3", "a4"})
			// the owner stays while idle; offsets 5-14, of which 5-11 are deleted unread
			produce("b", 10)
			o := kadm.Offsets{}
			o.Add(kadm.Offset{Topic: topic, Partition: 0, At: 12})
			if resp, err := adm.DeleteRecords(ctx, o); err != nil || resp.Error() != nil {
				t.Fatalf("delete records: %v %v", err, resp.Error())
			}
			produce("c", 3)
			consume([]string{"b7", "b8", "b9", "c0", "c1", "c2"})
			if start, _ := (shareAdmin{t: t, cl: cl}).offset(group, topic, 0); start != 18 {
				t.Fatalf("start offset %d after every record left was accepted, want the log end 18", start)
			}
		})
	}
}

// TestShareStateOfDeletedTopic: deleting a topic that a share group read removes the group's state
// for its share-partitions from __share_group_state: the last record of each of their keys is a
// tombstone, which compaction drops, while a topic that stays keeps its state.
func TestShareStateOfDeletedTopic(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	cl := newClient(t, n)
	const group = "sg-deleted"
	setGroupConfigs(t, cl, group, "share.auto.offset.reset", "earliest")
	ids := map[string][16]byte{}
	for _, topic := range []string{"doomed", "staying"} {
		createTopic(t, adm, topic, 2, nil)
		ids[topic] = topicID(t, adm, topic)
		if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		c := shareConsumer(t, n, group, topic)
		acceptRecords(testCtx(t), t, c, 1)
		if err := c.FlushAcks(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	if resp, err := adm.DeleteTopic(testCtx(t), "doomed"); err != nil || resp.Err != nil {
		t.Fatalf("delete: %v %v", err, resp.Err)
	}
	// the last value of every key of the group's state, by topic name (nil: a tombstone)
	last := func() map[string][]bool {
		out := map[string][]bool{}
		consumer := newClient(t, n, kgo.ConsumeTopics("__share_group_state"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		defer consumer.Close()
		ends, err := adm.ListEndOffsets(testCtx(t), "__share_group_state")
		if err != nil {
			t.Fatal(err)
		}
		want := map[int32]int64{}
		ends.Each(func(o kadm.ListedOffset) {
			if o.Offset > 0 {
				want[o.Partition] = o.Offset
			}
		})
		values := map[share.Key]bool{}
		for len(want) > 0 {
			fs := consumer.PollFetches(testCtx(t))
			if err := fs.Err(); err != nil {
				t.Fatal(err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				if r.Offset+1 >= want[r.Partition] {
					delete(want, r.Partition)
				}
				k, err := share.DecodeKey(r.Key)
				if err != nil || k.Group != group {
					return
				}
				values[k] = r.Value != nil
			})
		}
		for k, live := range values {
			for name, id := range ids {
				if k.TopicID == id {
					out[name] = append(out[name], live)
				}
			}
		}
		return out
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := last()
		if len(got["doomed"]) > 0 && !slices.Contains(got["doomed"], true) && len(got["staying"]) > 0 && !slices.Contains(got["staying"], false) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("keys of the group's state, live or not, by topic: %v; want the deleted topic's all tombstones and the other's live", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
