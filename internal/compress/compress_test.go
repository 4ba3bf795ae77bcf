package compress_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/weir-mq/weir/internal/compress"
)

var codecs = []compress.Codec{compress.None, compress.Gzip, compress.Snappy, compress.LZ4, compress.Zstd}

func sample(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i % 251 / 7)
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	for _, c := range codecs {
		for _, n := range []int{0, 1, 1000, 100 << 10} {
			src := sample(n)
			enc, err := compress.Encode(c, src)
			if err != nil {
				t.Fatalf("%s: Encode(%d bytes): %v", c, n, err)
			}
			dec, err := compress.Decode(c, enc, n)
			if err != nil {
				t.Fatalf("%s: Decode(%d bytes): %v", c, n, err)
			}
			if !bytes.Equal(dec, src) {
				t.Fatalf("%s: %d bytes do not round trip", c, n)
			}
		}
	}
}

func TestSnappyRawAndXerial(t *testing.T) {
	src := sample(70 << 10)
	framed, err := compress.Encode(compress.Snappy, src)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(framed, []byte("\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01")) {
		t.Fatalf("snappy is not in xerial framing: % x", framed[:16])
	}
	for name, enc := range map[string][]byte{"xerial": framed, "raw": compress.EncodeSnappyRaw(src)} {
		dec, err := compress.Decode(compress.Snappy, enc, len(src))
		if err != nil || !bytes.Equal(dec, src) {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

func TestDecodeLimit(t *testing.T) {
	src := sample(64 << 10)
	for _, c := range codecs {
		enc, err := compress.Encode(c, src)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := compress.Decode(c, enc, len(src)-1); !errors.Is(err, compress.ErrTooLarge) {
			t.Errorf("%s: limit below the size: %v, want ErrTooLarge", c, err)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	if _, err := compress.Decode(5, []byte{1}, 10); !errors.Is(err, compress.ErrUnknownCodec) {
		t.Errorf("codec 5: %v", err)
	}
	if _, err := compress.Encode(7, []byte{1}); !errors.Is(err, compress.ErrUnknownCodec) {
		t.Errorf("encode codec 7: %v", err)
	}
	garbage := []byte("definitely not compressed data, not at all")
	for _, c := range codecs[1:] {
		if _, err := compress.Decode(c, garbage, 1<<20); !errors.Is(err, compress.ErrCorrupt) {
			t.Errorf("%s: garbage: %v, want ErrCorrupt", c, err)
		}
	}
	framed, _ := compress.Encode(compress.Snappy, sample(1000))
	for _, cut := range []int{17, 19, len(framed) - 1} {
		if _, err := compress.Decode(compress.Snappy, framed[:cut], 1<<20); !errors.Is(err, compress.ErrCorrupt) {
			t.Errorf("xerial cut at %d: %v", cut, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, c := range codecs {
		enc, _ := compress.Encode(c, sample(300))
		f.Add(int8(c), enc)
	}
	f.Add(int8(compress.Snappy), compress.EncodeSnappyRaw(sample(300)))
	f.Fuzz(func(t *testing.T, c int8, b []byte) {
		out, err := compress.Decode(compress.Codec(c), b, 1<<16)
		if err == nil && len(out) > 1<<16 {
			t.Fatalf("%d bytes past the limit", len(out))
		}
	})
}

// TestDecodeInto decodes every codec into one reused buffer: the output is Decode's, written into the
// buffer's array when it fits.
func TestDecodeInto(t *testing.T) {
	buf := make([]byte, 0, 200<<10)
	for _, c := range codecs {
		for _, n := range []int{0, 1, 1000, 100 << 10} {
			src := sample(n)
			enc, err := compress.Encode(c, src)
			if err != nil {
				t.Fatal(err)
			}
			dec, err := compress.DecodeInto(buf, c, enc, n)
			if err != nil || !bytes.Equal(dec, src) {
				t.Fatalf("%s: %d bytes do not round trip through DecodeInto: %v", c, n, err)
			}
			if n > 0 && &dec[0] != &buf[:1][0] {
				t.Errorf("%s: %d bytes decoded outside the buffer given", c, n)
			}
			if _, err := compress.DecodeInto(buf, c, enc, n-1); n > 0 && !errors.Is(err, compress.ErrTooLarge) {
				t.Errorf("%s: %d bytes under a limit of %d: %v", c, n, n-1, err)
			}
		}
	}
}
