package controller

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-mq/weir/internal/vfs"
)

// Clock tells the Store the time it stamps into commands.
type Clock interface {
	Now() time.Time
}

const (
	metadataFile    = "metadata.json"
	metadataTmpFile = "metadata.json.tmp"
	metadataFormat  = 1
	// maxMetadataBytes bounds what OpenLocal reads, so a damaged size cannot exhaust memory.
	maxMetadataBytes = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Store is the single-node metadata store: it applies commands one at a time, writes the resulting
// image to its file before publishing it, and notifies subscribers. Reads (Image) never block.
type Store struct {
	fs    vfs.FS
	dir   string
	clock Clock
	rand  io.Reader

	img atomic.Pointer[Image]
	// turn serializes commands: held from Apply until the image is durable and published. It is a
	// channel so that a waiting caller can give up when its context ends.
	turn   chan struct{}
	closed atomic.Bool
	// failed is the error of a failed write of the metadata file; guarded by turn.
	failed error

	subMu   sync.Mutex
	subs    map[int]chan struct{}
	nextSub int

	// node is set for a Store opened by OpenRaft: commands then go through the quorum.
	node *raftNode
}

// OpenLocal opens (or formats) the metadata kept in dir, the node's controller directory
// (<data-dir>/controller), and registers self as the one broker and the controller. IDs (cluster id,
// topic ids) are drawn from crypto/rand; timestamps come from clock.
func OpenLocal(fsys vfs.FS, dir string, self Broker, clock Clock) (*Store, error) {
	s := &Store{
		fs:    fsys,
		dir:   dir,
		clock: clock,
		rand:  rand.Reader,
		turn:  make(chan struct{}, 1),
		subs:  map[int]chan struct{}{},
	}
	if err := vfs.MkdirAllDurable(fsys, dir); err != nil {
		return nil, fmt.Errorf("controller: create %s: %w", dir, err)
	}
	if err := fsys.Remove(filepath.Join(dir, metadataTmpFile)); err != nil && !vfs.IsNotExist(err) {
		return nil, fmt.Errorf("controller: remove stale temp file: %w", err)
	}
	img, err := s.load()
	if err != nil {
		return nil, err
	}
	if img == nil {
		cid, err := s.newID()
		if err != nil {
			return nil, err
		}
		img = NewImage(cid.String(), self.NodeID)
	}
	if b, ok := img.Broker(self.NodeID); !ok || !sameAddress(b, self) || b.Fenced || img.ControllerID != self.NodeID {
		img.ControllerID = self.NodeID
		if img, err = Apply(img, RegisterBroker{Broker: self}); err != nil {
			return nil, err
		}
		if err := s.persist(img); err != nil {
			return nil, err
		}
	}
	s.img.Store(img)
	return s, nil
}

// sameAddress reports whether a and b name the same node at the same address and rack.
func sameAddress(a, b Broker) bool {
	return a.NodeID == b.NodeID && a.Host == b.Host && a.Port == b.Port && a.Rack == b.Rack
}

// Image returns the current image. It never blocks; the result must not be modified.
func (s *Store) Image() *Image { return s.img.Load() }

// Subscribe returns a channel that receives a value after every published change (coalesced: one
// pending value at most) and a function that ends the subscription.
func (s *Store) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	s.subMu.Lock()
	id := s.nextSub
	s.nextSub++
	s.subs[id] = ch
	s.subMu.Unlock()
	return ch, func() {
		s.subMu.Lock()
		delete(s.subs, id)
		s.subMu.Unlock()
	}
}

// Close makes later commands fail with ErrClosed and, for a Raft store, stops the node's loops,
// Raft and its listener. Images already returned stay valid.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.node != nil {
		s.node.close()
	}
	return nil
}

// publish makes img the current image and notifies subscribers.
func (s *Store) publish(img *Image) {
	s.img.Store(img)
	s.notify()
}

// CreateTopic creates a client topic. partitions -1 means the default (num.partitions). With
// validateOnly the topic is checked, and returned as it would be, but not created. Replicas are
// placed by Place at default.replication.factor.
func (s *Store) CreateTopic(ctx context.Context, name string, partitions int32, configs map[string]string, validateOnly bool) (*Topic, error) {
	return s.CreateTopicSpec(ctx, TopicSpec{Name: name, Partitions: partitions, ReplicationFactor: -1, Configs: configs}, validateOnly)
}

// CreateInternalTopic creates one of weir's own topics (e.g. __consumer_offsets). It returns
// ErrTopicExists if it is already there.
func (s *Store) CreateInternalTopic(ctx context.Context, name string, partitions int32, configs map[string]string) (*Topic, error) {
	return s.CreateTopicSpec(ctx, TopicSpec{Name: name, Partitions: partitions, ReplicationFactor: -1, Configs: configs, Internal: true}, false)
}

// TopicSpec is a topic to create with CreateTopicSpec.
type TopicSpec struct {
	Name string
	// Partitions -1 means num.partitions.
	Partitions int32
	// ReplicationFactor -1 means default.replication.factor; ignored when Replicas is set.
	ReplicationFactor int16
	// Replicas is an explicit assignment, one replica list per partition; nil lets Place choose.
	Replicas [][]int32
	Configs  map[string]string
	Internal bool
}

// CreateTopicSpec creates a topic with a replication factor or an explicit assignment. The
// placement is chosen here, on the proposer's image, and travels in the command.
func (s *Store) CreateTopicSpec(ctx context.Context, spec TopicSpec, validateOnly bool) (*Topic, error) {
	id, err := s.newID()
	if err != nil {
		return nil, err
	}
	build := func(cur *Image) Command {
		c := CreateTopic{
			Name: spec.Name, ID: id, Partitions: spec.Partitions, Configs: spec.Configs,
			Internal: spec.Internal, CreatedMs: s.clock.Now().UnixMilli(), ReplicationFactor: spec.ReplicationFactor,
			Replicas: spec.Replicas,
		}
		if c.Partitions == -1 {
			c.Partitions = cur.DefaultPartitions()
		}
		if c.Replicas == nil {
			rf := c.ReplicationFactor
			if rf <= 0 {
				rf = cur.DefaultReplicationFactor()
			}
			// A placement that fails leaves Replicas nil: Apply then reports the same error.
			c.Replicas, _ = Place(cur.Brokers, cur.LeaderCounts(), c.Partitions, rf, 0)
		}
		return c
	}
	if err := s.withinBudget(build); err != nil {
		return nil, err
	}
	if err := s.checkConfigs(build); err != nil {
		return nil, err
	}
	img, _, err := s.propose(ctx, build, validateOnly)
	if err != nil {
		return nil, err
	}
	return img.Topics[spec.Name], nil
}

// withinBudget dry-runs the command build makes on the current image and checks the result against the
// partition budget (CheckPartitionBudget), so that a creation too large for the cluster is refused before
// it is proposed. A command that does not apply is left to the proposal, which reports why.
func (s *Store) withinBudget(build func(*Image) Command) error {
	cur := s.Image()
	next, err := Apply(cur, build(cur))
	if err != nil {
		return nil
	}
	return CheckPartitionBudget(cur, next)
}

// DeleteTopic deletes a client topic; ErrInternalTopic for an internal one.
func (s *Store) DeleteTopic(ctx context.Context, name string) error {
	_, _, err := s.propose(ctx, func(*Image) Command { return DeleteTopic{Name: name} }, false)
	return err
}

// CreatePartitions grows a topic to total partitions, placing the new ones with Place.
func (s *Store) CreatePartitions(ctx context.Context, name string, total int32, validateOnly bool) error {
	build := func(cur *Image) Command {
		c := CreatePartitions{Name: name, Total: total}
		if t, ok := cur.Topic(name); ok && total > t.Partitions {
			rf := t.ReplicationFactor()
			// A placement that fails leaves Replicas nil: Apply then reports the same error.
			c.Replicas, _ = Place(cur.Brokers, cur.LeaderCounts(), total-t.Partitions, rf, t.Partitions)
		}
		return c
	}
	if err := s.withinBudget(build); err != nil {
		return err
	}
	_, _, err := s.propose(ctx, build, validateOnly)
	return err
}

// AlterPartition asks the controller to replace a partition's ISR (the partition leader's call);
// it returns the partition's new state, or ErrStaleEpoch when the epochs are not current.
func (s *Store) AlterPartition(ctx context.Context, req AlterPartition) (*PartitionState, error) {
	img, _, err := s.propose(ctx, func(*Image) Command { return req }, false)
	if err != nil {
		return nil, err
	}
	t, ok := img.Topic(req.Topic)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, req.Topic)
	}
	st, ok := t.Partition(req.Partition)
	if !ok {
		return nil, fmt.Errorf("%w: %s-%d", ErrUnknownPartition, req.Topic, req.Partition)
	}
	return st, nil
}

// ElectPreferredLeaders moves leadership back to each partition's preferred replica where it is
// live and in the ISR; nil partitions means all of them.
func (s *Store) ElectPreferredLeaders(ctx context.Context, partitions []TopicPartition) error {
	_, _, err := s.propose(ctx, func(*Image) Command { return ElectPreferredLeaders{Partitions: partitions} }, false)
	return err
}

// AlterConfigs sets and removes configs of a topic (IncrementalAlterConfigs semantics; for
// AlterConfigs, remove every key not in set).
func (s *Store) AlterConfigs(ctx context.Context, name string, set map[string]string, remove []string, validateOnly bool) error {
	return s.EditConfigs(ctx, name, set, remove, ListEdits{}, validateOnly)
}

// AlterBrokerConfigs sets and removes cluster-wide broker configs.
func (s *Store) AlterBrokerConfigs(ctx context.Context, set map[string]string, remove []string, validateOnly bool) error {
	return s.EditBrokerConfigs(ctx, set, remove, ListEdits{}, validateOnly)
}

// EditConfigs is AlterConfigs with list edits (IncrementalAlterConfigs' APPEND and SUBTRACT), applied to
// the topic's current values in the same command.
func (s *Store) EditConfigs(ctx context.Context, name string, set map[string]string, remove []string, edits ListEdits, validateOnly bool) error {
	build := func(*Image) Command {
		return AlterTopicConfigs{Name: name, Set: set, Remove: remove, ListEdits: edits}
	}
	if err := s.checkConfigs(build); err != nil {
		return err
	}
	_, _, err := s.propose(ctx, build, validateOnly)
	return err
}

// EditBrokerConfigs is AlterBrokerConfigs with list edits.
func (s *Store) EditBrokerConfigs(ctx context.Context, set map[string]string, remove []string, edits ListEdits, validateOnly bool) error {
	build := func(*Image) Command { return AlterBrokerConfigs{Set: set, Remove: remove, ListEdits: edits} }
	if err := s.checkConfigs(build); err != nil {
		return err
	}
	_, _, err := s.propose(ctx, build, validateOnly)
	return err
}

// checkConfigs dry-runs the command build makes on the current image and checks the rules between
// configs (CheckConfigRules) on the result, before anything is proposed. Apply does not check them, so
// a replayed log applies as it did when it was written.
func (s *Store) checkConfigs(build func(*Image) Command) error {
	cur := s.Image()
	next, err := Apply(cur, build(cur))
	if errors.Is(err, ErrUnknownTopic) {
		// This node's image may not have applied the topic's creation yet (a follower lags the
		// leader): the leader's Apply decides whether the topic exists.
		return nil
	}
	if err != nil {
		return err
	}
	return CheckConfigRules(cur, next)
}

// AllocateProducerIDs reserves n producer ids and returns the first; the block is durable before it
// is returned, so no id is handed out twice across restarts.
func (s *Store) AllocateProducerIDs(ctx context.Context, n int64) (int64, error) {
	_, first, err := s.propose(ctx, func(*Image) Command { return AllocateProducerIDs{N: n} }, false)
	if err != nil {
		return 0, err
	}
	return first, nil
}

// propose applies the command build makes from the current image and publishes the result: in the
// single-node store after writing it to the metadata file, in a Raft store once it is committed and
// applied on this node. It returns the resulting image and the NextProducerID of the image the
// command was applied to.
func (s *Store) propose(ctx context.Context, build func(*Image) Command, validateOnly bool) (*Image, int64, error) {
	if s.closed.Load() {
		return nil, 0, ErrClosed
	}
	if s.node != nil {
		return s.node.propose(ctx, build, validateOnly)
	}
	select {
	case s.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, 0, fmt.Errorf("controller: %w", ctx.Err())
	}
	defer func() { <-s.turn }()
	if s.closed.Load() {
		return nil, 0, ErrClosed
	}
	if s.failed != nil {
		return nil, 0, fmt.Errorf("%w: an earlier write failed: %w", ErrFailed, s.failed)
	}
	cur := s.img.Load()
	next, err := Apply(cur, build(cur))
	if err != nil || validateOnly {
		return next, cur.NextProducerID, err
	}
	if err := s.persist(next); err != nil {
		// Whether the file now holds the old or the new image is unknown: fail every later command
		// rather than build on a guess (the durability contract's rule for failed syncs).
		s.failed = err
		return nil, 0, err
	}
	s.publish(next)
	return next, cur.NextProducerID, nil
}

func (s *Store) notify() {
	s.subMu.Lock()
	defer s.subMu.Unlock()
	for _, ch := range s.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// newID draws a random version-4 UUID that Kafka accepts as a topic or cluster id: not all zero, and
// not starting with '-' in its text form.
func (s *Store) newID() (TopicID, error) {
	for {
		var id TopicID
		if _, err := io.ReadFull(s.rand, id[:]); err != nil {
			return TopicID{}, fmt.Errorf("controller: random id: %w", err)
		}
		id[6] = id[6]&0x0f | 0x40
		id[8] = id[8]&0x3f | 0x80
		if !id.IsZero() && id.String()[0] != '-' {
			return id, nil
		}
	}
}

type metadataEnvelope struct {
	Format int             `json:"format"`
	CRC32C uint32          `json:"crc32c"`
	Image  json.RawMessage `json:"image"`
}

// persist writes img as the Store's metadata file.
func (s *Store) persist(img *Image) error {
	return writeMetadata(s.fs, s.dir, img)
}

// WriteLocal writes img as the metadata file of dir (creating dir), the file OpenLocal opens, so
// that a node can be started over an image built with Apply without committing each command through
// a Store, which writes the whole image every time. Benchmarks use it for images of 100,000
// partitions. img must hold the broker OpenLocal is given as self, at the same address, for the
// file to be opened as written.
func WriteLocal(fsys vfs.FS, dir string, img *Image) error {
	if err := vfs.MkdirAllDurable(fsys, dir); err != nil {
		return fmt.Errorf("controller: create %s: %w", dir, err)
	}
	return writeMetadata(fsys, dir, img)
}

// writeMetadata replaces dir's metadata file with img, durably: a temporary file synced, renamed
// over the old one, and the directory synced.
func writeMetadata(fsys vfs.FS, dir string, img *Image) error {
	data, err := encodeImage(img)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, metadataTmpFile)
	f, err := fsys.Create(tmp)
	if err != nil {
		return fmt.Errorf("controller: write metadata: %w", err)
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("controller: write metadata: %w", werr)
	}
	if err := fsys.Rename(tmp, filepath.Join(dir, metadataFile)); err != nil {
		return fmt.Errorf("controller: write metadata: %w", err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("controller: write metadata: %w", err)
	}
	return nil
}

// load reads the metadata file; nil, nil when there is none yet.
func (s *Store) load() (*Image, error) {
	f, err := s.fs.Open(filepath.Join(s.dir, metadataFile))
	if vfs.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("controller: open metadata: %w", err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("controller: read metadata: %w", err)
	}
	if size > maxMetadataBytes {
		return nil, fmt.Errorf("%w: %d bytes", ErrCorruptMetadata, size)
	}
	data := make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("controller: read metadata: %w", err)
	}
	return decodeMetadata(data)
}

func decodeMetadata(data []byte) (*Image, error) {
	var env metadataEnvelope
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptMetadata, err)
	}
	if env.Format != metadataFormat {
		return nil, fmt.Errorf("%w: format %d", ErrCorruptMetadata, env.Format)
	}
	if crc32.Checksum(env.Image, castagnoli) != env.CRC32C {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrCorruptMetadata)
	}
	var img Image
	if err := json.Unmarshal(env.Image, &img); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptMetadata, err)
	}
	if err := img.check(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptMetadata, err)
	}
	img.index()
	return &img, nil
}

// check verifies the invariants Apply keeps, for an image read from disk.
func (img *Image) check() error {
	if img.Topics == nil {
		img.Topics = map[string]*Topic{}
	}
	if img.BrokerConfigs == nil {
		img.BrokerConfigs = map[string]string{}
	}
	if img.Version < 0 || img.NextProducerID < 0 {
		return fmt.Errorf("negative version %d or producer id %d", img.Version, img.NextProducerID)
	}
	ids := make(map[TopicID]bool, len(img.Topics))
	for name, t := range img.Topics {
		if t == nil || t.Name != name {
			return fmt.Errorf("topic entry %q mismatched", name)
		}
		if err := ValidateTopicName(name); err != nil {
			return err
		}
		if t.ID.IsZero() || ids[t.ID] {
			return fmt.Errorf("topic %q: zero or duplicate id", name)
		}
		ids[t.ID] = true
		if err := checkPartitions(t.Partitions); err != nil {
			return err
		}
		configs, err := ValidateTopicConfigs(t.Configs)
		if err != nil {
			return err
		}
		t.Configs = configs
		if err := img.checkStates(t); err != nil {
			return fmt.Errorf("topic %q: %w", name, err)
		}
	}
	configs, err := ValidateBrokerConfigs(img.BrokerConfigs)
	if err != nil {
		return err
	}
	img.BrokerConfigs = configs
	if err := img.checkGroupConfigs(); err != nil {
		return err
	}
	return img.checkPerBrokerConfigs()
}

// checkStates verifies t's partition states. A topic written before partitions had states (the
// single-node store's first format) gets one replica each, on the controller node.
func (img *Image) checkStates(t *Topic) error {
	if t.States == nil {
		t.States = make([]*PartitionState, t.Partitions)
		for i := range t.States {
			id := img.ControllerID
			t.States[i] = &PartitionState{Replicas: []int32{id}, Leader: id, ISR: []int32{id}}
		}
		return nil
	}
	if len(t.States) != int(t.Partitions) {
		return fmt.Errorf("%d partition states for %d partitions", len(t.States), t.Partitions)
	}
	for i, st := range t.States {
		if st == nil || len(st.Replicas) == 0 || len(st.Replicas) > maxReplicationFactor || len(st.ISR) == 0 {
			return fmt.Errorf("partition %d: empty or oversized replica set or ISR", i)
		}
		for j, r := range st.Replicas {
			if contains(st.Replicas[:j], r) {
				return fmt.Errorf("partition %d: replica %d twice", i, r)
			}
		}
		for _, set := range [][]int32{st.ISR, st.ELR, st.AddingReplicas, st.RemovingReplicas} {
			for j, r := range set {
				if !contains(st.Replicas, r) || contains(set[:j], r) {
					return fmt.Errorf("partition %d: ISR, ELR or a move's list %v not a set of replicas", i, set)
				}
			}
		}
		for _, r := range st.AddingReplicas {
			if contains(st.RemovingReplicas, r) {
				return fmt.Errorf("partition %d: replica %d both added and removed", i, r)
			}
		}
		if st.Leader != NoLeader && !contains(st.ISR, st.Leader) {
			return fmt.Errorf("partition %d: leader %d outside the ISR", i, st.Leader)
		}
		if st.LeaderEpoch < 0 || st.PartitionEpoch < 0 {
			return fmt.Errorf("partition %d: negative epoch", i)
		}
	}
	return nil
}
