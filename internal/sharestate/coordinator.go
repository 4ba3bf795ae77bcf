// Package sharestate is the share-state coordinator (docs/queues.md): for every partition of the
// internal __share_group_state topic that this node leads, one owner goroutine (a shard, on
// coordshard) loads the durable state of the share-partitions stored there, then takes their writes
// (each checked against the share-partition's state before it is appended, and answered once it is
// committed) and answers reads of their committed state.
package sharestate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/coordshard"
	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/share"
)

// StateTopic is the internal topic that holds the share-partitions' durable state.
const StateTopic = "__share_group_state"

// Defaults of the coordinator's settings, Kafka's.
const (
	// DefaultStatePartitions is share.coordinator.state.topic.num.partitions.
	DefaultStatePartitions = 50
	// DefaultStateReplicationFactor is share.coordinator.state.topic.replication.factor.
	DefaultStateReplicationFactor = 3
)

// Errors returned by the Coordinator. The Kafka API layer maps them to error codes.
var (
	// ErrNotCoordinator is returned for a share-partition whose __share_group_state partition this node
	// does not lead (NOT_COORDINATOR), and for writes waiting when it stops leading it.
	ErrNotCoordinator = errors.New("sharestate: not the coordinator")
	// ErrLoadInProgress is returned while the partition is being read back (COORDINATOR_LOAD_IN_PROGRESS).
	ErrLoadInProgress = errors.New("sharestate: coordinator load in progress")
	// ErrCoordinatorNotAvailable is returned when a write failed (COORDINATOR_NOT_AVAILABLE).
	ErrCoordinatorNotAvailable = errors.New("sharestate: coordinator not available")
	// ErrNoState is returned by Read for a share-partition with no state (it starts with share.New).
	ErrNoState = errors.New("sharestate: no state for the share-partition")
	// ErrStateExists is returned by Create for a share-partition that has state by now (a leader
	// wrote it after this one read none): the caller reads it again.
	ErrStateExists = errors.New("sharestate: the share-partition has state")
	// ErrStateReset is returned by Write while an admin's Reset or Delete fences the share-partition's
	// leaders: the writer's state is older than the reset, and it must read the state again.
	ErrStateReset = errors.New("sharestate: the share-partition's state was reset")
	// ErrMissingOption is returned by NewCoordinator for an Options field it needs.
	ErrMissingOption = errors.New("sharestate: missing option")
)

// Clock is the coordinator's time source: it stamps the batches it writes.
type Clock interface {
	Now() time.Time
}

// Log is one partition of __share_group_state as the coordinator uses it; *partition.Replica is one.
// Append waits, through its wait function, until the batch is committed (acks=all).
type Log interface {
	coordshard.Log
	Append(batch []byte) (partition.Appended, func(context.Context) error, error)
}

// SharePartition names a share-partition: one share group's view of one topic partition.
type SharePartition struct {
	Group     string
	TopicID   controller.TopicID
	Partition int32
}

// String is the share-partition's coordinator key, Kafka's "group:topicId:partition"
// (FindCoordinator key type 2).
func (sp SharePartition) String() string {
	return sp.Group + ":" + sp.TopicID.String() + ":" + strconv.Itoa(int(sp.Partition))
}

// ParseSharePartition reads a coordinator key of the form String writes. The group id may itself
// hold colons: the topic id and the partition are the last two fields.
func ParseSharePartition(key string) (SharePartition, error) {
	bad := fmt.Errorf("share-partition key %q: want group:topicId:partition", key)
	i := strings.LastIndexByte(key, ':')
	if i < 0 {
		return SharePartition{}, bad
	}
	p, err := strconv.ParseInt(key[i+1:], 10, 32)
	if err != nil || p < 0 {
		return SharePartition{}, bad
	}
	j := strings.LastIndexByte(key[:i], ':')
	if j <= 0 {
		return SharePartition{}, bad
	}
	var id controller.TopicID
	if err := id.UnmarshalText([]byte(key[j+1 : i])); err != nil || id.IsZero() {
		return SharePartition{}, bad
	}
	return SharePartition{Group: key[:j], TopicID: id, Partition: int32(p)}, nil
}

func (sp SharePartition) key(slot int32) share.Key {
	return share.Key{Group: sp.Group, TopicID: sp.TopicID, Partition: sp.Partition, Slot: slot}
}

// Config holds the coordinator's settings; zero values mean Kafka's defaults.
type Config struct {
	// StatePartitions is the partition count __share_group_state is created with; an existing topic
	// keeps its own.
	StatePartitions int32
	// StateReplicationFactor is the replication factor it is created with, capped at the live brokers
	// by coordshard.Replication.
	StateReplicationFactor int16
}

// Options are what a Coordinator is built from.
type Options struct {
	// NodeID is this node: it coordinates the share-partitions of the partitions it leads.
	NodeID   int32
	Metadata coordshard.MetadataStore
	Replicas coordshard.Replicas
	Clock    Clock
	Config   Config
	// Logger is slog.Default() when nil.
	Logger *slog.Logger
}

// Coordinator is the share-state coordinator of one node.
type Coordinator struct {
	clock Clock
	log   *slog.Logger
	topic *coordshard.Topic[*shard]
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
	}
	cfg := opts.Config
	if cfg.StatePartitions <= 0 {
		cfg.StatePartitions = DefaultStatePartitions
	}
	if cfg.StateReplicationFactor <= 0 {
		cfg.StateReplicationFactor = DefaultStateReplicationFactor
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	c := &Coordinator{clock: opts.Clock, log: log}
	c.topic = coordshard.NewTopic(coordshard.TopicConfig[*shard]{
		Name: StateTopic, Partitions: cfg.StatePartitions, ReplicationFactor: cfg.StateReplicationFactor,
		NodeID: opts.NodeID, Metadata: opts.Metadata, Replicas: opts.Replicas,
		NewShard:    func(p int32, r *partition.Replica) *shard { return c.newShard(p, r) },
		Unavailable: ErrCoordinatorNotAvailable, Logger: log,
	})
	return c, nil
}

// Locate returns the __share_group_state partition that holds sp's state, creating the topic
// (compacted, internal) on first use.
func (c *Coordinator) Locate(ctx context.Context, sp SharePartition) (int32, error) {
	n, err := c.topic.Ensure(ctx)
	if err != nil {
		return 0, err
	}
	return group.PartitionFor(sp.String(), n), nil
}

// Reconcile makes the shards match img (the caller reconciles the replicas with img first): a
// partition newly led starts loading; one no longer led stops, its waiting writes answered with
// ErrNotCoordinator. The state of every share-partition of a topic that the image before img had and
// img has not (a topic deleted) is removed as Delete removes it, on every loaded shard.
func (c *Coordinator) Reconcile(img *controller.Image) {
	c.topic.Reconcile(img)
	if gone := c.deletions.Next(img); len(gone) > 0 {
		for _, s := range c.topic.Shards() {
			s.Submit(func(stopped bool) {
				if !stopped && s.Leads() && s.Loaded() {
					s.removeTopics(gone)
				}
			})
		}
	}
}

// Close stops every shard and waits for them.
func (c *Coordinator) Close() { c.topic.Close() }

// Write appends r, a record of sp's partition leader, and returns once it is committed. A record that
// cannot follow sp's state (share.ErrFencedLeaderEpoch for a deposed leader's, share.ErrStaleRecord,
// share.ErrCorruptRecord) is refused and never appended, and so is any record while an admin's reset
// fences sp (ErrStateReset).
func (c *Coordinator) Write(ctx context.Context, sp SharePartition, r share.Record) error {
	_, err := call(ctx, c, sp, func(s *shard, reply func(struct{}, error)) {
		if st := s.states[sp]; st != nil && st.reset {
			reply(struct{}{}, fmt.Errorf("%w: %s", ErrStateReset, sp))
			return
		}
		s.write(sp, r, reply)
	})
	return err
}

// Create writes r, the first snapshot of a leader that read no state for sp, only if sp still has
// none; ErrStateExists otherwise, with nothing appended. A leader whose read found no state is not
// fenced in by it (there is nothing to write the fence from), so another leader may have written
// since: Create keeps the first leader's acknowledgements from being erased by the second's start.
func (c *Coordinator) Create(ctx context.Context, sp SharePartition, r share.Record) error {
	_, err := call(ctx, c, sp, func(s *shard, reply func(struct{}, error)) {
		if st := s.states[sp]; st != nil && st.appended.Loaded() {
			reply(struct{}{}, fmt.Errorf("%w: %s", ErrStateExists, sp))
			return
		}
		s.write(sp, r, reply)
	})
	return err
}

// Read returns sp's state to its leader at leaderEpoch, a copy the caller owns (share.Restore turns it
// into the share-partition), once that leader is fenced in: it first writes, at leaderEpoch, a snapshot
// of every record appended for sp (those still waiting for their commit included), and answers once
// that snapshot is committed. From the snapshot's append on, writes of older leaders are refused, here
// and at any coordinator that loads the partition later, so no write of a deposed leader can be
// committed, and answered as durable, after the state it read was taken (docs/queues.md, "State
// across nodes"). share.ErrFencedLeaderEpoch for a leader older than the state's; ErrNoState when sp
// has none.
func (c *Coordinator) Read(ctx context.Context, sp SharePartition, leaderEpoch int32) (*share.Durable, error) {
	return call(ctx, c, sp, func(s *shard, reply func(*share.Durable, error)) { s.read(sp, leaderEpoch, reply) })
}

type result[T any] struct {
	v   T
	err error
}

// call runs fn on sp's shard once loaded and waits for the answer it sends.
func call[T any](ctx context.Context, c *Coordinator, sp SharePartition, fn func(s *shard, reply func(T, error))) (T, error) {
	var zero T
	n, ok := c.topic.Partitions()
	if !ok {
		return zero, ErrNotCoordinator
	}
	s, ok := c.topic.Shard(group.PartitionFor(sp.String(), n))
	if !ok {
		return zero, ErrNotCoordinator
	}
	ch := make(chan result[T], 1)
	reply := func(v T, err error) { ch <- result[T]{v, err} }
	if !s.Submit(func(stopped bool) {
		switch {
		case stopped || !s.Leads():
			reply(zero, ErrNotCoordinator)
		case !s.Loaded():
			reply(zero, ErrLoadInProgress)
		default:
			fn(s, reply)
		}
	}) {
		return zero, ErrNotCoordinator
	}
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}
