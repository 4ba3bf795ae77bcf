package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// stdDecode is what encoding/json decodes from a publish body, as the API decoded it before
// scanPublish.
func stdDecode(body []byte) ([]recordIn, error) {
	var in publishBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("more than one value")
	}
	return in.Records, nil
}

// checkScan fails t when scanPublish takes body and decodes it otherwise than encoding/json, or
// otherwise into a slice reused from an earlier publish than into none. It reports whether
// scanPublish took it.
func checkScan(t testing.TB, body []byte) bool {
	t.Helper()
	got, ok := scanPublish(body, nil)
	want, err := stdDecode(body)
	p := int32(7)
	used := slices.Repeat([]recordIn{{Partition: &p, Key: rawValue(`"old"`), Headers: []headerIn{{Key: "h"}}}}, 3)
	again, againOK := scanPublish(body, used)
	if againOK != ok || ok && !reflect.DeepEqual(again, got) {
		t.Fatalf("scanPublish into a used slice differs on\n%q\nused: %#v, %v\nnew: %#v, %v", body, again, againOK, got, ok)
	}
	if !ok {
		return false
	}
	if err != nil {
		t.Fatalf("scanPublish took a body encoding/json refuses (%v):\n%q", err, body)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("scanPublish and encoding/json differ on\n%q\nscan: %#v\njson: %#v", body, got, want)
	}
	return true
}

// bodyGen writes random publish bodies in the shape docs/http.md gives, with random white space,
// escapes, Unicode, nested JSON values and nulls.
type bodyGen struct {
	r *rand.Rand
	b strings.Builder
}

func (g *bodyGen) ws() {
	for range g.r.IntN(3) {
		g.b.WriteByte(" \t\n\r"[g.r.IntN(4)])
	}
}

func (g *bodyGen) str() {
	g.b.WriteByte('"')
	for range g.r.IntN(12) {
		switch g.r.IntN(10) {
		case 0:
			g.b.WriteString([]string{`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`, `\u00e9`, `\ud83d\ude00`, `\ud800`, `\u2028`}[g.r.IntN(12)])
		case 1:
			g.b.WriteString([]string{"é", "日本", "😀", "\u2028", "\xff", "\xc3"}[g.r.IntN(6)])
		default:
			g.b.WriteByte(byte('a' + g.r.IntN(26)))
		}
	}
	g.b.WriteByte('"')
}

func (g *bodyGen) value(depth int) {
	g.ws()
	n := 7
	if depth > 3 {
		n = 5
	}
	switch g.r.IntN(n) {
	case 0:
		g.b.WriteString([]string{"null", "true", "false"}[g.r.IntN(3)])
	case 1:
		g.b.WriteString([]string{"0", "-1", "12", "3.25", "-0.5e10", "1E+2", "7e-3", "123456789012345678901234"}[g.r.IntN(8)])
	case 2, 3, 4:
		g.str()
	case 5:
		g.b.WriteByte('{')
		for i := range g.r.IntN(3) {
			if i > 0 {
				g.b.WriteByte(',')
			}
			g.ws()
			g.str()
			g.ws()
			g.b.WriteByte(':')
			g.value(depth + 1)
		}
		g.ws()
		g.b.WriteByte('}')
	case 6:
		g.b.WriteByte('[')
		for i := range g.r.IntN(3) {
			if i > 0 {
				g.b.WriteByte(',')
			}
			g.value(depth + 1)
		}
		g.ws()
		g.b.WriteByte(']')
	}
	g.ws()
}

func (g *bodyGen) optStr() {
	if g.r.IntN(5) == 0 {
		g.b.WriteString("null")
		return
	}
	g.str()
}

func (g *bodyGen) int(bits int) {
	switch g.r.IntN(6) {
	case 0:
		g.b.WriteString("null")
	case 1:
		g.b.WriteString(strconv.FormatInt(-1<<(bits-1), 10))
	default:
		g.b.WriteString(strconv.Itoa(g.r.IntN(1000)))
	}
}

// object writes an object with a random subset of fields in random order, each written by its
// function.
func (g *bodyGen) object(fields map[string]func()) {
	g.b.WriteByte('{')
	names := make([]string, 0, len(fields))
	for name := range fields {
		if g.r.IntN(2) == 0 {
			names = append(names, name)
		}
	}
	g.r.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	for i, name := range names {
		if i > 0 {
			g.b.WriteByte(',')
		}
		g.ws()
		g.b.WriteString(strconv.Quote(name))
		g.ws()
		g.b.WriteByte(':')
		g.ws()
		fields[name]()
		g.ws()
	}
	g.b.WriteByte('}')
}

func (g *bodyGen) header() {
	g.object(map[string]func(){"key": g.optStr, "value": g.optStr, "value_b64": g.optStr})
}

func (g *bodyGen) record() {
	g.object(map[string]func(){
		"partition": func() { g.int(32) },
		"timestamp": func() { g.int(64) },
		"key":       func() { g.value(0) },
		"value":     func() { g.value(0) },
		"key_b64":   g.optStr,
		"value_b64": g.optStr,
		"headers": func() {
			if g.r.IntN(5) == 0 {
				g.b.WriteString("null")
				return
			}
			g.b.WriteByte('[')
			for i := range g.r.IntN(3) {
				if i > 0 {
					g.b.WriteByte(',')
				}
				g.ws()
				g.header()
				g.ws()
			}
			g.b.WriteByte(']')
		},
	})
}

func (g *bodyGen) body() []byte {
	g.b.Reset()
	g.ws()
	g.b.WriteString(`{"records":[`)
	for i := range g.r.IntN(5) {
		if i > 0 {
			g.b.WriteByte(',')
		}
		g.ws()
		g.record()
		g.ws()
	}
	g.b.WriteString("]}")
	g.ws()
	return []byte(g.b.String())
}

// TestPublishScanMatchesEncodingJSON: on random bodies in the documented shape, scanPublish takes
// every one and decodes each exactly as encoding/json does.
func TestPublishScanMatchesEncodingJSON(t *testing.T) {
	seed := rand.Uint64()
	g := &bodyGen{r: rand.New(rand.NewPCG(seed, 0))}
	for range 20000 {
		body := g.body()
		if !checkScan(t, body) {
			t.Fatalf("seed %d: scanPublish did not take a body in the documented shape:\n%q", seed, body)
		}
	}
}

// TestPublishScanDefers: bodies the scanner leaves to encoding/json, valid or not, get
// encoding/json's answer from decodePublish.
func TestPublishScanDefers(t *testing.T) {
	for _, body := range []string{
		`{"Records":[{"value":"x"}]}`,                         // another spelling, taken by encoding/json
		`{"records":[{"value":"x"}],"records":[{"key":"k"}]}`, // a field twice
		`{"records":[{"partition":1.0}]}`,                     // not an integer
		`{"records":[{"partition":4294967296}]}`,              // out of range
		`{"records":[null]}`,                                  // a null record
		`{"records":[{"value":"x"}]} ]`,                       // encoding/json's Decoder stops before ]
		`{"records":[{"valu":"x"}]}`,                          // an unknown field
		`{"records":[{"value":}]}`,                            // a syntax error
		`{"records":[{"value":"\x01"}]}`,                      // a control character in a string
		`{"records":[{"value":"x","headers":[{"key":1}]}]}`,   // a header key that is not a string
		`{"records":[{"value":` + strings.Repeat("[", 2000) + strings.Repeat("]", 2000) + `}]}`, // deep
		`null`,
	} {
		if _, ok := scanPublish([]byte(body), nil); ok {
			t.Errorf("scanPublish took %.60q", body)
		}
		got, gotErr := decodePublish([]byte(body), nil)
		want, wantErr := stdDecode([]byte(body))
		if (gotErr != nil) != (wantErr != nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("%.60q: decodePublish %v, %v; encoding/json %v, %v", body, got, gotErr, want, wantErr)
		}
	}
}

// FuzzPublishScan: the scanner never panics, and whatever it takes, encoding/json decodes the same.
func FuzzPublishScan(f *testing.F) {
	g := &bodyGen{r: rand.New(rand.NewPCG(1, 2))}
	for range 20 {
		f.Add(g.body())
	}
	f.Add([]byte(`{"records":[{"key":"k","value":{"a":[1,2,{"b":null}]},"headers":[{"key":"h","value_b64":"dg=="}],"partition":0,"timestamp":-1}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		checkScan(t, body)
		_, _ = decodePublish(body, nil)
	})
}

// BenchmarkDecodePublish decodes the benchmark's publish body (100 records of a 1 KiB value of letters
// and digits, keyed), into a slice reused from one body to the next as a publish does, or into none.
func BenchmarkDecodePublish(b *testing.B) {
	v := letters(1024)
	recs := make([]map[string]string, 100)
	for i := range recs {
		recs[i] = map[string]string{"key": fmt.Sprintf("k%d", i), "value": string(v)}
	}
	body, _ := json.Marshal(map[string]any{"records": recs})
	for _, reuse := range []bool{true, false} {
		b.Run(fmt.Sprintf("reuse=%v", reuse), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			var dst []recordIn
			for b.Loop() {
				in, err := decodePublish(body, dst)
				if err != nil || len(in) != len(recs) {
					b.Fatal(len(in), err)
				}
				if reuse {
					dst = in
				}
			}
		})
	}
}
