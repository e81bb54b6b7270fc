package batch

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/cdclake/cdclake/sinks"
)

// TestPartialImagesLand: images that name some of the table's columns,
// or are absent, land with NULL in the others and list them as absent,
// however the rows reach the file: appended to builders, frozen first,
// written early under the memory bound, or handed to the file's encoder
// in runs while it is open. One column is left out of a long run of rows
// (across runs and files), one is named only by the last rows, one only
// by the first; every value is checked against the images themselves, in
// both layouts that have columns.
func TestPartialImagesLand(t *testing.T) {
	for _, layout := range []schema.Layout{schema.LayoutImages, schema.LayoutFlat} {
		for _, c := range []struct {
			name   string
			limit  func(int64) int64
			bound  int64
			encode bool
		}{
			{"built", never, 1 << 40, false},
			{"frozen", func(int64) int64 { return 8 << 10 }, 1 << 40, false},
			{"written early", never, 128 << 10, false},
			{"encoded while open", never, 1 << 40, true},
			{"frozen, encoded while open", halfOf, 1 << 40, true},
		} {
			t.Run(fmt.Sprintf("%v/%s", layout, c.name), func(t *testing.T) {
				testPartialImages(t, layout, c.limit, c.bound, c.encode)
			})
		}
	}
}

func testPartialImages(t *testing.T, layout schema.Layout, limit func(int64) int64, bound int64, encode bool) {
	const n = 3000
	h := newHarness(t, Config{}, TableConfig{MaxRows: 1 << 20})
	var ps *partSink
	if encode {
		// The file's rows reach an encoder every encodeEvery rows, from
		// builders that go on taking rows.
		ps = &partSink{}
		b, err := New(Config{MaxBufferedBytes: bound, MaxOpenFiles: 100}, h.b.tables, ps, h.b.mem, h.b.log)
		if err != nil {
			t.Fatal(err)
		}
		h.b.Close()
		h.b, h.sink.b = b, b
		b.now = func() time.Time { return day }
	}
	h.b.freezeLimit = limit
	setBound(h.b, bound)
	tb := table("db.p", 1, layout, []schema.Column{
		{Name: "id", Type: schema.Type{Kind: schema.Int64}},
		{Name: "v", Type: schema.Type{Kind: schema.Int8}, Nullable: true},
		{Name: "s", Type: schema.Type{Kind: schema.String}, Nullable: true},
		{Name: "w", Type: schema.Type{Kind: schema.Int64}, Nullable: true},
		{Name: "j", Type: schema.Type{Kind: schema.String}, Nullable: true},
	})
	// value returns the JSON of column col in image img of row i, and
	// whether the image names it.
	value := func(i, img int, col string) (string, bool) {
		switch col {
		case "id":
			return fmt.Sprint(i), true
		case "v":
			switch {
			case (i+img)%11 == 0:
				return "null", true
			case (i+img)%3 == 0:
				return "", false
			}
			return fmt.Sprint((i + img) % 100), true
		case "s":
			if i >= 500 && i < 1700 || (i+img)%4 == 1 {
				return "", false
			}
			return fmt.Sprintf(`"s%d.%d"`, i, img), true
		case "w":
			if i < n-40 {
				return "", false
			}
			return fmt.Sprint(i * 1000), true
		case "j":
			if i >= 30 {
				return "", false
			}
			return fmt.Sprintf(`"j%d"`, i), true
		}
		panic(col)
	}
	present := func(i, img int) bool { return (img == 0 && i%5 != 0) || (img == 1 && i%7 != 3) }
	text := func(i, img int) string {
		if !present(i, img) {
			return ""
		}
		var kv []string
		for _, col := range tb.Columns {
			if v, ok := value(i, img, col.Name); ok {
				kv = append(kv, fmt.Sprintf("%q:%s", col.Name, v))
			}
		}
		return "{" + strings.Join(kv, ",") + "}"
	}
	// want renders image img of row i as the files give it: a struct of
	// every column, and the absent list.
	want := func(i, img int) (string, string) {
		if !present(i, img) {
			return "NULL", "NULL"
		}
		m := map[string]any{}
		absent := []string{}
		for _, col := range tb.Columns {
			v, ok := value(i, img, col.Name)
			if !ok {
				v = "null"
				absent = append(absent, col.Name)
			}
			var x any
			if err := json.Unmarshal([]byte(v), &x); err != nil {
				t.Fatal(err)
			}
			m[col.Name] = x
		}
		return marshal(t, m), marshal(t, absent)
	}
	got := map[int64][2]string{}
	collect := func(p sinks.Part) {
		rec := p.Record
		get := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
		offsets := get(schema.ColOffset).(*array.Int64)
		for _, r := range p.Ranges {
			for row := r[0]; row < r[1]; row++ {
				off := offsets.Value(row)
				if layout == schema.LayoutFlat {
					m := map[string]any{}
					for _, col := range tb.Columns {
						if a := get(col.Name); a.IsValid(row) {
							m[col.Name] = a.GetOneForMarshal(row)
						} else {
							m[col.Name] = nil
						}
					}
					got[off] = [2]string{marshal(t, m), jsonish(get(schema.ColAbsent), row)}
					continue
				}
				got[off] = [2]string{
					jsonish(get(schema.ColBefore), row) + " " + jsonish(get(schema.ColAfter), row),
					jsonish(get(schema.ColBeforeAbsent), row) + " " + jsonish(get(schema.ColAfterAbsent), row)}
			}
		}
	}
	h.sink.inspect = func(f *sinks.File) {
		for _, p := range f.Parts {
			collect(p)
		}
	}
	if ps != nil {
		ps.collect = collect
	}
	for i := range n {
		c := &change.Change{Kind: change.KindDML, Op: change.OpUpdate, Table: tb.Name, TSMicros: day.UnixMicro(), HasTS: true,
			Before: image(t, text(i, 0)), After: image(t, text(i, 1))}
		if re := h.add(c, tb, at(int64(i)), 1); re != nil {
			t.Fatalf("row %d: %v", i, re)
		}
	}
	if err := h.b.FlushAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("%d rows landed, want %d", len(got), n)
	}
	for i := range n {
		var w [2]string
		b, ba := want(i, 0)
		a, aa := want(i, 1)
		if layout == schema.LayoutFlat {
			w = [2]string{a, aa}
			if !present(i, 1) {
				w = [2]string{b, ba}
			}
			if !present(i, 0) && !present(i, 1) {
				w = [2]string{`{"id":null,"j":null,"s":null,"v":null,"w":null}`, "NULL"}
			}
		} else {
			w = [2]string{b + " " + a, ba + " " + aa}
		}
		if got[int64(i)] != w {
			t.Fatalf("row %d:\n got %v\nwant %v", i, got[int64(i)], w)
		}
	}
	switch {
	case bound < 1<<30 && len(h.sink.files) < 2:
		t.Errorf("%d files: the bound wrote none early", len(h.sink.files))
	case encode && ps.encoded < 2:
		t.Errorf("%d runs of rows encoded while the file was open", ps.encoded)
	}
}

// partSink is an Encoding sink whose encoders hand each part to collect.
type partSink struct {
	collect func(sinks.Part)
	encoded int // parts handed to encoders
}

func (s *partSink) Write(_ context.Context, f *sinks.File) (int64, error) {
	if f.Encoder == nil {
		for _, p := range f.Parts {
			s.collect(p)
		}
	}
	return 1, nil
}

func (s *partSink) NewEncoder(*arrow.Schema, sinks.WriteOptions) (sinks.Encoder, error) {
	return &partEncoder{s}, nil
}

type partEncoder struct{ s *partSink }

func (e *partEncoder) Write(p sinks.Part) error {
	e.s.encoded++
	e.s.collect(p)
	return nil
}

func (e *partEncoder) Finish(parts []sinks.Part) error {
	for _, p := range parts {
		e.s.collect(p)
	}
	return nil
}

func (e *partEncoder) Size() int64 { return 0 }
func (e *partEncoder) Abort()      {}

func marshal(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
