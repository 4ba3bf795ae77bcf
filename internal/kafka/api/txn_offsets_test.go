package api_test

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/partition"
)

// txnOffsetCommit sends a TxnOffsetCommit v3 of offset for each partition of topic and returns the
// partitions' errors.
func txnOffsetCommit(rc *rawConn, grp string, pid int64, epoch int16, memberID, instance string, gen int32, topic string, offsets map[int32]int64) map[int32]error {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version, req.TransactionalID, req.Group = 3, "tx", grp
	req.ProducerID, req.ProducerEpoch = pid, epoch
	req.MemberID, req.Generation = memberID, gen
	if instance != "" {
		req.InstanceID = &instance
	}
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = topic
	for p, off := range offsets {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, off
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := rc.do(req).(*kmsg.TxnOffsetCommitResponse)
	out := map[int32]error{}
	for _, p := range resp.Topics[0].Partitions {
		out[p.Partition] = kerr.ErrorForCode(p.ErrorCode)
	}
	return out
}

// offsetFetch sends an OffsetFetch v7 for partitions of topic (nil: all of the group's) and returns
// each listed partition's offset and error.
func offsetFetch(t *testing.T, rc *rawConn, grp, topic string, partitions []int32, requireStable bool) map[int32]kmsg.OffsetFetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.Group, req.RequireStable = 7, grp, requireStable
	if partitions != nil {
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = topic, partitions
		req.Topics = append(req.Topics, rt)
	}
	resp := rc.do(req).(*kmsg.OffsetFetchResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("offset fetch: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	out := map[int32]kmsg.OffsetFetchResponseTopicPartition{}
	for _, rt := range resp.Topics {
		if rt.Topic != topic {
			t.Fatalf("offset fetch listed topic %q", rt.Topic)
		}
		for _, p := range rt.Partitions {
			out[p.Partition] = p
		}
	}
	return out
}

// wantFetched checks one partition of an offsetFetch answer.
func wantFetched(t *testing.T, got map[int32]kmsg.OffsetFetchResponseTopicPartition, p int32, offset int64, code int16) {
	t.Helper()
	fp, ok := got[p]
	if !ok {
		t.Fatalf("partition %d not listed: %+v", p, got)
	}
	if fp.Offset != offset || fp.ErrorCode != code {
		t.Fatalf("partition %d: offset %d (%v), want %d (%v)", p, fp.Offset, kerr.ErrorForCode(fp.ErrorCode), offset, kerr.ErrorForCode(code))
	}
}

// A transaction's offsets, committed with TxnOffsetCommit by a static member, stay invisible to
// OffsetFetch (UNSTABLE_OFFSET_COMMIT with RequireStable) until the COMMIT marker reaches the group's
// partition of __consumer_offsets; a plain commit of another partition stays visible throughout.
func TestAPITxnOffsetCommit(t *testing.T) {
	n := startGroupNode(t, t.TempDir())
	createTopic(t, newAdmin(t, n), "in", 2, nil)
	rc := dialRaw(t, n)

	vreq := kmsg.NewPtrApiVersionsRequest()
	vreq.Version = 3
	for _, k := range rc.do(vreq).(*kmsg.ApiVersionsResponse).ApiKeys {
		if k.ApiKey == 28 && (k.MinVersion != 0 || k.MaxVersion != 5) {
			t.Fatalf("TxnOffsetCommit advertised as v%d-v%d, want v0-v5 (TV2, the default)", k.MinVersion, k.MaxVersion)
		}
	}

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKey = 3, "g"
	if r := rc.do(fc).(*kmsg.FindCoordinatorResponse); r.ErrorCode != 0 {
		t.Fatalf("find coordinator: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.ProtocolType, join.InstanceID = 5, "g", "consumer", kmsg.StringPtr("i1")
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 10000, 10000
	proto := kmsg.NewJoinGroupRequestProtocol()
	proto.Name = "range"
	join.Protocols = append(join.Protocols, proto)
	jr := rc.do(join).(*kmsg.JoinGroupResponse)
	if jr.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(jr.ErrorCode))
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version, sync.Group, sync.MemberID, sync.InstanceID, sync.Generation = 5, "g", jr.MemberID, kmsg.StringPtr("i1"), jr.Generation
	if r := rc.do(sync).(*kmsg.SyncGroupResponse); r.ErrorCode != 0 {
		t.Fatalf("sync: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.MemberID, commit.InstanceID, commit.Generation = 8, "g", jr.MemberID, kmsg.StringPtr("i1"), jr.Generation
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "in"
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset = 1, 3
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	if r := rc.do(commit).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("plain commit: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}

	const pid = 1000
	for p, err := range txnOffsetCommit(rc, "g", pid, 0, jr.MemberID, "i1", jr.Generation, "in", map[int32]int64{0: 5, 1: 6}) {
		if err != nil {
			t.Fatalf("txn offset commit of partition %d: %v", p, err)
		}
	}
	if errs := txnOffsetCommit(rc, "g", pid, 0, jr.MemberID, "i1", jr.Generation, "nope", map[int32]int64{0: 1}); !errors.Is(errs[0], kerr.UnknownTopicOrPartition) {
		t.Fatalf("txn offset commit of an unknown topic: %v", errs[0])
	}
	got := offsetFetch(t, rc, "g", "in", []int32{0, 1}, false)
	wantFetched(t, got, 0, -1, 0)
	wantFetched(t, got, 1, 3, 0)
	got = offsetFetch(t, rc, "g", "in", []int32{0, 1}, true)
	wantFetched(t, got, 0, -1, kerr.UnstableOffsetCommit.Code)
	wantFetched(t, got, 1, -1, kerr.UnstableOffsetCommit.Code)
	// Asked for all of the group's partitions, a stable fetch lists the committed ones, unstable too.
	got = offsetFetch(t, rc, "g", "in", nil, true)
	if len(got) != 1 {
		t.Fatalf("stable fetch of all partitions: %+v", got)
	}
	wantFetched(t, got, 1, -1, kerr.UnstableOffsetCommit.Code)

	coord := n.GroupCoordinator()
	p := group.PartitionFor("g", 4)
	if err := coord.WriteMarker(testCtx(t), p, partition.Marker{ProducerID: pid, ProducerEpoch: 0, Commit: true}); err != nil {
		t.Fatalf("commit marker: %v", err)
	}
	for _, stable := range []bool{false, true} {
		got = offsetFetch(t, rc, "g", "in", []int32{0, 1}, stable)
		wantFetched(t, got, 0, 5, 0)
		wantFetched(t, got, 1, 6, 0)
	}
}

// TxnOffsetCommit's bad input gets Kafka's error codes, and nothing is staged.
func TestAPITxnOffsetCommitErrors(t *testing.T) {
	n := startGroupNode(t, t.TempDir())
	createTopic(t, newAdmin(t, n), "in", 1, nil)
	rc := dialRaw(t, n)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKey = 3, "g"
	if r := rc.do(fc).(*kmsg.FindCoordinatorResponse); r.ErrorCode != 0 {
		t.Fatalf("find coordinator: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.ProtocolType, join.InstanceID = 5, "g", "consumer", kmsg.StringPtr("i1")
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 10000, 10000
	proto := kmsg.NewJoinGroupRequestProtocol()
	proto.Name = "range"
	join.Protocols = append(join.Protocols, proto)
	jr := rc.do(join).(*kmsg.JoinGroupResponse)
	if jr.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(jr.ErrorCode))
	}
	one := map[int32]int64{0: 7}
	cases := []struct {
		name     string
		grp      string
		pid      int64
		epoch    int16
		memberID string
		instance string
		gen      int32
		want     error
	}{
		{"unknown member", "g", 1, 0, "nope", "", jr.Generation, kerr.UnknownMemberID},
		{"stale generation", "g", 1, 0, jr.MemberID, "i1", jr.Generation - 1, kerr.IllegalGeneration},
		{"fenced instance", "g", 1, 0, "nope", "i1", jr.Generation, kerr.FencedInstanceID},
		{"member of an unknown group", "other", 1, 0, "m", "", 1, kerr.UnknownMemberID},
		{"empty group id", "", 1, 0, "", "", -1, kerr.InvalidGroupID},
		{"no producer id", "g", -1, 0, "", "", -1, kerr.InvalidProducerEpoch},
		{"epoch 3 of producer 2", "g", 2, 3, jr.MemberID, "i1", jr.Generation, nil},
		{"older epoch of producer 2", "g", 2, 2, jr.MemberID, "i1", jr.Generation, kerr.InvalidProducerEpoch},
	}
	for _, c := range cases {
		err := txnOffsetCommit(rc, c.grp, c.pid, c.epoch, c.memberID, c.instance, c.gen, "in", one)[0]
		if !errors.Is(err, c.want) && (c.want != nil || err != nil) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// Only producer 2's epoch 3 commit is staged: an ABORT drops it, and nothing was ever visible.
	if got := offsetFetch(t, rc, "g", "in", []int32{0}, true); got[0].ErrorCode != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("stable fetch with producer 2's offset staged: %v", kerr.ErrorForCode(got[0].ErrorCode))
	}
	if err := n.GroupCoordinator().WriteMarker(testCtx(t), group.PartitionFor("g", 4), partition.Marker{ProducerID: 2, ProducerEpoch: 3}); err != nil {
		t.Fatalf("abort marker: %v", err)
	}
	wantFetched(t, offsetFetch(t, rc, "g", "in", []int32{0}, true), 0, -1, 0)
}
