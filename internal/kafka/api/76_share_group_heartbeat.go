package api

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/share"
)

// shareGroupHeartbeat answers ShareGroupHeartbeat (key 76) at the group's coordinator: a join (epoch
// 0), a heartbeat or a leave (-1) on the share group's membership (share.Group), whose answer carries
// the member's assignment by topic id when it changed.
func (b *Broker) shareGroupHeartbeat(ctx context.Context, req *wire.Request, body *kmsg.ShareGroupHeartbeatRequest) wire.Reply {
	resp := body.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	if err := b.shareCoordinatorCheck(ctx, body.GroupID, req.Listener); err != nil {
		resp.ErrorCode, resp.ErrorMessage = b.errorCode(err), errorMessage(err)
		return ready(resp)
	}
	hr := share.HeartbeatRequest{MemberID: body.MemberID, MemberEpoch: body.MemberEpoch, RackID: body.RackID,
		Subscribed: body.SubscribedTopicNames, ClientID: deref(req.ClientID), ClientHost: clientHost(req.Remote)}
	out := b.groups.ShareHeartbeat(ctx, body.GroupID, hr, b.shares.membership(b.meta.Image(), body.GroupID))
	if out.Err != nil {
		resp.ErrorCode, resp.ErrorMessage = b.errorCode(out.Err), errorMessage(out.Err)
		return ready(resp)
	}
	resp.MemberID = &out.MemberID
	resp.MemberEpoch = out.MemberEpoch
	resp.HeartbeatIntervalMillis = int32(out.HeartbeatInterval / time.Millisecond)
	if out.Assignment != nil {
		a := kmsg.NewShareGroupHeartbeatResponseAssignment()
		a.TopicPartitions = []kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{}
		for _, ta := range out.Assignment {
			tp := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
			tp.TopicID, tp.Partitions = ta.TopicID, ta.Partitions
			a.TopicPartitions = append(a.TopicPartitions, tp)
		}
		resp.Assignment = &a
	}
	return ready(resp)
}
