package httpapi

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"strconv"
	"unicode/utf8"
)

// scanDepthMax bounds the nesting of a key or value the scanner takes; a deeper one is left to
// encoding/json, whose own limit then applies.
const scanDepthMax = 1000

// decodePublish decodes the body of a publish, {"records":[…]}, into its records. Publish is the hot
// path of the API and encoding/json spent most of its CPU there (scanning every 100 KiB body twice,
// once to find the value's end and once to decode it), so the body is scanned by hand (scanPublish)
// in one pass. Whatever the scan does not take — invalid JSON, a field name spelled otherwise than
// docs/http.md does, a field given twice, a number that is not an integer in range, a null record —
// is decoded by encoding/json instead, so that every answer, errors included, is encoding/json's. The
// scan appends the records to dst[:0], a slice reused from one publish to the next.
func decodePublish(body []byte, dst []recordIn) ([]recordIn, error) {
	if recs, ok := scanPublish(body, dst); ok {
		return recs, nil
	}
	var in publishBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, errorf(http.StatusBadRequest, "invalid_json", "the body is not {\"records\":[…]}: %v", err)
	}
	if dec.More() {
		return nil, errorf(http.StatusBadRequest, "invalid_json", "the body holds more than one JSON value")
	}
	return in.Records, nil
}

// scanPublish scans a publish body in the canonical shape; false when the body is anything else, valid
// or not. The records it returns are those encoding/json decodes from the same body (keys and values
// alias the body), appended to dst[:0].
func scanPublish(body []byte, dst []recordIn) ([]recordIn, bool) {
	s := scanner{b: body}
	if !s.consume('{') {
		return nil, false
	}
	var recs []recordIn
	seen := false
	if !s.consume('}') {
		for {
			name, ok := s.name()
			if !ok || string(name) != "records" || seen {
				return nil, false
			}
			seen = true
			if recs, ok = s.records(dst); !ok {
				return nil, false
			}
			if !s.consume(',') {
				break
			}
		}
		if !s.consume('}') {
			return nil, false
		}
	}
	s.space()
	return recs, s.i == len(s.b)
}

// records scans the array of records, or null, into dst[:0].
func (s *scanner) records(dst []recordIn) ([]recordIn, bool) {
	if s.null() {
		return nil, true
	}
	if !s.consume('[') {
		return nil, false
	}
	recs := dst[:0]
	if recs == nil {
		recs = []recordIn{}
	}
	if s.consume(']') {
		return recs, true
	}
	for {
		recs = append(recs, recordIn{})
		if !s.record(&recs[len(recs)-1]) {
			return nil, false
		}
		if !s.consume(',') {
			return recs, s.consume(']')
		}
	}
}

// Fields of a record, as bits of the set of fields seen.
const (
	fieldPartition = 1 << iota
	fieldKey
	fieldKeyB64
	fieldValue
	fieldValueB64
	fieldHeaders
	fieldTimestamp
)

// record scans one record object into r.
func (s *scanner) record(r *recordIn) bool {
	if !s.consume('{') {
		return false
	}
	if s.consume('}') {
		return true
	}
	seen := 0
	for {
		name, ok := s.name()
		if !ok {
			return false
		}
		var field int
		switch string(name) {
		case "partition":
			field = fieldPartition
			r.Partition, ok = intField[int32](s, 32)
		case "key":
			field = fieldKey
			r.Key, ok = s.raw()
		case "key_b64":
			field = fieldKeyB64
			r.KeyB64, ok = s.optString()
		case "value":
			field = fieldValue
			r.Value, ok = s.raw()
		case "value_b64":
			field = fieldValueB64
			r.ValueB64, ok = s.optString()
		case "headers":
			field = fieldHeaders
			r.Headers, ok = s.headers()
		case "timestamp":
			field = fieldTimestamp
			r.Timestamp, ok = intField[int64](s, 64)
		}
		if !ok || field == 0 || seen&field != 0 {
			return false
		}
		seen |= field
		if !s.consume(',') {
			return s.consume('}')
		}
	}
}

// headers scans a record's array of headers, or null.
func (s *scanner) headers() ([]headerIn, bool) {
	if s.null() {
		return nil, true
	}
	if !s.consume('[') {
		return nil, false
	}
	hs := []headerIn{}
	if s.consume(']') {
		return hs, true
	}
	for {
		var h headerIn
		if !s.header(&h) {
			return nil, false
		}
		hs = append(hs, h)
		if !s.consume(',') {
			return hs, s.consume(']')
		}
	}
}

// header scans one header object into h.
func (s *scanner) header(h *headerIn) bool {
	if !s.consume('{') {
		return false
	}
	if s.consume('}') {
		return true
	}
	var seenKey, seenValue, seenB64 bool
	for {
		name, ok := s.name()
		if !ok {
			return false
		}
		var seen *bool
		switch string(name) {
		case "key":
			seen = &seenKey
			if !s.null() {
				var k *string
				if k, ok = s.optString(); ok {
					h.Key = *k
				}
			}
		case "value":
			seen = &seenValue
			h.Value, ok = s.optString()
		case "value_b64":
			seen = &seenB64
			h.ValueB64, ok = s.optString()
		}
		if !ok || seen == nil || *seen {
			return false
		}
		*seen = true
		if !s.consume(',') {
			return s.consume('}')
		}
	}
}

// scanner reads JSON text from b at i. Its methods skip the white space before what they read, and
// report false for anything they do not take, leaving i anywhere.
type scanner struct {
	b []byte
	i int
}

// space skips white space.
func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// consume reads the byte c.
func (s *scanner) consume(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// null reads the literal null, and reads nothing when the next value is another.
func (s *scanner) null() bool {
	s.space()
	if bytes.HasPrefix(s.b[s.i:], []byte("null")) {
		s.i += len("null")
		return true
	}
	return false
}

// name reads an object's member name and its colon. A name with escapes is not taken. The name is a
// slice of the body, compared as a string without being copied into one (a copy per field was most
// of a publish decoding's allocations).
func (s *scanner) name() ([]byte, bool) {
	s.space()
	raw, escaped, ok := s.str()
	if !ok || escaped || !s.consume(':') {
		return nil, false
	}
	return raw[1 : len(raw)-1], true
}

// str reads a string at i, with no white space before it, and returns its text, quotes included,
// and whether it holds escapes. Bytes that are not valid UTF-8 are taken, as encoding/json takes them.
func (s *scanner) str() (raw []byte, escaped, ok bool) {
	start := s.i
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false, false
	}
	for s.i++; s.i < len(s.b); s.i++ {
		s.i = plainRun(s.b, s.i)
		if s.i >= len(s.b) {
			break
		}
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return s.b[start:s.i], escaped, true
		case c < 0x20:
			return nil, false, false
		case c == '\\':
			escaped = true
			s.i++
			if s.i >= len(s.b) {
				return nil, false, false
			}
			switch s.b[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if s.i+4 >= len(s.b) {
					return nil, false, false
				}
				for _, h := range s.b[s.i+1 : s.i+5] {
					if !isHex(h) {
						return nil, false, false
					}
				}
				s.i += 4
			default:
				return nil, false, false
			}
		}
	}
	return nil, false, false
}

// plainRun is the index of the first byte at or after i that is a quote, a backslash or a control
// character, or len(b). The values of a publish are mostly such runs: the quote and the backslash are
// found by bytes.IndexByte (vector instructions), and control characters before them 32 bytes at a time
// (four 64-bit words tested, "has a byte less than n", and joined before one branch: BenchmarkPlainRun
// took half the time of a branch per word), then eight.
func plainRun(b []byte, i int) int {
	end := len(b)
	if q := bytes.IndexByte(b[i:], '"'); q >= 0 {
		end = i + q
	}
	if e := bytes.IndexByte(b[i:end], '\\'); e >= 0 {
		end = i + e
	}
	for ; i+32 <= end; i += 32 {
		c := b[i : i+32]
		if control(c)|control(c[8:])|control(c[16:])|control(c[24:]) != 0 {
			break
		}
	}
	for ; i+8 <= end; i += 8 {
		if control(b[i:]) != 0 {
			break
		}
	}
	for ; i < end; i++ {
		if b[i] < 0x20 {
			return i
		}
	}
	return end
}

// control is non-zero when one of the first eight bytes of b is a control character ("has a byte less
// than n" on a 64-bit word).
func control(b []byte) uint64 {
	w := binary.LittleEndian.Uint64(b)
	return (w - lanes*0x20) &^ w & lanesHigh
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// optString reads a string, or null as nil. Its value is what encoding/json makes of it: the text
// itself when it has no escapes and is valid UTF-8, else encoding/json's decoding (escapes resolved,
// invalid UTF-8 replaced).
func (s *scanner) optString() (*string, bool) {
	if s.null() {
		return nil, true
	}
	raw, escaped, ok := s.str()
	if !ok {
		return nil, false
	}
	text := raw[1 : len(raw)-1]
	if !escaped && utf8.Valid(text) {
		v := string(text)
		return &v, true
	}
	var v string
	if json.Unmarshal(raw, &v) != nil {
		return nil, false
	}
	return &v, true
}

// intField reads an integer of bits bits, or null as nil; a number with a fraction or an exponent, or
// out of range, is not taken.
func intField[T int32 | int64](s *scanner, bits int) (*T, bool) {
	if s.null() {
		return nil, true
	}
	start := s.i
	if !s.number() {
		return nil, false
	}
	n, err := strconv.ParseInt(string(s.b[start:s.i]), 10, bits)
	if err != nil {
		return nil, false
	}
	v := T(n)
	return &v, true
}

// raw reads any JSON value and returns its text.
func (s *scanner) raw() (rawValue, bool) {
	s.space()
	start := s.i
	if !s.value(0) {
		return nil, false
	}
	return rawValue(s.b[start:s.i]), true
}

// value reads any JSON value nested depth deep, with no white space before it.
func (s *scanner) value(depth int) bool {
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		_, _, ok := s.str()
		return ok
	case c == '{':
		return depth < scanDepthMax && s.object(depth+1)
	case c == '[':
		return depth < scanDepthMax && s.array(depth+1)
	case c == '-' || '0' <= c && c <= '9':
		return s.number()
	}
	for _, lit := range []string{"true", "false", "null"} {
		if bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
			s.i += len(lit)
			return true
		}
	}
	return false
}

// object reads an object at its opening brace.
func (s *scanner) object(depth int) bool {
	s.i++
	if s.consume('}') {
		return true
	}
	for {
		s.space()
		if _, _, ok := s.str(); !ok || !s.consume(':') {
			return false
		}
		s.space()
		if !s.value(depth) {
			return false
		}
		if !s.consume(',') {
			return s.consume('}')
		}
	}
}

// array reads an array at its opening bracket.
func (s *scanner) array(depth int) bool {
	s.i++
	if s.consume(']') {
		return true
	}
	for {
		s.space()
		if !s.value(depth) {
			return false
		}
		if !s.consume(',') {
			return s.consume(']')
		}
	}
}

// number reads a number as JSON's grammar has it: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() bool {
	s.space()
	b, i := s.b, s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(b, i)
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		if j := digits(b, i+1); j > i+1 {
			i = j
		} else {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return false
		}
		i = j
	}
	s.i = i
	return true
}

// digits is the index after the run of decimal digits that starts at i.
func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}
