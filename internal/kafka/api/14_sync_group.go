package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/kafka/wire"
)

// syncGroup answers SyncGroup (key 14). Every member's reply waits for the leader's assignment to be
// stored; each then gets its own bytes.
func (b *Broker) syncGroup(req *kmsg.SyncGroupRequest) wire.Reply {
	sr := group.SyncRequest{
		MemberID:     req.MemberID,
		InstanceID:   deref(req.InstanceID),
		Generation:   req.Generation,
		ProtocolType: deref(req.ProtocolType),
		Protocol:     deref(req.Protocol),
	}
	for _, a := range req.GroupAssignment {
		sr.Assignments = append(sr.Assignments, group.MemberAssignment{MemberID: a.MemberID, Assignment: a.MemberAssignment})
	}
	return func(ctx context.Context) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		r := b.groups.Sync(ctx, req.Group, sr)
		resp.ErrorCode = b.errorCode(r.Err)
		if r.Err != nil {
			resp.MemberAssignment = []byte{}
			return resp
		}
		resp.ProtocolType, resp.Protocol = &r.ProtocolType, &r.Protocol
		resp.MemberAssignment = r.Assignment
		return resp
	}
}
