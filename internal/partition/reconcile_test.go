package partition

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/clock/clocktest"
	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/vfs"
)

// Reconcile hands img to the reconciler and waits for a pass that covers it, returning what the pass
// reported: the tests' synchronous Submit and WaitReconciled. After a failed pass it waits for the retry
// that handing an image in again asks for.
func (m *Manager) Reconcile(img *controller.Image) error {
	m.rec.mu.Lock()
	retry, passed := m.rec.done >= img.Version && m.rec.doneErr != nil, m.rec.passed
	m.rec.mu.Unlock()
	m.Submit(img)
	if retry {
		<-passed
	}
	return m.WaitReconciled(context.Background(), img.Version)
}

// openerFS records, for every replica directory created, whether the goroutine that asked for it was
// started by the reconciler: the stack of the goroutine that creates it (a worker of inParallel) names the
// goroutine that started it, whose own stack must be in Manager.reconciler.
type openerFS struct {
	vfs.FS
	mu      sync.Mutex
	byDir   map[string]bool
	creator *regexp.Regexp
}

func newOpenerFS(fsys vfs.FS) *openerFS {
	return &openerFS{FS: fsys, byDir: map[string]bool{}, creator: regexp.MustCompile(`created by \S+ in goroutine (\d+)`)}
}

func (f *openerFS) MkdirAll(dir string) error {
	own := make([]byte, 64<<10)
	own = own[:runtime.Stack(own, false)]
	fromReconciler := false
	if m := f.creator.FindSubmatch(own); m != nil {
		all := make([]byte, 1<<20)
		all = all[:runtime.Stack(all, true)]
		for _, g := range strings.Split(string(all), "\n\n") {
			if strings.HasPrefix(g, "goroutine "+string(m[1])+" [") {
				fromReconciler = strings.Contains(g, "partition.(*Manager).reconciler(")
			}
		}
	}
	f.mu.Lock()
	f.byDir[dir] = fromReconciler
	f.mu.Unlock()
	return f.FS.MkdirAll(dir)
}

func (f *openerFS) openedByReconciler(dir string) (opened, byReconciler bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	by, ok := f.byDir[dir]
	return ok, by
}

// TestManagerSubmitOpensOnTheReconciler: a replica of an image that is only handed in (Submit, as a request
// handler does for a partition it finds not yet open) is opened by the Manager's reconciler, and the
// goroutine waiting for it (AwaitReplica) gets it; nothing else runs a pass.
func TestManagerSubmitOpensOnTheReconciler(t *testing.T) {
	fsys := newOpenerFS(vfs.NewMem())
	clock := &fakeClock{time.UnixMilli(1e12)}
	store := openStore(t, fsys, clock)
	m, err := NewManager(dataDir, ManagerOptions{FS: fsys, Clock: clock, Logger: quiet, MaintainTicks: make(chan time.Time)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := testCtx(t)
	if _, err := store.CreateTopic(ctx, "t", 2, nil, false); err != nil {
		t.Fatal(err)
	}
	img := store.Image()
	m.Submit(img)
	for p := range int32(2) {
		r, ok := m.AwaitReplica(ctx, "t", p, img.Version)
		if !ok {
			t.Fatalf("t-%d not opened after its image was handed in", p)
		}
		if _, _, err := r.Append(plain(1, 1).encode()); err != nil {
			t.Fatalf("append to t-%d: %v", p, err)
		}
		if opened, by := fsys.openedByReconciler(filepath.Join(dataDir, "t-"+strconv.Itoa(int(p)))); !opened || !by {
			t.Fatalf("t-%d: created %v, by the reconciler %v", p, opened, by)
		}
	}
}

// gatedFS, once armed, holds the creation of every replica directory until gate is closed, and records
// which were asked for.
type gatedFS struct {
	vfs.FS
	gate    chan struct{}
	entered chan struct{}
	armed   atomic.Bool
	mu      sync.Mutex
	dirs    map[string]bool
}

func (f *gatedFS) MkdirAll(dir string) error {
	if f.armed.Load() && filepath.Dir(dir) == dataDir {
		f.mu.Lock()
		f.dirs[dir] = true
		f.mu.Unlock()
		select {
		case f.entered <- struct{}{}:
		default:
		}
		<-f.gate
	}
	return f.FS.MkdirAll(dir)
}

func (f *gatedFS) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.dirs)
}

// TestManagerCloseStopsAPass: Close during a pass that opens many replicas stops it after the batch in
// flight and waits for it; a waiter for the pass gets ErrClosed.
func TestManagerCloseStopsAPass(t *testing.T) {
	gate := make(chan struct{})
	fsys := &gatedFS{FS: vfs.NewMem(), gate: gate, entered: make(chan struct{}, 1), dirs: map[string]bool{}}
	clock := &fakeClock{time.UnixMilli(1e12)}
	store := openStore(t, fsys, clock)
	m, err := NewManager(dataDir, ManagerOptions{FS: fsys, Clock: clock, Logger: quiet, MaintainTicks: make(chan time.Time)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if _, err := store.CreateTopic(ctx, "t", 2*openBatch, nil, false); err != nil {
		t.Fatal(err)
	}
	img := store.Image()
	waited := make(chan error, 1)
	go func() { waited <- m.WaitReconciled(ctx, img.Version) }()
	fsys.armed.Store(true)
	m.Submit(img)
	<-fsys.entered
	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	if err := <-waited; !errors.Is(err, ErrClosed) {
		t.Fatalf("waiter of the pass when the Manager closes: %v, want ErrClosed", err)
	}
	select {
	case err := <-closed:
		t.Fatalf("Close returned while the pass was still opening replicas: %v", err)
	case <-time.After(10 * time.Millisecond):
	}
	close(gate)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if n := len(m.snapshot()); n != 0 {
		t.Fatalf("%d replicas left open after Close", n)
	}
	if opened := fsys.count(); opened > openBatch {
		t.Fatalf("the pass went on past its batch after Close: %d replicas created", opened)
	}
}

// truncateLog is a filesystem that records the sizes files are truncated to.
type truncateLog struct {
	vfs.FS
	mu    sync.Mutex
	sizes []int64
}

func (l *truncateLog) OpenAppend(name string) (vfs.File, error) {
	f, err := l.FS.OpenAppend(name)
	if err != nil {
		return nil, err
	}
	return &truncateFile{File: f, log: l}, nil
}

type truncateFile struct {
	vfs.File
	log *truncateLog
}

func (f *truncateFile) Truncate(size int64) error {
	f.log.mu.Lock()
	f.log.sizes = append(f.log.sizes, size)
	f.log.mu.Unlock()
	return f.File.Truncate(size)
}

// TestRemovedReplicaShrinksInSteps: a removed replica's large file is cut from the end deleteStep at a
// time before its directory is unlinked (so that a disk mounted with discard frees its blocks over many
// commits); small files are left to the unlink; a Manager that closes stops between steps.
func TestRemovedReplicaShrinksInSteps(t *testing.T) {
	mem := vfs.NewMem()
	fsys := &truncateLog{FS: mem}
	dir := "/data/t-0.deleted"
	if err := mem.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	write := func(name string, size int) {
		f, err := mem.Create(dir + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(make([]byte, size)); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	write("00000000000000000000.log", 5*deleteStep+1)
	write("00000000000000000000.index", 100)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := &Manager{fs: fsys, ctx: ctx}
	if err := m.shrinkDir(dir); err != nil {
		t.Fatal(err)
	}
	want := []int64{4*deleteStep + 1, 3*deleteStep + 1, 2*deleteStep + 1, deleteStep + 1, 1}
	if !slices.Equal(fsys.sizes, want) {
		t.Fatalf("truncated to %v, want %v", fsys.sizes, want)
	}
	if info, err := mem.Stat(dir + "/00000000000000000000.index"); err != nil || info.Size() != 100 {
		t.Fatalf("the small file: %v %v", info, err)
	}

	fsys.sizes = nil
	write("00000000000000000001.log", 5*deleteStep)
	cancel()
	if err := m.shrinkDir(dir); err != nil || len(fsys.sizes) > 1 {
		t.Fatalf("after close: %v, truncated to %v; want one step at most", err, fsys.sizes)
	}
}

// staleISR refuses every ISR change as the controller refuses one from a leader whose epoch is gone.
type staleISR struct{}

func (staleISR) AlterPartition(context.Context, controller.AlterPartition) (*controller.PartitionState, error) {
	return nil, fmt.Errorf("%w: another leader at a newer epoch", controller.ErrStaleEpoch)
}

// An ISR change refused as stale means the replica missed an image: the refusal wakes the reconciler,
// which passes over the newest image the node knows (Latest) though nobody handed it in, and the replica
// follows the new leader. The node's image goroutine hands images to the Manager and then to the
// coordinators; held up in a coordinator, it once left the node's replicas leading at their old epoch
// for good, proposing ISR shrinks the controller refused (docs/controller.md, "Broker leases").
func TestManagerStaleISRChangePassesOverLatest(t *testing.T) {
	img := controller.NewImage("c", 1)
	apply := func(cmd controller.Command) {
		t.Helper()
		next, err := controller.Apply(img, cmd)
		if err != nil {
			t.Fatalf("apply %T: %v", cmd, err)
		}
		img = next
	}
	for id := int32(1); id <= 2; id++ {
		apply(controller.RegisterBroker{Broker: controller.Broker{NodeID: id, Host: "n", Port: id, Incarnation: "a"}})
	}
	apply(controller.CreateTopic{Name: "t", ID: controller.TopicID{1}, Partitions: 1, Replicas: [][]int32{{1, 2}}})
	var latest atomic.Pointer[controller.Image]
	latest.Store(img)
	clock := clocktest.NewManual(time.UnixMilli(1e12))
	isrTicks := make(chan time.Time)
	m, err := NewManager(dataDir, ManagerOptions{FS: vfs.NewMem(), Clock: clock, Logger: quiet, NodeID: 1, ISR: staleISR{},
		Latest: latest.Load, MaintainTicks: make(chan time.Time), ISRTicks: isrTicks, ReplicaLagMax: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Reconcile(img); err != nil {
		t.Fatal(err)
	}
	r, ok := m.Replica("t", 0)
	if !ok || !r.IsLeader() || r.LeaderEpoch() != 0 {
		t.Fatalf("t-0 before the fence: hosted %v, leader %v, epoch %d", ok, ok && r.IsLeader(), r.LeaderEpoch())
	}
	apply(controller.FenceBroker{NodeID: 1})
	if st, _ := img.Topics["t"].Partition(0); st.Leader != 2 || st.LeaderEpoch != 1 {
		t.Fatalf("after the fence: leader %d epoch %d, want 2 at 1", st.Leader, st.LeaderEpoch)
	}
	latest.Store(img)
	clock.Advance(2 * time.Second)
	isrTicks <- clock.Now()
	ctx := testCtx(t)
	for r.IsLeader() || r.LeaderEpoch() != 1 {
		select {
		case <-ctx.Done():
			t.Fatalf("t-0 still leader %v at epoch %d after its ISR change was refused as stale", r.IsLeader(), r.LeaderEpoch())
		case <-time.After(time.Millisecond):
		}
	}
}
