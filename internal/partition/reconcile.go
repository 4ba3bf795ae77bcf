package partition

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/storage"
	"github.com/weir-mq/weir/internal/vfs"
)

// Reconciliation turns metadata images into local replicas on one goroutine of the Manager's, the
// reconciler: callers hand it images (Submit) and, where they need to, wait until an image has been
// reconciled (WaitReconciled) or a replica opened (AwaitReplica). Nothing else opens, reconfigures or
// deletes replicas, so no request goroutine ever opens a log or runs its recovery. A pass (reconcile)
// deletes the replicas the image no longer places here, then opens the new ones, openWorkers at a time, so
// that their directory and file syncs overlap instead of queueing one replica after another. The
// reconciler passes over the newest image it knows (the newest handed in, or the newest
// ManagerOptions.Latest returns) whenever that is newer than the last complete pass's, and once more
// after a pass that failed when an image is handed in again. A pass that a newer image overtakes stops
// opening replicas after the batch in flight and the reconciler starts over with the newer image, so a
// topic deleted while its 10,000 replicas are being created is not created to the end before it is
// deleted; a pass stops the same way when the Manager closes.
const (
	openWorkers = 32
	// openBatch replicas are opened between two checks for a newer image.
	openBatch = 4 * openWorkers
)

// reconcileState is what the Manager knows of images and passes. mu guards its fields; latest and kick
// are set once, by init.
type reconcileState struct {
	mu     sync.Mutex
	latest func() *controller.Image
	// wanted is the newest image handed to the Manager; asked is set when one is handed in and cleared
	// when a pass starts.
	wanted *controller.Image
	asked  bool
	// done is the version of the newest image a pass completed; doneErr what that pass reported.
	done    int64
	doneErr error
	// passed is closed and replaced when a pass completes or the Manager closes.
	passed chan struct{}
	closed bool
	// kick wakes the reconciler (one slot: a wake-up already pending covers the next).
	kick chan struct{}
}

func (s *reconcileState) init(latest func() *controller.Image) {
	s.latest, s.done, s.passed, s.kick = latest, -1, make(chan struct{}), make(chan struct{}, 1)
}

// want records img as handed to the Manager and wakes the reconciler.
func (s *reconcileState) want(img *controller.Image) {
	s.mu.Lock()
	if s.wanted == nil || img.Version > s.wanted.Version {
		s.wanted = img
	}
	s.asked = true
	s.mu.Unlock()
	s.wake()
}

// wake wakes the reconciler, which passes over the newest image it knows if no pass has covered it.
func (s *reconcileState) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// next returns the image the reconciler is to pass over, if any: the newest known, when it is newer than
// the last complete pass's, or when that pass failed and an image has been handed in since the last pass
// started.
func (s *reconcileState) next() (*controller.Image, bool) {
	var img *controller.Image
	if s.latest != nil {
		img = s.latest()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if img == nil || s.wanted != nil && s.wanted.Version > img.Version {
		img = s.wanted
	}
	retry := s.asked && s.doneErr != nil
	if img == nil || s.closed || img.Version <= s.done && !retry {
		return nil, false
	}
	s.asked = false
	return img, true
}

// overtaken reports whether an image newer than img has been handed to the Manager or is known.
func (s *reconcileState) overtaken(img *controller.Image) bool {
	s.mu.Lock()
	newer := s.wanted != nil && s.wanted.Version > img.Version
	s.mu.Unlock()
	return newer || s.latest != nil && s.latest().Version > img.Version
}

// finish records a completed pass over img.
func (s *reconcileState) finish(img *controller.Image, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if img.Version >= s.done {
		s.done, s.doneErr = img.Version, err
	}
	close(s.passed)
	s.passed = make(chan struct{})
}

// close marks the Manager closed, waking every waiter; false if it was already.
func (s *reconcileState) close() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.closed = true
	close(s.passed)
	s.passed = make(chan struct{})
	return true
}

// Submit hands img to the reconciler without waiting: a pass under way for an older image stops opening
// replicas after its batch in flight, and the next pass covers img.
func (m *Manager) Submit(img *controller.Image) { m.rec.want(img) }

// WaitReconciled waits until a pass over an image at least as new as version has completed and returns
// what it reported; ErrClosed once the Manager closes, ctx's error when it ends first.
func (m *Manager) WaitReconciled(ctx context.Context, version int64) error {
	for {
		m.rec.mu.Lock()
		done, err, ch, closed := m.rec.done, m.rec.doneErr, m.rec.passed, m.rec.closed
		m.rec.mu.Unlock()
		switch {
		case closed:
			return ErrClosed
		case done >= version:
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// AwaitReplica returns the hosted replica of a partition, waiting while the Manager may still open it:
// until it is open, a pass over an image at least as new as version has completed without it, the
// Manager closes, or ctx ends.
func (m *Manager) AwaitReplica(ctx context.Context, topic string, partition int32, version int64) (*Replica, bool) {
	k := replicaKey{topic, partition}
	for {
		m.mu.RLock()
		h, ok := m.replicas[k]
		opened := m.opened
		m.mu.RUnlock()
		if ok {
			return h.r, true
		}
		m.rec.mu.Lock()
		settled, passed := m.rec.closed || m.rec.done >= version, m.rec.passed
		m.rec.mu.Unlock()
		if settled {
			return nil, false
		}
		select {
		case <-opened:
		case <-passed:
		case <-ctx.Done():
			return nil, false
		}
	}
}

// reconciler is the Manager's one goroutine that turns images into replicas: woken by Submit, it passes
// over every image next returns until there is none, and ends when the Manager closes.
func (m *Manager) reconciler() {
	defer close(m.reconciled)
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-m.rec.kick:
		}
		for img, ok := m.rec.next(); ok && m.ctx.Err() == nil; img, ok = m.rec.next() {
			m.pass(img)
		}
	}
}

// pass makes the hosted replicas match img: every partition whose replicas name this node is opened
// (created if new) and given its role, leader epoch and ISR from the image (Replica.SetState); replicas of
// deleted topics (or of an older topic of the same name, or no longer placed here) are closed and their
// directories renamed away and removed in the background; config changes reach the logs; followers are
// handed to the fetcher of their leader's broker. The first pass of a single node also deletes directories
// left on disk by topics that no longer exist. A partition that fails to open is reported in the pass's
// error and retried by a later pass, the others are served meanwhile. A pass that a newer image overtakes,
// or that the Manager's closing cuts short, is not complete: it records nothing.
func (m *Manager) pass(img *controller.Image) {
	m.reconcileMu.Lock()
	complete, err := m.reconcile(img)
	m.reconcileMu.Unlock()
	if !complete {
		return
	}
	if err != nil {
		m.logger.Warn("reconciling replicas; a later image or request retries", "version", img.Version, "err", err)
	}
	m.recovery.report(m.logger, m.dataDir, m.clock.Now())
	m.rec.finish(img, err)
}

// reconcile is one pass; complete is false when a newer image overtook it or the Manager is closing.
// Callers hold reconcileMu.
func (m *Manager) reconcile(img *controller.Image) (complete bool, err error) {
	m.img.Store(img)
	self := m.selfIn(img)
	errs := []error{m.retireGone(img, self)}
	if !m.scanned {
		if err := m.removeStrays(img); err != nil {
			errs = append(errs, err)
		} else {
			m.scanned = true
		}
	} else if err := m.retireStrays(img); err != nil {
		errs = append(errs, err)
	}
	live := func(id int32) bool {
		b, ok := img.Broker(id)
		return ok && !b.Fenced
	}
	var fresh []pendingOpen
	for _, name := range img.TopicNames() {
		t := img.Topics[name]
		lc := img.LogConfig(t)
		cfg := StorageConfig(img.LogConfigOn(t, self)) // this broker's own values apply to its logs
		for p := int32(0); p < t.Partitions; p++ {
			st, ok := t.Partition(p)
			if !ok || !slices.Contains(st.Replicas, self) {
				continue
			}
			state := State{Partition: st, MinISR: lc.MinInsyncReplicas, Live: live}
			k := replicaKey{name, p}
			m.mu.RLock()
			h, ok := m.replicas[k]
			m.mu.RUnlock()
			if !ok {
				fresh = append(fresh, pendingOpen{k: k, id: t.ID, cfg: cfg, state: state})
				continue
			}
			if h.cfg != cfg {
				if err := h.r.SetConfig(cfg); err != nil {
					errs = append(errs, err)
				} else {
					m.mu.Lock()
					h.cfg = cfg
					m.mu.Unlock()
				}
			}
			h.r.SetState(state)
		}
	}
	complete = true
	if len(fresh) > 0 {
		m.logger.Info("opening replicas", "count", len(fresh))
	}
	for len(fresh) > 0 {
		n := min(len(fresh), openBatch)
		errs = append(errs, m.openAll(fresh[:n], self)...)
		fresh = fresh[n:]
		if len(fresh) > 0 && m.ctx.Err() != nil {
			complete = false
			break
		}
		if len(fresh) > 0 && m.rec.overtaken(img) {
			m.logger.Info("metadata changed while replicas were being opened; going on with the newer image",
				"left", len(fresh))
			complete = false
			break
		}
	}
	m.assignFetchers()
	return complete, errors.Join(errs...)
}

// pendingOpen is a replica a pass is to open.
type pendingOpen struct {
	k     replicaKey
	id    controller.TopicID
	cfg   storage.Config
	state State
}

// openAll opens the replicas of batch, openWorkers at a time, and returns the errors of those that failed.
func (m *Manager) openAll(batch []pendingOpen, self int32) []error {
	return inParallel(len(batch), func(i int) error {
		o := &batch[i]
		err := m.open(o.k, o.id, o.cfg, self, o.state)
		if err != nil {
			m.logger.Error("opening replica", "topic", o.k.topic, "partition", o.k.partition, "err", err)
		}
		return err
	})
}

// inParallel calls fn(0) to fn(n-1) on up to openWorkers goroutines and returns their errors, by index:
// the opening and closing of many replicas, whose syncs overlap this way instead of queueing.
func inParallel(n int, fn func(i int) error) []error {
	errs := make([]error, n)
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(openWorkers, n) {
		wg.Go(func() {
			for i := range work {
				errs[i] = fn(i)
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	return errs
}

// retireGone closes the hosted replicas that img no longer places on self (their topic deleted, or
// replaced by another of the same name, or the partition moved away) and retires their directories:
// each is renamed to a name ending in deleteSuffix, the renames are made durable with one sync of the
// data directory, and the renamed directories are removed in the background. A removal that Close or a
// crash interrupts is finished at the next start (removeStrays).
func (m *Manager) retireGone(img *controller.Image, self int32) error {
	var gone []string
	for k, h := range m.snapshot() {
		if t, ok := img.Topics[k.topic]; ok && t.ID == h.id && placedOn(img, k, self) {
			continue
		}
		m.mu.Lock()
		delete(m.replicas, k)
		m.mu.Unlock()
		h.r.stop()
		if err := h.r.log.Close(); err != nil && !errors.Is(err, storage.ErrClosed) {
			m.logger.Warn("closing deleted replica", "topic", k.topic, "partition", k.partition, "err", err)
		}
		gone = append(gone, k.dirName())
	}
	if len(gone) > 0 {
		m.logger.Info("deleting replicas", "count", len(gone))
	}
	return m.retire(gone)
}

// retire renames the replica directories names to names ending in deleteSuffix, makes the renames
// durable with one sync of the data directory, and removes the renamed directories in the background.
// It returns the errors of those it could not rename, or of the sync.
func (m *Manager) retire(names []string) error {
	var gone []string
	var errs []error
	for _, name := range names {
		to, err := m.renameAway(name)
		if err != nil {
			errs = append(errs, err)
		} else if to != "" {
			gone = append(gone, to)
		}
	}
	if len(gone) == 0 {
		return errors.Join(errs...)
	}
	if err := m.fs.SyncDir(m.dataDir); err != nil {
		return errors.Join(append(errs, fmt.Errorf("partition: delete replicas: %w", err))...)
	}
	m.removeInBackground(gone)
	return errors.Join(errs...)
}

// removeInBackground removes the directories dirs (renamed away already) on a goroutine of their own,
// each file cut down in steps first (shrinkPaced), which Close stops between two steps; what is left
// then is removed at the next start.
func (m *Manager) removeInBackground(dirs []string) {
	m.removing.Go(func() {
		for _, dir := range dirs {
			if m.ctx.Err() != nil {
				return
			}
			err := m.shrinkDir(dir)
			if err == nil && m.ctx.Err() == nil {
				err = m.fs.RemoveAll(dir)
			}
			if err != nil {
				m.logger.Warn("removing a deleted replica's directory; retried at the next start", "dir", filepath.Base(dir), "err", err)
			}
		}
	})
}

// deleteStep and deletePace set how fast a removed replica's files are given back to the filesystem:
// cut from the end deleteStep at a time, deletePace apart (about 100 MiB/s), before they are unlinked.
// Unlinking a large file frees all its blocks in one journal commit; on a disk mounted with discard
// that commit's discards held every fsync of the disk for 30-50 ms per 400 MB on a quiet development
// machine (up to hundreds of ms under load), and every acks=all producer with them. Cut in steps, the
// frees spread over many small commits: 4-17 ms at most in the same probe (docs/scaling.md).
const (
	deleteStep = 2 << 20
	deletePace = 20 * time.Millisecond
)

// shrinkDir cuts every file of dir larger than deleteStep down to it, deleteStep at a time, deletePace
// apart; it returns early, with nil, when the Manager closes.
func (m *Manager) shrinkDir(dir string) error {
	names, err := m.fs.ReadDir(dir)
	if err != nil {
		if vfs.IsNotExist(err) {
			return nil
		}
		return err
	}
	for _, name := range names {
		if err := m.shrinkPaced(filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// shrinkPaced cuts the file at path down to deleteStep bytes from the end, deleteStep at a time.
func (m *Manager) shrinkPaced(path string) error {
	info, err := m.fs.Stat(path)
	if err != nil || info.IsDir() || info.Size() <= deleteStep {
		return nil // gone already, a directory RemoveAll handles, or small enough to unlink at once
	}
	f, err := m.fs.OpenAppend(path)
	if err != nil {
		return err
	}
	defer f.Close()
	pace := time.NewTimer(deletePace)
	defer pace.Stop()
	for size := info.Size() - deleteStep; size > 0; size -= deleteStep {
		if err := f.Truncate(size); err != nil {
			return err
		}
		pace.Reset(deletePace)
		select {
		case <-m.ctx.Done():
			return nil
		case <-pace.C:
		}
	}
	return nil
}
