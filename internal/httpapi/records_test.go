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
