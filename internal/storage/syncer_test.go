package storage

import (
	"context"
	"testing"
	"time"
)

// TestSyncerStats: every round is counted once in both distributions, by its duration and by the
// number of logs it synced, with cumulative buckets whose last bound holds every observation.
func TestSyncerStats(t *testing.T) {
	mem := newMem(t)
	clk := newClock()
	syncer := newSyncer(newClock())
	var logs []*Log
	for _, dir := range []string{"/data/a-0", "/data/b-0"} {
		l, err := Open(dir, testConfig(), Options{FS: mem, Clock: clk, Syncer: syncer})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		logs = append(logs, l)
	}
	for _, l := range logs {
		appendDurable(t, l, 3)
	}
	for _, l := range logs {
		if err := l.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	syncer.Close()

	st := syncer.Stats()
	rounds := st.Logs.Count
	if rounds < 6 || st.Seconds.Count != rounds {
		t.Fatalf("%d rounds by size, %d by duration; want the same, at least one per durable append", rounds, st.Seconds.Count)
	}
	if st.Logs.Sum < float64(rounds) {
		t.Errorf("rounds synced %v logs in all, fewer than their count %d", st.Logs.Sum, rounds)
	}
	// The syncer's fake clock stands still: every round took 0s, at or below the first bound.
	if st.Seconds.Sum != 0 || st.Seconds.Cumulative[0] != rounds {
		t.Errorf("seconds: sum %v, first bucket %d of %d", st.Seconds.Sum, st.Seconds.Cumulative[0], rounds)
	}
	for _, d := range []Distribution{st.Seconds, st.Logs} {
		if len(d.Cumulative) != len(d.Bounds) || d.Cumulative[len(d.Cumulative)-1] != d.Count {
			t.Errorf("buckets %v over bounds %v do not end at the count %d", d.Cumulative, d.Bounds, d.Count)
		}
	}
}

// TestSyncerHoldGathers: logs appended to under a Hold are synced in one round once it is released,
// not the first alone and the rest in the next. The syncer's clock stands still, so only the release
// lets the round start.
func TestSyncerHoldGathers(t *testing.T) {
	mem := newMem(t)
	syncer := newSyncer(newClock())
	var logs []*Log
	for _, dir := range []string{"/data/a-0", "/data/b-0", "/data/c-0"} {
		l, err := Open(dir, testConfig(), Options{FS: mem, Clock: newClock(), Syncer: syncer})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		logs = append(logs, l)
	}
	// whatever opening the logs had synced is done before the hold
	for _, l := range logs {
		appendDurable(t, l, 1)
	}
	settled := func() Distribution {
		last := syncer.Stats().Logs
		for {
			time.Sleep(10 * time.Millisecond)
			now := syncer.Stats().Logs
			if now.Count == last.Count {
				return now
			}
			last = now
		}
	}
	base := settled()
	release := syncer.Hold()
	ends := make([]int64, len(logs))
	for i, l := range logs {
		res, err := l.Append(batch(2, 100, 1), 0)
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
		ends[i] = res.LastOffset + 1
	}
	time.Sleep(5 * gatherMax) // the round would have started by now, were it not held
	if st := syncer.Stats(); st.Logs.Count != base.Count {
		t.Fatalf("%d rounds ran under the hold", st.Logs.Count-base.Count)
	}
	release()
	release() // a second call changes nothing
	for i, l := range logs {
		if err := l.WaitDurable(context.Background(), ends[i]); err != nil {
			t.Fatalf("WaitDurable: %v", err)
		}
	}
	// The round's statistics are recorded after it released its waiters. A waiter that asks again
	// while the round runs adds a round that finds its log durable already: one round synced three
	// logs (SyncLogsBounds[1] is 2), any other was such a repeat.
	st := settled()
	if big := (st.Count - st.Cumulative[1]) - (base.Count - base.Cumulative[1]); big != 1 {
		t.Fatalf("%d rounds of three logs or more, want one; %d rounds syncing %v logs in all", big,
			st.Count-base.Count, st.Sum-base.Sum)
	}
	for _, l := range logs {
		if err := l.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	syncer.Close()
}
