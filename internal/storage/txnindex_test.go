package storage

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/weir-mq/weir/internal/vfs"
)

func FuzzDecodeTxnIndex(f *testing.F) {
	f.Add(encodeTxnIndex([]TxnIndexEntry{{ProducerID: 1, FirstOffset: 3, LastOffset: 10, LastStableOffset: 11}}), int64(0), int64(100))
	f.Add(encodeTxnIndex([]TxnIndexEntry{{1, 0, 5, 2}, {2, 2, 8, 9}}), int64(5), int64(9))
	f.Add([]byte{0, 1, 2}, int64(0), int64(1))
	f.Fuzz(func(t *testing.T, b []byte, base, next int64) {
		es, err := decodeTxnIndex(b, base, next)
		if err != nil {
			return
		}
		if got := encodeTxnIndex(es); !slices.Equal(got, b) {
			t.Fatalf("decoded %+v encodes to %x, not %x", es, got, b)
		}
		for i, e := range es {
			if e.LastOffset < base || e.LastOffset >= next || e.FirstOffset > e.LastOffset || (i > 0 && e.LastOffset <= es[i-1].LastOffset) {
				t.Fatalf("decoded an invalid entry %+v of [%d, %d)", e, base, next)
			}
		}
	})
}

// txnFiles returns the decoded .txnindex file of each segment that has one, by base offset.
func txnFiles(t *testing.T, fsys vfs.FS, l *Log) map[int64][]TxnIndexEntry {
	t.Helper()
	out := map[int64][]TxnIndexEntry{}
	for _, s := range l.Segments() {
		seg := newSegment(fsys, l.dir, s.BaseOffset)
		b, err := readWhole(fsys, seg.txnIndexPath())
		if vfs.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		es, err := decodeTxnIndex(b, s.BaseOffset, s.NextOffset)
		if err != nil {
			t.Fatalf("segment %d: %v", s.BaseOffset, err)
		}
		out[s.BaseOffset] = es
	}
	return out
}

// wantFiles is what the .txnindex files of l's closed segments must hold for the entries es.
func wantFiles(l *Log, es []TxnIndexEntry) map[int64][]TxnIndexEntry {
	out := map[int64][]TxnIndexEntry{}
	segs := l.Segments()
	for _, s := range segs[:len(segs)-1] {
		for _, e := range es {
			if e.LastOffset >= s.BaseOffset && e.LastOffset < s.NextOffset && e.LastOffset >= l.StartOffset() {
				out[s.BaseOffset] = append(out[s.BaseOffset], e)
			}
		}
	}
	return out
}

func equalFiles(a, b map[int64][]TxnIndexEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// appendAborted appends a batch of one record and records it as the ABORT marker of a transaction of
// producer pid that began first records earlier.
func appendAborted(t *testing.T, l *Log, pid, first int64) TxnIndexEntry {
	t.Helper()
	res, err := l.Append(batch(1, 10, 1), 0)
	if err != nil {
		t.Fatal(err)
	}
	e := TxnIndexEntry{ProducerID: pid, FirstOffset: max(res.FirstOffset-first, 0), LastOffset: res.FirstOffset, LastStableOffset: res.FirstOffset + 1}
	if err := l.AddAborted(e); err != nil {
		t.Fatal(err)
	}
	return e
}

func TestTxnIndexFiles(t *testing.T) {
	mem := newMem(t)
	cfg := testConfig()
	cfg.SegmentBytes = 1024
	l := openLog(t, mem, "/data/t-0", cfg, newClock())
	if err := l.SetAborted(nil); err != nil {
		t.Fatal(err)
	}
	var es []TxnIndexEntry
	for i := range 30 {
		if i%3 == 0 {
			es = append(es, appendAborted(t, l, int64(i), 2))
			continue
		}
		if _, err := l.Append(batch(2, 100, 1), 0); err != nil {
			t.Fatal(err)
		}
	}
	l.settle()
	if len(l.Segments()) < 4 {
		t.Fatalf("only %d segments", len(l.Segments()))
	}
	if got, want := txnFiles(t, mem, l), wantFiles(l, es); !equalFiles(got, want) {
		t.Fatalf("files after the rolls %v, want %v", got, want)
	}

	// A roll by age between a marker's append and its entry: the entry goes to the closed segment.
	res, err := l.Append(batch(1, 10, 1), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(batch(1, 10, 1), 0); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	j, err := l.roll()
	l.publish()
	l.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	l.startJob(j)
	late := TxnIndexEntry{ProducerID: 99, FirstOffset: res.FirstOffset, LastOffset: res.FirstOffset, LastStableOffset: res.FirstOffset + 1}
	if err := l.AddAborted(late); err != nil {
		t.Fatal(err)
	}
	es = append(es, late)
	if got, want := txnFiles(t, mem, l), wantFiles(l, es); !equalFiles(got, want) {
		t.Fatalf("files after a late entry %v, want %v", got, want)
	}

	// A truncation drops the entries past the new end and the files of the segments it removes; the
	// segment it cuts into becomes active and loses its file.
	segs := l.Segments()
	cut := segs[1].BaseOffset + 1
	if err := l.Truncate(cut); err != nil {
		t.Fatal(err)
	}
	es = slices.DeleteFunc(es, func(e TxnIndexEntry) bool { return e.LastOffset >= l.EndOffset() })
	if got, want := txnFiles(t, mem, l), wantFiles(l, es); !equalFiles(got, want) {
		t.Fatalf("files after the truncation %v, want %v", got, want)
	}
	if ents, _ := l.abortedEntries(); !slices.Equal(ents, es) {
		t.Fatalf("entries after the truncation %+v, want %+v", ents, es)
	}
	for range 20 {
		es = append(es, appendAborted(t, l, 7, 0))
	}
	l.settle()

	// Retention removes a segment's file with it.
	if err := l.AdvanceStart(l.Segments()[1].BaseOffset); err != nil {
		t.Fatal(err)
	}
	if got, want := txnFiles(t, mem, l), wantFiles(l, es); !equalFiles(got, want) {
		t.Fatalf("files after retention %v, want %v", got, want)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	names, _ := mem.ReadDir("/data/t-0")
	for _, n := range names {
		if filepath.Ext(n) == txnIndexSuffix {
			if _, ok := parseSegmentName(n[:len(n)-len(txnIndexSuffix)] + logSuffix); !ok {
				t.Fatalf("stray file %s", n)
			}
		}
	}

	// Open loads the files; SetAborted with what the owner's scan finds leaves agreeing files alone and
	// rewrites one that disagrees.
	l = openLog(t, mem, "/data/t-0", cfg, newClock())
	if got, want := txnFiles(t, mem, l), wantFiles(l, es); !equalFiles(got, want) {
		t.Fatalf("files after reopening %v, want %v", got, want)
	}
	victim := l.Segments()[0]
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mem.Remove(newSegment(mem, l.dir, victim.BaseOffset).txnIndexPath()); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, mem, "/data/t-0", cfg, newClock())
	defer l.Close()
	if got := txnFiles(t, mem, l); len(got[victim.BaseOffset]) != 0 {
		t.Fatalf("segment %d's file is back before SetAborted", victim.BaseOffset)
	}
	if err := l.SetAborted(es); err != nil {
		t.Fatal(err)
	}
	if got, want := txnFiles(t, mem, l), wantFiles(l, es); !equalFiles(got, want) {
		t.Fatalf("files after SetAborted %v, want %v", got, want)
	}
}

// TestTxnIndexCrashDuringRoll crashes at every filesystem operation of a roll whose closed segment
// holds aborted transactions: the files a crash leaves are whole and right, or missing and rewritten by
// SetAborted with what the log's scan finds.
func TestTxnIndexCrashDuringRoll(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1024
	// Both outcomes must be met: a crash before the job wrote the closed segment's file, and after.
	sawFile, sawMissing := false, false
	for k := 0; ; k++ {
		mem := newMem(t)
		var (
			mu      sync.Mutex // the roll's job runs on the Syncer's goroutine
			crashed *vfs.Mem
			ops     int
			armed   bool
		)
		arm := func(on bool) {
			mu.Lock()
			armed = on
			mu.Unlock()
		}
		inj := vfs.InjectorFunc(func(op vfs.Op, path string) error {
			mu.Lock()
			defer mu.Unlock()
			if armed {
				if ops == k {
					crashed = mem.CrashClone(rand.New(rand.NewPCG(uint64(k), 1)), vfs.CrashOptions{TornWrite: true})
				}
				ops++
			}
			return nil
		})
		l, err := Open("/data/t-0", cfg, Options{FS: vfs.NewFaulty(mem, inj), Clock: newClock(), Logger: quietLogFn})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.SetAborted(nil); err != nil {
			t.Fatal(err)
		}
		var es []TxnIndexEntry
		for i := range 6 {
			es = append(es, appendAborted(t, l, int64(i), 0))
		}
		if err := l.WaitDurable(context.Background(), l.EndOffset()); err != nil {
			t.Fatal(err)
		}
		arm(true)
		for len(l.Segments()) < 2 {
			if _, err := l.Append(batch(4, 100, 1), 0); err != nil {
				t.Fatal(err)
			}
		}
		l.settle()
		// One more durable append: a crash point after the roll's job has finished, whatever the
		// Syncer's own timing put in the window.
		if _, err := l.Append(batch(1, 100, 1), 0); err != nil {
			t.Fatal(err)
		}
		if err := l.WaitDurable(context.Background(), l.EndOffset()); err != nil {
			t.Fatal(err)
		}
		arm(false)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if crashed == nil {
			if !sawFile || !sawMissing {
				t.Fatalf("over %d crash points: a surviving file %v, a missing one %v", k, sawFile, sawMissing)
			}
			return
		}
		r, err := Open("/data/t-0", cfg, Options{FS: crashed, Clock: newClock(), Logger: quietLogFn})
		if err != nil {
			t.Fatalf("crash at operation %d: reopen: %v", k, err)
		}
		// Whatever file survived is whole and holds exactly its segment's entries.
		survivors := slices.DeleteFunc(slices.Clone(es), func(e TxnIndexEntry) bool { return e.LastOffset >= r.EndOffset() })
		want := wantFiles(r, survivors)
		files := txnFiles(t, crashed, r)
		if len(want) > 0 {
			sawFile = sawFile || len(files) > 0
			sawMissing = sawMissing || len(files) == 0
		}
		for base, got := range files {
			if !slices.Equal(got, want[base]) {
				t.Fatalf("crash at operation %d: segment %d's file holds %+v, want %+v", k, base, got, want[base])
			}
		}
		if err := r.SetAborted(survivors); err != nil {
			t.Fatal(err)
		}
		if got := txnFiles(t, crashed, r); !equalFiles(got, want) {
			t.Fatalf("crash at operation %d: files after SetAborted %v, want %v", k, got, want)
		}
		_ = r.Close()
	}
}
