package httpapi

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzAppendString: appendString writes JSON that encoding/json reads back as the same string, and
// escapes U+2028 and U+2029; isText agrees with its definition byte by byte.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain text that is longer than a word", "quote \" and \\ backslash", "tab\tnew\nline\r",
		"\x00\x1f\x7f", "é日本😀", "\u2028\u2029", "\xff\xfe", strings.Repeat("abcdefg\"", 9)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		text := utf8.Valid(v)
		for _, c := range v {
			if c < 0x20 && c != '\t' && c != '\n' && c != '\r' || c == 0x7f {
				text = false
			}
		}
		if isText(v) != text {
			t.Fatalf("isText(%q) = %v", v, !text)
		}
		if !utf8.Valid(v) {
			return
		}
		out := appendString(nil, v)
		var got string
		if err := json.Unmarshal(out, &got); err != nil || got != string(v) {
			t.Fatalf("appendString(%q) = %s, which reads back as %q (%v)", v, out, got, err)
		}
		if bytes.ContainsRune(out, '\u2028') || bytes.ContainsRune(out, '\u2029') {
			t.Fatalf("appendString(%q) = %s holds a raw U+2028 or U+2029", v, out)
		}
		if string(appendString(nil, string(v))) != string(out) {
			t.Fatalf("appendString of %q differs between string and []byte", v)
		}
	})
}

// FuzzRuns: asciiRun and plainRun, which test several bytes at a time, stop where a loop over
// single bytes stops, from every start.
func FuzzRuns(f *testing.F) {
	for _, s := range []string{"", "a", strings.Repeat("x", 31), strings.Repeat("y", 32) + "\x1f",
		strings.Repeat("0123456789abcdef", 5) + "é" + strings.Repeat("z", 40), strings.Repeat("q", 70) + "\x7f",
		strings.Repeat("w", 33) + "\"" + strings.Repeat("v", 40) + "\\", strings.Repeat("\x80", 40)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		for i := range len(v) + 1 {
			ascii, plain := len(v), len(v)
			for j := len(v) - 1; j >= i; j-- {
				if c := v[j]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
					ascii = j
				}
				if c := v[j]; c < 0x20 || c == '"' || c == '\\' {
					plain = j
				}
			}
			if got := asciiRun(v, i, '"', '\\'); got != ascii {
				t.Fatalf("asciiRun(%q, %d) = %d, want %d", v, i, got, ascii)
			}
			if got := asciiRun(string(v), i, '"', '\\'); got != ascii {
				t.Fatalf("asciiRun(string %q, %d) = %d, want %d", v, i, got, ascii)
			}
			if got := plainRun(v, i); got != plain {
				t.Fatalf("plainRun(%q, %d) = %d, want %d", v, i, got, plain)
			}
		}
	})
}

// BenchmarkPlainRun scans a 1 KiB value of letters and digits, as the publish decoder does for every
// value of a body.
func BenchmarkPlainRun(b *testing.B) {
	v := letters(1024)
	b.SetBytes(int64(len(v)))
	for b.Loop() {
		if plainRun(v, 0) != len(v) {
			b.Fatal("the value is not one run")
		}
	}
}

// BenchmarkAppendValue writes a 1 KiB value of letters and digits as a record's value field, as a poll
// answer does for every record, into a reused buffer.
func BenchmarkAppendValue(b *testing.B) {
	v := letters(1024)
	b.SetBytes(int64(len(v)))
	buf := make([]byte, 0, 2048)
	for b.Loop() {
		buf = appendBytesField(buf[:0], "value", v, encodingText)
	}
}

// letters is n letters and digits in a fixed mixed order, the value of the scanning benchmarks.
func letters(n int) []byte {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	v := make([]byte, n)
	for i := range v {
		v[i] = alphabet[(i*7+i/3)%len(alphabet)]
	}
	return v
}
