package partition

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/vfs"
)

const dataDir = "/var/weir"

type managerEnv struct {
	t     *testing.T
	fs    vfs.FS
	store *controller.Store
	m     *Manager
	ticks chan time.Time
}

func newManagerEnv(t *testing.T, fsys vfs.FS) *managerEnv {
	t.Helper()
	clock := &fakeClock{time.UnixMilli(1e12)}
	store, err := controller.OpenLocal(fsys, filepath.Join(dataDir, "controller"), controller.Broker{NodeID: 1, Host: "h", Port: 9092}, clock)
	if err != nil {
		t.Fatal(err)
	}
	e := &managerEnv{t: t, fs: fsys, store: store, ticks: make(chan time.Time)}
	e.m, err = NewManager(dataDir, ManagerOptions{FS: fsys, Clock: clock, Logger: quiet, MaintainTicks: e.ticks})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.m.Close()
		_ = store.Close()
	})
	return e
}

// openStore opens a single-node controller store of broker 1 in dataDir on fsys, closed when the test ends.
func openStore(t *testing.T, fsys vfs.FS, clock *fakeClock) *controller.Store {
	t.Helper()
	store, err := controller.OpenLocal(fsys, filepath.Join(dataDir, "controller"), controller.Broker{NodeID: 1, Host: "h", Port: 9092}, clock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store
}

func (e *managerEnv) reconcile() {
	e.t.Helper()
	if err := e.m.Reconcile(e.store.Image()); err != nil {
		e.t.Fatal(err)
	}
	e.m.removing.Wait() // deleted replicas' directories are removed in the background
}

func (e *managerEnv) dirs() []string {
	e.t.Helper()
	names, err := e.fs.ReadDir(dataDir)
	if err != nil {
		e.t.Fatal(err)
	}
	return slices.DeleteFunc(names, func(n string) bool { return n == "controller" || n == hwCheckpointFile })
}

func TestManagerReconcile(t *testing.T) {
	e := newManagerEnv(t, vfs.NewMem())
	ctx := context.Background()
	a, err := e.store.CreateTopic(ctx, "a", 2, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.CreateTopic(ctx, "b", 1, map[string]string{"retention.ms": "1000"}, false); err != nil {
		t.Fatal(err)
	}
	e.reconcile()
	if got := e.dirs(); !slices.Equal(got, []string{"a-0", "a-1", "b-0"}) {
		t.Fatalf("dirs %v", got)
	}
	id, found, err := e.m.readTopicID(filepath.Join(dataDir, "a-1"))
	if err != nil || !found || id != a.ID {
		t.Fatalf("partition.metadata of a-1: %v %v %v", id, found, err)
	}
	r, ok := e.m.Replica("b", 0)
	if !ok {
		t.Fatal("no replica b-0")
	}
	if cfg := r.log.Config(); cfg.RetentionAge != time.Second {
		t.Fatalf("b-0 retention %v", cfg.RetentionAge)
	}
	if _, ok := e.m.Replica("b", 1); ok {
		t.Fatal("replica b-1 exists")
	}
	appendWait(t, r, plain(1, 1))

	if err := e.store.AlterConfigs(ctx, "b", map[string]string{"retention.ms": "5000"}, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := e.store.CreatePartitions(ctx, "b", 2, false); err != nil {
		t.Fatal(err)
	}
	e.reconcile()
	if cfg := r.log.Config(); cfg.RetentionAge != 5*time.Second {
		t.Fatalf("b-0 retention after alter %v", cfg.RetentionAge)
	}
	if _, ok := e.m.Replica("b", 1); !ok {
		t.Fatal("no replica b-1 after CreatePartitions")
	}

	if err := e.store.DeleteTopic(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	e.reconcile()
	if got := e.dirs(); !slices.Equal(got, []string{"b-0", "b-1"}) {
		t.Fatalf("dirs after delete %v", got)
	}
	if _, ok := e.m.Replica("a", 0); ok {
		t.Fatal("replica of a deleted topic still served")
	}

	// Deleted and recreated under the same name: the old records must not reappear.
	if err := e.store.DeleteTopic(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.CreateTopic(ctx, "b", 1, nil, false); err != nil {
		t.Fatal(err)
	}
	e.reconcile()
	r, ok = e.m.Replica("b", 0)
	if !ok || r.LogEndOffset() != 0 {
		t.Fatalf("recreated topic b: ok %v, log end %d", ok, r.LogEndOffset())
	}
}

func TestManagerRestartRemovesStrays(t *testing.T) {
	mem := vfs.NewMem()
	e := newManagerEnv(t, mem)
	ctx := context.Background()
	for _, name := range []string{"keep", "gone", "renamed"} {
		if _, err := e.store.CreateTopic(ctx, name, 1, nil, false); err != nil {
			t.Fatal(err)
		}
	}
	e.reconcile()
	r, _ := e.m.Replica("keep", 0)
	appendWait(t, r, idem(3, 0, 0, 2))
	// The topics change while the manager is down (as if it crashed before reconciling), and a
	// deletion was interrupted after its rename.
	if err := e.m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.store.DeleteTopic(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if err := e.store.DeleteTopic(ctx, "renamed"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.CreateTopic(ctx, "renamed", 1, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := mem.MkdirAll(filepath.Join(dataDir, "old-0-delete")); err != nil {
		t.Fatal(err)
	}
	if err := mem.MkdirAll(filepath.Join(dataDir, "not a replica")); err != nil {
		t.Fatal(err)
	}
	_ = e.store.Close()
	crashed := mem.CrashClone(rand.New(rand.NewPCG(1, 1)), vfs.CrashOptions{KeepUnsyncedProbability: 1})

	e2 := newManagerEnv(t, crashed)
	e2.reconcile()
	if got := e2.dirs(); !slices.Equal(got, []string{"keep-0", "not a replica", "renamed-0"}) {
		t.Fatalf("dirs after restart %v", got)
	}
	r, ok := e2.m.Replica("keep", 0)
	if !ok || r.LogEndOffset() != 2 {
		t.Fatalf("keep-0 after restart: %v", ok)
	}
	if dup := appendWait(t, r, idem(3, 0, 0, 2)); !dup.Duplicate {
		t.Fatal("producer state lost across restart")
	}
	if r, _ := e2.m.Replica("renamed", 0); r.LogEndOffset() != 0 {
		t.Fatal("recreated topic kept the old topic's data")
	}
}

func TestManagerOpenFailureIsolated(t *testing.T) {
	toggle := vfs.NewToggle(vfs.OnPath("bad-0", nil))
	fsys := vfs.NewFaulty(vfs.NewMem(), toggle)
	e := newManagerEnv(t, fsys)
	ctx := context.Background()
	for _, name := range []string{"bad", "good"} {
		if _, err := e.store.CreateTopic(ctx, name, 1, nil, false); err != nil {
			t.Fatal(err)
		}
	}
	toggle.Enable()
	if err := e.m.Reconcile(e.store.Image()); err == nil {
		t.Fatal("reconcile hid a failed open")
	}
	if _, ok := e.m.Replica("good", 0); !ok {
		t.Fatal("a failing partition blocked another")
	}
	if _, ok := e.m.Replica("bad", 0); ok {
		t.Fatal("failed replica served")
	}
	toggle.Disable()
	e.reconcile()
	if _, ok := e.m.Replica("bad", 0); !ok {
		t.Fatal("failed replica not retried")
	}
}

func TestManagerMaintenance(t *testing.T) {
	e := newManagerEnv(t, vfs.NewMem())
	ctx := context.Background()
	if _, err := e.store.CreateTopic(ctx, "t", 1, map[string]string{"segment.bytes": "100", "retention.bytes": "1"}, false); err != nil {
		t.Fatal(err)
	}
	e.reconcile()
	r, _ := e.m.Replica("t", 0)
	for range 4 {
		appendWait(t, r, plain(2, 1))
	}
	// The loop takes one tick at a time, so the second send returns only after the first round ended.
	e.ticks <- time.Time{}
	e.ticks <- time.Time{}
	if r.LogStartOffset() == 0 {
		t.Fatalf("retention did not run: start %d, segments %d", r.LogStartOffset(), len(r.log.Segments()))
	}
}

func TestManagerClose(t *testing.T) {
	e := newManagerEnv(t, vfs.NewMem())
	if _, err := e.store.CreateTopic(context.Background(), "t", 1, nil, false); err != nil {
		t.Fatal(err)
	}
	e.reconcile()
	r, _ := e.m.Replica("t", 0)
	if err := e.m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Append(plain(1, 1).encode()); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after manager close: %v", err)
	}
	if err := e.m.Reconcile(e.store.Image()); !errors.Is(err, ErrClosed) {
		t.Fatalf("reconcile after close: %v", err)
	}
	if err := e.m.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second close: %v", err)
	}
}

func TestManagerParseDirName(t *testing.T) {
	tests := map[string]bool{
		"a-0": true, "a-b-12": true, "__consumer_offsets-49": true,
		"a": false, "-0": false, "a-": false, "a-01": false, "a--1": true, "a-x": false,
		"a-0-delete": false, "a b-0": false, "a-99999999999": false,
	}
	for name, ok := range tests {
		if _, got := parseDirName(name); got != ok {
			t.Errorf("parseDirName(%q) ok = %v, want %v", name, got, ok)
		}
	}
	if k, _ := parseDirName("a-b-12"); k.topic != "a-b" || k.partition != 12 {
		t.Errorf("a-b-12 -> %+v", k)
	}
}

// noISR is the ISRChanger of a cluster node whose ISR never changes in the test.
type noISR struct{}

func (noISR) AlterPartition(context.Context, controller.AlterPartition) (*controller.PartitionState, error) {
	return nil, errors.New("no controller in this test")
}

// TestManagerClusterStraysAfterGrace: a cluster node keeps a replica directory that its metadata does not
// place on it for strayGrace, since its first image may be behind the quorum's, and then deletes it, on a
// maintenance tick even when no metadata change comes.
func TestManagerClusterStraysAfterGrace(t *testing.T) {
	e := newManagerEnv(t, vfs.NewMem())
	ctx := context.Background()
	if _, err := e.store.CreateTopic(ctx, "gone", 1, nil, false); err != nil {
		t.Fatal(err)
	}
	e.reconcile()
	if err := e.m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.store.DeleteTopic(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{time.UnixMilli(1e12)}
	ticks := make(chan time.Time)
	m, err := NewManager(dataDir, ManagerOptions{FS: e.fs, Clock: clock, Logger: quiet, NodeID: 1, ISR: noISR{}, MaintainTicks: ticks})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Reconcile(e.store.Image()); err != nil {
		t.Fatal(err)
	}
	if got := e.dirs(); !slices.Equal(got, []string{"gone-0"}) {
		t.Fatalf("dirs within the grace period %v, want gone-0 kept", got)
	}
	clock.t = clock.t.Add(strayGrace)
	ticks <- clock.t
	ticks <- clock.t // the second tick starts only after the first maintenance is done
	m.removing.Wait()
	if got := e.dirs(); slices.Contains(got, "gone-0") || slices.Contains(got, "gone-0-delete") {
		t.Fatalf("dirs after the grace period %v, want gone-0 deleted", got)
	}
}

// TestManagerLogsAPassNotEachReplica: opening a topic's replicas logs one line at Info for the pass, not a
// line per replica (their first role is at Debug), so a large topic does not flood the log.
func TestManagerLogsAPassNotEachReplica(t *testing.T) {
	logs := &capturedLogs{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	clock := &fakeClock{time.UnixMilli(1e12)}
	fsys := vfs.NewMem()
	store := openStore(t, fsys, clock)
	m, err := NewManager(dataDir, ManagerOptions{FS: fsys, Clock: clock, Logger: logger, MaintainTicks: make(chan time.Time)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := store.CreateTopic(context.Background(), "t", 100, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := m.Reconcile(store.Image()); err != nil {
		t.Fatal(err)
	}
	all, pass := logs.lines(""), logs.lines("opening replicas")
	if len(all) > 3 || len(pass) != 1 || !strings.Contains(pass[0], "count=100") {
		t.Fatalf("%d lines at Info for opening 100 replicas, want the pass's one:\n%s", len(all), strings.Join(all, "\n"))
	}
}

// TestManagerCreationSurvivesPowerLoss: replicas created in one batch (their directories made durable by one
// sync of the data directory, their partition.metadata by the log's first directory sync) keep every record
// acknowledged in them through a power loss that drops everything not synced, at any moment after the
// creation, and reopen without error.
func TestManagerCreationSurvivesPowerLoss(t *testing.T) {
	for seed := range uint64(20) {
		mem := vfs.NewMem()
		e := newManagerEnv(t, mem)
		if _, err := e.store.CreateTopic(context.Background(), "t", 40, nil, false); err != nil {
			t.Fatal(err)
		}
		e.reconcile()
		acked := map[int32]int64{}
		for p := int32(0); p < 40; p += 3 {
			r, _ := e.m.Replica("t", p)
			acked[p] = appendWait(t, r, plain(2, 1)).LastOffset + 1
		}
		_ = e.store.Close()
		crashed := mem.CrashClone(rand.New(rand.NewPCG(seed, 3)), vfs.CrashOptions{KeepUnsyncedProbability: 0.5, TornWrite: true})
		e2 := newManagerEnv(t, crashed)
		e2.reconcile()
		for p := int32(0); p < 40; p++ {
			r, ok := e2.m.Replica("t", p)
			if !ok {
				t.Fatalf("seed %d: t-%d not reopened", seed, p)
			}
			if got := r.LogEndOffset(); got < acked[p] {
				t.Fatalf("seed %d: t-%d ends at %d after the crash, %d were acknowledged", seed, p, got, acked[p])
			}
		}
	}
}
