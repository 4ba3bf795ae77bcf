package compress_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/weir-mq/weir/internal/compress"
)

// TestEncodeLevelRoundTrip encodes at the ends and middle of each codec's level range, twice (the second time
// from a pooled encoder), and decodes the result.
func TestEncodeLevelRoundTrip(t *testing.T) {
	levels := map[compress.Codec][]int{
		compress.None:   {0},
		compress.Gzip:   {compress.DefaultLevel, 1, 6, compress.GzipLevelMax},
		compress.Snappy: {0},
		compress.LZ4:    {1, 9, 10, compress.LZ4LevelMax},
		compress.Zstd:   {compress.ZstdLevelMin, -1, 1, 3, 9, compress.ZstdLevelMax},
	}
	for _, c := range codecs {
		for _, level := range levels[c] {
			for _, n := range []int{0, 1, 100 << 10} {
				for range 2 {
					src := sample(n)
					enc, err := compress.EncodeLevel(c, level, src)
					if err != nil {
						t.Fatalf("%s level %d: %v", c, level, err)
					}
					dec, err := compress.Decode(c, enc, n)
					if err != nil || !bytes.Equal(dec, src) {
						t.Fatalf("%s level %d: %d bytes do not round trip: %v", c, level, n, err)
					}
				}
			}
		}
	}
}

// TestEncodeLevelHigherCompressesMore checks that the level reaches the encoder: the highest level of
// gzip and lz4 gives fewer bytes than the lowest on compressible text, and zstd's differ (its fastest
// speed happens to compress this text best).
func TestEncodeLevelHigherCompressesMore(t *testing.T) {
	var text bytes.Buffer
	for i := range 5000 {
		fmt.Fprintf(&text, "record %d of user %d at %d\n", i, i*7919%1000, i*31)
	}
	for _, tc := range []struct {
		c      compress.Codec
		lo, hi int
	}{
		{compress.Gzip, 1, compress.GzipLevelMax},
		{compress.LZ4, 1, compress.LZ4LevelMax},
		{compress.Zstd, 1, compress.ZstdLevelMax},
	} {
		lo, err := compress.EncodeLevel(tc.c, tc.lo, text.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		hi, err := compress.EncodeLevel(tc.c, tc.hi, text.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if len(hi) >= len(lo) && tc.c != compress.Zstd || len(hi) == len(lo) {
			t.Errorf("%s: level %d gives %d bytes, level %d %d", tc.c, tc.hi, len(hi), tc.lo, len(lo))
		}
	}
}

func TestEncodeLevelOutOfRange(t *testing.T) {
	for _, tc := range []struct {
		c     compress.Codec
		level int
	}{
		{compress.Gzip, 0}, {compress.Gzip, 10}, {compress.LZ4, 0}, {compress.LZ4, 18},
		{compress.Zstd, 23}, {compress.Zstd, compress.ZstdLevelMin - 1}, {compress.Codec(7), 1},
	} {
		if _, err := compress.EncodeLevel(tc.c, tc.level, sample(10)); err == nil {
			t.Errorf("%s level %d: no error", tc.c, tc.level)
		}
	}
}

// TestEncodeLevelConcurrent runs pooled encoders side by side (go test -race).
func TestEncodeLevelConcurrent(t *testing.T) {
	src := sample(32 << 10)
	var wg sync.WaitGroup
	for i := range 8 {
		c := codecs[i%len(codecs)]
		level := map[compress.Codec]int{compress.Gzip: 5, compress.LZ4: 3, compress.Zstd: 3}[c]
		wg.Go(func() {
			for range 20 {
				enc, err := compress.EncodeLevel(c, level, src)
				if err != nil {
					t.Error(err)
					return
				}
				if dec, err := compress.Decode(c, enc, len(src)); err != nil || !bytes.Equal(dec, src) {
					t.Errorf("%s: %v", c, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
