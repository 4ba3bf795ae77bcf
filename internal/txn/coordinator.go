package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weir-mq/weir/internal/controller"
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
	// loadReadBytes is how much of the partition one load step reads.
	loadReadBytes = 1 << 20
	// openWait bounds how long the creation of the topic waits for this node to open its replicas.
	openWait = 2 * time.Second
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
type MetadataStore interface {
	Image() *controller.Image
	CreateTopicSpec(ctx context.Context, spec controller.TopicSpec, validateOnly bool) (*controller.Topic, error)
}

// Replicas is what the coordinator needs from the node's partition replicas (*partition.Manager).
type Replicas interface {
	Replica(topic string, partition int32) (*partition.Replica, bool)
	Submit(img *controller.Image)
	WaitReconciled(ctx context.Context, version int64) error
}

// Log is one partition of __transaction_state as the coordinator uses it; *partition.Replica is one.
// Append waits, through its wait function, until the batch is committed (acks=all).
type Log interface {
	Append(batch []byte) (partition.Appended, func(context.Context) error, error)
	Read(offset int64, maxBytes int, committedOnly bool) (partition.ReadResult, error)
	LogStartOffset() int64
	LogEndOffset() int64
	HighWatermark() int64
	LeaderEpoch() int32
	IsLeader() bool
	// Watch signals ch (without blocking) when the high watermark moves or the role changes.
	Watch(ch chan<- struct{}) (stop func())
}

// Config holds the coordinator's settings; zero values mean Kafka's defaults.
type Config struct {
	// StatePartitions is the partition count __transaction_state is created with
	// (transaction.state.log.num.partitions). An existing topic keeps its own count.
	StatePartitions int32
	// StateReplicationFactor is the replication factor it is created with
	// (transaction.state.log.replication.factor), capped at the live brokers as
	// group.OffsetsReplication caps it; min.insync.replicas follows from it the same way.
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
	nodeID   int32
	meta     MetadataStore
	replicas Replicas
	clock    Clock
	markers  MarkerWriter
	pids     func(ctx context.Context) (int64, error)
	cfg      Config
	log      *slog.Logger

	mu       sync.Mutex
	creating chan struct{}
	shards   map[int32]*shard
	closed   bool
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
	return &Coordinator{
		nodeID: opts.NodeID, meta: opts.Metadata, replicas: opts.Replicas, clock: opts.Clock,
		markers: opts.Markers, pids: opts.ProducerIDs, cfg: cfg, log: log, shards: map[int32]*shard{},
	}, nil
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
	n, err := c.ensureTopic(ctx)
	if err != nil {
		return 0, err
	}
	return group.PartitionFor(id, n), nil
}

// ensureTopic creates the topic if it is missing and returns its partition count. One request at a
// time creates it; the others wait for that one (or their ctx) and look again.
func (c *Coordinator) ensureTopic(ctx context.Context) (int32, error) {
	for {
		if t, ok := c.meta.Image().Topic(StateTopic); ok {
			return t.Partitions, nil
		}
		c.mu.Lock()
		creating := c.creating
		if creating == nil {
			c.creating = make(chan struct{})
		}
		c.mu.Unlock()
		if creating == nil {
			break
		}
		select {
		case <-creating:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	defer func() {
		c.mu.Lock()
		close(c.creating)
		c.creating = nil
		c.mu.Unlock()
	}()
	return c.createTopic(ctx)
}

// createTopic proposes the topic, then hands the image to the node's reconciler and waits, up to
// openWait, for the pass that opens its replicas, so that the coordinator leads its partitions when the
// client's next request comes.
func (c *Coordinator) createTopic(ctx context.Context) (int32, error) {
	cur := c.meta.Image()
	if t, ok := cur.Topic(StateTopic); ok {
		return t.Partitions, nil
	}
	rf, minISR := group.OffsetsReplication(c.cfg.StateReplicationFactor, len(cur.LiveBrokers()))
	t, err := c.meta.CreateTopicSpec(ctx, controller.TopicSpec{
		Name: StateTopic, Partitions: c.cfg.StatePartitions, ReplicationFactor: rf, Internal: true,
		Configs: map[string]string{
			controller.ConfigCleanupPolicy:     "compact",
			controller.ConfigMinInsyncReplicas: strconv.Itoa(minISR),
		},
	}, false)
	if errors.Is(err, controller.ErrTopicExists) {
		if t, ok := c.meta.Image().Topic(StateTopic); ok {
			return t.Partitions, nil
		}
		return 0, fmt.Errorf("%w: %s is being created", ErrCoordinatorNotAvailable, StateTopic)
	}
	if err != nil {
		return 0, fmt.Errorf("txn: create %s: %w", StateTopic, err)
	}
	c.log.Info("txn: created the transaction state topic", "topic", StateTopic, "partitions", t.Partitions,
		"replication_factor", rf, "min_insync_replicas", minISR)
	img := c.meta.Image()
	c.replicas.Submit(img)
	wctx, cancel := context.WithTimeout(ctx, openWait)
	defer cancel()
	// The wait only makes the client's next request likely to find its coordinator loading; the node's
	// metadata subscription reconciles the shards again in any case.
	_ = c.replicas.WaitReconciled(wctx, img.Version)
	c.Reconcile(img)
	return t.Partitions, nil
}

// Reconcile makes the shards match img: this node coordinates exactly the partitions of
// __transaction_state that img says it leads and whose hosted replica leads in img's leader epoch (the
// caller reconciles the replicas with img first). A partition newly led (or led in a new leader epoch)
// starts loading; one no longer led is unloaded, its waiting requests answered with ErrNotCoordinator.
func (c *Coordinator) Reconcile(img *controller.Image) {
	want := map[int32]Log{}
	if t, ok := img.Topic(StateTopic); ok {
		for p := range t.Partitions {
			st, ok := t.Partition(p)
			if !ok || st.Leader != c.nodeID {
				continue
			}
			if r, ok := c.replicas.Replica(StateTopic, p); ok && r.IsLeader() && r.LeaderEpoch() == st.LeaderEpoch {
				want[p] = r
			}
		}
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	var stop []*shard
	for p, s := range c.shards {
		if l, ok := want[p]; !ok || l != s.log || l.LeaderEpoch() != s.epoch {
			stop = append(stop, s)
			delete(c.shards, p)
		}
	}
	for p, l := range want {
		if _, ok := c.shards[p]; ok {
			continue
		}
		s := c.newShard(p, l)
		c.shards[p] = s
		go s.run()
	}
	c.mu.Unlock()
	for _, s := range stop {
		s.close()
	}
}

// Close unloads every id, answering waiting requests with ErrNotCoordinator, stops the markers being
// written and waits for the shards. Later requests get ErrNotCoordinator.
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.closed = true
	shards := c.shards
	c.shards = map[int32]*shard{}
	c.mu.Unlock()
	for _, s := range shards {
		s.close()
	}
}

func (c *Coordinator) shardFor(id string) (*shard, error) {
	t, ok := c.meta.Image().Topic(StateTopic)
	if !ok {
		return nil, ErrNotCoordinator
	}
	p := group.PartitionFor(id, t.Partitions)
	c.mu.Lock()
	s := c.shards[p]
	c.mu.Unlock()
	if s == nil {
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
	ok := s.submit(func(stopped bool) {
		switch {
		case stopped || !s.leads():
			reply(zero, ErrNotCoordinator)
		case !s.loaded:
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
	c.mu.Lock()
	shards := make([]*shard, 0, len(c.shards))
	for _, s := range c.shards {
		shards = append(shards, s)
	}
	c.mu.Unlock()
	var all []Description
	for _, s := range shards {
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
