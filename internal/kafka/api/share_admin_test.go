package api_test

import (
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareAdmin sends the share admin keys with a franz-go client.
type shareAdmin struct {
	t  *testing.T
	cl *kgo.Client
}

// describe returns group's DescribeShareGroupOffsets answer at version for topic's partitions (every
// share-partition when partitions is nil).
func (a shareAdmin) describe(version int16, group, topic string, partitions ...int32) kmsg.DescribeShareGroupOffsetsResponseGroup {
	a.t.Helper()
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	req.Version = version
	g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	g.GroupID = group
	if partitions != nil {
		rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
		rt.Topic, rt.Partitions = topic, partitions
		g.Topics = append(g.Topics, rt)
	}
	req.Groups = append(req.Groups, g)
	resp, err := req.RequestWith(testCtx(a.t), a.cl)
	if err != nil || len(resp.Groups) != 1 {
		a.t.Fatalf("DescribeShareGroupOffsets: %+v, %v", resp, err)
	}
	return resp.Groups[0]
}

// offset returns the start offset and lag a describe answers for topic's partition p, failing on a
// partition error.
func (a shareAdmin) offset(group, topic string, p int32) (start, lag int64) {
	a.t.Helper()
	g := a.describe(1, group, topic, p)
	if g.ErrorCode != 0 || len(g.Topics) != 1 || len(g.Topics[0].Partitions) != 1 || g.Topics[0].Partitions[0].ErrorCode != 0 {
		a.t.Fatalf("describe %s %s-%d: %+v", group, topic, p, g)
	}
	rp := g.Topics[0].Partitions[0]
	return rp.StartOffset, rp.Lag
}

// alter sets the start offsets of topic's partitions (partition → offset) and returns the top-level
// code and the partitions' codes.
func (a shareAdmin) alter(group, topic string, offsets map[int32]int64) (int16, map[int32]int16) {
	a.t.Helper()
	req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	req.GroupID = group
	rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
	rt.Topic = topic
	for p, o := range offsets {
		rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
		rp.Partition, rp.StartOffset = p, o
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(a.t), a.cl)
	if err != nil {
		a.t.Fatal(err)
	}
	codes := map[int32]int16{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			codes[p.Partition] = p.ErrorCode
		}
	}
	return resp.ErrorCode, codes
}

// deleteOffsets deletes topic's share-partitions of group and returns the top-level and topic codes.
func (a shareAdmin) deleteOffsets(group, topic string) (int16, int16) {
	a.t.Helper()
	req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	req.GroupID = group
	rt := kmsg.NewDeleteShareGroupOffsetsRequestTopic()
	rt.Topic = topic
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(a.t), a.cl)
	if err != nil {
		a.t.Fatal(err)
	}
	if resp.ErrorCode != 0 {
		return resp.ErrorCode, 0
	}
	if len(resp.Topics) != 1 {
		a.t.Fatalf("DeleteShareGroupOffsets answered %+v", resp)
	}
	return 0, resp.Topics[0].ErrorCode
}

// deleteGroup sends DeleteGroups for group and returns its code.
func (a shareAdmin) deleteGroup(group string) int16 {
	a.t.Helper()
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(testCtx(a.t), a.cl)
	if err != nil || len(resp.Groups) != 1 {
		a.t.Fatalf("DeleteGroups: %+v, %v", resp, err)
	}
	return resp.Groups[0].ErrorCode
}

// heartbeat sends a ShareGroupHeartbeat of member at epoch (0 joins, -1 leaves) subscribed to topic.
func (a shareAdmin) heartbeat(group, member string, epoch int32, topic string) {
	a.t.Helper()
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.MemberEpoch = group, member, epoch
	if epoch == 0 {
		hb.SubscribedTopicNames = []string{topic}
	}
	if resp, err := hb.RequestWith(testCtx(a.t), a.cl); err != nil || resp.ErrorCode != 0 {
		a.t.Fatalf("share heartbeat %s at %d: %+v, %v", member, epoch, resp, err)
	}
}

// acquire opens a share session of member and fetches until it acquires records; it returns the
// acquired ranges of partition 0.
func acquire(t *testing.T, cl *kgo.Client, group, member string, id [16]byte) []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord {
	t.Helper()
	ctx := testCtx(t)
	for epoch := int32(0); ; epoch++ {
		resp := doShareFetch(t, cl, shareFetchReq(group, member, epoch, id))
		if resp.ErrorCode != 0 {
			t.Fatalf("share fetch: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		if len(resp.Topics) > 0 {
			if acq := resp.Topics[0].Partitions[0].AcquiredRecords; len(acq) > 0 {
				return acq
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("%s acquired nothing", member)
		}
	}
}

// TestShareAdminOffsets drives DescribeShareGroupOffsets, AlterShareGroupOffsets,
// DeleteShareGroupOffsets and DeleteGroups on a share group with franz-go requests: a member acquires
// and accepts records; while the group has a member, the changes answer NON_EMPTY_GROUP and change
// nothing; once it left, an altered start offset is where the next share fetch starts (the records
// held before the reset are handed out again from it), deleted offsets start the share-partition
// afresh at the log end, and a deleted group likewise. Unknown topics and partitions, a negative
// offset and a classic group's id get their codes.
func TestShareAdminOffsets(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	const topic, group = "share-admin", "sg-admin"
	createTopic(t, adm, topic, 2, nil)
	id := topicID(t, adm, topic)
	prod := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	cl := newClient(t, n)
	a := shareAdmin{t: t, cl: cl}

	a.heartbeat(group, "member-1", 0, topic)
	doShareFetch(t, cl, shareFetchReq(group, "m", 0, id))
	produceShare(t, prod, topic, 0, "a", "b", "c", "d")
	if acq := acquire(t, cl, group, "m", id); len(acq) != 1 || acq[0].FirstOffset != 0 || acq[0].LastOffset != 3 {
		t.Fatalf("acquired %+v, want 0-3", acq)
	}
	ack := shareFetchReq(group, "m", 1, id, ackBatch(0, 1, 1))
	ack.MaxWaitMillis = 0
	if rp := doShareFetch(t, cl, ack).Topics[0].Partitions[0]; rp.AcknowledgeErrorCode != 0 {
		t.Fatalf("accept 0-1: %v", kerr.ErrorForCode(rp.AcknowledgeErrorCode))
	}

	// Describe: partition 0 starts at 2 with 2 records left; partition 1 has no state (-1); v0 has no
	// lag; a request for every share-partition lists partition 0 only, not another topic's.
	if start, lag := a.offset(group, topic, 0); start != 2 || lag != 2 {
		t.Fatalf("partition 0: start %d lag %d, want 2 and 2", start, lag)
	}
	if g := a.describe(1, group, topic, 1, 7); g.Topics[0].Partitions[0].StartOffset != -1 || g.Topics[0].Partitions[0].ErrorCode != 0 ||
		g.Topics[0].Partitions[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("partitions 1 and 7: %+v", g.Topics[0].Partitions)
	}
	if g := a.describe(0, group, topic, 0); g.Topics[0].Partitions[0].StartOffset != 2 || g.Topics[0].TopicID != id {
		t.Fatalf("v0: %+v", g)
	}
	createTopic(t, adm, "share-admin-unread", 3, nil)
	if g := a.describe(1, group, topic, nil...); len(g.Topics) != 1 || g.Topics[0].Topic != topic || len(g.Topics[0].Partitions) != 1 || g.Topics[0].Partitions[0].Partition != 0 {
		t.Fatalf("every share-partition: %+v", g.Topics)
	}
	if g := a.describe(1, group, "no-such-topic", 0); g.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("an unknown topic: %+v", g.Topics)
	}

	// While the group has a member, nothing changes.
	if code, _ := a.alter(group, topic, map[int32]int64{0: 0}); code != kerr.NonEmptyGroup.Code {
		t.Fatalf("alter with a member: %v", kerr.ErrorForCode(code))
	}
	if code, _ := a.deleteOffsets(group, topic); code != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete offsets with a member: %v", kerr.ErrorForCode(code))
	}
	if code := a.deleteGroup(group); code != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete group with a member: %v", kerr.ErrorForCode(code))
	}
	if start, _ := a.offset(group, topic, 0); start != 2 {
		t.Fatalf("start offset %d after the refusals, want 2", start)
	}

	a.heartbeat(group, "member-1", -1, topic)
	code, codes := a.alter(group, topic, map[int32]int64{0: 1, 1: -3, 9: 0})
	if code != 0 || codes[0] != 0 || codes[1] != kerr.InvalidRequest.Code || codes[9] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("alter: %v %v", kerr.ErrorForCode(code), codes)
	}
	if start, lag := a.offset(group, topic, 0); start != 1 || lag != 3 {
		t.Fatalf("after the alter: start %d lag %d, want 1 and 3", start, lag)
	}
	if g := a.describe(1, group, topic, 1); g.Topics[0].Partitions[0].StartOffset != -1 {
		t.Fatalf("partition 1 after a refused alter: %+v", g.Topics[0].Partitions[0])
	}
	// The records member m held (2-3) and accepted (0-1) are forgotten: a new member gets 1-3.
	if acq := acquire(t, cl, group, "m2", id); len(acq) != 1 || acq[0].FirstOffset != 1 || acq[0].LastOffset != 3 || acq[0].DeliveryCount != 1 {
		t.Fatalf("acquired after the alter %+v, want 1-3 at delivery count 1", acq)
	}
	// m's session fetches on the reset state: nothing is left for it, and its old acknowledgement of
	// 2-3 finds them held by m2.
	stale := shareFetchReq(group, "m", 2, id, ackBatch(2, 3, 1))
	stale.MaxWaitMillis = 0
	if rp := doShareFetch(t, cl, stale).Topics[0].Partitions[0]; rp.AcknowledgeErrorCode != kerr.InvalidRecordState.Code {
		t.Fatalf("m's acknowledgement of records from before the reset: %v", kerr.ErrorForCode(rp.AcknowledgeErrorCode))
	}

	if code, tcode := a.deleteOffsets(group, topic); code != 0 || tcode != 0 {
		t.Fatalf("delete offsets: %v %v", kerr.ErrorForCode(code), kerr.ErrorForCode(tcode))
	}
	if code, tcode := a.deleteOffsets(group, "no-such-topic"); code != 0 || tcode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("delete offsets of an unknown topic: %v %v", kerr.ErrorForCode(code), kerr.ErrorForCode(tcode))
	}
	if g := a.describe(1, group, topic, 0); g.Topics[0].Partitions[0].StartOffset != -1 {
		t.Fatalf("partition 0 after the delete: %+v", g.Topics[0].Partitions[0])
	}
	// Deleted, the share-partition starts afresh at the log end (share.auto.offset.reset=latest).
	doShareFetch(t, cl, shareFetchReq(group, "m3", 0, id))
	produceShare(t, prod, topic, 0, "e")
	if acq := acquire(t, cl, group, "m3", id); len(acq) != 1 || acq[0].FirstOffset != 4 || acq[0].LastOffset != 4 {
		t.Fatalf("acquired after the delete %+v, want 4", acq)
	}

	// DeleteGroups deletes the empty share group and its state; the next one of the name starts at
	// the log end again.
	if code := a.deleteGroup(group); code != 0 {
		t.Fatalf("delete group: %v", kerr.ErrorForCode(code))
	}
	if g := a.describe(1, group, topic, 0); g.Topics[0].Partitions[0].StartOffset != -1 {
		t.Fatalf("partition 0 after DeleteGroups: %+v", g.Topics[0].Partitions[0])
	}
	if code := a.deleteGroup(group); code != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete group again: %v", kerr.ErrorForCode(code))
	}
	doShareFetch(t, cl, shareFetchReq(group, "m4", 0, id))
	produceShare(t, prod, topic, 0, "f")
	if acq := acquire(t, cl, group, "m4", id); len(acq) != 1 || acq[0].FirstOffset != 5 {
		t.Fatalf("acquired after DeleteGroups %+v, want 5", acq)
	}

	// A classic group's id is not a share group's.
	if _, err := adm.CommitOffsets(testCtx(t), "classic-admin", kadm.OffsetsFromRecords(kgo.Record{Topic: topic, Partition: 0, Offset: 0})); err != nil {
		t.Fatal(err)
	}
	if g := a.describe(1, "classic-admin", topic, 0); g.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("describe a classic group: %v", kerr.ErrorForCode(g.ErrorCode))
	}
	if code, _ := a.alter("classic-admin", topic, map[int32]int64{0: 0}); code != kerr.GroupIDNotFound.Code {
		t.Fatalf("alter a classic group: %v", kerr.ErrorForCode(code))
	}
	if code, _ := a.deleteOffsets("", topic); code != kerr.InvalidGroupID.Code {
		t.Fatalf("delete offsets of the empty group id: %v", kerr.ErrorForCode(code))
	}
}

// TestShareAdminDescribeGroups: DescribeGroups on a share group's id answers as Kafka 4.x does: Dead,
// no protocol type, no members, and no error up to v5; from v6 GROUP_ID_NOT_FOUND, with a message
// that tells a share group's id from an unknown one.
func TestShareAdminDescribeGroups(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	const topic, group = "share-describe", "sg-describe"
	createTopic(t, adm, topic, 1, nil)
	cl := newClient(t, n)
	shareAdmin{t: t, cl: cl}.heartbeat(group, "member-1", 0, topic)
	rc := dialRaw(t, n)
	for _, v := range []int16{0, 5, 6} {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Version, req.Groups = v, []string{group, "nobody-uses-this"}
		resp := rc.do(req).(*kmsg.DescribeGroupsResponse)
		if len(resp.Groups) != 2 {
			t.Fatalf("v%d: %+v", v, resp)
		}
		for i, want := range []string{"is not a classic group", "not found"} {
			g := resp.Groups[i]
			if g.State != "Dead" || g.ProtocolType != "" || len(g.Members) != 0 {
				t.Fatalf("v%d: %+v, want Dead with no members", v, g)
			}
			if v < 6 {
				if g.ErrorCode != 0 || g.ErrorMessage != nil {
					t.Fatalf("v%d: %+v, want no error", v, g)
				}
				continue
			}
			if g.ErrorCode != kerr.GroupIDNotFound.Code || g.ErrorMessage == nil || !strings.Contains(*g.ErrorMessage, want) {
				t.Fatalf("v6 %s: %v %v, want GROUP_ID_NOT_FOUND saying %q", g.Group, kerr.ErrorForCode(g.ErrorCode), g.ErrorMessage, want)
			}
		}
	}
}

// TestShareAdminBadVersion: a share admin request at a version weir does not serve closes the
// connection, as Kafka does, and the versions served are advertised.
func TestShareAdminBadVersion(t *testing.T) {
	n := startNode(t)
	rc := dialRaw(t, n)
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	av.ClientSoftwareName, av.ClientSoftwareVersion = "weir-test", "1.0"
	want := map[int16]int16{90: 1, 91: 0, 92: 0}
	for _, k := range rc.do(av).(*kmsg.ApiVersionsResponse).ApiKeys {
		if m, ok := want[k.ApiKey]; ok {
			if k.MinVersion != 0 || k.MaxVersion != m {
				t.Fatalf("key %d at %d-%d, want 0-%d", k.ApiKey, k.MinVersion, k.MaxVersion, m)
			}
			delete(want, k.ApiKey)
		}
	}
	if len(want) != 0 {
		t.Fatalf("not advertised: %v", want)
	}
	req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	req.Version = 1
	req.GroupID = "sg-bad"
	rc.send(req)
	var b [1]byte
	if _, err := rc.c.Read(b[:]); !errors.Is(err, io.EOF) {
		t.Fatalf("read after AlterShareGroupOffsets v1: %v, want the connection closed", err)
	}
}

// TestShareStateAdminTags drives weir's admin forms of keys 84 and 85 as a group coordinator on
// another node sends them: a summary read (tag 10003) answers the state and its leader epoch (tag
// 10005) without fencing, so the leader at epoch 3 writes on after a summary at epoch 0; a reset (tag
// 10004 = 1) moves the start offset and refuses the leader's next write with FENCED_STATE_EPOCH until
// it reads again; a deletion (10004 = 2) leaves no state and refuses a plain write but not a create; a
// negative offset and an unknown admin value are INVALID_REQUEST; an owner's stop (10004 = 3) is
// answered.
func TestShareStateAdminTags(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	const topic, group = "share-state-admin", "sg-state-admin"
	createTopic(t, adm, topic, 1, nil)
	id := topicID(t, adm, topic)
	prod := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	warmUp(t, prod, topic, 1, []*kgo.Client{shareConsumer(t, n, "sg-warm", topic)}, make(chan *kgo.Record, 100))
	rc := dialRaw(t, n)

	if code := writeState(t, rc, group, id, stateWrite{seq: 1, leaderEpoch: 3, start: 10, end: 12, create: true}); code != 0 {
		t.Fatalf("create: %s", kerr.ErrorForCode(code))
	}
	summary := func() (int16, int64, uint64) {
		t.Helper()
		req := readStateRequest(group, id, 0)
		req.Topics[0].Partitions[0].UnknownTags.Set(10003, []byte{1})
		p := rc.do(req).(*kmsg.ReadShareGroupStateResponse).Topics[0].Partitions[0]
		var epoch uint64
		p.UnknownTags.Each(func(k uint32, v []byte) {
			if k == 10005 {
				epoch, _ = binary.Uvarint(v)
			}
		})
		return p.ErrorCode, p.StartOffset, epoch
	}
	admin := func(op byte, start int64) int16 {
		t.Helper()
		req := writeStateRequest(group, id, stateWrite{start: start, noTags: true})
		req.Topics[0].Partitions[0].UnknownTags.Set(10004, []byte{op})
		return rc.do(req).(*kmsg.WriteShareGroupStateResponse).Topics[0].Partitions[0].ErrorCode
	}
	if code, start, epoch := summary(); code != 0 || start != 10 || epoch != 3 {
		t.Fatalf("summary: %s, start %d, epoch %d; want 10 at epoch 3", kerr.ErrorForCode(code), start, epoch)
	}
	if code := writeState(t, rc, group, id, stateWrite{seq: 1, slot: 1, leaderEpoch: 3, start: 11, end: 12}); code != 0 {
		t.Fatalf("the leader's update after a summary: %s", kerr.ErrorForCode(code))
	}

	if code := admin(1, 42); code != 0 {
		t.Fatalf("reset: %s", kerr.ErrorForCode(code))
	}
	if code := writeState(t, rc, group, id, stateWrite{seq: 1, slot: 2, leaderEpoch: 3, start: 11, end: 12}); code != kerr.FencedStateEpoch.Code {
		t.Fatalf("the leader's update after the reset: %s, want FENCED_STATE_EPOCH", kerr.ErrorForCode(code))
	}
	if code := writeState(t, rc, group, id, stateWrite{seq: 9, leaderEpoch: 3, start: 11, end: 12}); code != kerr.FencedStateEpoch.Code {
		t.Fatalf("the leader's snapshot after the reset: %s, want FENCED_STATE_EPOCH", kerr.ErrorForCode(code))
	}
	if code, start, _ := summary(); code != 0 || start != 42 {
		t.Fatalf("summary after the reset: %s, start %d", kerr.ErrorForCode(code), start)
	}
	if code, _, start, bs := readState(t, rc, group, id, 3); code != 0 || start != 42 || len(bs) != 0 {
		t.Fatalf("read after the reset: %s, start %d, %v", kerr.ErrorForCode(code), start, bs)
	}
	if code := writeState(t, rc, group, id, stateWrite{seq: 3, leaderEpoch: 3, start: 42, end: 42}); code != 0 {
		t.Fatalf("the leader's snapshot after its read: %s", kerr.ErrorForCode(code))
	}

	for _, bad := range []struct {
		op    byte
		start int64
	}{{1, -1}, {7, 0}} {
		if code := admin(bad.op, bad.start); code != kerr.InvalidRequest.Code {
			t.Fatalf("admin %d to %d: %s, want INVALID_REQUEST", bad.op, bad.start, kerr.ErrorForCode(code))
		}
	}
	if code := admin(3, 0); code != 0 {
		t.Fatalf("an owner's stop: %s", kerr.ErrorForCode(code))
	}
	if code := admin(2, 0); code != 0 {
		t.Fatalf("delete: %s", kerr.ErrorForCode(code))
	}
	if code, start, _ := summary(); code != 0 || start != -1 {
		t.Fatalf("summary after the delete: %s, start %d", kerr.ErrorForCode(code), start)
	}
	if code := writeState(t, rc, group, id, stateWrite{seq: 4, leaderEpoch: 3, start: 42, end: 42}); code != kerr.FencedStateEpoch.Code {
		t.Fatalf("a snapshot after the delete: %s, want FENCED_STATE_EPOCH", kerr.ErrorForCode(code))
	}
	if code := writeState(t, rc, group, id, stateWrite{seq: 1, leaderEpoch: 3, start: 50, end: 50, create: true}); code != 0 {
		t.Fatalf("a create after the delete: %s", kerr.ErrorForCode(code))
	}
}
