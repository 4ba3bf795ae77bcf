package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/compress"
	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/vfs"
)

// kv is one record to write: a nil key has no key, a nil value is a tombstone.
type kv struct{ k, v []byte }

func put(k, v string) kv { return kv{[]byte(k), []byte(v)} }
func del(k string) kv    { return kv{k: []byte(k)} }

// batchSpec describes a keyed batch for compaction tests.
type batchSpec struct {
	codec    compress.Codec
	ts       int64
	attrs    int16
	pid      int64
	seq      int32
	logAppnd bool
}

func keyedBatch(t testing.TB, s batchSpec, recs ...kv) []byte {
	t.Helper()
	var body []byte
	for i, r := range recs {
		body = record.AppendRecord(body, record.Record{TimestampDelta: int64(i), OffsetDelta: int32(i), Key: r.k, Value: r.v})
	}
	body, err := compress.Encode(s.codec, body)
	if err != nil {
		t.Fatal(err)
	}
	pid, seq := s.pid, s.seq
	if pid == 0 {
		pid, seq = -1, -1
	}
	h := record.Header{Attributes: s.attrs | int16(s.codec), LastOffsetDelta: int32(len(recs) - 1),
		BaseTimestamp: s.ts, MaxTimestamp: s.ts + int64(len(recs)-1), ProducerID: pid, BaseSequence: seq,
		NumRecords: int32(len(recs))}
	return record.AppendBatch(nil, h, body)
}

// entry is one record as read back.
type entry struct {
	off  int64
	k, v string
	null bool
}

func (e entry) String() string { return fmt.Sprintf("%d:%s=%s/%v", e.off, e.k, e.v, e.null) }

// batchEntries decodes every record of concatenated batches.
func batchEntries(t testing.TB, b []byte) []entry {
	t.Helper()
	var out []entry
	for batch, err := range record.Batches(b) {
		if err != nil {
			t.Fatalf("batches: %v", err)
		}
		h, recs, ok := batchRecords(batch)
		if !ok {
			if h.Control() {
				continue
			}
			t.Fatalf("batch at %d does not decode", h.BaseOffset)
		}
		if h.NumRecords != h.LastOffsetDelta+1 {
			t.Fatalf("batch at %d: %d records, last delta %d", h.BaseOffset, h.NumRecords, h.LastOffsetDelta)
		}
		for _, r := range recs {
			out = append(out, entry{off: h.BaseOffset + int64(r.OffsetDelta), k: string(r.Key), v: string(r.Value), null: r.Value == nil})
		}
	}
	return out
}

// logEntries reads every record of the log.
func logEntries(t testing.TB, l *Log) []entry {
	t.Helper()
	var out []entry
	for off := l.StartOffset(); off < l.EndOffset(); {
		b, err := l.Read(off, 1<<20, 1<<62)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if len(b) == 0 {
			break
		}
		for batch := range record.Batches(b) {
			if _, err := record.Validate(batch); err != nil {
				t.Fatalf("read an invalid batch: %v", err)
			}
			h, _ := record.ParseHeader(batch)
			off = h.NextOffset()
		}
		out = append(out, batchEntries(t, b)...)
	}
	return out
}

// latestValues is what a consumer of a compacted topic rebuilds: each key's last value, deleted keys absent.
func latestValues(es []entry) map[string]string {
	m := map[string]string{}
	for _, e := range es {
		if e.null {
			delete(m, e.k)
		} else {
			m[e.k] = e.v
		}
	}
	return m
}

func compactConfig() Config {
	cfg := testConfig()
	cfg.SegmentBytes = 1024
	cfg.Delete, cfg.Compact = false, true
	cfg.DeleteRetention = time.Hour
	return cfg
}

// maintainAll calls Maintain until a pass changes nothing more.
func maintainAll(t testing.TB, l *Log) {
	t.Helper()
	for range 20 {
		before := l.Segments()
		if err := l.Maintain(); err != nil {
			t.Fatalf("Maintain: %v", err)
		}
		if slices.Equal(before, l.Segments()) {
			return
		}
	}
	t.Fatal("compaction did not settle")
}

// checkSubset checks that every record left is one that was written, at its original offset.
func checkSubset(t testing.TB, got, written []entry) {
	t.Helper()
	orig := map[int64]entry{}
	for _, e := range written {
		orig[e.off] = e
	}
	last := int64(-1)
	for _, e := range got {
		if o, ok := orig[e.off]; !ok || o != e {
			t.Fatalf("record %v was not written at that offset (written %v)", e, o)
		}
		if e.off <= last {
			t.Fatalf("offsets not increasing at %v", e)
		}
		last = e.off
	}
}

// closedKeyCounts counts the records of each key below offset end.
func closedKeyCounts(es []entry, end int64) map[string]int {
	m := map[string]int{}
	for _, e := range es {
		if e.off < end {
			m[e.k]++
		}
	}
	return m
}

func activeBase(l *Log) int64 { s := l.Segments(); return s[len(s)-1].BaseOffset }

func writeOverwrites(t testing.TB, l *Log, clk *fakeClock, codec compress.Codec, rounds int) {
	t.Helper()
	for round := range rounds {
		var recs []kv
		for k := range 8 {
			recs = append(recs, put(fmt.Sprintf("key-%d", k), fmt.Sprintf("v%d-%d", round, k)))
		}
		if _, err := l.Append(keyedBatch(t, batchSpec{codec: codec, ts: clk.now.UnixMilli()}, recs...), 0); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCompactCollapsesOverwrites(t *testing.T) {
	mem := newMem(t)
	clk := newClock()
	l := openLog(t, mem, "/data/c-0", compactConfig(), clk)
	defer l.Close()
	writeOverwrites(t, l, clk, compress.None, 60)
	written := logEntries(t, l)
	start, end := l.StartOffset(), l.EndOffset()
	maintainAll(t, l)
	got := logEntries(t, l)
	checkSubset(t, got, written)
	if l.StartOffset() != start || l.EndOffset() != end {
		t.Fatalf("offsets moved: [%d, %d) became [%d, %d)", start, end, l.StartOffset(), l.EndOffset())
	}
	if len(got) >= len(written)/4 {
		t.Fatalf("%d of %d records left", len(got), len(written))
	}
	for k, n := range closedKeyCounts(got, activeBase(l)) {
		if n > 1 {
			t.Fatalf("key %s has %d records in closed segments", k, n)
		}
	}
	if !equalMaps(latestValues(got), latestValues(written)) {
		t.Fatalf("latest values changed:\n got %v\nwant %v", latestValues(got), latestValues(written))
	}
	// Reopening keeps the compacted log as it is.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, mem, "/data/c-0", compactConfig(), clk)
	if again := logEntries(t, l); !slices.Equal(again, got) {
		t.Fatalf("after reopen:\n got %v\nwant %v", again, got)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestCompactTombstones(t *testing.T) {
	mem := newMem(t)
	clk := newClock()
	l := openLog(t, mem, "/data/c-0", compactConfig(), clk)
	defer l.Close()
	ts := func() batchSpec { return batchSpec{ts: clk.now.UnixMilli()} }
	for i := range 5 {
		if _, err := l.Append(keyedBatch(t, ts(), put("a", fmt.Sprint("a", i)), put("b", fmt.Sprint("b", i)), put("c", "c")), 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Append(keyedBatch(t, ts(), del("a"), del("b")), 0); err != nil {
		t.Fatal(err)
	}
	// Filler with other keys rolls the tombstones into a closed segment.
	for i := range 40 {
		if _, err := l.Append(keyedBatch(t, ts(), put(fmt.Sprint("f", i), "filler-value-filler-value")), 0); err != nil {
			t.Fatal(err)
		}
	}
	written := logEntries(t, l)
	maintainAll(t, l)
	got := logEntries(t, l)
	checkSubset(t, got, written)
	var keys []string
	for _, e := range got {
		if e.k == "a" || e.k == "b" {
			keys = append(keys, e.String())
		}
	}
	if len(keys) != 2 || !got[slices.IndexFunc(got, func(e entry) bool { return e.k == "a" })].null {
		t.Fatalf("within delete.retention.ms only the tombstones of a and b remain, got %v", keys)
	}
	clk.now = clk.now.Add(30 * time.Minute)
	maintainAll(t, l)
	if again := logEntries(t, l); !slices.Equal(again, got) {
		t.Fatalf("tombstones went before delete.retention.ms: %v", again)
	}
	clk.now = clk.now.Add(31 * time.Minute)
	maintainAll(t, l)
	got = logEntries(t, l)
	for _, e := range got {
		if e.k == "a" || e.k == "b" {
			t.Fatalf("record %v left after delete.retention.ms", e)
		}
	}
	if v := latestValues(got); v["c"] != "c" || len(v) != 41 {
		t.Fatalf("other keys lost: %v", v)
	}
}

func TestCompactCodecs(t *testing.T) {
	for _, codec := range []compress.Codec{compress.None, compress.Gzip, compress.Snappy, compress.LZ4, compress.Zstd} {
		t.Run(codec.String(), func(t *testing.T) {
			clk := newClock()
			l := openLog(t, newMem(t), "/data/c-0", compactConfig(), clk)
			defer l.Close()
			// Batches where only some records are superseded get rewritten, not just dropped.
			for round := range 30 {
				recs := []kv{put("hot", fmt.Sprint("h", round)), put(fmt.Sprint("cold", round), "c")}
				if _, err := l.Append(keyedBatch(t, batchSpec{codec: codec, ts: clk.now.UnixMilli()}, recs...), 0); err != nil {
					t.Fatal(err)
				}
			}
			written := logEntries(t, l)
			maintainAll(t, l)
			got := logEntries(t, l)
			checkSubset(t, got, written)
			if !equalMaps(latestValues(got), latestValues(written)) {
				t.Fatalf("latest values changed")
			}
			if n := closedKeyCounts(got, activeBase(l))["hot"]; n > 1 {
				t.Fatalf("hot key has %d records in closed segments", n)
			}
			if len(got) != len(written)-closedKeyCounts(written, activeBase(l))["hot"]+closedKeyCounts(got, activeBase(l))["hot"] {
				t.Fatalf("%d records left of %d", len(got), len(written))
			}
			b, err := l.Read(l.StartOffset(), 1<<20, 1<<62)
			if err != nil {
				t.Fatal(err)
			}
			for batch := range record.Batches(b) {
				if h, _ := record.ParseHeader(batch); compress.Codec(h.Compression()) != codec {
					t.Fatalf("batch at %d has codec %d", h.BaseOffset, h.Compression())
				}
			}
		})
	}
}

func TestCompactKeepsUnkeyedTransactionalAndProducerBatches(t *testing.T) {
	clk := newClock()
	l := openLog(t, newMem(t), "/data/c-0", compactConfig(), clk)
	defer l.Close()
	spec := func(attrs int16, pid int64, seq int32) batchSpec {
		return batchSpec{ts: clk.now.UnixMilli(), attrs: attrs, pid: pid, seq: seq}
	}
	appendB := func(b []byte) int64 {
		t.Helper()
		res, err := l.Append(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		return res.FirstOffset
	}
	unkeyed := appendB(keyedBatch(t, spec(0, 0, 0), kv{v: []byte("no key")}, put("k", "0")))
	txn := appendB(keyedBatch(t, spec(0x10, 9, 0), put("k", "txn")))
	appendB(keyedBatch(t, spec(0x20, 9, 0), kv{k: []byte{0, 0, 0, 0}, v: []byte{0, 0, 0, 0, 0, 0}}))
	producerFirst := appendB(keyedBatch(t, spec(0, 5, 0), put("k", "p0"), put("p", "p0")))
	producerLast := appendB(keyedBatch(t, spec(0, 5, 2), put("k", "p1"), put("p", "p1")))
	for i := range 40 {
		appendB(keyedBatch(t, spec(0, 0, 0), put("k", fmt.Sprint("later", i)), put("p", fmt.Sprint("later", i))))
	}
	before, err := l.Read(0, 1<<20, producerLast+2)
	if err != nil {
		t.Fatal(err)
	}
	maintainAll(t, l)
	got := logEntries(t, l)
	has := func(off int64) bool { return slices.ContainsFunc(got, func(e entry) bool { return e.off == off }) }
	if !has(unkeyed) || has(unkeyed+1) {
		t.Fatalf("the unkeyed record must stay and the superseded keyed one go: %v", got[:3])
	}
	if !has(txn) {
		t.Fatal("transactional batch removed")
	}
	if has(producerFirst) {
		t.Fatal("a producer's earlier batch was kept")
	}
	after, err := l.Read(producerLast, 1<<20, producerLast+2)
	if err != nil {
		t.Fatal(err)
	}
	want := before[len(before)-len(after):]
	if !bytes.Equal(after, want) {
		t.Fatal("the producer's last batch was changed")
	}
	control := 0
	if err := l.ScanBatches(l.StartOffset(), func(h record.Header) bool {
		if h.Control() {
			control++
		}
		return true
	}); err != nil || control != 1 {
		t.Fatalf("control batches %d, %v", control, err)
	}
}

func TestCompactCleanableEnd(t *testing.T) {
	clk := newClock()
	l := openLog(t, newMem(t), "/data/c-0", compactConfig(), clk)
	defer l.Close()
	writeOverwrites(t, l, clk, compress.None, 40)
	written := logEntries(t, l)
	l.SetCleanableEnd(0)
	maintainAll(t, l)
	if got := logEntries(t, l); !slices.Equal(got, written) {
		t.Fatal("compaction went past the cleanable end")
	}
	l.SetCleanableEnd(-1)
	maintainAll(t, l)
	if got := logEntries(t, l); len(got) >= len(written) {
		t.Fatal("nothing compacted once the bound was removed")
	}
}

func TestCompactConcurrentReaders(t *testing.T) {
	clk := newClock()
	l := openLog(t, newMem(t), "/data/c-0", compactConfig(), clk)
	defer l.Close()
	var mu sync.Mutex
	values := map[int64]entry{}
	snapshot := func() {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range logEntries(t, l) {
			values[e.off] = e
		}
	}
	writeOverwrites(t, l, clk, compress.Snappy, 20)
	snapshot()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for r := range 3 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				start, end := l.StartOffset(), l.EndOffset()
				off := start + rng.Int64N(max(end-start, 1))
				b, err := l.Read(off, 4096, end)
				if err != nil {
					errs <- fmt.Errorf("Read(%d): %w", off, err)
					return
				}
				for batch := range record.Batches(b) {
					if _, err := record.Validate(batch); err != nil {
						errs <- err
						return
					}
					h, recs, ok := batchRecords(batch)
					if !ok {
						errs <- fmt.Errorf("batch at %d does not decode", h.BaseOffset)
						return
					}
					mu.Lock()
					for _, rc := range recs {
						off := h.BaseOffset + int64(rc.OffsetDelta)
						if w, ok := values[off]; ok && (w.k != string(rc.Key) || w.v != string(rc.Value)) {
							errs <- fmt.Errorf("offset %d reads %s=%s, written %v", off, rc.Key, rc.Value, w)
						}
					}
					mu.Unlock()
				}
			}
		})
	}
	for range 15 {
		writeOverwrites(t, l, clk, compress.Snappy, 3)
		snapshot()
		if err := l.Maintain(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// segmentFiles reads the records of every segment file in dir, by base offset.
func segmentFiles(t testing.TB, fsys vfs.FS, dir string) map[int64][]entry {
	t.Helper()
	names, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64][]entry{}
	for _, name := range names {
		base, ok := parseSegmentName(name)
		if !ok {
			continue
		}
		b, err := readWhole(fsys, filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		out[base] = batchEntries(t, b)
	}
	return out
}

// checkOldOrNew checks that every segment of a recovered log holds either its records before compaction or
// after, and that the log as a whole has the same latest values.
func checkOldOrNew(t testing.TB, fsys vfs.FS, old, new map[int64][]entry, want map[string]string) {
	t.Helper()
	l, err := Open("/data/c-0", compactConfig(), Options{FS: fsys, Clock: newClock(), Logger: quietLogFn})
	if err != nil {
		t.Fatalf("Open after crash: %v", err)
	}
	got := logEntries(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for base, es := range segmentFiles(t, fsys, "/data/c-0") {
		if !slices.Equal(es, old[base]) && !slices.Equal(es, new[base]) {
			t.Fatalf("segment %d is neither the old nor the new one: %v", base, es)
		}
	}
	if !equalMaps(latestValues(got), want) {
		t.Fatalf("latest values changed after crash")
	}
}

func TestCompactCrashAtEveryStep(t *testing.T) {
	mem := newMem(t)
	clk := newClock()
	var clones []*vfs.Mem
	capture := vfs.NewToggle(vfs.InjectorFunc(func(vfs.Op, string) error {
		for _, p := range []float64{0, 0.5, 1} {
			clones = append(clones, mem.CrashClone(rand.New(rand.NewPCG(uint64(len(clones)), 7)), vfs.CrashOptions{KeepUnsyncedProbability: p}))
		}
		return nil
	}))
	l, err := Open("/data/c-0", compactConfig(), Options{FS: vfs.NewFaulty(mem, capture), Clock: clk, Logger: quietLogFn})
	if err != nil {
		t.Fatal(err)
	}
	writeOverwrites(t, l, clk, compress.Gzip, 25)
	if err := l.WaitDurable(context.Background(), l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	l.settle() // the last roll's job, in the background
	want := latestValues(logEntries(t, l))
	old := segmentFiles(t, mem, "/data/c-0")
	capture.Enable()
	if err := l.Maintain(); err != nil {
		t.Fatal(err)
	}
	capture.Disable()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	new := segmentFiles(t, mem, "/data/c-0")
	if len(clones) < 30 {
		t.Fatalf("only %d crash points", len(clones))
	}
	for _, clone := range clones {
		checkOldOrNew(t, clone, old, new, want)
	}
}

func TestCompactFaults(t *testing.T) {
	for n := 1; ; n++ {
		mem := newMem(t)
		clk := newClock()
		count := 0
		fault := vfs.NewToggle(vfs.InjectorFunc(func(op vfs.Op, path string) error {
			count++
			if count == n {
				return fmt.Errorf("op %s %s: %w", op, path, vfs.ErrInjected)
			}
			return nil
		}))
		l, err := Open("/data/c-0", compactConfig(), Options{FS: vfs.NewFaulty(mem, fault), Clock: clk, Logger: quietLogFn})
		if err != nil {
			t.Fatal(err)
		}
		writeOverwrites(t, l, clk, compress.Zstd, 25)
		// Appends ask the syncer for rounds and leave their rolls' I/O to a job in the background: let them
		// finish before counting operations.
		if err := l.WaitDurable(context.Background(), l.EndOffset()); err != nil {
			t.Fatal(err)
		}
		l.settle()
		want := latestValues(logEntries(t, l))
		old := segmentFiles(t, mem, "/data/c-0")
		fault.Enable()
		err = l.Maintain()
		fault.Disable()
		if err != nil && !errors.Is(err, vfs.ErrInjected) {
			t.Fatalf("fault %d: %v", n, err)
		}
		_ = l.Close() // the log may be offline; a reopen recovers either way
		if count < n {
			return // the pass finished before the n-th operation
		}
		ref := openLog(t, newMem(t), "/data/c-0", compactConfig(), newClock())
		writeOverwrites(t, ref, newClock(), compress.Zstd, 25)
		if err := ref.Maintain(); err != nil {
			t.Fatal(err)
		}
		_ = ref.Close()
		checkOldOrNew(t, mem, old, segmentFiles(t, ref.fs, "/data/c-0"), want)
		if n > 500 {
			t.Fatal("the pass does not end")
		}
	}
}

// TestCompactAbortedTransactions: a record of an aborted transaction never supersedes a committed value
// and is dropped; a committed transaction's record supersedes like any; markers stay.
func TestCompactAbortedTransactions(t *testing.T) {
	clk := newClock()
	l := openLog(t, newMem(t), "/data/c-0", compactConfig(), clk)
	defer l.Close()
	if err := l.SetAborted(nil); err != nil {
		t.Fatal(err)
	}
	spec := func(attrs int16, pid int64, seq int32) batchSpec {
		return batchSpec{ts: clk.now.UnixMilli(), attrs: attrs, pid: pid, seq: seq}
	}
	appendB := func(b []byte) int64 {
		t.Helper()
		res, err := l.Append(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		return res.FirstOffset
	}
	marker := func(pid int64, commit bool) int64 {
		return appendB(record.AppendMarker(nil, pid, 0, 0, commit, clk.now.UnixMilli()))
	}
	committed := appendB(keyedBatch(t, spec(0, 0, 0), put("k", "committed"), put("j", "old")))
	aborted := appendB(keyedBatch(t, spec(0x10, 9, 0), put("k", "aborted")))
	abortMarker := marker(9, false)
	if err := l.AddAborted(TxnIndexEntry{ProducerID: 9, FirstOffset: aborted, LastOffset: abortMarker, LastStableOffset: abortMarker + 1}); err != nil {
		t.Fatal(err)
	}
	txn := appendB(keyedBatch(t, spec(0x10, 10, 0), put("j", "new")))
	marker(10, true)
	// Later batches of both producers, so that neither transactional batch is its producer's last.
	appendB(keyedBatch(t, spec(0, 9, 1), put("x9", "x")))
	appendB(keyedBatch(t, spec(0, 10, 1), put("x10", "x")))
	for i := range 40 {
		appendB(keyedBatch(t, spec(0, 0, 0), put(fmt.Sprint("filler", i%4), fmt.Sprint(i))))
	}
	maintainAll(t, l)
	got := logEntries(t, l)
	has := func(off int64) bool { return slices.ContainsFunc(got, func(e entry) bool { return e.off == off }) }
	if has(aborted) {
		t.Fatal("the aborted record survived compaction")
	}
	if !has(committed) || !has(txn) || has(committed+1) {
		t.Fatalf("committed value of k %v, committed transaction's j %v, superseded old j gone %v", has(committed), has(txn), !has(committed+1))
	}
	if v := latestValues(got); v["k"] != "committed" || v["j"] != "new" {
		t.Fatalf("latest values %v", v)
	}
	control := 0
	if err := l.ScanBatches(l.StartOffset(), func(h record.Header) bool {
		if h.Control() {
			control++
		}
		return true
	}); err != nil || control != 2 {
		t.Fatalf("control batches %d, %v", control, err)
	}
}
