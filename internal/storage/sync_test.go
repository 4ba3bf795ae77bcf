package storage

import "testing"

// TestLogSyncCoversARoll checks that Sync returns with everything durable, rolls included: under
// FlushNever nothing else syncs, and a roll's job holds the durable point back until it is done.
func TestLogSyncCoversARoll(t *testing.T) {
	mem := newMem(t)
	cfg := testConfig()
	cfg.Flush = FlushNever
	cfg.SegmentBytes = 4096
	l := openLog(t, mem, "/data/t-0", cfg, newClock())
	for i := range 40 {
		if _, err := l.Append(batch(1, 500, int64(i)), 0); err != nil {
			t.Fatal(err)
		}
		if i%7 == 0 {
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			if d, e := l.DurableEndOffset(), l.EndOffset(); d != e {
				t.Fatalf("after Sync at %d: durable end %d, log end %d", i, d, e)
			}
		}
	}
	if len(l.Segments()) < 3 {
		t.Fatalf("%d segments: the test needs rolls", len(l.Segments()))
	}
}
