package partition

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/storage"
	"github.com/weir-mq/weir/internal/vfs"
)

// txnHdr is the header of a transactional data batch.
func txnHdr(pid int64, epoch int16, seq int32, n int32, base int64) record.Header {
	h := hdr(pid, epoch, seq, n, base)
	h.Attributes = 0x10
	return h
}

// markerHdr is the header of a marker batch at base.
func markerHdr(pid int64, epoch int16, base int64) record.Header {
	h := hdr(pid, epoch, -1, 1, base)
	h.Attributes = 0x30
	return h
}

func TestProducerTxnRules(t *testing.T) {
	p := newProducers()
	abort := &record.Marker{CoordinatorEpoch: 3}
	p.update(txnHdr(1, 0, 0, 2, 0), nil)
	if _, err := p.check(hdr(1, 0, 2, 1, 2)); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("non-transactional batch in an open transaction: %v", err)
	}
	if _, err := p.check(txnHdr(1, 0, 2, 1, 2)); err != nil {
		t.Fatalf("next transactional batch: %v", err)
	}
	if err := p.checkMarker(markerHdr(1, -1, 2), *abort, 0); err != nil && !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("marker of an older epoch: %v", err)
	} else if err == nil {
		t.Fatal("marker of an older epoch taken")
	}
	if a, ok := p.update(markerHdr(1, 0, 2), abort); !ok || a != (abortedRange{producerID: 1, first: 0, last: 2, lso: 3}) {
		t.Fatalf("abort: %+v %v", a, ok)
	}
	// The closed transaction holds the last stable offset back until the high watermark passes its
	// marker.
	for _, c := range []struct {
		hw   int64
		want bool
	}{{2, true}, {3, false}} {
		hw, want := c.hw, c.want
		p.settle(hw)
		if first, ok := p.firstUnstable(); ok != want || (ok && first != 0) {
			t.Fatalf("high watermark %d: first unstable %d %v", hw, first, ok)
		}
	}
	if err := p.checkMarker(markerHdr(1, 0, 3), record.Marker{CoordinatorEpoch: 2}, 0); !errors.Is(err, ErrTransactionCoordinatorFenced) {
		t.Fatalf("marker of an older coordinator: %v", err)
	}
	// A retried marker finds no open transaction: taken, nothing aborted.
	if err := p.checkMarker(markerHdr(1, 0, 3), *abort, 0); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.update(markerHdr(1, 0, 3), abort); ok || len(p.aborted) != 1 {
		t.Fatalf("second marker aborted again: %+v", p.aborted)
	}
	if _, err := p.check(hdr(1, 0, 2, 1, 4)); err != nil {
		t.Fatalf("non-transactional batch after the transaction: %v", err)
	}

	// A coordinator that fenced the producer writes its marker at the bumped epoch: it closes the
	// older epoch's transaction and the older epoch is refused from then on.
	p.update(txnHdr(2, 4, 0, 1, 10), nil)
	p.update(txnHdr(3, 0, 0, 1, 11), nil)
	if id, first, ok := p.oldestOpen(); !ok || id != 2 || first != 10 {
		t.Fatalf("oldest open %d %d %v", id, first, ok)
	}
	if a, ok := p.update(markerHdr(2, 5, 12), abort); !ok || a != (abortedRange{producerID: 2, first: 10, last: 12, lso: 11}) {
		t.Fatalf("fencing abort: %+v %v", a, ok)
	}
	if p.m[2].epoch != 5 {
		t.Fatalf("epoch after the fencing marker %d", p.m[2].epoch)
	}
	if _, err := p.check(txnHdr(2, 4, 1, 1, 13)); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("zombie batch after the fence: %v", err)
	}
	if _, err := p.check(txnHdr(2, 5, 0, 1, 13)); err != nil {
		t.Fatalf("first batch of the new epoch: %v", err)
	}

	// Eviction never drops an open transaction's producer; it drops aborted entries below the start.
	p.evictBefore(100)
	if _, ok := p.m[3]; !ok {
		t.Fatal("producer 3 with an open transaction evicted")
	}
	if _, ok := p.m[1]; ok || len(p.aborted) != 0 {
		t.Fatalf("after eviction: producer 1 kept %v, aborted %+v", ok, p.aborted)
	}
}

func TestAbortedIn(t *testing.T) {
	index := []abortedRange{
		{producerID: 1, first: 0, last: 5, lso: 2},
		{producerID: 2, first: 2, last: 8, lso: 9},
		{producerID: 3, first: 9, last: 12, lso: 13},
	}
	ids := func(as []AbortedTxn) []int64 {
		var out []int64
		for _, a := range as {
			out = append(out, a.ProducerID)
		}
		return out
	}
	for _, tc := range []struct {
		from, to int64
		want     []int64
	}{
		{0, 1, []int64{1}},
		{0, 3, []int64{1, 2}},
		{6, 9, []int64{2}},
		{6, 20, []int64{2, 3}},
		{9, 10, []int64{3}},
		{13, 20, nil},
	} {
		if got := ids(abortedIn(index, tc.from, tc.to)); !slices.Equal(got, tc.want) {
			t.Errorf("[%d, %d): %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
}

// writeMarker writes a marker and waits for it.
func writeMarker(t *testing.T, r *Replica, m Marker) Appended {
	t.Helper()
	a, wait, err := r.WriteMarker(m)
	if err != nil {
		t.Fatalf("marker %+v: %v", m, err)
	}
	if err := wait(testCtx(t)); err != nil {
		t.Fatalf("marker %+v: %v", m, err)
	}
	return a
}

func txnBatch(pid int64, epoch int16, seq int32, n int) batchSpec {
	s := idem(pid, epoch, seq, n)
	s.txn = true
	return s
}

// readOffsets reads from offset below the replica's bound for the isolation level and returns the
// first offset of each batch and the aborted transactions.
func readOffsets(t *testing.T, r *Replica, offset int64, committed bool) ([]int64, []AbortedTxn, ReadResult) {
	t.Helper()
	res, err := r.Read(offset, 1<<20, committed)
	if err != nil {
		t.Fatal(err)
	}
	var bases []int64
	for h := range batchMarkers(res.Records) {
		bases = append(bases, h.BaseOffset)
	}
	return bases, res.Aborted, res
}

func TestReplicaLastStableOffsetAndAbortedReads(t *testing.T) {
	mem := vfs.NewMem()
	r := openReplica(t, mem, storage.DefaultConfig())
	appendWait(t, r, plain(2, 1))          // 0-1
	appendWait(t, r, txnBatch(1, 0, 0, 2)) // 2-3
	appendWait(t, r, txnBatch(2, 0, 0, 1)) // 4
	appendWait(t, r, plain(1, 1))          // 5
	if r.HighWatermark() != 6 || r.LastStableOffset() != 2 {
		t.Fatalf("hw %d lso %d, want 6 and 2", r.HighWatermark(), r.LastStableOffset())
	}
	if id, first, ok := r.OldestOpenTxn(); !ok || id != 1 || first != 2 {
		t.Fatalf("oldest open transaction %d %d %v", id, first, ok)
	}
	if _, _, err := r.Append(idem(1, 0, 2, 1).encode()); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("non-transactional batch in a transaction: %v", err)
	}
	bases, aborted, res := readOffsets(t, r, 0, true)
	if !slices.Equal(bases, []int64{0}) || aborted != nil || res.LastStableOffset != 2 {
		t.Fatalf("read_committed before any marker: %v %v %+v", bases, aborted, res)
	}
	if bases, _, _ := readOffsets(t, r, 2, true); bases != nil {
		t.Fatalf("read_committed between the LSO and the HW: %v", bases)
	}
	if _, err := r.DeleteRecords(3); !errors.Is(err, storage.ErrOffsetOutOfRange) {
		t.Fatalf("DeleteRecords past the LSO: %v", err)
	}

	ch := make(chan struct{}, 1)
	stop := r.Watch(ch)
	defer stop()
	writeMarker(t, r, Marker{ProducerID: 1, ProducerEpoch: 0, CoordinatorEpoch: 1}) // 6: abort
	select {
	case <-ch:
	default:
		t.Fatal("the LSO moved and no watcher woke")
	}
	if r.LastStableOffset() != 4 {
		t.Fatalf("lso after the abort %d, want 4", r.LastStableOffset())
	}
	if _, _, err := r.WriteMarker(Marker{ProducerID: 1, ProducerEpoch: 0, CoordinatorEpoch: 0}); !errors.Is(err, ErrTransactionCoordinatorFenced) {
		t.Fatalf("marker of an older coordinator: %v", err)
	}
	writeMarker(t, r, Marker{ProducerID: 2, ProducerEpoch: 0, CoordinatorEpoch: 1, Commit: true}) // 7
	if r.LastStableOffset() != 8 || r.HighWatermark() != 8 {
		t.Fatalf("after the commit: lso %d hw %d", r.LastStableOffset(), r.HighWatermark())
	}
	wantAborted := []AbortedTxn{{ProducerID: 1, FirstOffset: 2}}
	bases, aborted, _ = readOffsets(t, r, 0, true)
	if !slices.Equal(bases, []int64{0, 2, 4, 5, 6, 7}) || !slices.Equal(aborted, wantAborted) {
		t.Fatalf("read_committed after the markers: %v %v", bases, aborted)
	}
	if _, aborted, _ := readOffsets(t, r, 7, true); aborted != nil {
		t.Fatalf("a read after the abort marker lists %v", aborted)
	}
	if _, aborted, _ := readOffsets(t, r, 0, false); aborted != nil {
		t.Fatalf("read_uncommitted lists aborted transactions: %v", aborted)
	}
	// A transaction left open at a crash is open after recovery; the aborted index is rebuilt.
	appendWait(t, r, txnBatch(3, 0, 0, 1)) // 8
	appendWait(t, r, plain(1, 1))          // 9
	crashed := mem.CrashClone(rand.New(rand.NewPCG(3, 3)), vfs.CrashOptions{TornWrite: true})
	_ = r.Close()

	r2 := openReplica(t, crashed, storage.DefaultConfig())
	if r2.HighWatermark() != 10 || r2.LastStableOffset() != 8 {
		t.Fatalf("after the crash: hw %d lso %d, want 10 and 8", r2.HighWatermark(), r2.LastStableOffset())
	}
	bases, aborted, _ = readOffsets(t, r2, 0, true)
	if !slices.Equal(bases, []int64{0, 2, 4, 5, 6, 7}) || !slices.Equal(aborted, wantAborted) {
		t.Fatalf("read_committed after the crash: %v %v", bases, aborted)
	}
	if _, _, err := r2.WriteMarker(Marker{ProducerID: 1, ProducerEpoch: 0, CoordinatorEpoch: 0}); !errors.Is(err, ErrTransactionCoordinatorFenced) {
		t.Fatalf("the coordinator epoch was not rebuilt: %v", err)
	}
	ps, err := r2.Producers()
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 3 || ps[0].LastTimestamp <= 1000 || ps[1].LastTimestamp <= 1000 {
		t.Fatalf("producers %+v: the latest batch of 1 and 2 is a marker, stamped at the replica's clock", ps)
	}
	want := []ProducerState{
		{ProducerID: 1, ProducerEpoch: 0, LastSequence: 1, LastTimestamp: ps[0].LastTimestamp, CoordinatorEpoch: 1, CurrentTxnStartOffset: -1},
		{ProducerID: 2, ProducerEpoch: 0, LastSequence: 0, LastTimestamp: ps[1].LastTimestamp, CoordinatorEpoch: 1, CurrentTxnStartOffset: -1},
		{ProducerID: 3, ProducerEpoch: 0, LastSequence: 0, LastTimestamp: 1000, CoordinatorEpoch: -1, CurrentTxnStartOffset: 8},
	}
	if !slices.Equal(ps, want) {
		t.Fatalf("producers %+v\nwant %+v", ps, want)
	}
	writeMarker(t, r2, Marker{ProducerID: 3, ProducerEpoch: 0, CoordinatorEpoch: 1})
	if r2.LastStableOffset() != 11 {
		t.Fatalf("lso after the last abort %d", r2.LastStableOffset())
	}
	if _, aborted, _ := readOffsets(t, r2, 5, true); !slices.Equal(aborted, []AbortedTxn{{ProducerID: 1, FirstOffset: 2}, {ProducerID: 3, FirstOffset: 8}}) {
		t.Fatalf("aborted from 5: %v", aborted)
	}
}

func TestReplicationFollowerHasTransactionState(t *testing.T) {
	c := newSimCluster(t, 3)
	c.createTopic("t", []int32{1, 2, 3}, 2)
	if _, err := c.produce("t", txnBatch(7, 0, 0, 2)); err != nil { // 0-1
		t.Fatal(err)
	}
	if _, err := c.produce("t", txnBatch(8, 0, 0, 1)); err != nil { // 2
		t.Fatal(err)
	}
	leader := c.state("t", 0).Leader
	writeMarker(t, c.replica(leader, "t"), Marker{ProducerID: 7, ProducerEpoch: 0, CoordinatorEpoch: 4}) // 3
	if _, err := c.produce("t", plain(1, 1)); err != nil {                                               // 4
		t.Fatal(err)
	}
	sameLogs(t, c, "t", 1, 2, 3)
	c.crash(leader)
	c.apply(controller.FenceBroker{NodeID: leader})
	next := c.state("t", 0).Leader
	r := c.replica(next, "t")
	eventually(t, "the new leader's high watermark covers the log", func() bool { return r.HighWatermark() == 5 })
	if r.LastStableOffset() != 2 {
		t.Fatalf("new leader's lso %d, want 2", r.LastStableOffset())
	}
	if _, _, err := r.WriteMarker(Marker{ProducerID: 7, ProducerEpoch: 0, CoordinatorEpoch: 3}); !errors.Is(err, ErrTransactionCoordinatorFenced) {
		t.Fatalf("stale coordinator on the new leader: %v", err)
	}
	writeMarker(t, r, Marker{ProducerID: 8, ProducerEpoch: 0, CoordinatorEpoch: 4, Commit: true}) // 5
	if r.LastStableOffset() != 6 {
		t.Fatalf("lso after the commit %d", r.LastStableOffset())
	}
	bases, aborted, _ := readOffsets(t, r, 0, true)
	if !slices.Equal(bases, []int64{0, 2, 3, 4, 5}) || !slices.Equal(aborted, []AbortedTxn{{ProducerID: 7, FirstOffset: 0}}) {
		t.Fatalf("read_committed on the new leader: %v %v", bases, aborted)
	}
}

// TestReplicaWritesTxnIndex: the ABORT markers a leader appends reach the .txnindex files of the
// segments that hold them, in Kafka's 34-byte entries, and a restart finds the same aborted index.
func TestReplicaWritesTxnIndex(t *testing.T) {
	mem := vfs.NewMem()
	cfg := storage.DefaultConfig()
	cfg.SegmentBytes = 512
	r := openReplica(t, mem, cfg)
	var markers []int64
	var want []AbortedTxn
	for i := range 12 {
		pid := int64(100 + i)
		first := appendWait(t, r, txnBatch(pid, 0, 0, 3)).BaseOffset
		appendWait(t, r, plain(2, 1))
		markers = append(markers, writeMarker(t, r, Marker{ProducerID: pid, CoordinatorEpoch: 1}).BaseOffset)
		want = append(want, AbortedTxn{ProducerID: pid, FirstOffset: first})
	}
	segs := r.log.Segments()
	if len(segs) < 3 {
		t.Fatalf("only %d segments", len(segs))
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	inFiles := 0
	for _, s := range segs[:len(segs)-1] {
		size := int64(-1)
		st, err := mem.Stat(filepath.Join(replicaDir, fmt.Sprintf("%020d.txnindex", s.BaseOffset)))
		if err == nil {
			size = st.Size()
		}
		n := 0
		for _, m := range markers {
			if m >= s.BaseOffset && m < s.NextOffset {
				n++
			}
		}
		switch {
		case n == 0 && err == nil:
			t.Fatalf("segment %d has a .txnindex but no ABORT marker", s.BaseOffset)
		case n > 0 && size != int64(34*n):
			t.Fatalf("segment %d: .txnindex of %d bytes (%v), want %d entries", s.BaseOffset, size, err, n)
		}
		inFiles += n
	}
	if inFiles == 0 {
		t.Fatal("no marker in a closed segment")
	}
	r2 := openReplica(t, mem, cfg)
	var got []AbortedTxn
	for off := int64(0); off < r2.LastStableOffset(); {
		res, err := r2.Read(off, 1, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range res.Aborted {
			if !slices.Contains(got, a) {
				got = append(got, a)
			}
		}
		off = recordsEnd(res.Records)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("aborted transactions read after the restart %v, want %v", got, want)
	}
}
