package api

import (
	"context"
	"encoding/binary"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/share"
	"github.com/weir-mq/weir/internal/sharestate"
)

// readShareGroupState answers ReadShareGroupState (key 84), which the leader of a data partition on
// another node sends to load a share-partition (docs/queues.md, "State across nodes"): the state as one
// snapshot once the reader's leader epoch fences the older leaders (sharestate.Coordinator.Read),
// FENCED_LEADER_EPOCH for a reader older than the state's writer, and a start offset of -1 for a
// share-partition with no state.
func (b *Broker) readShareGroupState(req *kmsg.ReadShareGroupStateRequest) wire.Reply {
	coord := b.shares.store.coord
	return func(ctx context.Context) kmsg.Response {
		ctx, cancel := context.WithTimeout(ctx, shareOpWait)
		defer cancel()
		resp := req.ResponseKind().(*kmsg.ReadShareGroupStateResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewReadShareGroupStateResponseTopic()
			rt.TopicID = t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewReadShareGroupStateResponseTopicPartition()
				rp.Partition = p.Partition
				sp := sharestate.SharePartition{Group: req.GroupID, TopicID: controller.TopicID(t.TopicID), Partition: p.Partition}
				summary, _ := uvarintTag(p.UnknownTags, shareTagSummary)
				b.readSharePartition(ctx, coord, sp, p.LeaderEpoch, summary == 1, &rp)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
}

// readSharePartition fills rp with sp's committed state at coord, read by a leader at leaderEpoch, or
// without a fence for a summary (weir's tag, shareTagSummary), whose answer carries the state's
// leader epoch in shareTagLeaderEpoch.
func (b *Broker) readSharePartition(ctx context.Context, coord *sharestate.Coordinator, sp sharestate.SharePartition, leaderEpoch int32, summary bool, rp *kmsg.ReadShareGroupStateResponseTopicPartition) {
	if sp.Group == "" || sp.Partition < 0 {
		rp.ErrorCode = kerr.InvalidRequest.Code
		return
	}
	var d *share.Durable
	var err error
	if summary {
		d, err = coord.Summary(ctx, sp)
	} else {
		d, err = coord.Read(ctx, sp, leaderEpoch)
	}
	switch {
	case errors.Is(err, sharestate.ErrNoState):
		rp.StartOffset = shareNoStartOffset
		return
	case err != nil:
		rp.ErrorCode = b.shareStateCode(err)
		return
	}
	r := d.Snapshot()
	rp.StateEpoch, rp.StartOffset = r.Seq, r.StartOffset
	if summary {
		rp.UnknownTags.Set(shareTagLeaderEpoch, binary.AppendUvarint(nil, uint64(max(r.LeaderEpoch, 0))))
	}
	for _, bt := range r.Batches {
		sb := kmsg.NewReadShareGroupStateResponseTopicPartitionStateBatch()
		sb.FirstOffset, sb.LastOffset, sb.DeliveryState, sb.DeliveryCount = bt.First, bt.Last, toWireState(bt.State), bt.DeliveryCount
		rp.StateBatches = append(rp.StateBatches, sb)
	}
}
