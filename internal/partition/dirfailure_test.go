package partition

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/storage"
	"github.com/weir-mq/weir/internal/vfs"
)

// TestManagerReportsDirFailure: a failed fdatasync of one partition's log is never acknowledged,
// takes that log offline for good (also once the disk answers again), and is reported once through
// OnDirFailure; a reopen after the disk recovered serves the log again with what was acknowledged.
// With the journal (ManagerOptions.Journal) it is the journal's fdatasync that fails, and every log
// appending through it goes offline.
func TestManagerReportsDirFailure(t *testing.T) {
	t.Run("files", func(t *testing.T) { testManagerReportsDirFailure(t, false) })
	t.Run("journal", func(t *testing.T) { testManagerReportsDirFailure(t, true) })
}

func testManagerReportsDirFailure(t *testing.T, journal bool) {
	// Only the segment's (or the journal's) fdatasync fails: the leader-epoch checkpoint the first append
	// writes in the background may still be running when the fault is switched on, and its failure would
	// be a second one.
	failing := filepath.Join(dataDir, "t-0", "00000000000000000000.log")
	if journal {
		failing = filepath.Join(dataDir, "journal") + "/"
	}
	toggle := vfs.NewToggle(vfs.OnOp(vfs.OpSync, failing, syscall.EIO))
	fsys := vfs.NewFaulty(vfs.NewMem(), toggle)
	clock := &fakeClock{time.UnixMilli(1e12)}
	store := openStore(t, fsys, clock)
	ctx := testCtx(t)
	for _, name := range []string{"t", "u"} {
		if _, err := store.CreateTopic(ctx, name, 1, nil, false); err != nil {
			t.Fatal(err)
		}
	}
	reports := make(chan error, 4)
	open := func() *Manager {
		m, err := NewManager(dataDir, ManagerOptions{
			FS: fsys, Clock: clock, Logger: quiet, MaintainTicks: make(chan time.Time), Journal: journal,
			OnDirFailure: func(err error) { reports <- err },
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Reconcile(store.Image()); err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := open()
	r, _ := m.Replica("t", 0)
	appendWait(t, r, plain(1, 1))

	toggle.Enable()
	_, wait, err := r.AppendAcks(plain(1, 2).checked(), AcksLeader)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	if err := wait(ctx); !errors.Is(err, storage.ErrLogOffline) {
		t.Fatalf("wait after a failed fdatasync: %v, want ErrLogOffline", err)
	}
	select {
	case got := <-reports:
		if !errors.Is(got, ErrDirFailed) || !errors.Is(got, syscall.EIO) {
			t.Fatalf("report %v, want ErrDirFailed wrapping EIO", got)
		}
	case <-ctx.Done():
		t.Fatal("the failed fdatasync was not reported")
	}
	toggle.Disable()
	if _, _, err := r.AppendAcks(plain(1, 3).checked(), AcksLeader); !errors.Is(err, storage.ErrLogOffline) {
		t.Fatalf("append once the disk answers again: %v, want ErrLogOffline", err)
	}
	u, _ := m.Replica("u", 0)
	offline := 1
	if journal {
		// one journal serves the data directory: its failure takes every log appending through it offline
		if _, _, err := u.AppendAcks(plain(1, 4).checked(), AcksLeader); !errors.Is(err, storage.ErrLogOffline) {
			t.Fatalf("append to another log after the journal failed: %v, want ErrLogOffline", err)
		}
		offline = 2
	} else {
		appendWait(t, u, plain(1, 4))
	}
	// Stats counts the failed fdatasync and the offline logs, and the Syncer's rounds. A round's statistics
	// are recorded after it wakes its waiters, so they may lag the appends' answers a moment.
	st := m.Stats()
	for deadline := time.Now().Add(5 * time.Second); st.Sync.Logs.Count < 2 && time.Now().Before(deadline); st = m.Stats() {
		time.Sleep(10 * time.Millisecond)
	}
	if st.FailedOps["sync"] != 1 || st.FailedOps["write"] != 0 || st.OfflineLogs != offline || st.Sync.Logs.Count < 2 {
		t.Fatalf("stats: failed ops %v, %d offline logs, %d sync rounds; want 1 failed sync, %d offline logs, 2 rounds or more",
			st.FailedOps, st.OfflineLogs, st.Sync.Logs.Count, offline)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if len(reports) != 0 {
		t.Fatalf("reported more than once: %v", <-reports)
	}

	// The restarted Manager recovers the log that went offline.
	m = open()
	t.Cleanup(func() { _ = m.Close() })
	r, _ = m.Replica("t", 0)
	if r.LogEndOffset() < 1 {
		t.Fatalf("log end %d after recovery lost the acknowledged record", r.LogEndOffset())
	}
	appendWait(t, r, plain(1, 5))
	if len(reports) != 0 {
		t.Fatalf("a healthy reopen reported a failure: %v", <-reports)
	}
}

// TestDirWatchIgnoresAnswers: reads and missing files are not failures of the directory.
func TestDirWatchIgnoresAnswers(t *testing.T) {
	var got []error
	w := watchDir(vfs.NewMem(), func(err error) { got = append(got, err) })
	if _, err := w.Open("/nope"); err == nil {
		t.Fatal("open of a missing file succeeded")
	}
	if err := w.Remove("/nope"); !vfs.IsNotExist(err) {
		t.Fatalf("remove of a missing file: %v", err)
	}
	if err := w.Rename("/nope", "/other"); !vfs.IsNotExist(err) {
		t.Fatalf("rename of a missing file: %v", err)
	}
	if _, err := w.Stat("/nope"); err == nil {
		t.Fatal("stat of a missing file succeeded")
	}
	if len(got) != 0 {
		t.Fatalf("reported %v", got)
	}
}

// TestManagerOutOfFilesIsNotADirFailure: a replica whose creation fails because the process is out of file
// descriptors (EMFILE) is not opened, and opened by the next reconciliation once descriptors are free, but the
// data directory is not reported as failed: the disk is fine.
func TestManagerOutOfFilesIsNotADirFailure(t *testing.T) {
	toggle := vfs.NewToggle(vfs.OnOp(vfs.OpMkdirAll, "t-0", syscall.EMFILE))
	fsys := vfs.NewFaulty(vfs.NewMem(), toggle)
	clock := &fakeClock{time.UnixMilli(1e12)}
	store := openStore(t, fsys, clock)
	if _, err := store.CreateTopic(testCtx(t), "t", 1, nil, false); err != nil {
		t.Fatal(err)
	}
	reports := make(chan error, 4)
	m, err := NewManager(dataDir, ManagerOptions{
		FS: fsys, Clock: clock, Logger: quiet, MaintainTicks: make(chan time.Time),
		OnDirFailure: func(err error) { reports <- err },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	toggle.Enable()
	if err := m.Reconcile(store.Image()); !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("reconcile out of file descriptors: %v, want EMFILE", err)
	}
	toggle.Disable()
	if err := m.Reconcile(store.Image()); err != nil {
		t.Fatalf("reconcile once descriptors are free: %v", err)
	}
	if _, ok := m.Replica("t", 0); !ok {
		t.Fatal("t-0 not opened once descriptors were free")
	}
	select {
	case err := <-reports:
		t.Fatalf("EMFILE reported as a failed directory: %v", err)
	default:
	}
	if st := m.Stats(); st.OutOfFiles != 1 || st.FailedOps["mkdirall"] != 0 {
		t.Fatalf("stats: %d out of files, %d failed mkdirall; want 1 and 0", st.OutOfFiles, st.FailedOps["mkdirall"])
	}
}
