package api

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/kafka/wire"
)

// describeGroups answers DescribeGroups (key 15): state, protocol and members of each group; a group
// the coordinator does not know is reported Dead, as Kafka does. Member metadata and assignments are
// sent only while the group is Stable. A KIP-848 group is described as Kafka describes one here
// (describedConsumerGroup), so that tools knowing only DescribeGroups see its members. A group id the
// coordinator does not know, and a share group's, answer Dead: with no error up to v5, and from v6
// (KIP-1043) with GROUP_ID_NOT_FOUND and a message saying which, as Kafka 4.x answers them.
func (b *Broker) describeGroups(req *kmsg.DescribeGroupsRequest) wire.Reply {
	return func(ctx context.Context) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
		for _, id := range req.Groups {
			if cd, err := b.groups.ConsumerDescribe(ctx, id); err == nil {
				resp.Groups = append(resp.Groups, describedConsumerGroup(b.meta.Image(), cd))
				continue
			}
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group = id
			d, err := b.groups.Describe(ctx, id)
			if err != nil {
				rg.ErrorCode = b.errorCode(err)
				resp.Groups = append(resp.Groups, rg)
				continue
			}
			rg.State, rg.ProtocolType, rg.Protocol = d.State.String(), d.ProtocolType, d.Protocol
			if d.State == group.Dead && req.Version >= 6 {
				rg.ErrorCode = kerr.GroupIDNotFound.Code
				msg := fmt.Sprintf("group %s not found", id)
				if _, err := b.groups.ShareDescribe(ctx, id); err == nil {
					msg = fmt.Sprintf("group %s is not a classic group", id)
				}
				rg.ErrorMessage = &msg
			}
			for _, m := range d.Members {
				rm := kmsg.NewDescribeGroupsResponseGroupMember()
				rm.MemberID, rm.ClientID, rm.ClientHost = m.MemberID, m.ClientID, m.ClientHost
				if m.InstanceID != "" {
					rm.InstanceID = &m.InstanceID
				}
				rm.ProtocolMetadata, rm.MemberAssignment = m.Metadata, m.Assignment
				if rm.ProtocolMetadata == nil {
					rm.ProtocolMetadata = []byte{}
				}
				if rm.MemberAssignment == nil {
					rm.MemberAssignment = []byte{}
				}
				rg.Members = append(rg.Members, rm)
			}
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	}
}

// describedConsumerGroup is a KIP-848 group in DescribeGroups' terms: protocol type "consumer", its
// assignor as the protocol, its state (Empty, Reconciling, Stable), and each member's subscribed topics
// and current assignment in the classic consumer protocol's encoding (version 0), topics by name.
func describedConsumerGroup(img *controller.Image, d group.ConsumerDescription) kmsg.DescribeGroupsResponseGroup {
	rg := kmsg.NewDescribeGroupsResponseGroup()
	rg.Group, rg.State, rg.ProtocolType, rg.Protocol = d.Group, d.State, "consumer", d.Assignor
	for _, m := range d.Members {
		rm := kmsg.NewDescribeGroupsResponseGroupMember()
		rm.MemberID, rm.ClientID, rm.ClientHost = m.MemberID, m.ClientID, m.ClientHost
		if m.InstanceID != "" {
			rm.InstanceID = kmsg.StringPtr(m.InstanceID)
		}
		meta := kmsg.NewConsumerMemberMetadata()
		meta.Topics = m.SubscribedTopics
		if meta.Topics == nil {
			meta.Topics = []string{}
		}
		rm.ProtocolMetadata = meta.AppendTo(nil)
		assigned := kmsg.NewConsumerMemberAssignment()
		for _, tp := range m.Assignment {
			t, ok := img.TopicByID(controller.TopicID(tp.TopicID))
			if !ok {
				continue
			}
			at := kmsg.NewConsumerMemberAssignmentTopic()
			at.Topic, at.Partitions = t.Name, tp.Partitions
			assigned.Topics = append(assigned.Topics, at)
		}
		rm.MemberAssignment = assigned.AppendTo(nil)
		rg.Members = append(rg.Members, rm)
	}
	return rg
}
