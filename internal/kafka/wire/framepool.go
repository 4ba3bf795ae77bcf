package wire

import (
	"math/bits"
	"sync"
)

// A server connection reads a Produce frame of frameClassMin to frameClassMax bytes into a buffer
// taken from framePools, one pool per power-of-two size class, and gives it back once the request's
// Reply was called and its response written (docs/storage.md, "Produce frames from a pool"). A frame
// larger than frameEagerMax takes a pooled buffer only when one is there: otherwise its buffer grows as
// its bytes arrive (readFrameFrom), the last step to its class's size, and joins the pool afterwards.
// Other requests, smaller and larger frames and the client's response frames get buffers of their own.

const (
	// frameClassMinShift is log2 of frameClassMin.
	frameClassMinShift = 10
	// frameClassMin is the smallest frame read into a pooled buffer: allocating a smaller one costs
	// about as much as taking it from a pool.
	frameClassMin = 1 << frameClassMinShift
	// frameClassMaxShift is log2 of frameClassMax, the largest frame read into a pooled buffer.
	frameClassMaxShift = 26
	frameClassMax      = 1 << frameClassMaxShift
)

// framePools holds the buffers of size class i, of 1<<(frameClassMinShift+i) bytes each.
var framePools [frameClassMaxShift - frameClassMinShift + 1]sync.Pool

// frameClass returns the index in framePools of the smallest class that holds n bytes, or -1 when a
// frame of n bytes is not pooled.
func frameClass(n int) int {
	if n < frameClassMin || n > frameClassMax {
		return -1
	}
	return bits.Len(uint(n-1)) - frameClassMinShift
}

// getFrameBuf returns a pooled buffer of length n, or nil when n has no class, or when n is above
// frameEagerMax and the pool has no buffer of its class. Its bytes are whatever the previous user left:
// the caller overwrites all n of them.
func getFrameBuf(n int) *[]byte {
	i := frameClass(n)
	if i < 0 {
		return nil
	}
	b, _ := framePools[i].Get().(*[]byte)
	if b == nil {
		if n > frameEagerMax {
			return nil
		}
		s := make([]byte, 1<<(frameClassMinShift+i))
		b = &s
	}
	*b = (*b)[:n]
	return b
}

// newFrameBuf allocates a buffer of length n with its class's capacity, for putFrameBuf once it is
// done; n must have a class.
func newFrameBuf(n int) *[]byte {
	s := make([]byte, n, 1<<(frameClassMinShift+frameClass(n)))
	return &s
}

// putFrameBuf gives b, from getFrameBuf, back to its class; nil is ignored. The caller must be sure
// that nothing reads or writes its bytes any more.
func putFrameBuf(b *[]byte) {
	if b == nil {
		return
	}
	framePools[frameClass(cap(*b))].Put(b)
}
