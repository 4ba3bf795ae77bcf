package api

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/share"
	"github.com/weir-mq/weir/internal/sharestate"
)

// shareNoLag is the lag DescribeShareGroupOffsets v1 answers when it is not known: the share-partition
// has no state, or its data partition's high watermark could not be had.
const shareNoLag = -1

// shareLagVersion is the ListOffsets version the group coordinator asks a data leader's high watermark
// with: v2+ carries the isolation level (read_uncommitted: the high watermark).
const shareLagVersion = 4

// describeShareGroupOffsets answers DescribeShareGroupOffsets (key 90): for each group, each asked
// share-partition's start offset and the leader epoch of its durable state, read from its share-state
// coordinator without fencing its leader, and from v1 its lag. A share-partition without state answers
// start offset -1; a group's null topics ask for every share-partition that has state.
func (b *Broker) describeShareGroupOffsets(req *wire.Request, body *kmsg.DescribeShareGroupOffsetsRequest) wire.Reply {
	return func(ctx context.Context) kmsg.Response {
		ctx, cancel := context.WithTimeout(ctx, shareOpWait)
		defer cancel()
		resp := body.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
		img := b.meta.Image()
		for _, g := range body.Groups {
			rg := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
			rg.GroupID = g.GroupID
			if err := b.shareAdminGroup(ctx, g.GroupID, req.Listener, false); err != nil {
				rg.ErrorCode, rg.ErrorMessage = b.errorCode(err), errorMessage(err)
				resp.Groups = append(resp.Groups, rg)
				continue
			}
			all := g.Topics == nil
			topics := g.Topics
			if all {
				topics = allSharePartitions(img)
			}
			for _, t := range topics {
				rt := b.describeShareTopic(ctx, img, g.GroupID, t, all)
				if !all || len(rt.Partitions) > 0 {
					rg.Topics = append(rg.Topics, rt)
				}
			}
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	}
}

// allSharePartitions is every partition of every topic in img but weir's internal ones, as a request
// would name them.
func allSharePartitions(img *controller.Image) []kmsg.DescribeShareGroupOffsetsRequestGroupTopic {
	var out []kmsg.DescribeShareGroupOffsetsRequestGroupTopic
	for _, t := range img.Topics {
		if t.Internal {
			continue
		}
		rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
		rt.Topic = t.Name
		for p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, p)
		}
		out = append(out, rt)
	}
	return out
}

// describeShareTopic describes groupID's share-partitions of t. With onlyState set (a request for every
// share-partition), the partitions without state are left out.
func (b *Broker) describeShareTopic(ctx context.Context, img *controller.Image, groupID string, t kmsg.DescribeShareGroupOffsetsRequestGroupTopic, onlyState bool) kmsg.DescribeShareGroupOffsetsResponseGroupTopic {
	rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
	rt.Topic = t.Topic
	topic, ok := img.Topic(t.Topic)
	if ok {
		rt.TopicID = topic.ID
	}
	for _, p := range t.Partitions {
		rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
		rp.Partition, rp.StartOffset, rp.LeaderEpoch, rp.Lag = p, shareNoStartOffset, -1, shareNoLag
		if !ok || p < 0 || p >= topic.Partitions {
			rp.ErrorCode = errorCode(errUnknownTopicOrPartition)
			rt.Partitions = append(rt.Partitions, rp)
			continue
		}
		sp := sharestate.SharePartition{Group: groupID, TopicID: topic.ID, Partition: p}
		d, err := b.shares.store.summary(ctx, sp)
		switch {
		case errors.Is(err, sharestate.ErrNoState):
			if onlyState {
				continue
			}
		case err != nil:
			rp.ErrorCode, rp.ErrorMessage = b.errorCode(err), errorMessage(err)
		default:
			rp.StartOffset, rp.LeaderEpoch, rp.Lag = d.StartOffset(), d.LeaderEpoch(), b.shareLag(ctx, topic, p, d)
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

// shareLag is the records of d's share-partition not yet finished: from the start offset to the high
// watermark, less the finished ones in the window (KIP-1226); shareNoLag when the high watermark
// could not be had.
func (b *Broker) shareLag(ctx context.Context, t *controller.Topic, p int32, d *share.Durable) int64 {
	hw, ok := b.highWatermark(ctx, t, p)
	if !ok {
		return shareNoLag
	}
	return max(hw-d.StartOffset()-d.Completed(), 0)
}

// highWatermark returns t's partition p's high watermark: the local replica's when this node leads
// it, else its leader's answer to a ListOffsets for the latest offset (read_uncommitted), over the
// inter-broker connections.
func (b *Broker) highWatermark(ctx context.Context, t *controller.Topic, p int32) (int64, bool) {
	st, ok := t.Partition(p)
	if !ok || st.Leader == controller.NoLeader {
		return 0, false
	}
	if st.Leader == b.nodeID {
		r, ok := b.replicas.Replica(t.Name, p)
		if !ok {
			return 0, false
		}
		return r.HighWatermark(), true
	}
	addr, err := brokerAddr(b.meta.Image(), st.Leader)
	if err != nil {
		return 0, false
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.ReplicaID = shareLagVersion, -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = t.Name
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = p, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := b.shares.store.conns.roundTrip(ctx, addr, req)
	if err != nil {
		return 0, false
	}
	for _, rt := range kresp.(*kmsg.ListOffsetsResponse).Topics {
		for _, rp := range rt.Partitions {
			if rt.Topic == t.Name && rp.Partition == p && rp.ErrorCode == 0 {
				return rp.Offset, true
			}
		}
	}
	return 0, false
}
