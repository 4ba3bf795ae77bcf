package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/coordshard"
	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/partition"
)

// StateTopic is the internal topic that holds the transactional ids.
const StateTopic = "__transaction_state"

// Defaults of the coordinator's settings, Kafka's.
const (
	// DefaultStatePartitions is transaction.state.log.num.partitions.
	DefaultStatePartitions = 50
	// DefaultStateReplicationFactor is transaction.state.log.replication.factor.
	DefaultStateReplicationFactor = 3
	// DefaultTimeoutMax is transaction.max.timeout.ms (15 minutes).
	DefaultTimeoutMax = 15 * time.Minute
	// DefaultIDExpiration is transactional.id.expiration.ms (7 days).
	DefaultIDExpiration = 7 * 24 * time.Hour
	// DefaultAbortInterval is transaction.abort.timed.out.transaction.cleanup.interval.ms.
	DefaultAbortInterval = 10 * time.Second
	// markerBackoffMin and markerBackoffMax bound the wait before the markers of a transaction are
	// written again to the partitions that failed.
	markerBackoffMin = 100 * time.Millisecond
	markerBackoffMax = time.Second
)

// Clock is the coordinator's time source: the sweep timer and the markers' back-off are armed with
// After.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// MetadataStore is what the coordinator needs from the cluster metadata store.
type MetadataStore = coordshard.MetadataStore

// Replicas is what the coordinator needs from the node's partition replicas (*partition.Manager).
type Replicas = coordshard.Replicas

// Log is one partition of __transaction_state as the coordinator uses it; *partition.Replica is one.
// Append waits, through its wait function, until the batch is committed (acks=all).
type Log interface {
	// Log is what the shard's Owner reads the partition back with.
	coordshard.Log
	Append(batch []byte) (partition.Appended, func(context.Context) error, error)
}

// Config holds the coordinator's settings; zero values mean Kafka's defaults.
type Config struct {
	// StatePartitions is the partition count __transaction_state is created with
	// (transaction.state.log.num.partitions). An existing topic keeps its own count.
	StatePartitions int32
	// StateReplicationFactor is the replication factor it is created with
	// (transaction.state.log.replication.factor), capped at the live brokers by
	// coordshard.Replication, which also gives its min.insync.replicas.
	StateReplicationFactor int16
	// TimeoutMax bounds the transaction timeout a producer may ask for (transaction.max.timeout.ms).
	TimeoutMax time.Duration
	// IDExpiration is how long an id idle in Empty or Complete* is kept
	// (transactional.id.expiration.ms).
	IDExpiration time.Duration
	// AbortInterval is how often transactions past their timeout are aborted and expired ids removed
	// (transaction.abort.timed.out.transaction.cleanup.interval.ms).
	AbortInterval time.Duration
}

// Options are what a Coordinator is built from.
type Options struct {
	// NodeID is this node: it coordinates the ids of the __transaction_state partitions it leads.
	NodeID   int32
	Metadata MetadataStore
	Replicas Replicas
	Clock    Clock
	// Markers writes the transactions' markers to their partitions.
	Markers MarkerWriter
	// ProducerIDs hands out fresh producer ids, never the same twice.
	ProducerIDs func(ctx context.Context) (int64, error)
	Config      Config
	// Logger is slog.Default() when nil.
	Logger *slog.Logger
}

// Coordinator is the transaction coordinator of one node: for every partition of __transaction_state
// that this node leads, one owner goroutine (a shard) loads the partition's transactional ids and then
// drives their state machines; requests for ids of other partitions get ErrNotCoordinator.
type Coordinator struct {
	clock   Clock
	markers MarkerWriter
	pids    func(ctx context.Context) (int64, error)
	cfg     Config
	log     *slog.Logger
	// topic is __transaction_state and the shards over it.
	topic *coordshard.Topic[*shard]
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
	case opts.Markers == nil:
		return nil, fmt.Errorf("%w: Markers", ErrMissingOption)
	case opts.ProducerIDs == nil:
		return nil, fmt.Errorf("%w: ProducerIDs", ErrMissingOption)
	}
	cfg := opts.Config
	if cfg.StatePartitions <= 0 {
		cfg.StatePartitions = DefaultStatePartitions
	}
	if cfg.StateReplicationFactor <= 0 {
		cfg.StateReplicationFactor = DefaultStateReplicationFactor
	}
	if cfg.TimeoutMax <= 0 {
		cfg.TimeoutMax = DefaultTimeoutMax
	}
	if cfg.IDExpiration <= 0 {
		cfg.IDExpiration = DefaultIDExpiration
	}
	if cfg.AbortInterval <= 0 {
		cfg.AbortInterval = DefaultAbortInterval
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	c := &Coordinator{clock: opts.Clock, markers: opts.Markers, pids: opts.ProducerIDs, cfg: cfg, log: log}
	c.topic = coordshard.NewTopic(coordshard.TopicConfig[*shard]{
		Name: StateTopic, Partitions: cfg.StatePartitions, ReplicationFactor: cfg.StateReplicationFactor,
		NodeID: opts.NodeID, Metadata: opts.Metadata, Replicas: opts.Replicas,
		NewShard:    func(p int32, r *partition.Replica) *shard { return c.newShard(p, r) },
		Unavailable: ErrCoordinatorNotAvailable, Logger: log,
	})
	return c, nil
}

// checkID refuses an empty id and one no key can hold.
func checkID(id string) error {
	if id == "" || len(id) > IDBytesMax {
		return fmt.Errorf("%w: %d bytes", ErrInvalidTransactionalID, len(id))
	}
	return nil
}

// Locate returns the __transaction_state partition that coordinates id, creating the topic
// (compacted, internal) on first use. The caller answers FindCoordinator with that partition's leader.
// An empty id, or one too long for a key, is ErrInvalidTransactionalID.
func (c *Coordinator) Locate(ctx context.Context, id string) (int32, error) {
	if err := checkID(id); err != nil {
		return 0, err
	}
	n, err := c.topic.Ensure(ctx)
	if err != nil {
		return 0, err
	}
	return group.PartitionFor(id, n), nil
}

// Reconcile makes the shards match img: this node coordinates exactly the partitions of
// __transaction_state that img says it leads and whose hosted replica leads in img's leader epoch (the
// caller reconciles the replicas with img first). A partition newly led (or led in a new leader epoch)
// starts loading; one no longer led is unloaded, its waiting requests answered with ErrNotCoordinator.
func (c *Coordinator) Reconcile(img *controller.Image) {
	c.topic.Reconcile(img)
}

// Close unloads every id, answering waiting requests with ErrNotCoordinator, stops the markers being
// written and waits for the shards. Later requests get ErrNotCoordinator.
func (c *Coordinator) Close() {
	c.topic.Close()
}

func (c *Coordinator) shardFor(id string) (*shard, error) {
	n, ok := c.topic.Partitions()
	if !ok {
		return nil, ErrNotCoordinator
	}
	s, ok := c.topic.Shard(group.PartitionFor(id, n))
	if !ok {
		return nil, ErrNotCoordinator
	}
	return s, nil
}

type result[T any] struct {
	v   T
	err error
}

// call runs fn on id's shard once loaded and waits for the answer it sends.
func call[T any](ctx context.Context, c *Coordinator, id string, fn func(s *shard, reply func(T, error))) (T, error) {
	var zero T
	if err := checkID(id); err != nil {
		return zero, err
	}
	s, err := c.shardFor(id)
	if err != nil {
		return zero, err
	}
	return callShard(ctx, s, fn)
}

func callShard[T any](ctx context.Context, s *shard, fn func(s *shard, reply func(T, error))) (T, error) {
	var zero T
	ch := make(chan result[T], 1)
	reply := func(v T, err error) { ch <- result[T]{v, err} }
	ok := s.Submit(func(stopped bool) {
		switch {
		case stopped || !s.Leads():
			reply(zero, ErrNotCoordinator)
		case !s.Loaded():
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

// ProducerIDEpoch is a producer id and epoch.
type ProducerIDEpoch struct {
	ProducerID    int64
	ProducerEpoch int16
}

// InitProducerID handles InitProducerId with a transactional id: the id's producer id and bumped
// epoch once its record is committed. current is the producer's (v3+, KIP-360), or NoProducerID and -1.
func (c *Coordinator) InitProducerID(ctx context.Context, id string, timeout time.Duration, current ProducerIDEpoch) (ProducerIDEpoch, error) {
	if timeout <= 0 || timeout > c.cfg.TimeoutMax {
		return ProducerIDEpoch{}, fmt.Errorf("%w: %v, at most %v", ErrInvalidTransactionTimeout, timeout, c.cfg.TimeoutMax)
	}
	req := InitRequest{Timeout: timeout, ProducerID: current.ProducerID, ProducerEpoch: current.ProducerEpoch, NewProducerID: NoProducerID}
	for {
		r, err := call(ctx, c, id, func(s *shard, reply func(ProducerIDEpoch, error)) { s.initProducerID(id, req, reply) })
		if !errors.Is(err, ErrProducerIDNeeded) || req.NewProducerID != NoProducerID {
			return r, err
		}
		if req.NewProducerID, err = c.pids(ctx); err != nil {
			return ProducerIDEpoch{}, fmt.Errorf("%w: producer id: %w", ErrCoordinatorNotAvailable, err)
		}
	}
}

// AddPartitions handles AddPartitionsToTxn once the caller has checked that every partition exists,
// and AddOffsetsToTxn with the group's __consumer_offsets partition; it answers once the transaction's
// record is committed.
func (c *Coordinator) AddPartitions(ctx context.Context, id string, p ProducerIDEpoch, parts []TopicPartition) error {
	_, err := call(ctx, c, id, func(s *shard, reply func(struct{}, error)) { s.addPartitions(id, p, parts, reply) })
	return err
}

// EndTxn handles EndTxn: it answers once PrepareCommit or PrepareAbort is committed, and the shard
// writes the markers after.
func (c *Coordinator) EndTxn(ctx context.Context, id string, p ProducerIDEpoch, commit bool) error {
	_, err := call(ctx, c, id, func(s *shard, reply func(struct{}, error)) { s.endTxn(id, p, commit, reply) })
	return err
}

// Description is one transactional id as DescribeTransactions and ListTransactions report it.
type Description struct {
	Metadata
	// State is the id's state as Txn.State reports it.
	State State
}

// Describe reports id; ErrTransactionalIDNotFound when the coordinator does not know it.
func (c *Coordinator) Describe(ctx context.Context, id string) (Description, error) {
	return call(ctx, c, id, func(s *shard, reply func(Description, error)) {
		t := s.txns[id]
		if t == nil || !t.Exists() {
			reply(Description{}, ErrTransactionalIDNotFound)
			return
		}
		reply(Description{Metadata: t.Metadata(), State: t.State()}, nil)
	})
}

// List returns every id this node coordinates, sorted; ErrLoadInProgress while a partition still
// loads.
func (c *Coordinator) List(ctx context.Context) ([]Description, error) {
	var all []Description
	for _, s := range c.topic.Shards() {
		ds, err := callShard(ctx, s, func(s *shard, reply func([]Description, error)) {
			var out []Description
			for _, t := range s.txns {
				if t.Exists() {
					out = append(out, Description{Metadata: t.Metadata(), State: t.State()})
				}
			}
			reply(out, nil)
		})
		if errors.Is(err, ErrNotCoordinator) {
			continue
		}
		if err != nil {
			return nil, err
		}
		all = append(all, ds...)
	}
	slices.SortFunc(all, func(a, b Description) int { return strings.Compare(a.ID, b.ID) })
	return all, nil
}
