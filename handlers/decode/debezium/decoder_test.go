package debezium_test

import (
	"flag"
	"path/filepath"
	"strings"
	"testing"

	unwrapper "github.com/cdclake/cdclake/handlers/unwrap"

	"github.com/cdclake/cdclake/handlers/avro"
	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/decode"
	"github.com/cdclake/cdclake/handlers/decode/debezium"
	"github.com/cdclake/cdclake/handlers/decode/decodetest"
	"github.com/valyala/fastjson"
)

var update = flag.Bool("update", false, "rewrite the golden files")

const (
	fixtureDir = "../../../testdata/debezium"
	// realDir holds what a real Debezium PostgreSQL connector put on
	// Kafka (captured by infra/capture.sh, schemas enabled and disabled).
	realDir = "../../../testdata/debezium-real"
)

func newDecoder() (decode.Decoder, error) { return debezium.New(debezium.Options{}) }

// TestConformance runs the decoder conformance suite over the documented
// examples and the first lines of every topic of the real capture.
func TestConformance(t *testing.T) {
	var golden []decodetest.Golden
	for _, dir := range []struct {
		in, out string
		max     int
	}{{fixtureDir, fixtureDir, 0}, {realDir, filepath.Join(realDir, "golden"), 40}} {
		files, err := filepath.Glob(filepath.Join(dir.in, "*.ndjson"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no fixtures in %s: %v", dir.in, err)
		}
		for _, f := range files {
			name := strings.TrimSuffix(filepath.Base(f), ".ndjson")
			golden = append(golden, decodetest.Golden{Input: f, Output: filepath.Join(dir.out, name+".golden"), MaxLines: dir.max})
		}
	}
	// The Avro connector's topics, with the registry's schemas the capture
	// saved.
	reg, err := avro.OpenFileRegistry(filepath.Join(realDir, "_schemas.json"))
	if err != nil {
		t.Fatal(err)
	}
	codec := avro.NewCodec(reg, 0)
	files, err := filepath.Glob(filepath.Join(realDir, "*.b64"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Avro topics in %s: %v", realDir, err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".b64")
		golden = append(golden, decodetest.Golden{Input: f, Output: filepath.Join(realDir, "golden", name+".golden"), MaxLines: 40, Avro: codec})
	}
	decodetest.Run(t, decodetest.Suite{New: newDecoder, Golden: golden, Update: *update,
		Malformed: []decodetest.Malformed{
			{Name: "not an object", In: `[1]`, Want: "payload is not a JSON object"},
			{Name: "duplicate field", In: `{"op":"c","op":"u","after":{},"source":{"db":"d","table":"t"}}`, Want: `field "op" given twice`},
			{Name: "unknown op", In: `{"op":"x","after":{},"source":{}}`, Want: `op "x" is not one of c, u, d, r, t, m`},
			{Name: "no source", In: `{"op":"c","after":{"id":1}}`, Want: "data change without a source object"},
			{Name: "no table", In: `{"op":"c","after":{"id":1},"source":{"db":"d"}}`, Want: "source names no table"},
			{Name: "bad transaction", In: `{"status":"MAYBE","id":"1"}`, Want: "transaction status"},
		}})
}

// readLines returns the non-blank lines of a fixture file.
func readLines(tb testing.TB, path string) [][]byte { return decodetest.ReadLines(tb, path) }

// unwrap runs the unwrap stage on a parsed message for tests that decode
// one message many times.
func unwrap(tb testing.TB, msg []byte, c *change.Change) *fastjson.Value {
	tb.Helper()
	var u unwrapper.Unwrapper
	v, err := u.Unwrap(&unwrapper.Arena{}, msg, c)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// TestTableFromTopic: an event whose source block names no table and that
// has no Envelope schema takes its Kafka topic's name; without a topic it
// is malformed.
func TestTableFromTopic(t *testing.T) {
	d, err := newDecoder()
	if err != nil {
		t.Fatal(err)
	}
	v := fastjson.MustParse(`{"before":null,"after":{"ID":1},"source":{"connector":"oracle","name":"server1","ts_ms":1752379261000},"op":"c","ts_ms":1752379261000}`)
	c := &change.Change{Topic: "server1.INVENTORY.CUSTOMERS"}
	if err := d.Decode(v, c); err != nil || c.Table != "server1.INVENTORY.CUSTOMERS" {
		t.Errorf("with a topic: table %q, %v", c.Table, err)
	}
	if err := d.Decode(v, &change.Change{}); err == nil || !strings.Contains(err.Error(), "names no table") {
		t.Errorf("without a topic: %v, want malformed", err)
	}
}
