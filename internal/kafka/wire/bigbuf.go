package wire

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Large responses (fetches carrying records) are encoded into buffers taken from bigBufs and sized
// from the start by sizeHint, so that a response of many megabytes is copied once, into a buffer
// reused by the next large response of any connection, instead of into one grown by doubling and
// dropped after each write.
var bigBufs = sync.Pool{New: func() any { return new([]byte) }}

// bigBufMax is the largest buffer bigBufs keeps; a larger one is left to the garbage collector.
const bigBufMax = 64 << 20

// sizeHint is about how many bytes resp encodes to when it carries record bytes (a fetch response),
// else 0: its records plus a little per partition for the fields around them.
func sizeHint(resp kmsg.Response) int {
	f, ok := resp.(*kmsg.FetchResponse)
	if !ok {
		return 0
	}
	n := 64
	for i := range f.Topics {
		t := &f.Topics[i]
		n += 32 + len(t.Topic)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			n += 64 + len(p.RecordBatches) + 16*len(p.AbortedTransactions)
		}
	}
	return n
}

// getBigBuf returns a pooled buffer of at least n bytes' capacity, empty.
func getBigBuf(n int) *[]byte {
	b := bigBufs.Get().(*[]byte)
	if cap(*b) < n {
		*b = make([]byte, 0, n)
	}
	*b = (*b)[:0]
	return b
}

// putBigBuf gives b back to the pool unless it grew past bigBufMax.
func putBigBuf(b *[]byte) {
	if cap(*b) <= bigBufMax {
		bigBufs.Put(b)
	}
}
