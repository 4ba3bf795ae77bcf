package httpapi

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// batch is a v2 batch header of records base to base+n-1, followed by filler for its records.
func batch(base int64, n int32) []byte {
	b := kmsg.RecordBatch{FirstOffset: base, Magic: 2, LastOffsetDelta: n - 1, NumRecords: n, Records: make([]byte, 10)}
	b.Length = int32(len(b.AppendTo(nil)) - 12)
	return b.AppendTo(nil)
}

// TestReadFirstBatches cuts a Fetch answer after the batch that holds the last offset a read of n
// records needs, and leaves it whole when it cannot tell.
func TestReadFirstBatches(t *testing.T) {
	var raw []byte
	var ends []int
	for base := int64(100); base < 400; base += 100 {
		raw = append(raw, batch(base, 100)...)
		ends = append(ends, len(raw))
	}
	partial := append(append([]byte{}, raw...), batch(400, 100)[:40]...)
	v1 := append([]byte{}, raw...)
	v1[16] = 1
	for _, c := range []struct {
		name      string
		raw       []byte
		offset, n int64
		want      int
	}{
		{"within the first batch", raw, 100, 100, ends[0]},
		{"from the middle of the first", raw, 150, 50, ends[0]},
		{"one past the first", raw, 150, 51, ends[1]},
		{"into the third", raw, 120, 200, ends[2]},
		{"past them all", raw, 100, 1000, len(raw)},
		{"a partial batch at the end", partial, 100, 1000, len(partial)},
		{"no limit", raw, 100, 0, len(raw)},
		{"not v2", v1, 100, 1, len(v1)},
		{"empty", nil, 100, 10, 0},
	} {
		if got := len(firstBatches(c.raw, c.offset, c.n)); got != c.want {
			t.Errorf("%s: kept %d bytes, want %d", c.name, got, c.want)
		}
	}
}
