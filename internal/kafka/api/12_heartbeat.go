package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/kafka/wire"
)

// heartbeat answers Heartbeat (key 12): REBALANCE_IN_PROGRESS tells the member to rejoin.
func (b *Broker) heartbeat(req *kmsg.HeartbeatRequest) wire.Reply {
	hr := group.HeartbeatRequest{MemberID: req.MemberID, InstanceID: deref(req.InstanceID), Generation: req.Generation}
	return func(ctx context.Context) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = b.errorCode(b.groups.Heartbeat(ctx, req.Group, hr))
		return resp
	}
}
