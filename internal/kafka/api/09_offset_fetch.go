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
	if req.Version >= 8 {
		return b.offsetFetchGroups(req)
	}
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

// offsetFetchGroups answers OffsetFetch v8+, which batches groups: each group is fetched as v7 fetches
// one, with its own group-level error. v9 names a KIP-848 member and its epoch, which the coordinator
// checks (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH) in a group with KIP-848 members.
func (b *Broker) offsetFetchGroups(req *kmsg.OffsetFetchRequest) wire.Reply {
	type fetch struct {
		group string
		who   group.FetchMember
		parts []group.TopicPartition
	}
	fetches := make([]fetch, len(req.Groups))
	for i, rg := range req.Groups {
		f := fetch{group: rg.Group, who: group.FetchMember{MemberID: deref(rg.MemberID), Epoch: rg.MemberEpoch}}
		if req.Version < 9 {
			f.who = group.FetchMember{Epoch: -1}
		}
		if rg.Topics != nil {
			f.parts = []group.TopicPartition{}
			for _, rt := range rg.Topics {
				for _, p := range rt.Partitions {
					f.parts = append(f.parts, group.TopicPartition{Topic: rt.Topic, Partition: p})
				}
			}
		}
		fetches[i] = f
	}
	return func(ctx context.Context) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		for _, f := range fetches {
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group = f.group
			got, err := b.groups.FetchMemberOffsets(ctx, f.group, f.who, f.parts, req.RequireStable)
			if err != nil {
				g.ErrorCode = b.errorCode(err)
				resp.Groups = append(resp.Groups, g)
				continue
			}
			for _, t := range fetchedTopics(got, 0) {
				gt := kmsg.NewOffsetFetchResponseGroupTopic()
				gt.Topic = t.Topic
				for _, p := range t.Partitions {
					gp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					gp.Partition, gp.Offset, gp.LeaderEpoch, gp.Metadata, gp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
					gt.Partitions = append(gt.Partitions, gp)
				}
				g.Topics = append(g.Topics, gt)
			}
			resp.Groups = append(resp.Groups, g)
		}
		return resp
	}
}
