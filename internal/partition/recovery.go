package partition

import (
	"log/slog"
	"sync"
	"time"

	"github.com/weir-mq/weir/internal/storage"
)

// recoveryTally adds up what opening the replicas' logs found (storage.Recovery), for the one line a
// Manager logs about its data directory once its first reconciliation is complete: how many logs
// were there, how many had no clean-shutdown marker and were recovered, how many bytes of torn tail
// were cut, and how long opening took.
type recoveryTally struct {
	mu        sync.Mutex
	started   time.Time
	reported  bool
	logs      int
	unclean   int
	truncated int64
}

func (t *recoveryTally) add(r storage.Recovery) {
	if !r.Existing {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.logs++
	if r.Unclean {
		t.unclean++
	}
	t.truncated += r.TruncatedBytes
}

// report logs the summary the first time it is called, unless the directory held no log.
func (t *recoveryTally) report(logger *slog.Logger, dataDir string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reported {
		return
	}
	t.reported = true
	if t.logs == 0 {
		return
	}
	took := now.Sub(t.started).Round(time.Millisecond)
	if t.unclean == 0 {
		logger.Info("opened the data directory's logs: every one was shut down cleanly, none needed recovery",
			"data_dir", dataDir, "logs", t.logs, "took", took)
		return
	}
	logger.Info("recovered the data directory's logs after an unclean stop",
		"data_dir", dataDir, "logs", t.logs, "recovered", t.unclean, "truncated_bytes", t.truncated, "took", took)
}
