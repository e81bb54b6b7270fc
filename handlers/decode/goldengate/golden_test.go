package goldengate

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/decode"
	"github.com/valyala/fastjson"
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
	name string
	dec  func() decode.Decoder
}{
	{"datastreams", func() decode.Decoder { return NewDataStreams(Options{}) }},
	{"datastreams_custom", func() decode.Decoder { return NewDataStreams(customOptions) }},
	{"bigdata", func() decode.Decoder { return NewBigData(BigDataOptions{}) }},
}

// readLines returns the non-empty lines of a fixture.
func readLines(tb testing.TB, name string) []string {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(fixtureDir, name+".ndjson"))
	if err != nil {
		tb.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return lines
}

// TestGolden decodes every fixture line with one decoder, one parser and one
// reused Change, as the pipeline does, and compares a rendering of each
// result with the golden file.
func TestGolden(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			dec := fx.dec()
			var p fastjson.Parser
			var c change.Change
			var out strings.Builder
			for i, line := range readLines(t, fx.name) {
				v, err := p.Parse(line)
				if err != nil {
					t.Fatalf("line %d: %v", i+1, err)
				}
				f, ok := Detect(v)
				detected := "-"
				if ok {
					detected = f.String()
				}
				c.Reset()
				err = dec.Decode(v, &c)
				fmt.Fprintf(&out, "#%d detect=%s\n", i+1, detected)
				out.WriteString(render(t, &c, err))
			}
			golden := filepath.Join(fixtureDir, fx.name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(out.String()), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got := out.String(); got != string(want) {
				t.Errorf("decoding %s.ndjson differs from %s.golden (run with -update to accept):\n%s",
					fx.name, fx.name, lineDiff(string(want), got))
			}
		})
	}
}

// render prints a Change (or the decode error) as stable text.
func render(t *testing.T, c *change.Change, err error) string {
	var b strings.Builder
	if err != nil {
		if !errorsIsMalformed(err) {
			t.Errorf("error %q does not wrap decode.ErrMalformed", err)
		}
		fmt.Fprintf(&b, "  error: %v\n", err)
		return b.String()
	}
	ts := "-"
	if c.HasTS {
		ts = time.UnixMicro(c.TSMicros).UTC().Format(time.RFC3339Nano)
	}
	fmt.Fprintf(&b, "  kind=%s format=%s op=%s table=%q\n", c.Kind, c.Format, opName(c.Op), c.Table)
	fmt.Fprintf(&b, "  ts=%s xid=%q pos=%q\n", ts, c.Xid, c.Pos)
	fmt.Fprintf(&b, "  before=%s\n", imageText(c.Before))
	fmt.Fprintf(&b, "  after=%s\n", imageText(c.After))
	for _, e := range c.Extras {
		switch e.Kind {
		case change.ExtraString:
			fmt.Fprintf(&b, "  extra %s string %q\n", e.Name, c.ExtraBytes(e))
		case change.ExtraJSON:
			js := c.ExtraBytes(e)
			if err := fastjson.ValidateBytes(js); err != nil {
				t.Errorf("extra %s is not valid JSON: %v: %s", e.Name, err, js)
			}
			fmt.Fprintf(&b, "  extra %s json %s\n", e.Name, js)
		case change.ExtraTimestamp:
			fmt.Fprintf(&b, "  extra %s timestamp %s\n", e.Name, time.UnixMicro(e.Micros).UTC().Format(time.RFC3339Nano))
		}
	}
	if c.Raw != nil {
		fmt.Fprintf(&b, "  raw=%s\n", c.Raw.MarshalTo(nil))
	}
	return b.String()
}

func opName(o change.Op) string {
	if o == change.OpNone {
		return "-"
	}
	return o.String()
}

func imageText(i change.Image) string {
	if !i.Present() {
		return "-"
	}
	return string(i.Obj.MarshalTo(nil))
}

// lineDiff lists the lines that differ between want and got.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  want: %s\n  got:  %s\n", i+1, wl, gl)
		}
	}
	return b.String()
}
