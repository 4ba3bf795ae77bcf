package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/sharestate"
)

// deleteShareGroupOffsets answers DeleteShareGroupOffsets (key 92): for a share group without members
// (NON_EMPTY_GROUP otherwise, GROUP_ID_NOT_FOUND for a classic or consumer group's id), the state of
// every share-partition of each topic is deleted, answered once the tombstones are committed; the
// next leader to load one starts it afresh. An unknown topic is UNKNOWN_TOPIC_OR_PARTITION.
func (b *Broker) deleteShareGroupOffsets(req *wire.Request, body *kmsg.DeleteShareGroupOffsetsRequest) wire.Reply {
	return func(ctx context.Context) kmsg.Response {
		ctx, cancel := context.WithTimeout(ctx, shareOpWait)
		defer cancel()
		resp := body.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
		if err := b.shareAdminGroup(ctx, body.GroupID, req.Listener, true); err != nil {
			resp.ErrorCode, resp.ErrorMessage = b.errorCode(err), errorMessage(err)
			return resp
		}
		img := b.meta.Image()
		for _, t := range body.Topics {
			rt := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
			rt.Topic = t.Topic
			topic, ok := img.Topic(t.Topic)
			var err error
			if !ok {
				err = errUnknownTopicOrPartition
			} else {
				rt.TopicID = topic.ID
				for p := range topic.Partitions {
					sp := sharestate.SharePartition{Group: body.GroupID, TopicID: topic.ID, Partition: p}
					if err = b.deleteSharePartition(ctx, sp); err != nil {
						break
					}
				}
			}
			rt.ErrorCode, rt.ErrorMessage = b.errorCode(err), errorMessage(err)
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
}
