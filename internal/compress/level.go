package compress

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// DefaultLevel asks EncodeLevel for the codec's default level, as compression.gzip.level's -1 does.
const DefaultLevel = -1

// Levels Kafka allows (compression.gzip.level, compression.lz4.level, compression.zstd.level).
const (
	GzipLevelMax = 9
	LZ4LevelMax  = 17
	ZstdLevelMin = -131072
	ZstdLevelMax = 22
)

// lz4FastLevelMax is the highest Kafka lz4 level weir compresses with lz4's fast compressor; the levels
// above it use the high-compression mode of pierrec/lz4, whose nine depths take Kafka's 10 to 17 as 2 to 9.
// That mode is about twenty times slower than the fast one for a tenth fewer bytes (docs/configs.md), too
// slow for Kafka's default level 9 to mean it on a broker's produce path.
const (
	lz4FastLevelMax = 9
	lz4Depths       = 9
)

// EncodeLevel compresses src with codec c at level, as a broker does for a topic's compression.type:
// gzip 1 to 9 (DefaultLevel for gzip's own), lz4 1 to 17 (1 to 9, Kafka's default among them, with lz4's
// fast compressor, 10 to 17 in its slower high-compression mode), zstd -131072 to 22 (mapped to the nearest of the zstd encoder's
// speeds, so several levels compress alike). snappy and None have no level and ignore it. A level out
// of the codec's range is an error. Encoders are pooled per level: EncodeLevel is safe for concurrent use.
func EncodeLevel(c Codec, level int, src []byte) ([]byte, error) {
	switch c {
	case Gzip:
		if level != DefaultLevel && (level < 1 || level > GzipLevelMax) {
			return nil, fmt.Errorf("compress: gzip level %d outside [1, %d]", level, GzipLevelMax)
		}
		return encodeGzip(level, src)
	case LZ4:
		if level < 1 || level > LZ4LevelMax {
			return nil, fmt.Errorf("compress: lz4 level %d outside [1, %d]", level, LZ4LevelMax)
		}
		return encodeLZ4(max(level-lz4FastLevelMax+1, 1)-1, src)
	case Zstd:
		if level < ZstdLevelMin || level > ZstdLevelMax {
			return nil, fmt.Errorf("compress: zstd level %d outside [%d, %d]", level, ZstdLevelMin, ZstdLevelMax)
		}
		enc, err := zstdLevelEncoder(zstd.EncoderLevelFromZstd(level))
		if err != nil {
			return nil, fmt.Errorf("compress: zstd: %w", err)
		}
		return enc.EncodeAll(src, make([]byte, 0, len(src)/2+64)), nil
	default:
		return Encode(c, src)
	}
}

// gzipWriters pools gzip writers per level, index level+1 (0 for DefaultLevel).
var gzipWriters [GzipLevelMax + 2]sync.Pool

func encodeGzip(level int, src []byte) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(src)/2 + 64)
	pool := &gzipWriters[level+1]
	zw, ok := pool.Get().(*gzip.Writer)
	if ok {
		zw.Reset(&buf)
	} else {
		var err error
		if zw, err = gzip.NewWriterLevel(&buf, level); err != nil {
			return nil, fmt.Errorf("compress: gzip: %w", err)
		}
	}
	if _, err := zw.Write(src); err != nil {
		return nil, fmt.Errorf("compress: gzip: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compress: gzip: %w", err)
	}
	zw.Reset(nil)
	pool.Put(zw)
	return buf.Bytes(), nil
}

// lz4Writers pools lz4 frame writers per depth, index 0 for the fast compressor.
var lz4Writers [lz4Depths]sync.Pool

// encodeLZ4 compresses src as an LZ4 frame, with the fast compressor at depth 0, else in the
// high-compression mode at pierrec/lz4's LevelN for depth N-1 (N from 2 to 9).
func encodeLZ4(depth int, src []byte) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(src)/2 + 64)
	pool := &lz4Writers[depth]
	zw, ok := pool.Get().(*lz4.Writer)
	if ok {
		zw.Reset(&buf)
	} else {
		zw = lz4.NewWriter(&buf)
		level := lz4.Fast
		if depth > 0 {
			// Level1 … Level9 are consecutive powers of two from 1<<9.
			level = lz4.Level1 << depth
		}
		if err := zw.Apply(lz4.CompressionLevelOption(level)); err != nil {
			return nil, fmt.Errorf("compress: lz4: %w", err)
		}
	}
	if _, err := zw.Write(src); err != nil {
		return nil, fmt.Errorf("compress: lz4: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compress: lz4: %w", err)
	}
	zw.Reset(nil)
	pool.Put(zw)
	return buf.Bytes(), nil
}

// zstdEncoders holds one encoder per zstd speed, made on first use. Each runs up to GOMAXPROCS EncodeAll
// calls side by side.
var zstdEncoders sync.Map

func zstdLevelEncoder(level zstd.EncoderLevel) (*zstd.Encoder, error) {
	if e, ok := zstdEncoders.Load(level); ok {
		return e.(*zstd.Encoder), nil
	}
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(level), zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)))
	if err != nil {
		return nil, err
	}
	if prev, loaded := zstdEncoders.LoadOrStore(level, e); loaded {
		_ = e.Close()
		return prev.(*zstd.Encoder), nil
	}
	return e, nil
}
