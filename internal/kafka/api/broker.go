// Package api serves the Kafka protocol's requests, decoded by package wire, on top of the partition
// replicas this node hosts and the cluster metadata: one file per API key, numbered by key as Kafka
// numbers them. It is the only package that knows Kafka error codes (see errorCode).
//
// Handle runs a connection's requests one at a time in arrival order, so whatever must happen in
// request order happens there: a produce's appends, a topic's creation. Waiting happens in the Reply
// it returns (a produce waiting for durability, a fetch parked until data arrives), so a connection
// keeps pipelining while earlier replies wait.
package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/acl"
	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/share"
	"github.com/weir-mq/weir/internal/sharestate"
	"github.com/weir-mq/weir/internal/txn"
)

// Clock is the time source of the handlers: it bounds how long a fetch stays parked.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// Options are what a Broker is built from.
type Options struct {
	// NodeID is this node's broker id.
	NodeID int32
	// Metadata is the cluster metadata store; required.
	Metadata *controller.Store
	// Replicas are the partition replicas this node hosts; required.
	Replicas *partition.Manager
	// Groups is the group coordinator; when nil the group APIs are neither served nor advertised.
	Groups *group.Coordinator
	// Txn is the transaction coordinator; when nil the transaction APIs are neither served nor
	// advertised (WriteTxnMarkers is served regardless: the partitions' side of transactions).
	Txn *txn.Coordinator
	// DisableTxnVerification turns off KIP-890 part 1 (Kafka's
	// transaction.partition.verification.enable=false): a partition leader then appends the first
	// transactional batch of a Produce v3-11 without asking the coordinator whether the partition is in
	// the transaction.
	DisableTxnVerification bool
	// InterBroker authenticates the broker's own calls to other brokers' inter-broker listeners
	// (KIP-890's AddPartitionsToTxn to a coordinator).
	InterBroker wire.Credentials
	// TransactionVersion is the finalized feature transaction.version the broker advertises, and so
	// the transaction protocol clients use: txn.TV2 serves KIP-890 part 2 (Produce v12, EndTxn v5,
	// TxnOffsetCommit v5); txn.TV1, and zero, keep clients on the classic protocol. Requests of
	// either protocol are served by version, whatever the setting, within the versions it serves.
	TransactionVersion int16
	// ShareState is the share-state coordinator; when nil the share group keys (76-79) are neither
	// served nor advertised (docs/queues.md).
	ShareState *sharestate.Coordinator
	// SharePartition is the share-partitions' settings (the group.share.* broker defaults: the
	// acquisition lock, the delivery count limit, the window's cap); zero fields are Kafka's.
	SharePartition share.Config
	// ShareGroup is the share groups' membership settings (group.share.session.timeout.ms,
	// group.share.heartbeat.interval.ms), for groups that set neither; zero fields are Kafka's.
	ShareGroup share.GroupConfig
	// DeadLetterTopicPrefix is the node's static errors.deadletterqueue.topic.name.prefix (KIP-1191):
	// what a share group's errors.deadletterqueue.topic.name must start with, checked when a group
	// sets it and at each dead-letter write, while the cluster-wide config is not set; empty: any name.
	DeadLetterTopicPrefix string
	// ShareOwnerIdle is how long a share-partition's owner may go without work before it stops when
	// nothing holds it; zero means DefaultShareOwnerIdle. Tests shorten it.
	ShareOwnerIdle time.Duration
	// GroupMarkers takes the transaction markers of __consumer_offsets partitions; when nil those
	// markers fail with COORDINATOR_NOT_AVAILABLE.
	GroupMarkers GroupMarkers
	// ProducerIDs hands out producer ids; nil: the broker makes its own from Metadata. A node shares
	// one between the broker and its transaction coordinator.
	ProducerIDs *ProducerIDs
	// StaticConfigs are the read-only broker configs given on this node's command line (node.id,
	// log.dirs, replica.lag.time.max.ms, ...), which DescribeConfigs on this broker reports as
	// STATIC_BROKER_CONFIG; the ones missing report their default.
	StaticConfigs map[string]string
	// SASL configures the exchanges of the SASL listeners.
	SASL SASLOptions
	// ACL turns the authorizer on (--authorizer acl): every request is checked against the image's
	// ACLs as Kafka checks it (authz_rules.go). Nil: no authorizer, every request allowed, and the
	// ACL keys answer SECURITY_DISABLED.
	ACL *acl.Config
	// QuotaWindowNum and QuotaWindowSize are the window over which client byte rates and request
	// times are measured (Kafka's quota.window.num and quota.window.size.seconds); zero: Kafka's 11
	// samples of 1s.
	QuotaWindowNum  int
	QuotaWindowSize time.Duration
	// Clock is required.
	Clock Clock
	// Logger receives request failures worth an operator's attention; slog.Default() when nil.
	Logger *slog.Logger
}

// ErrMissingOption is returned by New when a required option is nil.
var ErrMissingOption = errors.New("api: missing required option")

// Broker serves the Kafka APIs of one node. It implements wire.Handler.
type Broker struct {
	nodeID   int32
	meta     *controller.Store
	replicas *partition.Manager
	groups   *group.Coordinator
	txn      *txn.Coordinator
	// shares serves the share groups: membership here as their group coordinator, and the
	// share-partitions of the partitions led here (share.go); nil without Options.ShareState.
	shares  *shareGroups
	markers localMarkers
	// verifyTxn is set when leaders verify transactional batches with their coordinator (KIP-890
	// part 1); coordConns carries those questions, and share-partitions' state, to the other nodes.
	verifyTxn  bool
	coordConns *brokerConns
	// tv is the transaction version finalized (Options.TransactionVersion).
	tv    int16
	clock Clock
	log   *slog.Logger
	pids  *ProducerIDs
	// staticConfigs is Options.StaticConfigs.
	staticConfigs map[string]string
	// dlqPrefix is Options.DeadLetterTopicPrefix (Image.DeadLetterPrefix resolves it against the
	// cluster's); dlqDropped counts the dead letters not written (share_dlq.go).
	dlqPrefix  string
	dlqDropped deadLettersDropped
	sasl       saslAuth
	// authz is the authorizer; nil when Options.ACL is.
	authz *authz
	// quotas enforces the image's client quotas (quota.go).
	quotas *quotas
	// leaderThrottle is the bucket of leader.replication.throttled.rate for the copies this node's
	// leaders send (01_fetch.go).
	leaderThrottle partition.Bucket

	// draining is closed by Drain: parked fetches answer at once.
	draining  chan struct{}
	drainOnce sync.Once
}

var _ wire.Handler = (*Broker)(nil)

// New returns a Broker serving from opts.
func New(opts Options) (*Broker, error) {
	switch {
	case opts.Metadata == nil:
		return nil, fmt.Errorf("%w: Metadata", ErrMissingOption)
	case opts.Replicas == nil:
		return nil, fmt.Errorf("%w: Replicas", ErrMissingOption)
	case opts.Clock == nil:
		return nil, fmt.Errorf("%w: Clock", ErrMissingOption)
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	pids := opts.ProducerIDs
	if pids == nil {
		pids = NewProducerIDs(opts.Metadata)
	}
	var z *authz
	if opts.ACL != nil {
		z = &authz{cfg: *opts.ACL}
	}
	coordConns := newBrokerConns("weir-inter-broker", verifyRequestTimeout, opts.InterBroker)
	b := &Broker{
		authz:      z,
		shares:     newShareGroups(opts, coordConns),
		quotas:     newQuotas(opts.Metadata, opts.Clock, opts.QuotaWindowNum, opts.QuotaWindowSize),
		nodeID:     opts.NodeID,
		meta:       opts.Metadata,
		replicas:   opts.Replicas,
		groups:     opts.Groups,
		txn:        opts.Txn,
		markers:    localMarkers{meta: opts.Metadata, replicas: opts.Replicas, groups: opts.GroupMarkers},
		verifyTxn:  !opts.DisableTxnVerification,
		tv:         transactionVersion(opts),
		coordConns: coordConns,
		clock:      opts.Clock,
		log:        log,
		pids:       pids,
		sasl:       newSASLAuth(opts.SASL),
		draining:   make(chan struct{}),

		staticConfigs: staticConfigs(opts),
		dlqPrefix:     opts.DeadLetterTopicPrefix,
	}
	if b.shares != nil {
		b.shares.deadLetters = b.copyDeadLetters
		b.groups.OnShareMembersGone(b.shareMembersGone)
	}
	return b, nil
}

// staticConfigs is the node's read-only broker configs: Options.StaticConfigs with node.id and
// broker.id, which every node has.
func staticConfigs(opts Options) map[string]string {
	m := maps.Clone(opts.StaticConfigs)
	if m == nil {
		m = map[string]string{}
	}
	id := strconv.Itoa(int(opts.NodeID))
	m[controller.BrokerConfigNodeID], m[controller.BrokerConfigBrokerID] = id, id
	return m
}

// transactionVersion is the transaction version a broker built from opts finalizes: TV1 without a
// transaction coordinator.
func transactionVersion(opts Options) int16 {
	if opts.Txn == nil {
		return txn.TV1
	}
	return max(opts.TransactionVersion, txn.TV1)
}

// Drain makes every parked fetch, now and later, answer with what it has instead of waiting, so that
// a server shutting down is not held up by long polls. Requests keep being served.
func (b *Broker) Drain() {
	b.drainOnce.Do(func() { close(b.draining) })
}

// Close closes the broker's idle connections to other nodes and stops its share-partition owners.
func (b *Broker) Close() {
	b.coordConns.close()
	b.shares.close()
}

// Supports reports whether the broker serves key at version (the version table in versions.go).
func (b *Broker) Supports(key, version int16) bool {
	if b.groups == nil && groupKeys[key] || b.txn == nil && txnKeys[key] || b.shares == nil && shareKeys[key] {
		return false
	}
	return supported(key, version, b.tv)
}

// groupKeys are the API keys the group coordinator serves (the share admin keys need it too).
var groupKeys = map[int16]bool{8: true, 9: true, 10: true, 11: true, 12: true, 13: true, 14: true, 15: true, 16: true, 28: true, 42: true, 47: true, 68: true, 69: true,
	90: true, 91: true, 92: true}

// txnKeys are the API keys the transaction coordinator serves.
var txnKeys = map[int16]bool{24: true, 25: true, 26: true, 65: true, 66: true}

// withoutGroupKeys drops the group keys from an ApiVersions response when no coordinator serves them,
// and the transaction keys likewise.
func (b *Broker) withoutGroupKeys(resp kmsg.Response) kmsg.Response {
	if r, ok := resp.(*kmsg.ApiVersionsResponse); ok && b.groups == nil {
		r.ApiKeys = slices.DeleteFunc(r.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool { return groupKeys[k.ApiKey] })
	}
	if r, ok := resp.(*kmsg.ApiVersionsResponse); ok && b.txn == nil {
		r.ApiKeys = slices.DeleteFunc(r.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool { return txnKeys[k.ApiKey] })
	}
	if r, ok := resp.(*kmsg.ApiVersionsResponse); ok && b.shares == nil {
		r.ApiKeys = slices.DeleteFunc(r.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool { return shareKeys[k.ApiKey] })
	}
	return resp
}

// Handle serves one request. It never blocks on anything but the metadata store, the local logs and a
// client muted by its quota (quota.go); the returned Reply does the waiting. With an authorizer, the
// request goes through the authorizing layer first (authorized).
func (b *Broker) Handle(ctx context.Context, req *wire.Request) wire.Reply {
	if req.Unsupported {
		return ready(unsupportedAPIVersions())
	}
	if b.quotas.active() {
		return b.withQuotas(ctx, req)
	}
	return b.dispatch(ctx, req)
}

// dispatch hands req to the authorizing layer, or to its handler when there is no authorizer.
func (b *Broker) dispatch(ctx context.Context, req *wire.Request) wire.Reply {
	if b.authz != nil {
		return b.authorized(ctx, req)
	}
	return b.serve(ctx, req)
}

// serve is Handle's dispatch to the handler of req's key.
func (b *Broker) serve(ctx context.Context, req *wire.Request) wire.Reply {
	switch body := req.Body.(type) {
	case *kmsg.ProduceRequest:
		return b.produce(ctx, body)
	case *kmsg.FetchRequest:
		return b.fetch(body)
	case *kmsg.ListOffsetsRequest:
		return ready(b.listOffsets(body))
	case *kmsg.MetadataRequest:
		return ready(b.metadata(ctx, body, req.Listener))
	case *kmsg.ApiVersionsRequest:
		return ready(b.withGroupVersion(b.withShareFeature(b.withoutGroupKeys(apiVersions(body, b.tv, b.meta.Image().Version)))))
	case *kmsg.CreateTopicsRequest:
		return ready(b.createTopics(ctx, body))
	case *kmsg.DeleteTopicsRequest:
		return ready(b.deleteTopics(ctx, body))
	case *kmsg.DeleteRecordsRequest:
		return ready(b.deleteRecords(body))
	case *kmsg.InitProducerIDRequest:
		return b.initProducerID(ctx, body)
	case *kmsg.OffsetForLeaderEpochRequest:
		return ready(b.offsetForLeaderEpoch(body))
	case *kmsg.DescribeConfigsRequest:
		return ready(b.describeConfigs(body))
	case *kmsg.AlterConfigsRequest:
		return ready(b.alterConfigs(ctx, body))
	case *kmsg.CreatePartitionsRequest:
		return ready(b.createPartitions(ctx, body))
	case *kmsg.AlterPartitionAssignmentsRequest:
		return ready(b.alterPartitionReassignments(ctx, body))
	case *kmsg.ListPartitionReassignmentsRequest:
		return ready(b.listPartitionReassignments(body))
	case *kmsg.ElectLeadersRequest:
		return ready(b.electLeaders(ctx, body))
	case *kmsg.DescribeLogDirsRequest:
		return ready(b.describeLogDirs(body))
	case *kmsg.IncrementalAlterConfigsRequest:
		return ready(b.incrementalAlterConfigs(ctx, body))
	case *kmsg.DescribeClusterRequest:
		return ready(b.describeCluster(body, req.Listener))
	case *kmsg.DescribeQuorumRequest:
		return ready(b.describeQuorum(ctx, body))
	case *kmsg.AddRaftVoterRequest:
		return ready(b.addRaftVoter(ctx, body))
	case *kmsg.RemoveRaftVoterRequest:
		return ready(b.removeRaftVoter(ctx, body))
	case *kmsg.OffsetCommitRequest:
		return b.offsetCommit(body)
	case *kmsg.OffsetFetchRequest:
		return b.offsetFetch(body)
	case *kmsg.FindCoordinatorRequest:
		return ready(b.findCoordinator(ctx, body, req.Listener, nil))
	case *kmsg.JoinGroupRequest:
		return b.joinGroup(req, body)
	case *kmsg.HeartbeatRequest:
		return b.heartbeat(body)
	case *kmsg.LeaveGroupRequest:
		return b.leaveGroup(body)
	case *kmsg.SyncGroupRequest:
		return b.syncGroup(body)
	case *kmsg.DescribeGroupsRequest:
		return b.describeGroups(body)
	case *kmsg.ListGroupsRequest:
		return b.listGroups(body)
	case *kmsg.DeleteGroupsRequest:
		return b.deleteGroups(body)
	case *kmsg.OffsetDeleteRequest:
		return b.offsetDelete(body)
	case *kmsg.TxnOffsetCommitRequest:
		return b.txnOffsetCommit(body)
	case *kmsg.DescribeProducersRequest:
		return ready(b.describeProducers(body))
	case *kmsg.AddPartitionsToTxnRequest:
		return b.addPartitionsToTxn(body)
	case *kmsg.AddOffsetsToTxnRequest:
		return b.addOffsetsToTxn(body)
	case *kmsg.EndTxnRequest:
		return b.endTxn(body)
	case *kmsg.WriteTxnMarkersRequest:
		return b.writeTxnMarkers(body)
	case *kmsg.DescribeTransactionsRequest:
		return b.describeTransactions(body)
	case *kmsg.ListTransactionsRequest:
		return b.listTransactions(body)
	case *kmsg.SASLHandshakeRequest:
		return b.saslHandshake(req, body)
	case *kmsg.SASLAuthenticateRequest:
		return b.saslAuthenticate(req, body)
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		return ready(b.describeUserScramCredentials(body))
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		return ready(b.alterUserScramCredentials(ctx, body))
	case *kmsg.DescribeACLsRequest:
		return ready(b.describeAcls(body))
	case *kmsg.CreateACLsRequest:
		return ready(b.createAcls(ctx, body))
	case *kmsg.DeleteACLsRequest:
		return ready(b.deleteAcls(ctx, body))
	case *kmsg.DescribeClientQuotasRequest:
		return ready(b.describeClientQuotas(body))
	case *kmsg.AlterClientQuotasRequest:
		return ready(b.alterClientQuotas(ctx, body))
	case *kmsg.ConsumerGroupHeartbeatRequest:
		return b.consumerGroupHeartbeat(req, body)
	case *kmsg.ConsumerGroupDescribeRequest:
		return b.consumerGroupDescribe(body)
	case *kmsg.ShareGroupHeartbeatRequest:
		return b.shareGroupHeartbeat(ctx, req, body)
	case *kmsg.ShareGroupDescribeRequest:
		return b.shareGroupDescribe(ctx, req, body)
	case *kmsg.ShareFetchRequest:
		return b.shareFetch(body, req.Session)
	case *kmsg.ShareAcknowledgeRequest:
		return b.shareAcknowledgeReq(body)
	case *kmsg.ReadShareGroupStateRequest:
		return b.readShareGroupState(body)
	case *kmsg.WriteShareGroupStateRequest:
		return b.writeShareGroupState(body)
	case *kmsg.DescribeShareGroupOffsetsRequest:
		return b.describeShareGroupOffsets(req, body)
	case *kmsg.AlterShareGroupOffsetsRequest:
		return b.alterShareGroupOffsets(req, body)
	case *kmsg.DeleteShareGroupOffsetsRequest:
		return b.deleteShareGroupOffsets(req, body)
	}
	// Supports admits only the keys above, so this is a programming error (a key added to the version
	// table without a handler). wire recovers the panic and closes this connection only.
	panic(fmt.Sprintf("api: no handler for key %d v%d although Supports admits it", req.Key, req.Version))
}

// ready wraps a response computed in Handle as a Reply.
func ready(resp kmsg.Response) wire.Reply {
	return func(context.Context) kmsg.Response { return resp }
}

// hasPartition reports whether the image holds partition p of topic.
func hasPartition(img *controller.Image, topic string, p int32) bool {
	t, ok := img.Topic(topic)
	return ok && p >= 0 && p < t.Partitions
}

// replica returns the local replica of topic's partition p. A partition of the image that this node
// hosts but has not opened yet (the topic was created an instant ago and the node's reconciliation is
// still opening it) is waited for until wait's deadline, which one request shares for all the partitions
// it names: the request's goroutine never opens replicas.
func (b *Broker) replica(img *controller.Image, topic string, p int32, wait *openWait) (*partition.Replica, error) {
	if !hasPartition(img, topic, p) {
		return nil, errUnknownTopicOrPartition
	}
	if r, ok := b.replicas.Replica(topic, p); ok {
		return r, nil
	}
	ctx, cancel := context.WithDeadline(context.Background(), wait.deadline())
	defer cancel()
	b.replicas.Submit(img)
	if r, ok := b.replicas.AwaitReplica(ctx, topic, p, img.Version); ok {
		return r, nil
	}
	return nil, errReplicaNotAvailable
}

// replicaOpenWait bounds how long a request waits for the replicas it names that are being opened, and an
// admin request for the reconciliation of its change, before it answers: a retriable error for the former,
// success for the latter (the replicas keep opening in the background).
const replicaOpenWait = 2 * time.Second

// openWait is one request's wait for the replicas it names that are being opened (replica): its deadline
// is set when the first such replica is waited for, replicaOpenWait ahead, so a request that finds every
// replica open never reads the clock.
type openWait struct{ until time.Time }

func (w *openWait) deadline() time.Time {
	if w.until.IsZero() {
		w.until = time.Now().Add(replicaOpenWait)
	}
	return w.until
}

// reconcile hands the image this handler's change made to the partition Manager's reconciler and waits, up
// to replicaOpenWait, until it has opened and deleted what the change asks, so that the client's next
// request usually finds them. The answer does not depend on the wait: the reconciler logs a pass that
// fails and passes again once an image is handed in again, and a pass still running goes on.
func (b *Broker) reconcile() {
	img := b.meta.Image()
	b.replicas.Submit(img)
	ctx, cancel := context.WithTimeout(context.Background(), replicaOpenWait)
	defer cancel()
	_ = b.replicas.WaitReconciled(ctx, img.Version)
}
