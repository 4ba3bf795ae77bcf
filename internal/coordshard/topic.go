package coordshard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/partition"
)

// openWait bounds how long the creation of the topic waits for this node to open its replicas.
const openWait = 2 * time.Second

// MetadataStore is what a Topic needs from the cluster metadata store.
type MetadataStore interface {
	Image() *controller.Image
	CreateTopicSpec(ctx context.Context, spec controller.TopicSpec, validateOnly bool) (*controller.Topic, error)
}

// Replicas is what a Topic needs from the node's partition replicas (*partition.Manager): the hosted
// replicas, and its reconciler, which alone opens them, to hand an image to and wait for.
type Replicas interface {
	Replica(topic string, partition int32) (*partition.Replica, bool)
	Submit(img *controller.Image)
	WaitReconciled(ctx context.Context, version int64) error
}

// Shard is a coordinator's shard of one partition: a type that embeds *Owner.
type Shard interface {
	owner() *Owner
}

// TopicConfig describes an internal topic and the shards a node runs over it.
type TopicConfig[S Shard] struct {
	// Name is the topic's name.
	Name string
	// Partitions is the partition count the topic is created with; an existing topic keeps its own.
	Partitions int32
	// ReplicationFactor is the replication factor asked for at creation, capped by Replication.
	ReplicationFactor int16
	// NodeID is this node: it runs a shard for each partition it leads.
	NodeID   int32
	Metadata MetadataStore
	Replicas Replicas
	// NewShard returns the shard of partition p over r, which leads it; Reconcile calls it one call
	// at a time and then runs the shard's Owner.
	NewShard func(p int32, r *partition.Replica) S
	// Unavailable is the error Ensure wraps when another node has just created the topic and this
	// node's image does not have it yet: the client retries.
	Unavailable error
	Logger      *slog.Logger
}

// Topic is an internal, compacted topic that a coordinator keeps its records in, and this node's shards
// over it: one per partition the node leads, started and stopped by Reconcile.
type Topic[S Shard] struct {
	cfg TopicConfig[S]

	mu sync.Mutex
	// creating, while this node creates the topic, is closed once the creation and the wait for its
	// replicas have ended: other requests wait for it instead of proposing the topic too.
	creating chan struct{}
	shards   map[int32]S
	closed   bool
}

// NewTopic returns the topic described by cfg, with no shard yet.
func NewTopic[S Shard](cfg TopicConfig[S]) *Topic[S] {
	return &Topic[S]{cfg: cfg, shards: map[int32]S{}}
}

// Replication is the replication factor and min.insync.replicas an internal topic is created with when
// want replicas are asked for and live brokers are unfenced: the replication factor is want capped at
// live (Kafka refuses to create the topic instead; weir caps it so that a single node, or a cluster
// still smaller than the setting, serves groups and transactions), and min.insync.replicas is 2 from
// three replicas up (a write then survives the loss of any one broker while one broker may be down),
// else 1.
func Replication(want int16, live int) (rf int16, minISR int) {
	rf = max(min(want, int16(min(live, math.MaxInt16))), 1)
	minISR = 1
	if rf >= 3 {
		minISR = 2
	}
	return rf, minISR
}

// Ensure creates the topic if it is missing and returns its partition count. One request at a time
// creates it; the others wait for that one (or their ctx) and look again.
func (t *Topic[S]) Ensure(ctx context.Context) (int32, error) {
	for {
		if n, ok := t.Partitions(); ok {
			return n, nil
		}
		t.mu.Lock()
		creating := t.creating
		if creating == nil {
			t.creating = make(chan struct{})
		}
		t.mu.Unlock()
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
		t.mu.Lock()
		close(t.creating)
		t.creating = nil
		t.mu.Unlock()
	}()
	return t.create(ctx)
}

// Partitions is the topic's partition count in the current image; false while it does not exist.
func (t *Topic[S]) Partitions() (int32, bool) {
	tp, ok := t.cfg.Metadata.Image().Topic(t.cfg.Name)
	if !ok {
		return 0, false
	}
	return tp.Partitions, true
}

// create proposes the topic, then hands the image to the node's reconciler and waits, up to openWait,
// for the pass that opens its replicas, so that this node leads its partitions of the topic when the
// client's next request comes (else the client retries).
func (t *Topic[S]) create(ctx context.Context) (int32, error) {
	cur := t.cfg.Metadata.Image()
	if tp, ok := cur.Topic(t.cfg.Name); ok {
		return tp.Partitions, nil
	}
	rf, minISR := Replication(t.cfg.ReplicationFactor, len(cur.LiveBrokers()))
	created, err := t.cfg.Metadata.CreateTopicSpec(ctx, controller.TopicSpec{
		Name: t.cfg.Name, Partitions: t.cfg.Partitions, ReplicationFactor: rf, Internal: true,
		Configs: map[string]string{
			controller.ConfigCleanupPolicy:     "compact",
			controller.ConfigMinInsyncReplicas: strconv.Itoa(minISR),
		},
	}, false)
	if errors.Is(err, controller.ErrTopicExists) {
		if n, ok := t.Partitions(); ok {
			return n, nil
		}
		// Another node created it and this node's image has not caught up yet: the client retries.
		return 0, fmt.Errorf("%w: %s is being created", t.cfg.Unavailable, t.cfg.Name)
	}
	if err != nil {
		return 0, fmt.Errorf("coordshard: create %s: %w", t.cfg.Name, err)
	}
	t.cfg.Logger.Info("coordshard: created an internal topic", "topic", t.cfg.Name, "partitions", created.Partitions,
		"replication_factor", rf, "min_insync_replicas", minISR)
	img := t.cfg.Metadata.Image()
	t.cfg.Replicas.Submit(img)
	wctx, cancel := context.WithTimeout(ctx, openWait)
	defer cancel()
	// The wait only makes the client's next request likely to find its coordinator loading; a pass that
	// fails is logged by the reconciler, and the node's metadata subscription reconciles the shards again.
	_ = t.cfg.Replicas.WaitReconciled(wctx, img.Version)
	t.Reconcile(img)
	return created.Partitions, nil
}

// Reconcile makes the shards match img: this node runs a shard for exactly the partitions of the topic
// that img says it leads and whose hosted replica leads in img's leader epoch (the caller reconciles the
// replicas with img first). A partition newly led (or led in a new leader epoch) gets a new shard,
// which starts loading; the shard of one no longer led is closed. Reconcile never blocks on a load or on
// replication: a closed shard's writes in flight end with it (Owner.Close), because its caller is the
// node's image goroutine, and a shard can stop while its replica still leads in img (the broker's lease
// lapsed) with a write that only a later image would end.
func (t *Topic[S]) Reconcile(img *controller.Image) {
	want := map[int32]*partition.Replica{}
	if tp, ok := img.Topic(t.cfg.Name); ok {
		for p := range tp.Partitions {
			st, ok := tp.Partition(p)
			if !ok || st.Leader != t.cfg.NodeID {
				continue
			}
			if r, ok := t.cfg.Replicas.Replica(t.cfg.Name, p); ok && r.IsLeader() && r.LeaderEpoch() == st.LeaderEpoch {
				want[p] = r
			}
		}
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	var stop []S
	for p, s := range t.shards {
		o := s.owner()
		if r, ok := want[p]; !ok || o.log != Log(r) || r.LeaderEpoch() != o.epoch {
			stop = append(stop, s)
			delete(t.shards, p)
		}
	}
	for p, r := range want {
		if _, ok := t.shards[p]; ok {
			continue
		}
		s := t.cfg.NewShard(p, r)
		t.shards[p] = s
		go s.owner().Run()
	}
	t.mu.Unlock()
	for _, s := range stop {
		s.owner().Close()
	}
}

// Shard returns the shard of partition p; false when this node runs none for it.
func (t *Topic[S]) Shard(p int32) (S, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.shards[p]
	return s, ok
}

// Shards returns every shard this node runs.
func (t *Topic[S]) Shards() []S {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]S, 0, len(t.shards))
	for _, s := range t.shards {
		out = append(out, s)
	}
	return out
}

// Close closes every shard and waits for them; Reconcile starts none after.
func (t *Topic[S]) Close() {
	t.mu.Lock()
	t.closed = true
	shards := t.shards
	t.shards = map[int32]S{}
	t.mu.Unlock()
	for _, s := range shards {
		s.owner().Close()
	}
}
