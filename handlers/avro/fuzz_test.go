package avro

import (
	"context"
	"math/big"
	"testing"

	hamba "github.com/hamba/avro/v2"
	"github.com/valyala/fastjson"
)

// FuzzTranscode feeds arbitrary bytes to the transcoder under the Debezium
// envelope schema: it must never panic, what it accepts must be valid
// JSON, and hamba/avro must decode it too.
func FuzzTranscode(f *testing.F) {
	text := `{"type":"record","name":"R","fields":[
		{"name":"i","type":"int"},{"name":"s","type":["null","string"]},
		{"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
		{"name":"a","type":{"type":"array","items":{"type":"map","values":"double"}}},
		{"name":"u","type":["null","long","float"]},
		{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]}},
		{"name":"f","type":{"type":"fixed","name":"F","size":2}},
		{"name":"b","type":"boolean"}]}`
	ref := hamba.MustParse(text)
	s, err := Compile(1, text)
	if err != nil {
		f.Fatal(err)
	}
	seed, err := hamba.Marshal(ref, map[string]any{
		"i": 1, "s": "x", "d": big.NewRat(5, 1), "a": []any{map[string]any{"k": 1.5}},
		"u": map[string]any{"long": int64(3)}, "e": "B", "f": [2]byte{1, 2}, "b": true,
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte{})
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := s.Transcode(b, nil)
		if err != nil {
			return
		}
		if err := fastjson.ValidateBytes(out); err != nil {
			t.Fatalf("invalid JSON %q: %v", out, err)
		}
		var v any
		if err := hamba.Unmarshal(ref, b, &v); err != nil {
			t.Fatalf("accepted %x, which hamba/avro rejects: %v", b, err)
		}
	})
}

func BenchmarkTranscode(b *testing.B) {
	text := readFileB(b, "envelope.avsc")
	v := map[string]any{
		"before": nil, "op": "u", "ts_ms": int64(1700000000000),
		"after": map[string]any{"shop.public.orders.Value": map[string]any{
			"id": 7, "qty": 3, "amount": big.NewRat(12345, 100), "created": int64(1700000000123456),
			"zoned": "2024-01-02T03:04:05.123456Z", "ratio": float32(1.5), "score": 2.25,
			"doc": `{"a":1}`, "anynum": nil, "tags": []any{"a", "b"}, "flag": true, "raw": []byte("xyz"),
		}},
		"source": map[string]any{"version": "3.6.1.Final", "snapshot": "false", "lsn": int64(123)},
	}
	raw := frame(b, 1, text, v)
	c := NewCodec(&mapRegistry{texts: map[int]string{1: text}}, 0)
	ctx := context.Background()
	var out []byte
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if _, out, err = c.Transcode(ctx, raw, out[:0]); err != nil {
			b.Fatal(err)
		}
	}
}
