package api

import (
	"context"
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/kafka/wire"
)

// shareGroupDescribe answers ShareGroupDescribe (key 77): each group this node coordinates as a share
// group, with its members and their assignments; GROUP_ID_NOT_FOUND for a group it does not know.
func (b *Broker) shareGroupDescribe(ctx context.Context, req *wire.Request, body *kmsg.ShareGroupDescribeRequest) wire.Reply {
	resp := body.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	img := b.meta.Image()
	for _, id := range body.GroupIDs {
		g := kmsg.NewShareGroupDescribeResponseGroup()
		g.GroupID = id
		g.AuthorizedOperations = math.MinInt32 // not asked for: Kafka's "omitted"
		if err := b.shareCoordinatorCheck(ctx, id, req.Listener); err != nil {
			g.ErrorCode, g.ErrorMessage = b.errorCode(err), errorMessage(err)
			resp.Groups = append(resp.Groups, g)
			continue
		}
		d, err := b.groups.ShareDescribe(ctx, id)
		if err != nil {
			g.ErrorCode = b.errorCode(err)
			resp.Groups = append(resp.Groups, g)
			continue
		}
		g.GroupState, g.GroupEpoch, g.AssignmentEpoch, g.Assignor = d.State.String(), d.GroupEpoch, d.AssignmentEpoch, d.Assignor
		for _, m := range d.Members {
			dm := kmsg.NewShareGroupDescribeResponseGroupMember()
			dm.MemberID, dm.RackID, dm.MemberEpoch, dm.ClientID, dm.ClientHost = m.MemberID, m.RackID, m.MemberEpoch, m.ClientID, m.ClientHost
			dm.SubscribedTopicNames = m.Subscribed
			for _, ta := range m.Assignment {
				tp := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
				tp.TopicID, tp.Topic, tp.Partitions = ta.TopicID, topicName(img, ta.TopicID, ta.Topic), ta.Partitions
				dm.Assignment.TopicPartitions = append(dm.Assignment.TopicPartitions, tp)
			}
			g.Members = append(g.Members, dm)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return ready(resp)
}

// topicName is the name of the topic id names in img, else fallback.
func topicName(img *controller.Image, id controller.TopicID, fallback string) string {
	if t, ok := img.TopicByID(id); ok {
		return t.Name
	}
	return fallback
}
