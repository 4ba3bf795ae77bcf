package api

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/group"
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
	if body.MemberEpoch == share.JoinEpoch {
		if err := b.checkShareGroupID(ctx, body.GroupID); err != nil {
			resp.ErrorCode, resp.ErrorMessage = b.errorCode(err), errorMessage(err)
			return ready(resp)
		}
	}
	hr := share.HeartbeatRequest{MemberID: body.MemberID, MemberEpoch: body.MemberEpoch, RackID: body.RackID,
		Subscribed: body.SubscribedTopicNames, ClientID: deref(req.ClientID), ClientHost: clientHost(req.Remote)}
	out := b.shares.heartbeat(body.GroupID, hr, b.meta.Image())
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

// checkShareGroupID refuses a share group's join with an id that names a classic or consumer-protocol
// group (one with members or committed offsets): group ids are one namespace, and Kafka answers
// GROUP_ID_NOT_FOUND to a request for a group of another type.
func (b *Broker) checkShareGroupID(ctx context.Context, groupID string) error {
	d, err := b.groups.Describe(ctx, groupID)
	if err != nil {
		return err
	}
	if d.State != group.Dead {
		return fmt.Errorf("%w: group %s is not a share group", group.ErrGroupNotFound, groupID)
	}
	return nil
}
