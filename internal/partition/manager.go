package partition

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-mq/weir/internal/clock"
	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/storage"
	"github.com/weir-mq/weir/internal/vfs"
)

const (
	// partitionMetadataFile holds the topic id of a replica directory, in Kafka's format.
	partitionMetadataFile = "partition.metadata"
	// deleteSuffix marks a replica directory that is being deleted.
	deleteSuffix = "-delete"
	// defaultMaintainEvery is how often the Manager runs Maintain on every log.
	defaultMaintainEvery = 10 * time.Second
	// hwCheckpointFile holds the high watermark of every hosted replica, in Kafka's format.
	hwCheckpointFile = "replication-offset-checkpoint"
	// isrCheckMax bounds the period of the leaders' ISR check.
	isrCheckMax = 5 * time.Second
)

// ManagerOptions are a Manager's collaborators.
//
// A Manager given neither ISR nor Transport is a single node: it never fetches nor changes an ISR,
// and hosts the partitions the image places on NodeID (on the image's controller when NodeID is 0).
// A cluster node sets NodeID, ISR (the controller Store) and Transport (api.ReplicaTransport).
type ManagerOptions struct {
	// FS is the filesystem; nil means vfs.OS.
	FS vfs.FS
	// Clock is the time source of the logs and of replication; nil means the wall clock.
	Clock Clock
	// Logger receives the Manager's messages; nil means slog.Default().
	Logger *slog.Logger
	// MaintainEvery is the period of the logs' maintenance (retention, roll by age, interval syncs)
	// and of the high-watermark checkpoint; 0 means 10s.
	MaintainEvery time.Duration
	// MaintainTicks, when set, drives maintenance instead of a ticker of MaintainEvery (tests).
	MaintainTicks <-chan time.Time
	// Journal makes the appends of the logs under weir.flush.policy=always durable through one journal
	// of the data directory (storage.OpenSyncer: one fdatasync per round whatever the partition count)
	// instead of an fdatasync of each log. Off by default: on the broker it measured more CPU per record
	// than the per-log syncs at 4 and 512 partitions (docs/storage.md, "Journal (as built)").
	Journal bool
	// NodeID is this broker's id: the Manager hosts the partitions whose replicas name it.
	NodeID int32
	// ISR proposes the leaders' ISR changes to the controller (AlterPartition); a change it refuses as
	// stale wakes the reconciler (staleWakes).
	ISR ISRChanger
	// Transport reaches leader brokers for follower fetches, at the addresses the image gives.
	Transport Transport
	// ReplicaLagMax is replica.lag.time.max.ms: how long an ISR member may go without catching up
	// before its leader drops it; 0 means DefaultReplicaLagMax (30s).
	ReplicaLagMax time.Duration
	// ISRTicks, when set, drives the leaders' ISR checks instead of a ticker of half ReplicaLagMax
	// (at most 5s) (tests).
	ISRTicks <-chan time.Time
	// Latest, when set, returns the newest image the node knows (the controller store's Image): the
	// reconciler passes over it when it is newer than the images handed in, and a pass that a newer image
	// overtakes stops opening replicas, so that the pass for the newer image can cancel what it no longer
	// wants (reconcile.go).
	Latest func() *controller.Image
	// Lease, when set, reports whether this broker holds its controller lease and when it ends
	// (controller.Store.Lease): without it no replica acts as a leader (Options.Lease).
	Lease func() (until time.Time, held bool)
	// OnDirFailure, when set, is called once, with ErrDirFailed wrapping the cause, when a write,
	// fsync, truncation or directory change anywhere in the data directory fails: the log that did it
	// went offline for good (storage.ErrLogOffline), nothing it had not made durable is acknowledged,
	// and the one directory of the node is not to be trusted (docs/architecture.md, durability contract
	// rule 4; docs/storage.md, "A failed data directory"). The owner is expected to stop the node so
	// leadership moves. It runs on the goroutine that saw the failure, possibly under a log's lock: it
	// must not block nor call back into the Manager.
	OnDirFailure func(err error)
}

type replicaKey struct {
	topic     string
	partition int32
}

func (k replicaKey) dirName() string { return k.topic + "-" + strconv.Itoa(int(k.partition)) }

type hosted struct {
	r   *Replica
	id  controller.TopicID
	cfg storage.Config
}

// Manager owns the replicas of one data directory: it creates, opens and deletes them under
// <data-dir>/<topic>-<partition>/ as the controller image says, gives each its role from the image,
// runs one follower fetcher per leader broker, checks the leaders' ISRs, owns the directory's Syncer,
// runs maintenance on every log periodically and checkpoints the high watermarks.
type Manager struct {
	dataDir   string
	fs        vfs.FS
	clock     Clock
	logger    *slog.Logger
	syncer    *storage.Syncer
	self      int32
	cluster   bool
	isrCh     ISRChanger
	transport Transport
	lagMax    time.Duration
	lease     func() (time.Time, bool)

	ctx    context.Context
	cancel context.CancelFunc
	// done is closed when the maintenance goroutine ends, reconciled when the reconciler does.
	done       chan struct{}
	reconciled chan struct{}
	// removing runs the background removals of deleted replicas' directories.
	removing sync.WaitGroup

	// img is the latest reconciled image: fetchers read broker addresses from it.
	img atomic.Pointer[controller.Image]
	// throttle limits the fetchers' copy of throttled partitions (throttle.go).
	throttle Bucket
	// ckptMu serializes writes of the high-watermark checkpoint.
	ckptMu sync.Mutex

	// reconcileMu is held by the reconciler's passes and by maintenance's deletion of stray directories
	// (which gives up when a pass holds it); it guards scanned, strays and fetchers, and is taken before
	// mu. Close takes none of it: it reads them once both goroutines have ended.
	reconcileMu sync.Mutex
	scanned     bool
	// rec tracks the images handed to the Manager and the passes done (reconcile.go).
	rec reconcileState
	// strays holds the replica directories found at start that the metadata did not place on this
	// node, with when they were found (removeStrays).
	strays map[replicaKey]time.Time
	// checkpointed holds the high watermarks read from the checkpoint at start.
	checkpointed map[replicaKey]int64
	// recovery adds up what opening the logs found, logged after the first complete pass.
	recovery recoveryTally
	// fetchers is keyed by source broker.
	fetchers map[int32]*fetcher

	mu       sync.RWMutex
	replicas map[replicaKey]*hosted
	// opened is closed and replaced, under mu, whenever a replica is added to replicas.
	opened chan struct{}
}

// NewManager prepares dataDir, reads its high-watermark checkpoint and starts the maintenance goroutine
// and the reconciler. It opens no replica: the first pass, over the first image handed in (Submit), opens
// those the image places on this node and deletes the directories of topics that are gone.
func NewManager(dataDir string, opts ManagerOptions) (*Manager, error) {
	m := &Manager{
		dataDir:    dataDir,
		fs:         opts.FS,
		clock:      opts.Clock,
		logger:     opts.Logger,
		self:       opts.NodeID,
		cluster:    opts.ISR != nil || opts.Transport != nil,
		transport:  opts.Transport,
		lagMax:     opts.ReplicaLagMax,
		lease:      opts.Lease,
		replicas:   map[replicaKey]*hosted{},
		fetchers:   map[int32]*fetcher{},
		done:       make(chan struct{}),
		reconciled: make(chan struct{}),
		opened:     make(chan struct{}),
		strays:     map[replicaKey]time.Time{},
	}
	m.rec.init(opts.Latest)
	if opts.ISR != nil {
		m.isrCh = staleWakes{ISRChanger: opts.ISR, rec: &m.rec}
	}
	if m.fs == nil {
		m.fs = vfs.OS
	}
	if opts.OnDirFailure != nil {
		m.fs = watchDir(m.fs, opts.OnDirFailure)
	}
	if m.clock == nil {
		m.clock = clock.System{}
	}
	m.recovery.started = m.clock.Now()
	if m.logger == nil {
		m.logger = slog.Default()
	}
	if m.lagMax <= 0 {
		m.lagMax = DefaultReplicaLagMax
	}
	if err := vfs.MkdirAllDurable(m.fs, dataDir); err != nil {
		return nil, fmt.Errorf("partition: create %s: %w", dataDir, err)
	}
	hws, err := readHWCheckpoint(m.fs, filepath.Join(dataDir, hwCheckpointFile))
	if err != nil {
		m.logger.Warn("ignoring the high-watermark checkpoint", "err", err)
		hws = map[replicaKey]int64{}
	}
	m.checkpointed = hws
	if opts.Journal {
		if m.syncer, err = storage.OpenSyncer(m.fs, dataDir, m.logger); err != nil {
			return nil, fmt.Errorf("partition: %w", err)
		}
	} else {
		// A journal left by a run with it is replayed into the logs and removed before they open.
		if err := storage.DropJournal(m.fs, dataDir, m.logger); err != nil {
			return nil, fmt.Errorf("partition: %w", err)
		}
		m.syncer = storage.NewSyncer()
	}
	maintain := opts.MaintainTicks
	var tickers []*time.Ticker
	if maintain == nil {
		every := opts.MaintainEvery
		if every <= 0 {
			every = defaultMaintainEvery
		}
		t := time.NewTicker(every)
		tickers = append(tickers, t)
		maintain = t.C
	}
	isrTicks := opts.ISRTicks
	if isrTicks == nil {
		t := time.NewTicker(min(m.lagMax/2+1, isrCheckMax))
		tickers = append(tickers, t)
		isrTicks = t.C
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.ctx, m.cancel = ctx, cancel
	go func() {
		defer close(m.done)
		for _, t := range tickers {
			defer t.Stop()
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-maintain:
				m.maintainAll()
			case <-isrTicks:
				for _, h := range m.snapshot() {
					h.r.CheckISR()
				}
			}
		}
	}()
	go m.reconciler()
	return m, nil
}

// staleWakes is the ISRChanger the Manager gives its replicas: an ISR change the controller refuses as
// stale (ErrStaleEpoch: another replica leads at a newer epoch, or the ISR moved on) means the replica
// missed an image, and wakes the reconciler, which passes over the newest image the node knows
// (ManagerOptions.Latest) when no pass has covered it. A replica's role then does not hang on whoever
// else hands images in: the node's image goroutine, held up in a coordinator, once left its replicas
// leading at their old epoch for good (docs/controller.md, "Broker leases").
type staleWakes struct {
	ISRChanger
	rec *reconcileState
}

func (s staleWakes) AlterPartition(ctx context.Context, req controller.AlterPartition) (*controller.PartitionState, error) {
	st, err := s.ISRChanger.AlterPartition(ctx, req)
	if errors.Is(err, controller.ErrStaleEpoch) {
		s.rec.wake()
	}
	return st, err
}

// Replica returns the hosted replica of a partition.
func (m *Manager) Replica(topic string, partition int32) (*Replica, bool) {
	m.mu.RLock()
	h, ok := m.replicas[replicaKey{topic, partition}]
	m.mu.RUnlock()
	if !ok {
		return nil, false
	}
	return h.r, true
}

func (m *Manager) snapshot() map[replicaKey]*hosted {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make(map[replicaKey]*hosted, len(m.replicas))
	for k, h := range m.replicas {
		out[k] = h
	}
	return out
}

func (m *Manager) maintainAll() {
	all := m.snapshot()
	for k, h := range all {
		if err := h.r.maintain(); err != nil && !errors.Is(err, storage.ErrClosed) {
			m.logger.Error("log maintenance failed", "topic", k.topic, "partition", k.partition, "err", err)
		}
	}
	if err := m.writeHWCheckpoint(all); err != nil {
		m.logger.Error("writing the high-watermark checkpoint", "err", err)
	}
	// Stray directories whose grace ran out go even while the metadata does not change; a pass under way
	// (it holds reconcileMu) does it instead.
	if m.reconcileMu.TryLock() {
		if img := m.img.Load(); img != nil {
			if err := m.retireStrays(img); err != nil {
				m.logger.Error("deleting stray replica directories", "err", err)
			}
		}
		m.reconcileMu.Unlock()
	}
}

// selfIn returns the broker whose replicas this Manager hosts in img: NodeID, or, on a single node
// that left it 0, the image's controller (the single-node store registers this node as controller).
func (m *Manager) selfIn(img *controller.Image) int32 {
	if m.cluster || m.self != 0 {
		return m.self
	}
	return img.ControllerID
}

// assignFetchers hands every follower to the fetcher of its leader's broker. Callers hold
// reconcileMu.
func (m *Manager) assignFetchers() {
	if m.transport == nil {
		return
	}
	want := map[int32]map[replicaKey]*Replica{}
	for k, h := range m.snapshot() {
		pos, ok := h.r.following()
		if !ok {
			continue
		}
		if want[pos.leader] == nil {
			want[pos.leader] = map[replicaKey]*Replica{}
		}
		want[pos.leader][k] = h.r
	}
	for src, f := range m.fetchers {
		if _, ok := want[src]; !ok {
			f.set(map[replicaKey]*Replica{})
		}
	}
	for src, parts := range want {
		f, ok := m.fetchers[src]
		if !ok {
			f = newFetcher(m, src)
			m.fetchers[src] = f
		}
		f.set(parts)
	}
}

// removeStrays, at a node's first reconciliation, finishes the removals of deleted replicas' directories
// (in the background) and looks for replica directories that img does not place on this node. A single
// node retires them at once. A cluster node gives each strayGrace first: its first images may be behind
// the quorum's (a topic created while it was down), so a directory is retired only if the metadata still
// does not place it here that long after (retireStrays). A directory whose topic id differs from the
// image's is replaced when the replica is opened.
func (m *Manager) removeStrays(img *controller.Image) error {
	names, err := m.fs.ReadDir(m.dataDir)
	if err != nil {
		return fmt.Errorf("partition: list %s: %w", m.dataDir, err)
	}
	var retired []string
	self, now := m.selfIn(img), m.clock.Now()
	for _, name := range names {
		if strings.HasSuffix(name, deleteSuffix) {
			retired = append(retired, filepath.Join(m.dataDir, name))
			continue
		}
		k, ok := parseDirName(name)
		if !ok || placedOn(img, k, self) {
			continue
		}
		if st, err := m.fs.Stat(filepath.Join(m.dataDir, name)); err != nil || !st.IsDir() {
			continue
		}
		m.strays[k] = now
	}
	if len(retired) > 0 {
		m.logger.Info("removing the directories of replicas deleted before the restart", "count", len(retired))
		m.removeInBackground(retired)
	}
	if m.cluster && len(m.strays) > 0 {
		m.logger.Warn("replica directories the metadata does not place on this node; deleting them unless it does within the grace period",
			"count", len(m.strays), "grace", strayGrace)
	}
	return m.retireStrays(img)
}

// strayGrace is how long a cluster node keeps a replica directory its metadata does not place on it.
const strayGrace = 5 * time.Minute

// retireStrays forgets the stray directories that img places on this node after all and retires those
// whose grace has run out (at once on a single node). Callers hold reconcileMu.
func (m *Manager) retireStrays(img *controller.Image) error {
	if len(m.strays) == 0 {
		return nil
	}
	self, now := m.selfIn(img), m.clock.Now()
	var gone []string
	for k, seen := range m.strays {
		if placedOn(img, k, self) {
			delete(m.strays, k)
			continue
		}
		if m.cluster && now.Sub(seen) < strayGrace {
			continue
		}
		delete(m.strays, k)
		m.logger.Warn("deleting a replica directory of a partition the metadata does not place on this node", "dir", k.dirName())
		gone = append(gone, k.dirName())
	}
	return m.retire(gone)
}

// placedOn reports whether img places partition k on broker self.
func placedOn(img *controller.Image, k replicaKey, self int32) bool {
	t, ok := img.Topics[k.topic]
	if !ok || k.partition >= t.Partitions {
		return false
	}
	st, ok := t.Partition(k.partition)
	return ok && slices.Contains(st.Replicas, self)
}

// parseDirName splits "<topic>-<partition>".
func parseDirName(name string) (replicaKey, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return replicaKey{}, false
	}
	p, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || p < 0 || strconv.FormatInt(p, 10) != name[i+1:] {
		return replicaKey{}, false
	}
	if controller.ValidateTopicName(name[:i]) != nil {
		return replicaKey{}, false
	}
	return replicaKey{name[:i], int32(p)}, true
}

// open opens (creating if needed) the replica k of the topic with id, gives it its state, and only
// then makes it visible: a replica is never served before it knows its role.
func (m *Manager) open(k replicaKey, id controller.TopicID, cfg storage.Config, self int32, state State) error {
	dir := filepath.Join(m.dataDir, k.dirName())
	have, found, err := m.readTopicID(dir)
	if err != nil {
		return err
	}
	if found && have != id {
		m.logger.Warn("replica directory belongs to an older topic of the same name; deleting it", "dir", k.dirName())
		if err := m.deleteDir(k.dirName()); err != nil {
			return err
		}
		found = false
	}
	if !found {
		if err := m.create(dir, id); err != nil {
			return err
		}
	}
	log, err := storage.Open(dir, cfg, storage.Options{FS: m.fs, Clock: m.clock, Syncer: m.syncer, Logger: m.logger})
	if err != nil {
		return fmt.Errorf("partition: open %s: %w", k.dirName(), err)
	}
	m.recovery.add(log.Recovery())
	hw, ok := m.checkpointed[k]
	if !ok || !found {
		hw = 0
	}
	r, err := open(log, Options{
		Topic: k.topic, Partition: k.partition, Logger: m.logger, NodeID: self, ISR: m.isrCh,
		Clock: m.clock, ReplicaLagMax: m.lagMax, Lease: m.lease,
	}, hw)
	if err != nil {
		if cerr := log.Close(); cerr != nil {
			m.logger.Warn("closing log after failed open", "dir", k.dirName(), "err", cerr)
		}
		return err
	}
	r.SetState(state)
	m.mu.Lock()
	m.replicas[k] = &hosted{r: r, id: id, cfg: cfg}
	close(m.opened)
	m.opened = make(chan struct{})
	m.mu.Unlock()
	return nil
}

// create makes a replica directory durable with its topic id before any data goes into it, so a
// directory without partition.metadata can only be one whose creation was interrupted.
func (m *Manager) create(dir string, id controller.TopicID) error {
	if err := m.fs.MkdirAll(dir); err != nil {
		return fmt.Errorf("partition: create %s: %w", dir, err)
	}
	content := fmt.Sprintf("version: 0\ntopic_id: %s\n", id)
	tmp := filepath.Join(dir, partitionMetadataFile+".tmp")
	f, err := m.fs.Create(tmp)
	if err != nil {
		return fmt.Errorf("partition: write %s: %w", tmp, err)
	}
	_, err = io.WriteString(f, content)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = m.fs.Rename(tmp, filepath.Join(dir, partitionMetadataFile))
	}
	if err == nil {
		err = m.fs.SyncDir(dir)
	}
	if err == nil {
		err = m.fs.SyncDir(m.dataDir)
	}
	if err != nil {
		return fmt.Errorf("partition: write %s: %w", filepath.Join(dir, partitionMetadataFile), err)
	}
	return nil
}

// readTopicID reads a replica directory's partition.metadata; found is false when the directory or
// the file does not exist.
func (m *Manager) readTopicID(dir string) (id controller.TopicID, found bool, err error) {
	f, err := m.fs.Open(filepath.Join(dir, partitionMetadataFile))
	if vfs.IsNotExist(err) {
		return id, false, nil
	}
	if err != nil {
		return id, false, fmt.Errorf("partition: read %s: %w", dir, err)
	}
	defer f.Close()
	const maxSize = 4096
	buf := make([]byte, maxSize)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return id, false, fmt.Errorf("partition: read %s: %w", dir, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(buf[:n]))
	var version, topicID string
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(key) {
		case "version":
			version = strings.TrimSpace(value)
		case "topic_id":
			topicID = strings.TrimSpace(value)
		}
	}
	if version != "0" || id.UnmarshalText([]byte(topicID)) != nil {
		return id, false, fmt.Errorf("partition: %s: %w: unreadable %s", dir, storage.ErrCorruption, partitionMetadataFile)
	}
	return id, true, nil
}

// deleteDir removes a replica directory: first renamed (durably) out of the way, so a crash never
// leaves a half-deleted directory under a live name, then removed.
func (m *Manager) deleteDir(name string) error {
	to, err := m.renameAway(name)
	if err != nil || to == "" {
		return err
	}
	if err := m.fs.SyncDir(m.dataDir); err != nil {
		return fmt.Errorf("partition: delete %s: %w", name, err)
	}
	if err := m.fs.RemoveAll(to); err != nil {
		return fmt.Errorf("partition: delete %s: %w", name, err)
	}
	return nil
}

// renameAway renames the replica directory name to a free name ending in deleteSuffix and returns that
// path; "" if there was no such directory. The caller syncs the data directory.
func (m *Manager) renameAway(name string) (string, error) {
	from := filepath.Join(m.dataDir, name)
	to := from + deleteSuffix
	for i := 1; ; i++ {
		if _, err := m.fs.Stat(to); vfs.IsNotExist(err) {
			break
		}
		to = from + "." + strconv.Itoa(i) + deleteSuffix
	}
	if err := m.fs.Rename(from, to); err != nil {
		if vfs.IsNotExist(err) {
			return "", nil
		}
		return "", fmt.Errorf("partition: delete %s: %w", name, err)
	}
	return to, nil
}

// HoldSync keeps the data directory's next group-commit round from starting until release is called
// (storage.Syncer.Hold): a produce request holds it over the appends of its partitions, so that one
// round syncs them all.
func (m *Manager) HoldSync() (release func()) { return m.syncer.Hold() }

// Close stops maintenance and the reconciler (a pass under way stops after the batch of replicas it is
// opening) and waits for both, stops the fetchers, writes the high-watermark checkpoint, closes every
// replica (syncing its log) and the Syncer. Waiters for a pass get ErrClosed; so do later calls.
func (m *Manager) Close() error {
	if !m.rec.close() {
		return ErrClosed
	}
	m.cancel()
	<-m.done
	<-m.reconciled
	m.removing.Wait()
	for _, f := range m.fetchers {
		f.stop()
	}
	var errs []error
	if err := m.writeHWCheckpoint(m.snapshot()); err != nil {
		errs = append(errs, err)
	}
	m.mu.Lock()
	replicas := m.replicas
	m.replicas = map[replicaKey]*hosted{}
	m.mu.Unlock()
	keys := make([]replicaKey, 0, len(replicas))
	for k := range replicas {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].dirName() < keys[j].dirName() })
	errs = append(errs, inParallel(len(keys), func(i int) error { return replicas[keys[i]].r.Close() })...)
	m.syncer.Close()
	return errors.Join(errs...)
}
