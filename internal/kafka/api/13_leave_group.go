package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/kafka/wire"
)

// leaveGroup answers LeaveGroup (key 13): v0-v2 name one member; v3+ name several, by member id or
// group.instance.id, each with its own error.
func (b *Broker) leaveGroup(req *kmsg.LeaveGroupRequest) wire.Reply {
	var members []group.LeaveMember
	if req.Version < 3 {
		members = []group.LeaveMember{{MemberID: req.MemberID}}
	} else {
		for _, m := range req.Members {
			members = append(members, group.LeaveMember{MemberID: m.MemberID, InstanceID: deref(m.InstanceID)})
		}
	}
	return func(ctx context.Context) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
		errs, err := b.groups.Leave(ctx, req.Group, members)
		if err != nil {
			resp.ErrorCode = b.errorCode(err)
			return resp
		}
		if req.Version < 3 {
			resp.ErrorCode = b.errorCode(errs[0])
			return resp
		}
		for i, m := range req.Members {
			rm := kmsg.NewLeaveGroupResponseMember()
			rm.MemberID, rm.InstanceID = m.MemberID, m.InstanceID
			rm.ErrorCode = b.errorCode(errs[i])
			resp.Members = append(resp.Members, rm)
		}
		return resp
	}
}
