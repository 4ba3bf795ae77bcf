package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/coordshard"
	"github.com/weir-mq/weir/internal/partition"
)

// OffsetsTopic is the internal topic that holds group metadata and committed offsets.
const OffsetsTopic = "__consumer_offsets"

// Defaults of the coordinator's settings, Kafka's.
const (
	// DefaultOffsetsPartitions is offsets.topic.num.partitions.
	DefaultOffsetsPartitions = 50
	// DefaultOffsetsReplicationFactor is offsets.topic.replication.factor.
	DefaultOffsetsReplicationFactor = 3
	// DefaultOffsetsRetention is offsets.retention.minutes (7 days).
	DefaultOffsetsRetention = 7 * 24 * time.Hour
	// DefaultRetentionCheckInterval is offsets.retention.check.interval.ms.
	DefaultRetentionCheckInterval = 10 * time.Minute
	// DefaultOffsetMetadataMax is offset.metadata.max.bytes.
	DefaultOffsetMetadataMax = 4096
)

// Errors of the coordinator, besides the Group's. The Kafka API layer maps each to its error code.
var (
	// ErrLoadInProgress is returned for a group whose offsets partition is still being read back.
	ErrLoadInProgress = errors.New("group: coordinator load in progress")
	// ErrInvalidGroupID is returned for a request with an empty group id.
	ErrInvalidGroupID = errors.New("group: invalid group id")
	// ErrOffsetMetadataTooLarge is returned for a commit whose metadata is over Config.OffsetMetadataMax.
	ErrOffsetMetadataTooLarge = errors.New("group: offset metadata too large")
	// ErrGroupSubscribedToTopic is returned by DeleteOffsets for a partition of a topic a member of the group
	// consumes.
	ErrGroupSubscribedToTopic = errors.New("group: group is subscribed to the topic")
	// ErrMissingOption is returned by NewCoordinator when a required option is nil.
	ErrMissingOption = errors.New("group: missing required option")
	// ErrUnstableOffsetCommit is a partition's error in FetchStableOffsets while a commit of it is being
	// written or an open transaction has staged an offset for it (KIP-447).
	ErrUnstableOffsetCommit = errors.New("group: unstable offset commit")
)

// Clock is the coordinator's time source: group timers are armed with After and come back as messages to
// the owner goroutine.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// MetadataStore is what the coordinator needs from the cluster metadata store.
type MetadataStore = coordshard.MetadataStore

// Replicas is what the coordinator needs from the node's partition replicas (*partition.Manager).
type Replicas = coordshard.Replicas

// Log is one partition of __consumer_offsets as the coordinator uses it; *partition.Replica is one.
// Append, AppendCoordinator and WriteMarker wait, through their wait functions, until what they appended
// is committed (acks=all). AppendCoordinator appends a transaction's offsets as a batch of the producer
// (only its epoch is checked); WriteMarker appends a producer's COMMIT or ABORT marker.
type Log interface {
	// Log is what the shard's Owner reads the partition back with.
	coordshard.Log
	Append(batch []byte) (partition.Appended, func(context.Context) error, error)
	AppendCoordinator(batch []byte) (partition.Appended, func(context.Context) error, error)
	WriteMarker(m partition.Marker) (partition.Appended, func(context.Context) error, error)
}

// CoordinatorConfig holds the coordinator's settings; zero values mean Kafka's defaults.
type CoordinatorConfig struct {
	// OffsetsPartitions is the partition count __consumer_offsets is created with
	// (offsets.topic.num.partitions). An existing topic keeps its own count.
	OffsetsPartitions int32
	// OffsetsReplicationFactor is the replication factor __consumer_offsets is created with
	// (offsets.topic.replication.factor), capped at the number of live brokers then (see
	// coordshard.Replication).
	OffsetsReplicationFactor int16
	// OffsetsRetention is how long the offsets of an Empty group are kept (offsets.retention.minutes).
	OffsetsRetention time.Duration
	// RetentionCheckInterval is how often expired offsets are looked for.
	RetentionCheckInterval time.Duration
	// OffsetMetadataMax bounds a commit's metadata string in bytes (offset.metadata.max.bytes).
	OffsetMetadataMax int
	// SessionTimeoutMin, SessionTimeoutMax, InitialRebalanceDelay and MembersMax are every group's
	// settings (see Config; zero: Kafka's defaults, except that zero InitialRebalanceDelay is no delay).
	SessionTimeoutMin     time.Duration
	SessionTimeoutMax     time.Duration
	InitialRebalanceDelay time.Duration
	MembersMax            int
	// ConsumerSessionTimeout and ConsumerHeartbeatInterval are every KIP-848 group's
	// (group.consumer.session.timeout.ms, group.consumer.heartbeat.interval.ms; zero: Kafka's defaults).
	ConsumerSessionTimeout    time.Duration
	ConsumerHeartbeatInterval time.Duration
	// ConsumerMembersMax caps a KIP-848 group's members (group.consumer.max.size); zero means no cap.
	ConsumerMembersMax int
}

// groupConfig is the Config of every group, with ids from newID.
func (c CoordinatorConfig) groupConfig(newID func(string) string) Config {
	return Config{
		SessionTimeoutMin: c.SessionTimeoutMin, SessionTimeoutMax: c.SessionTimeoutMax,
		InitialRebalanceDelay: c.InitialRebalanceDelay, MembersMax: c.MembersMax, NewMemberID: newID,
	}
}

// Options are what a Coordinator is built from.
type Options struct {
	// NodeID is this node: it coordinates the groups of the offsets partitions it leads.
	NodeID   int32
	Metadata MetadataStore
	Replicas Replicas
	Clock    Clock
	// Rand seeds the member ids the coordinator hands out.
	Rand   *rand.Rand
	Config CoordinatorConfig
	// Logger is slog.Default() when nil.
	Logger *slog.Logger
}

// Coordinator is the group coordinator of one node: for every partition of __consumer_offsets that this
// node leads, one owner goroutine (a shard) loads the partition's groups and offsets from the log and then
// drives their state machines; requests for groups of other partitions get ErrNotCoordinator.
type Coordinator struct {
	clock Clock
	cfg   CoordinatorConfig
	log   *slog.Logger
	// topic is __consumer_offsets and the shards over it.
	topic *coordshard.Topic[*shard]
	// rand seeds each new shard's; only newShard uses it, which topic calls one call at a time.
	rand *rand.Rand
	// meta is the node's metadata: the topics share groups are assigned from.
	meta MetadataStore
	// shareGone is told of expired share group members (OnShareMembersGone).
	shareGone atomic.Pointer[ShareMembersGone]
	// deletions reports the topics deleted between the images Reconcile sees.
	deletions coordshard.Deletions
}

// NewCoordinator returns a coordinator that leads nothing yet; Reconcile gives it its partitions.
func NewCoordinator(opts Options) (*Coordinator, error) {
	switch {
	case opts.Metadata == nil:
		return nil, fmt.Errorf("%w: Metadata", ErrMissingOption)
	case opts.Replicas == nil:
		return nil, fmt.Errorf("%w: Replicas", ErrMissingOption)
	case opts.Clock == nil:
		return nil, fmt.Errorf("%w: Clock", ErrMissingOption)
	case opts.Rand == nil:
		return nil, fmt.Errorf("%w: Rand", ErrMissingOption)
	}
	cfg := opts.Config
	if cfg.OffsetsPartitions <= 0 {
		cfg.OffsetsPartitions = DefaultOffsetsPartitions
	}
	if cfg.OffsetsReplicationFactor <= 0 {
		cfg.OffsetsReplicationFactor = DefaultOffsetsReplicationFactor
	}
	if cfg.OffsetsRetention <= 0 {
		cfg.OffsetsRetention = DefaultOffsetsRetention
	}
	if cfg.RetentionCheckInterval <= 0 {
		cfg.RetentionCheckInterval = DefaultRetentionCheckInterval
	}
	if cfg.OffsetMetadataMax <= 0 {
		cfg.OffsetMetadataMax = DefaultOffsetMetadataMax
	}
	probe := cfg.groupConfig(func(string) string { return "" })
	if err := probe.normalize(); err != nil {
		return nil, err
	}
	consumerProbe := cfg.consumerConfig(func(string) string { return "" })
	if err := consumerProbe.normalize(); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	c := &Coordinator{clock: opts.Clock, cfg: cfg, log: log, rand: opts.Rand, meta: opts.Metadata}
	c.topic = coordshard.NewTopic(coordshard.TopicConfig[*shard]{
		Name: OffsetsTopic, Partitions: cfg.OffsetsPartitions, ReplicationFactor: cfg.OffsetsReplicationFactor,
		NodeID: opts.NodeID, Metadata: opts.Metadata, Replicas: opts.Replicas,
		NewShard: func(p int32, r *partition.Replica) *shard {
			return c.newShard(p, r, rand.New(rand.NewPCG(c.rand.Uint64(), c.rand.Uint64())))
		},
		Unavailable: ErrCoordinatorNotAvailable, Logger: log,
	})
	return c, nil
}

// PartitionFor is the partition of __consumer_offsets that holds group's records when the topic has n
// partitions: abs(Java's String.hashCode(group)) % n, as Kafka places groups.
func PartitionFor(group string, n int32) int32 {
	var h int32
	for _, u := range utf16Units(group) {
		h = 31*h + int32(u)
	}
	if h == -1<<31 {
		return 0
	}
	if h < 0 {
		h = -h
	}
	return h % n
}

func utf16Units(s string) []uint16 {
	out := make([]uint16, 0, len(s))
	for _, r := range s {
		switch {
		case r >= 0x10000:
			r -= 0x10000
			out = append(out, uint16(0xd800+(r>>10)), uint16(0xdc00+(r&0x3ff)))
		default:
			out = append(out, uint16(r))
		}
	}
	return out
}

// Locate returns the offsets partition that coordinates group, creating __consumer_offsets (compacted,
// internal) on first use. The caller answers FindCoordinator with that partition's leader.
func (c *Coordinator) Locate(ctx context.Context, group string) (int32, error) {
	n, err := c.topic.Ensure(ctx)
	if err != nil {
		return 0, err
	}
	return PartitionFor(group, n), nil
}

// Reconcile makes the shards match img: this node coordinates exactly the partitions of __consumer_offsets
// that img says it leads and whose hosted replica leads in img's leader epoch (the caller reconciles the
// replicas with img first). A partition newly led (or led in a new leader epoch) starts loading; one no
// longer led is unloaded, its waiting requests answered with ErrNotCoordinator. It never blocks on a load,
// but waits for an unloaded shard's writes in flight, which end once the replica has lost leadership.
// The committed offsets of a topic that the image before img had and img has not (a topic deleted) are
// deleted from every group of every loaded shard, as Kafka's coordinator deletes them, so that a topic
// created again under the name starts with no offsets.
func (c *Coordinator) Reconcile(img *controller.Image) {
	c.topic.Reconcile(img)
	gone := c.deletions.Next(img)
	if len(gone) == 0 {
		return
	}
	names := make(map[string]bool, len(gone))
	for _, name := range gone {
		names[name] = true
	}
	for _, s := range c.topic.Shards() {
		s.Submit(func(stopped bool) {
			if !stopped && s.Leads() && s.Loaded() {
				s.deleteTopicOffsets(names)
			}
		})
	}
}

// Close unloads every group, answering waiting requests with ErrNotCoordinator, and waits for the
// shards to finish the writes in flight. Later requests get ErrNotCoordinator.
func (c *Coordinator) Close() {
	c.topic.Close()
}

// shardFor returns the shard coordinating group. The empty group id is valid here: Kafka accepts it for
// commits, fetches, DescribeGroups and DeleteGroups, but not for membership (see memberCall).
func (c *Coordinator) shardFor(group string) (*shard, error) {
	n, ok := c.topic.Partitions()
	if !ok {
		return nil, ErrNotCoordinator
	}
	s, ok := c.topic.Shard(PartitionFor(group, n))
	if !ok {
		return nil, ErrNotCoordinator
	}
	return s, nil
}

// memberCall is call for the requests of group members, which need a non-empty group id.
func memberCall[T any](ctx context.Context, c *Coordinator, group string, fn func(s *shard, reply func(T, error))) (T, error) {
	if group == "" {
		var zero T
		return zero, ErrInvalidGroupID
	}
	return call(ctx, c, group, fn)
}

// call runs fn on group's shard and waits for the answer it sends on the returned channel.
func call[T any](ctx context.Context, c *Coordinator, group string, fn func(s *shard, reply func(T, error))) (T, error) {
	var zero T
	s, err := c.shardFor(group)
	if err != nil {
		return zero, err
	}
	return callShard(ctx, s, true, fn)
}

type result[T any] struct {
	v   T
	err error
}

// callShard runs fn on s once loaded (needLoaded) and waits for its reply.
func callShard[T any](ctx context.Context, s *shard, needLoaded bool, fn func(s *shard, reply func(T, error))) (T, error) {
	var zero T
	ch := make(chan result[T], 1)
	reply := func(v T, err error) { ch <- result[T]{v, err} }
	ok := s.Submit(func(stopped bool) {
		switch {
		case stopped || !s.Leads():
			reply(zero, ErrNotCoordinator)
		case needLoaded && !s.Loaded():
			reply(zero, ErrLoadInProgress)
		default:
			fn(s, reply)
		}
	})
	if !ok {
		return zero, ErrNotCoordinator
	}
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// Join handles a JoinGroup request (its Ref is chosen here). The answer may wait for the join phase.
func (c *Coordinator) Join(ctx context.Context, group string, req JoinRequest) JoinResponse {
	resp, err := memberCall(ctx, c, group, func(s *shard, reply func(JoinResponse, error)) { s.join(group, req, reply) })
	if err != nil {
		return JoinResponse{Err: err, Generation: -1}
	}
	return resp
}

// Sync handles a SyncGroup request (its Ref is chosen here). The answer may wait for the leader's
// assignment and its record.
func (c *Coordinator) Sync(ctx context.Context, group string, req SyncRequest) SyncResponse {
	resp, err := memberCall(ctx, c, group, func(s *shard, reply func(SyncResponse, error)) { s.sync(group, req, reply) })
	if err != nil {
		return SyncResponse{Err: err}
	}
	return resp
}

// Heartbeat handles a Heartbeat request.
func (c *Coordinator) Heartbeat(ctx context.Context, group string, req HeartbeatRequest) error {
	_, err := memberCall(ctx, c, group, func(s *shard, reply func(struct{}, error)) {
		reply(struct{}{}, s.heartbeat(group, req))
	})
	return err
}

// Leave handles a LeaveGroup request: one error per member, or an error for the whole request.
func (c *Coordinator) Leave(ctx context.Context, group string, members []LeaveMember) ([]error, error) {
	return memberCall(ctx, c, group, func(s *shard, reply func([]error, error)) { reply(s.leave(group, members)) })
}

// OffsetCommit is one partition's offset in an OffsetCommit request.
type OffsetCommit struct {
	TopicPartition
	Offset int64
	// LeaderEpoch is -1 when the client did not send one.
	LeaderEpoch int32
	Metadata    string
}

// Commit handles an OffsetCommit request once the caller has checked that every partition exists. It
// answers when the records are durable: one error per offset (nil: committed), or an error for all.
func (c *Coordinator) Commit(ctx context.Context, group string, who CommitRequest, offsets []OffsetCommit) ([]error, error) {
	return call(ctx, c, group, func(s *shard, reply func([]error, error)) { s.commit(group, who, offsets, reply) })
}

// FetchedOffset is one partition's committed offset: Offset -1 when there is none.
type FetchedOffset struct {
	TopicPartition
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	// Err is ErrUnstableOffsetCommit, with Offset -1, for a partition whose offset FetchStableOffsets
	// cannot vouch for; else nil.
	Err error
}

// FetchOffsets returns group's committed offsets for partitions, or all of them when partitions is nil.
// Offsets staged by open transactions are not among them.
func (c *Coordinator) FetchOffsets(ctx context.Context, group string, partitions []TopicPartition) ([]FetchedOffset, error) {
	return call(ctx, c, group, func(s *shard, reply func([]FetchedOffset, error)) {
		reply(s.fetchOffsets(group, partitions, false), nil)
	})
}

// FetchStableOffsets is FetchOffsets for an OffsetFetch with RequireStable (KIP-447): a partition with an
// offset staged by an open transaction, or a commit still being written, gets ErrUnstableOffsetCommit
// (the client retries) instead of an offset that may be about to change.
func (c *Coordinator) FetchStableOffsets(ctx context.Context, group string, partitions []TopicPartition) ([]FetchedOffset, error) {
	return call(ctx, c, group, func(s *shard, reply func([]FetchedOffset, error)) {
		reply(s.fetchOffsets(group, partitions, true), nil)
	})
}

// DeleteOffsets removes group's committed offsets of partitions (OffsetDelete): one error per partition
// or an error for all. It answers once the tombstones are durable.
func (c *Coordinator) DeleteOffsets(ctx context.Context, group string, partitions []TopicPartition) ([]error, error) {
	return memberCall(ctx, c, group, func(s *shard, reply func([]error, error)) { s.deleteOffsets(group, partitions, reply) })
}

// Describe reports group; a group this coordinator does not know is Dead.
func (c *Coordinator) Describe(ctx context.Context, group string) (Description, error) {
	return call(ctx, c, group, func(s *shard, reply func(Description, error)) { reply(s.describe(group), nil) })
}

// Delete deletes an Empty group and its offsets (DeleteGroups), answering once the tombstones are durable.
func (c *Coordinator) Delete(ctx context.Context, group string) error {
	_, err := call(ctx, c, group, func(s *shard, reply func(struct{}, error)) { s.deleteGroup(group, reply) })
	return err
}

// Listing is one group in ListGroups.
type Listing struct {
	Group        string
	ProtocolType string
	// State is a classic group's; StateName is Kafka's name of the state, a KIP-848 group's included
	// (Empty, Reconciling, Stable).
	State     State
	StateName string
	// Type is Kafka's group type (ListGroups v5): "classic", or "consumer" for a KIP-848 group.
	Type string
}

// The group types of a Listing.
const (
	TypeClassic  = "classic"
	TypeConsumer = "consumer"
)

// List returns every group this node coordinates; ErrLoadInProgress while a partition still loads.
func (c *Coordinator) List(ctx context.Context) ([]Listing, error) {
	var all []Listing
	for _, s := range c.topic.Shards() {
		ls, err := callShard(ctx, s, true, func(s *shard, reply func([]Listing, error)) { reply(s.list(), nil) })
		if errors.Is(err, ErrNotCoordinator) {
			continue
		}
		if err != nil {
			return nil, err
		}
		all = append(all, ls...)
	}
	return all, nil
}
