package storage

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/weir-mq/weir/internal/compress"
	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/vfs"
)

// raceRuns repeats the read-race tests, for the stress form the normal run is too short to be:
// go test -race -run Racing ./internal/storage/ -raceruns 200
var raceRuns = flag.Int("raceruns", 1, "runs of each read-race test")

// raceReaders has n goroutines read l until stop is closed: Read at a random offset of the current log,
// OffsetForTime and ScanBatches, in turn. A read may miss data or find its offset gone; anything else it
// returns must be whole, valid batches holding the offset asked for, and every other error is sent to errs.
func raceReaders(l *Log, n int, stop <-chan struct{}, errs chan<- error) *sync.WaitGroup {
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			var buf []byte
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var err error
				switch i % 8 {
				case 6:
					_, _, err = l.OffsetForTime(rng.Int64N(100))
				case 7:
					err = scanChecked(l)
				default:
					buf, err = readChecked(l, rng, buf)
				}
				if err != nil && !errors.Is(err, ErrOffsetOutOfRange) {
					errs <- err
					return
				}
			}
		})
	}
	return &wg
}

// readChecked reads at a random offset of the log and checks what it got.
func readChecked(l *Log, rng *rand.Rand, buf []byte) ([]byte, error) {
	start, end := l.StartOffset(), l.EndOffset()
	off := start + rng.Int64N(max(end-start, 1))
	b, err := l.ReadInto(buf, off, 1+rng.IntN(8192), 1<<62)
	if err != nil {
		return buf, fmt.Errorf("Read(%d): %w", off, err)
	}
	next := int64(-1)
	for bb, err := range record.Batches(b) {
		if err != nil {
			return b, fmt.Errorf("Read(%d): %w", off, err)
		}
		h, err := record.Validate(bb)
		if err != nil {
			return b, fmt.Errorf("Read(%d): invalid batch: %w", off, err)
		}
		if next < 0 && h.LastOffset() < off {
			return b, fmt.Errorf("Read(%d): first batch ends at %d", off, h.LastOffset())
		}
		if h.BaseOffset < next {
			return b, fmt.Errorf("Read(%d): batch at %d after one ending at %d", off, h.BaseOffset, next)
		}
		next = h.NextOffset()
	}
	return b, nil
}

// scanChecked scans the whole log and checks that the batches come in offset order.
func scanChecked(l *Log) error {
	next := int64(-1)
	var bad error
	err := l.ScanBatches(l.StartOffset(), func(h record.Header) bool {
		if h.BaseOffset < next {
			bad = fmt.Errorf("ScanBatches: batch at %d after one ending at %d", h.BaseOffset, next)
			return false
		}
		next = h.NextOffset()
		return true
	})
	if bad != nil {
		return bad
	}
	return err
}

func collect(t *testing.T, wg *sync.WaitGroup, stop chan struct{}, errs chan error, what string) {
	t.Helper()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a read racing %s failed: %v", what, err)
	}
}

// TestLogReadRacingTruncateIsNotCorruption has readers run while the log is cut back and regrown, as a
// follower's log is after a leader change: a read that loses the race may miss data or find its offset
// gone, but it must never report corruption, which would take the replica offline, however often it loses.
func TestLogReadRacingTruncateIsNotCorruption(t *testing.T) {
	for range *raceRuns {
		cfg := testConfig()
		cfg.SegmentBytes = 64 << 10
		l := openLog(t, newMem(t), "/data/t-0", cfg, newClock())
		for range 40 {
			if _, err := l.Append(batch(4, 100, 1), 0); err != nil {
				t.Fatal(err)
			}
		}
		stop, errs := make(chan struct{}), make(chan error, 8)
		wg := raceReaders(l, 8, stop, errs)
		for i := range 600 {
			// cuts inside the active segment and, every third time, back into a closed one
			cut := l.EndOffset() - 8
			if i%3 == 0 {
				cut = l.EndOffset() / 2
			}
			if err := l.Truncate(cut); err != nil {
				t.Fatal(err)
			}
			for range 10 {
				if _, err := l.Append(batch(4, 100, 1), 0); err != nil {
					t.Fatal(err)
				}
			}
		}
		collect(t, wg, stop, errs, "a truncation")
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLogReadRacingRollRetentionCompaction races readers against every other change of the published view:
// rolls, retention by size, DeleteRecords, compaction swaps, and idle segment files closed and opened again.
func TestLogReadRacingRollRetentionCompaction(t *testing.T) {
	for range *raceRuns {
		clk := newClock()
		cfg := compactConfig()
		cfg.Delete, cfg.RetentionBytes = true, 24<<10
		l := openLog(t, newMem(t), "/data/r-0", cfg, clk)
		writeOverwrites(t, l, clk, compress.None, 10)
		stop, errs := make(chan struct{}), make(chan error, 8)
		wg := raceReaders(l, 6, stop, errs)
		for i := range 150 {
			writeOverwrites(t, l, clk, compress.None, 2)
			if err := l.Maintain(); err != nil {
				t.Fatal(err)
			}
			if i%10 == 9 {
				if err := l.AdvanceStart(l.StartOffset() + (l.EndOffset()-l.StartOffset())/4); err != nil {
					t.Fatal(err)
				}
			}
		}
		collect(t, wg, stop, errs, "a roll, retention or compaction")
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLogReadRacingClose has readers run while the log closes: they end with ErrClosed, never another error.
func TestLogReadRacingClose(t *testing.T) {
	for range *raceRuns {
		l := openLog(t, newMem(t), "/data/c-0", testConfig(), newClock())
		for range 40 {
			if _, err := l.Append(batch(4, 100, 1), 0); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Go(func() {
				for {
					_, err := l.Read(l.StartOffset(), 1<<20, 1<<62)
					if err == nil {
						continue
					}
					if !errors.Is(err, ErrClosed) {
						errs <- err
					}
					return
				}
			})
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("a read racing Close failed: %v", err)
		}
	}
}

// TestLogReadOpeningAReplacedSegment is the race of a compaction swap with a reader that opens the files of
// an idle segment (closed by Maintain) lazily: the reader's view predates the swap, but the files it opens
// are the ones the swap renamed into place. Each kind of read must be made again on the new view, not
// answered from the new bytes read against the old segment's sizes and indexes.
func TestLogReadOpeningAReplacedSegment(t *testing.T) {
	for name, check := range map[string]func(l *Log, kept record.Header) error{
		"Read": func(l *Log, kept record.Header) error {
			b, err := l.Read(0, 1<<20, 1<<62)
			if err != nil {
				return err
			}
			if h, err := record.ParseHeader(b); err != nil || h != kept || len(b) != kept.Size() {
				return fmt.Errorf("read %d bytes (%v), not the new segment's one batch", len(b), err)
			}
			return nil
		},
		"OffsetForTime": func(l *Log, kept record.Header) error {
			off, ok, err := l.OffsetForTime(0)
			if err != nil || !ok || off != kept.BaseOffset {
				return fmt.Errorf("offset %d, %v, %v; want %d", off, ok, err, kept.BaseOffset)
			}
			return nil
		},
		"ScanBatches": func(l *Log, kept record.Header) error {
			var hs []record.Header
			err := l.ScanBatches(0, func(h record.Header) bool { hs = append(hs, h); return true })
			if err != nil || len(hs) == 0 || hs[0] != kept || hs[len(hs)-1].NextOffset() != l.EndOffset() {
				return fmt.Errorf("%d batches, %v; want the new segment's one batch first and the log to its end", len(hs), err)
			}
			return nil
		},
	} {
		t.Run(name, func(t *testing.T) { raceSwapWithLazyOpen(t, check) })
	}
}

func raceSwapWithLazyOpen(t *testing.T, check func(l *Log, kept record.Header) error) {
	mem := newMem(t)
	first := "/data/s-0/" + segmentName(0)
	var (
		l        *Log
		kept     []byte
		armed    atomic.Bool
		renamed  atomic.Bool
		written  = make(chan struct{})
		signal   sync.Once
		swapDone = make(chan error, 1)
	)
	inj := vfs.InjectorFunc(func(op vfs.Op, path string) error {
		switch {
		case op == vfs.OpRename && path == first+logSuffix+cleanedSuffix:
			renamed.Store(true)
		case op == vfs.OpSyncDir && renamed.Load():
			// the swap renamed the new segment into place and wrote its index files
			signal.Do(func() { close(written) })
		case op == vfs.OpOpen && strings.HasPrefix(path, first) && armed.CompareAndSwap(true, false):
			go func() { swapDone <- l.ReplaceSegment(0, kept) }()
			<-written
		}
		return nil
	})
	cfg := testConfig()
	cfg.Delete = false
	l = openLog(t, vfs.NewFaulty(mem, inj), "/data/s-0", cfg, newClock())
	defer l.Close()
	for range 30 {
		if _, err := l.Append(batch(2, 200, 5), 0); err != nil {
			t.Fatal(err)
		}
	}
	kept = mustRead(t, l, l.Segments()[0].NextOffset-2)
	h, err := record.ParseHeader(kept)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		// the second call finds segment 0 idle since the first, closes its file and drops its indexes
		if err := l.Maintain(); err != nil {
			t.Fatal(err)
		}
	}
	armed.Store(true)
	err = check(l, h)
	if err := <-swapDone; err != nil {
		t.Fatalf("ReplaceSegment: %v", err)
	}
	if err != nil {
		t.Fatalf("a read racing the swap: %v", err)
	}
}
