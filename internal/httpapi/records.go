package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// recordIn is one record of a publish body (docs/http.md, "Keys, values and headers").
type recordIn struct {
	Partition *int32     `json:"partition"`
	Key       rawValue   `json:"key"`
	KeyB64    *string    `json:"key_b64"`
	Value     rawValue   `json:"value"`
	ValueB64  *string    `json:"value_b64"`
	Headers   []headerIn `json:"headers"`
	Timestamp *int64     `json:"timestamp"`
}

// rawValue is a key or value as it stands in the body: its JSON text, already checked by the decoder.
// Its UnmarshalJSON keeps the text, as json.RawMessage does, without copying it for a string with no
// escapes, the common case on the publish path.
type rawValue []byte

func (v *rawValue) UnmarshalJSON(b []byte) error {
	*v = b
	return nil
}

// headerIn is one header of a published record.
type headerIn struct {
	Key      string  `json:"key"`
	Value    *string `json:"value"`
	ValueB64 *string `json:"value_b64"`
}

// toRecord fills rec, a zero record, with r for topic; i is its index in the request, for messages.
func (r *recordIn) toRecord(rec *kgo.Record, topic string, i int) error {
	key, err := bytesOf("key", r.Key, r.KeyB64, i)
	if err != nil {
		return err
	}
	value, err := bytesOf("value", r.Value, r.ValueB64, i)
	if err != nil {
		return err
	}
	rec.Topic, rec.Key, rec.Value = topic, key, value
	if r.Partition != nil {
		rec.Partition = *r.Partition
	}
	if r.Timestamp != nil {
		rec.Timestamp = time.UnixMilli(*r.Timestamp)
	}
	for _, h := range r.Headers {
		if h.Key == "" {
			return errorf(http.StatusBadRequest, "invalid_record", "record %d: a header has no key", i)
		}
		var v []byte
		switch {
		case h.Value != nil && h.ValueB64 != nil:
			return errorf(http.StatusBadRequest, "invalid_record", "record %d: header %q has both value and value_b64", i, h.Key)
		case h.ValueB64 != nil:
			if v, err = base64.StdEncoding.DecodeString(*h.ValueB64); err != nil {
				return errorf(http.StatusBadRequest, "invalid_base64", "record %d: header %q: %v", i, h.Key, err)
			}
		case h.Value != nil:
			v = []byte(*h.Value)
		}
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: v})
	}
	return nil
}

// bytesOf is the bytes a key or value stands for: a JSON string's UTF-8 bytes, any other JSON value's
// compacted text, base64 decoded, or nil for null or absent. A string without escapes is a slice of
// raw, that is of the request's body, which nothing else holds.
func bytesOf(name string, raw rawValue, b64 *string, i int) ([]byte, error) {
	isNull := len(raw) == 0 || string(raw) == "null"
	switch {
	case !isNull && b64 != nil:
		return nil, errorf(http.StatusBadRequest, "invalid_record", "record %d: both %s and %s_b64 are given", i, name, name)
	case b64 != nil:
		b, err := base64.StdEncoding.DecodeString(*b64)
		if err != nil {
			return nil, errorf(http.StatusBadRequest, "invalid_base64", "record %d: %s_b64: %v", i, name, err)
		}
		return b, nil
	case isNull:
		return nil, nil
	case raw[0] == '"' && bytes.IndexByte(raw, '\\') < 0:
		return raw[1 : len(raw)-1], nil
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, errorf(http.StatusBadRequest, "invalid_json", "record %d: %s: %v", i, name, err)
		}
		return []byte(s), nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, errorf(http.StatusBadRequest, "invalid_json", "record %d: %s: %v", i, name, err)
	}
	return buf.Bytes(), nil
}

// encoding is how records read from the API carry their keys and values (the encoding parameter).
type encoding int

const (
	// encodingText is "value" as a string when valid UTF-8, else "value_b64".
	encodingText encoding = iota
	// encodingBase64 is always "value_b64".
	encodingBase64
	// encodingJSON is "value" as the JSON value when the bytes parse as JSON, else as encodingText.
	encodingJSON
)

// parseEncoding reads the encoding query parameter.
func parseEncoding(s string) (encoding, error) {
	switch s {
	case "", "text":
		return encodingText, nil
	case "base64":
		return encodingBase64, nil
	case "json":
		return encodingJSON, nil
	}
	return 0, errorf(http.StatusBadRequest, "invalid_parameter", "encoding %q: want text, base64 or json", s)
}

// appendRecord appends r as the JSON object docs/http.md gives for a record read. It is written by
// hand, not through encoding/json, because it is the hot path of every poll and read.
func appendRecord(b []byte, r *kgo.Record, enc encoding) []byte {
	b = append(b, `{"topic":`...)
	b = appendString(b, r.Topic)
	b = append(b, `,"partition":`...)
	b = strconv.AppendInt(b, int64(r.Partition), 10)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, r.Offset, 10)
	b = append(b, `,"timestamp":`...)
	b = strconv.AppendInt(b, r.Timestamp.UnixMilli(), 10)
	b = appendBytesField(b, "key", r.Key, enc)
	b = appendBytesField(b, "value", r.Value, enc)
	if len(r.Headers) > 0 {
		b = append(b, `,"headers":[`...)
		for i, h := range r.Headers {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"key":`...)
			b = appendString(b, h.Key)
			b = appendBytesField(b, "value", h.Value, encodingText)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendBytesField appends `,"name":…` or `,"name_b64":…` for v by enc; nothing for nil.
func appendBytesField(b []byte, name string, v []byte, enc encoding) []byte {
	if v == nil {
		return b
	}
	if enc == encodingJSON && json.Valid(v) {
		b = append(b, `,"`...)
		b = append(b, name...)
		b = append(b, `":`...)
		var buf bytes.Buffer
		if json.Compact(&buf, v) == nil {
			return append(b, buf.Bytes()...)
		}
		return append(b, v...)
	}
	if enc != encodingBase64 && asciiRun(v, 0, '"', '\\') == len(v) {
		// Printable ASCII with nothing to escape, the common case: the bytes as they are.
		b = append(b, `,"`...)
		b = append(b, name...)
		b = append(b, `":"`...)
		b = append(b, v...)
		return append(b, '"')
	}
	if enc != encodingBase64 && isText(v) {
		b = append(b, `,"`...)
		b = append(b, name...)
		b = append(b, `":`...)
		return appendString(b, v)
	}
	b = append(b, `,"`...)
	b = append(b, name...)
	b = append(b, `_b64":"`...)
	b = base64.StdEncoding.AppendEncode(b, v)
	return append(b, '"')
}

// isText reports whether v reads as text: valid UTF-8 without control characters other than tab,
// newline and carriage return. Other bytes are given as base64.
func isText(v []byte) bool {
	i := asciiRun(v, 0, 0, 0)
	if i == len(v) {
		return true
	}
	for _, c := range v[i:] {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' || c == 0x7f {
			return false
		}
	}
	return utf8.Valid(v[i:])
}

// Masks of the word-at-a-time tests: a byte of ones in each lane, and each lane's high bit.
const lanes, lanesHigh = 0x0101010101010101, 0x8080808080808080

// asciiRun is the index of the first byte of s at or after i that is not printable ASCII (a control
// character, DEL, or a byte of a multi-byte UTF-8 sequence) or that is one of stop1 and stop2 (0 for
// none), or len(s). Keys and values are mostly such runs: the stop bytes are found by bytes.IndexByte
// (vector instructions), and the others before them 32 bytes at a time (four words tested and joined
// before one branch, as plainRun does), then eight. BenchmarkAppendValue took 186-218 ns per KiB
// against 310-450 ns with a branch per word and a longer test of it.
func asciiRun[T string | []byte](s T, i int, stop1, stop2 byte) int {
	end := len(s)
	for _, stop := range [2]byte{stop1, stop2} {
		if stop == 0 {
			continue
		}
		if j := bytes.IndexByte([]byte(s[i:end]), stop); j >= 0 {
			end = i + j
		}
	}
	for ; i+32 <= end; i += 32 {
		c := s[i : i+32]
		if notASCII(c)|notASCII(c[8:])|notASCII(c[16:])|notASCII(c[24:]) != 0 {
			break
		}
	}
	for ; i+8 <= end; i += 8 {
		if notASCII(s[i:]) != 0 {
			break
		}
	}
	for ; i < end; i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return i
		}
	}
	return end
}

// notASCII is non-zero when one of the first eight bytes of s is not printable ASCII: a lane with its
// high bit set, or one that adding 0x01 takes to 0x80 (DEL), or one that adding 0x60 leaves below 0x80
// (a control character). Where all lanes are below 0x80 no addition carries into the next lane; where
// one is not, the word is not ASCII anyway.
func notASCII[T string | []byte](s T) uint64 {
	w := binary.LittleEndian.Uint64([]byte(s[:8]))
	return (w | (w + lanes*0x01) | ^(w + lanes*0x60)) & lanesHigh
}

const hexDigits = "0123456789abcdef"

// appendString appends s, valid UTF-8, as a JSON string: quotes, backslashes and control characters
// escaped, and U+2028 and U+2029, which JavaScript does not take raw in a string.
func appendString[T string | []byte](b []byte, s T) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if i = asciiRun(s, i, '"', '\\'); i == len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
