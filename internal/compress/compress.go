// Package compress implements the compression codecs of Kafka record batches: gzip, snappy (Kafka's xerial
// framing, as the Java producer writes it, and raw blocks, as some clients write them), lz4 (the LZ4 frame
// format) and zstd. A batch's records section is compressed as a whole; only code that must read or convert
// records uses this package: compaction, the HTTP API, the CLI, and the produce path of a topic whose
// compression.type differs from a batch's codec (EncodeLevel); never the fetch path.
//
// Decode takes a limit on the decompressed size, so a small hostile input cannot make it allocate without
// bound, and it never panics on malformed input.
package compress

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Codec is a batch's compression codec, the low three bits of its attributes.
type Codec int8

// The codecs Kafka defines.
const (
	None   Codec = 0
	Gzip   Codec = 1
	Snappy Codec = 2
	LZ4    Codec = 3
	Zstd   Codec = 4
)

// String names the codec as compression.type does.
func (c Codec) String() string {
	switch c {
	case None:
		return "none"
	case Gzip:
		return "gzip"
	case Snappy:
		return "snappy"
	case LZ4:
		return "lz4"
	case Zstd:
		return "zstd"
	default:
		return fmt.Sprintf("Codec(%d)", int8(c))
	}
}

// Errors returned by Decode and Encode.
var (
	// ErrUnknownCodec is returned for a codec number Kafka does not define.
	ErrUnknownCodec = errors.New("compress: unknown codec")
	// ErrCorrupt wraps the codec's error for input that does not decompress.
	ErrCorrupt = errors.New("compress: corrupt input")
	// ErrTooLarge is returned when the decompressed data would exceed the caller's limit.
	ErrTooLarge = errors.New("compress: decompressed data over the limit")
)

// xerialMagic starts a snappy stream in Kafka's xerial framing; a 4-byte version and a 4-byte minimum
// compatible version (both 1) follow, then blocks of a 4-byte big-endian length and a raw snappy block.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const (
	xerialHeaderSize = 16
	xerialBlockSize  = 32 << 10
	// maxZstdWindow bounds the window a zstd stream may ask for (clients use a few MiB at most).
	maxZstdWindow = 64 << 20
)

// Decode decompresses src, compressed with codec c, and returns at most limit bytes: larger output gives
// ErrTooLarge. None returns src itself.
func Decode(c Codec, src []byte, limit int) ([]byte, error) {
	if c == None {
		if len(src) > limit {
			return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(src), limit)
		}
		return src, nil
	}
	return DecodeInto(nil, c, src, limit)
}

// DecodeInto is Decode writing the output into buf's array when it fits (a new one otherwise), so
// that a caller can reuse one buffer across batches; None copies src. The result aliases buf's array
// when it fit.
func DecodeInto(buf []byte, c Codec, src []byte, limit int) ([]byte, error) {
	var out []byte
	var err error
	buf = buf[:0]
	switch c {
	case None:
		if len(src) > limit {
			return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(src), limit)
		}
		return append(buf, src...), nil
	case Gzip:
		out, err = decodeGzip(buf, src, limit)
	case Snappy:
		out, err = decodeSnappy(buf, src, limit)
	case LZ4:
		out, err = readLimited(buf, lz4.NewReader(bytes.NewReader(src)), limit)
	case Zstd:
		out, err = decodeZstd(buf, src, limit)
	default:
		return nil, fmt.Errorf("%w: %d", ErrUnknownCodec, c)
	}
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, c, err)
	}
	return out, nil
}

// readLimited reads r to its end into buf, failing with ErrTooLarge past limit bytes.
func readLimited(buf []byte, r io.Reader, limit int) ([]byte, error) {
	b := bytes.NewBuffer(buf)
	if _, err := b.ReadFrom(io.LimitReader(r, int64(limit)+1)); err != nil {
		return nil, err
	}
	if b.Len() > limit {
		return nil, fmt.Errorf("%w: limit %d", ErrTooLarge, limit)
	}
	return b.Bytes(), nil
}

func decodeGzip(buf, src []byte, limit int) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(src))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	return readLimited(buf, zr, limit)
}

func decodeSnappy(buf, src []byte, limit int) ([]byte, error) {
	if !bytes.HasPrefix(src, xerialMagic) {
		return decodeSnappyBlock(buf, src, limit)
	}
	if len(src) < xerialHeaderSize {
		return nil, errors.New("short xerial header")
	}
	out := buf
	for rest := src[xerialHeaderSize:]; len(rest) > 0; {
		if len(rest) < 4 {
			return nil, errors.New("truncated xerial block length")
		}
		n := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(n) > uint64(len(rest)) {
			return nil, errors.New("xerial block past the end")
		}
		var err error
		if out, err = decodeSnappyBlock(out, rest[:n], limit); err != nil {
			return nil, err
		}
		rest = rest[n:]
	}
	return out, nil
}

// decodeSnappyBlock appends the decoded raw block src to dst, keeping the total within limit.
func decodeSnappyBlock(dst, src []byte, limit int) ([]byte, error) {
	n, err := snappy.DecodedLen(src)
	if err != nil {
		return nil, err
	}
	if n > limit-len(dst) {
		return nil, fmt.Errorf("%w: limit %d", ErrTooLarge, limit)
	}
	// decoded in place, at the end of dst: no block allocated apart and copied
	out := slices.Grow(dst, n)[:len(dst)+n]
	block, err := snappy.Decode(out[len(dst):], src)
	if err != nil {
		return nil, err
	}
	if len(block) == 0 || &block[0] != &out[len(dst)] {
		return append(out[:len(dst)], block...), nil
	}
	return out[:len(dst)+len(block)], nil
}

// zstdDecoders holds synchronous stream decoders; a stream read through a limit never decodes much more than
// the limit, unlike DecodeAll.
var zstdDecoders = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxZstdWindow))
	if err != nil {
		return err
	}
	return d
}}

func decodeZstd(buf, src []byte, limit int) ([]byte, error) {
	got := zstdDecoders.Get()
	d, ok := got.(*zstd.Decoder)
	if !ok {
		return nil, got.(error)
	}
	defer zstdDecoders.Put(d)
	if err := d.Reset(bytes.NewReader(src)); err != nil {
		return nil, err
	}
	out, err := readLimited(buf, d, limit)
	// Drop the reference to src, so a pooled decoder does not keep the caller's buffer alive.
	_ = d.Reset(bytes.NewReader(nil))
	return out, err
}

var zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
})

// Encode compresses src with codec c, as a Kafka client would: snappy in xerial framing with 32 KiB blocks,
// lz4 as an LZ4 frame. None returns src itself.
func Encode(c Codec, src []byte) ([]byte, error) {
	switch c {
	case None:
		return src, nil
	case Gzip:
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(src); err != nil {
			return nil, fmt.Errorf("compress: gzip: %w", err)
		}
		if err := zw.Close(); err != nil {
			return nil, fmt.Errorf("compress: gzip: %w", err)
		}
		return buf.Bytes(), nil
	case Snappy:
		out := append([]byte{}, xerialMagic...)
		out = binary.BigEndian.AppendUint32(out, 1)
		out = binary.BigEndian.AppendUint32(out, 1)
		for len(src) > 0 {
			n := min(len(src), xerialBlockSize)
			block := snappy.Encode(nil, src[:n])
			out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
			out = append(out, block...)
			src = src[n:]
		}
		return out, nil
	case LZ4:
		var buf bytes.Buffer
		zw := lz4.NewWriter(&buf)
		if _, err := zw.Write(src); err != nil {
			return nil, fmt.Errorf("compress: lz4: %w", err)
		}
		if err := zw.Close(); err != nil {
			return nil, fmt.Errorf("compress: lz4: %w", err)
		}
		return buf.Bytes(), nil
	case Zstd:
		enc, err := zstdEncoder()
		if err != nil {
			return nil, fmt.Errorf("compress: zstd: %w", err)
		}
		return enc.EncodeAll(src, nil), nil
	default:
		return nil, fmt.Errorf("%w: %d", ErrUnknownCodec, c)
	}
}

// EncodeSnappyRaw compresses src as one raw snappy block, without xerial framing, as some non-Java clients
// write it. Decode reads both forms.
func EncodeSnappyRaw(src []byte) []byte { return snappy.Encode(nil, src) }
