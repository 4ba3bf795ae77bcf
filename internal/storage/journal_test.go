package storage

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/weir-mq/weir/internal/vfs"
)

const testJournalDir = "/data/journal"

// testJournalFileBytes makes files of a few records, so that rounds cross files.
const testJournalFileBytes = 600

// newJournalMem returns a filesystem whose data directory, the journal directory's parent, exists durably.
func newJournalMem(t testing.TB) *vfs.Mem {
	mem := vfs.NewMem()
	if err := mem.MkdirAll(filepath.Dir(testJournalDir)); err != nil {
		t.Fatal(err)
	}
	mem.SyncAll()
	return mem
}

func randomJournalRecord(rng *rand.Rand) journalRecord {
	r := journalRecord{
		kind:        journalKind(1 + rng.IntN(4)),
		name:        fmt.Sprintf("topic-%d", rng.IntN(5)),
		offset:      rng.Int64N(1 << 40),
		leaderEpoch: rng.Int32N(100),
		segmentBase: rng.Int64N(1 << 40),
		position:    rng.Int32N(1 << 30),
	}
	if r.kind == journalAppend {
		// mostly small, sometimes larger than a whole file
		r.data = make([]byte, rng.IntN(200)+rng.IntN(2)*rng.IntN(2*testJournalFileBytes))
		for i := range r.data {
			r.data[i] = byte(rng.Uint32())
		}
	}
	return r
}

func sameJournalRecord(a, b *journalRecord) bool {
	return a.seq == b.seq && a.kind == b.kind && a.name == b.name && a.offset == b.offset &&
		a.leaderEpoch == b.leaderEpoch && a.segmentBase == b.segmentBase && a.position == b.position &&
		bytes.Equal(a.data, b.data)
}

// collectRecords returns an openJournal callback that appends copies of the records to *got.
func collectRecords(got *[]journalRecord) func(*journalRecord) error {
	return func(r *journalRecord) error {
		c := *r
		c.data = bytes.Clone(r.data)
		*got = append(*got, c)
		return nil
	}
}

func mustOpenJournal(t testing.TB, fsys vfs.FS, after int64) (*journal, []journalRecord, journalRecovery) {
	t.Helper()
	var got []journalRecord
	j, rec, err := openJournal(fsys, testJournalDir, after, testJournalFileBytes, collectRecords(&got))
	if err != nil {
		t.Fatalf("openJournal(after %d): %v", after, err)
	}
	return j, got, rec
}

func mustAdd(t testing.TB, j *journal, r journalRecord) journalRecord {
	t.Helper()
	if _, err := j.add(&r); err != nil {
		t.Fatalf("add: %v", err)
	}
	return r
}

func mustSync(t testing.TB, j *journal) int64 {
	t.Helper()
	d, err := j.sync()
	if err != nil {
		t.Fatalf("sync: %v", err)
	}
	return d
}

// checkRecords fails unless got is want[from:from+len(got)] and at least want[from:minEnd].
func checkRecords(t testing.TB, got, want []journalRecord, from, minEnd int) {
	t.Helper()
	if len(got) < minEnd-from || from+len(got) > len(want) {
		t.Fatalf("recovered %d records from index %d; want at least %d of the %d added", len(got), from, minEnd-from, len(want))
	}
	for i := range got {
		if !sameJournalRecord(&got[i], &want[from+i]) {
			t.Fatalf("record %d recovered as seq %d kind %d name %q, %d bytes; added as seq %d kind %d name %q, %d bytes",
				i, got[i].seq, got[i].kind, got[i].name, len(got[i].data), want[from+i].seq, want[from+i].kind, want[from+i].name, len(want[from+i].data))
		}
	}
}

func TestJournalRecordRejectsEveryFlippedBit(t *testing.T) {
	r := journalRecord{seq: 7, kind: journalAppend, name: "t-0", offset: 42, leaderEpoch: 3, segmentBase: 40, position: 128, data: []byte("batch bytes")}
	b := appendJournalRecord(nil, &r)
	got, err := parseJournalRecord(b)
	if err != nil || !sameJournalRecord(&got, &r) {
		t.Fatalf("parse(encode) = %+v, %v; want %+v", got, err, r)
	}
	for i := range len(b) * 8 {
		c := bytes.Clone(b)
		c[i/8] ^= 1 << (i % 8)
		if _, err := parseJournalRecord(c); err == nil {
			t.Fatalf("bit %d flipped: record still parses", i)
		}
	}
	if _, err := parseJournalRecord(b[:len(b)-1]); err == nil {
		t.Fatal("record cut by a byte still parses")
	}
}

func TestJournalRefusesANameItCouldNotReadBack(t *testing.T) {
	j, _, _ := mustOpenJournal(t, newJournalMem(t), 0)
	for _, name := range []string{"", strings.Repeat("t", journalMaxName+1)} {
		if _, err := j.add(&journalRecord{kind: journalDrop, name: name}); !errors.Is(err, errJournalName) {
			t.Fatalf("add with a %d-byte name = %v; want errJournalName", len(name), err)
		}
	}
	longest := mustAdd(t, j, journalRecord{kind: journalDrop, name: strings.Repeat("t", journalMaxName)})
	if longest.seq != 1 || j.Err() != nil {
		t.Fatalf("refused names took seqs or the journal offline: seq %d, %v", longest.seq, j.Err())
	}
	mustSync(t, j)
	_, got, _ := mustOpenJournal(t, j.fs, 0)
	checkRecords(t, got, []journalRecord{longest}, 0, 1)
}

func TestJournalReopenReadsRecordsPastTheCheckpoint(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	mem := newJournalMem(t)
	j, got, _ := mustOpenJournal(t, mem, 0)
	if len(got) != 0 {
		t.Fatalf("a new journal has %d records", len(got))
	}
	var added []journalRecord
	for range 60 {
		added = append(added, mustAdd(t, j, randomJournalRecord(rng)))
		if rng.IntN(3) == 0 {
			if d := mustSync(t, j); d != added[len(added)-1].seq {
				t.Fatalf("sync made %d durable; want %d", d, added[len(added)-1].seq)
			}
		}
	}
	mustSync(t, j)
	if err := j.close(); err != nil {
		t.Fatal(err)
	}
	if names, _ := mem.ReadDir(testJournalDir); len(names) < 5 {
		t.Fatalf("60 records in files of %d bytes made only %d files", testJournalFileBytes, len(names))
	}
	for _, after := range []int64{0, 1, 17, 59, 60} {
		_, got, rec := mustOpenJournal(t, mem, after)
		checkRecords(t, got, added, int(after), len(added))
		if rec.tornBytes != 0 || rec.records != len(got) {
			t.Fatalf("after %d: recovery %+v for %d records of an intact journal", after, rec, len(got))
		}
	}
	j, _, _ = mustOpenJournal(t, mem, 20)
	more := mustAdd(t, j, randomJournalRecord(rng))
	if more.seq != 61 {
		t.Fatalf("the reopened journal gave seq %d; want 61", more.seq)
	}
	mustSync(t, j)
	_, got, _ = mustOpenJournal(t, mem, 20)
	checkRecords(t, got, append(added, more), 20, 61)
}

// TestJournalAddsWhileARoundRuns adds from several goroutines while rounds run: every record gets its own
// seq, and each one a round reported durable is recovered with the content its adder gave it.
func TestJournalAddsWhileARoundRuns(t *testing.T) {
	mem := newJournalMem(t)
	j, _, _ := mustOpenJournal(t, mem, 0)
	const adders, each = 4, 50
	recs := make([][]journalRecord, adders)
	var wg sync.WaitGroup
	for a := range adders {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(a), 13))
			for range each {
				r := randomJournalRecord(rng)
				if _, err := j.add(&r); err != nil {
					t.Error(err)
					return
				}
				recs[a] = append(recs[a], r)
			}
		})
	}
	done := make(chan struct{})
	var syncer sync.WaitGroup
	syncer.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := j.sync(); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
	close(done)
	syncer.Wait()
	if d := mustSync(t, j); d != adders*each {
		t.Fatalf("durable %d after the last round; want %d", d, adders*each)
	}
	bySeq := make([]journalRecord, adders*each)
	for _, rs := range recs {
		for _, r := range rs {
			if bySeq[r.seq-1].seq != 0 {
				t.Fatalf("seq %d given twice", r.seq)
			}
			bySeq[r.seq-1] = r
		}
	}
	_, got, _ := mustOpenJournal(t, mem.CrashClone(rand.New(rand.NewPCG(2, 2)), vfs.CrashOptions{}), 0)
	checkRecords(t, got, bySeq, 0, len(bySeq))
}

func TestJournalTrimKeepsRecordsPastTheCheckpoint(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	mem := newJournalMem(t)
	j, _, _ := mustOpenJournal(t, mem, 0)
	var added []journalRecord
	for range 40 {
		added = append(added, mustAdd(t, j, randomJournalRecord(rng)))
		mustSync(t, j)
	}
	before, _ := mem.ReadDir(testJournalDir)
	if err := j.trim(25); err != nil {
		t.Fatal(err)
	}
	after, _ := mem.ReadDir(testJournalDir)
	if len(after) >= len(before) {
		t.Fatalf("trim(25) left %d of %d files", len(after), len(before))
	}
	if first, _ := parseJournalFileName(after[0]); first > 26 {
		t.Fatalf("trim(25) removed the file holding 26 (first file left starts at %d)", first)
	}
	if err := j.trim(1 << 40); err != nil {
		t.Fatal(err)
	}
	if left, _ := mem.ReadDir(testJournalDir); len(left) != 1 {
		t.Fatalf("trim past every record left %v; want the file being written", left)
	}
	added = append(added, mustAdd(t, j, randomJournalRecord(rng)))
	mustSync(t, j)
	// A crash that undoes nothing: the checkpoint covers 39, so 40 and 41 must come back.
	_, got, _ := mustOpenJournal(t, mem.CrashClone(rand.New(rand.NewPCG(1, 1)), vfs.CrashOptions{}), 39)
	checkRecords(t, got, added, 39, 41)
}

// TestJournalCrashKeepsEverySyncedRecord runs hundreds of crash cycles on the crash-simulating filesystem:
// records added and synced in random rounds, trims below a checkpoint, then a crash that keeps a random
// part of what was not synced (torn writes included). Recovery must return a prefix of what was added
// past the checkpoint holding at least every synced record, and a journal that keeps going: records
// synced after a recovery survive the next crash too.
func TestJournalCrashKeepsEverySyncedRecord(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 99))
		mem := newJournalMem(t)
		j, _, _ := mustOpenJournal(t, mem, 0)
		var added []journalRecord // added[i] has seq i+1
		checkpoint, synced := int64(0), 0
		for crash := range 3 {
			for range 1 + rng.IntN(25) {
				added = append(added, mustAdd(t, j, randomJournalRecord(rng)))
				switch rng.IntN(4) {
				case 0:
					mustSync(t, j)
					synced = len(added)
				case 1:
					checkpoint = max(checkpoint, rng.Int64N(int64(synced)+1))
					if err := j.trim(checkpoint); err != nil {
						t.Fatal(err)
					}
				}
			}
			opts := vfs.CrashOptions{KeepUnsyncedProbability: rng.Float64(), TornWrite: rng.IntN(2) == 0}
			mem = mem.CrashClone(rng, opts)
			var got []journalRecord
			var err error
			j, _, err = openJournal(mem, testJournalDir, checkpoint, testJournalFileBytes, collectRecords(&got))
			if err != nil {
				t.Fatalf("seed %d, crash %d (%+v): openJournal: %v", seed, crash, opts, err)
			}
			checkRecords(t, got, added, int(checkpoint), synced)
			// What was recovered is what the journal holds now: later records follow it.
			added = added[:int(checkpoint)+len(got)]
			synced = len(added)
		}
	}
}

func TestJournalCorruptRecordEndsTheScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	mem := newJournalMem(t)
	j, _, _ := mustOpenJournal(t, mem, 0)
	var added []journalRecord
	for range 30 {
		r := randomJournalRecord(rng)
		r.data = r.data[:min(len(r.data), 50)]
		added = append(added, mustAdd(t, j, r))
		mustSync(t, j)
	}
	names, _ := mem.ReadDir(testJournalDir)
	if len(names) < 3 {
		t.Fatalf("want several files, got %v", names)
	}
	// Damage the first record of the second file: the scan keeps the first file and removes the rest.
	path := filepath.Join(testJournalDir, names[1])
	data, err := vfs.ReadFile(mem, path)
	if err != nil {
		t.Fatal(err)
	}
	data[journalHeaderBytes+10] ^= 0xff
	rewriteFile(t, mem, path, data)
	first, _ := parseJournalFileName(names[1])
	_, got, rec := mustOpenJournal(t, mem, 0)
	checkRecords(t, got, added, 0, int(first-1))
	if len(got) != int(first-1) || rec.tornBytes == 0 {
		t.Fatalf("recovered %d records (want %d), torn %d", len(got), first-1, rec.tornBytes)
	}
	if left, _ := mem.ReadDir(testJournalDir); len(left) != 1 || left[0] != names[0] {
		t.Fatalf("files after recovery %v; want only %s", left, names[0])
	}
	// A second recovery finds a clean journal.
	_, again, rec := mustOpenJournal(t, mem, 0)
	checkRecords(t, again, got, 0, len(got))
	if rec.tornBytes != 0 {
		t.Fatalf("second recovery cut %d more bytes", rec.tornBytes)
	}
}

// TestJournalOutOfSequenceRecordEndsTheScan: a valid record whose seq does not follow the previous one (a
// stale record) ends the scan like a torn one.
func TestJournalOutOfSequenceRecordEndsTheScan(t *testing.T) {
	mem := newJournalMem(t)
	if err := mem.MkdirAll(testJournalDir); err != nil {
		t.Fatal(err)
	}
	data := journalHeader(1)
	want := journalRecord{seq: 1, kind: journalPoint, name: "t-0", offset: 5, leaderEpoch: -1, segmentBase: 0, position: 300}
	data = appendJournalRecord(data, &want)
	data = appendJournalRecord(data, &journalRecord{seq: 3, kind: journalPoint, name: "t-0", offset: 9})
	path := filepath.Join(testJournalDir, journalFileName(1))
	rewriteFile(t, mem, path, data)
	_, got, rec := mustOpenJournal(t, mem, 0)
	checkRecords(t, got, []journalRecord{want}, 0, 1)
	if size, _ := fileSize(mem, path); size != journalHeaderBytes+int64(want.size()) || rec.tornBytes != int64(len(data))-size {
		t.Fatalf("file left at %d bytes, %d cut; want the stale record cut", size, rec.tornBytes)
	}
}

func rewriteFile(t *testing.T, mem *vfs.Mem, path string, data []byte) {
	t.Helper()
	f, err := mem.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestJournalMissingRecordsAfterTheCheckpointAreAnError(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	mem := newJournalMem(t)
	j, _, _ := mustOpenJournal(t, mem, 0)
	for range 20 {
		mustAdd(t, j, randomJournalRecord(rng))
		mustSync(t, j)
	}
	names, _ := mem.ReadDir(testJournalDir)
	if err := mem.Remove(filepath.Join(testJournalDir, names[0])); err != nil {
		t.Fatal(err)
	}
	if _, _, err := openJournal(mem, testJournalDir, 0, testJournalFileBytes, collectRecords(new([]journalRecord))); !errors.Is(err, errJournalGap) || !errors.Is(err, ErrCorruption) {
		t.Fatalf("openJournal without the first file = %v; want errJournalGap, an ErrCorruption", err)
	}
}

// TestJournalFaultTakesItOffline injects each fault a round can meet. The round fails with the fault
// under ErrLogOffline, every later add and sync fails the same way, and a crash afterwards recovers every
// record synced before the fault and no more than was added.
func TestJournalFaultTakesItOffline(t *testing.T) {
	faults := []struct {
		name  string
		op    vfs.Op
		err   error
		newFi bool // the fault hits the round that starts a file
	}{
		{"EIO on write", vfs.OpWrite, syscall.EIO, false},
		{"short write", vfs.OpWrite, &vfs.ShortWrite{N: 9, Err: syscall.EIO}, false},
		{"ENOSPC on write", vfs.OpWrite, syscall.ENOSPC, false},
		{"EIO on fdatasync", vfs.OpSync, syscall.EIO, false},
		{"ENOSPC on create", vfs.OpCreate, syscall.ENOSPC, true},
		{"ENOSPC on allocate", vfs.OpAllocate, syscall.ENOSPC, true},
		{"EIO on directory sync", vfs.OpSyncDir, syscall.EIO, true},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(9, 10))
			mem := newJournalMem(t)
			tog := vfs.NewToggle(vfs.InjectorFunc(func(op vfs.Op, path string) error {
				if op == f.op && strings.HasPrefix(path, testJournalDir) {
					return f.err
				}
				return nil
			}))
			j, _, _ := mustOpenJournal(t, vfs.NewFaulty(mem, tog), 0)
			var added []journalRecord
			small := func() journalRecord {
				r := randomJournalRecord(rng)
				r.data = r.data[:min(len(r.data), 40)]
				return r
			}
			for range 5 {
				added = append(added, mustAdd(t, j, small()))
				mustSync(t, j)
			}
			synced := len(added)
			if f.newFi {
				big := small()
				big.kind, big.data = journalAppend, make([]byte, testJournalFileBytes)
				added = append(added, mustAdd(t, j, big))
			} else {
				added = append(added, mustAdd(t, j, small()))
			}
			tog.Enable()
			d, err := j.sync()
			if !errors.Is(err, ErrLogOffline) || !errors.Is(err, f.err) {
				t.Fatalf("sync with %s = %v; want ErrLogOffline wrapping it", f.name, err)
			}
			if d != int64(synced) {
				t.Fatalf("the failed round reports %d durable; want %d", d, synced)
			}
			tog.Disable()
			if _, err := j.add(new(small())); !errors.Is(err, ErrLogOffline) {
				t.Fatalf("add after the fault = %v; want ErrLogOffline", err)
			}
			if _, err := j.sync(); !errors.Is(err, ErrLogOffline) {
				t.Fatalf("sync after the fault = %v; want ErrLogOffline", err)
			}
			if err := j.trim(1); !errors.Is(err, ErrLogOffline) {
				t.Fatalf("trim after the fault = %v; want ErrLogOffline", err)
			}
			for _, keep := range []float64{0, 1} {
				_, got, _ := mustOpenJournal(t, mem.CrashClone(rand.New(rand.NewPCG(1, 1)), vfs.CrashOptions{KeepUnsyncedProbability: keep, TornWrite: true}), 0)
				checkRecords(t, got, added, 0, synced)
			}
		})
	}
}

// FuzzJournalScan feeds arbitrary bytes to recovery as the journal's files. Recovery must not panic; when it
// succeeds the records it returns carry consecutive seqs, a second recovery of what it left returns the
// same records and cuts nothing, and a record added and synced afterwards is recovered after them.
func FuzzJournalScan(f *testing.F) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{0, 1, 3, 12} {
		mem := newJournalMem(f)
		j, _, _ := mustOpenJournal(f, mem, 0)
		for range n {
			mustAdd(f, j, randomJournalRecord(rng))
			mustSync(f, j)
		}
		names, _ := mem.ReadDir(testJournalDir)
		var first, second []byte
		if len(names) > 0 {
			first, _ = vfs.ReadFile(mem, filepath.Join(testJournalDir, names[0]))
		}
		if len(names) > 1 {
			second, _ = vfs.ReadFile(mem, filepath.Join(testJournalDir, names[1]))
		}
		f.Add(first, second, uint8(0))
		f.Add(first, second, uint8(2))
	}
	f.Fuzz(func(t *testing.T, first, second []byte, after uint8) {
		mem := vfs.NewMem()
		if err := mem.MkdirAll(testJournalDir); err != nil {
			t.Fatal(err)
		}
		put := func(name string, data []byte) {
			g, err := mem.Create(filepath.Join(testJournalDir, name))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := g.Write(data); err != nil {
				t.Fatal(err)
			}
			_ = g.Close()
		}
		put(journalFileName(1), first)
		secondSeq := int64(1)
		if len(second) >= journalHeaderBytes {
			if seq, ok := parseJournalHeader(second[:journalHeaderBytes]); ok && seq > 1 && seq < 1<<20 {
				secondSeq = seq
			}
		}
		if secondSeq > 1 {
			put(journalFileName(secondSeq), second)
		}
		mem.SyncAll()
		var got []journalRecord
		j, rec, err := openJournal(mem, testJournalDir, int64(after%4), 1<<20, collectRecords(&got))
		if err != nil {
			return
		}
		for i := range got {
			if got[i].seq != int64(after%4)+1+int64(i) {
				t.Fatalf("record %d has seq %d; want %d", i, got[i].seq, int64(after%4)+1+int64(i))
			}
		}
		if rec.records != len(got) {
			t.Fatalf("recovery counts %d records, returned %d", rec.records, len(got))
		}
		var again []journalRecord
		if _, rec2, err := openJournal(mem, testJournalDir, int64(after%4), 1<<20, collectRecords(&again)); err != nil || rec2.tornBytes != 0 {
			t.Fatalf("second recovery: %+v, %v", rec2, err)
		}
		checkRecords(t, again, got, 0, len(got))
		extra := journalRecord{kind: journalDrop, name: "t-0", offset: -1, leaderEpoch: -1, segmentBase: -1, position: -1}
		if _, err := j.add(&extra); err != nil {
			t.Fatal(err)
		}
		if _, err := j.sync(); err != nil {
			t.Fatal(err)
		}
		var last []journalRecord
		if _, _, err := openJournal(mem, testJournalDir, int64(after%4), 1<<20, collectRecords(&last)); err != nil {
			t.Fatal(err)
		}
		checkRecords(t, last, append(got, extra), 0, len(got)+1)
	})
}
