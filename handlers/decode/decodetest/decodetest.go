// Package decodetest is the conformance suite every decoder runs: golden
// fixtures, malformed input, the invariants of a decoded change, reuse of
// one decoder across messages, and a fuzz target. A new format is done when
// its decoder passes Run and its fuzz target runs Fuzz.
//
// Messages go through the real unwrap stage first (tombstones, CloudEvents,
// Kafka Connect envelopes), exactly as in the pipeline, so fixtures are what
// a topic holds.
package decodetest

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/handlers/avro"
	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/decode"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/cdclake/cdclake/handlers/unwrap"
	"github.com/valyala/fastjson"
)

// Suite describes one decoder under test.
type Suite struct {
	// New returns a new decoder, configured as the fixtures need.
	New func() (decode.Decoder, error)
	// Golden lists the fixtures.
	Golden []Golden
	// Malformed lists messages the decoder must reject.
	Malformed []Malformed
	// Update rewrites the golden files instead of comparing (wire it to a
	// -update flag).
	Update bool
}

// Golden is a fixture: an NDJSON file of messages (one per line, blank
// lines ignored), or a .b64 file of base64-encoded binary messages, and
// the file holding their rendering (Render).
type Golden struct {
	Input, Output string
	// MaxLines limits the messages read from Input; 0 reads all.
	MaxLines int
	// Avro reads Confluent-framed Avro messages (nil: none).
	Avro *avro.Codec
}

// Malformed is a message (JSON, given to Decode as it is, without the
// unwrap stage) the decoder must reject with an error that wraps
// decode.ErrMalformed and contains Want.
type Malformed struct {
	Name, In, Want string
}

// Run runs the suite.
func Run(t *testing.T, s Suite) {
	t.Helper()
	dec := mustNew(t, s.New)
	if dec.Format() == "" {
		t.Fatal("Format() is empty")
	}
	for _, g := range s.Golden {
		t.Run("golden/"+strings.TrimSuffix(strings.TrimSuffix(filepath.Base(g.Input), ".ndjson"), ".b64"), func(t *testing.T) {
			runGolden(t, s, g)
		})
	}
	t.Run("malformed", func(t *testing.T) {
		d := mustNew(t, s.New)
		var p fastjson.Parser
		for _, m := range s.Malformed {
			var c change.Change
			v, err := p.Parse(m.In)
			if err != nil {
				t.Fatalf("%s: %s is not JSON: %v", m.Name, m.In, err)
			}
			err = d.Decode(v, &c)
			switch {
			case err == nil:
				t.Errorf("%s: %s decoded without error", m.Name, m.In)
			case !errors.Is(err, decode.ErrMalformed):
				t.Errorf("%s: error %q does not wrap decode.ErrMalformed", m.Name, err)
			case !strings.Contains(err.Error(), m.Want):
				t.Errorf("%s: error %q does not contain %q", m.Name, err, m.Want)
			}
		}
	})
}

func mustNew(t testing.TB, newDec func() (decode.Decoder, error)) decode.Decoder {
	t.Helper()
	d, err := newDec()
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return d
}

// runGolden renders every message of a fixture twice: with one decoder and
// one reused Change for all messages, as a pipeline worker decodes, and
// with a new decoder per message. Both must equal the golden file.
func runGolden(t *testing.T, s Suite, g Golden) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	lines := ReadLines(t, g.Input)
	if g.MaxLines > 0 && len(lines) > g.MaxLines {
		lines = lines[:g.MaxLines]
	}
	if strings.HasSuffix(g.Input, ".b64") {
		for i, l := range lines {
			b, err := base64.StdEncoding.DecodeString(string(l))
			if err != nil {
				t.Fatalf("%s line %d: %v", g.Input, i+1, err)
			}
			lines[i] = b
		}
	}
	shared := mustNew(t, s.New)
	u := unwrap.Unwrapper{Avro: g.Avro}
	var a unwrap.Arena
	var c change.Change
	var out strings.Builder
	for i, line := range lines {
		fmt.Fprintf(&out, "--- line %d\n", i+1)
		c.Reset()
		r := Decode(&u, &a, shared, line, &c)
		if r.Decoded {
			Check(t, line, shared, &c, r.Err)
		}
		text := Render(t, r, &c, mem)
		out.WriteString(text)

		// A new decoder, unwrapper and Change must give the same result.
		u2 := unwrap.Unwrapper{Avro: g.Avro}
		var a2 unwrap.Arena
		var c2 change.Change
		if fresh := Render(t, Decode(&u2, &a2, mustNew(t, s.New), line, &c2), &c2, mem); fresh != text {
			t.Errorf("line %d: a reused decoder and a new one disagree:\nreused:\n%s\nnew:\n%s", i+1, text, fresh)
		}
	}
	compare(t, g.Output, out.String(), s.Update)
}

// ReadLines returns the non-blank lines of an NDJSON file.
func ReadLines(tb testing.TB, path string) [][]byte {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var lines [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			lines = append(lines, bytes.Clone(sc.Bytes()))
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return lines
}

func compare(t *testing.T, path, got string, update bool) {
	t.Helper()
	if update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got == string(want) {
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(gl) || i < len(wl); i++ {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("%s differs at line %d:\n got: %s\nwant: %s\n(run with -update to accept)", path, i+1, g, w)
		}
	}
}

// Micros renders microseconds since the epoch as an RFC 3339 UTC time.
func Micros(ts int64) string {
	return time.UnixMicro(ts).UTC().Format("2006-01-02T15:04:05.999999Z")
}

// Result is what became of one message.
type Result struct {
	// Decoded is false for a tombstone or a message unwrap rejected.
	Decoded bool
	// Detected is the decoder's Detect verdict, asked before decoding;
	// nil when it implements no decode.Detector.
	Detected *bool
	// Dec is the decoder, Err the unwrap or decode error.
	Dec decode.Decoder
	Err error
}

// Decode runs one message through the unwrap stage and, unless it is a
// tombstone, dec's Detect and Decode, as the pipeline does.
func Decode(u *unwrap.Unwrapper, a *unwrap.Arena, dec decode.Decoder, msg []byte, c *change.Change) Result {
	v, err := u.Unwrap(a, msg, c)
	if err != nil || c.Kind == change.KindTombstone {
		return Result{Err: err}
	}
	r := Result{Decoded: true, Dec: dec}
	if det, ok := dec.(decode.Detector); ok {
		d := det.Detect(v, c)
		r.Detected = &d
	}
	r.Err = dec.Decode(v, c)
	return r
}

// Render returns a stable text of one message's outcome: the unwrap or
// decode error, or the decoded change — class, table, positions, images,
// extras, statement, raw record — and, when the decoder maps an in-band
// row schema (decode.SchemaColumns), the columns and the value every image
// column converts to.
func Render(t testing.TB, r Result, c *change.Change, mem memory.Allocator) string {
	var w strings.Builder
	if !r.Decoded {
		if r.Err != nil {
			fmt.Fprintf(&w, "unwrap error: %v\n", r.Err)
		} else {
			fmt.Fprintf(&w, "tombstone\n")
		}
		return w.String()
	}
	if r.Detected != nil {
		fmt.Fprintf(&w, "detect: %v\n", *r.Detected)
	}
	if r.Err != nil {
		fmt.Fprintf(&w, "error: %v\n", r.Err)
		return w.String()
	}
	renderChange(&w, c)
	renderRowSchema(t, &w, r.Dec, c, mem)
	return w.String()
}

// renderChange writes what a decoded change holds: class, table,
// positions, images, extras, statement and raw record.
func renderChange(w *strings.Builder, c *change.Change) {
	fmt.Fprintf(w, "kind: %s  format: %s", c.Kind, c.Format)
	if c.Op != change.OpNone {
		fmt.Fprintf(w, "  op: %s", c.Op)
	}
	fmt.Fprintf(w, "  table: %q\n", c.Table)
	if c.HasTS {
		fmt.Fprintf(w, "ts: %s\n", Micros(c.TSMicros))
	} else {
		fmt.Fprintf(w, "ts: none\n")
	}
	fmt.Fprintf(w, "xid: %q  pos: %q\n", c.Xid, c.Pos)
	for _, im := range images(c) {
		if im.img.Present() {
			fmt.Fprintf(w, "%s: %s\n", im.name, im.img.Obj.MarshalTo(nil))
		}
	}
	renderExtras(w, c)
	if c.Statement != "" {
		fmt.Fprintf(w, "statement: %q\n", c.Statement)
	}
	if c.Raw != nil {
		fmt.Fprintf(w, "raw: %s\n", c.Raw.MarshalTo(nil))
	}
}

// namedImage is a change's before or after image with its name.
type namedImage struct {
	name string
	img  change.Image
}

// images returns a change's images, before then after, present or not.
func images(c *change.Change) []namedImage {
	return []namedImage{{"before", c.Before}, {"after", c.After}}
}

// renderExtras writes a change's extra fields, each with its kind.
func renderExtras(w *strings.Builder, c *change.Change) {
	for _, e := range c.Extras {
		switch e.Kind {
		case change.ExtraTimestamp:
			fmt.Fprintf(w, "extra %s (timestamp): %s\n", e.Name, Micros(e.Micros))
		case change.ExtraJSON:
			fmt.Fprintf(w, "extra %s (json): %s\n", e.Name, c.ExtraBytes(e))
		default:
			fmt.Fprintf(w, "extra %s (string): %s\n", e.Name, c.ExtraBytes(e))
		}
	}
}

// renderRowSchema writes, when dec maps an in-band row schema
// (decode.SchemaColumns) and the change carries one, the schema's name; for
// a row change also its columns and the value every image column converts
// to, or why the columns could not be mapped.
func renderRowSchema(t testing.TB, w *strings.Builder, dec decode.Decoder, c *change.Change, mem memory.Allocator) {
	sc, ok := dec.(decode.SchemaColumns)
	if !ok || c.Schema == nil {
		return
	}
	if c.Kind != change.KindDML {
		fmt.Fprintf(w, "schema: %s\n", c.Schema.Get("name"))
		return
	}
	cols, cerr := sc.Columns(c.Schema)
	if cerr != nil {
		fmt.Fprintf(w, "columns error: %v\n", cerr)
		return
	}
	fmt.Fprintf(w, "row schema: %s (key %d bytes)\n", c.Schema.Get("name"), len(c.SchemaKey))
	renderColumns(w, cols)
	for _, im := range images(c) {
		if im.img.Present() {
			renderValues(t, w, im, cols, mem)
		}
	}
}

// renderColumns writes the columns of a row schema: name, type,
// nullability and logical type.
func renderColumns(w *strings.Builder, cols []schema.Column) {
	fmt.Fprintf(w, "columns:\n")
	for _, col := range cols {
		fmt.Fprintf(w, "  %s %s", col.Name, col.Type)
		if !col.Nullable {
			fmt.Fprintf(w, " not null")
		}
		if col.Type.Logical != "" {
			fmt.Fprintf(w, " [%s]", col.Type.Logical)
		}
		fmt.Fprintln(w)
	}
}

// renderValues writes the value each column of cols converts to from an
// image, or that the image lacks it, and fails t for an image column the
// row schema does not have.
func renderValues(t testing.TB, w *strings.Builder, im namedImage, cols []schema.Column, mem memory.Allocator) {
	fmt.Fprintf(w, "%s values:\n", im.name)
	known := map[string]bool{}
	for _, col := range cols {
		known[col.Name] = true
		v := im.img.Obj.Get(col.Name)
		if v == nil {
			fmt.Fprintf(w, "  %s: absent\n", col.Name)
			continue
		}
		fmt.Fprintf(w, "  %s: %s\n", col.Name, Convert(mem, col, v))
	}
	im.img.Obj.Visit(func(k []byte, _ *fastjson.Value) {
		if !known[string(k)] {
			t.Errorf("%s image column %q is not in the row schema", im.name, k)
		}
	})
}

// Convert runs the schema package's converter for col on v and renders the
// value it lands as.
func Convert(mem memory.Allocator, col schema.Column, v *fastjson.Value) string {
	b := array.NewBuilder(mem, col.Type.Arrow())
	defer b.Release()
	conv := schema.NewConverters(mem)
	defer conv.Release()
	app := conv.Compile(col.Name, col.Type, b)
	if err := app(v); err != nil {
		return "ERROR " + err.Error()
	}
	arr := b.NewArray()
	defer arr.Release()
	if arr.IsNull(0) {
		return "null"
	}
	return arr.ValueStr(0)
}
