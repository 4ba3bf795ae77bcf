package api

import (
	"context"
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/kafka/wire"
)

// consumerGroupDescribe answers ConsumerGroupDescribe (key 69, KIP-848): each KIP-848 group with its
// epochs, assignor and members, their current and target assignments by topic id and name;
// GROUP_ID_NOT_FOUND for a group that is not one, NOT_COORDINATOR for a group coordinated elsewhere.
func (b *Broker) consumerGroupDescribe(body *kmsg.ConsumerGroupDescribeRequest) wire.Reply {
	return func(ctx context.Context) kmsg.Response {
		resp := body.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
		img := b.meta.Image()
		for _, id := range body.Groups {
			g := kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group = id
			g.AuthorizedOperations = math.MinInt32 // not asked for: Kafka's "omitted"
			d, err := b.groups.ConsumerDescribe(ctx, id)
			if err != nil {
				g.ErrorCode, g.ErrorMessage = b.errorCode(err), errorMessage(err)
				resp.Groups = append(resp.Groups, g)
				continue
			}
			g.State, g.Epoch, g.AssignmentEpoch, g.AssignorName = d.State, d.Epoch, d.AssignmentEpoch, d.Assignor
			for _, m := range d.Members {
				dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
				dm.MemberID, dm.MemberEpoch, dm.ClientID, dm.ClientHost = m.MemberID, m.MemberEpoch, m.ClientID, m.ClientHost
				if m.InstanceID != "" {
					dm.InstanceID = kmsg.StringPtr(m.InstanceID)
				}
				if m.RackID != "" {
					dm.RackID = kmsg.StringPtr(m.RackID)
				}
				if m.SubscribedRegex != "" {
					dm.SubscribedTopicRegex = kmsg.StringPtr(m.SubscribedRegex)
				}
				dm.SubscribedTopics = m.SubscribedTopics
				dm.Assignment = describedAssignment(img, m.Assignment)
				dm.TargetAssignment = describedAssignment(img, m.Target)
				dm.MemberType = 1 // a KIP-848 member
				if m.Classic {
					dm.MemberType = 0
				}
				g.Members = append(g.Members, dm)
			}
			resp.Groups = append(resp.Groups, g)
		}
		return resp
	}
}

// describedAssignment is an assignment by topic id with the topics' names as the image has them.
func describedAssignment(img *controller.Image, tps []group.TopicPartitions) kmsg.Assignment {
	a := kmsg.NewAssignment()
	a.TopicPartitions = make([]kmsg.AssignmentTopicPartition, 0, len(tps))
	for _, tp := range tps {
		at := kmsg.NewAssignmentTopicPartition()
		at.TopicID, at.Partitions = tp.TopicID, tp.Partitions
		if t, ok := img.TopicByID(controller.TopicID(tp.TopicID)); ok {
			at.Topic = t.Name
		}
		a.TopicPartitions = append(a.TopicPartitions, at)
	}
	return a
}
