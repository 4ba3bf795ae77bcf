package storage

import (
	"errors"
	"sync"
	"testing"
)

// TestLogReadRacingTruncateIsNotCorruption has readers run while the log is cut back and regrown, as a
// follower's log is after a leader change: a read that loses the race may miss data or find its offset
// gone, but it must never report corruption, which would take the replica offline.
func TestLogReadRacingTruncateIsNotCorruption(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	l := openLog(t, newMem(t), "/data/t-0", cfg, newClock())
	defer l.Close()
	for range 20 {
		if _, err := l.Append(batch(4, 100, 1), 0); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, err := l.Read(l.StartOffset(), 1<<20, 1<<62)
				if err != nil && !errors.Is(err, ErrOffsetOutOfRange) {
					errs <- err
					return
				}
			}
		})
	}
	for range 300 {
		if err := l.Truncate(l.EndOffset() / 2); err != nil {
			t.Fatal(err)
		}
		for range 10 {
			if _, err := l.Append(batch(4, 100, 1), 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a read racing a truncation failed: %v", err)
	}
}
