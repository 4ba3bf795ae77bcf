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
