package api

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/acl"
	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/kafka/wire"
)

// authzRule checks one API key's request as Kafka does and serves what it allows.
type authzRule func(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply

// authzRules holds the rule of every key weir serves (TestAuthzEveryKeyHasARule); each rule's doc
// comment says what Kafka checks for the key and what a denial answers, and a clusterRule says it in
// its line: the operation asked on the cluster, the response a denial answers.
var authzRules = map[int16]authzRule{
	0:  authProduce,
	1:  authFetch,
	2:  authListOffsets,
	3:  authMetadata,
	8:  authOffsetCommit,
	9:  authOffsetFetch,
	10: authFindCoordinator,
	11: authGroupRead,
	12: authGroupRead,
	13: authGroupRead,
	14: authGroupRead,
	15: authDescribeGroups,
	16: authListGroups,
	17: authNone,
	18: authNone,
	19: authCreateTopics,
	20: authDeleteTopics,
	21: authDeleteRecords,
	22: authInitProducerID,
	23: authOffsetForLeaderEpoch,
	24: authAddPartitionsToTxn,
	25: authAddOffsetsToTxn,
	26: authEndTxn,
	27: authWriteTxnMarkers,
	28: authTxnOffsetCommit,
	29: clusterRule(acl.OpDescribe, func(r kmsg.Response) { r.(*kmsg.DescribeACLsResponse).ErrorCode = codeClusterDenied }),
	30: authCreateAcls,
	31: authDeleteAcls,
	32: authDescribeConfigs,
	33: authAlterConfigs,
	35: clusterRule(acl.OpDescribe, func(r kmsg.Response) { r.(*kmsg.DescribeLogDirsResponse).ErrorCode = codeClusterDenied }),
	36: authNone,
	37: authCreatePartitions,
	42: authDeleteGroups,
	43: authElectLeaders,
	44: authIncrementalAlterConfigs,
	45: clusterRule(acl.OpAlter, func(r kmsg.Response) { r.(*kmsg.AlterPartitionAssignmentsResponse).ErrorCode = codeClusterDenied }),
	46: clusterRule(acl.OpDescribe, func(r kmsg.Response) { r.(*kmsg.ListPartitionReassignmentsResponse).ErrorCode = codeClusterDenied }),
	47: authOffsetDelete,
	48: clusterRule(acl.OpDescribeConfigs, func(r kmsg.Response) { r.(*kmsg.DescribeClientQuotasResponse).ErrorCode = codeClusterDenied }),
	49: authAlterClientQuotas,
	50: clusterRule(acl.OpDescribe, func(r kmsg.Response) { r.(*kmsg.DescribeUserSCRAMCredentialsResponse).ErrorCode = codeClusterDenied }),
	51: authAlterUserScramCredentials,
	55: clusterRule(acl.OpDescribe, func(r kmsg.Response) { r.(*kmsg.DescribeQuorumResponse).ErrorCode = codeClusterDenied }),
	60: authDescribeCluster,
	61: authDescribeProducers,
	65: authDescribeTransactions,
	66: authListTransactions,
	68: authConsumerGroupHeartbeat,
	69: authConsumerGroupDescribe,
	76: authShareGroupHeartbeat,
	77: authShareGroupDescribe,
	78: authShareFetch,
	79: authShareAcknowledge,
	84: authReadShareGroupState,
	85: authWriteShareGroupState,
	90: authDescribeShareGroupOffsets,
	91: authAlterShareGroupOffsets,
	92: authDeleteShareGroupOffsets,
	80: clusterRule(acl.OpAlter, func(r kmsg.Response) { r.(*kmsg.AddRaftVoterResponse).ErrorCode = codeClusterDenied }),
	81: clusterRule(acl.OpAlter, func(r kmsg.Response) { r.(*kmsg.RemoveRaftVoterResponse).ErrorCode = codeClusterDenied }),
}

var (
	codeTopicDenied   = kerr.TopicAuthorizationFailed.Code
	codeGroupDenied   = kerr.GroupAuthorizationFailed.Code
	codeClusterDenied = kerr.ClusterAuthorizationFailed.Code
	codeTxnIDDenied   = kerr.TransactionalIDAuthorizationFailed.Code
)

// authNone: ApiVersions, SaslHandshake and SaslAuthenticate need no permission.
func authNone(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	return c.b.serve(ctx, req)
}

// authProduce: WRITE on the transactional id of a transactional produce (else every partition
// answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED), and WRITE on each topic (TOPIC_AUTHORIZATION_FAILED).
// An idempotent produce needs nothing more: since Kafka 3 (KIP-679) IDEMPOTENT_WRITE is checked at
// InitProducerId only.
func authProduce(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.ProduceRequest)
	if body.TransactionID != nil && !c.may(acl.OpWrite, acl.ResourceTransactionalID, *body.TransactionID) {
		if body.Acks == 0 {
			// acks=0 is never answered, a denial included.
			return ready(nil)
		}
		denied := body.Topics
		body.Topics = nil
		return c.serveRest(ctx, req, 0, len(denied), func(r kmsg.Response) { produceDenied(r, denied, codeTxnIDDenied) })
	}
	kept, denied := split(body.Topics, func(t kmsg.ProduceRequestTopic) bool { return c.mayTopic(acl.OpWrite, t.Topic) })
	body.Topics = kept
	if body.Acks == 0 && len(kept) == 0 && len(denied) > 0 {
		return c.b.serve(ctx, req)
	}
	return c.serveRest(ctx, req, len(kept), len(denied), func(r kmsg.Response) { produceDenied(r, denied, codeTopicDenied) })
}

func produceDenied(r kmsg.Response, denied []kmsg.ProduceRequestTopic, code int16) {
	resp := r.(*kmsg.ProduceResponse)
	for _, t := range denied {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
}

// mayTopic is may on a topic.
func (c *authCtx) mayTopic(op acl.Operation, topic string) bool {
	return c.may(op, acl.ResourceTopic, topic)
}

// authFetch: a follower's fetch needs CLUSTER_ACTION (else every partition answers
// TOPIC_AUTHORIZATION_FAILED, as Kafka does); a consumer's READ on each topic.
func authFetch(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.FetchRequest)
	var kept, denied []kmsg.FetchRequestTopic
	if body.ReplicaID >= 0 {
		if c.mayCluster(acl.OpClusterAction) {
			return c.b.serve(ctx, req)
		}
		denied = body.Topics
	} else {
		check := c.topicCheck(acl.OpRead)
		kept, denied = split(body.Topics, func(t kmsg.FetchRequestTopic) bool { return check(t.Topic) })
	}
	body.Topics = kept
	return c.serveRest(ctx, req, len(kept), len(denied), func(r kmsg.Response) {
		resp := r.(*kmsg.FetchResponse)
		for _, t := range denied {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, codeTopicDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	})
}

// authListOffsets: DESCRIBE on each topic.
func authListOffsets(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.ListOffsetsRequest)
	kept, denied := split(body.Topics, func(t kmsg.ListOffsetsRequestTopic) bool { return c.mayTopic(acl.OpDescribe, t.Topic) })
	body.Topics = kept
	return c.serveRest(ctx, req, len(kept), len(denied), func(r kmsg.Response) {
		resp := r.(*kmsg.ListOffsetsResponse)
		for _, t := range denied {
			rt := kmsg.NewListOffsetsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, codeTopicDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	})
}

// authMetadata: the topics the principal may not DESCRIBE are left out of an all-topics answer and
// answer TOPIC_AUTHORIZATION_FAILED when named; a named topic that does not exist is auto-created
// only with CREATE on the cluster or the topic (else TOPIC_AUTHORIZATION_FAILED). The authorized
// operations of the cluster (v8-10) and of each topic (v8+) are filled in when asked for.
func authMetadata(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.MetadataRequest)
	all := body.Topics == nil || body.Version == 0 && len(body.Topics) == 0
	var denied []kmsg.MetadataRequestTopic
	allowed := map[string]bool{}
	if !all {
		var createCluster *bool
		kept, d := split(body.Topics, func(t kmsg.MetadataRequestTopic) bool {
			name, exists := "", false
			switch {
			case t.Topic != nil:
				name = *t.Topic
				_, exists = c.img.Topic(name)
			default:
				// v10+ names a topic by id; an id no topic has is left to the handler
				// (UNKNOWN_TOPIC_ID).
				tp, ok := c.img.TopicByID(controller.TopicID(t.TopicID))
				if !ok {
					return true
				}
				name, exists = tp.Name, true
			}
			if !c.mayTopic(acl.OpDescribe, name) {
				return false
			}
			if !exists && (body.AllowAutoTopicCreation || body.Version < 4) {
				if createCluster == nil {
					ok := c.mayCluster(acl.OpCreate)
					createCluster = &ok
				}
				if !*createCluster && !c.mayTopic(acl.OpCreate, name) {
					return false
				}
			}
			allowed[name] = true
			return true
		})
		denied = d
		body.Topics = kept
	}
	return after(c.b.serve(ctx, req), func(r kmsg.Response) {
		resp := r.(*kmsg.MetadataResponse)
		resp.Topics = slices.DeleteFunc(resp.Topics, func(t kmsg.MetadataResponseTopic) bool {
			if t.Topic == nil {
				return false
			}
			if all {
				return !c.mayTopic(acl.OpDescribe, *t.Topic)
			}
			// A v0 request whose every topic was denied is an all-topics request to the handler.
			return !allowed[*t.Topic]
		})
		for _, t := range denied {
			rt := kmsg.NewMetadataResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, codeTopicDenied
			resp.Topics = append(resp.Topics, rt)
		}
		if body.IncludeTopicAuthorizedOperations {
			for i := range resp.Topics {
				if t := &resp.Topics[i]; t.ErrorCode == 0 && t.Topic != nil {
					t.AuthorizedOperations = c.ops(acl.ResourceTopic, *t.Topic)
				}
			}
		}
		if body.IncludeClusterAuthorizedOperations {
			resp.AuthorizedOperations = c.ops(acl.ResourceCluster, acl.ClusterName)
		}
	})
}

// authOffsetCommit: READ on the group (else every partition answers GROUP_AUTHORIZATION_FAILED)
// and on each topic (TOPIC_AUTHORIZATION_FAILED).
func authOffsetCommit(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.OffsetCommitRequest)
	code := codeTopicDenied
	var kept, denied []kmsg.OffsetCommitRequestTopic
	if !c.may(acl.OpRead, acl.ResourceGroup, body.Group) {
		code, denied = codeGroupDenied, body.Topics
	} else {
		kept, denied = split(body.Topics, func(t kmsg.OffsetCommitRequestTopic) bool { return c.mayTopic(acl.OpRead, t.Topic) })
	}
	body.Topics = kept
	return c.serveRest(ctx, req, len(kept), len(denied), func(r kmsg.Response) {
		resp := r.(*kmsg.OffsetCommitResponse)
		for _, t := range denied {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	})
}

// authOffsetFetch: DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED) and on each topic: a
// named topic denied answers TOPIC_AUTHORIZATION_FAILED, and an all-topics fetch leaves the
// topics out.
func authOffsetFetch(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.OffsetFetchRequest)
	if body.Version >= 8 {
		return authOffsetFetchGroups(c, ctx, req, body)
	}
	if !c.may(acl.OpDescribe, acl.ResourceGroup, body.Group) {
		resp := body.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.ErrorCode = codeGroupDenied
		for _, t := range body.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, codeGroupDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return ready(resp)
	}
	if body.Topics == nil {
		return after(c.b.serve(ctx, req), func(r kmsg.Response) {
			resp := r.(*kmsg.OffsetFetchResponse)
			resp.Topics = slices.DeleteFunc(resp.Topics, func(t kmsg.OffsetFetchResponseTopic) bool { return !c.mayTopic(acl.OpDescribe, t.Topic) })
		})
	}
	kept, denied := split(body.Topics, func(t kmsg.OffsetFetchRequestTopic) bool { return c.mayTopic(acl.OpDescribe, t.Topic) })
	body.Topics = kept
	return c.serveRest(ctx, req, len(kept), len(denied), func(r kmsg.Response) {
		resp := r.(*kmsg.OffsetFetchResponse)
		for _, t := range denied {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, codeTopicDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	})
}

// authOffsetFetchGroups is authOffsetFetch for v8+, which batches groups: a group without DESCRIBE
// answers GROUP_AUTHORIZATION_FAILED as its own error, and within the others a named topic denied
// answers TOPIC_AUTHORIZATION_FAILED and an all-topics fetch leaves the denied topics out.
func authOffsetFetchGroups(c *authCtx, ctx context.Context, req *wire.Request, body *kmsg.OffsetFetchRequest) wire.Reply {
	kept, denied := split(body.Groups, func(g kmsg.OffsetFetchRequestGroup) bool {
		return c.may(acl.OpDescribe, acl.ResourceGroup, g.Group)
	})
	deniedTopics := make([][]kmsg.OffsetFetchRequestGroupTopic, len(kept))
	for i := range kept {
		if kept[i].Topics != nil {
			kept[i].Topics, deniedTopics[i] = split(kept[i].Topics, func(t kmsg.OffsetFetchRequestGroupTopic) bool {
				return c.mayTopic(acl.OpDescribe, t.Topic)
			})
		}
	}
	body.Groups = kept
	return after(c.b.serve(ctx, req), func(r kmsg.Response) {
		resp := r.(*kmsg.OffsetFetchResponse)
		for i := range resp.Groups {
			g := &resp.Groups[i]
			if i >= len(kept) || g.ErrorCode != 0 {
				continue
			}
			if kept[i].Topics == nil {
				g.Topics = slices.DeleteFunc(g.Topics, func(t kmsg.OffsetFetchResponseGroupTopic) bool { return !c.mayTopic(acl.OpDescribe, t.Topic) })
				continue
			}
			for _, t := range deniedTopics[i] {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					rp.Partition, rp.ErrorCode = p, codeTopicDenied
					rt.Partitions = append(rt.Partitions, rp)
				}
				g.Topics = append(g.Topics, rt)
			}
		}
		for _, d := range denied {
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group, g.ErrorCode = d.Group, codeGroupDenied
			resp.Groups = append(resp.Groups, g)
		}
	})
}

// authFindCoordinator: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED) or on the transactional
// id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) it looks for, and CLUSTER_ACTION on the cluster for a
// share-partition's (CLUSTER_AUTHORIZATION_FAILED: only brokers look for those). Each key is
// authorized on its own (from v4 a request names many), and only the denied ones are refused.
func authFindCoordinator(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.FindCoordinatorRequest)
	deny := func(key string) int16 {
		switch body.CoordinatorType {
		case coordinatorTypeTxn:
			if !c.may(acl.OpDescribe, acl.ResourceTransactionalID, key) {
				return codeTxnIDDenied
			}
		case coordinatorTypeShare:
			if !c.mayCluster(acl.OpClusterAction) {
				return codeClusterDenied
			}
		default:
			if !c.may(acl.OpDescribe, acl.ResourceGroup, key) {
				return codeGroupDenied
			}
		}
		return 0
	}
	return ready(c.b.findCoordinator(ctx, body, req.Listener, deny))
}

// groupOf returns the group a JoinGroup, Heartbeat, LeaveGroup or SyncGroup request names.
func groupOf(body kmsg.Request) string {
	switch r := body.(type) {
	case *kmsg.JoinGroupRequest:
		return r.Group
	case *kmsg.HeartbeatRequest:
		return r.Group
	case *kmsg.LeaveGroupRequest:
		return r.Group
	case *kmsg.SyncGroupRequest:
		return r.Group
	}
	return ""
}

// authGroupRead: JoinGroup, Heartbeat, LeaveGroup and SyncGroup need READ on the group (else
// GROUP_AUTHORIZATION_FAILED).
func authGroupRead(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	if c.may(acl.OpRead, acl.ResourceGroup, groupOf(req.Body)) {
		return c.b.serve(ctx, req)
	}
	resp := req.Body.ResponseKind()
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		r.ErrorCode = codeGroupDenied
	case *kmsg.HeartbeatResponse:
		r.ErrorCode = codeGroupDenied
	case *kmsg.LeaveGroupResponse:
		r.ErrorCode = codeGroupDenied
	case *kmsg.SyncGroupResponse:
		r.ErrorCode = codeGroupDenied
	}
	return ready(resp)
}

// authDescribeGroups: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED), and the groups'
// authorized operations when asked for (v3+).
func authDescribeGroups(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.DescribeGroupsRequest)
	kept, denied := split(body.Groups, func(g string) bool { return c.may(acl.OpDescribe, acl.ResourceGroup, g) })
	body.Groups = kept
	fill := func(r kmsg.Response) {
		resp := r.(*kmsg.DescribeGroupsResponse)
		if body.IncludeAuthorizedOperations {
			for i := range resp.Groups {
				resp.Groups[i].AuthorizedOperations = c.ops(acl.ResourceGroup, resp.Groups[i].Group)
			}
		}
		for _, g := range denied {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, codeGroupDenied
			resp.Groups = append(resp.Groups, rg)
		}
	}
	if len(denied) == 0 {
		return after(c.b.serve(ctx, req), fill)
	}
	return c.serveRest(ctx, req, len(kept), len(denied), fill)
}

// authListGroups: every group with DESCRIBE on the cluster, else the groups the principal may
// DESCRIBE.
func authListGroups(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	if c.mayCluster(acl.OpDescribe) {
		return c.b.serve(ctx, req)
	}
	return after(c.b.serve(ctx, req), func(r kmsg.Response) {
		resp := r.(*kmsg.ListGroupsResponse)
		resp.Groups = slices.DeleteFunc(resp.Groups, func(g kmsg.ListGroupsResponseGroup) bool {
			return !c.may(acl.OpDescribe, acl.ResourceGroup, g.Group)
		})
	})
}

// authCreateTopics: CREATE on the cluster, or else on each topic (TOPIC_AUTHORIZATION_FAILED).
func authCreateTopics(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.CreateTopicsRequest)
	if c.mayCluster(acl.OpCreate) {
		return c.b.serve(ctx, req)
	}
	kept, denied := split(body.Topics, func(t kmsg.CreateTopicsRequestTopic) bool { return c.mayTopic(acl.OpCreate, t.Topic) })
	body.Topics = kept
	return c.serveRest(ctx, req, len(kept), len(denied), func(r kmsg.Response) {
		resp := r.(*kmsg.CreateTopicsResponse)
		for _, t := range denied {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, codeTopicDenied
			resp.Topics = append(resp.Topics, rt)
		}
	})
}

// authDeleteTopics: DELETE on each topic, named (v0-5) or by name or id (v6+); a denied one
// answers TOPIC_AUTHORIZATION_FAILED. An id that names no topic is left to the handler.
func authDeleteTopics(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.DeleteTopicsRequest)
	keptNames, deniedNames := split(body.TopicNames, func(n string) bool { return c.mayTopic(acl.OpDelete, n) })
	body.TopicNames = keptNames
	keptTopics, deniedTopics := split(body.Topics, func(t kmsg.DeleteTopicsRequestTopic) bool {
		name, ok := deleteTopicName(c.img, t)
		return !ok || c.mayTopic(acl.OpDelete, name)
	})
	body.Topics = keptTopics
	return c.serveRest(ctx, req, len(keptNames)+len(keptTopics), len(deniedNames)+len(deniedTopics), func(r kmsg.Response) {
		resp := r.(*kmsg.DeleteTopicsResponse)
		for _, n := range deniedNames {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = kmsg.StringPtr(n), codeTopicDenied
			resp.Topics = append(resp.Topics, rt)
		}
		for _, t := range deniedTopics {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, codeTopicDenied
			resp.Topics = append(resp.Topics, rt)
		}
	})
}

// deleteTopicName is the name a DeleteTopics v6 entry names, directly or by id; ok is false when
// neither names a topic of img.
func deleteTopicName(img *controller.Image, t kmsg.DeleteTopicsRequestTopic) (string, bool) {
	if t.Topic != nil && *t.Topic != "" {
		return *t.Topic, true
	}
	if tp, ok := img.TopicByID(controller.TopicID(t.TopicID)); ok {
		return tp.Name, true
	}
	return "", false
}

// authDeleteRecords: DELETE on each topic.
func authDeleteRecords(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.DeleteRecordsRequest)
	kept, denied := split(body.Topics, func(t kmsg.DeleteRecordsRequestTopic) bool { return c.mayTopic(acl.OpDelete, t.Topic) })
	body.Topics = kept
	return c.serveRest(ctx, req, len(kept), len(denied), func(r kmsg.Response) {
		resp := r.(*kmsg.DeleteRecordsResponse)
		for _, t := range denied {
			rt := kmsg.NewDeleteRecordsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewDeleteRecordsResponseTopicPartition()
				rp.Partition, rp.LowWatermark, rp.ErrorCode = p.Partition, -1, codeTopicDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	})
}

// authInitProducerID: WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an
// idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on any topic
// (CLUSTER_AUTHORIZATION_FAILED), as Kafka 3+ asks.
func authInitProducerID(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.InitProducerIDRequest)
	code := int16(0)
	switch {
	case body.TransactionalID != nil:
		if !c.may(acl.OpWrite, acl.ResourceTransactionalID, *body.TransactionalID) {
			code = codeTxnIDDenied
		}
	case !c.mayCluster(acl.OpIdempotentWrite) && !c.mayAnyTopic(acl.OpWrite):
		code = codeClusterDenied
	}
	if code == 0 {
		return c.b.serve(ctx, req)
	}
	resp := body.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
	return ready(resp)
}

// authOffsetForLeaderEpoch: a follower's request (ReplicaID set, v3+) needs CLUSTER_ACTION, a
// client's DESCRIBE on each topic; denied topics answer TOPIC_AUTHORIZATION_FAILED.
func authOffsetForLeaderEpoch(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.OffsetForLeaderEpochRequest)
	var kept, denied []kmsg.OffsetForLeaderEpochRequestTopic
	if body.ReplicaID >= 0 {
		if c.mayCluster(acl.OpClusterAction) {
			return c.b.serve(ctx, req)
		}
		denied = body.Topics
	} else {
		kept, denied = split(body.Topics, func(t kmsg.OffsetForLeaderEpochRequestTopic) bool { return c.mayTopic(acl.OpDescribe, t.Topic) })
	}
	body.Topics = kept
	return c.serveRest(ctx, req, len(kept), len(denied), func(r kmsg.Response) {
		resp := r.(*kmsg.OffsetForLeaderEpochResponse)
		for _, t := range denied {
			rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, codeTopicDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	})
}

// authAddPartitionsToTxn: a client's request (v0-3) needs WRITE on the transactional id (every
// partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and on each topic: if any topic is
// denied nothing is added, the denied topics answer TOPIC_AUTHORIZATION_FAILED and the others
// OPERATION_NOT_ATTEMPTED, as Kafka does. A broker's (v4+) needs CLUSTER_ACTION.
func authAddPartitionsToTxn(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.AddPartitionsToTxnRequest)
	resp := body.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if body.Version >= 4 {
		if c.mayCluster(acl.OpClusterAction) {
			return c.b.serve(ctx, req)
		}
		resp.ErrorCode = codeClusterDenied
		return ready(resp)
	}
	txnOK := c.may(acl.OpWrite, acl.ResourceTransactionalID, body.TransactionalID)
	codes := make([]int16, len(body.Topics))
	anyDenied := !txnOK
	for i, t := range body.Topics {
		switch {
		case !txnOK:
			codes[i] = codeTxnIDDenied
		case !c.mayTopic(acl.OpWrite, t.Topic):
			codes[i], anyDenied = codeTopicDenied, true
		default:
			codes[i] = kerr.OperationNotAttempted.Code
		}
	}
	if !anyDenied {
		return c.b.serve(ctx, req)
	}
	for i, t := range body.Topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, codes[i]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return ready(resp)
}

// authAddOffsetsToTxn: WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and
// READ on the group (GROUP_AUTHORIZATION_FAILED).
func authAddOffsetsToTxn(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.AddOffsetsToTxnRequest)
	code := int16(0)
	switch {
	case !c.may(acl.OpWrite, acl.ResourceTransactionalID, body.TransactionalID):
		code = codeTxnIDDenied
	case !c.may(acl.OpRead, acl.ResourceGroup, body.Group):
		code = codeGroupDenied
	}
	if code == 0 {
		return c.b.serve(ctx, req)
	}
	resp := body.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	resp.ErrorCode = code
	return ready(resp)
}

// authEndTxn: WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
func authEndTxn(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.EndTxnRequest)
	if c.may(acl.OpWrite, acl.ResourceTransactionalID, body.TransactionalID) {
		return c.b.serve(ctx, req)
	}
	resp := body.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = codeTxnIDDenied, -1, -1
	return ready(resp)
}

// authWriteTxnMarkers: CLUSTER_ACTION (else every partition answers CLUSTER_AUTHORIZATION_FAILED).
func authWriteTxnMarkers(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.WriteTxnMarkersRequest)
	if c.mayCluster(acl.OpClusterAction) {
		return c.b.serve(ctx, req)
	}
	resp := body.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, m := range body.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition, rp.ErrorCode = p, codeClusterDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return ready(resp)
}

// authTxnOffsetCommit: WRITE on the transactional id, READ on the group and READ on each topic;
// the first two deny every partition (TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
// GROUP_AUTHORIZATION_FAILED), the third its topic's (TOPIC_AUTHORIZATION_FAILED).
func authTxnOffsetCommit(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.TxnOffsetCommitRequest)
	code := codeTopicDenied
	var kept, denied []kmsg.TxnOffsetCommitRequestTopic
	switch {
	case !c.may(acl.OpWrite, acl.ResourceTransactionalID, body.TransactionalID):
		code, denied = codeTxnIDDenied, body.Topics
	case !c.may(acl.OpRead, acl.ResourceGroup, body.Group):
		code, denied = codeGroupDenied, body.Topics
	default:
		kept, denied = split(body.Topics, func(t kmsg.TxnOffsetCommitRequestTopic) bool { return c.mayTopic(acl.OpRead, t.Topic) })
	}
	body.Topics = kept
	return c.serveRest(ctx, req, len(kept), len(denied), func(r kmsg.Response) {
		resp := r.(*kmsg.TxnOffsetCommitResponse)
		for _, t := range denied {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	})
}

// authCreateAcls: ALTER on the cluster (every creation answers CLUSTER_AUTHORIZATION_FAILED).
func authCreateAcls(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	if c.mayCluster(acl.OpAlter) {
		return c.b.serve(ctx, req)
	}
	body := req.Body.(*kmsg.CreateACLsRequest)
	resp := body.ResponseKind().(*kmsg.CreateACLsResponse)
	for range body.Creations {
		r := kmsg.NewCreateACLsResponseResult()
		r.ErrorCode = codeClusterDenied
		resp.Results = append(resp.Results, r)
	}
	return ready(resp)
}

// authDeleteAcls: ALTER on the cluster (every filter answers CLUSTER_AUTHORIZATION_FAILED).
func authDeleteAcls(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	if c.mayCluster(acl.OpAlter) {
		return c.b.serve(ctx, req)
	}
	body := req.Body.(*kmsg.DeleteACLsRequest)
	resp := body.ResponseKind().(*kmsg.DeleteACLsResponse)
	for range body.Filters {
		r := kmsg.NewDeleteACLsResponseResult()
		r.ErrorCode = codeClusterDenied
		resp.Results = append(resp.Results, r)
	}
	return ready(resp)
}

// Config resource types, as DescribeConfigs and the AlterConfigs keys number them.
const (
	configResourceTopic        = 2
	configResourceBroker       = 4
	configResourceBrokerLogger = 8
	configResourceGroup        = 32
)

// mayConfig decides op (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a config resource: its topic, its group,
// or the cluster for a broker; the code of a denial, or 0.
func (c *authCtx) mayConfig(op acl.Operation, resourceType int8, name string) int16 {
	switch resourceType {
	case configResourceTopic:
		if !c.mayTopic(op, name) {
			return codeTopicDenied
		}
	case configResourceGroup:
		if !c.may(op, acl.ResourceGroup, name) {
			return codeGroupDenied
		}
	case configResourceBroker, configResourceBrokerLogger:
		if !c.mayCluster(op) {
			return codeClusterDenied
		}
	}
	return 0
}

// authDescribeConfigs: DESCRIBE_CONFIGS on each topic (TOPIC_AUTHORIZATION_FAILED), on each group
// (GROUP_AUTHORIZATION_FAILED) or, for a broker, on the cluster (CLUSTER_AUTHORIZATION_FAILED).
func authDescribeConfigs(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.DescribeConfigsRequest)
	return authConfigResources(c, ctx, req, acl.OpDescribeConfigs, &body.Resources,
		func(r kmsg.DescribeConfigsRequestResource) (kmsg.ConfigResourceType, string) {
			return r.ResourceType, r.ResourceName
		},
		func(r kmsg.Response, t kmsg.ConfigResourceType, name string, code int16) {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = t, name, code
			resp := r.(*kmsg.DescribeConfigsResponse)
			resp.Resources = append(resp.Resources, rr)
		})
}

// authAlterConfigs: ALTER_CONFIGS, as authDescribeConfigs.
func authAlterConfigs(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.AlterConfigsRequest)
	return authConfigResources(c, ctx, req, acl.OpAlterConfigs, &body.Resources,
		func(r kmsg.AlterConfigsRequestResource) (kmsg.ConfigResourceType, string) {
			return r.ResourceType, r.ResourceName
		},
		func(r kmsg.Response, t kmsg.ConfigResourceType, name string, code int16) {
			rr := kmsg.NewAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = t, name, code
			resp := r.(*kmsg.AlterConfigsResponse)
			resp.Resources = append(resp.Resources, rr)
		})
}

// authIncrementalAlterConfigs: ALTER_CONFIGS, as authDescribeConfigs.
func authIncrementalAlterConfigs(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.IncrementalAlterConfigsRequest)
	return authConfigResources(c, ctx, req, acl.OpAlterConfigs, &body.Resources,
		func(r kmsg.IncrementalAlterConfigsRequestResource) (kmsg.ConfigResourceType, string) {
			return r.ResourceType, r.ResourceName
		},
		func(r kmsg.Response, t kmsg.ConfigResourceType, name string, code int16) {
			rr := kmsg.NewIncrementalAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = t, name, code
			resp := r.(*kmsg.IncrementalAlterConfigsResponse)
			resp.Resources = append(resp.Resources, rr)
		})
}

// authConfigResources is the rule of the three config keys: op on each resource of the request (a
// topic, or the cluster for a broker), the allowed ones left for the handler and each denied one
// answered by deny with its code.
func authConfigResources[R any](c *authCtx, ctx context.Context, req *wire.Request, op acl.Operation, resources *[]R,
	named func(R) (kmsg.ConfigResourceType, string), deny func(kmsg.Response, kmsg.ConfigResourceType, string, int16),
) wire.Reply {
	var codes []int16
	kept, denied := split(*resources, func(r R) bool {
		t, name := named(r)
		code := c.mayConfig(op, int8(t), name)
		if code != 0 {
			codes = append(codes, code)
		}
		return code == 0
	})
	*resources = kept
	return c.serveRest(ctx, req, len(kept), len(denied), func(r kmsg.Response) {
		for i, d := range denied {
			t, name := named(d)
			deny(r, t, name, codes[i])
		}
	})
}

// authCreatePartitions: ALTER on each topic (TOPIC_AUTHORIZATION_FAILED).
func authCreatePartitions(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.CreatePartitionsRequest)
	kept, denied := split(body.Topics, func(t kmsg.CreatePartitionsRequestTopic) bool { return c.mayTopic(acl.OpAlter, t.Topic) })
	body.Topics = kept
	return c.serveRest(ctx, req, len(kept), len(denied), func(r kmsg.Response) {
		resp := r.(*kmsg.CreatePartitionsResponse)
		for _, t := range denied {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, codeTopicDenied
			resp.Topics = append(resp.Topics, rt)
		}
	})
}

// authDeleteGroups: DELETE on each group (GROUP_AUTHORIZATION_FAILED).
func authDeleteGroups(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.DeleteGroupsRequest)
	kept, denied := split(body.Groups, func(g string) bool { return c.may(acl.OpDelete, acl.ResourceGroup, g) })
	body.Groups = kept
	return c.serveRest(ctx, req, len(kept), len(denied), func(r kmsg.Response) {
		resp := r.(*kmsg.DeleteGroupsResponse)
		for _, g := range denied {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, codeGroupDenied
			resp.Groups = append(resp.Groups, rg)
		}
	})
}

// authOffsetDelete: DELETE on the group (GROUP_AUTHORIZATION_FAILED) and READ on each topic
// (TOPIC_AUTHORIZATION_FAILED).
func authOffsetDelete(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.OffsetDeleteRequest)
	if !c.may(acl.OpDelete, acl.ResourceGroup, body.Group) {
		resp := body.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = codeGroupDenied
		return ready(resp)
	}
	kept, denied := split(body.Topics, func(t kmsg.OffsetDeleteRequestTopic) bool { return c.mayTopic(acl.OpRead, t.Topic) })
	body.Topics = kept
	return c.serveRest(ctx, req, len(kept), len(denied), func(r kmsg.Response) {
		resp := r.(*kmsg.OffsetDeleteResponse)
		for _, t := range denied {
			rt := kmsg.NewOffsetDeleteResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetDeleteResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, codeTopicDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	})
}

// authDescribeCluster: no permission, as in Kafka; the cluster's authorized operations when asked
// for.
func authDescribeCluster(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.DescribeClusterRequest)
	if !body.IncludeClusterAuthorizedOperations {
		return c.b.serve(ctx, req)
	}
	return after(c.b.serve(ctx, req), func(r kmsg.Response) {
		r.(*kmsg.DescribeClusterResponse).ClusterAuthorizedOperations = c.ops(acl.ResourceCluster, acl.ClusterName)
	})
}

// authDescribeProducers: READ on each topic (TOPIC_AUTHORIZATION_FAILED).
func authDescribeProducers(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.DescribeProducersRequest)
	kept, denied := split(body.Topics, func(t kmsg.DescribeProducersRequestTopic) bool { return c.mayTopic(acl.OpRead, t.Topic) })
	body.Topics = kept
	return c.serveRest(ctx, req, len(kept), len(denied), func(r kmsg.Response) {
		resp := r.(*kmsg.DescribeProducersResponse)
		for _, t := range denied {
			rt := kmsg.NewDescribeProducersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewDescribeProducersResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, codeTopicDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	})
}

// authDescribeTransactions: DESCRIBE on each transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
func authDescribeTransactions(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	body := req.Body.(*kmsg.DescribeTransactionsRequest)
	kept, denied := split(body.TransactionalIDs, func(id string) bool { return c.may(acl.OpDescribe, acl.ResourceTransactionalID, id) })
	body.TransactionalIDs = kept
	return c.serveRest(ctx, req, len(kept), len(denied), func(r kmsg.Response) {
		resp := r.(*kmsg.DescribeTransactionsResponse)
		for _, id := range denied {
			rs := kmsg.NewDescribeTransactionsResponseTransactionState()
			rs.TransactionalID, rs.ErrorCode = id, codeTxnIDDenied
			resp.TransactionStates = append(resp.TransactionStates, rs)
		}
	})
}

// authListTransactions: the transactional ids the principal may DESCRIBE.
func authListTransactions(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	return after(c.b.serve(ctx, req), func(r kmsg.Response) {
		resp := r.(*kmsg.ListTransactionsResponse)
		resp.TransactionStates = slices.DeleteFunc(resp.TransactionStates, func(s kmsg.ListTransactionsResponseTransactionState) bool {
			return !c.may(acl.OpDescribe, acl.ResourceTransactionalID, s.TransactionalID)
		})
	})
}

// authAlterUserScramCredentials: ALTER on the cluster (else every user named answers
// CLUSTER_AUTHORIZATION_FAILED, once each).
func authAlterUserScramCredentials(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	if c.mayCluster(acl.OpAlter) {
		return c.b.serve(ctx, req)
	}
	body := req.Body.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := body.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	var users []string
	for _, d := range body.Deletions {
		users = append(users, d.Name)
	}
	for _, u := range body.Upsertions {
		users = append(users, u.Name)
	}
	slices.Sort(users)
	for _, u := range slices.Compact(users) {
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User, r.ErrorCode = u, codeClusterDenied
		resp.Results = append(resp.Results, r)
	}
	return ready(resp)
}

// authAlterClientQuotas: ALTER_CONFIGS on the cluster (else every entry answers
// CLUSTER_AUTHORIZATION_FAILED and nothing changes).
func authAlterClientQuotas(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	if c.mayCluster(acl.OpAlterConfigs) {
		return c.b.serve(ctx, req)
	}
	body := req.Body.(*kmsg.AlterClientQuotasRequest)
	resp := body.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	for _, e := range body.Entries {
		r := kmsg.NewAlterClientQuotasResponseEntry()
		r.ErrorCode = codeClusterDenied
		for _, c := range e.Entity {
			rc := kmsg.NewAlterClientQuotasResponseEntryEntity()
			rc.Type, rc.Name = c.Type, c.Name
			r.Entity = append(r.Entity, rc)
		}
		resp.Entries = append(resp.Entries, r)
	}
	return ready(resp)
}

// authElectLeaders: ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED for the request and
// each partition it names).
func authElectLeaders(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
	if c.mayCluster(acl.OpAlter) {
		return c.b.serve(ctx, req)
	}
	body := req.Body.(*kmsg.ElectLeadersRequest)
	resp := body.ResponseKind().(*kmsg.ElectLeadersResponse)
	resp.ErrorCode = codeClusterDenied
	for _, t := range body.Topics {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, codeClusterDenied
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return ready(resp)
}

// clusterRule is the rule of a key that asks op on the cluster for the whole request: a denial is
// answered with the response deny marks refused (its request-wide error code,
// CLUSTER_AUTHORIZATION_FAILED).
func clusterRule(op acl.Operation, deny func(kmsg.Response)) authzRule {
	return func(c *authCtx, ctx context.Context, req *wire.Request) wire.Reply {
		if c.mayCluster(op) {
			return c.b.serve(ctx, req)
		}
		resp := req.Body.ResponseKind()
		deny(resp)
		return ready(resp)
	}
}
