package api

import (
	"context"
	"errors"
	"maps"

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
// coordinators shareAdminFanout at a time, then the high watermarks of their lags with one ListOffsets
// per data leader. With onlyState set (a request for every share-partition), the partitions without
// state are left out, and so are the topics left without any.
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
	states := make([]*share.Durable, len(slots))
	fanOut(len(slots), func(k int) {
		s := slots[k]
		out[s.topic].Partitions[s.part], states[k], noState[k] = b.describeSharePartition(ctx, img, groupID, topics[s.topic].Topic, topics[s.topic].Partitions[s.part])
	})
	var lagged []controller.TopicPartition
	for k, d := range states {
		if d != nil {
			s := slots[k]
			lagged = append(lagged, controller.TopicPartition{Topic: topics[s.topic].Topic, Partition: topics[s.topic].Partitions[s.part]})
		}
	}
	hws := b.highWatermarks(ctx, img, lagged)
	for k, d := range states {
		if d == nil {
			continue
		}
		s := slots[k]
		if hw, ok := hws[controller.TopicPartition{Topic: topics[s.topic].Topic, Partition: topics[s.topic].Partitions[s.part]}]; ok {
			out[s.topic].Partitions[s.part].Lag = max(hw-d.StartOffset()-d.Completed(), 0)
		}
	}
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

// describeSharePartition describes groupID's share-partition p of the topic named topicName but for
// its lag, and returns its state (nil when it has none or could not be read) and whether it has none.
func (b *Broker) describeSharePartition(ctx context.Context, img *controller.Image, groupID, topicName string, p int32) (kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition, *share.Durable, bool) {
	rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
	rp.Partition, rp.StartOffset, rp.LeaderEpoch, rp.Lag = p, shareNoStartOffset, -1, shareNoLag
	topic, ok := img.Topic(topicName)
	if !ok || p < 0 || p >= topic.Partitions {
		rp.ErrorCode = errorCode(errUnknownTopicOrPartition)
		return rp, nil, false
	}
	sp := sharestate.SharePartition{Group: groupID, TopicID: topic.ID, Partition: p}
	d, err := b.shares.store.summary(ctx, sp)
	switch {
	case errors.Is(err, sharestate.ErrNoState):
		return rp, nil, true
	case err != nil:
		rp.ErrorCode, rp.ErrorMessage = b.errorCode(err), errorMessage(err)
		return rp, nil, false
	}
	rp.StartOffset, rp.LeaderEpoch = d.StartOffset(), d.LeaderEpoch()
	return rp, d, false
}

// highWatermarks returns the high watermarks of tps that could be had: the local replica's for the
// partitions this node leads, else their leaders' answers to one ListOffsets per leader for the
// latest offsets (read_uncommitted), over the inter-broker connections, the leaders asked at once.
func (b *Broker) highWatermarks(ctx context.Context, img *controller.Image, tps []controller.TopicPartition) map[controller.TopicPartition]int64 {
	out := map[controller.TopicPartition]int64{}
	remote := map[int32][]controller.TopicPartition{}
	for _, tp := range tps {
		t, ok := img.Topic(tp.Topic)
		if !ok {
			continue
		}
		st, ok := t.Partition(tp.Partition)
		switch {
		case !ok || st.Leader == controller.NoLeader:
		case st.Leader == b.nodeID:
			if r, ok := b.replicas.Replica(tp.Topic, tp.Partition); ok {
				out[tp] = r.HighWatermark()
			}
		default:
			remote[st.Leader] = append(remote[st.Leader], tp)
		}
	}
	leaders := make([]int32, 0, len(remote))
	for l := range remote {
		leaders = append(leaders, l)
	}
	answers := make([]map[controller.TopicPartition]int64, len(leaders))
	fanOut(len(leaders), func(i int) { answers[i] = b.leaderHighWatermarks(ctx, img, leaders[i], remote[leaders[i]]) })
	for _, a := range answers {
		maps.Copy(out, a)
	}
	return out
}

// leaderHighWatermarks asks node leader, in one ListOffsets, for the high watermarks of tps.
func (b *Broker) leaderHighWatermarks(ctx context.Context, img *controller.Image, leader int32, tps []controller.TopicPartition) map[controller.TopicPartition]int64 {
	addr, err := brokerAddr(img, leader)
	if err != nil {
		return nil
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.ReplicaID = shareLagVersion, -1
	byTopic := map[string]int{}
	for _, tp := range tps {
		i, ok := byTopic[tp.Topic]
		if !ok {
			i = len(req.Topics)
			byTopic[tp.Topic] = i
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = tp.Topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = tp.Partition, -1
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	kresp, err := b.shares.store.conns.roundTrip(ctx, addr, req)
	if err != nil {
		return nil
	}
	out := map[controller.TopicPartition]int64{}
	for _, rt := range kresp.(*kmsg.ListOffsetsResponse).Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode == 0 {
				out[controller.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}] = rp.Offset
			}
		}
	}
	return out
}
