package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/kafka/wire"
)

// offsetFetch answers OffsetFetch (key 9) with the group's committed offsets: -1 for a partition without
// one; every committed partition for null topics (v2+). Offsets staged by open transactions are not
// committed yet. With RequireStable (v7, KIP-447) a partition with staged offsets, or a commit being
// written, gets UNSTABLE_OFFSET_COMMIT and offset -1 instead, whether named or listed as one of all the
// group's partitions; as in Kafka that is a partition error, never the group's. A group-level error goes
// in the top-level error code from v2 and in every partition before.
func (b *Broker) offsetFetch(req *kmsg.OffsetFetchRequest) wire.Reply {
	var parts []group.TopicPartition
	all := req.Version >= 2 && req.Topics == nil
	if !all {
		parts = []group.TopicPartition{}
		for _, rt := range req.Topics {
			for _, p := range rt.Partitions {
				parts = append(parts, group.TopicPartition{Topic: rt.Topic, Partition: p})
			}
		}
	}
	return func(ctx context.Context) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		fetch := b.groups.FetchOffsets
		if req.RequireStable {
			fetch = b.groups.FetchStableOffsets
		}
		got, err := fetch(ctx, req.Group, parts)
		if err != nil {
			code := b.errorCode(err)
			if req.Version >= 2 {
				resp.ErrorCode = code
				return resp
			}
			got = make([]group.FetchedOffset, len(parts))
			for i, tp := range parts {
				got[i] = group.FetchedOffset{TopicPartition: tp, Offset: -1, LeaderEpoch: -1}
			}
			resp.Topics = fetchedTopics(got, code)
			return resp
		}
		resp.Topics = fetchedTopics(got, 0)
		return resp
	}
}

// fetchedTopics groups offsets by topic, in order of first appearance, each partition with code or, when
// that is 0, its own error's.
func fetchedTopics(offsets []group.FetchedOffset, code int16) []kmsg.OffsetFetchResponseTopic {
	var out []kmsg.OffsetFetchResponseTopic
	index := map[string]int{}
	for _, o := range offsets {
		i, ok := index[o.Topic]
		if !ok {
			i = len(out)
			index[o.Topic] = i
			t := kmsg.NewOffsetFetchResponseTopic()
			t.Topic = o.Topic
			out = append(out, t)
		}
		p := kmsg.NewOffsetFetchResponseTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch = o.Partition, o.Offset, o.LeaderEpoch
		md := o.Metadata
		p.Metadata = &md
		p.ErrorCode = code
		if code == 0 {
			p.ErrorCode = errorCode(o.Err)
		}
		out[i].Partitions = append(out[i].Partitions, p)
	}
	return out
}
