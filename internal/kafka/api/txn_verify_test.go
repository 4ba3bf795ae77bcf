package api_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceTxnRaw sends one transactional batch of pid at epoch, sequence seq, to topic[0] with
// transactional id id (none when empty) at version.
func produceTxnRaw(t *testing.T, rc *rawConn, version int16, id string, pid int64, epoch int16, seq int32, topic string) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	if id != "" {
		req.TransactionID = &id
	}
	req.Acks = -1
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = testBatch(batchSpec{idempotent: true, producerID: pid, producerEpoch: epoch, sequence: seq, attributes: 0x10, values: []string{"v"}})
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return rc.do(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

// verifyOnly sends AddPartitionsToTxn v4 with VerifyOnly for topic[parts], as a partition leader does,
// and returns the partitions' codes.
func (r *rawTxn) verifyOnly(id string, pid int64, epoch int16, topic string, parts ...int32) []int16 {
	r.t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 4
	rt := kmsg.NewAddPartitionsToTxnRequestTransaction()
	rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, rt.VerifyOnly = id, pid, epoch, true
	tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	tt.Topic, tt.Partitions = topic, parts
	rt.Topics = append(rt.Topics, tt)
	req.Transactions = append(req.Transactions, rt)
	resp := r.rc.do(req).(*kmsg.AddPartitionsToTxnResponse)
	wantCode(r.t, "verify-only request", resp.ErrorCode, nil)
	var codes []int16
	for _, tr := range resp.Transactions {
		for _, t := range tr.Topics {
			for _, p := range t.Partitions {
				codes = append(codes, p.ErrorCode)
			}
		}
	}
	return codes
}

func TestTxnRawVerifyOnly(t *testing.T) {
	n := startTxnNode(t)
	createTopic(t, newAdmin(t, n), "vo", 2, nil)
	r := dialTxn(t, n)
	init := r.init("vo-id", time.Minute)
	wantCode(t, "init", init.ErrorCode, nil)
	pid, epoch := init.ProducerID, init.ProducerEpoch

	codes := r.verifyOnly("vo-id", pid, epoch, "vo", 0, 1)
	wantCode(t, "verify before any add", codes[0], kerr.InvalidTxnState)
	wantCode(t, "verify before any add", codes[1], kerr.InvalidTxnState)
	wantCode(t, "add", r.addPartitions(3, "vo-id", pid, epoch, "vo", 0)[0], nil)
	codes = r.verifyOnly("vo-id", pid, epoch, "vo", 0, 1, 7)
	wantCode(t, "verify an added partition", codes[0], nil)
	wantCode(t, "verify a partition not added", codes[1], kerr.InvalidTxnState)
	wantCode(t, "verify an unknown partition", codes[2], kerr.UnknownTopicOrPartition)
	wantCode(t, "verify at another epoch", r.verifyOnly("vo-id", pid, epoch+1, "vo", 0)[0], kerr.ProducerFenced)
	wantCode(t, "verify another producer id", r.verifyOnly("vo-id", pid+1, epoch, "vo", 0)[0], kerr.InvalidProducerIDMapping)
	wantCode(t, "verify an unknown id", r.verifyOnly("vo-none", pid, epoch, "vo", 0)[0], kerr.InvalidProducerIDMapping)
	if d := r.describe("vo-id"); len(d.Topics) != 1 || len(d.Topics[0].Partitions) != 1 {
		t.Fatalf("verify-only requests added partitions: %+v", d.Topics)
	}
}

func TestTxnRawProduceVerified(t *testing.T) {
	n := startTxnNode(t)
	createTopic(t, newAdmin(t, n), "pv", 1, nil)
	r := dialTxn(t, n)
	init := r.init("pv-id", time.Minute)
	wantCode(t, "init", init.ErrorCode, nil)
	pid, epoch := init.ProducerID, init.ProducerEpoch
	hw := func() int64 { return listOffsetLatest(t, r.rc, "pv", 0, -1) }

	// A produce to a partition never added: the right error, nothing written.
	wantCode(t, "produce v9 to a partition not added", produceTxnRaw(t, r.rc, 9, "pv-id", pid, epoch, 0, "pv").ErrorCode, kerr.InvalidTxnState)
	wantCode(t, "produce v11 to a partition not added", produceTxnRaw(t, r.rc, 11, "pv-id", pid, epoch, 0, "pv").ErrorCode, kerr.TransactionAbortable)
	wantCode(t, "transactional produce without a transactional id", produceTxnRaw(t, r.rc, 9, "", pid, epoch, 0, "pv").ErrorCode, kerr.TransactionalIDAuthorizationFailed)
	wantCode(t, "produce with an unknown transactional id", produceTxnRaw(t, r.rc, 9, "pv-none", pid, epoch, 0, "pv").ErrorCode, kerr.InvalidProducerIDMapping)
	if got := hw(); got != 0 {
		t.Fatalf("refused produces wrote to the log: high watermark %d", got)
	}

	wantCode(t, "add", r.addPartitions(3, "pv-id", pid, epoch, "pv", 0)[0], nil)
	wantCode(t, "produce at a fenced epoch", produceTxnRaw(t, r.rc, 11, "pv-id", pid, epoch+1, 0, "pv").ErrorCode, kerr.InvalidProducerEpoch)
	for seq := range int32(3) {
		wantCode(t, "produce to an added partition", produceTxnRaw(t, r.rc, 11, "pv-id", pid, epoch, seq, "pv").ErrorCode, nil)
	}
	wantCode(t, "commit", r.endTxn(3, "pv-id", pid, epoch, true), nil)
	r.waitState("pv-id", "CompleteCommit")
	// The next transaction has not added the partition: its first batch is refused again.
	wantCode(t, "produce after the commit", produceTxnRaw(t, r.rc, 11, "pv-id", pid, epoch, 3, "pv").ErrorCode, kerr.TransactionAbortable)
	if got := hw(); got != 4 {
		t.Fatalf("high watermark %d, want 4 (three batches and the marker)", got)
	}
}
