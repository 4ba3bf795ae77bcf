package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/acl"
	"github.com/weir-mq/weir/internal/kafka/wire"
)

// authConsumerGroupHeartbeat: READ on the group (else GROUP_AUTHORIZATION_FAILED), and DESCRIBE on
// every topic the member names in its subscription (else TOPIC_AUTHORIZATION_FAILED, nothing changed).
// A regular expression is not checked topic by topic: it subscribes to what it matches.
func authConsumerGroupHeartbeat(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.ConsumerGroupHeartbeatRequest)
	if code := c.memberDenied(body.Group, body.SubscribedTopicNames, acl.OpDescribe); code != 0 {
		resp := body.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = code
		return ready(resp)
	}
	return c.b.serve(ctx, req)
}

// memberDenied checks a group member's heartbeat: READ on the group, then topicOp on every topic it
// subscribes to. It returns the code to answer (GROUP_ or TOPIC_AUTHORIZATION_FAILED), or 0.
func (c *authCtx) memberDenied(group string, topics []string, topicOp acl.Operation) int16 {
	if !c.may(acl.OpRead, acl.ResourceGroup, group) {
		return codeGroupDenied
	}
	check := c.topicCheck(topicOp)
	for _, t := range topics {
		if !check(t) {
			return codeTopicDenied
		}
	}
	return 0
}

// authConsumerGroupDescribe: DESCRIBE on each group (else that group answers
// GROUP_AUTHORIZATION_FAILED).
func authConsumerGroupDescribe(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.ConsumerGroupDescribeRequest)
	kept, denied := split(body.Groups, func(g string) bool { return c.may(acl.OpDescribe, acl.ResourceGroup, g) })
	body.Groups = kept
	return c.serveRest(ctx, req, len(kept), len(denied), func(r kmsg.Response) {
		resp := r.(*kmsg.ConsumerGroupDescribeResponse)
		for _, id := range denied {
			g := kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group, g.ErrorCode = id, codeGroupDenied
			resp.Groups = append(resp.Groups, g)
		}
	})
}
