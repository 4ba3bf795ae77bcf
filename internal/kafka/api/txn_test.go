package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/kafka/api"
	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/server"
	"github.com/weir-mq/weir/internal/txn"
)

// startTxnNode runs a node whose transaction coordinator sweeps for timed-out transactions every
// 100ms, with one __transaction_state partition.
func startTxnNode(t *testing.T) *server.Node {
	t.Helper()
	cfg := nodeConfig(t.TempDir())
	cfg.Txn = txn.Config{StatePartitions: 1, AbortInterval: 100 * time.Millisecond}
	cfg.Groups.OffsetsPartitions = 1
	return startNodeWith(t, cfg)
}

// rawTxn is a raw connection to a node's transaction coordinator.
type rawTxn struct {
	t  *testing.T
	rc *rawConn
}

// dialTxn connects to n after finding the transaction coordinator, as a client does first: this
// creates __transaction_state.
func dialTxn(t *testing.T, n *server.Node) *rawTxn {
	t.Helper()
	r := &rawTxn{t: t, rc: dialRaw(t, n)}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version = 3
	req.CoordinatorType, req.CoordinatorKey = 1, "any"
	wantCode(t, "find coordinator", r.rc.do(req).(*kmsg.FindCoordinatorResponse).ErrorCode, nil)
	return r
}

// init sends InitProducerId v4 for id until it is not retriable, returning the answer.
func (r *rawTxn) init(id string, timeout time.Duration) *kmsg.InitProducerIDResponse {
	r.t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version = 4
		req.TransactionalID = &id
		req.TransactionTimeoutMillis = int32(timeout.Milliseconds())
		resp := r.rc.do(req).(*kmsg.InitProducerIDResponse)
		if !retriableTxn(resp.ErrorCode) || time.Now().After(deadline) {
			return resp
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func retriableTxn(code int16) bool {
	return code == kerr.CoordinatorLoadInProgress.Code || code == kerr.NotCoordinator.Code ||
		code == kerr.CoordinatorNotAvailable.Code || code == kerr.ConcurrentTransactions.Code
}

func (r *rawTxn) addPartitions(version int16, id string, pid int64, epoch int16, topic string, parts ...int32) []int16 {
	r.t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = version
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = topic, parts
	req.Topics = append(req.Topics, rt)
	resp := r.rc.do(req).(*kmsg.AddPartitionsToTxnResponse)
	var codes []int16
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			codes = append(codes, p.ErrorCode)
		}
	}
	return codes
}

func (r *rawTxn) endTxn(version int16, id string, pid int64, epoch int16, commit bool) int16 {
	r.t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.Version = version
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	return r.rc.do(req).(*kmsg.EndTxnResponse).ErrorCode
}

func (r *rawTxn) describe(id string) kmsg.DescribeTransactionsResponseTransactionState {
	r.t.Helper()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	return r.rc.do(req).(*kmsg.DescribeTransactionsResponse).TransactionStates[0]
}

// waitState polls DescribeTransactions until id is in state.
func (r *rawTxn) waitState(id, state string) kmsg.DescribeTransactionsResponseTransactionState {
	r.t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		d := r.describe(id)
		if d.State == state {
			return d
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s: state %q (error %d), want %s", id, d.State, d.ErrorCode, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	var wantCode int16
	if want != nil {
		wantCode = want.Code
	}
	if got != wantCode {
		t.Fatalf("%s: %s, want %v", what, api.ErrorName(got), want)
	}
}

// marker is one transaction marker read back from a partition.
type marker struct {
	record.Marker
	ProducerID    int64
	ProducerEpoch int16
}

// markers returns the transaction markers in partition p of topic, read_uncommitted from offset 0.
func markers(t *testing.T, n *server.Node, topic string, p int32) []marker {
	t.Helper()
	rc := dialRaw(t, n)
	req := kmsg.NewPtrFetchRequest()
	req.Version = 11
	req.MaxBytes = 1 << 20
	req.IsolationLevel = 0
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.PartitionMaxBytes = p, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := rc.do(req).(*kmsg.FetchResponse)
	var out []marker
	for batch, err := range record.Batches(resp.Topics[0].Partitions[0].RecordBatches) {
		if err != nil {
			t.Fatalf("fetched batches: %v", err)
		}
		h, err := record.ParseHeader(batch)
		if err != nil {
			t.Fatal(err)
		}
		if !h.Control() {
			continue
		}
		m, err := record.ParseMarker(batch)
		if err != nil {
			t.Fatalf("control batch at %d: %v", h.BaseOffset, err)
		}
		out = append(out, marker{Marker: m, ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch})
	}
	return out
}

func TestTxnRawCommitWritesMarkers(t *testing.T) {
	n := startTxnNode(t)
	createTopic(t, newAdmin(t, n), "t", 2, nil)
	r := dialTxn(t, n)
	init := r.init("tx", time.Minute)
	wantCode(t, "init", init.ErrorCode, nil)
	if init.ProducerID < 0 || init.ProducerEpoch != 0 {
		t.Fatalf("init: producer %d epoch %d", init.ProducerID, init.ProducerEpoch)
	}
	for _, c := range r.addPartitions(3, "tx", init.ProducerID, 0, "t", 0, 1) {
		wantCode(t, "add", c, nil)
	}
	d := r.describe("tx")
	if d.State != "Ongoing" || len(d.Topics) != 1 || len(d.Topics[0].Partitions) != 2 || d.StartTimestamp < 0 {
		t.Fatalf("described %+v", d)
	}
	wantCode(t, "commit", r.endTxn(3, "tx", init.ProducerID, 0, true), nil)
	r.waitState("tx", "CompleteCommit")
	wantCode(t, "commit retried", r.endTxn(3, "tx", init.ProducerID, 0, true), nil)
	wantCode(t, "abort after commit", r.endTxn(3, "tx", init.ProducerID, 0, false), kerr.InvalidTxnState)
	for p := range int32(2) {
		ms := markers(t, n, "t", p)
		if len(ms) != 1 || !ms[0].Commit || ms[0].ProducerID != init.ProducerID || ms[0].ProducerEpoch != 0 {
			t.Fatalf("partition %d markers %+v", p, ms)
		}
	}
	// The next transaction aborts; the id is listed.
	wantCode(t, "add", r.addPartitions(3, "tx", init.ProducerID, 0, "t", 1)[0], nil)
	wantCode(t, "abort", r.endTxn(3, "tx", init.ProducerID, 0, false), nil)
	r.waitState("tx", "CompleteAbort")
	if ms := markers(t, n, "t", 1); len(ms) != 2 || ms[1].Commit {
		t.Fatalf("markers after the abort %+v", ms)
	}
	listed, err := newAdmin(t, n).ListTransactions(testCtx(t), nil, []string{"CompleteAbort"})
	if err != nil {
		t.Fatal(err)
	}
	if got := listed.TransactionalIDs(); len(got) != 1 || got[0] != "tx" {
		t.Fatalf("listed %v", got)
	}
}

func TestTxnRawBadInput(t *testing.T) {
	n := startTxnNode(t)
	createTopic(t, newAdmin(t, n), "t", 1, nil)
	r := dialTxn(t, n)
	init := r.init("tx", time.Minute)
	wantCode(t, "init", init.ErrorCode, nil)
	pid := init.ProducerID
	wantCode(t, "empty id", r.init("", time.Minute).ErrorCode, kerr.InvalidRequest)
	wantCode(t, "40 KiB id", r.init(strings.Repeat("x", 40<<10), time.Minute).ErrorCode, kerr.InvalidRequest)
	wantCode(t, "timeout over the max", r.init("tx", 16*time.Minute).ErrorCode, kerr.InvalidTransactionTimeout)
	wantCode(t, "zero timeout", r.init("tx", 0).ErrorCode, kerr.InvalidTransactionTimeout)
	wantCode(t, "add for an unknown id", r.addPartitions(3, "nobody", 5, 0, "t", 0)[0], kerr.InvalidProducerIDMapping)
	wantCode(t, "end for an unknown id", r.endTxn(3, "nobody", 5, 0, true), kerr.InvalidProducerIDMapping)
	wantCode(t, "add with an empty id", r.addPartitions(3, "", pid, 0, "t", 0)[0], kerr.InvalidRequest)
	wantCode(t, "add with another producer id", r.addPartitions(3, "tx", pid+1, 0, "t", 0)[0], kerr.InvalidProducerIDMapping)
	wantCode(t, "add at another epoch v3", r.addPartitions(3, "tx", pid, 3, "t", 0)[0], kerr.ProducerFenced)
	wantCode(t, "add at another epoch v1", r.addPartitions(1, "tx", pid, 3, "t", 0)[0], kerr.InvalidProducerEpoch)
	codes := r.addPartitions(3, "tx", pid, 0, "t", 0, 7)
	wantCode(t, "add beside an unknown partition", codes[0], kerr.OperationNotAttempted)
	wantCode(t, "add of an unknown partition", codes[1], kerr.UnknownTopicOrPartition)
	wantCode(t, "end without a transaction", r.endTxn(3, "tx", pid, 0, true), kerr.InvalidTxnState)
	if d := r.describe("tx"); d.State != "Empty" || len(d.Topics) != 0 || d.ProducerEpoch != 0 {
		t.Fatalf("bad input changed the id: %+v", d)
	}
	wantCode(t, "describe an unknown id", r.describe("nobody").ErrorCode, kerr.TransactionalIDNotFound)
	// Nothing was written for the refused ids.
	listed, err := newAdmin(t, n).ListTransactions(testCtx(t), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := listed.TransactionalIDs(); len(got) != 1 || got[0] != "tx" {
		t.Fatalf("listed %v", got)
	}
}

func TestTxnRawTimeoutAbortsAndFences(t *testing.T) {
	n := startTxnNode(t)
	createTopic(t, newAdmin(t, n), "t", 1, nil)
	r := dialTxn(t, n)
	init := r.init("tx", 300*time.Millisecond)
	wantCode(t, "add", r.addPartitions(3, "tx", init.ProducerID, 0, "t", 0)[0], nil)
	d := r.waitState("tx", "CompleteAbort")
	if d.ProducerEpoch != 1 {
		t.Fatalf("after the timeout: epoch %d, want 1", d.ProducerEpoch)
	}
	if ms := markers(t, n, "t", 0); len(ms) != 1 || ms[0].Commit || ms[0].ProducerEpoch != 1 {
		t.Fatalf("markers %+v", ms)
	}
	wantCode(t, "the fenced producer's commit", r.endTxn(3, "tx", init.ProducerID, 0, true), kerr.ProducerFenced)
	wantCode(t, "the fenced producer's commit v1", r.endTxn(1, "tx", init.ProducerID, 0, true), kerr.InvalidProducerEpoch)
}

func TestTxnRawInitFencesOngoing(t *testing.T) {
	n := startTxnNode(t)
	createTopic(t, newAdmin(t, n), "t", 1, nil)
	r := dialTxn(t, n)
	first := r.init("tx", time.Minute)
	wantCode(t, "add", r.addPartitions(3, "tx", first.ProducerID, 0, "t", 0)[0], nil)
	second := r.init("tx", time.Minute)
	wantCode(t, "second init", second.ErrorCode, nil)
	if second.ProducerID != first.ProducerID || second.ProducerEpoch != 2 {
		t.Fatalf("second init: producer %d epoch %d, want %d epoch 2 (fence, then bump)", second.ProducerID, second.ProducerEpoch, first.ProducerID)
	}
	if ms := markers(t, n, "t", 0); len(ms) != 1 || ms[0].Commit || ms[0].ProducerEpoch != 1 {
		t.Fatalf("markers %+v", ms)
	}
	wantCode(t, "the first producer's add", r.addPartitions(3, "tx", first.ProducerID, 0, "t", 0)[0], kerr.ProducerFenced)
}

func TestTxnFindCoordinator(t *testing.T) {
	n := startTxnNode(t)
	cl := newClient(t, n)
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType, req.CoordinatorKey = 1, "tx"
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "find coordinator", resp.ErrorCode, nil)
	if resp.NodeID != 1 {
		t.Fatalf("coordinator %d", resp.NodeID)
	}
	req.CoordinatorKey = ""
	if resp, err = req.RequestWith(testCtx(t), cl); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "find coordinator of the empty id", resp.ErrorCode, kerr.InvalidRequest)
	topics, err := newAdmin(t, n).ListTopicsWithInternal(testCtx(t), txn.StateTopic)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := topics[txn.StateTopic]; !ok || !d.IsInternal || len(d.Partitions) != 1 {
		t.Fatalf("%s: %+v", txn.StateTopic, d)
	}
}

func TestTxnRawWriteTxnMarkers(t *testing.T) {
	n := startTxnNode(t)
	createTopic(t, newAdmin(t, n), "t", 1, nil)
	rc := dialRaw(t, n)
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = 42, 3, true, 0
	for _, tp := range []struct {
		topic string
		part  int32
	}{{"t", 0}, {"t", 5}, {"nope", 0}} {
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = tp.topic, []int32{tp.part}
		m.Topics = append(m.Topics, mt)
	}
	req.Markers = append(req.Markers, m)
	resp := rc.do(req).(*kmsg.WriteTxnMarkersResponse)
	want := []*kerr.Error{nil, kerr.UnknownTopicOrPartition, kerr.UnknownTopicOrPartition}
	for i, rt := range resp.Markers[0].Topics {
		wantCode(t, rt.Topic, rt.Partitions[0].ErrorCode, want[i])
	}
	if ms := markers(t, n, "t", 0); len(ms) != 1 || !ms[0].Commit || ms[0].ProducerID != 42 || ms[0].ProducerEpoch != 3 {
		t.Fatalf("markers %+v", ms)
	}
	bad := kmsg.NewPtrWriteTxnMarkersRequest()
	bad.Version = 1
	bm := kmsg.NewWriteTxnMarkersRequestMarker()
	bm.ProducerID, bm.ProducerEpoch = -1, 0
	bt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	bt.Topic, bt.Partitions = "t", []int32{0}
	bm.Topics = append(bm.Topics, bt)
	bad.Markers = append(bad.Markers, bm)
	wantCode(t, "no producer id", rc.do(bad).(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode, kerr.InvalidRequest)
	if ms := markers(t, n, "t", 0); len(ms) != 1 {
		t.Fatalf("a refused marker was written: %+v", ms)
	}
}
