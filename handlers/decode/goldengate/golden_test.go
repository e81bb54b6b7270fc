package goldengate

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/cdclake/cdclake/handlers/decode"
	"github.com/cdclake/cdclake/handlers/decode/decodetest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/goldengate")

// fixtureDir holds the fixtures, at the repository root.
var fixtureDir = filepath.Join("..", "..", "..", "testdata", "goldengate")

// customOptions are the renamed fields and operation strings of
// datastreams_custom.ndjson.
var customOptions = Options{
	QualifiedTable: "table_name", OpType: "operation", OpTimestamp: "ts", TransactionID: "txid",
	Position: "position", CSN: "scn", Tokens: "tags", BeforeImage: "old", AfterImage: "new",
	InsertOp: "I", UpdateOp: "U", DeleteOp: "D", UpsertOp: "M",
}

// fixtures maps each fixture to a constructor of the decoder it is read with.
var fixtures = []struct {
	name      string
	dec       func() (decode.Decoder, error)
	malformed []decodetest.Malformed
}{
	{"datastreams", func() (decode.Decoder, error) { return NewDataStreams(Options{}) }, dataStreamsMalformed},
	{"datastreams_custom", func() (decode.Decoder, error) { return NewDataStreams(customOptions) }, customMalformed},
	{"bigdata", func() (decode.Decoder, error) { return NewBigData(BigDataOptions{}) }, bigDataMalformed},
}

// readLines returns the non-empty lines of a fixture.
func readLines(tb testing.TB, name string) []string {
	var lines []string
	for _, l := range decodetest.ReadLines(tb, filepath.Join(fixtureDir, name+".ndjson")) {
		lines = append(lines, string(l))
	}
	return lines
}

// mustDataStreams and mustBigData build decoders whose options are known
// to be valid.
func mustDataStreams(tb testing.TB, o Options) *DataStreams {
	tb.Helper()
	d, err := NewDataStreams(o)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

func mustBigData(tb testing.TB, o BigDataOptions) *BigData {
	tb.Helper()
	d, err := NewBigData(o)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// TestConformance runs the decoder conformance suite for each fixture with
// the decoder it is read with.
func TestConformance(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			decodetest.Run(t, decodetest.Suite{
				New: fx.dec,
				Golden: []decodetest.Golden{{Input: filepath.Join(fixtureDir, fx.name+".ndjson"),
					Output: filepath.Join(fixtureDir, fx.name+".golden")}},
				Malformed: fx.malformed,
				Update:    *update,
			})
		})
	}
}
