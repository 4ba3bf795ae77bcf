package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/kafka/wire"
)

// offsetCommit answers OffsetCommit (key 8). Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION;
// the rest go to the coordinator, which fences the member and generation (generation -1 without a
// member: a simple commit, only for a group without members) and answers once the records are durable.
// The v2-v4 retention time is ignored: offsets expire by the broker's offsets.retention.minutes.
func (b *Broker) offsetCommit(req *kmsg.OffsetCommitRequest) wire.Reply {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	img := b.meta.Image()
	var offsets []group.OffsetCommit
	var slots []*kmsg.OffsetCommitResponseTopicPartition
	resp.Topics = make([]kmsg.OffsetCommitResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		st := &resp.Topics[i]
		*st = kmsg.NewOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			sp := &st.Partitions[j]
			*sp = kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			if !hasPartition(img, rt.Topic, rp.Partition) {
				sp.ErrorCode = errorCode(errUnknownTopicOrPartition)
				continue
			}
			epoch := rp.LeaderEpoch
			if req.Version < 6 {
				epoch = -1
			}
			offsets = append(offsets, group.OffsetCommit{
				TopicPartition: group.TopicPartition{Topic: rt.Topic, Partition: rp.Partition},
				Offset:         rp.Offset,
				LeaderEpoch:    epoch,
				Metadata:       deref(rp.Metadata),
			})
			slots = append(slots, sp)
		}
	}
	who := group.CommitRequest{MemberID: req.MemberID, InstanceID: deref(req.InstanceID), Generation: req.Generation}
	if req.Version == 0 {
		who.Generation = -1
	}
	return func(ctx context.Context) kmsg.Response {
		if len(offsets) == 0 {
			return resp
		}
		errs, err := b.groups.Commit(ctx, req.Group, who, offsets)
		for i, sp := range slots {
			if err != nil {
				sp.ErrorCode = b.errorCode(err)
			} else {
				sp.ErrorCode = b.errorCode(errs[i])
			}
		}
		return resp
	}
}
