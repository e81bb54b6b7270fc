// Package parsebound measures how much of a record's decoding the parse
// tree costs: what a decoder that converted values straight from a
// record's bytes, without building a tree first, could save at most.
//
// BenchmarkTree parses each record of a cdcgen stream with fastjson, as
// the unwrap stage does, and walks every object of it, taking each
// string's bytes (unescaped) and each value's type: the reads every
// conversion starts from. BenchmarkScan walks the same records with
// the least a tree-free decoder must do: find every key and value token
// and check the structure, no more (no unescaping, no UTF-8 check, no
// number syntax beyond its characters). The difference per record is an
// upper bound on what dropping the tree saves; the conversions, the
// batching and the Parquet writer cost the same either way.
//
//	go test -run '^$' -bench . ./bench/parsebound
package parsebound

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cdclake/cdclake/pipelines/source/gen"
	"github.com/valyala/fastjson"
)

// records returns the records of a deterministic stream of format: events
// over 24 tables, as make bench generates them. Of a Kafka Connect
// envelope (Debezium with schemas) only the payload is kept: the unwrap
// stage recognises the schema by its bytes and parses the payload alone.
func records(tb testing.TB, format, events int) [][]byte {
	var buf bytes.Buffer
	if _, err := gen.GenerateFormat(&buf, events, 24, 1, format); err != nil {
		tb.Fatal(err)
	}
	recs := bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), []byte("\n"))
	if format != gen.Debezium {
		return recs
	}
	var p fastjson.Parser
	var out [][]byte
	for _, r := range recs {
		v, err := p.ParseBytes(r)
		if err != nil {
			tb.Fatal(err)
		}
		if pl := v.Get("payload"); pl != nil && pl.Type() == fastjson.TypeObject {
			out = append(out, pl.MarshalTo(nil))
		}
	}
	return out
}

var formats = []struct {
	name   string
	format int
}{
	{"goldengate", gen.GoldenGate},
	{"debezium-payload", gen.Debezium},
	{"debezium-schemaless", gen.DebeziumSchemaless},
}

// benchEvents is the length of the benchmarks' streams.
const benchEvents = 20000

var sink int

func BenchmarkTree(b *testing.B) {
	for _, f := range formats {
		b.Run(f.name, func(b *testing.B) {
			recs := records(b, f.format, benchEvents)
			var p fastjson.Parser
			b.ResetTimer()
			for i := range b.N {
				v, err := p.ParseBytes(recs[i%len(recs)])
				if err != nil {
					b.Fatal(err)
				}
				walkTree(v)
			}
		})
	}
}

func walkTree(v *fastjson.Value) {
	switch v.Type() {
	case fastjson.TypeObject:
		o, _ := v.Object()
		o.Visit(func(k []byte, v *fastjson.Value) {
			sink += len(k)
			walkTree(v)
		})
	case fastjson.TypeArray:
		a, _ := v.Array()
		for _, x := range a {
			walkTree(x)
		}
	case fastjson.TypeString:
		sink += len(v.GetStringBytes())
	}
}

func BenchmarkScan(b *testing.B) {
	for _, f := range formats {
		b.Run(f.name, func(b *testing.B) {
			recs := records(b, f.format, benchEvents)
			b.ResetTimer()
			for i := range b.N {
				if err := scan(recs[i%len(recs)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestScan checks that the scanner takes every record and refuses
// broken ones, so that BenchmarkScan measures a real walk.
func TestScan(t *testing.T) {
	for _, f := range formats {
		for _, r := range records(t, f.format, 2000) {
			if err := scan(r); err != nil {
				t.Fatalf("%s: %v: %s", f.name, err, r)
			}
			if len(r) > 2 {
				if err := scan(r[:len(r)/2]); err == nil {
					t.Fatalf("%s: a cut record scanned: %s", f.name, r[:len(r)/2])
				}
			}
		}
	}
	for _, bad := range []string{`{"a":}`, `{"a" 1}`, `{"a":1,}`, `[1 2]`, `{"a":"x}`, `{1:2}`} {
		if scan([]byte(bad)) == nil {
			t.Errorf("%s scanned", bad)
		}
	}
}

var errSyntax = errors.New("syntax error")

// scan walks one JSON value: every key and value token is found and
// handed on (to sink), the structure is checked.
func scan(d []byte) error {
	s := scanner{d: d}
	s.value()
	s.space()
	if s.err != nil || s.i != len(s.d) {
		return errSyntax
	}
	return nil
}

type scanner struct {
	d   []byte
	i   int
	err error
}

func (s *scanner) space() {
	for s.i < len(s.d) && (s.d[s.i] == ' ' || s.d[s.i] == '\n' || s.d[s.i] == '\t' || s.d[s.i] == '\r') {
		s.i++
	}
}

// str takes a string token from its opening quote and returns its raw
// contents.
func (s *scanner) str() []byte {
	s.i++
	start := s.i
	for s.i < len(s.d) {
		switch s.d[s.i] {
		case '"':
			s.i++
			return s.d[start : s.i-1]
		case '\\':
			s.i += 2
		default:
			s.i++
		}
	}
	s.err = errSyntax
	return nil
}

// next takes c, after spaces, or fails.
func (s *scanner) next(c byte) bool {
	s.space()
	if s.i < len(s.d) && s.d[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *scanner) value() {
	s.space()
	if s.i >= len(s.d) {
		s.err = errSyntax
		return
	}
	start := s.i
	switch c := s.d[s.i]; c {
	case '"':
		sink += len(s.str())
	case '{':
		s.i++
		if s.next('}') {
			return
		}
		for s.err == nil {
			s.space()
			if s.i >= len(s.d) || s.d[s.i] != '"' {
				s.err = errSyntax
				return
			}
			sink += len(s.str())
			if !s.next(':') {
				s.err = errSyntax
				return
			}
			s.value()
			if s.next(',') {
				continue
			}
			if !s.next('}') {
				s.err = errSyntax
			}
			return
		}
	case '[':
		s.i++
		if s.next(']') {
			return
		}
		for s.err == nil {
			s.value()
			if s.next(',') {
				continue
			}
			if !s.next(']') {
				s.err = errSyntax
			}
			return
		}
	case 't', 'n', 'f':
		lit := "null"
		if c == 't' {
			lit = "true"
		} else if c == 'f' {
			lit = "false"
		}
		if !bytes.HasPrefix(s.d[s.i:], []byte(lit)) {
			s.err = errSyntax
			return
		}
		s.i += len(lit)
	default:
		for s.i < len(s.d) {
			if c := s.d[s.i]; c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
				s.i++
				continue
			}
			break
		}
		if s.i == start {
			s.err = errSyntax
			return
		}
		sink += s.i - start
	}
}
