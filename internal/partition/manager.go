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
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

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
)

// ManagerOptions are a Manager's collaborators.
type ManagerOptions struct {
	// FS is the filesystem; nil means vfs.OS.
	FS vfs.FS
	// Clock is the logs' time source; nil means storage.SystemClock.
	Clock storage.Clock
	// Logger receives the Manager's messages; nil means slog.Default().
	Logger *slog.Logger
	// MaintainEvery is the period of the logs' maintenance (retention, roll by age, interval syncs);
	// 0 means 10s.
	MaintainEvery time.Duration
	// MaintainTicks, when set, drives maintenance instead of a ticker of MaintainEvery (tests).
	MaintainTicks <-chan time.Time
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
// <data-dir>/<topic>-<partition>/ as the controller image says, owns the directory's Syncer and runs
// maintenance on every log periodically.
type Manager struct {
	dataDir string
	fs      vfs.FS
	clock   storage.Clock
	logger  *slog.Logger
	syncer  *storage.Syncer

	cancel context.CancelFunc
	done   chan struct{}

	// reconcileMu serializes Reconcile and Close; it is taken before mu.
	reconcileMu sync.Mutex
	scanned     bool
	closed      bool

	mu       sync.RWMutex
	replicas map[replicaKey]*hosted
}

// NewManager prepares dataDir and starts the maintenance goroutine. It opens no replica: the first
// Reconcile opens those the image names and deletes the directories of topics that are gone.
func NewManager(dataDir string, opts ManagerOptions) (*Manager, error) {
	m := &Manager{
		dataDir:  dataDir,
		fs:       opts.FS,
		clock:    opts.Clock,
		logger:   opts.Logger,
		replicas: map[replicaKey]*hosted{},
		done:     make(chan struct{}),
	}
	if m.fs == nil {
		m.fs = vfs.OS
	}
	if m.clock == nil {
		m.clock = storage.SystemClock
	}
	if m.logger == nil {
		m.logger = slog.Default()
	}
	if err := vfs.MkdirAllDurable(m.fs, dataDir); err != nil {
		return nil, fmt.Errorf("partition: create %s: %w", dataDir, err)
	}
	m.syncer = storage.NewSyncer()
	ticks := opts.MaintainTicks
	var ticker *time.Ticker
	if ticks == nil {
		every := opts.MaintainEvery
		if every <= 0 {
			every = defaultMaintainEvery
		}
		ticker = time.NewTicker(every)
		ticks = ticker.C
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		defer close(m.done)
		if ticker != nil {
			defer ticker.Stop()
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticks:
				m.maintainAll()
			}
		}
	}()
	return m, nil
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
	for k, h := range m.snapshot() {
		if err := h.r.maintain(); err != nil && !errors.Is(err, storage.ErrClosed) {
			m.logger.Error("log maintenance failed", "topic", k.topic, "partition", k.partition, "err", err)
		}
	}
}

// Reconcile makes the hosted replicas match img: every partition of every topic is opened (created
// if new), replicas of deleted topics (or of an older topic of the same name) are closed and their
// directories deleted, and config changes reach the logs. The first call also deletes directories
// left on disk by topics that no longer exist. It is idempotent and safe to call from several
// goroutines; a partition that fails to open is reported in the joined error and retried on the next
// call, the others are served meanwhile.
func (m *Manager) Reconcile(img *controller.Image) error {
	m.reconcileMu.Lock()
	defer m.reconcileMu.Unlock()
	if m.closed {
		return ErrClosed
	}
	var errs []error
	for k, h := range m.snapshot() {
		if t, ok := img.Topics[k.topic]; !ok || t.ID != h.id || k.partition >= t.Partitions {
			m.mu.Lock()
			delete(m.replicas, k)
			m.mu.Unlock()
			m.logger.Info("deleting replica", "topic", k.topic, "partition", k.partition)
			h.r.stop()
			if err := h.r.log.Close(); err != nil && !errors.Is(err, storage.ErrClosed) {
				m.logger.Warn("closing deleted replica", "topic", k.topic, "partition", k.partition, "err", err)
			}
			if err := m.deleteDir(k.dirName()); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if !m.scanned {
		if err := m.removeStrays(img); err != nil {
			errs = append(errs, err)
		} else {
			m.scanned = true
		}
	}
	for _, name := range img.TopicNames() {
		t := img.Topics[name]
		cfg := StorageConfig(img.LogConfig(t))
		for p := int32(0); p < t.Partitions; p++ {
			k := replicaKey{name, p}
			m.mu.RLock()
			h, ok := m.replicas[k]
			m.mu.RUnlock()
			if !ok {
				if err := m.open(k, t.ID, cfg); err != nil {
					m.logger.Error("opening replica", "topic", name, "partition", p, "err", err)
					errs = append(errs, err)
				}
				continue
			}
			if h.cfg != cfg {
				if err := h.r.SetConfig(cfg); err != nil {
					errs = append(errs, err)
					continue
				}
				m.mu.Lock()
				h.cfg = cfg
				m.mu.Unlock()
			}
		}
	}
	return errors.Join(errs...)
}

// removeStrays deletes directories of replicas the image does not name (or names with another topic
// id), and leftovers of interrupted deletions.
func (m *Manager) removeStrays(img *controller.Image) error {
	names, err := m.fs.ReadDir(m.dataDir)
	if err != nil {
		return fmt.Errorf("partition: list %s: %w", m.dataDir, err)
	}
	var errs []error
	for _, name := range names {
		if strings.HasSuffix(name, deleteSuffix) {
			if err := m.fs.RemoveAll(filepath.Join(m.dataDir, name)); err != nil {
				errs = append(errs, fmt.Errorf("partition: remove %s: %w", name, err))
			}
			continue
		}
		k, ok := parseDirName(name)
		if !ok {
			continue
		}
		if st, err := m.fs.Stat(filepath.Join(m.dataDir, name)); err != nil || !st.IsDir() {
			continue
		}
		t, ok := img.Topics[k.topic]
		if ok && k.partition < t.Partitions {
			// The topic id is checked when the replica is opened.
			continue
		}
		m.logger.Warn("deleting replica of a topic not in the metadata", "dir", name)
		if err := m.deleteDir(name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
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

// open opens (creating if needed) the replica k of the topic with id.
func (m *Manager) open(k replicaKey, id controller.TopicID, cfg storage.Config) error {
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
	r, err := Open(log, Options{Topic: k.topic, Partition: k.partition, Logger: m.logger})
	if err != nil {
		if cerr := log.Close(); cerr != nil {
			m.logger.Warn("closing log after failed open", "dir", k.dirName(), "err", cerr)
		}
		return err
	}
	m.mu.Lock()
	m.replicas[k] = &hosted{r: r, id: id, cfg: cfg}
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
			return nil
		}
		return fmt.Errorf("partition: delete %s: %w", name, err)
	}
	if err := m.fs.SyncDir(m.dataDir); err != nil {
		return fmt.Errorf("partition: delete %s: %w", name, err)
	}
	if err := m.fs.RemoveAll(to); err != nil {
		return fmt.Errorf("partition: delete %s: %w", name, err)
	}
	return nil
}

// Close stops maintenance, closes every replica (syncing its log) and the Syncer. Later calls
// return ErrClosed.
func (m *Manager) Close() error {
	m.reconcileMu.Lock()
	defer m.reconcileMu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.closed = true
	m.cancel()
	<-m.done
	m.mu.Lock()
	replicas := m.replicas
	m.replicas = map[replicaKey]*hosted{}
	m.mu.Unlock()
	keys := make([]replicaKey, 0, len(replicas))
	for k := range replicas {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].dirName() < keys[j].dirName() })
	var errs []error
	for _, k := range keys {
		if err := replicas[k].r.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	m.syncer.Close()
	return errors.Join(errs...)
}
