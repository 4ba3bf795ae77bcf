package api_test

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// stateBatch is one state batch as ReadShareGroupState and WriteShareGroupState carry it.
type stateBatch struct {
	first, last int64
	state       int8
	count       int16
}

// stateWrite is one WriteShareGroupState partition: a record of the leader at leaderEpoch; slot and
// end go in weir's tagged fields unless noTags, and create sets the third.
type stateWrite struct {
	seq, slot, leaderEpoch int32
	start, end             int64
	batches                []stateBatch
	noTags, create         bool
}

func writeStateRequest(group string, id [16]byte, w stateWrite) *kmsg.WriteShareGroupStateRequest {
	r := kmsg.NewPtrWriteShareGroupStateRequest()
	r.GroupID = group
	rt := kmsg.NewWriteShareGroupStateRequestTopic()
	rt.TopicID = id
	p := kmsg.NewWriteShareGroupStateRequestTopicPartition()
	p.StateEpoch, p.LeaderEpoch, p.StartOffset = w.seq, w.leaderEpoch, w.start
	for _, b := range w.batches {
		sb := kmsg.NewWriteShareGroupStateRequestTopicPartitionStateBatch()
		sb.FirstOffset, sb.LastOffset, sb.DeliveryState, sb.DeliveryCount = b.first, b.last, b.state, b.count
		p.StateBatches = append(p.StateBatches, sb)
	}
	if !w.noTags {
		p.UnknownTags.Set(10000, binary.AppendUvarint(nil, uint64(w.slot)))
		p.UnknownTags.Set(10001, binary.AppendUvarint(nil, uint64(w.end)))
	}
	if w.create {
		p.UnknownTags.Set(10002, binary.AppendUvarint(nil, 1))
	}
	rt.Partitions = append(rt.Partitions, p)
	r.Topics = append(r.Topics, rt)
	return r
}

func readStateRequest(group string, id [16]byte, leaderEpoch int32) *kmsg.ReadShareGroupStateRequest {
	r := kmsg.NewPtrReadShareGroupStateRequest()
	r.GroupID = group
	rt := kmsg.NewReadShareGroupStateRequestTopic()
	rt.TopicID = id
	p := kmsg.NewReadShareGroupStateRequestTopicPartition()
	p.LeaderEpoch = leaderEpoch
	rt.Partitions = append(rt.Partitions, p)
	r.Topics = append(r.Topics, rt)
	return r
}

// readState sends a ReadShareGroupState and returns its one partition's answer as (code, state epoch,
// start offset, batches).
func readState(t *testing.T, rc *rawConn, group string, id [16]byte, leaderEpoch int32) (int16, int32, int64, []stateBatch) {
	t.Helper()
	resp := rc.do(readStateRequest(group, id, leaderEpoch)).(*kmsg.ReadShareGroupStateResponse)
	p := resp.Topics[0].Partitions[0]
	var bs []stateBatch
	for _, b := range p.StateBatches {
		bs = append(bs, stateBatch{b.FirstOffset, b.LastOffset, b.DeliveryState, b.DeliveryCount})
	}
	return p.ErrorCode, p.StateEpoch, p.StartOffset, bs
}

func writeState(t *testing.T, rc *rawConn, group string, id [16]byte, w stateWrite) int16 {
	t.Helper()
	resp := rc.do(writeStateRequest(group, id, w)).(*kmsg.WriteShareGroupStateResponse)
	return resp.Topics[0].Partitions[0].ErrorCode
}

// TestShareStateReadWrite drives the share-state coordinator's keys 84 and 85 as another node's
// leader does: a read of a share-partition with no state (start offset -1), a snapshot created and
// read back whole (every offset of the window, with Kafka's delivery states), an update, and each
// refusal with its code and nothing changed: a deposed leader's read and write (FENCED_LEADER_EPOCH),
// an update that skips a slot, a write without weir's tagged fields, and an Acquired state
// (INVALID_REQUEST), and a create over existing state (FENCED_STATE_EPOCH).
func TestShareStateReadWrite(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	const topic, group = "share-state", "sg-state"
	createTopic(t, adm, topic, 1, nil)
	id := topicID(t, adm, topic)
	// A share consumer's first fetch creates __share_group_state, which the keys need.
	prod := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	warmUp(t, prod, topic, 1, []*kgo.Client{shareConsumer(t, n, "sg-warm", topic)}, make(chan *kgo.Record, 100))
	rc := dialRaw(t, n)

	deadline := time.Now().Add(testTimeout)
	for {
		code, _, start, bs := readState(t, rc, group, id, 3)
		if code == 0 {
			if start != -1 || len(bs) != 0 {
				t.Fatalf("no state: start %d, batches %v; want -1 and none", start, bs)
			}
			break
		}
		if code != kerr.CoordinatorLoadInProgress.Code && code != kerr.NotCoordinator.Code || time.Now().After(deadline) {
			t.Fatalf("read with no state: %s", kerr.ErrorForCode(code))
		}
		time.Sleep(50 * time.Millisecond)
	}

	snapshot := stateWrite{seq: 1, leaderEpoch: 3, start: 10, end: 16, create: true, batches: []stateBatch{
		{10, 11, 2, 1}, {12, 12, 0, 2}, {14, 14, 4, 5},
	}}
	if code := writeState(t, rc, group, id, snapshot); code != 0 {
		t.Fatalf("snapshot created: %s", kerr.ErrorForCode(code))
	}
	want := []stateBatch{{10, 11, 2, 1}, {12, 12, 0, 2}, {13, 13, 0, 0}, {14, 14, 4, 5}, {15, 15, 0, 0}}
	check := func(step string, wantSeq int32, wantStart int64, want []stateBatch) {
		t.Helper()
		code, seq, start, bs := readState(t, rc, group, id, 3)
		if code != 0 || seq != wantSeq || start != wantStart || !slices.Equal(bs, want) {
			t.Fatalf("%s: read %s, round %d, start %d, batches %v; want round %d, start %d, %v",
				step, kerr.ErrorForCode(code), seq, start, bs, wantSeq, wantStart, want)
		}
	}
	check("after the snapshot", 1, 10, want)

	for _, tc := range []struct {
		name string
		w    stateWrite
		want int16
	}{
		{"a deposed leader's update", stateWrite{seq: 1, slot: 1, leaderEpoch: 2, start: 10, end: 16}, kerr.FencedLeaderEpoch.Code},
		{"a deposed leader's snapshot", stateWrite{seq: 2, leaderEpoch: 2, start: 10, end: 16}, kerr.FencedLeaderEpoch.Code},
		{"an update skipping slot 1", stateWrite{seq: 1, slot: 2, leaderEpoch: 3, start: 10, end: 16}, kerr.InvalidRequest.Code},
		{"a create over state", stateWrite{seq: 1, leaderEpoch: 4, start: 20, end: 20, create: true}, kerr.FencedStateEpoch.Code},
		{"no tagged fields", stateWrite{seq: 2, leaderEpoch: 3, start: 10, noTags: true}, kerr.InvalidRequest.Code},
		{"an Acquired state", stateWrite{seq: 2, leaderEpoch: 3, start: 10, end: 11, batches: []stateBatch{{10, 10, 1, 1}}}, kerr.InvalidRequest.Code},
		{"batches out of the window", stateWrite{seq: 2, leaderEpoch: 3, start: 10, end: 11, batches: []stateBatch{{10, 11, 2, 1}}}, kerr.InvalidRequest.Code},
	} {
		if code := writeState(t, rc, group, id, tc.w); code != tc.want {
			t.Fatalf("%s: %s, want %s", tc.name, kerr.ErrorForCode(code), kerr.ErrorForCode(tc.want))
		}
		check(fmt.Sprintf("after %s", tc.name), 1, 10, want)
	}
	if code, _, _, _ := readState(t, rc, group, id, 2); code != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("a deposed leader's read: %s, want FENCED_LEADER_EPOCH", kerr.ErrorForCode(code))
	}

	update := stateWrite{seq: 1, slot: 1, leaderEpoch: 3, start: 12, end: 17, batches: []stateBatch{{12, 12, 2, 2}, {16, 16, 0, 1}}}
	if code := writeState(t, rc, group, id, update); code != 0 {
		t.Fatalf("update: %s", kerr.ErrorForCode(code))
	}
	check("after the update", 1, 12, []stateBatch{{12, 12, 2, 2}, {13, 13, 0, 0}, {14, 14, 4, 5}, {15, 15, 0, 0}, {16, 16, 0, 1}})
}
