package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/kafka/wire"
)

// describeGroups answers DescribeGroups (key 15): state, protocol and members of each group; a group
// the coordinator does not know is reported Dead, as Kafka does. Member metadata and assignments are
// sent only while the group is Stable.
func (b *Broker) describeGroups(req *kmsg.DescribeGroupsRequest) wire.Reply {
	return func(ctx context.Context) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
		for _, id := range req.Groups {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group = id
			d, err := b.groups.Describe(ctx, id)
			if err != nil {
				rg.ErrorCode = b.errorCode(err)
				resp.Groups = append(resp.Groups, rg)
				continue
			}
			rg.State, rg.ProtocolType, rg.Protocol = d.State.String(), d.ProtocolType, d.Protocol
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
