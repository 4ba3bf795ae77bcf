package api

import (
	"context"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/kafka/wire"
)

// joinGroup answers JoinGroup (key 11). The reply waits until the join phase completes; v4+ without a
// member id first gets MEMBER_ID_REQUIRED with the id to rejoin with (KIP-394). In a KIP-848 group the
// member joins as a classic member and is answered at once, as a follower (docs/groups.md, "Online
// upgrade and downgrade").
func (b *Broker) joinGroup(wreq *wire.Request, req *kmsg.JoinGroupRequest) wire.Reply {
	jr := group.JoinRequest{
		Version:          req.Version,
		MemberID:         req.MemberID,
		InstanceID:       deref(req.InstanceID),
		ClientID:         deref(wreq.ClientID),
		ClientHost:       clientHost(wreq.Remote),
		ProtocolType:     req.ProtocolType,
		SessionTimeout:   millis(req.SessionTimeoutMillis),
		RebalanceTimeout: millis(req.RebalanceTimeoutMillis),
		Topics:           imageConsumerTopics{b.meta.Image()},
	}
	if req.Version == 0 {
		jr.RebalanceTimeout = 0
	}
	for _, p := range req.Protocols {
		jr.Protocols = append(jr.Protocols, group.Protocol{Name: p.Name, Metadata: p.Metadata})
	}
	return func(ctx context.Context) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		r := b.groups.Join(ctx, req.Group, jr)
		resp.ErrorCode = b.errorCode(r.Err)
		resp.Generation = r.Generation
		resp.MemberID = r.MemberID
		if r.Err != nil {
			if r.MemberID == "" {
				resp.MemberID = req.MemberID
			}
			resp.Generation = -1
			return resp
		}
		resp.LeaderID = r.Leader
		resp.Protocol = &r.Protocol
		resp.ProtocolType = &r.ProtocolType
		resp.SkipAssignment = r.SkipAssignment
		if r.SkipAssignment && req.Version < 9 {
			// Older leaders cannot be told to keep the assignment; they get no members and no work.
			return resp
		}
		for _, m := range r.Members {
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID, rm.ProtocolMetadata = m.MemberID, m.Metadata
			if m.InstanceID != "" {
				rm.InstanceID = &m.InstanceID
			}
			resp.Members = append(resp.Members, rm)
		}
		return resp
	}
}

// clientHost is the client's address as Kafka reports it: "/" and the IP.
func clientHost(a net.Addr) string {
	if a == nil {
		return ""
	}
	if tcp, ok := a.(*net.TCPAddr); ok {
		return "/" + tcp.IP.String()
	}
	return "/" + a.String()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func millis(ms int32) time.Duration { return time.Duration(ms) * time.Millisecond }
