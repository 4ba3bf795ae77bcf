package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/kafka/wire"
)

// offsetDelete answers OffsetDelete (key 47): the group's offsets of the named partitions are removed,
// except for topics a member of a live consumer group subscribes to (GROUP_SUBSCRIBED_TO_TOPIC).
func (b *Broker) offsetDelete(req *kmsg.OffsetDeleteRequest) wire.Reply {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	img := b.meta.Image()
	var parts []group.TopicPartition
	var slots []*kmsg.OffsetDeleteResponseTopicPartition
	resp.Topics = make([]kmsg.OffsetDeleteResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		st := &resp.Topics[i]
		*st = kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.OffsetDeleteResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			sp := &st.Partitions[j]
			*sp = kmsg.NewOffsetDeleteResponseTopicPartition()
			sp.Partition = rp.Partition
			if !hasPartition(img, rt.Topic, rp.Partition) {
				sp.ErrorCode = errorCode(errUnknownTopicOrPartition)
				continue
			}
			parts = append(parts, group.TopicPartition{Topic: rt.Topic, Partition: rp.Partition})
			slots = append(slots, sp)
		}
	}
	return func(ctx context.Context) kmsg.Response {
		errs, err := b.groups.DeleteOffsets(ctx, req.Group, parts)
		if err != nil {
			resp.ErrorCode = b.errorCode(err)
			resp.Topics = nil
			return resp
		}
		for i, sp := range slots {
			sp.ErrorCode = b.errorCode(errs[i])
		}
		return resp
	}
}
