package api_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/server"
	"github.com/weir-mq/weir/internal/txn"
)

// startTxnNodeTV is startTxnNode finalizing transaction.version tv.
func startTxnNodeTV(t *testing.T, tv int16) *server.Node {
	t.Helper()
	cfg := nodeConfig(t.TempDir())
	cfg.Txn = txn.Config{StatePartitions: 1, AbortInterval: 100 * time.Millisecond}
	cfg.Groups.OffsetsPartitions = 1
	cfg.TransactionVersion = tv
	return startNodeWith(t, cfg)
}

// endTxnV5 sends EndTxn v5 and returns its answer.
func (r *rawTxn) endTxnV5(id string, pid int64, epoch int16, commit bool) *kmsg.EndTxnResponse {
	r.t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.Version = 5
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	return r.rc.do(req).(*kmsg.EndTxnResponse)
}

func TestTxnApiVersionsFeatures(t *testing.T) {
	for _, tv := range []int16{1, 2} {
		t.Run(fmt.Sprintf("TV%d", tv), func(t *testing.T) {
			rc := dialRaw(t, startTxnNodeTV(t, tv))
			for _, v := range []int16{2, 3, 4} {
				req := kmsg.NewPtrApiVersionsRequest()
				req.Version = v
				req.ClientSoftwareName, req.ClientSoftwareVersion = "weir-test", "1.0"
				resp := rc.do(req).(*kmsg.ApiVersionsResponse)
				keys := map[int16]int16{}
				for _, k := range resp.ApiKeys {
					keys[k.ApiKey] = k.MaxVersion
				}
				var finalized []kmsg.ApiVersionsResponseFinalizedFeature
				for _, f := range resp.FinalizedFeatures {
					if f.Name == "transaction.version" {
						finalized = append(finalized, f)
					}
				}
				switch {
				case v < 3 && (len(finalized) != 0 || len(resp.SupportedFeatures) != 0):
					t.Fatalf("v%d carries features: %+v %+v", v, resp.FinalizedFeatures, resp.SupportedFeatures)
				case v >= 3 && resp.FinalizedFeaturesEpoch < 0:
					t.Fatalf("v%d: finalized features epoch %d; Java ignores features below 0", v, resp.FinalizedFeaturesEpoch)
				case v >= 3 && tv == 2 && (len(finalized) != 1 || finalized[0].MinVersionLevel != 2 || finalized[0].MaxVersionLevel != 2):
					t.Fatalf("v%d: finalized %+v, want transaction.version 2", v, finalized)
				case tv == 1 && len(finalized) != 0:
					t.Fatalf("v%d: TV1 finalizes %+v", v, finalized)
				case v == 3 && len(resp.SupportedFeatures) != 0:
					t.Fatalf("v3 carries a supported range starting at 0: %+v", resp.SupportedFeatures)
				case v == 4 && !slices.ContainsFunc(resp.SupportedFeatures, func(f kmsg.ApiVersionsResponseSupportedFeature) bool {
					return f.Name == "transaction.version" && f.MinVersion == 0 && f.MaxVersion == 2
				}):
					t.Fatalf("v4 supported features %+v, want transaction.version 0-2", resp.SupportedFeatures)
				}
				wantMax := map[int16]int16{0: 11, 24: 3, 26: 4, 27: 2, 28: 4}
				if tv == 2 {
					wantMax = map[int16]int16{0: 12, 24: 3, 26: 5, 27: 2, 28: 5}
				}
				for k, m := range wantMax {
					if keys[k] != m {
						t.Fatalf("v%d: key %d max %d, want %d", v, k, keys[k], m)
					}
				}
			}
		})
	}
}

// TestTxnRawTV2 drives KIP-890 part 2 with raw requests: Produce v12 adds its partition, EndTxn v5
// bumps the epoch and answers retries by the epoch before the bump, markers go out at the bumped epoch,
// and a Produce v11 still needs the client's own add.
func TestTxnRawTV2(t *testing.T) {
	n := startTxnNodeTV(t, 2)
	createTopic(t, newAdmin(t, n), "v2", 2, nil)
	r := dialTxn(t, n)
	init := r.init("v2-id", time.Minute)
	wantCode(t, "init", init.ErrorCode, nil)
	pid, epoch := init.ProducerID, init.ProducerEpoch

	wantCode(t, "Produce v12 to a partition not added", produceTxnTo(t, r.rc, 12, "v2-id", pid, epoch, 0, "v2", 0).ErrorCode, nil)
	wantCode(t, "Produce v11 to a partition not added (TV2 or not)", produceTxnTo(t, r.rc, 11, "v2-id", pid, epoch, 0, "v2", 1).ErrorCode, kerr.TransactionAbortable)
	wantCode(t, "Produce v12, the partition's second batch", produceTxnTo(t, r.rc, 12, "v2-id", pid, epoch, 1, "v2", 0).ErrorCode, nil)
	if d := r.describe("v2-id"); d.State != "Ongoing" || len(d.Topics) != 1 || len(d.Topics[0].Partitions) != 1 {
		t.Fatalf("after the implicit add: %+v", d)
	}
	wantCode(t, "EndTxn v5 commit at another epoch", r.endTxnV5("v2-id", pid, epoch+1, true).ErrorCode, kerr.ProducerFenced)
	end := r.endTxnV5("v2-id", pid, epoch, true)
	wantCode(t, "EndTxn v5 commit", end.ErrorCode, nil)
	if end.ProducerID != pid || end.ProducerEpoch != epoch+1 {
		t.Fatalf("EndTxn v5 answered producer %d epoch %d, want %d and %d", end.ProducerID, end.ProducerEpoch, pid, epoch+1)
	}
	r.waitState("v2-id", "CompleteCommit")
	// The client's retry carries the epoch before the bump and gets the same answer.
	retry := r.endTxnV5("v2-id", pid, epoch, true)
	wantCode(t, "a retried EndTxn v5", retry.ErrorCode, nil)
	if retry.ProducerID != pid || retry.ProducerEpoch != epoch+1 {
		t.Fatalf("the retry answered producer %d epoch %d", retry.ProducerID, retry.ProducerEpoch)
	}
	wantCode(t, "a retry in the other direction", r.endTxnV5("v2-id", pid, epoch, false).ErrorCode, kerr.InvalidTxnState)
	if ms := markers(t, n, "v2", 0); len(ms) != 1 || !ms[0].Commit || ms[0].ProducerEpoch != epoch+1 {
		t.Fatalf("markers %+v, want one COMMIT at the bumped epoch %d", ms, epoch+1)
	}
	// The next transaction runs at the bumped epoch; the old one is fenced at the partition.
	epoch++
	wantCode(t, "Produce v12 at the old epoch", produceTxnTo(t, r.rc, 12, "v2-id", pid, epoch-1, 2, "v2", 0).ErrorCode, kerr.InvalidProducerEpoch)
	wantCode(t, "Produce v12 in the next transaction", produceTxnTo(t, r.rc, 12, "v2-id", pid, epoch, 0, "v2", 0).ErrorCode, nil)
	end = r.endTxnV5("v2-id", pid, epoch, false)
	wantCode(t, "EndTxn v5 abort", end.ErrorCode, nil)
	r.waitState("v2-id", "CompleteAbort")
	// An abort with no transaction open (the client is unsure) is taken and bumps the epoch.
	end = r.endTxnV5("v2-id", pid, end.ProducerEpoch, false)
	wantCode(t, "EndTxn v5 abort with no transaction", end.ErrorCode, nil)
	if end.ProducerEpoch != epoch+2 {
		t.Fatalf("abort with no transaction: epoch %d, want %d", end.ProducerEpoch, epoch+2)
	}
	r.waitState("v2-id", "CompleteAbort")
	wantCode(t, "EndTxn v5 commit with no transaction", r.endTxnV5("v2-id", pid, end.ProducerEpoch, true).ErrorCode, kerr.InvalidTxnState)
	fetch := fetchRequest(11, "v2", 0, 0, 0)
	fetch.IsolationLevel = 1
	p := r.rc.do(fetch).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.LastStableOffset != p.HighWatermark || len(p.AbortedTransactions) != 1 || p.AbortedTransactions[0].FirstOffset != 3 {
		t.Fatalf("read_committed fetch: %v lso %d hw %d aborted %+v", kerr.ErrorForCode(p.ErrorCode), p.LastStableOffset, p.HighWatermark, p.AbortedTransactions)
	}
}

// TestTxnRawTV2OffsetCommit: TxnOffsetCommit v5 adds the group's partition to the transaction itself.
func TestTxnRawTV2OffsetCommit(t *testing.T) {
	n := startTxnNodeTV(t, 2)
	createTopic(t, newAdmin(t, n), "in", 1, nil)
	r := dialTxn(t, n)
	init := r.init("tx", time.Minute)
	wantCode(t, "init", init.ErrorCode, nil)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKey = 3, "g5"
	wantCode(t, "find the group coordinator", r.rc.do(fc).(*kmsg.FindCoordinatorResponse).ErrorCode, nil)

	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version, req.TransactionalID, req.Group = 5, "tx", "g5"
	req.ProducerID, req.ProducerEpoch, req.Generation = init.ProducerID, init.ProducerEpoch, -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "in"
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Offset = 42
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	var code int16
	for range 100 {
		code = r.rc.do(req).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
		if code != kerr.CoordinatorLoadInProgress.Code {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	wantCode(t, "TxnOffsetCommit v5", code, nil)
	if d := r.describe("tx"); d.State != "Ongoing" || len(d.Topics) != 1 || d.Topics[0].Topic != "__consumer_offsets" {
		t.Fatalf("after TxnOffsetCommit v5: %+v", d)
	}
	wantFetched(t, offsetFetch(t, r.rc, "g5", "in", []int32{0}, true), 0, -1, kerr.UnstableOffsetCommit.Code)
	wantCode(t, "EndTxn v5", r.endTxnV5("tx", init.ProducerID, init.ProducerEpoch, true).ErrorCode, nil)
	r.waitState("tx", "CompleteCommit")
	wantFetched(t, offsetFetch(t, r.rc, "g5", "in", []int32{0}, true), 0, 42, 0)
}

// produceTxnTo is produceTxnRaw to topic[partition].
func produceTxnTo(t *testing.T, rc *rawConn, version int16, id string, pid int64, epoch int16, seq int32, topic string, partition int32) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	req.TransactionID = &id
	req.Acks = -1
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = testBatch(batchSpec{idempotent: true, producerID: pid, producerEpoch: epoch, sequence: seq, attributes: 0x10, values: []string{"v"}})
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return rc.do(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}
