package api_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/sharestate"
)

// aclCase is one row of the ACL matrix: a request the subject sends, the code it gets without
// permission, and the grant that lets it through.
type aclCase struct {
	name string
	key  int16
	// req builds the request; code reads the code that tells a denial from success.
	req  func() kmsg.Request
	code func(kmsg.Response) int16
	// denied is the code without permission.
	denied int16
	// grant gives the permission; nil for a key that needs none.
	grant func() *kadm.ACLBuilder
	// reaches accepts, with the permission, any answer of the handler that is not an authorization
	// failure (a Heartbeat of an unknown member); otherwise only 0 is success.
	reaches bool
	// state reads what the request would change, from the admin's side; it must be the same after
	// the denied request.
	state func(t *testing.T, e *aclEnv) string
}

// authorizationCodes are the codes of a denial.
var authorizationCodes = []int16{kerr.TopicAuthorizationFailed.Code, kerr.GroupAuthorizationFailed.Code,
	kerr.ClusterAuthorizationFailed.Code, kerr.TransactionalIDAuthorizationFailed.Code}

func allow() *kadm.ACLBuilder {
	return kadm.NewACLs().Allow(aclPrincipal).ResourcePatternType(kadm.ACLPatternLiteral)
}

// aclFixtures are what the matrix's requests act on, made by a super user before the matrix runs:
// topics t (three records), gone and grow; groups g and gdel with an offset committed on t; the
// transactional id tx.
func aclFixtures(t *testing.T) func(adm *kadm.Client, cl *kgo.Client) {
	return func(adm *kadm.Client, cl *kgo.Client) {
		for _, name := range []string{"t", "gone", "grow"} {
			createTopic(t, adm, name, 1, nil)
		}
		for _, v := range []string{"a", "b", "c"} {
			if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "t", Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		for _, g := range []string{"g", "gdel"} {
			var o kadm.Offsets
			o.Add(kadm.Offset{Topic: "t", Partition: 0, At: 1, LeaderEpoch: -1})
			if err := adm.CommitAllOffsets(testCtx(t), g, o); err != nil {
				t.Fatal(err)
			}
		}
		ip := kmsg.NewPtrInitProducerIDRequest()
		ip.TransactionalID, ip.TransactionTimeoutMillis = kmsg.StringPtr("tx"), 60000
		if resp, err := ip.RequestWith(testCtx(t), cl); err != nil || resp.ErrorCode != 0 {
			t.Fatalf("init tx: %+v, %v", resp, err)
		}
	}
}

func topicPartitionCode[T any](ts []T, parts func(T) []int16) int16 {
	for _, tp := range ts {
		for _, c := range parts(tp) {
			if c != 0 {
				return c
			}
		}
	}
	return 0
}

// TestACLMatrix: for every API key weir serves, the subject without permission is denied with
// Kafka's code and changes nothing, and with the permission the call goes through.
func TestACLMatrix(t *testing.T) {
	e := startACLNode(t, aclFixtures(t))
	td, err := e.adm.ListTopics(testCtx(t), "t")
	if err != nil {
		t.Fatal(err)
	}
	topicT := td["t"].ID
	endOffset := func(t *testing.T, e *aclEnv) string {
		o, err := e.adm.ListEndOffsets(testCtx(t), "t")
		if err != nil {
			t.Fatal(err)
		}
		r, _ := o.Lookup("t", 0)
		return fmt.Sprint(r.Offset)
	}
	committed := func(group string) func(t *testing.T, e *aclEnv) string {
		return func(t *testing.T, e *aclEnv) string {
			o, err := e.adm.FetchOffsets(testCtx(t), group)
			if err != nil {
				t.Fatal(err)
			}
			r, _ := o.Lookup("t", 0)
			return fmt.Sprint(r.At)
		}
	}
	topics := func(t *testing.T, e *aclEnv) string {
		d, err := e.adm.ListTopics(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, td := range d.Sorted() {
			out = append(out, fmt.Sprintf("%s/%d", td.Topic, len(td.Partitions)))
		}
		return fmt.Sprint(out)
	}
	retention := func(t *testing.T, e *aclEnv) string {
		rc, err := e.adm.DescribeTopicConfigs(testCtx(t), "t")
		if err != nil {
			t.Fatal(err)
		}
		c, _ := rc.On("t", nil)
		for _, kv := range c.Configs {
			if kv.Key == "retention.ms" {
				return kv.MaybeValue()
			}
		}
		return ""
	}
	cases := []aclCase{
		{name: "Produce", key: 0, denied: kerr.TopicAuthorizationFailed.Code, state: endOffset,
			req: func() kmsg.Request {
				r := kmsg.NewPtrProduceRequest()
				r.Acks, r.TimeoutMillis = -1, 10000
				tp := kmsg.NewProduceRequestTopic()
				tp.Topic = "t"
				p := kmsg.NewProduceRequestTopicPartition()
				p.Records = testBatch(batchSpec{values: []string{"x"}})
				tp.Partitions = append(tp.Partitions, p)
				r.Topics = append(r.Topics, tp)
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Topics("t").Operations(kadm.OpWrite) }},
		{name: "Fetch", key: 1, denied: kerr.TopicAuthorizationFailed.Code,
			req: func() kmsg.Request {
				r := kmsg.NewPtrFetchRequest()
				r.MaxWaitMillis, r.MaxBytes = 10, 1<<20
				tp := kmsg.NewFetchRequestTopic()
				tp.Topic = "t"
				p := kmsg.NewFetchRequestTopicPartition()
				p.PartitionMaxBytes = 1 << 20
				tp.Partitions = append(tp.Partitions, p)
				r.Topics = append(r.Topics, tp)
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Topics("t").Operations(kadm.OpRead) }},
		{name: "ListOffsets", key: 2, denied: kerr.TopicAuthorizationFailed.Code,
			req: func() kmsg.Request {
				r := kmsg.NewPtrListOffsetsRequest()
				tp := kmsg.NewListOffsetsRequestTopic()
				tp.Topic = "t"
				p := kmsg.NewListOffsetsRequestTopicPartition()
				p.Timestamp = -1
				tp.Partitions = append(tp.Partitions, p)
				r.Topics = append(r.Topics, tp)
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Topics("t").Operations(kadm.OpDescribe) }},
		{name: "Metadata", key: 3, denied: kerr.TopicAuthorizationFailed.Code,
			req: func() kmsg.Request {
				r := kmsg.NewPtrMetadataRequest()
				mt := kmsg.NewMetadataRequestTopic()
				mt.Topic = kmsg.StringPtr("t")
				r.Topics = append(r.Topics, mt)
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.MetadataResponse).Topics[0].ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Topics("t").Operations(kadm.OpDescribe) }},
		{name: "MetadataByTopicID", key: 3, denied: kerr.TopicAuthorizationFailed.Code,
			req: func() kmsg.Request {
				td, err := e.adm.ListTopics(testCtx(t), "t")
				if err != nil {
					t.Fatal(err)
				}
				r := kmsg.NewPtrMetadataRequest()
				mt := kmsg.NewMetadataRequestTopic()
				mt.TopicID = td["t"].ID
				r.Topics = append(r.Topics, mt)
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.MetadataResponse).Topics[0].ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Topics("t").Operations(kadm.OpDescribe) }},
		{name: "MetadataAutoCreate", key: 3, denied: kerr.TopicAuthorizationFailed.Code, state: topics,
			req: func() kmsg.Request {
				r := kmsg.NewPtrMetadataRequest()
				r.AllowAutoTopicCreation = true
				mt := kmsg.NewMetadataRequestTopic()
				mt.Topic = kmsg.StringPtr("auto")
				r.Topics = append(r.Topics, mt)
				return r
			},
			code: func(r kmsg.Response) int16 {
				c := r.(*kmsg.MetadataResponse).Topics[0].ErrorCode
				if c == kerr.LeaderNotAvailable.Code {
					return 0 // created, its leader not elected yet
				}
				return c
			},
			// DESCRIBE alone does not let a topic be created.
			grant: func() *kadm.ACLBuilder { return allow().Topics("auto").Operations(kadm.OpDescribe, kadm.OpCreate) }},
		{name: "OffsetCommit", key: 8, denied: kerr.GroupAuthorizationFailed.Code, state: committed("g"),
			req: func() kmsg.Request {
				r := kmsg.NewPtrOffsetCommitRequest()
				r.Group, r.Generation = "g", -1
				tp := kmsg.NewOffsetCommitRequestTopic()
				tp.Topic = "t"
				p := kmsg.NewOffsetCommitRequestTopicPartition()
				p.Offset = 2
				tp.Partitions = append(tp.Partitions, p)
				r.Topics = append(r.Topics, tp)
				return r
			},
			code: func(r kmsg.Response) int16 { return r.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode },
			grant: func() *kadm.ACLBuilder {
				return allow().Groups("g").Topics("t").Operations(kadm.OpRead)
			}},
		{name: "OffsetFetch", key: 9, denied: kerr.GroupAuthorizationFailed.Code,
			req: func() kmsg.Request {
				r := kmsg.NewPtrOffsetFetchRequest()
				r.Version = 9
				g := kmsg.NewOffsetFetchRequestGroup()
				g.Group = "g"
				tp := kmsg.NewOffsetFetchRequestGroupTopic()
				tp.Topic, tp.Partitions = "t", []int32{0}
				g.Topics = append(g.Topics, tp)
				r.Groups = append(r.Groups, g)
				return r
			},
			code: func(r kmsg.Response) int16 {
				g := r.(*kmsg.OffsetFetchResponse).Groups[0]
				if g.ErrorCode != 0 {
					return g.ErrorCode
				}
				return g.Topics[0].Partitions[0].ErrorCode
			},
			grant: func() *kadm.ACLBuilder { return allow().Groups("g").Topics("t").Operations(kadm.OpDescribe) }},
		{name: "FindCoordinator", key: 10, denied: kerr.GroupAuthorizationFailed.Code,
			req:   func() kmsg.Request { return findCoordinatorReq(0, "g") },
			code:  findCoordinatorCode,
			grant: func() *kadm.ACLBuilder { return allow().Groups("g").Operations(kadm.OpDescribe) }},
		{name: "FindCoordinatorTxn", key: 10, denied: kerr.TransactionalIDAuthorizationFailed.Code,
			req:   func() kmsg.Request { return findCoordinatorReq(1, "tx") },
			code:  findCoordinatorCode,
			grant: func() *kadm.ACLBuilder { return allow().TransactionalIDs("tx").Operations(kadm.OpDescribe) }},
		{name: "FindCoordinatorShare", key: 10, denied: kerr.ClusterAuthorizationFailed.Code,
			req: func() kmsg.Request {
				return findCoordinatorReq(2, sharestate.SharePartition{Group: "sg", TopicID: controller.TopicID{1}, Partition: 3}.String())
			},
			code:  findCoordinatorCode,
			grant: func() *kadm.ACLBuilder { return allow().Clusters().Operations(kadm.OpClusterAction) }},
		{name: "JoinGroup", key: 11, denied: kerr.GroupAuthorizationFailed.Code, reaches: true,
			req: func() kmsg.Request {
				r := kmsg.NewPtrJoinGroupRequest()
				r.Group, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis, r.ProtocolType = "gj", 6000, 6000, "consumer"
				p := kmsg.NewJoinGroupRequestProtocol()
				p.Name = "range"
				r.Protocols = append(r.Protocols, p)
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.JoinGroupResponse).ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Groups("gj").Operations(kadm.OpRead) }},
		{name: "Heartbeat", key: 12, denied: kerr.GroupAuthorizationFailed.Code, reaches: true,
			req: func() kmsg.Request {
				r := kmsg.NewPtrHeartbeatRequest()
				r.Group, r.Generation, r.MemberID = "g", 1, "m"
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.HeartbeatResponse).ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Groups("g").Operations(kadm.OpRead) }},
		{name: "LeaveGroup", key: 13, denied: kerr.GroupAuthorizationFailed.Code, reaches: true,
			req: func() kmsg.Request {
				r := kmsg.NewPtrLeaveGroupRequest()
				r.Group, r.MemberID = "g", "m"
				m := kmsg.NewLeaveGroupRequestMember()
				m.MemberID = "m"
				r.Members = append(r.Members, m)
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.LeaveGroupResponse).ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Groups("g").Operations(kadm.OpRead) }},
		{name: "SyncGroup", key: 14, denied: kerr.GroupAuthorizationFailed.Code, reaches: true,
			req: func() kmsg.Request {
				r := kmsg.NewPtrSyncGroupRequest()
				r.Group, r.Generation, r.MemberID = "g", 1, "m"
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.SyncGroupResponse).ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Groups("g").Operations(kadm.OpRead) }},
		{name: "DescribeGroups", key: 15, denied: kerr.GroupAuthorizationFailed.Code,
			req: func() kmsg.Request {
				r := kmsg.NewPtrDescribeGroupsRequest()
				r.Groups = []string{"g"}
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Groups("g").Operations(kadm.OpDescribe) }},
		{name: "ListGroups", key: 16, denied: kerr.GroupAuthorizationFailed.Code,
			req: func() kmsg.Request { return kmsg.NewPtrListGroupsRequest() },
			// ListGroups leaves out what the principal may not describe: g missing is the denial.
			code: func(r kmsg.Response) int16 {
				for _, g := range r.(*kmsg.ListGroupsResponse).Groups {
					if g.Group == "g" {
						return 0
					}
				}
				return kerr.GroupAuthorizationFailed.Code
			},
			grant: func() *kadm.ACLBuilder { return allow().Groups("g").Operations(kadm.OpDescribe) }},
		{name: "ApiVersions", key: 18,
			req: func() kmsg.Request {
				r := kmsg.NewPtrApiVersionsRequest()
				r.ClientSoftwareName, r.ClientSoftwareVersion = "weir-test", "1"
				return r
			},
			code: func(r kmsg.Response) int16 { return r.(*kmsg.ApiVersionsResponse).ErrorCode }},
		{name: "CreateTopics", key: 19, denied: kerr.TopicAuthorizationFailed.Code, state: topics,
			req: func() kmsg.Request {
				r := kmsg.NewPtrCreateTopicsRequest()
				r.TimeoutMillis = 10000
				ct := kmsg.NewCreateTopicsRequestTopic()
				ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "new", 1, 1
				r.Topics = append(r.Topics, ct)
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Topics("new").Operations(kadm.OpCreate) }},
		{name: "DeleteTopics", key: 20, denied: kerr.TopicAuthorizationFailed.Code, state: topics,
			req: func() kmsg.Request {
				r := kmsg.NewPtrDeleteTopicsRequest()
				r.TimeoutMillis = 10000
				r.TopicNames = []string{"gone"}
				dt := kmsg.NewDeleteTopicsRequestTopic()
				dt.Topic = kmsg.StringPtr("gone")
				r.Topics = append(r.Topics, dt)
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Topics("gone").Operations(kadm.OpDelete) }},
		{name: "DeleteRecords", key: 21, denied: kerr.TopicAuthorizationFailed.Code,
			state: func(t *testing.T, e *aclEnv) string {
				o, err := e.adm.ListStartOffsets(testCtx(t), "t")
				if err != nil {
					t.Fatal(err)
				}
				r, _ := o.Lookup("t", 0)
				return fmt.Sprint(r.Offset)
			},
			req: func() kmsg.Request {
				r := kmsg.NewPtrDeleteRecordsRequest()
				r.TimeoutMillis = 10000
				dt := kmsg.NewDeleteRecordsRequestTopic()
				dt.Topic = "t"
				p := kmsg.NewDeleteRecordsRequestTopicPartition()
				p.Offset = 1
				dt.Partitions = append(dt.Partitions, p)
				r.Topics = append(r.Topics, dt)
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Topics("t").Operations(kadm.OpDelete) }},
		{name: "InitProducerIDIdempotent", key: 22, denied: kerr.ClusterAuthorizationFailed.Code,
			req: func() kmsg.Request {
				r := kmsg.NewPtrInitProducerIDRequest()
				r.TransactionTimeoutMillis = 60000
				return r
			},
			code: func(r kmsg.Response) int16 { return r.(*kmsg.InitProducerIDResponse).ErrorCode },
			// WRITE on any topic is enough, as in Kafka 3+.
			grant: func() *kadm.ACLBuilder { return allow().Topics("t").Operations(kadm.OpWrite) }},
		{name: "InitProducerIDTransactional", key: 22, denied: kerr.TransactionalIDAuthorizationFailed.Code,
			req: func() kmsg.Request {
				r := kmsg.NewPtrInitProducerIDRequest()
				r.TransactionalID, r.TransactionTimeoutMillis = kmsg.StringPtr("tx2"), 60000
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.InitProducerIDResponse).ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().TransactionalIDs("tx2").Operations(kadm.OpWrite) }},
		{name: "OffsetForLeaderEpoch", key: 23, denied: kerr.TopicAuthorizationFailed.Code,
			req: func() kmsg.Request {
				r := kmsg.NewPtrOffsetForLeaderEpochRequest()
				ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
				ot.Topic = "t"
				p := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
				p.CurrentLeaderEpoch, p.LeaderEpoch = -1, 0
				ot.Partitions = append(ot.Partitions, p)
				r.Topics = append(r.Topics, ot)
				return r
			},
			code: func(r kmsg.Response) int16 {
				return r.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0].ErrorCode
			},
			grant: func() *kadm.ACLBuilder { return allow().Topics("t").Operations(kadm.OpDescribe) }},
		{name: "AddPartitionsToTxn", key: 24, denied: kerr.TransactionalIDAuthorizationFailed.Code, reaches: true,
			req: func() kmsg.Request {
				r := kmsg.NewPtrAddPartitionsToTxnRequest()
				r.TransactionalID, r.ProducerID, r.ProducerEpoch = "tx", 1, 0
				at := kmsg.NewAddPartitionsToTxnRequestTopic()
				at.Topic, at.Partitions = "t", []int32{0}
				r.Topics = append(r.Topics, at)
				return r
			},
			code: func(r kmsg.Response) int16 {
				return topicPartitionCode(r.(*kmsg.AddPartitionsToTxnResponse).Topics, func(t kmsg.AddPartitionsToTxnResponseTopic) []int16 {
					var cs []int16
					for _, p := range t.Partitions {
						cs = append(cs, p.ErrorCode)
					}
					return cs
				})
			},
			grant: func() *kadm.ACLBuilder {
				return allow().TransactionalIDs("tx").Topics("t").Operations(kadm.OpWrite)
			}},
		{name: "AddOffsetsToTxn", key: 25, denied: kerr.TransactionalIDAuthorizationFailed.Code, reaches: true,
			req: func() kmsg.Request {
				r := kmsg.NewPtrAddOffsetsToTxnRequest()
				r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Group = "tx", 1, 0, "g"
				return r
			},
			code: func(r kmsg.Response) int16 { return r.(*kmsg.AddOffsetsToTxnResponse).ErrorCode },
			grant: func() *kadm.ACLBuilder {
				return allow().TransactionalIDs("tx").Groups("g").Operations(kadm.OpWrite, kadm.OpRead)
			}},
		{name: "EndTxn", key: 26, denied: kerr.TransactionalIDAuthorizationFailed.Code, reaches: true,
			req: func() kmsg.Request {
				r := kmsg.NewPtrEndTxnRequest()
				r.TransactionalID, r.ProducerID, r.ProducerEpoch = "tx", 1, 0
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.EndTxnResponse).ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().TransactionalIDs("tx").Operations(kadm.OpWrite) }},
		{name: "WriteTxnMarkers", key: 27, denied: kerr.ClusterAuthorizationFailed.Code, reaches: true, state: endOffset,
			req: func() kmsg.Request {
				r := kmsg.NewPtrWriteTxnMarkersRequest()
				m := kmsg.NewWriteTxnMarkersRequestMarker()
				m.ProducerID, m.ProducerEpoch = 999, 0
				mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
				mt.Topic, mt.Partitions = "t", []int32{0}
				m.Topics = append(m.Topics, mt)
				r.Markers = append(r.Markers, m)
				return r
			},
			code: func(r kmsg.Response) int16 {
				return r.(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode
			},
			grant: func() *kadm.ACLBuilder { return allow().Clusters().Operations(kadm.OpClusterAction) }},
		{name: "TxnOffsetCommit", key: 28, denied: kerr.TransactionalIDAuthorizationFailed.Code, reaches: true, state: committed("g"),
			req: func() kmsg.Request {
				r := kmsg.NewPtrTxnOffsetCommitRequest()
				r.TransactionalID, r.Group, r.ProducerID, r.ProducerEpoch, r.Generation = "tx", "g", 1, 0, -1
				tt := kmsg.NewTxnOffsetCommitRequestTopic()
				tt.Topic = "t"
				p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
				p.Offset = 2
				tt.Partitions = append(tt.Partitions, p)
				r.Topics = append(r.Topics, tt)
				return r
			},
			code: func(r kmsg.Response) int16 {
				return r.(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
			},
			grant: func() *kadm.ACLBuilder {
				return allow().TransactionalIDs("tx").Groups("g").Topics("t").Operations(kadm.OpWrite, kadm.OpRead)
			}},
		{name: "DescribeAcls", key: 29, denied: kerr.ClusterAuthorizationFailed.Code,
			req: func() kmsg.Request {
				r := kmsg.NewPtrDescribeACLsRequest()
				r.ResourceType, r.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
				r.Operation, r.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.DescribeACLsResponse).ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Clusters().Operations(kadm.OpDescribe) }},
		{name: "CreateAcls", key: 30, denied: kerr.ClusterAuthorizationFailed.Code,
			state: func(t *testing.T, e *aclEnv) string {
				res, err := e.adm.DescribeACLs(testCtx(t), kadm.NewACLs().Allow("User:x").AllowHosts().AnyResource().
					Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
				if err != nil {
					t.Fatal(err)
				}
				return fmt.Sprint(len(res[0].Described))
			},
			req: func() kmsg.Request {
				r := kmsg.NewPtrCreateACLsRequest()
				c := kmsg.NewCreateACLsRequestCreation()
				c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "z", kmsg.ACLResourcePatternTypeLiteral
				c.Principal, c.Host, c.Operation, c.PermissionType = "User:x", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
				r.Creations = append(r.Creations, c)
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.CreateACLsResponse).Results[0].ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Clusters().Operations(kadm.OpAlter) }},
		{name: "DeleteAcls", key: 31, denied: kerr.ClusterAuthorizationFailed.Code,
			req: func() kmsg.Request {
				r := kmsg.NewPtrDeleteACLsRequest()
				f := kmsg.NewDeleteACLsRequestFilter()
				f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
				f.Principal, f.Operation, f.PermissionType = kmsg.StringPtr("User:nobody"), kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
				r.Filters = append(r.Filters, f)
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.DeleteACLsResponse).Results[0].ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Clusters().Operations(kadm.OpAlter) }},
		{name: "DescribeConfigs", key: 32, denied: kerr.TopicAuthorizationFailed.Code,
			req: func() kmsg.Request {
				r := kmsg.NewPtrDescribeConfigsRequest()
				rr := kmsg.NewDescribeConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
				r.Resources = append(r.Resources, rr)
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Topics("t").Operations(kadm.OpDescribeConfigs) }},
		{name: "DescribeConfigsBroker", key: 32, denied: kerr.ClusterAuthorizationFailed.Code,
			req: func() kmsg.Request {
				r := kmsg.NewPtrDescribeConfigsRequest()
				rr := kmsg.NewDescribeConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
				r.Resources = append(r.Resources, rr)
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Clusters().Operations(kadm.OpDescribeConfigs) }},
		{name: "DescribeConfigsGroup", key: 32, denied: kerr.GroupAuthorizationFailed.Code,
			req: func() kmsg.Request {
				r := kmsg.NewPtrDescribeConfigsRequest()
				rr := kmsg.NewDescribeConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "gcfg"
				r.Resources = append(r.Resources, rr)
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Groups("gcfg").Operations(kadm.OpDescribeConfigs) }},
		{name: "AlterConfigs", key: 33, denied: kerr.TopicAuthorizationFailed.Code, state: retention,
			req: func() kmsg.Request {
				r := kmsg.NewPtrAlterConfigsRequest()
				rr := kmsg.NewAlterConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
				c := kmsg.NewAlterConfigsRequestResourceConfig()
				c.Name, c.Value = "retention.ms", kmsg.StringPtr("3600000")
				rr.Configs = append(rr.Configs, c)
				r.Resources = append(r.Resources, rr)
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.AlterConfigsResponse).Resources[0].ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Topics("t").Operations(kadm.OpAlterConfigs) }},
		{name: "CreatePartitions", key: 37, denied: kerr.TopicAuthorizationFailed.Code, state: topics,
			req: func() kmsg.Request {
				r := kmsg.NewPtrCreatePartitionsRequest()
				r.TimeoutMillis = 10000
				ct := kmsg.NewCreatePartitionsRequestTopic()
				ct.Topic, ct.Count = "grow", 2
				r.Topics = append(r.Topics, ct)
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Topics("grow").Operations(kadm.OpAlter) }},
		{name: "DeleteGroups", key: 42, denied: kerr.GroupAuthorizationFailed.Code,
			state: func(t *testing.T, e *aclEnv) string {
				gs, err := e.adm.ListGroups(testCtx(t))
				if err != nil {
					t.Fatal(err)
				}
				return fmt.Sprint(gs.Sorted())
			},
			req: func() kmsg.Request {
				r := kmsg.NewPtrDeleteGroupsRequest()
				r.Groups = []string{"gdel"}
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Groups("gdel").Operations(kadm.OpDelete) }},
		{name: "IncrementalAlterConfigs", key: 44, denied: kerr.TopicAuthorizationFailed.Code, state: retention,
			req: func() kmsg.Request {
				r := kmsg.NewPtrIncrementalAlterConfigsRequest()
				rr := kmsg.NewIncrementalAlterConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
				c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
				c.Name, c.Value = "retention.ms", kmsg.StringPtr("7200000")
				rr.Configs = append(rr.Configs, c)
				r.Resources = append(r.Resources, rr)
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Topics("t").Operations(kadm.OpAlterConfigs) }},
		{name: "IncrementalAlterConfigsGroup", key: 44, denied: kerr.GroupAuthorizationFailed.Code,
			state: func(t *testing.T, e *aclEnv) string {
				r := kmsg.NewPtrDescribeConfigsRequest()
				rr := kmsg.NewDescribeConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "gcfg"
				rr.ConfigNames = []string{"share.delivery.count.limit"}
				r.Resources = append(r.Resources, rr)
				resp, err := r.RequestWith(testCtx(t), e.admin)
				if err != nil || len(resp.Resources) != 1 || len(resp.Resources[0].Configs) != 1 {
					t.Fatalf("describe gcfg: %v %+v", err, resp)
				}
				return deref(resp.Resources[0].Configs[0].Value)
			},
			req: func() kmsg.Request {
				r := kmsg.NewPtrIncrementalAlterConfigsRequest()
				rr := kmsg.NewIncrementalAlterConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "gcfg"
				c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
				c.Name, c.Value = "share.delivery.count.limit", kmsg.StringPtr("3")
				rr.Configs = append(rr.Configs, c)
				r.Resources = append(r.Resources, rr)
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Groups("gcfg").Operations(kadm.OpAlterConfigs) }},
		{name: "SaslHandshake", key: 17,
			req: func() kmsg.Request {
				r := kmsg.NewPtrSASLHandshakeRequest()
				r.Mechanism = "PLAIN"
				return r
			},
			// On a PLAINTEXT listener the SASL layer answers ILLEGAL_SASL_STATE, whoever asks: the
			// point is that no authorization code comes back.
			code: func(r kmsg.Response) int16 { return saslAnswered(r.(*kmsg.SASLHandshakeResponse).ErrorCode) }},
		{name: "SaslAuthenticate", key: 36,
			req: func() kmsg.Request {
				r := kmsg.NewPtrSASLAuthenticateRequest()
				r.SASLAuthBytes = []byte("\x00u\x00p")
				return r
			},
			code: func(r kmsg.Response) int16 { return saslAnswered(r.(*kmsg.SASLAuthenticateResponse).ErrorCode) }},
		{name: "DescribeUserScramCredentials", key: 50, denied: kerr.ClusterAuthorizationFailed.Code,
			req:   func() kmsg.Request { return kmsg.NewPtrDescribeUserSCRAMCredentialsRequest() },
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.DescribeUserSCRAMCredentialsResponse).ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Clusters().Operations(kadm.OpDescribe) }},
		{name: "AlterUserScramCredentials", key: 51, denied: kerr.ClusterAuthorizationFailed.Code,
			state: func(t *testing.T, e *aclEnv) string {
				res, err := e.adm.DescribeUserSCRAMs(testCtx(t))
				if err != nil {
					t.Fatal(err)
				}
				return fmt.Sprint(len(res))
			},
			req: func() kmsg.Request {
				r := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
				u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
				u.Name, u.Mechanism, u.Iterations = "u", 1, 4096
				u.Salt, u.SaltedPassword = []byte("salt-salt-salt"), make([]byte, 32)
				r.Upsertions = append(r.Upsertions, u)
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.AlterUserSCRAMCredentialsResponse).Results[0].ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Clusters().Operations(kadm.OpAlter) }},
		{name: "DescribeClientQuotas", key: 48, denied: kerr.ClusterAuthorizationFailed.Code,
			req:   func() kmsg.Request { return kmsg.NewPtrDescribeClientQuotasRequest() },
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.DescribeClientQuotasResponse).ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Clusters().Operations(kadm.OpDescribeConfigs) }},
		{name: "AlterClientQuotas", key: 49, denied: kerr.ClusterAuthorizationFailed.Code,
			state: func(t *testing.T, e *aclEnv) string {
				res, err := e.adm.DescribeClientQuotas(testCtx(t), false, nil)
				if err != nil {
					t.Fatal(err)
				}
				return fmt.Sprint(res)
			},
			req: func() kmsg.Request {
				r := kmsg.NewPtrAlterClientQuotasRequest()
				e := kmsg.NewAlterClientQuotasRequestEntry()
				c := kmsg.NewAlterClientQuotasRequestEntryEntity()
				c.Type, c.Name = "client-id", kmsg.StringPtr("c")
				op := kmsg.NewAlterClientQuotasRequestEntryOp()
				op.Key, op.Value = "producer_byte_rate", 1024
				e.Entity, e.Ops = append(e.Entity, c), append(e.Ops, op)
				r.Entries = append(r.Entries, e)
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.AlterClientQuotasResponse).Entries[0].ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Clusters().Operations(kadm.OpAlterConfigs) }},
		{name: "DescribeLogDirs", key: 35, denied: kerr.ClusterAuthorizationFailed.Code,
			req:   func() kmsg.Request { return kmsg.NewPtrDescribeLogDirsRequest() },
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.DescribeLogDirsResponse).ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Clusters().Operations(kadm.OpDescribe) }},
		{name: "DescribeQuorum", key: 55, denied: kerr.ClusterAuthorizationFailed.Code,
			req: func() kmsg.Request {
				r := kmsg.NewPtrDescribeQuorumRequest()
				rt := kmsg.NewDescribeQuorumRequestTopic()
				rt.Topic = "__cluster_metadata"
				rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
				r.Topics = append(r.Topics, rt)
				return r
			},
			code: func(r kmsg.Response) int16 {
				resp := r.(*kmsg.DescribeQuorumResponse)
				if resp.ErrorCode != 0 {
					return resp.ErrorCode
				}
				return resp.Topics[0].Partitions[0].ErrorCode
			},
			grant: func() *kadm.ACLBuilder { return allow().Clusters().Operations(kadm.OpDescribe) }},
		// the only voter: already a voter, and the last one, so that the change reaches the check
		// and changes nothing
		{name: "AddRaftVoter", key: 80, denied: kerr.ClusterAuthorizationFailed.Code, reaches: true,
			req: func() kmsg.Request {
				r := kmsg.NewPtrAddRaftVoterRequest()
				r.VoterID = 1
				l := kmsg.NewAddRaftVoterRequestListener()
				l.Name, l.Host, l.Port = "CONTROLLER", "127.0.0.1", 1
				r.Listeners = append(r.Listeners, l)
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.AddRaftVoterResponse).ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Clusters().Operations(kadm.OpAlter) }},
		{name: "RemoveRaftVoter", key: 81, denied: kerr.ClusterAuthorizationFailed.Code, reaches: true,
			req: func() kmsg.Request {
				r := kmsg.NewPtrRemoveRaftVoterRequest()
				r.VoterID = 1
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.RemoveRaftVoterResponse).ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Clusters().Operations(kadm.OpAlter) }},
		{name: "ElectLeaders", key: 43, denied: kerr.ClusterAuthorizationFailed.Code, reaches: true,
			req: func() kmsg.Request {
				r := kmsg.NewPtrElectLeadersRequest()
				rt := kmsg.NewElectLeadersRequestTopic()
				rt.Topic, rt.Partitions = "t", []int32{0}
				r.Topics = append(r.Topics, rt)
				return r
			},
			code: func(r kmsg.Response) int16 {
				resp := r.(*kmsg.ElectLeadersResponse)
				if resp.ErrorCode != 0 {
					return resp.ErrorCode
				}
				return resp.Topics[0].Partitions[0].ErrorCode
			},
			grant: func() *kadm.ACLBuilder { return allow().Clusters().Operations(kadm.OpAlter) }},
		{name: "AlterPartitionReassignments", key: 45, denied: kerr.ClusterAuthorizationFailed.Code, reaches: true,
			state: func(t *testing.T, e *aclEnv) string {
				res, err := e.adm.ListPartitionReassignments(testCtx(t), nil)
				if err != nil {
					t.Fatal(err)
				}
				return fmt.Sprint(len(res))
			},
			req: func() kmsg.Request {
				r := kmsg.NewPtrAlterPartitionAssignmentsRequest()
				rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
				rt.Topic = "t"
				rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
				rp.Replicas = []int32{99}
				rt.Partitions = append(rt.Partitions, rp)
				r.Topics = append(r.Topics, rt)
				return r
			},
			code: func(r kmsg.Response) int16 {
				resp := r.(*kmsg.AlterPartitionAssignmentsResponse)
				if resp.ErrorCode != 0 {
					return resp.ErrorCode
				}
				return resp.Topics[0].Partitions[0].ErrorCode
			},
			grant: func() *kadm.ACLBuilder { return allow().Clusters().Operations(kadm.OpAlter) }},
		{name: "ListPartitionReassignments", key: 46, denied: kerr.ClusterAuthorizationFailed.Code,
			req:   func() kmsg.Request { return kmsg.NewPtrListPartitionReassignmentsRequest() },
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.ListPartitionReassignmentsResponse).ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Clusters().Operations(kadm.OpDescribe) }},
		{name: "OffsetDelete", key: 47, denied: kerr.GroupAuthorizationFailed.Code, state: committed("g"),
			req: func() kmsg.Request {
				r := kmsg.NewPtrOffsetDeleteRequest()
				r.Group = "g"
				ot := kmsg.NewOffsetDeleteRequestTopic()
				ot.Topic = "t"
				ot.Partitions = append(ot.Partitions, kmsg.NewOffsetDeleteRequestTopicPartition())
				r.Topics = append(r.Topics, ot)
				return r
			},
			code: func(r kmsg.Response) int16 {
				resp := r.(*kmsg.OffsetDeleteResponse)
				if resp.ErrorCode != 0 {
					return resp.ErrorCode
				}
				return resp.Topics[0].Partitions[0].ErrorCode
			},
			grant: func() *kadm.ACLBuilder { return allow().Groups("g").Topics("t").Operations(kadm.OpDelete, kadm.OpRead) }},
		{name: "DescribeCluster", key: 60, denied: kerr.ClusterAuthorizationFailed.Code,
			req: func() kmsg.Request {
				r := kmsg.NewPtrDescribeClusterRequest()
				r.IncludeClusterAuthorizedOperations = true
				return r
			},
			// DescribeCluster needs no permission; its authorized operations say what the
			// principal may do on the cluster.
			code: func(r kmsg.Response) int16 {
				resp := r.(*kmsg.DescribeClusterResponse)
				if resp.ErrorCode != 0 {
					return resp.ErrorCode
				}
				if resp.ClusterAuthorizedOperations&(1<<kmsg.ACLOperationDescribe) == 0 {
					return kerr.ClusterAuthorizationFailed.Code
				}
				return 0
			},
			grant: func() *kadm.ACLBuilder { return allow().Clusters().Operations(kadm.OpDescribe) }},
		{name: "DescribeProducers", key: 61, denied: kerr.TopicAuthorizationFailed.Code,
			req: func() kmsg.Request {
				r := kmsg.NewPtrDescribeProducersRequest()
				dt := kmsg.NewDescribeProducersRequestTopic()
				dt.Topic, dt.Partitions = "t", []int32{0}
				r.Topics = append(r.Topics, dt)
				return r
			},
			code: func(r kmsg.Response) int16 {
				return r.(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0].ErrorCode
			},
			grant: func() *kadm.ACLBuilder { return allow().Topics("t").Operations(kadm.OpRead) }},
		{name: "DescribeTransactions", key: 65, denied: kerr.TransactionalIDAuthorizationFailed.Code,
			req: func() kmsg.Request {
				r := kmsg.NewPtrDescribeTransactionsRequest()
				r.TransactionalIDs = []string{"tx"}
				return r
			},
			code: func(r kmsg.Response) int16 {
				return r.(*kmsg.DescribeTransactionsResponse).TransactionStates[0].ErrorCode
			},
			grant: func() *kadm.ACLBuilder { return allow().TransactionalIDs("tx").Operations(kadm.OpDescribe) }},
		{name: "ListTransactions", key: 66, denied: kerr.TransactionalIDAuthorizationFailed.Code,
			req: func() kmsg.Request { return kmsg.NewPtrListTransactionsRequest() },
			// ListTransactions leaves out the ids the principal may not describe.
			code: func(r kmsg.Response) int16 {
				for _, s := range r.(*kmsg.ListTransactionsResponse).TransactionStates {
					if s.TransactionalID == "tx" {
						return 0
					}
				}
				return kerr.TransactionalIDAuthorizationFailed.Code
			},
			grant: func() *kadm.ACLBuilder { return allow().TransactionalIDs("tx").Operations(kadm.OpDescribe) }},
		{name: "ConsumerGroupHeartbeat", key: 68, denied: kerr.GroupAuthorizationFailed.Code,
			req: func() kmsg.Request {
				r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
				r.Group, r.MemberID, r.SubscribedTopicNames = "cg", "m", []string{"t"}
				r.RebalanceTimeoutMillis, r.Topics = 30000, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Groups("cg").Topics("t").Operations(kadm.OpRead) }},
		{name: "ConsumerGroupDescribe", key: 69, denied: kerr.GroupAuthorizationFailed.Code, reaches: true,
			req: func() kmsg.Request {
				r := kmsg.NewPtrConsumerGroupDescribeRequest()
				r.Groups = []string{"cg"}
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.ConsumerGroupDescribeResponse).Groups[0].ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Groups("cg").Operations(kadm.OpDescribe) }},
		{name: "ShareGroupHeartbeat", key: 76, denied: kerr.GroupAuthorizationFailed.Code,
			req: func() kmsg.Request {
				r := kmsg.NewPtrShareGroupHeartbeatRequest()
				r.GroupID, r.MemberID, r.SubscribedTopicNames = "sg", "m", []string{"t"}
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.ShareGroupHeartbeatResponse).ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Groups("sg").Topics("t").Operations(kadm.OpRead) }},
		{name: "ShareGroupDescribe", key: 77, denied: kerr.GroupAuthorizationFailed.Code, reaches: true,
			req: func() kmsg.Request {
				r := kmsg.NewPtrShareGroupDescribeRequest()
				r.GroupIDs = []string{"sg"}
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.ShareGroupDescribeResponse).Groups[0].ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Groups("sg").Operations(kadm.OpDescribe) }},
		{name: "ShareFetch", key: 78, denied: kerr.GroupAuthorizationFailed.Code,
			req: func() kmsg.Request {
				r := kmsg.NewPtrShareFetchRequest()
				r.GroupID, r.MemberID, r.MaxWaitMillis = kmsg.StringPtr("sg"), kmsg.StringPtr("m"), 10
				rt := kmsg.NewShareFetchRequestTopic()
				rt.TopicID = topicT
				rt.Partitions = []kmsg.ShareFetchRequestTopicPartition{kmsg.NewShareFetchRequestTopicPartition()}
				r.Topics = append(r.Topics, rt)
				return r
			},
			code: func(r kmsg.Response) int16 {
				resp := r.(*kmsg.ShareFetchResponse)
				if resp.ErrorCode != 0 {
					return resp.ErrorCode
				}
				return topicPartitionCode(resp.Topics, func(t kmsg.ShareFetchResponseTopic) []int16 {
					var cs []int16
					for _, p := range t.Partitions {
						cs = append(cs, p.ErrorCode)
					}
					return cs
				})
			},
			grant: func() *kadm.ACLBuilder { return allow().Groups("sg").Topics("t").Operations(kadm.OpRead) }},
		{name: "ShareAcknowledge", key: 79, denied: kerr.GroupAuthorizationFailed.Code, reaches: true,
			req: func() kmsg.Request {
				r := kmsg.NewPtrShareAcknowledgeRequest()
				r.GroupID, r.MemberID, r.ShareSessionEpoch = kmsg.StringPtr("sg"), kmsg.StringPtr("m"), 1
				return r
			},
			code:  func(r kmsg.Response) int16 { return r.(*kmsg.ShareAcknowledgeResponse).ErrorCode },
			grant: func() *kadm.ACLBuilder { return allow().Groups("sg").Operations(kadm.OpRead) }},
		{name: "ReadShareGroupState", key: 84, denied: kerr.ClusterAuthorizationFailed.Code, reaches: true,
			req: func() kmsg.Request {
				r := kmsg.NewPtrReadShareGroupStateRequest()
				r.GroupID = "sg"
				rt := kmsg.NewReadShareGroupStateRequestTopic()
				rt.TopicID = topicT
				rt.Partitions = []kmsg.ReadShareGroupStateRequestTopicPartition{kmsg.NewReadShareGroupStateRequestTopicPartition()}
				r.Topics = append(r.Topics, rt)
				return r
			},
			code: func(r kmsg.Response) int16 {
				return r.(*kmsg.ReadShareGroupStateResponse).Topics[0].Partitions[0].ErrorCode
			},
			grant: func() *kadm.ACLBuilder { return allow().Clusters().Operations(kadm.OpClusterAction) }},
		{name: "WriteShareGroupState", key: 85, denied: kerr.ClusterAuthorizationFailed.Code, reaches: true,
			req: func() kmsg.Request {
				r := kmsg.NewPtrWriteShareGroupStateRequest()
				r.GroupID = "sg"
				rt := kmsg.NewWriteShareGroupStateRequestTopic()
				rt.TopicID = topicT
				rt.Partitions = []kmsg.WriteShareGroupStateRequestTopicPartition{kmsg.NewWriteShareGroupStateRequestTopicPartition()}
				r.Topics = append(r.Topics, rt)
				return r
			},
			code: func(r kmsg.Response) int16 {
				return r.(*kmsg.WriteShareGroupStateResponse).Topics[0].Partitions[0].ErrorCode
			},
			grant: func() *kadm.ACLBuilder { return allow().Clusters().Operations(kadm.OpClusterAction) }},
		{name: "DescribeShareGroupOffsets", key: 90, denied: kerr.GroupAuthorizationFailed.Code,
			req: func() kmsg.Request { return describeShareOffsetsReq("sgadm") },
			code: func(r kmsg.Response) int16 {
				g := r.(*kmsg.DescribeShareGroupOffsetsResponse).Groups[0]
				if g.ErrorCode != 0 {
					return g.ErrorCode
				}
				return g.Topics[0].Partitions[0].ErrorCode
			},
			grant: func() *kadm.ACLBuilder { return allow().Groups("sgadm").Topics("t").Operations(kadm.OpDescribe) }},
		{name: "AlterShareGroupOffsets", key: 91, denied: kerr.GroupAuthorizationFailed.Code,
			req: func() kmsg.Request {
				r := kmsg.NewPtrAlterShareGroupOffsetsRequest()
				r.GroupID = "sgadm"
				rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
				rt.Topic = "t"
				rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
				rp.StartOffset = 2
				rt.Partitions = append(rt.Partitions, rp)
				r.Topics = append(r.Topics, rt)
				return r
			},
			code: func(r kmsg.Response) int16 {
				resp := r.(*kmsg.AlterShareGroupOffsetsResponse)
				if resp.ErrorCode != 0 {
					return resp.ErrorCode
				}
				return resp.Topics[0].Partitions[0].ErrorCode
			},
			grant: func() *kadm.ACLBuilder { return allow().Groups("sgadm").Topics("t").Operations(kadm.OpRead) },
			state: shareStartOffset},
		{name: "DeleteShareGroupOffsets", key: 92, denied: kerr.GroupAuthorizationFailed.Code,
			req: func() kmsg.Request {
				r := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
				r.GroupID = "sgadm"
				rt := kmsg.NewDeleteShareGroupOffsetsRequestTopic()
				rt.Topic = "t"
				r.Topics = append(r.Topics, rt)
				return r
			},
			code: func(r kmsg.Response) int16 {
				resp := r.(*kmsg.DeleteShareGroupOffsetsResponse)
				if resp.ErrorCode != 0 {
					return resp.ErrorCode
				}
				return resp.Topics[0].ErrorCode
			},
			grant: func() *kadm.ACLBuilder {
				return allow().Groups("sgadm").Topics("t").Operations(kadm.OpDelete, kadm.OpRead)
			},
			state: shareStartOffset},
	}

	served := map[int16]bool{}
	av, err := kmsg.NewPtrApiVersionsRequest().RequestWith(testCtx(t), e.admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range av.ApiKeys {
		served[k.ApiKey] = true
	}
	for _, c := range cases {
		delete(served, c.key)
	}
	if len(served) != 0 {
		t.Fatalf("keys served but missing from the matrix: %v", served)
	}

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e.revokeAll(t)
			if c.grant == nil {
				if code := c.code(e.do(t, c.req())); code != 0 {
					t.Fatalf("without any ACL: %s, want no error", kerr.ErrorForCode(code))
				}
				return
			}
			var before string
			if c.state != nil {
				before = c.state(t, e)
			}
			if code := c.code(e.do(t, c.req())); code != c.denied {
				t.Fatalf("without permission: %v, want %v", kerr.ErrorForCode(code), kerr.ErrorForCode(c.denied))
			}
			if c.state != nil {
				if after := c.state(t, e); after != before {
					t.Fatalf("a denied request changed the state: %s, then %s", before, after)
				}
			}
			e.grant(t, c.grant())
			code := c.code(e.do(t, c.req()))
			if c.reaches && slices.Contains(authorizationCodes, code) || !c.reaches && code != 0 {
				t.Fatalf("with permission: %v", kerr.ErrorForCode(code))
			}
		})
	}
}

// saslAnswered reads a SASL key's code on a PLAINTEXT listener: ILLEGAL_SASL_STATE is the SASL
// layer's answer there, which passed the authorizer.
func saslAnswered(code int16) int16 {
	if code == kerr.IllegalSaslState.Code {
		return 0
	}
	return code
}

// describeShareOffsetsReq asks group's share-partition t-0.
func describeShareOffsetsReq(group string) *kmsg.DescribeShareGroupOffsetsRequest {
	r := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	g.GroupID = group
	rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
	rt.Topic, rt.Partitions = "t", []int32{0}
	g.Topics = append(g.Topics, rt)
	r.Groups = append(r.Groups, g)
	return r
}

// shareStartOffset is the start offset of sgadm's share-partition t-0, as the admin reads it.
func shareStartOffset(t *testing.T, e *aclEnv) string {
	t.Helper()
	resp, err := describeShareOffsetsReq("sgadm").RequestWith(testCtx(t), e.admin)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(resp.Groups[0].Topics[0].Partitions[0].StartOffset)
}

// findCoordinatorReq asks for one coordinator in both shapes of FindCoordinator, a key up to v3 and a
// list of keys from v4, so that it means the same at whichever version the client sends it.
func findCoordinatorReq(keyType int8, key string) *kmsg.FindCoordinatorRequest {
	r := kmsg.NewPtrFindCoordinatorRequest()
	r.CoordinatorType, r.CoordinatorKey, r.CoordinatorKeys = keyType, key, []string{key}
	return r
}

// findCoordinatorCode is the error code of the one key findCoordinatorReq asked for.
func findCoordinatorCode(r kmsg.Response) int16 {
	resp := r.(*kmsg.FindCoordinatorResponse)
	if len(resp.Coordinators) == 1 {
		return resp.Coordinators[0].ErrorCode
	}
	return resp.ErrorCode
}
