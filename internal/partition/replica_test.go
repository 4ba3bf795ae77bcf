package partition

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/storage"
	"github.com/weir-mq/weir/internal/vfs"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time { return c.t }

// After never fires: tests drive time explicitly.
func (c *fakeClock) After(time.Duration) <-chan time.Time { return nil }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

const replicaDir = "/data/t-0"

// testCtx bounds a test's waits so that a bug fails the test instead of hanging it.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func openReplica(t *testing.T, fsys vfs.FS, cfg storage.Config) *Replica {
	t.Helper()
	if err := fsys.MkdirAll("/data"); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	log, err := storage.Open(replicaDir, cfg, storage.Options{FS: fsys, Clock: &fakeClock{time.UnixMilli(1e12)}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(log, Options{Topic: "t", Partition: 0, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// appendWait appends and waits as acks=all does.
func appendWait(t *testing.T, r *Replica, s batchSpec) Appended {
	t.Helper()
	a, wait, err := r.Append(s.encode())
	if err != nil {
		t.Fatalf("append %+v: %v", s, err)
	}
	if err := wait(testCtx(t)); err != nil {
		t.Fatalf("wait %+v: %v", s, err)
	}
	return a
}

func TestReplicaAppendRead(t *testing.T) {
	r := openReplica(t, vfs.NewMem(), storage.DefaultConfig())
	a := appendWait(t, r, plain(3, 100))
	if a.BaseOffset != 0 || a.LastOffset != 2 || a.LogAppendTime != -1 || a.Duplicate {
		t.Fatalf("first append %+v", a)
	}
	a = appendWait(t, r, plain(2, 200))
	if a.BaseOffset != 3 || a.LastOffset != 4 {
		t.Fatalf("second append %+v", a)
	}
	if r.HighWatermark() != 5 || r.LogEndOffset() != 5 || r.LogStartOffset() != 0 || r.LastStableOffset() != 5 {
		t.Fatalf("hw %d leo %d", r.HighWatermark(), r.LogEndOffset())
	}
	res, err := r.Read(0, 1<<20, false)
	if err != nil {
		t.Fatal(err)
	}
	var offsets []int64
	for b, err := range record.Batches(res.Records) {
		if err != nil {
			t.Fatal(err)
		}
		h, err := record.Validate(b)
		if err != nil {
			t.Fatal(err)
		}
		offsets = append(offsets, h.BaseOffset)
	}
	if len(offsets) != 2 || offsets[0] != 0 || offsets[1] != 3 || res.HighWatermark != 5 {
		t.Fatalf("read offsets %v, result %+v", offsets, res)
	}
	if res, err := r.Read(5, 1<<20, true); err != nil || len(res.Records) != 0 {
		t.Fatalf("read at the high watermark: %d bytes, %v", len(res.Records), err)
	}
	if _, err := r.Read(6, 1<<20, false); !errors.Is(err, storage.ErrOffsetOutOfRange) {
		t.Fatalf("read past the end: %v", err)
	}
	off, ok, err := r.OffsetForTime(150)
	if err != nil || !ok || off != 3 {
		t.Fatalf("offset for time 150: %d %v %v", off, ok, err)
	}
	if _, ok, _ := r.OffsetForTime(300); ok {
		t.Fatal("offset for a time after every record")
	}
	if e, end := r.EndOffsetForEpoch(0); e != 0 || end != 5 || r.LeaderEpoch() != 0 {
		t.Fatalf("end offset for epoch 0: %d %d", e, end)
	}
}

func TestReplicaRejectsMalformed(t *testing.T) {
	r := openReplica(t, vfs.NewMem(), storage.DefaultConfig())
	two := append(plain(1, 1).encode(), plain(1, 1).encode()...)
	if _, _, err := r.Append(two); !errors.Is(err, record.ErrCorrupt) {
		t.Fatalf("two batches: %v", err)
	}
	if _, _, err := r.Append([]byte{1, 2, 3}); !errors.Is(err, record.ErrCorrupt) {
		t.Fatalf("short: %v", err)
	}
	b := plain(2, 1).encode()
	b[len(b)-1] ^= 0xff
	if _, _, err := r.Append(b); !errors.Is(err, record.ErrCorrupt) {
		t.Fatalf("bad crc: %v", err)
	}
	// A damaged retry of an idempotent batch is reported as damaged, not as a duplicate.
	appendWait(t, r, idem(9, 0, 0, 2))
	b = idem(9, 0, 0, 2).encode()
	b[len(b)-1] ^= 0xff
	if _, _, err := r.Append(b); !errors.Is(err, record.ErrCorrupt) {
		t.Fatalf("damaged duplicate: %v", err)
	}
	if r.LogEndOffset() != 2 {
		t.Fatalf("log end %d after rejected batches", r.LogEndOffset())
	}
}

func TestReplicaIdempotence(t *testing.T) {
	r := openReplica(t, vfs.NewMem(), storage.DefaultConfig())
	first := appendWait(t, r, idem(1, 0, 0, 3))
	appendWait(t, r, plain(1, 1))
	dup := appendWait(t, r, idem(1, 0, 0, 3))
	if !dup.Duplicate || dup.BaseOffset != first.BaseOffset || dup.LastOffset != first.LastOffset {
		t.Fatalf("duplicate %+v, original %+v", dup, first)
	}
	if r.LogEndOffset() != 4 {
		t.Fatalf("duplicate was appended: log end %d", r.LogEndOffset())
	}
	if _, _, err := r.Append(idem(1, 0, 4, 1).encode()); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap: %v", err)
	}
	next := appendWait(t, r, idem(1, 0, 3, 1))
	if next.BaseOffset != 4 {
		t.Fatalf("in-order append at %d", next.BaseOffset)
	}
	appendWait(t, r, idem(1, 1, 0, 1))
	if _, _, err := r.Append(idem(1, 0, 4, 1).encode()); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("fenced epoch: %v", err)
	}
}

func TestReplicaWatchWakesParkedReader(t *testing.T) {
	r := openReplica(t, vfs.NewMem(), storage.DefaultConfig())
	ch := make(chan struct{}, 1)
	stop := r.Watch(ch)
	defer stop()
	got := make(chan ReadResult, 1)
	go func() {
		// A parked fetch: wait for the high watermark to move, then read.
		ctx := testCtx(t)
		for {
			res, err := r.Read(0, 1<<20, false)
			if err != nil {
				t.Error(err)
				close(got)
				return
			}
			if len(res.Records) > 0 {
				got <- res
				return
			}
			select {
			case <-ch:
			case <-ctx.Done():
				t.Error("parked reader never woken")
				close(got)
				return
			}
		}
	}()
	// acks=1: nobody waits for durability; the replica's own worker must still move the high watermark.
	if _, _, err := r.Append(plain(2, 1).encode()); err != nil {
		t.Fatal(err)
	}
	res, ok := <-got
	if !ok {
		return
	}
	if res.HighWatermark != 2 {
		t.Fatalf("woken read %+v", res)
	}
	stop()
	stop()
}

func TestReplicaHighWatermarkWaitsForDurability(t *testing.T) {
	// The syncer's fsyncs fail: the append is written but never durable, so it must never become
	// visible and its wait must fail.
	toggle := vfs.NewToggle(vfs.OnOp(vfs.OpSync, ".log", nil))
	fsys := vfs.NewFaulty(vfs.NewMem(), toggle)
	r := openReplica(t, fsys, storage.DefaultConfig())
	toggle.Enable()
	_, wait, err := r.Append(plain(1, 1).encode())
	if err != nil {
		t.Fatal(err)
	}
	if err := wait(testCtx(t)); !errors.Is(err, storage.ErrLogOffline) {
		t.Fatalf("wait after failed fsync: %v", err)
	}
	if r.HighWatermark() != 0 {
		t.Fatalf("high watermark %d covers an undurable record", r.HighWatermark())
	}
	if res, err := r.Read(0, 1<<20, false); err != nil || len(res.Records) != 0 {
		t.Fatalf("read of an undurable record: %d bytes, %v", len(res.Records), err)
	}
}

func TestReplicaFlushNeverAdvancesAtOnce(t *testing.T) {
	cfg := storage.DefaultConfig()
	cfg.Flush = storage.FlushNever
	r := openReplica(t, vfs.NewMem(), cfg)
	a := appendWait(t, r, plain(4, 1))
	if r.HighWatermark() != a.LastOffset+1 {
		t.Fatalf("high watermark %d", r.HighWatermark())
	}
}

func TestReplicaCrashKeepsProducerState(t *testing.T) {
	mem := vfs.NewMem()
	r := openReplica(t, mem, storage.DefaultConfig())
	appendWait(t, r, idem(1, 0, 0, 2))
	appendWait(t, r, idem(2, 5, 10, 1))
	last := appendWait(t, r, idem(1, 0, 2, 3))
	// Power loss: only what was synced survives; every append above was acknowledged.
	crashed := mem.CrashClone(rand.New(rand.NewPCG(7, 7)), vfs.CrashOptions{TornWrite: true})
	_ = r.Close()

	r2 := openReplica(t, crashed, storage.DefaultConfig())
	if r2.HighWatermark() != 6 {
		t.Fatalf("high watermark after crash %d", r2.HighWatermark())
	}
	dup := appendWait(t, r2, idem(1, 0, 2, 3))
	if !dup.Duplicate || dup.BaseOffset != last.BaseOffset {
		t.Fatalf("retry after crash %+v, original %+v", dup, last)
	}
	if _, _, err := r2.Append(idem(1, 0, 9, 1).encode()); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap after crash: %v", err)
	}
	if _, _, err := r2.Append(idem(2, 4, 0, 1).encode()); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("old epoch after crash: %v", err)
	}
	if a := appendWait(t, r2, idem(2, 5, 11, 1)); a.BaseOffset != 6 {
		t.Fatalf("next batch of producer 2 at %d", a.BaseOffset)
	}
}

func TestReplicaDeleteRecords(t *testing.T) {
	r := openReplica(t, vfs.NewMem(), storage.DefaultConfig())
	appendWait(t, r, idem(1, 0, 0, 2))
	appendWait(t, r, idem(2, 0, 0, 2))
	if _, err := r.DeleteRecords(5); !errors.Is(err, storage.ErrOffsetOutOfRange) {
		t.Fatalf("delete past the high watermark: %v", err)
	}
	low, err := r.DeleteRecords(2)
	if err != nil || low != 2 || r.LogStartOffset() != 2 {
		t.Fatalf("delete before 2: %d %v", low, err)
	}
	// Producer 1's batches are gone, so it is unknown again and may restart anywhere (KIP-360);
	// producer 2 is still tracked.
	if _, _, err := r.Append(idem(1, 0, 40, 1).encode()); err != nil {
		t.Fatalf("producer 1 after its batches were deleted: %v", err)
	}
	if _, _, err := r.Append(idem(2, 0, 40, 1).encode()); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("producer 2 gap: %v", err)
	}
	if _, err := r.Read(0, 100, false); !errors.Is(err, storage.ErrOffsetOutOfRange) {
		t.Fatalf("read below the start: %v", err)
	}
	if low, err := r.DeleteRecords(1); err != nil || low != 2 {
		t.Fatalf("delete below the start: %d %v", low, err)
	}
	eventually(t, "the high watermark reaches the log end", func() bool { return r.HighWatermark() >= r.LogEndOffset() })
	if low, err := r.DeleteRecords(-1); err != nil || low != r.HighWatermark() {
		t.Fatalf("delete up to the high watermark: %d %v", low, err)
	}
}

func TestReplicaClose(t *testing.T) {
	r := openReplica(t, vfs.NewMem(), storage.DefaultConfig())
	if _, _, err := r.Append(plain(1, 1).encode()); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Append(plain(1, 1).encode()); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	if err := r.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second close: %v", err)
	}
}

func TestReplicaConcurrentAppends(t *testing.T) {
	r := openReplica(t, vfs.NewMem(), storage.DefaultConfig())
	const writers, perWriter = 4, 40
	ctx := testCtx(t)
	errs := make(chan error, writers+1)
	done := make(chan struct{})
	go func() {
		// A reader that must never see past the high watermark nor a gap.
		defer close(done)
		next := int64(0)
		for next < writers*perWriter {
			hw := r.HighWatermark()
			res, err := r.Read(next, 1<<20, false)
			if err != nil {
				errs <- err
				return
			}
			for b, err := range record.Batches(res.Records) {
				if err != nil {
					errs <- err
					return
				}
				h, _ := record.ParseHeader(b)
				if h.BaseOffset != next || h.LastOffset() >= res.HighWatermark || res.HighWatermark < hw {
					errs <- errors.New("reader saw a gap, a record above the high watermark or a falling watermark")
					return
				}
				next = h.NextOffset()
			}
			if ctx.Err() != nil {
				errs <- ctx.Err()
				return
			}
		}
	}()
	for w := range writers {
		go func() {
			for i := range perWriter {
				_, wait, err := r.Append(idem(int64(w), 0, int32(i), 1).encode())
				if err == nil {
					err = wait(ctx)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	<-done
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	if r.HighWatermark() != writers*perWriter || r.LogEndOffset() != writers*perWriter {
		t.Fatalf("high watermark %d, log end %d", r.HighWatermark(), r.LogEndOffset())
	}
}

// BenchmarkReplicaAppend measures the append path with acks=all on the OS filesystem: 16 records of
// 1 KiB per batch, 8 producers per CPU in parallel sharing group commits, under each flush policy.
func BenchmarkReplicaAppend(b *testing.B) {
	for _, flush := range []storage.FlushPolicy{storage.FlushAlways, storage.FlushNever} {
		b.Run(flush.String(), func(b *testing.B) {
			cfg := storage.DefaultConfig()
			cfg.Flush = flush
			log, err := storage.Open(filepath.Join(b.TempDir(), "t-0"), cfg, storage.Options{Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			r, err := Open(log, Options{Topic: "t", Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			batch := batchSpec{producerID: -1, epoch: -1, seq: -1, records: 16, timestamp: 1, valueBytes: 1024}.encode()
			b.SetBytes(int64(len(batch)))
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				buf := make([]byte, len(batch))
				for pb.Next() {
					copy(buf, batch)
					_, wait, err := r.Append(buf)
					if err == nil {
						err = wait(context.Background())
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

func TestReplicaDelete(t *testing.T) {
	mem := vfs.NewMem()
	r := openReplica(t, mem, storage.DefaultConfig())
	appendWait(t, r, plain(1, 1))
	if err := r.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Stat(replicaDir); !vfs.IsNotExist(err) {
		t.Fatalf("replica directory after Delete: %v", err)
	}
	if _, _, err := r.Append(plain(1, 1).encode()); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after delete: %v", err)
	}
}

func TestReplicaWithoutLeaseLeadsNothing(t *testing.T) {
	fsys := vfs.NewMem()
	if err := fsys.MkdirAll("/data"); err != nil {
		t.Fatal(err)
	}
	log, err := storage.Open(replicaDir, storage.DefaultConfig(), storage.Options{FS: fsys, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	var leased atomic.Bool
	leased.Store(true)
	lease := func() (time.Time, bool) { return time.Time{}, leased.Load() }
	r, err := Open(log, Options{Topic: "t", Partition: 0, Logger: quiet, Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	appendWait(t, r, plain(1, 1))
	leased.Store(false)
	if _, _, err := r.AppendAcks(plain(1, 2).checked(), AcksLeader); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("append without the lease: %v", err)
	}
	if err := r.CheckLeader(-1); !errors.Is(err, ErrNotLeader) || r.IsLeader() {
		t.Fatalf("without the lease: CheckLeader %v, IsLeader %v", err, r.IsLeader())
	}
	if _, _, err := r.FollowerFetch(2, 0, -1, -1); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("follower fetch without the lease: %v", err)
	}
	if _, err := r.LeaderEndOffsetForEpoch(-1, 0); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("offset for leader epoch without the lease: %v", err)
	}
	leased.Store(true)
	appendWait(t, r, plain(1, 3))
}

// wallClock is the wall clock, for tests whose waits must end by themselves.
type wallClock struct{}

func (wallClock) Now() time.Time                         { return time.Now() }
func (wallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// TestReplicaLeaseEndFailsWaitingAppends: a produce's acks=all append waiting for an ISR member that
// does not fetch waits while the lease is renewed, and gets ErrNotLeader as soon as the lease ends, not
// when its context does: a leader cut off from the controller has stepped down, and its producer must
// look for the new leader rather than wait out each request's timeout (issue 19's ~10 s stalls). A
// coordinator's write waits on.
func TestReplicaLeaseEndFailsWaitingAppends(t *testing.T) {
	fsys := vfs.NewMem()
	if err := fsys.MkdirAll("/data"); err != nil {
		t.Fatal(err)
	}
	log, err := storage.Open(replicaDir, storage.DefaultConfig(), storage.Options{FS: fsys, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	var renewing atomic.Bool
	renewing.Store(true)
	var until atomic.Int64 // unix nanoseconds
	lease := func() (time.Time, bool) {
		now := time.Now()
		if renewing.Load() {
			until.Store(now.Add(50 * time.Millisecond).UnixNano())
		}
		end := time.Unix(0, until.Load())
		return end, now.Before(end)
	}
	r, err := Open(log, Options{Topic: "t", Partition: 0, Logger: quiet, Clock: wallClock{}, Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	st := &controller.PartitionState{Replicas: []int32{0, 1}, Leader: 0, LeaderEpoch: 1, ISR: []int32{0, 1}, PartitionEpoch: 1}
	r.SetState(State{Partition: st, MinISR: 1})
	_, wait, err := r.AppendAcks(plain(1, 1).checked(), AcksAll)
	if err != nil {
		t.Fatal(err)
	}
	_, coordWait, err := r.Append(plain(1, 2).encode())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done, coordDone := make(chan error, 1), make(chan error, 1)
	go func() { done <- wait(ctx) }()
	coordCtx, stopCoord := context.WithCancel(ctx)
	go func() { coordDone <- coordWait(coordCtx) }()
	select {
	case err := <-done:
		t.Fatalf("the wait ended while the lease was renewed and node 1 had not fetched: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	renewing.Store(false)
	began := time.Now()
	err = <-done
	if !errors.Is(err, ErrNotLeader) {
		t.Fatalf("wait after the lease ended: %v, want ErrNotLeader", err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("the wait ended %v after the lease, want at its end", took)
	}
	// A coordinator's write (Append) waits on: the coordinator steps down by its own lease check.
	select {
	case err := <-coordDone:
		t.Fatalf("a coordinator's wait ended with the lease: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	stopCoord()
	if err := <-coordDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("a coordinator's wait, canceled: %v", err)
	}
	if _, _, err := r.AppendAcks(plain(1, 3).checked(), AcksAll); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("append after the lease ended: %v", err)
	}
}

// TestReplicaAcksLeaderMovesTheHighWatermark: on a leader whose ISR is itself, an acks=1 append's wait
// returns with the high watermark past the batch, as Kafka's leader has it when it answers.
func TestReplicaAcksLeaderMovesTheHighWatermark(t *testing.T) {
	r := openReplica(t, vfs.NewMem(), storage.DefaultConfig())
	for i := range 50 {
		c, err := record.Check(plain(1, int64(i)).encode())
		if err != nil {
			t.Fatal(err)
		}
		a, wait, err := r.AppendAcks(c, AcksLeader)
		if err != nil {
			t.Fatal(err)
		}
		if err := wait(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		if hw := r.HighWatermark(); hw <= a.LastOffset {
			t.Fatalf("append %d: acknowledged at %d with the high watermark at %d", i, a.LastOffset, hw)
		}
	}
}
