package storage

import "testing"

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
