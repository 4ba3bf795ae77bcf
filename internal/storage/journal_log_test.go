package storage

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/compress"
	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/vfs"
)

// journaledLogs is a data directory of logs on one journaled Syncer, each with the batches the test expects
// in it (by offset, identified by their base timestamp) and its acknowledged end.
type journaledLogs struct {
	t      *testing.T
	fs     vfs.FS
	cfg    Config
	syncer *Syncer
	logs   map[string]*Log
	model  map[string]*model
	nextID int64
	// directBytes, when set, is the syncer's size from which appends go past the journal.
	directBytes int
}

func openJournaledLogs(t *testing.T, fsys vfs.FS, cfg Config, names ...string) *journaledLogs {
	t.Helper()
	j := &journaledLogs{t: t, fs: fsys, cfg: cfg, logs: map[string]*Log{}, model: map[string]*model{}}
	for _, name := range names {
		j.model[name] = &model{}
	}
	j.reopen()
	return j
}

// reopen opens the syncer (replaying the journal) and every log.
func (j *journaledLogs) reopen() {
	j.t.Helper()
	s, err := OpenSyncer(j.fs, "/data", quietLogFn)
	if err != nil {
		j.t.Fatalf("OpenSyncer: %v", err)
	}
	j.syncer = s
	if j.directBytes > 0 {
		s.directBytes = j.directBytes
	}
	for name := range j.model {
		j.open(name)
	}
}

func (j *journaledLogs) open(name string) {
	j.t.Helper()
	l, err := Open(filepath.Join("/data", name), j.cfg, Options{FS: j.fs, Clock: newClock(), Syncer: j.syncer, Logger: quietLogFn})
	if err != nil {
		j.t.Fatalf("Open %s: %v", name, err)
	}
	j.logs[name] = l
}

func (j *journaledLogs) close() {
	for _, l := range j.logs {
		_ = l.Close()
	}
	j.syncer.Close()
}

// append appends one batch to the named log and, if wait, waits until it is durable.
func (j *journaledLogs) append(name string, wait bool) error {
	j.nextID++
	m := j.model[name]
	res, err := j.logs[name].Append(batch(1+int(j.nextID%4), int(j.nextID%300), j.nextID*1000), 0)
	if err != nil {
		return err
	}
	m.batches = append(m.batches, modelBatch{base: res.FirstOffset, last: res.LastOffset, id: j.nextID * 1000})
	if wait {
		if err := j.logs[name].WaitDurable(context.Background(), res.LastOffset+1); err != nil {
			return err
		}
		m.acked = res.LastOffset + 1
	}
	return nil
}

// check reads every log whole: it must hold every acknowledged batch, and nothing but batches the test
// appended, at their offsets.
func (j *journaledLogs) check(when string) {
	j.t.Helper()
	for name, m := range j.model {
		l := j.logs[name]
		end := l.EndOffset()
		if end < m.acked || end > m.end() {
			j.t.Fatalf("%s: %s ends at %d, acknowledged %d, appended up to %d", when, name, end, m.acked, m.end())
		}
		m.cut(end)
		for off := l.StartOffset(); off < end; {
			b, err := l.Read(off, 1<<20, 1<<62)
			if err != nil {
				j.t.Fatalf("%s: %s: Read(%d): %v", when, name, off, err)
			}
			for bb, err := range record.Batches(b) {
				if err != nil {
					j.t.Fatalf("%s: %s: Read(%d): %v", when, name, off, err)
				}
				h, _ := record.ParseHeader(bb)
				want, ok := m.find(h.BaseOffset)
				if !ok || want.base != h.BaseOffset || want.last != h.LastOffset() || want.id != h.BaseTimestamp {
					j.t.Fatalf("%s: %s: batch [%d, %d] id %d, expected %+v", when, name, h.BaseOffset, h.LastOffset(), h.BaseTimestamp, want)
				}
				off = h.NextOffset()
			}
		}
		m.acked = min(m.acked, end)
	}
}

// TestJournalOneFdatasyncPerRound: appends to eight logs held into one round (or more, if the hold
// outlives gatherMax on a slow machine, or a log asks again) are made durable by at most one fdatasync
// of the journal per round and none of a segment file.
func TestJournalOneFdatasyncPerRound(t *testing.T) {
	var journalSyncs, segmentSyncs atomic.Int64
	fsys := vfs.NewFaulty(newMem(t), vfs.InjectorFunc(func(op vfs.Op, path string) error {
		switch {
		case op != vfs.OpSync:
		case strings.Contains(path, "/journal/"):
			journalSyncs.Add(1)
		case strings.HasSuffix(path, logSuffix):
			segmentSyncs.Add(1)
		}
		return nil
	}))
	var names []string
	for i := range 8 {
		names = append(names, fmt.Sprintf("t-%d", i))
	}
	j := openJournaledLogs(t, fsys, testConfig(), names...)
	defer j.close()
	journalSyncs.Store(0)
	segmentSyncs.Store(0)
	before := j.syncer.Stats().Logs
	ends := map[string]int64{}
	release := j.syncer.Hold()
	for _, name := range names {
		res, err := j.logs[name].Append(batch(2, 100, 1), 0)
		if err != nil {
			t.Fatal(err)
		}
		ends[name] = res.LastOffset + 1
	}
	release()
	for _, name := range names {
		if err := j.logs[name].WaitDurable(context.Background(), ends[name]); err != nil {
			t.Fatal(err)
		}
	}
	// a round's statistics are recorded once it has finished, after it woke the waiters
	after := j.syncer.Stats().Logs
	for deadline := time.Now().Add(5 * time.Second); after.Sum-before.Sum < float64(len(names)) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
		after = j.syncer.Stats().Logs
	}
	rounds, logs := int64(after.Count-before.Count), after.Sum-before.Sum
	if logs < float64(len(names)) {
		t.Fatalf("the rounds synced %v logs, want %d or more", logs, len(names))
	}
	if journalSyncs.Load() < 1 || journalSyncs.Load() > rounds || segmentSyncs.Load() != 0 {
		t.Fatalf("%d rounds made %d journal and %d segment fdatasyncs, want 1 to %d and 0", rounds, journalSyncs.Load(),
			segmentSyncs.Load(), rounds)
	}
}

// TestJournalCrashKeepsEveryLogsAcknowledgedBatches: three logs on one journal, with appends waited for
// and not, truncations, checkpoints, and a log deleted and made again under its name; after each crash
// (half of them keeping nothing unsynced, so that acknowledged batches live only in the journal), every
// log holds every batch acknowledged and nothing else, and the log made again none of the old one's.
func TestJournalCrashKeepsEveryLogsAcknowledgedBatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	mem := newMem(t)
	cfg := testConfig()
	cfg.SegmentBytes = 2048
	j := openJournaledLogs(t, mem, cfg, "a-0", "b-0", "c-0")
	for cycle := range 60 {
		for range 1 + rng.IntN(20) {
			name := []string{"a-0", "b-0", "c-0"}[rng.IntN(3)]
			m := j.model[name]
			switch r := rng.IntN(100); {
			case r < 60:
				if err := j.append(name, r < 45); err != nil {
					t.Fatalf("cycle %d: append %s: %v", cycle, name, err)
				}
			case r < 75:
				end := m.start + rng.Int64N(m.end()-m.start+1)
				if err := j.logs[name].Truncate(end); err != nil {
					t.Fatalf("cycle %d: truncate %s: %v", cycle, name, err)
				}
				m.cut(j.logs[name].EndOffset())
				m.acked = min(m.acked, j.logs[name].EndOffset())
			case r < 80:
				if err := j.logs[name].Delete(); err != nil {
					t.Fatalf("cycle %d: delete %s: %v", cycle, name, err)
				}
				j.model[name] = &model{}
				j.open(name)
			case r < 85:
				if err := j.syncer.checkpoint(); err != nil {
					t.Fatalf("cycle %d: checkpoint: %v", cycle, err)
				}
			}
		}
		keep := 0.0
		if rng.IntN(2) == 0 {
			keep = rng.Float64()
		}
		clone := mem.CrashClone(rng, vfs.CrashOptions{KeepUnsyncedProbability: keep, TornWrite: rng.IntN(2) == 0})
		j.close()
		mem = clone
		j.fs = mem
		j.directBytes = directBytesChoice(rng)
		j.reopen()
		j.check(fmt.Sprintf("cycle %d", cycle))
	}
	j.close()
}

// directBytesChoice picks the size from which a test's appends (up to about 1.3 KiB) go past the journal:
// all of them, about half, a few, or none.
func directBytesChoice(rng *rand.Rand) int {
	return []int{1, 400, 1000, journalDirectBytes}[rng.IntN(4)]
}

// TestJournalLargeAppendsPastJournal: an append of at least directBytes adds no journal record and is
// made durable by its segment's fdatasync; a small append that follows it before that fdatasync is done
// goes past the journal too (a durable record of it would vouch for the large append's bytes, which the
// journal does not hold), and the next small one after it goes through the journal again. After a
// truncation, large appends are journaled until a checkpoint covers the truncation's record.
func TestJournalLargeAppendsPastJournal(t *testing.T) {
	var segmentSyncs atomic.Int64
	gate := make(chan struct{})
	var blocking atomic.Bool
	entered := make(chan struct{}, 1)
	fsys := vfs.NewFaulty(newMem(t), vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if op == vfs.OpSync && strings.HasSuffix(path, logSuffix) {
			segmentSyncs.Add(1)
			if blocking.Load() {
				entered <- struct{}{}
				<-gate
			}
		}
		return nil
	}))
	j := openJournaledLogs(t, fsys, testConfig(), "a-0")
	defer j.close()
	var open sync.Once
	defer open.Do(func() { close(gate) }) // before the close, which waits for the round
	j.syncer.directBytes = 1000
	l := j.logs["a-0"]
	seq := func() int64 {
		j.syncer.j.mu.Lock()
		defer j.syncer.j.mu.Unlock()
		return j.syncer.j.next
	}
	appendWait := func(b []byte) int64 {
		t.Helper()
		res, err := l.Append(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		return res.LastOffset + 1
	}
	wait := func(end int64) {
		t.Helper()
		if err := l.WaitDurable(context.Background(), end); err != nil {
			t.Fatal(err)
		}
	}

	before, syncs := seq(), segmentSyncs.Load()
	wait(appendWait(batch(4, 400, 1)))
	if seq() != before || segmentSyncs.Load() == syncs {
		t.Fatalf("a large append added %d journal records and made %d segment fdatasyncs, want 0 and 1 or more",
			seq()-before, segmentSyncs.Load()-syncs)
	}

	blocking.Store(true)
	large := appendWait(batch(4, 400, 2))
	<-entered // the round's fdatasync of the segment has started and waits
	blocking.Store(false)
	before = seq()
	small := appendWait(batch(1, 10, 3))
	if seq() != before {
		t.Fatal("a small append after a large one not yet durable was journaled")
	}
	if got := l.DurableEndOffset(); got >= large {
		t.Fatalf("durable end %d while the large append's fdatasync waits, want below %d", got, large)
	}
	open.Do(func() { close(gate) })
	wait(small)

	before = seq()
	wait(appendWait(batch(1, 10, 4)))
	if seq() != before+1 {
		t.Fatalf("a small append after the large ones were durable added %d journal records, want 1", seq()-before)
	}

	// after a truncation, large appends are journaled until a checkpoint covers its record
	if err := l.Truncate(small); err != nil {
		t.Fatal(err)
	}
	before = seq()
	wait(appendWait(batch(4, 400, 5)))
	if seq() != before+1 {
		t.Fatalf("a large append after a truncation added %d journal records, want 1", seq()-before)
	}
	if err := j.syncer.checkpoint(); err != nil {
		t.Fatal(err)
	}
	before = seq()
	wait(appendWait(batch(4, 400, 6)))
	if seq() != before {
		t.Fatalf("a large append after the checkpoint added %d journal records, want 0", seq()-before)
	}
}

// TestJournalFaultTakesLogsOffline: a failed write of the journal fails the wait of the append it held
// and takes every log that appends through it offline (another log's next append fails at once); a crash
// then recovers every batch acknowledged before the fault. The same for ENOSPC when the journal creates
// a file, and EIO from its fdatasync.
func TestJournalFaultTakesLogsOffline(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   vfs.Op
		err  error
	}{
		{"write EIO", vfs.OpWrite, syscall.EIO},
		{"fdatasync EIO", vfs.OpSync, syscall.EIO},
		{"create ENOSPC", vfs.OpCreate, syscall.ENOSPC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := newMem(t)
			toggle := vfs.NewToggle(vfs.OnOp(tc.op, "/data/journal/", tc.err))
			j := openJournaledLogs(t, vfs.NewFaulty(mem, toggle), testConfig(), "a-0", "b-0")
			for range 5 {
				for _, name := range []string{"a-0", "b-0"} {
					if err := j.append(name, true); err != nil {
						t.Fatal(err)
					}
				}
			}
			if tc.op == vfs.OpCreate {
				// the next round creates a file: the one the reopened journal writes first
				j.close()
				j.reopen()
			}
			toggle.Enable()
			if err := j.append("a-0", true); !errors.Is(err, ErrLogOffline) || !errors.Is(err, tc.err) {
				t.Fatalf("wait after the journal failed: %v, want ErrLogOffline wrapping %v", err, tc.err)
			}
			toggle.Disable()
			if err := j.append("b-0", false); !errors.Is(err, ErrLogOffline) {
				t.Fatalf("append to another log after the journal failed: %v, want ErrLogOffline", err)
			}
			clone := mem.CrashClone(rand.New(rand.NewPCG(1, 2)), vfs.CrashOptions{})
			j.close()
			j.fs = clone
			j.reopen()
			j.check("after the fault")
			if err := j.append("b-0", true); err != nil {
				t.Fatalf("append after the restart: %v", err)
			}
			j.close()
		})
	}
}

// TestJournalFlushPolicyChanges: a log that leaves weir.flush.policy=always, is written and truncated
// without the journal, and comes back to it, loses nothing acknowledged in a crash that keeps nothing
// unsynced, and none of its old records is replayed over what it wrote meanwhile.
func TestJournalFlushPolicyChanges(t *testing.T) {
	mem := newMem(t)
	j := openJournaledLogs(t, mem, testConfig(), "t-0")
	l := func() *Log { return j.logs["t-0"] }
	for range 6 {
		if err := j.append("t-0", true); err != nil {
			t.Fatal(err)
		}
	}
	never := testConfig()
	never.Flush = FlushNever
	if err := l().SetConfig(never); err != nil {
		t.Fatal(err)
	}
	m := j.model["t-0"]
	if err := l().Truncate(m.batches[2].base); err != nil {
		t.Fatal(err)
	}
	m.cut(m.batches[2].base)
	m.acked = m.end()
	for range 4 {
		if err := j.append("t-0", false); err != nil {
			t.Fatal(err)
		}
	}
	if err := l().SetConfig(testConfig()); err != nil {
		t.Fatal(err)
	}
	m.acked = m.end() // the change back to always synced the segments
	for range 3 {
		if err := j.append("t-0", true); err != nil {
			t.Fatal(err)
		}
	}
	clone := mem.CrashClone(rand.New(rand.NewPCG(3, 4)), vfs.CrashOptions{})
	j.close()
	j.fs = clone
	j.reopen()
	j.check("after the crash")
	j.close()
}

// TestJournalCompactionWaitsForCheckpoint: compaction leaves the segments that records past the last
// checkpoint refer to as they are (a replay would write those records over the rewritten bytes), cleans
// them once a checkpoint covers them, and a crash that keeps nothing unsynced then finds the compacted log.
func TestJournalCompactionWaitsForCheckpoint(t *testing.T) {
	mem := newMem(t)
	s, err := OpenSyncer(mem, "/data", quietLogFn)
	if err != nil {
		t.Fatal(err)
	}
	clk := newClock()
	open := func(fsys vfs.FS, s *Syncer) *Log {
		l, err := Open("/data/c-0", compactConfig(), Options{FS: fsys, Clock: clk, Syncer: s, Logger: quietLogFn})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := open(mem, s)
	writeOverwrites(t, l, clk, compress.None, 60)
	if err := l.WaitDurable(context.Background(), l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	written := logEntries(t, l)
	maintainAll(t, l)
	if got := logEntries(t, l); !slices.Equal(got, written) {
		t.Fatalf("compacted before a checkpoint covered the records: %d of %d records left", len(got), len(written))
	}
	if err := s.checkpoint(); err != nil {
		t.Fatal(err)
	}
	maintainAll(t, l)
	compacted := logEntries(t, l)
	if len(compacted) >= len(written)/2 {
		t.Fatalf("after a checkpoint %d of %d records left", len(compacted), len(written))
	}
	clone := mem.CrashClone(rand.New(rand.NewPCG(5, 6)), vfs.CrashOptions{})
	_ = l.Close()
	s.Close()
	if s, err = OpenSyncer(clone, "/data", quietLogFn); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l = open(clone, s)
	defer l.Close()
	if got := logEntries(t, l); !slices.Equal(got, compacted) {
		t.Fatalf("after the crash:\n got %v\nwant %v", got, compacted)
	}
}

// TestDropJournalKeepsAcknowledgedBatches: a node started without the journal after a crash with it
// (DropJournal) finds every batch acknowledged through the journal in its logs, which now sync
// themselves, and no journal left; a crash between DropJournal's two removals (the checkpoint without a
// journal) is finished by the next DropJournal, or started from by a journal opened again.
func TestDropJournalKeepsAcknowledgedBatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for cycle := range 20 {
		mem := newMem(t)
		j := openJournaledLogs(t, mem, testConfig(), "a-0", "b-0")
		for range 1 + rng.IntN(30) {
			name := []string{"a-0", "b-0"}[rng.IntN(2)]
			if err := j.append(name, rng.IntN(4) > 0); err != nil {
				t.Fatalf("cycle %d: append %s: %v", cycle, name, err)
			}
		}
		// Nothing unsynced survives: what was acknowledged is in the journal alone.
		clone := mem.CrashClone(rng, vfs.CrashOptions{})
		j.close()
		if err := DropJournal(clone, "/data", quietLogFn); err != nil {
			t.Fatalf("cycle %d: DropJournal: %v", cycle, err)
		}
		for _, name := range []string{journalDirName, journalCheckpointName} {
			if _, err := clone.Stat(filepath.Join("/data", name)); !vfs.IsNotExist(err) {
				t.Fatalf("cycle %d: %s after DropJournal: %v", cycle, name, err)
			}
		}
		j.fs, j.syncer = clone, NewSyncer()
		for name := range j.model {
			j.open(name)
		}
		j.check(fmt.Sprintf("cycle %d, without the journal", cycle))
		if err := j.append("a-0", true); err != nil {
			t.Fatalf("cycle %d: append without the journal: %v", cycle, err)
		}
		j.close()
	}

	mem := newMem(t)
	j := openJournaledLogs(t, mem, testConfig(), "a-0")
	for range 5 {
		if err := j.append("a-0", true); err != nil {
			t.Fatal(err)
		}
	}
	j.close()
	if err := mem.RemoveAll("/data/" + journalDirName); err != nil {
		t.Fatal(err)
	}
	j.reopen()
	j.check("a journal opened after its directory was removed")
	if err := j.append("a-0", true); err != nil {
		t.Fatal(err)
	}
	j.close()
	if err := mem.RemoveAll("/data/" + journalDirName); err != nil {
		t.Fatal(err)
	}
	if err := DropJournal(mem, "/data", quietLogFn); err != nil {
		t.Fatalf("DropJournal of a checkpoint alone: %v", err)
	}
	if _, err := mem.Stat("/data/" + journalCheckpointName); !vfs.IsNotExist(err) {
		t.Fatalf("the checkpoint after DropJournal: %v", err)
	}
}
