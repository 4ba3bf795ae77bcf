package txn

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/clock/clocktest"
	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/vfs"
)

const coordDataDir = "/var/weir"

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// replicaMarkers writes markers to the env's real replicas, or fails every partition while failing is
// set.
type replicaMarkers struct {
	replicas *partition.Manager
	failing  atomic.Bool
	calls    atomic.Int32
}

func (w *replicaMarkers) WriteMarkers(ctx context.Context, m partition.Marker, parts []TopicPartition) []error {
	w.calls.Add(1)
	errs := make([]error, len(parts))
	for i, tp := range parts {
		if w.failing.Load() {
			errs[i] = partition.ErrLeaderUnreachable
			continue
		}
		r, ok := w.replicas.Replica(tp.Topic, tp.Partition)
		if !ok {
			errs[i] = partition.ErrNotLeader
			continue
		}
		_, wait, err := r.WriteMarker(m)
		if err == nil {
			err = wait(ctx)
		}
		errs[i] = err
	}
	return errs
}

// coordEnv is one node's metadata store and replicas on an in-memory filesystem, with a data topic "t"
// of two partitions and __transaction_state of one.
type coordEnv struct {
	t        *testing.T
	clock    *clocktest.Manual
	store    *controller.Store
	replicas *partition.Manager
	markers  *replicaMarkers
	nextPID  atomic.Int64
}

func newCoordEnv(t *testing.T) *coordEnv {
	t.Helper()
	fsys := vfs.NewMem()
	clock := clocktest.NewManual(t0)
	store, err := controller.OpenLocal(fsys, filepath.Join(coordDataDir, "controller"), controller.Broker{NodeID: 1, Host: "h", Port: 9092}, clock)
	if err != nil {
		t.Fatal(err)
	}
	replicas, err := partition.NewManager(coordDataDir, partition.ManagerOptions{FS: fsys, Logger: quietLog, MaintainTicks: make(chan time.Time)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = replicas.Close()
		_ = store.Close()
	})
	if _, err := store.CreateTopicSpec(ctx(t), controller.TopicSpec{Name: "t", Partitions: 2, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	e := &coordEnv{t: t, clock: clock, store: store, replicas: replicas, markers: &replicaMarkers{replicas: replicas}}
	e.nextPID.Store(100)
	return e
}

// start returns a coordinator of the env (its topic created by a Locate), closed when the test ends.
func (e *coordEnv) start() *Coordinator {
	e.t.Helper()
	c, err := NewCoordinator(Options{
		NodeID: 1, Metadata: e.store, Replicas: e.replicas, Clock: e.clock, Markers: e.markers,
		ProducerIDs: func(context.Context) (int64, error) { return e.nextPID.Add(1), nil },
		Config:      Config{StatePartitions: 1, AbortInterval: time.Second}, Logger: quietLog,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(c.Close)
	if _, err := c.Locate(ctx(e.t), "tx"); err != nil {
		e.t.Fatal(err)
	}
	e.replicas.Submit(e.store.Image())
	if err := e.replicas.WaitReconciled(ctx(e.t), e.store.Image().Version); err != nil {
		e.t.Fatal(err)
	}
	c.Reconcile(e.store.Image())
	return c
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// eventually polls cond until it holds; the bound is only a guard against a hang.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	c := ctx(t)
	for !cond() {
		select {
		case <-c.Done():
			t.Fatalf("never: %s", what)
		case <-time.After(time.Millisecond):
		}
	}
}

// initLoaded retries InitProducerID while the shard loads.
func initLoaded(t *testing.T, c *Coordinator, id string, timeout time.Duration) ProducerIDEpoch {
	t.Helper()
	var p ProducerIDEpoch
	var err error
	eventually(t, "the shard serves", func() bool {
		p, err = c.InitProducerID(ctx(t), id, timeout, ProducerIDEpoch{ProducerID: NoProducerID, ProducerEpoch: -1})
		return !errors.Is(err, ErrLoadInProgress) && !errors.Is(err, ErrConcurrentTransactions)
	})
	if err != nil {
		t.Fatalf("init %s: %v", id, err)
	}
	return p
}

func (e *coordEnv) state(c *Coordinator, id string) State {
	d, err := c.Describe(ctx(e.t), id)
	if err != nil {
		return -1
	}
	return d.State
}

// markersIn returns the commit flag of every marker in partition p of "t".
func (e *coordEnv) markersIn(p int32) []bool {
	e.t.Helper()
	r, ok := e.replicas.Replica("t", p)
	if !ok {
		e.t.Fatalf("no replica t-%d", p)
	}
	res, err := r.Read(0, 1<<20, false)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []bool
	for batch, err := range record.Batches(res.Records) {
		if err != nil {
			e.t.Fatal(err)
		}
		if h, _ := record.ParseHeader(batch); h.Control() {
			m, err := record.ParseMarker(batch)
			if err != nil {
				e.t.Fatal(err)
			}
			out = append(out, m.Commit)
		}
	}
	return out
}

var tpT0, tpT1 = TopicPartition{Topic: "t", Partition: 0}, TopicPartition{Topic: "t", Partition: 1}

func TestCoordinatorCommitWritesMarkersAndReloads(t *testing.T) {
	e := newCoordEnv(t)
	c := e.start()
	p := initLoaded(t, c, "tx", time.Minute)
	if p.ProducerID != 101 || p.ProducerEpoch != 0 {
		t.Fatalf("init: %+v", p)
	}
	if err := c.AddPartitions(ctx(t), "tx", p, []TopicPartition{tpT0, tpT1}); err != nil {
		t.Fatal(err)
	}
	if err := c.EndTxn(ctx(t), "tx", p, true); err != nil {
		t.Fatal(err)
	}
	eventually(t, "CompleteCommit", func() bool { return e.state(c, "tx") == CompleteCommit })
	for part := range int32(2) {
		if got := e.markersIn(part); !reflect.DeepEqual(got, []bool{true}) {
			t.Fatalf("t-%d markers %v", part, got)
		}
	}
	before, err := c.Describe(ctx(t), "tx")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	again := e.start()
	eventually(t, "the reload", func() bool {
		d, err := again.Describe(ctx(t), "tx")
		return err == nil && reflect.DeepEqual(d, before)
	})
	// The epoch keeps counting from the reloaded state.
	if p := initLoaded(t, again, "tx", time.Minute); p.ProducerID != 101 || p.ProducerEpoch != 1 {
		t.Fatalf("init after the reload: %+v", p)
	}
}

func TestCoordinatorReloadFinishesPrepare(t *testing.T) {
	e := newCoordEnv(t)
	c := e.start()
	p := initLoaded(t, c, "tx", time.Minute)
	if err := c.AddPartitions(ctx(t), "tx", p, []TopicPartition{tpT0}); err != nil {
		t.Fatal(err)
	}
	e.markers.failing.Store(true)
	if err := c.EndTxn(ctx(t), "tx", p, false); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a marker attempt", func() bool { return e.markers.calls.Load() > 0 })
	if st := e.state(c, "tx"); st != PrepareAbort {
		t.Fatalf("state %v with the markers failing", st)
	}
	if err := c.EndTxn(ctx(t), "tx", p, false); !errors.Is(err, ErrConcurrentTransactions) {
		t.Fatalf("retried abort while the markers fail: %v", err)
	}
	c.Close()
	e.markers.failing.Store(false)
	again := e.start()
	eventually(t, "CompleteAbort after the reload", func() bool { return e.state(again, "tx") == CompleteAbort })
	if got := e.markersIn(0); !reflect.DeepEqual(got, []bool{false}) {
		t.Fatalf("markers %v", got)
	}
	if err := again.EndTxn(ctx(t), "tx", p, false); err != nil {
		t.Fatalf("retried abort once complete: %v", err)
	}
}

func TestCoordinatorMarkersRetried(t *testing.T) {
	e := newCoordEnv(t)
	c := e.start()
	p := initLoaded(t, c, "tx", time.Minute)
	if err := c.AddPartitions(ctx(t), "tx", p, []TopicPartition{tpT1}); err != nil {
		t.Fatal(err)
	}
	e.markers.failing.Store(true)
	if err := c.EndTxn(ctx(t), "tx", p, true); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a marker attempt", func() bool { return e.markers.calls.Load() > 0 })
	e.markers.failing.Store(false)
	// The back-off (100ms first) runs on the coordinator's clock.
	eventually(t, "CompleteCommit after the back-off", func() bool {
		e.clock.Advance(100 * time.Millisecond)
		return e.state(c, "tx") == CompleteCommit
	})
	if got := e.markersIn(1); !reflect.DeepEqual(got, []bool{true}) {
		t.Fatalf("markers %v", got)
	}
}

func TestCoordinatorTimeoutAbortsAndExpires(t *testing.T) {
	e := newCoordEnv(t)
	c := e.start()
	p := initLoaded(t, c, "tx", 5*time.Second)
	if err := c.AddPartitions(ctx(t), "tx", p, []TopicPartition{tpT0}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(4 * time.Second)
	if st := e.state(c, "tx"); st != Ongoing {
		t.Fatalf("state %v before the timeout", st)
	}
	eventually(t, "the abort at the timeout", func() bool {
		e.clock.Advance(time.Second)
		return e.state(c, "tx") == CompleteAbort
	})
	d, err := c.Describe(ctx(t), "tx")
	if err != nil || d.ProducerEpoch != 1 {
		t.Fatalf("after the timeout: %+v, %v", d, err)
	}
	if err := c.EndTxn(ctx(t), "tx", p, true); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("the timed-out producer's commit: %v", err)
	}
	if got := e.markersIn(0); !reflect.DeepEqual(got, []bool{false}) {
		t.Fatalf("markers %v", got)
	}
	e.clock.Advance(DefaultIDExpiration)
	eventually(t, "the id's expiry", func() bool {
		e.clock.Advance(time.Second)
		_, err := c.Describe(ctx(t), "tx")
		return errors.Is(err, ErrTransactionalIDNotFound)
	})
	c.Close()
	again := e.start()
	eventually(t, "the reload", func() bool {
		_, err := again.Describe(ctx(t), "tx")
		return errors.Is(err, ErrTransactionalIDNotFound)
	})
}

func TestCoordinatorRefusals(t *testing.T) {
	e := newCoordEnv(t)
	c := e.start()
	initLoaded(t, c, "tx", time.Minute)
	none := ProducerIDEpoch{ProducerID: NoProducerID, ProducerEpoch: -1}
	if _, err := c.InitProducerID(ctx(t), "tx", 16*time.Minute, none); !errors.Is(err, ErrInvalidTransactionTimeout) {
		t.Fatalf("timeout over the max: %v", err)
	}
	if _, err := c.InitProducerID(ctx(t), "", time.Minute, none); !errors.Is(err, ErrInvalidTransactionalID) {
		t.Fatalf("empty id: %v", err)
	}
	long := string(make([]byte, IDBytesMax+1))
	if _, err := c.InitProducerID(ctx(t), long, time.Minute, none); !errors.Is(err, ErrInvalidTransactionalID) {
		t.Fatalf("long id: %v", err)
	}
	if ds, err := c.List(ctx(t)); err != nil || len(ds) != 1 || ds[0].ID != "tx" {
		t.Fatalf("listed %+v, %v", ds, err)
	}
	c.Close()
	if _, err := c.InitProducerID(ctx(t), "tx", time.Minute, none); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("after Close: %v", err)
	}
}
