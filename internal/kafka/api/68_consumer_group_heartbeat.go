package api

import (
	"context"
	"iter"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/kafka/wire"
)

// consumerGroupHeartbeat answers ConsumerGroupHeartbeat (key 68, KIP-848) at the group's coordinator:
// a join (epoch 0), a heartbeat or a leave (-1, -2) on the group's membership (group.ConsumerGroup),
// whose answer carries the member's assignment by topic id when it changed. v0 lets the coordinator
// make the member id; v1 requires the client's.
func (b *Broker) consumerGroupHeartbeat(req *wire.Request, body *kmsg.ConsumerGroupHeartbeatRequest) wire.Reply {
	resp := body.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	if body.Version >= 1 && body.MemberID == "" {
		resp.ErrorCode = errorCode(group.ErrInvalidRequest)
		resp.ErrorMessage = kmsg.StringPtr("MemberId can't be empty.")
		return ready(resp)
	}
	hr := group.ConsumerHeartbeat{
		MemberID:         body.MemberID,
		MemberEpoch:      body.MemberEpoch,
		InstanceID:       deref(body.InstanceID),
		RackID:           body.RackID,
		RebalanceTimeout: millis(body.RebalanceTimeoutMillis),
		SubscribedTopics: body.SubscribedTopicNames,
		SubscribedRegex:  body.SubscribedTopicRegex,
		ServerAssignor:   body.ServerAssignor,
		ClientID:         deref(req.ClientID),
		ClientHost:       clientHost(req.Remote),
	}
	if body.RebalanceTimeoutMillis < 0 {
		hr.RebalanceTimeout = -1
	}
	if body.Topics != nil {
		hr.Owned = make([]group.TopicPartitions, 0, len(body.Topics))
		for _, t := range body.Topics {
			hr.Owned = append(hr.Owned, group.TopicPartitions{TopicID: t.TopicID, Partitions: t.Partitions})
		}
	}
	topics := imageConsumerTopics{b.meta.Image()}
	return func(ctx context.Context) kmsg.Response {
		r := b.groups.ConsumerHeartbeat(ctx, body.Group, hr, topics)
		if r.Err != nil {
			resp.ErrorCode, resp.ErrorMessage = b.errorCode(r.Err), errorMessage(r.Err)
			return resp
		}
		resp.MemberID = &r.MemberID
		resp.MemberEpoch = r.MemberEpoch
		resp.HeartbeatIntervalMillis = int32(r.HeartbeatInterval / time.Millisecond)
		if r.Assignment != nil {
			a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
			a.Topics = make([]kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic, 0, len(r.Assignment))
			for _, ta := range r.Assignment {
				t := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
				t.TopicID, t.Partitions = ta.TopicID, ta.Partitions
				a.Topics = append(a.Topics, t)
			}
			resp.Assignment = &a
		}
		return resp
	}
}

// imageConsumerTopics is group.Topics over a metadata image. Internal topics are left out, so that no
// regular expression subscribes to them, as in Kafka.
type imageConsumerTopics struct {
	img *controller.Image
}

func (t imageConsumerTopics) Lookup(name string) (group.TopicInfo, bool) {
	topic, ok := t.img.Topic(name)
	if !ok || topic.Internal {
		return group.TopicInfo{}, false
	}
	return group.TopicInfo{ID: topic.ID, Partitions: topic.Partitions}, true
}

func (t imageConsumerTopics) All() iter.Seq2[string, group.TopicInfo] {
	return func(yield func(string, group.TopicInfo) bool) {
		for name, topic := range t.img.Topics {
			if topic.Internal {
				continue
			}
			if !yield(name, group.TopicInfo{ID: topic.ID, Partitions: topic.Partitions}) {
				return
			}
		}
	}
}
