package api_test

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/server"
)

// listOffsetLatest asks for topic[0]'s offset for timestamp (-1: latest) at an isolation level.
func listOffsetLatest(t *testing.T, rc *rawConn, topic string, isolation int8, timestamp int64) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 6
	req.ReplicaID = -1
	req.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = timestamp
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	p := rc.do(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("list offsets: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	return p.Offset
}

// writeMarker writes a transaction marker at the node's replica of topic[0], as the coordinator's
// marker writer does.
func writeMarker(t *testing.T, n *server.Node, topic string, m partition.Marker) {
	t.Helper()
	r, ok := n.Replicas().Replica(topic, 0)
	if !ok {
		t.Fatalf("no replica of %s-0", topic)
	}
	_, wait, err := r.WriteMarker(m)
	if err == nil {
		err = wait(testCtx(t))
	}
	if err != nil {
		t.Fatalf("marker %+v: %v", m, err)
	}
}

func values(rs []*kgo.Record) []string {
	var out []string
	for _, r := range rs {
		out = append(out, string(r.Value))
	}
	return out
}

func TestAPIReadCommitted(t *testing.T) {
	// The partition's side alone: transactional batches with no coordinator behind them.
	cfg := nodeConfig(t.TempDir())
	cfg.TxnVerificationDisabled = true
	n := startNodeWith(t, cfg)
	adm := newAdmin(t, n)
	createTopic(t, adm, "tx", 1, nil)
	rc := dialRaw(t, n)
	var pids []int64
	for range 2 {
		init := kmsg.NewPtrInitProducerIDRequest()
		init.Version = 4
		resp := rc.do(init).(*kmsg.InitProducerIDResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("init producer id: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		pids = append(pids, resp.ProducerID)
	}
	txn := func(pid int64, seq int32, vals ...string) []byte {
		return testBatch(batchSpec{idempotent: true, producerID: pid, sequence: seq, attributes: 0x10, timestamp: 10, values: vals})
	}
	for _, b := range [][]byte{
		testBatch(batchSpec{values: []string{"a"}}), // 0
		txn(pids[0], 0, "aborted-1", "aborted-2"),   // 1-2
		txn(pids[1], 0, "committed"),                // 3
		testBatch(batchSpec{values: []string{"d"}}), // 4
	} {
		if p := produceRaw(t, rc, 9, "tx", 0, b); p.ErrorCode != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(p.ErrorCode))
		}
	}
	plain := testBatch(batchSpec{idempotent: true, producerID: pids[0], sequence: 2, values: []string{"x"}})
	if p := produceRaw(t, rc, 9, "tx", 0, plain); p.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("non-transactional batch in an open transaction: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	if lso, hw := listOffsetLatest(t, rc, "tx", 1, -1), listOffsetLatest(t, rc, "tx", 0, -1); lso != 1 || hw != 5 {
		t.Fatalf("latest offsets: read_committed %d, read_uncommitted %d; want 1 and 5", lso, hw)
	}
	// A timestamp lookup under read_committed finds nothing at or past the LSO.
	if c, u := listOffsetLatest(t, rc, "tx", 1, 10), listOffsetLatest(t, rc, "tx", 0, 10); c != -1 || u != 1 {
		t.Fatalf("offsets for timestamp 10: read_committed %d, read_uncommitted %d; want -1 and 1", c, u)
	}

	fetch := func(offset int64, isolation int8) kmsg.FetchResponseTopicPartition {
		req := fetchRequest(11, "tx", offset, 0, 0)
		req.IsolationLevel = isolation
		return rc.do(req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	}
	p := fetch(0, 1)
	if p.ErrorCode != 0 || p.HighWatermark != 5 || p.LastStableOffset != 1 || p.AbortedTransactions == nil || len(p.RecordBatches) == 0 {
		t.Fatalf("read_committed fetch: %v hw %d lso %d aborted %v, %d bytes", kerr.ErrorForCode(p.ErrorCode), p.HighWatermark, p.LastStableOffset, p.AbortedTransactions, len(p.RecordBatches))
	}
	if p := fetch(2, 1); p.ErrorCode != 0 || len(p.RecordBatches) != 0 || p.LastStableOffset != 1 {
		t.Fatalf("read_committed fetch between the LSO and the HW: %v, %d bytes, lso %d", kerr.ErrorForCode(p.ErrorCode), len(p.RecordBatches), p.LastStableOffset)
	}
	if p := fetch(0, 0); p.AbortedTransactions != nil || p.LastStableOffset != 1 {
		t.Fatalf("read_uncommitted fetch: aborted %v (want null), lso %d", p.AbortedTransactions, p.LastStableOffset)
	}

	del := kmsg.NewPtrDeleteRecordsRequest()
	del.Version = 2
	dt := kmsg.NewDeleteRecordsRequestTopic()
	dt.Topic = "tx"
	dp := kmsg.NewDeleteRecordsRequestTopicPartition()
	dp.Offset = 2
	dt.Partitions = append(dt.Partitions, dp)
	del.Topics = append(del.Topics, dt)
	if p := rc.do(del).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("DeleteRecords past the LSO: %v", kerr.ErrorForCode(p.ErrorCode))
	}

	dreq := kmsg.NewPtrDescribeProducersRequest()
	drt := kmsg.NewDescribeProducersRequestTopic()
	drt.Topic = "tx"
	drt.Partitions = []int32{0, 9}
	dreq.Topics = append(dreq.Topics, drt)
	dresp := rc.do(dreq).(*kmsg.DescribeProducersResponse)
	dps := dresp.Topics[0].Partitions
	if len(dps) != 2 || dps[0].ErrorCode != 0 || len(dps[0].ActiveProducers) != 2 || dps[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("describe producers: %+v", dps)
	}
	for i, ap := range dps[0].ActiveProducers {
		if ap.ProducerID != pids[i] || ap.CurrentTxnStartOffset != []int64{1, 3}[i] || ap.LastSequence != []int32{1, 0}[i] || ap.CoordinatorEpoch != -1 {
			t.Fatalf("active producer %d: %+v", i, ap)
		}
	}

	writeMarker(t, n, "tx", partition.Marker{ProducerID: pids[0], CoordinatorEpoch: 2})               // 5
	writeMarker(t, n, "tx", partition.Marker{ProducerID: pids[1], CoordinatorEpoch: 2, Commit: true}) // 6
	if lso := listOffsetLatest(t, rc, "tx", 1, -1); lso != 7 {
		t.Fatalf("read_committed latest after the markers: %d", lso)
	}
	p = fetch(0, 1)
	if len(p.AbortedTransactions) != 1 || p.AbortedTransactions[0].ProducerID != pids[0] || p.AbortedTransactions[0].FirstOffset != 1 || p.LastStableOffset != 7 {
		t.Fatalf("read_committed fetch after the markers: aborted %+v, lso %d", p.AbortedTransactions, p.LastStableOffset)
	}

	committed := consumeN(t, n, "tx", kgo.NewOffset().AtStart(), 3, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if got := values(committed); !slices.Equal(got, []string{"a", "committed", "d"}) {
		t.Fatalf("read_committed consumer: %q", got)
	}
	all := consumeN(t, n, "tx", kgo.NewOffset().AtStart(), 5, kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	if got := values(all); !slices.Equal(got, []string{"a", "aborted-1", "aborted-2", "committed", "d"}) {
		t.Fatalf("read_uncommitted consumer: %q", got)
	}
}
