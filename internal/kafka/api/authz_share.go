package api

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/acl"
	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/kafka/wire"
)

// authShareGroupHeartbeat: READ on the group (else GROUP_AUTHORIZATION_FAILED), and READ on every
// topic the member subscribes to (else TOPIC_AUTHORIZATION_FAILED, nothing changed).
func authShareGroupHeartbeat(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.ShareGroupHeartbeatRequest)
	if code := c.memberDenied(body.GroupID, body.SubscribedTopicNames, acl.OpRead); code != 0 {
		resp := body.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
		resp.ErrorCode = code
		return ready(resp)
	}
	return c.b.serve(ctx, req)
}

// authShareGroupDescribe: DESCRIBE on each group (else that group answers
// GROUP_AUTHORIZATION_FAILED).
func authShareGroupDescribe(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.ShareGroupDescribeRequest)
	kept, denied := split(body.GroupIDs, func(g string) bool { return c.may(acl.OpDescribe, acl.ResourceGroup, g) })
	body.GroupIDs = kept
	return c.serveRest(ctx, req, len(kept), len(denied), func(r kmsg.Response) {
		resp := r.(*kmsg.ShareGroupDescribeResponse)
		for _, id := range denied {
			g := kmsg.NewShareGroupDescribeResponseGroup()
			g.GroupID, g.ErrorCode = id, codeGroupDenied
			resp.Groups = append(resp.Groups, g)
		}
	})
}

// shareTopicCheck returns a function that asks READ on the topic a share request names by id; an id
// no topic has is let through, for the handler to answer UNKNOWN_TOPIC_ID.
func (c *authCtx) shareTopicCheck(img *controller.Image) func(controller.TopicID) bool {
	check := c.topicCheck(acl.OpRead)
	return func(id controller.TopicID) bool {
		t, ok := img.TopicByID(id)
		return !ok || check(t.Name)
	}
}

// authShareFetch: READ on the group (else GROUP_AUTHORIZATION_FAILED for the whole request), and READ
// on each topic (else its partitions answer TOPIC_AUTHORIZATION_FAILED and are neither added to the
// share session nor acknowledged). The rest is served even when no topic is left, so that the share
// session's epoch moves on.
func authShareFetch(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.ShareFetchRequest)
	if !c.may(acl.OpRead, acl.ResourceGroup, deref(body.GroupID)) {
		resp := body.ResponseKind().(*kmsg.ShareFetchResponse)
		resp.ErrorCode = codeGroupDenied
		return ready(resp)
	}
	check := c.shareTopicCheck(c.b.meta.Image())
	kept, denied := split(body.Topics, func(t kmsg.ShareFetchRequestTopic) bool { return check(t.TopicID) })
	body.Topics = kept
	if len(denied) == 0 {
		return c.b.serve(ctx, req)
	}
	return after(c.b.serve(ctx, req), func(r kmsg.Response) {
		resp := r.(*kmsg.ShareFetchResponse)
		for _, t := range denied {
			rt := kmsg.NewShareFetchResponseTopic()
			rt.TopicID = t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewShareFetchResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.Records = p.Partition, codeTopicDenied, noRecords
				if len(p.AcknowledgementBatches) > 0 {
					rp.AcknowledgeErrorCode = codeTopicDenied
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	})
}

// authShareAcknowledge: READ on the group (else GROUP_AUTHORIZATION_FAILED), and READ on each topic
// (else its partitions answer TOPIC_AUTHORIZATION_FAILED, unacknowledged).
func authShareAcknowledge(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.ShareAcknowledgeRequest)
	if !c.may(acl.OpRead, acl.ResourceGroup, deref(body.GroupID)) {
		resp := body.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
		resp.ErrorCode = codeGroupDenied
		return ready(resp)
	}
	check := c.shareTopicCheck(c.b.meta.Image())
	kept, denied := split(body.Topics, func(t kmsg.ShareAcknowledgeRequestTopic) bool { return check(t.TopicID) })
	body.Topics = kept
	if len(denied) == 0 {
		return c.b.serve(ctx, req)
	}
	return after(c.b.serve(ctx, req), func(r kmsg.Response) {
		resp := r.(*kmsg.ShareAcknowledgeResponse)
		for _, t := range denied {
			rt := kmsg.NewShareAcknowledgeResponseTopic()
			rt.TopicID = t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, codeTopicDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	})
}

// authReadShareGroupState: CLUSTER_ACTION, which only brokers hold (else every partition answers
// CLUSTER_AUTHORIZATION_FAILED), as Kafka authorizes its broker-to-share-coordinator keys.
func authReadShareGroupState(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	if c.mayCluster(acl.OpClusterAction) {
		return c.b.serve(ctx, req)
	}
	body := req.Body.(*kmsg.ReadShareGroupStateRequest)
	resp := body.ResponseKind().(*kmsg.ReadShareGroupStateResponse)
	for _, t := range body.Topics {
		rt := kmsg.NewReadShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewReadShareGroupStateResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, codeClusterDenied
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return ready(resp)
}

// authWriteShareGroupState: CLUSTER_ACTION (else every partition answers
// CLUSTER_AUTHORIZATION_FAILED and nothing is written).
func authWriteShareGroupState(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	if c.mayCluster(acl.OpClusterAction) {
		return c.b.serve(ctx, req)
	}
	body := req.Body.(*kmsg.WriteShareGroupStateRequest)
	resp := body.ResponseKind().(*kmsg.WriteShareGroupStateResponse)
	for _, t := range body.Topics {
		rt := kmsg.NewWriteShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewWriteShareGroupStateResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, codeClusterDenied
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return ready(resp)
}

// authDescribeShareGroupOffsets: DESCRIBE on each group (else that group answers
// GROUP_AUTHORIZATION_FAILED), and DESCRIBE on each topic: a named topic denied answers
// TOPIC_AUTHORIZATION_FAILED for its partitions, and a request for every share-partition leaves the
// denied topics out.
func authDescribeShareGroupOffsets(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.DescribeShareGroupOffsetsRequest)
	check := c.topicCheck(acl.OpDescribe)
	kept, denied := split(body.Groups, func(g kmsg.DescribeShareGroupOffsetsRequestGroup) bool {
		return c.may(acl.OpDescribe, acl.ResourceGroup, g.GroupID)
	})
	all := make([]bool, len(kept))
	deniedTopics := make([][]kmsg.DescribeShareGroupOffsetsRequestGroupTopic, len(kept))
	for i := range kept {
		all[i] = kept[i].Topics == nil
		if !all[i] {
			kept[i].Topics, deniedTopics[i] = split(kept[i].Topics, func(t kmsg.DescribeShareGroupOffsetsRequestGroupTopic) bool { return check(t.Topic) })
		}
	}
	body.Groups = kept
	fill := func(r kmsg.Response) {
		resp := r.(*kmsg.DescribeShareGroupOffsetsResponse)
		for i := range resp.Groups {
			if i >= len(kept) {
				break
			}
			rg := &resp.Groups[i]
			if all[i] {
				rg.Topics = slices.DeleteFunc(rg.Topics, func(t kmsg.DescribeShareGroupOffsetsResponseGroupTopic) bool { return !check(t.Topic) })
				continue
			}
			for _, t := range deniedTopics[i] {
				rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
					rp.Partition, rp.StartOffset, rp.LeaderEpoch, rp.ErrorCode = p, shareNoStartOffset, -1, codeTopicDenied
					rt.Partitions = append(rt.Partitions, rp)
				}
				rg.Topics = append(rg.Topics, rt)
			}
		}
		for _, g := range denied {
			rg := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
			rg.GroupID, rg.ErrorCode = g.GroupID, codeGroupDenied
			resp.Groups = append(resp.Groups, rg)
		}
	}
	if len(kept) == 0 && len(denied) > 0 {
		resp := body.ResponseKind()
		fill(resp)
		return ready(resp)
	}
	return after(c.b.serve(ctx, req), fill)
}

// authAlterShareGroupOffsets: READ on the group (else GROUP_AUTHORIZATION_FAILED, nothing changed),
// and READ on each topic (else its partitions answer TOPIC_AUTHORIZATION_FAILED, unchanged).
func authAlterShareGroupOffsets(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.AlterShareGroupOffsetsRequest)
	if !c.may(acl.OpRead, acl.ResourceGroup, body.GroupID) {
		resp := body.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
		resp.ErrorCode = codeGroupDenied
		return ready(resp)
	}
	kept, denied := split(body.Topics, func(t kmsg.AlterShareGroupOffsetsRequestTopic) bool { return c.mayTopic(acl.OpRead, t.Topic) })
	body.Topics = kept
	return c.serveRest(ctx, req, len(kept), len(denied), func(r kmsg.Response) {
		resp := r.(*kmsg.AlterShareGroupOffsetsResponse)
		for _, t := range denied {
			rt := kmsg.NewAlterShareGroupOffsetsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, codeTopicDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	})
}

// authDeleteShareGroupOffsets: DELETE on the group (else GROUP_AUTHORIZATION_FAILED, nothing
// deleted), and READ on each topic (else it answers TOPIC_AUTHORIZATION_FAILED, its state kept).
func authDeleteShareGroupOffsets(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.DeleteShareGroupOffsetsRequest)
	if !c.may(acl.OpDelete, acl.ResourceGroup, body.GroupID) {
		resp := body.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
		resp.ErrorCode = codeGroupDenied
		return ready(resp)
	}
	kept, denied := split(body.Topics, func(t kmsg.DeleteShareGroupOffsetsRequestTopic) bool { return c.mayTopic(acl.OpRead, t.Topic) })
	body.Topics = kept
	return c.serveRest(ctx, req, len(kept), len(denied), func(r kmsg.Response) {
		resp := r.(*kmsg.DeleteShareGroupOffsetsResponse)
		for _, t := range denied {
			rt := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, codeTopicDenied
			resp.Topics = append(resp.Topics, rt)
		}
	})
}
