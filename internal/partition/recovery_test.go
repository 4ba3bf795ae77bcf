package partition

import (
	"bytes"
	"context"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/vfs"
)

// capturedLogs is a slog handler's output, safe to read while replicas log.
type capturedLogs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *capturedLogs) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

// lines returns the logged lines that contain substr.
func (c *capturedLogs) lines(substr string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for line := range strings.Lines(c.buf.String()) {
		if strings.Contains(line, substr) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// TestManagerRecoverySummary: a Manager that starts on a data directory after an unclean stop (a
// crash clone of the in-memory FS: no clean-shutdown marker, a torn tail on one log) logs one line
// saying how many logs it found, how many it recovered, how many bytes it cut and how long it took;
// a later pass logs nothing more, and after a clean stop the line says none needed recovery.
func TestManagerRecoverySummary(t *testing.T) {
	mem := vfs.NewMem()
	clock := &fakeClock{time.UnixMilli(1e12)}
	store := openStore(t, mem, clock)
	if _, err := store.CreateTopic(context.Background(), "a", 2, nil, false); err != nil {
		t.Fatal(err)
	}
	start := func(fsys vfs.FS) (*Manager, *capturedLogs) {
		t.Helper()
		logs := &capturedLogs{}
		m, err := NewManager(dataDir, ManagerOptions{FS: fsys, Clock: clock, MaintainTicks: make(chan time.Time),
			Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Reconcile(store.Image()); err != nil {
			t.Fatal(err)
		}
		return m, logs
	}

	m, logs := start(mem)
	if got := logs.lines("data directory's logs"); len(got) != 0 {
		t.Fatalf("a new data directory logged a recovery summary: %q", got)
	}
	r, _ := m.Replica("a", 0)
	appendWait(t, r, plain(3, 1))
	torn := []byte("a torn batch that never finished")
	f, err := mem.OpenAppend(filepath.Join(dataDir, "a-0", "00000000000000000000.log"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(torn); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	crashed := mem.CrashClone(rand.New(rand.NewPCG(1, 1)), vfs.CrashOptions{KeepUnsyncedProbability: 1})
	_ = f.Close()
	_ = m.Close()

	m, logs = start(crashed)
	want := "msg=\"recovered the data directory's logs after an unclean stop\" data_dir=" + dataDir +
		" logs=2 recovered=2 truncated_bytes=" + strconv.Itoa(len(torn)) + " took="
	if got := logs.lines("data directory's logs"); len(got) != 1 || !strings.Contains(got[0], want) {
		t.Fatalf("after the crash, summary lines %q, want one with %q", got, want)
	}
	if err := m.Reconcile(store.Image()); err != nil {
		t.Fatal(err)
	}
	if got := logs.lines("data directory's logs"); len(got) != 1 {
		t.Fatalf("a second pass logged the summary again: %q", got)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	m, logs = start(crashed)
	defer m.Close()
	want = "msg=\"opened the data directory's logs: every one was shut down cleanly, none needed recovery\" data_dir=" +
		dataDir + " logs=2 took="
	if got := logs.lines("data directory's logs"); len(got) != 1 || !strings.Contains(got[0], want) {
		t.Fatalf("after a clean stop, summary lines %q, want one with %q", got, want)
	}
}
