package api_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// acquireAll sends ShareFetches for member from epoch on, strict to 500 records, until one acquires
// something, and returns how many records it acquired and the next epoch.
func acquireAll(t *testing.T, cl *kgo.Client, group, member string, epoch int32, id [16]byte) (int64, int32) {
	t.Helper()
	ctx := testCtx(t)
	for ; ctx.Err() == nil; epoch++ {
		req := shareFetchReq(group, member, epoch, id)
		req.MaxRecords, req.ShareAcquireMode = 500, 1
		resp := doShareFetch(t, cl, req)
		if resp.ErrorCode != 0 {
			t.Fatalf("share fetch: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		var n int64
		for _, tp := range resp.Topics {
			for _, p := range tp.Partitions {
				if p.ErrorCode != 0 {
					t.Fatalf("share fetch partition: %v", kerr.ErrorForCode(p.ErrorCode))
				}
				for _, a := range p.AcquiredRecords {
					n += a.LastOffset - a.FirstOffset + 1
				}
			}
		}
		if n > 0 {
			return n, epoch + 1
		}
	}
	t.Fatal("nothing acquired")
	return 0, 0
}

// TestShareGroupRecordLocksConfig: share.partition.max.record.locks caps a group's in-flight window.
// Of 150 records a member asking for 500 acquires the group's 100, and nothing more while it holds
// them; a group without the config acquires all 150; raising the group's cap to 150 applies to the
// running owner, whose window then takes the other 50 while the member keeps its 100.
func TestShareGroupRecordLocksConfig(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	cl := newClient(t, n)
	const topic, group, plain = "share-locks", "sg-locks", "sg-locks-default"
	createTopic(t, adm, topic, 1, nil)
	setGroupConfigs(t, cl, group, "share.auto.offset.reset", "earliest", "share.partition.max.record.locks", "100")
	setGroupConfigs(t, cl, plain, "share.auto.offset.reset", "earliest")
	prod := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	rs := make([]*kgo.Record, 150)
	for i := range rs {
		rs[i] = &kgo.Record{Topic: topic, Partition: 0, Value: []byte("v")}
	}
	if err := prod.ProduceSync(testCtx(t), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	id := topicID(t, adm, topic)

	got, epoch := acquireAll(t, cl, group, "a", 0, id)
	if got != 100 {
		t.Fatalf("acquired %d records, want the group's cap of 100", got)
	}
	req := shareFetchReq(group, "a", epoch, id)
	req.MaxRecords, req.ShareAcquireMode = 500, 1
	if resp := doShareFetch(t, cl, req); len(resp.Topics) > 0 && len(resp.Topics[0].Partitions[0].AcquiredRecords) > 0 {
		t.Fatalf("acquired %+v past the full window", resp.Topics[0].Partitions[0].AcquiredRecords)
	}
	epoch++
	if got, _ := acquireAll(t, cl, plain, "a", 0, id); got != 150 {
		t.Fatalf("a group without the config acquired %d, want 150", got)
	}

	setGroupConfigs(t, cl, group, "share.partition.max.record.locks", "150")
	if got, _ := acquireAll(t, cl, group, "a", epoch, id); got != 50 {
		t.Fatalf("after the cap was raised acquired %d, want the 50 past the 100 held", got)
	}
}

// TestShareGroupRenewConfig: a franz-go share consumer's RENEW (Record.Ack(kgo.AckRenew), KIP-1222)
// is refused with INVALID_RECORD_STATE in a group that does not set share.renew.acknowledge.enable,
// as Kafka refuses it, and taken in one that sets it true; the renewed record is then accepted.
func TestShareGroupRenewConfig(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	admin := newClient(t, n)
	const topic = "share-renew"
	createTopic(t, adm, topic, 1, nil)
	prod := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := prod.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Partition: 0, Value: []byte("slow")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	renew := func(group string) (renewErr, acceptErr error) {
		t.Helper()
		var mu sync.Mutex
		var results []kgo.ShareAckResults
		c := newClient(t, n, kgo.ShareGroup(group), kgo.ConsumeTopics(topic),
			kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
				mu.Lock()
				defer mu.Unlock()
				results = append(results, rs)
			}))
		ctx := testCtx(t)
		var rec *kgo.Record
		for rec == nil && ctx.Err() == nil {
			fs := c.PollRecords(ctx, 1)
			if rs := fs.Records(); len(rs) > 0 {
				rec = rs[0]
			}
		}
		if rec == nil {
			t.Fatalf("%s: no record", group)
		}
		last := func() error {
			if err := c.FlushAcks(ctx); err != nil {
				t.Fatalf("%s: flush: %v", group, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(results) == 0 {
				t.Fatalf("%s: no acknowledgement result", group)
			}
			return results[len(results)-1].Error()
		}
		rec.Ack(kgo.AckRenew)
		renewErr = last()
		rec.Ack(kgo.AckAccept)
		return renewErr, last()
	}

	const off, on = "sg-renew-off", "sg-renew-on"
	setGroupConfigs(t, admin, off, "share.auto.offset.reset", "earliest")
	setGroupConfigs(t, admin, on, "share.auto.offset.reset", "earliest", "share.renew.acknowledge.enable", "true")
	if renewErr, _ := renew(off); !errors.Is(renewErr, kerr.InvalidRecordState) {
		t.Fatalf("RENEW in a group without share.renew.acknowledge.enable: %v, want INVALID_RECORD_STATE", renewErr)
	}
	if renewErr, acceptErr := renew(on); renewErr != nil || acceptErr != nil {
		t.Fatalf("RENEW in a group that allows it: %v; the accept after it: %v", renewErr, acceptErr)
	}
}

// TestShareAutoOffsetResetByDuration: a share group with share.auto.offset.reset=by_duration:PT1H
// starts a partition without state at its first batch at most an hour old, so a franz-go share
// consumer gets the records produced with recent timestamps and none of those two hours old before
// them; a group whose duration reaches past every record (by_duration:P1D) gets them all, and one
// whose duration reaches none of them (by_duration:PT1M, every record older) starts at the end and gets
// only records produced after it started.
func TestShareAutoOffsetResetByDuration(t *testing.T) {
	n := startNode(t)
	const topic = "timed"
	createTopic(t, newAdmin(t, n), topic, 1, nil)
	prod := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	now := time.Now()
	for i, age := range []time.Duration{3 * time.Hour, 2 * time.Hour, 2 * time.Hour, 30 * time.Minute, 5 * time.Minute, 2 * time.Minute} {
		r := &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("r%d", i)), Timestamp: now.Add(-age)}
		if err := prod.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cfg := newClient(t, n)
	for group, reset := range map[string]string{"sg-hour": "by_duration:PT1H", "sg-day": "by_duration:P1D", "sg-minute": "by_duration:PT1M"} {
		setGroupConfigs(t, cfg, group, "share.auto.offset.reset", reset)
	}
	for group, want := range map[string][]string{"sg-hour": {"r3", "r4", "r5"}, "sg-day": {"r0", "r1", "r2", "r3", "r4", "r5"}} {
		c := shareConsumer(t, n, group, topic)
		if got := acceptRecords(testCtx(t), t, c, len(want)); !slices.Equal(got, want) {
			t.Errorf("%s: got %v, want %v", group, got, want)
		}
	}
	c := shareConsumer(t, n, "sg-minute", topic)
	ctx := testCtx(t)
	for late := 0; ; late++ {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := c.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			t.Fatal("sg-minute got nothing")
		}
		for _, r := range fs.Records() {
			if !strings.HasPrefix(string(r.Value), "late-") {
				t.Fatalf("sg-minute got %s, want only records produced after it started", r.Value)
			}
		}
		if len(fs.Records()) > 0 {
			return
		}
		// produced past the end, wherever the consumer's partition started meanwhile
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("late-%d", late))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestShareIsolationLevel: franz-go share consumers in a group with share.isolation.level=read_committed
// get the records of committed transactions and those produced outside any, never those of an aborted
// transaction, and nothing at or past an open transaction until it commits; a group left at
// read_uncommitted gets every record, the open transaction's at once.
func TestShareIsolationLevel(t *testing.T) {
	n := startNode(t)
	const topic = "txn-share"
	createTopic(t, newAdmin(t, n), topic, 1, nil)
	plain := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	txn := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID("share-txn"))
	ctx := testCtx(t)
	produce := func(cl *kgo.Client, values ...string) {
		t.Helper()
		for _, v := range values {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
		}
	}
	transaction := func(end kgo.TransactionEndTry, values ...string) {
		t.Helper()
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		produce(txn, values...)
		if err := txn.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	cfg := newClient(t, n)
	setGroupConfigs(t, cfg, "sg-committed", "share.isolation.level", "read_committed", "share.auto.offset.reset", "earliest")
	setGroupConfigs(t, cfg, "sg-uncommitted", "share.auto.offset.reset", "earliest")

	produce(plain, "p0")
	transaction(kgo.TryCommit, "c1", "c2")
	transaction(kgo.TryAbort, "a1", "a2")
	produce(plain, "p1")
	transaction(kgo.TryCommit, "c3")
	transaction(kgo.TryAbort, "a3")
	// an open transaction: its records and every record after it wait for its end
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(txn, "o1")
	produce(plain, "p2")

	// consume accepts want records from c, then polls a second more: a record there is one too many
	consume := func(c *kgo.Client, want int) []string {
		t.Helper()
		got := acceptRecords(ctx, t, c, want)
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		for _, r := range c.PollFetches(pctx).Records() {
			got = append(got, string(r.Value))
		}
		return got
	}
	check := func(what string, got, want []string) {
		t.Helper()
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: got %v, want %v", what, got, want)
		}
	}
	uncommitted := shareConsumer(t, n, "sg-uncommitted", topic)
	check("read_uncommitted", consume(uncommitted, 10), []string{"p0", "c1", "c2", "a1", "a2", "p1", "c3", "a3", "o1", "p2"})

	committed := shareConsumer(t, n, "sg-committed", topic)
	check("read_committed, the transaction open", consume(committed, 5), []string{"p0", "c1", "c2", "p1", "c3"})
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	check("read_committed, the transaction committed", consume(committed, 2), []string{"o1", "p2"})

	// the aborted records and the markers were archived, not left in flight: once the last
	// acknowledgements are written the start offset is the log's end
	ends, err := newAdmin(t, n).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	if err := committed.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	if start, _ := (shareAdmin{t: t, cl: cfg}).offset("sg-committed", topic, 0); start != end.Offset {
		t.Fatalf("read_committed group's start offset %d, want the log end %d", start, end.Offset)
	}
}

// TestShareGroupConfigKeepsLocks: changing a live group's lock duration and turning RENEW on does not
// give back the records its members hold: another member acquires none of them after the change, the
// holder's RENEW of them succeeds and its ACCEPT too, and the next acquisition carries the new lock
// duration. A change of key order still starts a new owner, whose restore hands the held records out
// again.
func TestShareGroupConfigKeepsLocks(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	cl := newClient(t, n)
	const topic, group = "retuned", "sg-retuned"
	createTopic(t, adm, topic, 1, nil)
	setGroupConfigs(t, cl, group, "share.auto.offset.reset", "earliest")
	id := topicID(t, adm, topic)
	produce := func(k int) {
		t.Helper()
		var recs []*kgo.Record
		for i := range k {
			recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "r%d", i)})
		}
		if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(10)
	held, epochA := acquireAll(t, cl, group, "a", 0, id)
	if held != 10 {
		t.Fatalf("a acquired %d, want 10", held)
	}
	setGroupConfigs(t, cl, group, "share.record.lock.duration.ms", "20000", "share.renew.acknowledge.enable", "true")
	fetchB := doShareFetch(t, cl, shareFetchReq(group, "b", 0, id))
	for _, tp := range fetchB.Topics {
		for _, p := range tp.Partitions {
			if len(p.AcquiredRecords) > 0 {
				t.Fatalf("b acquired %v after the change: the records a holds were given back", p.AcquiredRecords)
			}
		}
	}
	ack, err := shareAckReq(group, "a", epochA, id, [3]int64{0, 9, 4}).RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := ack.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("a's RENEW after the change: %v", kerr.ErrorForCode(code))
	}
	resp := doShareFetch(t, cl, shareFetchReq(group, "a", epochA+1, id, ackBatch(0, 9, 1)))
	if code := resp.Topics[0].Partitions[0].AcknowledgeErrorCode; code != 0 {
		t.Fatalf("a's ACCEPT after the change: %v", kerr.ErrorForCode(code))
	}
	produce(1)
	for epoch := epochA + 2; ; epoch++ {
		resp := doShareFetch(t, cl, shareFetchReq(group, "a", epoch, id))
		if len(resp.Topics) > 0 && len(resp.Topics[0].Partitions[0].AcquiredRecords) > 0 {
			if resp.AcquisitionLockTimeoutMillis != 20000 {
				t.Fatalf("lock duration %d ms after the change, want 20000", resp.AcquisitionLockTimeoutMillis)
			}
			break
		}
	}

	// key order decides what the owner tracks: changing it starts a new owner, which restores the
	// committed state, so the record a holds goes to b
	setGroupConfigs(t, cl, group, "weir.share.key.ordered", "true")
	if got, _ := acquireAll(t, cl, group, "b", 1, id); got != 1 {
		t.Fatalf("b acquired %d after the key-order change, want the one record a held", got)
	}
}
