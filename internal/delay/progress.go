package delay

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ProgressHeader is the key of the record header that marks a progress record in a delay partition;
// its value is the progress, encoded by AppendProgress. The header is reserved: a record of one
// uncompressed or compressed batch of its own that carries it is read as progress, never released.
const ProgressHeader = "weir.delay.progress"

// progressVersion is the first byte of an encoded progress.
const progressVersion = 1

// progressLen is the length of an encoded progress: the version, then Cursor.Due, Cursor.Offset,
// ScanEnd and Low as big-endian int64s.
const progressLen = 1 + 4*8

// ErrBadProgress is returned by ParseProgress for a value that is not an encoded progress.
var ErrBadProgress = errors.New("delay: bad progress record")

// AppendProgress appends p, encoded, to b.
func AppendProgress(b []byte, p Progress) []byte {
	b = append(b, progressVersion)
	for _, v := range []int64{p.Cursor.Due, p.Cursor.Offset, p.ScanEnd, p.Low} {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	return b
}

// ParseProgress decodes a value AppendProgress wrote. A value of another length or version, or
// whose offsets are negative or out of order (Low above ScanEnd), is ErrBadProgress.
func ParseProgress(b []byte) (Progress, error) {
	if len(b) != progressLen || b[0] != progressVersion {
		return Progress{}, fmt.Errorf("%w: %d bytes", ErrBadProgress, len(b))
	}
	v := func(i int) int64 { return int64(binary.BigEndian.Uint64(b[1+8*i:])) }
	p := Progress{Cursor: Entry{Due: v(0), Offset: v(1)}, ScanEnd: v(2), Low: v(3)}
	if p.Cursor.Offset < 0 || p.Low < 0 || p.Low > p.ScanEnd {
		return Progress{}, fmt.Errorf("%w: %+v", ErrBadProgress, p)
	}
	return p, nil
}

// Murmur2 is Kafka's murmur2 hash of a record key, as the default partitioner hashes it.
func Murmur2(b []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	h := seed ^ uint32(len(b))
	for len(b) >= 4 {
		k := binary.LittleEndian.Uint32(b)
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
		b = b[4:]
	}
	switch len(b) {
	case 3:
		h ^= uint32(b[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(b[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(b[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// KeyPartition is the partition of n the Kafka default partitioner gives a record with key.
func KeyPartition(key []byte, n int32) int32 {
	return (Murmur2(key) & 0x7fffffff) % n
}
