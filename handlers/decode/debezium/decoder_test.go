package debezium_test

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/decode"
	"github.com/cdclake/cdclake/handlers/decode/debezium"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/valyala/fastjson"
)

var update = flag.Bool("update", false, "rewrite the golden files")

const fixtureDir = "../../../testdata/debezium"

// unwrap removes the Kafka Connect schema+payload envelope the way the
// unwrap stage does.
func unwrap(v *fastjson.Value, c *change.Change) (*fastjson.Value, bool) {
	if v.Type() != fastjson.TypeObject {
		return v, false
	}
	o, _ := v.Object()
	if o.Len() != 2 {
		return v, false
	}
	s, p := o.Get("schema"), o.Get("payload")
	if s == nil || p == nil {
		return v, false
	}
	if s.Type() == fastjson.TypeObject {
		c.Schema = s
		c.SchemaKey = s.MarshalTo(c.SchemaKey[:0])
	}
	return p, true
}

func readLines(t testing.TB, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			lines = append(lines, bytes.Clone(sc.Bytes()))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

func TestGolden(t *testing.T) {
	golden(t, fixtureDir, fixtureDir, 0)
}

// TestGoldenReal decodes what a real Debezium PostgreSQL connector put on
// Kafka (captured by infra/capture.sh, schemas enabled and disabled), the
// first lines of every topic.
func TestGoldenReal(t *testing.T) {
	golden(t, realDir, filepath.Join(realDir, "golden"), 40)
}

const realDir = "../../../testdata/debezium-real"

// golden decodes every *.ndjson file of dir (at most max lines each, 0 for
// all) and compares the rendering with goldenDir/<name>.golden.
func golden(t *testing.T, dir, goldenDir string, max int) {
	files, err := filepath.Glob(filepath.Join(dir, "*.ndjson"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures in %s: %v", dir, err)
	}
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".ndjson")
		t.Run(name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			var out strings.Builder
			d := debezium.New(debezium.Options{})
			var p fastjson.Parser
			var c change.Change
			lines := readLines(t, path)
			if max > 0 && len(lines) > max {
				lines = lines[:max]
			}
			for i, line := range lines {
				fmt.Fprintf(&out, "--- line %d\n", i+1)
				v, err := p.ParseBytes(line)
				if err != nil {
					t.Fatalf("line %d: %v", i+1, err)
				}
				if v.Type() == fastjson.TypeNull {
					fmt.Fprintf(&out, "tombstone\n")
					continue
				}
				c.Reset()
				payload, _ := unwrap(v, &c)
				if payload.Type() == fastjson.TypeNull {
					fmt.Fprintf(&out, "tombstone\n")
					continue
				}
				fmt.Fprintf(&out, "detect: %v\n", debezium.Detect(payload, c.Schema != nil))
				err = d.Decode(payload, &c)
				if err != nil {
					if !errors.Is(err, decode.ErrMalformed) {
						t.Errorf("line %d: error %v does not wrap decode.ErrMalformed", i+1, err)
					}
					fmt.Fprintf(&out, "error: %v\n", err)
					continue
				}
				render(t, &out, &c, mem)
			}
			compareGolden(t, filepath.Join(goldenDir, name+".golden"), out.String())
		})
	}
}

func compareGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
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
}

func micros(ts int64) string {
	return time.UnixMicro(ts).UTC().Format("2006-01-02T15:04:05.999999Z")
}

// render writes a stable text summary of a decoded change and, for row
// changes with a schema, its columns and the values the converters make
// of its images.
func render(t *testing.T, w *strings.Builder, c *change.Change, mem memory.Allocator) {
	fmt.Fprintf(w, "kind: %s  format: %s", c.Kind, c.Format)
	if c.Op != change.OpNone {
		fmt.Fprintf(w, "  op: %s", c.Op)
	}
	fmt.Fprintf(w, "  table: %q\n", c.Table)
	if c.HasTS {
		fmt.Fprintf(w, "ts: %s\n", micros(c.TSMicros))
	} else {
		fmt.Fprintf(w, "ts: none\n")
	}
	fmt.Fprintf(w, "xid: %q  pos: %q\n", c.Xid, c.Pos)
	for _, im := range []struct {
		name string
		img  change.Image
	}{{"before", c.Before}, {"after", c.After}} {
		if im.img.Present() {
			fmt.Fprintf(w, "%s: %s\n", im.name, im.img.Obj.MarshalTo(nil))
		}
	}
	for _, e := range c.Extras {
		switch e.Kind {
		case change.ExtraTimestamp:
			fmt.Fprintf(w, "extra %s (timestamp): %s\n", e.Name, micros(e.Micros))
		case change.ExtraJSON:
			fmt.Fprintf(w, "extra %s (json): %s\n", e.Name, c.ExtraBytes(e))
		default:
			fmt.Fprintf(w, "extra %s (string): %s\n", e.Name, c.ExtraBytes(e))
		}
	}
	if c.Raw != nil {
		fmt.Fprintf(w, "raw: %s\n", c.Raw.MarshalTo(nil))
	}
	if c.Kind != change.KindDML || c.Schema == nil {
		if c.Schema != nil {
			fmt.Fprintf(w, "schema: %s\n", c.Schema.Get("name"))
		}
		return
	}
	cols, err := debezium.Columns(c.Schema)
	if err != nil {
		fmt.Fprintf(w, "columns error: %v\n", err)
		return
	}
	fmt.Fprintf(w, "row schema: %s (key %d bytes)\n", c.Schema.Get("name"), len(c.SchemaKey))
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
	for _, im := range []struct {
		name string
		img  change.Image
	}{{"before", c.Before}, {"after", c.After}} {
		if !im.img.Present() {
			continue
		}
		fmt.Fprintf(w, "%s values:\n", im.name)
		known := map[string]bool{}
		for _, col := range cols {
			known[col.Name] = true
			v := im.img.Obj.Get(col.Name)
			if v == nil {
				fmt.Fprintf(w, "  %s: absent\n", col.Name)
				continue
			}
			fmt.Fprintf(w, "  %s: %s\n", col.Name, convert(mem, col, v))
		}
		im.img.Obj.Visit(func(k []byte, _ *fastjson.Value) {
			if !known[string(k)] {
				t.Errorf("image column %q is not in the schema", k)
			}
		})
	}
}

// convert runs the schema package's converter for col on v.
func convert(mem memory.Allocator, col schema.Column, v *fastjson.Value) string {
	b := array.NewBuilder(mem, col.Type.Arrow())
	defer b.Release()
	app := schema.Compile(col.Name, col.Type, b)
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
