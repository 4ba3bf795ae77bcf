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
	resp := body.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	if !c.may(acl.OpRead, acl.ResourceGroup, body.Group) {
		resp.ErrorCode = codeGroupDenied
		return ready(resp)
	}
	check := c.topicCheck(acl.OpDescribe)
	for _, t := range body.SubscribedTopicNames {
		if !check(t) {
			resp.ErrorCode = codeTopicDenied
			return ready(resp)
		}
	}
	return c.b.serve(ctx, req)
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
