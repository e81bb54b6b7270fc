package avro

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/big"
	"os"
	"strings"
	"testing"

	hamba "github.com/hamba/avro/v2"
	"github.com/valyala/fastjson"
)

// frame returns v encoded with schema text under id, in Confluent's frame.
func frame(t testing.TB, id int, text string, v any) []byte {
	t.Helper()
	s, err := hamba.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	body, err := hamba.Marshal(s, v)
	if err != nil {
		t.Fatal(err)
	}
	out := []byte{Magic, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(out[1:], uint32(id))
	return append(out, body...)
}

// mapRegistry serves schema texts from a map, counting lookups.
type mapRegistry struct {
	texts map[int]string
	asked int
	err   error
}

func (r *mapRegistry) Schema(_ context.Context, id int) (string, error) {
	r.asked++
	if r.err != nil {
		return "", r.err
	}
	s, ok := r.texts[id]
	if !ok {
		return "", ErrUnknownSchema
	}
	return s, nil
}

func readFile(t *testing.T, name string) string { return readFileB(t, name) }

func readFileB(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(bytes.TrimSpace(b))
}

func TestDebeziumEnvelope(t *testing.T) {
	text := readFile(t, "envelope.avsc")
	after := map[string]any{
		"id": 7, "qty": -3, "amount": big.NewRat(12345, 100), "created": int64(1700000000123456),
		"zoned": "2024-01-02T03:04:05.123456Z", "ratio": float32(1.1), "score": math.NaN(),
		"doc":    `{"a":[1,"x\"y"]}`,
		"anynum": map[string]any{"io.debezium.data.VariableScaleDecimal": map[string]any{"scale": 3, "value": []byte{0x01, 0xE2, 0x40}}},
		"tags":   []any{"a", nil, "ü\n"}, "flag": true, "raw": []byte{0, 1, 2, 255},
	}
	v := map[string]any{
		"before": nil, "after": map[string]any{"shop.public.orders.Value": after}, "op": "c", "ts_ms": int64(1700000000000),
		"source": map[string]any{"version": "3.6.1.Final", "snapshot": "false", "lsn": int64(123)},
	}
	c := NewCodec(&mapRegistry{texts: map[int]string{42: text}}, 0)
	s, payload, err := c.Transcode(context.Background(), frame(t, 42, text, v), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := readFile(t, "envelope.connect.json"); string(s.Connect) != want {
		t.Errorf("Connect schema\n got %s\nwant %s", s.Connect, want)
	}
	want := `{"before":null,"after":{"id":7,"qty":-3,"amount":"MDk=","created":1700000000123456,` +
		`"zoned":"2024-01-02T03:04:05.123456Z","ratio":1.100000023841858,"score":"NaN",` +
		`"doc":"{\"a\":[1,\"x\\\"y\"]}","anynum":{"scale":3,"value":"AeJA"},"tags":["a",null,"ü\n"],` +
		`"flag":true,"raw":"AAEC/w=="},"source":{"version":"3.6.1.Final","snapshot":"false","lsn":123},` +
		`"op":"c","ts_ms":1700000000000}`
	if string(payload) != want {
		t.Errorf("payload\n got %s\nwant %s", payload, want)
	}
	if err := fastjson.ValidateBytes(payload); err != nil {
		t.Error(err)
	}
	if got := float32(fastjson.MustParseBytes(payload).GetFloat64("after", "ratio")); got != float32(1.1) {
		t.Errorf("float read back as %v", got)
	}
}

func TestTypes(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		value        any
		connect      string
		payload      string
	}{
		{"int8", `{"type":"int","connect.type":"int8"}`, 127,
			`{"type":"int8","optional":false}`, `127`},
		{"long extremes", `{"type":"array","items":"long"}`, []int64{math.MinInt64, math.MaxInt64, 0},
			`{"type":"array","items":{"type":"int64","optional":false},"optional":false}`,
			`[-9223372036854775808,9223372036854775807,0]`},
		{"doubles", `{"type":"array","items":"double"}`, []float64{math.Inf(1), math.Inf(-1), 0.1, 1e300, math.Copysign(0, -1), 5e-324},
			`{"type":"array","items":{"type":"double","optional":false},"optional":false}`,
			`["Infinity","-Infinity",0.1,1e+300,-0,5e-324]`},
		{"string map", `{"type":"map","values":["null","int"]}`, map[string]any{"k\"": 1},
			`{"type":"map","keys":{"type":"string","optional":false},"values":{"type":"int32","optional":true},"optional":false}`,
			`{"k\"":1}`},
		{"map with int keys", `{"type":"array","items":{"type":"record","name":"MapEntry","namespace":"io.confluent.connect.avro","fields":[{"name":"key","type":"int"},{"name":"value","type":"string"}]}}`,
			[]any{map[string]any{"key": 1, "value": "a"}, map[string]any{"key": 2, "value": "b"}},
			`{"type":"map","keys":{"type":"int32","optional":false},"values":{"type":"string","optional":false},"optional":false}`,
			`[[1,"a"],[2,"b"]]`},
		{"enum", `{"type":"enum","name":"Color","namespace":"x","symbols":["RED","GREEN"]}`, "GREEN",
			`{"type":"string","optional":false,"parameters":{"io.confluent.connect.avro.Enum":"x.Color","io.confluent.connect.avro.Enum.GREEN":"GREEN","io.confluent.connect.avro.Enum.RED":"RED"}}`,
			`"GREEN"`},
		{"fixed decimal", `{"type":"fixed","name":"d","size":3,"logicalType":"decimal","precision":6,"scale":2}`, big.NewRat(-1, 100),
			`{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"connect.decimal.precision":"6","scale":"2"}}`,
			`"////"`},
		{"date without connect.name", `{"type":"int","logicalType":"date"}`, 19000,
			`{"type":"int32","optional":false,"name":"org.apache.kafka.connect.data.Date","version":1}`, `19000`},
		{"control characters", `"string"`, "a\x00\x1f\\/\t",
			`{"type":"string","optional":false}`, `"a\u0000\u001f\\/\t"`},
		{"nullable top level", `["null","string"]`, nil,
			`{"type":"string","optional":true}`, `null`},
		{"general union", `["null","int","string"]`, map[string]any{"string": "s"},
			`{"type":"struct","fields":[{"type":"int32","optional":true,"field":"int"},{"type":"string","optional":true,"field":"string"}],"optional":true,"name":"io.confluent.connect.avro.Union"}`,
			`{"int":null,"string":"s"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCodec(&mapRegistry{texts: map[int]string{1: tc.schema}}, 0)
			s, payload, err := c.Transcode(context.Background(), frame(t, 1, tc.schema, tc.value), []byte("prefix:"))
			if err != nil {
				t.Fatal(err)
			}
			if string(s.Connect) != tc.connect {
				t.Errorf("Connect schema\n got %s\nwant %s", s.Connect, tc.connect)
			}
			if string(payload) != "prefix:"+tc.payload {
				t.Errorf("payload\n got %s\nwant prefix:%s", payload, tc.payload)
			}
		})
	}
}

func TestMalformed(t *testing.T) {
	rec := `{"type":"record","name":"R","fields":[{"name":"s","type":"string"},{"name":"o","type":["null","long"]}]}`
	ints := `{"type":"array","items":"int"}`
	good := frame(t, 1, rec, map[string]any{"s": "abc", "o": int64(5)})
	for _, tc := range []struct {
		name string
		raw  []byte
		err  error
		msg  string
	}{
		{"no frame", []byte{0, 0, 1}, ErrMalformed, "no Confluent frame"},
		{"json", []byte(`{"a":1}`), ErrMalformed, "no Confluent frame"},
		{"truncated", good[:len(good)-1], ErrMalformed, "ends early"},
		{"trailing", append(bytes.Clone(good), 0), ErrMalformed, "1 bytes after the value"},
		{"long string", append(good[:5:5], 0x7e, 'a'), ErrMalformed, "beyond the value"},
		{"bad branch", append(good[:5:5], 2, 'x', 4), ErrMalformed, "union branch 2 of 2"},
		{"negative length", append(good[:5:5], 1), ErrMalformed, "length -1"},
		{"long varint", append(good[:5:5], 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f), ErrMalformed, "longer than 64 bits"},
		{"unknown id", frame(t, 9, rec, map[string]any{"s": "", "o": nil}), ErrUnknownSchema, "schema id 9"},
		{"endless array", append(frame(t, 2, ints, []any{})[:5], 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 2), ErrMalformed, "ends early"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCodec(&mapRegistry{texts: map[int]string{1: rec, 2: ints}}, 0)
			_, _, err := c.Transcode(context.Background(), tc.raw, nil)
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v, want %v containing %q", err, tc.err, tc.msg)
			}
		})
	}
}

func TestUnusableSchemas(t *testing.T) {
	for name, text := range map[string]string{
		"not avro":    `{"type":"recordx"}`,
		"recursive":   `{"type":"record","name":"L","fields":[{"name":"next","type":["null","L"]}]}`,
		"null":        `"null"`,
		"no fields":   `{"type":"record","name":"E","fields":[]}`,
		"empty fixed": `{"type":"fixed","name":"F","size":0}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Compile(3, text)
			if !errors.Is(err, ErrUnknownSchema) {
				t.Fatalf("got %v", err)
			}
		})
	}
}

func TestCache(t *testing.T) {
	reg := &mapRegistry{texts: map[int]string{1: `"int"`, 2: `"long"`, 3: `"string"`}}
	c := NewCodec(reg, 2)
	ctx := context.Background()
	for _, id := range []int{1, 1, 2, 2, 1} {
		if _, err := c.Schema(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if reg.asked != 2 {
		t.Errorf("asked %d times for 2 ids", reg.asked)
	}
	if _, err := c.Schema(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if len(c.byID) != 2 {
		t.Errorf("cache holds %d schemas, bound 2", len(c.byID))
	}
	// An unknown id is remembered; an outage is not.
	_, _ = c.Schema(ctx, 4)
	_, err := c.Schema(ctx, 4)
	if !errors.Is(err, ErrUnknownSchema) || reg.asked != 4 {
		t.Errorf("unknown id: %v after %d lookups", err, reg.asked)
	}
	reg.err = errors.New("connection refused")
	if _, err := c.Schema(ctx, 5); !errors.Is(err, ErrUnavailable) {
		t.Errorf("outage: %v", err)
	}
	reg.err = nil
	reg.texts[5] = `"boolean"`
	if _, err := c.Schema(ctx, 5); err != nil {
		t.Errorf("after the outage: %v", err)
	}
}

func TestFileRegistry(t *testing.T) {
	path := t.TempDir() + "/schemas.json"
	if err := os.WriteFile(path, []byte(`{"1":{"schema":"\"int\""},"2":{"schema":"{}","schemaType":"JSON"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := OpenFileRegistry(path)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := r.Schema(context.Background(), 1); err != nil || s != `"int"` {
		t.Errorf("id 1: %q %v", s, err)
	}
	for _, id := range []int{2, 3} {
		if _, err := r.Schema(context.Background(), id); !errors.Is(err, ErrUnknownSchema) {
			t.Errorf("id %d: %v", id, err)
		}
	}
}
