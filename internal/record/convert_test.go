package record_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/weir-mq/weir/internal/record"
)

func TestRecordTimestamps(t *testing.T) {
	var body []byte
	for _, r := range sampleRecords() {
		body = record.AppendRecord(body, r)
	}
	var got []int64
	collect := func(ts int64) error { got = append(got, ts); return nil }
	if err := record.RecordTimestamps(body, 3, 1000, collect); err != nil {
		t.Fatal(err)
	}
	if want := []int64{1000, 995, 1000 + 1<<40}; !slices.Equal(got, want) {
		t.Fatalf("timestamps %v, want %v", got, want)
	}

	stop := errors.New("stop")
	calls := 0
	err := record.RecordTimestamps(body, 3, 0, func(int64) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("fn's error: %v after %d calls; want stop after 1", err, calls)
	}

	for _, tc := range []struct {
		name string
		body []byte
		n    int
	}{
		{"fewer records than counted", body, 4},
		{"more records than counted", body, 2},
		{"truncated", body[:len(body)-1], 3},
		{"length below a record's minimum", []byte{0x02, 0, 0, 0, 0, 0, 0}, 1},
		{"negative count", body, -1},
	} {
		if err := record.RecordTimestamps(tc.body, tc.n, 0, collect); !errors.Is(err, record.ErrInvalidRecord) {
			t.Errorf("%s: %v, want ErrInvalidRecord", tc.name, err)
		}
	}
}

// TestRecordTimestampsAllocs checks that the walk allocates nothing: it runs on every produced batch of a
// topic with a timestamp window.
func TestRecordTimestampsAllocs(t *testing.T) {
	var body []byte
	for _, r := range sampleRecords() {
		body = record.AppendRecord(body, r)
	}
	var hi int64
	allocs := testing.AllocsPerRun(100, func() {
		_ = record.RecordTimestamps(body, 3, 7, func(ts int64) error { hi = max(hi, ts); return nil })
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per walk, want 0", allocs)
	}
}

func FuzzRecordTimestamps(f *testing.F) {
	var body []byte
	for _, r := range sampleRecords() {
		body = record.AppendRecord(body, r)
	}
	f.Add(body, 3, int64(0))
	f.Add([]byte{}, 0, int64(-1))
	f.Add([]byte{0x0e, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 1, int64(5))
	f.Fuzz(func(t *testing.T, b []byte, n int, base int64) {
		var got []int64
		err := record.RecordTimestamps(b, n, base, func(ts int64) error { got = append(got, ts); return nil })
		if err != nil {
			if !errors.Is(err, record.ErrInvalidRecord) {
				t.Fatalf("error %v does not wrap ErrInvalidRecord", err)
			}
			return
		}
		recs, derr := record.DecodeRecords(b, n)
		if derr != nil {
			// The walk reads less of each record than DecodeRecords does, so it may take what that refuses.
			return
		}
		for i, r := range recs {
			if got[i] != base+r.TimestampDelta {
				t.Fatalf("record %d: timestamp %d, DecodeRecords says %d", i, got[i], base+r.TimestampDelta)
			}
		}
	})
}

func TestHeaderWithCompression(t *testing.T) {
	h := record.Header{Attributes: 0x10 | 0x08 | 2}
	got := h.WithCompression(4)
	if got.Compression() != 4 || !got.Transactional() || !got.LogAppendTime() {
		t.Fatalf("attributes %#x, want zstd with the transactional and append-time bits", got.Attributes)
	}
	if h.Compression() != 2 {
		t.Fatal("WithCompression changed its receiver")
	}
}
