package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/sharestate"
)

// alterShareGroupOffsets answers AlterShareGroupOffsets (key 91): for a share group without members
// (NON_EMPTY_GROUP otherwise, GROUP_ID_NOT_FOUND for a classic or consumer group's id), each
// share-partition's start offset is set, its window emptied, and the change committed at its
// share-state coordinator before it is answered; the next leader to load the share-partition starts
// there. A negative start offset is INVALID_REQUEST, an unknown partition UNKNOWN_TOPIC_OR_PARTITION.
func (b *Broker) alterShareGroupOffsets(req *wire.Request, body *kmsg.AlterShareGroupOffsetsRequest) wire.Reply {
	return func(ctx context.Context) kmsg.Response {
		ctx, cancel := context.WithTimeout(ctx, shareOpWait)
		defer cancel()
		resp := body.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
		if err := b.shareAdminGroup(ctx, body.GroupID, req.Listener, true); err != nil {
			resp.ErrorCode, resp.ErrorMessage = b.errorCode(err), errorMessage(err)
			return resp
		}
		img := b.meta.Image()
		for _, t := range body.Topics {
			rt := kmsg.NewAlterShareGroupOffsetsResponseTopic()
			rt.Topic = t.Topic
			topic, ok := img.Topic(t.Topic)
			if ok {
				rt.TopicID = topic.ID
			}
			for _, p := range t.Partitions {
				rp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
				rp.Partition = p.Partition
				var err error
				switch {
				case !ok || p.Partition < 0 || p.Partition >= topic.Partitions:
					err = errUnknownTopicOrPartition
				case p.StartOffset < 0:
					err = errInvalidRequest
				default:
					sp := sharestate.SharePartition{Group: body.GroupID, TopicID: topic.ID, Partition: p.Partition}
					err = b.resetSharePartition(ctx, sp, p.StartOffset)
				}
				rp.ErrorCode, rp.ErrorMessage = b.errorCode(err), errorMessage(err)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
}
