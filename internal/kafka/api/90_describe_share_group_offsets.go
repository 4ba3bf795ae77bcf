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
			rg.Topics = b.describeShareTopics(ctx, img, g.GroupID, topics, all)
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

// describeShareTopics describes groupID's share-partitions of topics, asking their share-state
// coordinators shareAdminFanout at a time. With onlyState set (a request for every share-partition),
// the partitions without state are left out, and so are the topics left without any.
func (b *Broker) describeShareTopics(ctx context.Context, img *controller.Image, groupID string, topics []kmsg.DescribeShareGroupOffsetsRequestGroupTopic, onlyState bool) []kmsg.DescribeShareGroupOffsetsResponseGroupTopic {
	type slot struct{ topic, part int }
	var slots []slot
	out := make([]kmsg.DescribeShareGroupOffsetsResponseGroupTopic, len(topics))
	for ti, t := range topics {
		out[ti] = kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
		out[ti].Topic = t.Topic
		if topic, ok := img.Topic(t.Topic); ok {
			out[ti].TopicID = topic.ID
		}
		out[ti].Partitions = make([]kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition, len(t.Partitions))
		for pi := range t.Partitions {
			slots = append(slots, slot{ti, pi})
		}
	}
	noState := make([]bool, len(slots))
	fanOut(len(slots), func(k int) {
		s := slots[k]
		out[s.topic].Partitions[s.part], noState[k] = b.describeSharePartition(ctx, img, groupID, topics[s.topic].Topic, topics[s.topic].Partitions[s.part])
	})
	if !onlyState {
		return out
	}
	var kept []kmsg.DescribeShareGroupOffsetsResponseGroupTopic
	k := 0
	for _, rt := range out {
		parts := rt.Partitions[:0]
		for _, rp := range rt.Partitions {
			if !noState[k] {
				parts = append(parts, rp)
			}
			k++
		}
		if rt.Partitions = parts; len(parts) > 0 {
			kept = append(kept, rt)
		}
	}
	return kept
}

// describeSharePartition describes groupID's share-partition p of the topic named topicName, and
// reports whether it has no state.
func (b *Broker) describeSharePartition(ctx context.Context, img *controller.Image, groupID, topicName string, p int32) (kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition, bool) {
	rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
	rp.Partition, rp.StartOffset, rp.LeaderEpoch, rp.Lag = p, shareNoStartOffset, -1, shareNoLag
	topic, ok := img.Topic(topicName)
	if !ok || p < 0 || p >= topic.Partitions {
		rp.ErrorCode = errorCode(errUnknownTopicOrPartition)
		return rp, false
	}
	sp := sharestate.SharePartition{Group: groupID, TopicID: topic.ID, Partition: p}
	d, err := b.shares.store.summary(ctx, sp)
	switch {
	case errors.Is(err, sharestate.ErrNoState):
		return rp, true
	case err != nil:
		rp.ErrorCode, rp.ErrorMessage = b.errorCode(err), errorMessage(err)
	default:
		rp.StartOffset, rp.LeaderEpoch, rp.Lag = d.StartOffset(), d.LeaderEpoch(), b.shareLag(ctx, topic, p, d)
	}
	return rp, false
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
