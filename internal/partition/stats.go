package partition

import (
	"errors"

	"github.com/weir-mq/weir/internal/storage"
)

// Stats is what the Manager's data directory has done and how its logs stand, for /metrics.
type Stats struct {
	// Sync describes the group-commit rounds of the directory's Syncer.
	Sync storage.SyncStats
	// FailedOps counts the failed writes, fsyncs, truncations and directory changes in the data
	// directory by operation (every operation named, failed or not); nil without
	// ManagerOptions.OnDirFailure, which is what watches them.
	FailedOps map[string]uint64
	// OutOfFiles counts the filesystem operations that failed for want of a file descriptor (EMFILE,
	// ENFILE): not failures of the directory, but of the node's resources.
	OutOfFiles uint64
	// OfflineLogs counts the hosted replicas whose log is offline after a failed write or fsync.
	OfflineLogs int
}

// Stats returns the data directory's Stats.
func (m *Manager) Stats() Stats {
	st := Stats{Sync: m.syncer.Stats()}
	if w, ok := m.fs.(*dirWatch); ok {
		st.FailedOps = make(map[string]uint64, len(watchedOps))
		for i, op := range watchedOps {
			st.FailedOps[op] = w.failed[i].Load()
		}
		st.OutOfFiles = w.outOfFiles.Load()
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, h := range m.replicas {
		if errors.Is(h.r.log.Err(), storage.ErrLogOffline) {
			st.OfflineLogs++
		}
	}
	return st
}
