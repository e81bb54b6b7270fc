package batch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/state"
	"github.com/valyala/fastjson"
)

// written is what the fake sink kept of one file.
type written struct {
	Key        string
	Table      string
	Version    int
	Rows       int
	RecordRows int64
	// Parts is how many parts the rows came in (more after spills).
	Parts       int
	Ranges      [][2]int
	First, Last int64
	Source      string
	Partition   int32
	Offsets     []int64 // _cdc_offset of the rows in Ranges
	Options     sinks.WriteOptions
	// Durable is the tracker's position for the file's partition while
	// Write runs: it must not yet include the file's rows.
	Durable int64
}

// memSink is an in-memory Sink that records every file.
type memSink struct {
	b       *Batcher
	files   []written
	fail    error               // returned (once) by the next Write
	inspect func(f *sinks.File) // called with each file before it is recorded
	parts   []int               // how many parts each file came in (more after spills)
	errs    []string
}

func (s *memSink) Write(_ context.Context, f *sinks.File) (int64, error) {
	if s.fail != nil {
		err := s.fail
		s.fail = nil
		return 0, err
	}
	s.parts = append(s.parts, len(f.Parts))
	w := written{Key: f.Key, Table: f.Table, Version: f.Version, Rows: f.Rows,
		First: f.First.Offset, Last: f.LastOffset,
		Source: f.First.Source, Partition: f.First.Partition, Options: f.Options}
	// The partition's lock is held while Write runs; the tracker is read
	// directly.
	w.Durable, _ = s.b.partition(f.First.Source, f.First.Partition).tracker.durable()
	n := 0
	for _, p := range f.Parts {
		w.RecordRows += p.Record.NumRows()
		w.Ranges = append(w.Ranges, p.Ranges...)
		idx := p.Record.Schema().FieldIndices(schema.ColOffset)
		offsets := p.Record.Column(idx[0]).(*array.Int64)
		for _, r := range p.Ranges {
			if r[0] < 0 || r[1] > int(p.Record.NumRows()) || r[0] >= r[1] {
				s.errs = append(s.errs, fmt.Sprintf("%s: range %v outside a record of %d rows", f.Key, r, p.Record.NumRows()))
				continue
			}
			n += r[1] - r[0]
			for i := r[0]; i < r[1]; i++ {
				w.Offsets = append(w.Offsets, offsets.Value(i))
			}
		}
	}
	if n != f.Rows {
		s.errs = append(s.errs, fmt.Sprintf("%s: Rows %d but ranges hold %d", f.Key, f.Rows, n))
	}
	if s.inspect != nil {
		s.inspect(f)
	}
	s.files = append(s.files, w)
	return int64(100 * f.Rows), nil
}

// harness is a Batcher over a memSink with a checked allocator and a
// controllable clock.
type harness struct {
	t    *testing.T
	b    *Batcher
	sink *memSink
	tc   map[string]*TableConfig
	now  time.Time
}

var day = time.Date(2024, 1, 31, 10, 0, 0, 0, time.UTC)

func newHarness(t *testing.T, cfg Config, tc TableConfig) *harness {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	if tc.Path == nil {
		p, err := ParseTemplate("{table}/date={date}")
		if err != nil {
			t.Fatal(err)
		}
		tc.Path = p
	}
	if tc.MaxRows == 0 {
		tc.MaxRows = 1000
	}
	if tc.MaxBytes == 0 {
		tc.MaxBytes = 1 << 40
	}
	h := &harness{t: t, sink: &memSink{}, tc: map[string]*TableConfig{}, now: day}
	tables := func(name string) *TableConfig {
		if c, ok := h.tc[name]; ok {
			return c
		}
		c := tc
		h.tc[name] = &c
		return &c
	}
	if cfg.MaxBufferedBytes == 0 {
		cfg.MaxBufferedBytes = 1 << 40
	}
	if cfg.MaxOpenFiles == 0 {
		cfg.MaxOpenFiles = 1 << 20
	}
	b, err := New(cfg, tables, h.sink, mem, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	h.b = b
	h.b.now = func() time.Time { return h.now }
	h.sink.b = h.b
	t.Cleanup(func() {
		h.b.Close()
		mem.AssertSize(t, 0)
		for _, e := range h.sink.errs {
			t.Error(e)
		}
	})
	return h
}

func cols(names ...string) []schema.Column {
	out := []schema.Column{{Name: "id", Type: schema.Type{Kind: schema.Int64}}}
	for _, n := range names {
		out = append(out, schema.Column{Name: n, Type: schema.Type{Kind: schema.Int8}, Nullable: true})
	}
	return out
}

func table(name string, version int, layout schema.Layout, c []schema.Column) *schema.Table {
	return schema.NewTable(name, version, layout, c, nil, true, func(col string) bool { return col == "secret" })
}

func image(t testing.TB, js string) change.Image {
	t.Helper()
	if js == "" {
		return change.Image{}
	}
	v, err := fastjson.Parse(js) // a parser per image: values stay valid
	if err != nil {
		t.Fatalf("test image %s: %v", js, err)
	}
	return change.Image{Obj: v.GetObject()}
}

func insert(t testing.TB, tbl string, after string) *change.Change {
	return &change.Change{Kind: change.KindDML, Op: change.OpInsert, Table: tbl,
		TSMicros: day.UnixMicro(), HasTS: true, After: image(t, after)}
}

func at(off int64) sinks.Position {
	return sinks.Position{Source: "orders", Partition: 0, Offset: off}
}

// add appends a change and fails the test on any error but a *RowError,
// which it returns.
func (h *harness) add(c *change.Change, t *schema.Table, pos sinks.Position, size int) *RowError {
	h.t.Helper()
	err := h.b.Add(context.Background(), c, t, pos, size)
	// Buffers opened at the same instant have no defined order (see
	// TestBatcherOrderOfSimultaneousFiles): let the clock move.
	h.now = h.now.Add(time.Millisecond)
	if err == nil {
		return nil
	}
	var re *RowError
	if !errors.As(err, &re) {
		h.t.Fatalf("Add at %d: %v", pos.Offset, err)
	}
	return re
}

func (h *harness) durable() int64 {
	h.t.Helper()
	d, ok := h.b.Durable("orders", 0)
	if !ok {
		h.t.Fatalf("nothing seen")
	}
	return d
}

func (h *harness) keys() []string {
	var out []string
	for _, f := range h.sink.files {
		out = append(out, f.Key)
	}
	return out
}

func key(dir string, off int64) string {
	return dir + "/" + sinks.ObjectName(at(off), ".parquet")
}

func TestBatcherRotatesAtMaxRows(t *testing.T) {
	h := newHarness(t, Config{}, TableConfig{MaxRows: 3, Write: sinks.WriteOptions{Compression: "snappy", RowGroupRows: 7}})
	v1 := table("db.t", 1, schema.LayoutImages, cols("v"))
	wantFiles := []int{0, 0, 1, 1, 1, 2, 2}
	wantDurable := []int64{0, 0, 3, 3, 3, 6, 6}
	for i := range int64(7) {
		if re := h.add(insert(t, "db.t", fmt.Sprintf(`{"id":%d,"v":1}`, i)), v1, at(i), 10); re != nil {
			t.Fatalf("row %d: %v", i, re)
		}
		if len(h.sink.files) != wantFiles[i] {
			t.Fatalf("after row %d: %d files, want %d", i, len(h.sink.files), wantFiles[i])
		}
		if d := h.durable(); d != wantDurable[i] {
			t.Fatalf("after row %d: durable %d, want %d", i, d, wantDurable[i])
		}
	}
	if err := h.b.FlushAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	dir := "db.t/date=2024-01-31"
	want := []written{
		{Key: key(dir, 0), Table: "db.t", Version: 1, Rows: 3, RecordRows: 3, Ranges: [][2]int{{0, 3}}, First: 0, Last: 2, Source: "orders", Offsets: []int64{0, 1, 2}, Durable: 0},
		{Key: key(dir, 3), Table: "db.t", Version: 1, Rows: 3, RecordRows: 3, Ranges: [][2]int{{0, 3}}, First: 3, Last: 5, Source: "orders", Offsets: []int64{3, 4, 5}, Durable: 3},
		{Key: key(dir, 6), Table: "db.t", Version: 1, Rows: 1, RecordRows: 1, Ranges: [][2]int{{0, 1}}, First: 6, Last: 6, Source: "orders", Offsets: []int64{6}, Durable: 6},
	}
	checkFiles(t, h.sink.files, want)
	for _, f := range h.sink.files {
		if f.Options != (sinks.WriteOptions{Compression: "snappy", RowGroupRows: 7}) {
			t.Errorf("%s: options %+v not passed through", f.Key, f.Options)
		}
	}
	if d := h.durable(); d != 7 {
		t.Errorf("durable after FlushAll %d, want 7", d)
	}
	if h.b.OpenFiles() != 0 {
		t.Errorf("%d files open after FlushAll", h.b.OpenFiles())
	}
	st := h.b.Stats()["db.t"]
	if st.Rows != 7 || st.Files != 3 || st.Bytes != 700 || !st.Versions[v1.Fingerprint] || len(st.Versions) != 1 {
		t.Errorf("stats %+v", st)
	}
}

func checkFiles(t *testing.T, got, want []written) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d files written, want %d:\n%+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		g.Options, w.Options = sinks.WriteOptions{}, sinks.WriteOptions{}
		if fmt.Sprintf("%+v", g) != fmt.Sprintf("%+v", w) {
			t.Errorf("file %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
}

func TestBatcherInterleavingVersions(t *testing.T) {
	h := newHarness(t, Config{}, TableConfig{})
	v1 := table("db.t", 1, schema.LayoutImages, cols("v"))
	v2 := table("db.t", 2, schema.LayoutImages, cols("v", "w"))
	if v1.SameShape(v2) {
		t.Fatal("test tables must differ")
	}
	for i := range int64(6) {
		tv, img := v1, fmt.Sprintf(`{"id":%d,"v":1}`, i)
		if i%2 == 1 {
			tv, img = v2, fmt.Sprintf(`{"id":%d,"v":1,"w":2}`, i)
		}
		if re := h.add(insert(t, "db.t", img), tv, at(i), 10); re != nil {
			t.Fatalf("row %d: %v", i, re)
		}
	}
	if len(h.sink.files) != 0 || h.b.OpenFiles() != 2 {
		t.Fatalf("before FlushAll: %d files written, %d open; want 0 and 2", len(h.sink.files), h.b.OpenFiles())
	}
	if d := h.durable(); d != 0 {
		t.Errorf("durable %d with both files open, want 0", d)
	}
	if err := h.b.FlushAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	dir := "db.t/date=2024-01-31"
	checkFiles(t, h.sink.files, []written{
		{Key: key(dir, 0), Table: "db.t", Version: 1, Rows: 3, RecordRows: 3, Ranges: [][2]int{{0, 3}}, First: 0, Last: 4, Source: "orders", Offsets: []int64{0, 2, 4}, Durable: 0},
		{Key: key(dir, 1), Table: "db.t", Version: 2, Rows: 3, RecordRows: 3, Ranges: [][2]int{{0, 3}}, First: 1, Last: 5, Source: "orders", Offsets: []int64{1, 3, 5}, Durable: 1},
	})
	if st := h.b.Stats()["db.t"]; !st.Versions[v1.Fingerprint] || !st.Versions[v2.Fingerprint] || st.Files != 2 || st.Rows != 6 {
		t.Errorf("stats %+v", st)
	}
	if d := h.durable(); d != 6 {
		t.Errorf("durable %d, want 6", d)
	}
}

func TestBatcherCloseTable(t *testing.T) {
	h := newHarness(t, Config{}, TableConfig{})
	a1 := table("db.a", 1, schema.LayoutImages, cols("v"))
	a2 := table("db.a", 2, schema.LayoutImages, cols("v", "w"))
	b1 := table("db.b", 1, schema.LayoutImages, cols("v"))
	h.add(insert(t, "db.b", `{"id":0}`), b1, at(0), 1)
	h.add(insert(t, "db.a", `{"id":1}`), a1, at(1), 1)
	h.add(insert(t, "db.a", `{"id":2}`), a2, at(2), 1)
	h.add(insert(t, "db.b", `{"id":3}`), b1, at(3), 1)
	if err := h.b.CloseTable(context.Background(), "db.a", CauseDDL); err != nil {
		t.Fatal(err)
	}
	if got, want := h.keys(), []string{key("db.a/date=2024-01-31", 1), key("db.a/date=2024-01-31", 2)}; !slices.Equal(got, want) {
		t.Errorf("CloseTable wrote %v, want %v", got, want)
	}
	if h.b.OpenFiles() != 1 {
		t.Errorf("%d files open, want db.b's", h.b.OpenFiles())
	}
	if d := h.durable(); d != 0 {
		t.Errorf("durable %d: db.b's file from offset 0 is still open", d)
	}
	if err := h.b.CloseTable(context.Background(), "db.none", CauseDDL); err != nil || len(h.sink.files) != 2 {
		t.Errorf("CloseTable of an unknown table: %v, %d files", err, len(h.sink.files))
	}
	if err := h.b.CloseTable(context.Background(), "db.b", CauseDDL); err != nil {
		t.Fatal(err)
	}
	if f := h.sink.files[2]; f.Table != "db.b" || !slices.Equal(f.Offsets, []int64{0, 3}) {
		t.Errorf("db.b file %+v", f)
	}
	if d := h.durable(); d != 4 {
		t.Errorf("durable %d, want 4", d)
	}
	checkIndex(t, h.b)
}

// checkIndex fails t unless every partition's per-table index and aging
// count agree with its open buffers.
func checkIndex(t *testing.T, b *Batcher) {
	t.Helper()
	for _, p := range b.partitions() {
		p.mu.Lock()
		n, aging := 0, 0
		for table, bufs := range p.byTable {
			if len(bufs) == 0 {
				t.Errorf("partition %v: table %s indexed without buffers", p.key, table)
			}
			for _, buf := range bufs {
				if p.open[buf.key] != buf || buf.key.table != table {
					t.Errorf("partition %v: %s indexed under %s but not open", p.key, buf.dir, table)
				}
			}
			n += len(bufs)
		}
		for _, buf := range p.open {
			if buf.maxAge > 0 {
				aging++
			}
		}
		if n != len(p.open) || aging != p.aging {
			t.Errorf("partition %v: %d indexed, %d open; aging %d, counted %d", p.key, n, len(p.open), p.aging, aging)
		}
		p.mu.Unlock()
	}
}

// textCols is an id and a text column.
// never is a freezeLimit that freezes no row: rows go to builders.
func never(int64) int64 { return 0 }

func textCols() []schema.Column {
	return []schema.Column{{Name: "id", Type: schema.Type{Kind: schema.Int64}},
		{Name: "s", Type: schema.Type{Kind: schema.String}, Nullable: true}}
}

// openHeld sums the footprints of the open buffers.
func openHeld(b *Batcher) int64 {
	var n int64
	for _, buf := range allOpen(b) {
		n += buf.footprint()
	}
	return n
}

// TestBatcherMemoryBound: the bound counts what open buffers hold (their
// builders before any row, and the rows' data), not the input's size; past
// it, the largest buffers are written until three quarters remain.
func TestBatcherMemoryBound(t *testing.T) {
	h := newHarness(t, Config{}, TableConfig{})
	h.b.freezeLimit = never // rows go to builders from the first
	a := table("db.a", 1, schema.LayoutImages, textCols())
	b := table("db.b", 1, schema.LayoutImages, textCols())
	c := table("db.c", 1, schema.LayoutImages, textCols())
	long := strings.Repeat("x", 1000)
	off := int64(0)
	add := func(tb *schema.Table, size int) {
		h.add(insert(t, tb.Name, fmt.Sprintf(`{"id":%d,"s":%q}`, off, long)), tb, at(off), size)
		off++
		if got, want := h.b.held.Load(), openHeld(h.b); got != want {
			t.Fatalf("held %d, open buffers hold %d", got, want)
		}
	}
	add(b, 1)
	oneRow := h.b.held.Load()
	if oneRow < 10000 {
		t.Errorf("one open buffer with one row counts %d bytes; its builders alone take more", oneRow)
	}
	for range 200 {
		add(a, 1<<20) // the input's size is not what is held
	}
	if h.b.held.Load() < oneRow+200*1000 || h.b.held.Load() > 1<<20 {
		t.Errorf("held %d for 200 rows of 1 KB and one row", h.b.held.Load())
	}
	if len(h.sink.files) != 0 {
		t.Fatalf("%d files written without a bound", len(h.sink.files))
	}
	// At the bound exactly, then one more buffer: the largest (db.a) gives
	// its builders back and keeps its rows compressed, staying open; the
	// three fit in three quarters.
	setBound(h.b, h.b.held.Load())
	add(c, 1)
	if len(h.sink.files) != 0 || h.b.OpenFiles() != 3 {
		t.Fatalf("the memory bound wrote %+v and left %d files open; want db.a spilled and 3 open", h.sink.files, h.b.OpenFiles())
	}
	if h.b.held.Load() > h.b.cfg.MaxBufferedBytes*3/4 {
		t.Errorf("holding %d, want within %d", h.b.held.Load(), h.b.cfg.MaxBufferedBytes*3/4)
	}
	// A bound below the spilled rows: every buffer spills, and the
	// spilled rows alone being above the bound, the largest files are
	// written, db.a whole: its 200 spilled rows and the new one, spilled
	// again into one run with them (a small run takes the next spill's
	// rows in).
	setBound(h.b, 1024)
	add(a, 1)
	if h.b.held.Load() > h.b.cfg.MaxBufferedBytes*3/4 {
		t.Errorf("held %d, above %d", h.b.held.Load(), h.b.cfg.MaxBufferedBytes*3/4)
	}
	var rowsA int
	for i, f := range h.sink.files {
		if f.Table == "db.a" {
			rowsA += f.Rows
			if f.Rows != 201 || h.sink.parts[i] != 1 || f.Offsets[0] != 1 || f.Offsets[200] != 202 {
				t.Errorf("db.a's file: %d rows in %d parts, offsets %d..%d", f.Rows, h.sink.parts[i], f.Offsets[0], f.Offsets[len(f.Offsets)-1])
			}
		}
	}
	if rowsA != 201 {
		t.Errorf("db.a: %d rows written, want its 201 in one file: %+v", rowsA, h.sink.files)
	}
	if err := h.b.FlushAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(h.sink.files) != 3 {
		t.Errorf("%d files for 3 tables", len(h.sink.files))
	}
}

func TestBatcherMaxOpenFiles(t *testing.T) {
	h := newHarness(t, Config{MaxOpenFiles: 2}, TableConfig{})
	for i, name := range []string{"db.a", "db.b", "db.c", "db.d"} {
		h.now = day.Add(time.Duration(i) * time.Second)
		tb := table(name, 1, schema.LayoutImages, cols())
		h.add(insert(t, name, fmt.Sprintf(`{"id":%d}`, i)), tb, at(int64(i)), 1)
	}
	var tables []string
	for _, f := range h.sink.files {
		tables = append(tables, f.Table)
	}
	if !slices.Equal(tables, []string{"db.a", "db.b"}) || h.b.OpenFiles() != 2 {
		t.Errorf("wrote %v with %d open, want the idle ones (db.a, db.b) written and 2 open", tables, h.b.OpenFiles())
	}
}

// TestBatcherMaxOpenFilesKeepsBusyFiles: over the bound, the file idle the
// longest is written, not the oldest one still taking rows.
func TestBatcherMaxOpenFilesKeepsBusyFiles(t *testing.T) {
	h := newHarness(t, Config{MaxOpenFiles: 2}, TableConfig{})
	a, b, c := table("db.a", 1, schema.LayoutImages, cols()), table("db.b", 1, schema.LayoutImages, cols()),
		table("db.c", 1, schema.LayoutImages, cols())
	for i, tb := range []*schema.Table{a, b, a, c, a} {
		h.add(insert(t, tb.Name, fmt.Sprintf(`{"id":%d}`, i)), tb, at(int64(i)), 1)
	}
	if len(h.sink.files) != 1 || h.sink.files[0].Table != "db.b" {
		t.Fatalf("wrote %+v, want db.b (idle the longest) and not db.a (the oldest)", h.sink.files)
	}
	must(t, h.b.FlushAll(context.Background()))
	for _, f := range h.sink.files {
		if f.Table == "db.a" && f.Rows != 3 {
			t.Errorf("db.a: %d rows in a file, want its 3 in one", f.Rows)
		}
	}
}

// TestBatcherRowErrors: rows that do not convert are rejected, whether
// the file freezes its rows (then they are never stored) or appends them to
// builders (then they are skipped on write).
func TestBatcherRowErrors(t *testing.T) {
	for _, frozen := range []bool{true, false} {
		t.Run(fmt.Sprint("frozen=", frozen), func(t *testing.T) { testBatcherRowErrors(t, frozen) })
	}
}

func testBatcherRowErrors(t *testing.T, frozen bool) {
	h := newHarness(t, Config{}, TableConfig{})
	if !frozen {
		h.b.freezeLimit = never
	}
	v1 := table("db.t", 1, schema.LayoutImages, cols("v"))
	rows := []struct {
		after   string
		bad     bool
		convCol string // the column a *schema.ConvertError names
	}{
		{`{"id":0,"v":1}`, false, ""},
		{`{"id":1,"v":300}`, true, "v"},
		{`{"id":2,"v":2}`, false, ""},
		{`{"id":3,"v":3,"secret":"x"}`, false, ""}, // ignored by the route
		{`{"id":4,"zzz":1}`, true, ""},             // not in the table version
		{`{"id":5,"id":6}`, true, ""},              // duplicate key
		{`{"id":"x"}`, true, "id"},
		{`{"id":7,"v":7}`, false, ""},
	}
	for i, r := range rows {
		re := h.add(insert(t, "db.t", r.after), v1, at(int64(i)), 1)
		if (re != nil) != r.bad {
			t.Fatalf("row %d %s: error %v, want error %v", i, r.after, re, r.bad)
		}
		if r.convCol != "" {
			var ce *schema.ConvertError
			if !errors.As(re, &ce) || ce.Column != r.convCol {
				t.Errorf("row %d: %v does not wrap a *schema.ConvertError for %s", i, re, r.convCol)
			}
		}
	}
	if err := h.b.FlushAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := written{
		Key: key("db.t/date=2024-01-31", 0), Table: "db.t", Version: 1, Rows: 4, RecordRows: 8,
		Ranges: [][2]int{{0, 1}, {2, 4}, {7, 8}}, First: 0, Last: 7, Source: "orders",
		Offsets: []int64{0, 2, 3, 7}, Durable: 0,
	}
	if frozen {
		want.RecordRows, want.Ranges = 4, [][2]int{{0, 4}}
	}
	checkFiles(t, h.sink.files, []written{want})
	if st := h.b.Stats()["db.t"]; st.Rows != 4 {
		t.Errorf("stats count %d rows, want the 4 landed", st.Rows)
	}
}

func TestBatcherAllRowsRejected(t *testing.T) {
	h := newHarness(t, Config{}, TableConfig{})
	v1 := table("db.t", 1, schema.LayoutImages, cols("v"))
	for i := range int64(2) {
		if re := h.add(insert(t, "db.t", `{"id":1,"v":999}`), v1, at(i), 1); re == nil {
			t.Fatal("want a row error")
		}
	}
	if err := h.b.FlushAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(h.sink.files) != 0 {
		t.Errorf("wrote %v for a file without valid rows", h.keys())
	}
	if h.b.OpenFiles() != 0 {
		t.Errorf("buffer still open")
	}
	// The rejected rows are dead-lettered by the caller: nothing holds the
	// position back.
	if d := h.durable(); d != 2 {
		t.Errorf("durable %d, want 2", d)
	}
}

func TestBatcherDurableOnlyAfterSink(t *testing.T) {
	h := newHarness(t, Config{}, TableConfig{MaxRows: 2})
	v1 := table("db.t", 1, schema.LayoutImages, cols("v"))
	h.add(insert(t, "db.t", `{"id":0}`), v1, at(0), 1)
	h.add(insert(t, "db.t", `{"id":1}`), v1, at(1), 1)
	if len(h.sink.files) != 1 || h.sink.files[0].Durable != 0 {
		t.Fatalf("files %+v: while the sink writes, the position must stay at 0", h.sink.files)
	}
	if d := h.durable(); d != 2 {
		t.Fatalf("durable %d after a nil Write, want 2", d)
	}

	// A failing sink: the error is a storage error, not a row error, and
	// nothing becomes durable.
	boom := errors.New("boom")
	h.sink.fail = boom
	h.add(insert(t, "db.t", `{"id":2}`), v1, at(2), 1)
	err := h.b.Add(context.Background(), insert(t, "db.t", `{"id":3}`), v1, at(3), 1)
	var re *RowError
	if !errors.Is(err, boom) || errors.As(err, &re) {
		t.Fatalf("Add with a failing sink: %v, want the sink's error and no *RowError", err)
	}
	if !strings.Contains(err.Error(), sinks.ObjectName(at(2), ".parquet")) {
		t.Errorf("error %q does not name the file", err)
	}
	if d := h.durable(); d != 2 {
		t.Errorf("durable %d after a failed write, want 2", d)
	}
	if h.b.OpenFiles() != 1 {
		t.Errorf("the failed file must stay open")
	}
	must(t, h.b.Skip(context.Background(), at(4)))
	if d := h.durable(); d != 2 {
		t.Errorf("durable %d after Skip behind an unwritten file, want 2", d)
	}

	// Skip alone moves an idle partition.
	idle := sinks.Position{Source: "orders", Partition: 9, Offset: 41}
	must(t, h.b.Skip(context.Background(), idle))
	if d, ok := h.b.Durable("orders", 9); !ok || d != 42 {
		t.Errorf("idle partition durable %d, %v, want 42", d, ok)
	}
	if _, ok := h.b.Durable("orders", 8); ok {
		t.Errorf("unseen partition reported durable")
	}
}

func TestBatcherHoldRelease(t *testing.T) {
	h := newHarness(t, Config{}, TableConfig{MaxRows: 1})
	v1 := table("db.t", 1, schema.LayoutImages, cols("v"))
	// Offset 0 is a dead letter being written; 1 lands at once.
	dead := new(int)
	must(t, h.b.Hold(context.Background(), at(0), dead))
	h.add(insert(t, "db.t", `{"id":1}`), v1, at(1), 1)
	if len(h.sink.files) != 1 {
		t.Fatalf("%d files", len(h.sink.files))
	}
	if d := h.durable(); d != 0 {
		t.Errorf("durable %d while the dead letter at 0 is held, want 0", d)
	}
	must(t, h.b.Skip(context.Background(), at(2)))
	if d := h.durable(); d != 0 {
		t.Errorf("durable %d, want 0", d)
	}
	h.b.Release("orders", 0, dead)
	if d := h.durable(); d != 3 {
		t.Errorf("durable %d after Release, want 3", d)
	}
	// Releasing on another partition, or twice, changes nothing.
	must(t, h.b.Hold(context.Background(), at(3), dead))
	h.b.Release("orders", 1, dead)
	if d := h.durable(); d != 3 {
		t.Errorf("durable %d, want 3", d)
	}
	h.b.Release("orders", 0, dead)
	h.b.Release("orders", 0, dead)
	if d := h.durable(); d != 4 {
		t.Errorf("durable %d, want 4", d)
	}
}

// TestBatcherRetryAfterSinkFailure: after a failed write the file stays
// open; writing it again must write the same rows.
func TestBatcherRetryAfterSinkFailure(t *testing.T) {
	h := newHarness(t, Config{}, TableConfig{})
	v1 := table("db.t", 1, schema.LayoutImages, cols("v"))
	h.add(insert(t, "db.t", `{"id":0}`), v1, at(0), 1)
	h.add(insert(t, "db.t", `{"id":1}`), v1, at(1), 1)
	h.sink.fail = errors.New("boom")
	if err := h.b.FlushAll(context.Background()); err == nil {
		t.Fatal("FlushAll with a failing sink returned nil")
	}
	if err := h.b.FlushAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, h.sink.files, []written{{
		Key: key("db.t/date=2024-01-31", 0), Table: "db.t", Version: 1, Rows: 2, RecordRows: 2,
		Ranges: [][2]int{{0, 2}}, First: 0, Last: 1, Source: "orders", Offsets: []int64{0, 1}, Durable: 0,
	}})
}

// TestBatcherOrderOfSimultaneousFiles: files born at the same instant are
// written in a fixed order.
func TestBatcherOrderOfSimultaneousFiles(t *testing.T) {
	var first []string
	for run := range 20 {
		h := newHarness(t, Config{}, TableConfig{})
		v1 := table("db.t", 1, schema.LayoutImages, cols("v"))
		v2 := table("db.t", 2, schema.LayoutImages, cols("v", "w"))
		for i := range int64(4) {
			tv := v1
			if i%2 == 1 {
				tv = v2
			}
			if err := h.b.Add(context.Background(), insert(t, "db.t", `{"id":1}`), tv, at(i), 1); err != nil {
				t.Fatal(err)
			}
		}
		if err := h.b.FlushAll(context.Background()); err != nil {
			t.Fatal(err)
		}
		if run == 0 {
			first = h.keys()
		} else if !slices.Equal(h.keys(), first) {
			t.Fatalf("run %d wrote %v, run 0 %v", run, h.keys(), first)
		}
	}
}

func TestBatcherFlushExpired(t *testing.T) {
	h := newHarness(t, Config{}, TableConfig{MaxAge: time.Minute})
	v1 := table("db.t", 1, schema.LayoutImages, cols("v"))
	h.add(insert(t, "db.t", `{"id":0}`), v1, at(0), 1)
	h.now = day.Add(30 * time.Second)
	h.add(insert(t, "db.t", `{"id":1}`), v1, at(1), 1)
	if err := h.b.FlushExpired(context.Background()); err != nil || len(h.sink.files) != 0 {
		t.Fatalf("FlushExpired at 30s: %v, %d files", err, len(h.sink.files))
	}
	h.now = day.Add(time.Minute)
	if err := h.b.FlushExpired(context.Background()); err != nil || len(h.sink.files) != 1 {
		t.Fatalf("FlushExpired at 60s: %v, %d files", err, len(h.sink.files))
	}
	if f := h.sink.files[0]; !slices.Equal(f.Offsets, []int64{0, 1}) {
		t.Errorf("file %+v", f)
	}
	checkIndex(t, h.b)
}

// TestBatcherDeterministicNames: the same input gives the same files, in the
// same order, whatever the clock.
func TestBatcherDeterministicNames(t *testing.T) {
	run := func(start time.Time) []string {
		h := newHarness(t, Config{}, TableConfig{MaxRows: 2})
		h.now = start
		v1 := table("db.t", 1, schema.LayoutImages, cols("v"))
		v2 := table("db.t", 2, schema.LayoutImages, cols("v", "w"))
		other := table("db.o", 1, schema.LayoutImages, cols())
		for i := range int64(9) {
			pos := sinks.Position{Source: "orders", Partition: int32(i % 2), Offset: 100 + i}
			c := insert(t, "db.t", fmt.Sprintf(`{"id":%d}`, i))
			c.TSMicros += i * int64(time.Hour/time.Microsecond) * 7 // crosses a day
			tb := v1
			switch i % 3 {
			case 1:
				tb = v2
			case 2:
				tb, c.Table = other, "db.o"
			}
			h.add(c, tb, pos, 1)
			h.now = h.now.Add(time.Millisecond)
		}
		if err := h.b.FlushAll(context.Background()); err != nil {
			t.Fatal(err)
		}
		return h.keys()
	}
	a := run(day)
	b := run(day.Add(1000 * time.Hour))
	if !slices.Equal(a, b) {
		t.Errorf("names differ between runs:\n%v\n%v", a, b)
	}
	want := []string{
		"db.t/date=2024-01-31/orders-p0-o00000000000000000100.parquet",
		"db.t/date=2024-01-31/orders-p1-o00000000000000000101.parquet",
		"db.o/date=2024-02-01/orders-p0-o00000000000000000102.parquet",
		"db.t/date=2024-02-01/orders-p1-o00000000000000000103.parquet",
		"db.t/date=2024-02-01/orders-p0-o00000000000000000104.parquet",
		"db.o/date=2024-02-01/orders-p1-o00000000000000000105.parquet",
		"db.t/date=2024-02-02/orders-p0-o00000000000000000106.parquet",
		"db.t/date=2024-02-02/orders-p1-o00000000000000000107.parquet",
		"db.o/date=2024-02-02/orders-p0-o00000000000000000108.parquet",
	}
	// FlushAll writes a source partition's files after another's.
	if a, want := slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(want)); !slices.Equal(a, want) {
		t.Errorf("files\n%v\nwant\n%v", a, want)
	}
}

func TestBatcherImageColumns(t *testing.T) {
	h := newHarness(t, Config{}, TableConfig{})
	v1 := table("db.t", 1, schema.LayoutImages, cols("v", "w"))
	h.now = day.Add(5 * time.Minute) // the clock lands nowhere
	c := &change.Change{Kind: change.KindDML, Op: change.OpUpdate, Table: "db.t", Xid: "tx1", Pos: "00001",
		TSMicros: day.UnixMicro(), HasTS: true,
		Before: image(t, `{"id":1,"v":1,"w":1}`), After: image(t, `{"id":1,"v":2}`)}
	h.add(c, v1, at(0), 1)
	// A delete without a time of its own: its record's time places it.
	del := &change.Change{Kind: change.KindDML, Op: change.OpDelete, Table: "db.t", Before: image(t, `{"id":2}`),
		RecordMicros: day.Add(time.Hour).UnixMicro()}
	h.add(del, v1, at(1), 1)
	h.sink.inspect = func(f *sinks.File) {
		rec := f.Parts[0].Record
		col := func(name string) arrow.Array {
			idx := rec.Schema().FieldIndices(name)
			if len(idx) != 1 {
				t.Fatalf("no column %s", name)
			}
			return rec.Column(idx[0])
		}
		checks := []struct{ name, want0, want1 string }{
			{schema.ColOp, "UPDATE", "DELETE"},
			{schema.ColTable, "db.t", "db.t"},
			{schema.ColXid, "tx1", "NULL"},
			{schema.ColPos, "00001", "NULL"},
			{schema.ColSource, "orders", "orders"},
			{schema.ColPartition, "0", "0"},
			{schema.ColOffset, "0", "1"},
			{schema.ColAfterAbsent, `["w"]`, "NULL"},
			{schema.ColBeforeAbsent, `[]`, `["v","w"]`},
			{schema.ColAfter, `{"id":1,"v":2,"w":null}`, "NULL"},
			{schema.ColBefore, `{"id":1,"v":1,"w":1}`, `{"id":2,"v":null,"w":null}`},
		}
		for _, ck := range checks {
			if got := jsonish(col(ck.name), 0); got != ck.want0 {
				t.Errorf("%s[0] = %s, want %s", ck.name, got, ck.want0)
			}
			if got := jsonish(col(ck.name), 1); got != ck.want1 {
				t.Errorf("%s[1] = %s, want %s", ck.name, got, ck.want1)
			}
		}
		ts := col(schema.ColTS).(*array.Timestamp)
		if ts.Value(0) != arrow.Timestamp(day.UnixMicro()) || !ts.IsNull(1) {
			t.Errorf("_cdc_ts = %v", ts)
		}
		// The record's own timestamp, NULL for a record without one.
		if ing := col(schema.ColIngestedAt).(*array.Timestamp); !ing.IsNull(0) || ing.Value(1) != arrow.Timestamp(del.RecordMicros) {
			t.Errorf("_cdc_ingested_at = %v", ing)
		}
	}
	if err := h.b.FlushAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(h.sink.files) != 1 {
		t.Fatalf("%d files", len(h.sink.files))
	}
	// The delete has no _cdc_ts: its directory comes from its record's
	// time, not from the ingestion time; without either, the epoch's.
	if h.sink.files[0].Key != key("db.t/date=2024-01-31", 0) {
		t.Errorf("key %s", h.sink.files[0].Key)
	}
	h.now = day.AddDate(0, 0, 3)
	h.add(&change.Change{Kind: change.KindDML, Op: change.OpDelete, Table: "db.t", Before: image(t, `{"id":3}`)}, v1, at(2), 1)
	h.sink.inspect = nil
	if err := h.b.FlushAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(h.sink.files) != 2 || h.sink.files[1].Key != key("db.t/date=1970-01-01", 2) {
		t.Errorf("a change with no time and no record time: files %v", h.keys())
	}
}

// jsonish renders one value of a as JSON (strings bare) for comparisons.
func jsonish(a arrow.Array, i int) string {
	if a.IsNull(i) {
		return "NULL"
	}
	v := a.GetOneForMarshal(i)
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "error: " + err.Error()
	}
	return string(b)
}

func TestBatcherFlatLayout(t *testing.T) {
	h := newHarness(t, Config{}, TableConfig{})
	h.b.freezeLimit = never // the rejected row is in the record
	flat := table("db.f", 1, schema.LayoutFlat, cols("v", "w"))
	h.add(insert(t, "db.f", `{"id":1,"v":1}`), flat, at(0), 1)
	h.add(&change.Change{Kind: change.KindDML, Op: change.OpDelete, Table: "db.f", Before: image(t, `{"id":2,"v":2,"w":2}`),
		TSMicros: day.UnixMicro(), HasTS: true}, flat, at(1), 1)
	if re := h.add(insert(t, "db.f", `{"id":3,"w":1000}`), flat, at(2), 1); re == nil {
		t.Errorf("w=1000 into int8: want a row error")
	}
	h.sink.inspect = func(f *sinks.File) {
		rec := f.Parts[0].Record
		get := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
		id, v, w := get("id").(*array.Int64), get("v").(*array.Int8), get("w").(*array.Int8)
		if id.Value(0) != 1 || v.Value(0) != 1 || !w.IsNull(0) {
			t.Errorf("insert row: %v %v %v", id, v, w)
		}
		if id.Value(1) != 2 || v.Value(1) != 2 || w.Value(1) != 2 {
			t.Errorf("delete row lands the before image: %v %v %v", id, v, w)
		}
		if got := jsonish(get(schema.ColAbsent), 0); got != `["w"]` {
			t.Errorf("_cdc_absent[0] = %s", got)
		}
		if got := jsonish(get(schema.ColAbsent), 1); got != `[]` {
			t.Errorf("_cdc_absent[1] = %s", got)
		}
		if rec.NumRows() != 3 || len(f.Parts[0].Ranges) != 1 || f.Parts[0].Ranges[0] != [2]int{0, 2} {
			t.Errorf("rows %d ranges %v", rec.NumRows(), f.Parts[0].Ranges)
		}
	}
	if err := h.b.FlushAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(h.sink.files) != 1 {
		t.Fatalf("%d files", len(h.sink.files))
	}
}

func TestBatcherEventsLayout(t *testing.T) {
	h := newHarness(t, Config{}, TableConfig{})
	ev := schema.NewTable(schema.TableDDL, 1, schema.LayoutEvents, nil,
		[]schema.ExtraColumn{{Name: "csn", Kind: change.ExtraString}, {Name: "tokens", Kind: change.ExtraJSON}}, true, nil)
	raw := fastjson.MustParse(`{"ddl":"CREATE TABLE X (A INT)","table":"S.X"}`)
	c := &change.Change{Kind: change.KindDDL, Table: "S.X", Raw: raw, Statement: "CREATE TABLE X (A INT)"}
	c.AddString("csn", []byte("123"))
	c.AddJSON("tokens", fastjson.MustParse(`{"k":"v"}`))
	h.add(c, ev, at(0), 1)
	h.sink.inspect = func(f *sinks.File) {
		rec := f.Parts[0].Record
		get := func(name string) string { return jsonish(rec.Column(rec.Schema().FieldIndices(name)[0]), 0) }
		for name, want := range map[string]string{
			schema.ColOp: "DDL", schema.ColKind: "ddl", schema.ColObject: "S.X",
			schema.ColStatement: "CREATE TABLE X (A INT)", "csn": "123",
		} {
			if got := get(name); got != want {
				t.Errorf("%s = %q, want %q", name, got, want)
			}
		}
		evCol := rec.Column(rec.Schema().FieldIndices(schema.ColEvent)[0])
		if got := evCol.ValueStr(0); !strings.Contains(got, `"ddl":"CREATE TABLE X (A INT)"`) {
			t.Errorf("event = %s", got)
		}
		tok := rec.Column(rec.Schema().FieldIndices("tokens")[0])
		if got := tok.ValueStr(0); !strings.Contains(got, `"k":"v"`) {
			t.Errorf("tokens = %s", got)
		}
	}
	if err := h.b.FlushAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(h.sink.files) != 1 || !strings.HasPrefix(h.sink.files[0].Key, "_ddl/date=") {
		t.Errorf("files %v", h.keys())
	}
}

// journal records the calls of the Batcher, with the sink's files at the
// time of each.
type journal struct {
	sink   *memSink
	calls  []string
	done   []state.Cut
	fenced bool // every call fails as fenced
}

func (j *journal) Owns(source string, part int32) bool { return part == 0 }
func (j *journal) Check(context.Context, string, int32) error {
	if j.fenced {
		return fmt.Errorf("test: %w", state.ErrFenced)
	}
	return nil
}
func (j *journal) Intend(_ context.Context, _ string, _ int32, c state.Cut) error {
	if j.fenced {
		return fmt.Errorf("test: %w", state.ErrFenced)
	}
	j.calls = append(j.calls, fmt.Sprintf("intend %d-%d rows %d (files %d)", c.First, c.Last, c.Rows, len(j.sink.files)))
	return nil
}
func (j *journal) Done(_ context.Context, _ string, _ int32, c state.Cut, durable int64) error {
	j.calls = append(j.calls, fmt.Sprintf("done %d-%d durable %d (files %d)", c.First, c.Last, durable, len(j.sink.files)))
	j.done = append(j.done, c)
	return nil
}
func (j *journal) Advance(_ context.Context, _ string, _ int32, durable int64) error {
	j.calls = append(j.calls, fmt.Sprintf("advance %d", durable))
	return nil
}

// TestBatcherRecordsOffsetRuns: a file's recorded cut holds the offsets of
// its rows (a claim then needs not read it), without the rows that did not
// convert, whether the file freezes its rows or builds them: as runs, else as
// a bitmap, else (too many runs over too many offsets) not at all.
func TestBatcherRecordsOffsetRuns(t *testing.T) {
	for _, frozen := range []bool{true, false} {
		t.Run(fmt.Sprint("frozen=", frozen), func(t *testing.T) {
			h := newHarness(t, Config{}, TableConfig{})
			if !frozen {
				h.b.freezeLimit = never
			}
			j := &journal{sink: h.sink}
			h.b.SetJournal(j)
			v1 := table("db.t", 1, schema.LayoutImages, cols("v"))
			u := table("db.u", 1, schema.LayoutImages, cols("v"))
			for off, r := range []string{`{"id":0,"v":1}`, `{"id":1,"v":1}`, "u", `{"id":3,"v":300}`, `{"id":4,"v":1}`, `{"id":5,"v":1}`} {
				if r == "u" {
					h.add(insert(t, "db.u", `{"id":2}`), u, at(int64(off)), 1)
					continue
				}
				h.add(insert(t, "db.t", r), v1, at(int64(off)), 1)
			}
			must(t, h.b.FlushAll(context.Background()))
			// More runs than a cut keeps, over few offsets: a bitmap.
			for off := int64(10); off < 10+2*(state.MaxRuns+1); off += 2 {
				h.add(insert(t, "db.t", fmt.Sprintf(`{"id":%d}`, off)), v1, at(off), 1)
			}
			must(t, h.b.FlushAll(context.Background()))
			// And over more offsets than a bitmap covers: neither.
			for off := int64(100); off < 100+200*(state.MaxRuns+1); off += 200 {
				h.add(insert(t, "db.t", fmt.Sprintf(`{"id":%d}`, off)), v1, at(off), 1)
			}
			must(t, h.b.FlushAll(context.Background()))
			var got []string
			for _, c := range j.done {
				offs, ok := c.Offsets()
				got = append(got, fmt.Sprintf("%s %v %q %v %v", c.Table, c.Runs, c.Bits, offs, ok))
			}
			want := []string{`db.t [[0 1] [4 5]] "" [0 1 4 5] true`, `db.u [[2 2]] "" [2] true`,
				`db.t [] "VVVVVQE" [10 12 14 16 18 20 22 24 26 28 30 32 34 36 38 40 42] true`, `db.t [] "" [] false`}
			if !slices.Equal(got, want) {
				t.Errorf("recorded cuts:\n%q\nwant\n%q", got, want)
			}
		})
	}
}

// TestBatcherJournalAndRestore: an owned partition's files are recorded
// before and after they are written; a restored partition does not land
// the offsets its files already hold.
func TestBatcherJournalAndRestore(t *testing.T) {
	h := newHarness(t, Config{}, TableConfig{MaxRows: 3})
	j := &journal{sink: h.sink}
	h.b.SetJournal(j)
	v1 := table("db.t", 1, schema.LayoutImages, cols("v"))
	h.b.Restore("orders", 0, []int64{11, 12}, nil)
	for off := int64(10); off < 16; off++ {
		h.add(insert(t, "db.t", fmt.Sprintf(`{"id":%d}`, off)), v1, at(off), 1)
	}
	if err := h.b.FlushAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"intend 10-14 rows 3 (files 0)", "done 10-14 durable 15 (files 1)",
		"intend 15-15 rows 1 (files 1)", "done 15-15 durable 16 (files 2)"}
	if !slices.Equal(j.calls, want) {
		t.Errorf("journal calls:\n%q\nwant\n%q", j.calls, want)
	}
	if f := h.sink.files; len(f) != 2 || f[0].Key != key("db.t/date=2024-01-31", 10) ||
		!slices.Equal(f[0].Offsets, []int64{10, 13, 14}) || !slices.Equal(f[1].Offsets, []int64{15}) {
		t.Errorf("files %+v: the landed offsets 11 and 12 must not land again", f)
	}
	// Another partition is not the journal's: written without a record.
	other := sinks.Position{Source: "orders", Partition: 1, Offset: 3}
	h.add(insert(t, "db.t", `{"id":3}`), v1, other, 1)
	if err := h.b.FlushAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(j.calls) != 4 {
		t.Errorf("a partition the journal does not own was recorded: %q", j.calls[4:])
	}
}

// TestBatcherReplayAfterRejectedFirstRow: a file whose first row was
// rejected is named after its first row that landed, so the replay of its
// partition, which opens a buffer at the rejected row again and skips the
// landed ones, cannot overwrite it with other rows.
func TestBatcherReplayAfterRejectedFirstRow(t *testing.T) {
	v1 := table("db.t", 1, schema.LayoutImages, cols("v"))
	rows := []string{`{"id":10,"v":300}`, `{"id":11,"v":1}`, `{"id":12,"v":2}`, `{"id":13,"v":3}`}
	first := newHarness(t, Config{}, TableConfig{})
	for i, r := range rows[:3] {
		first.add(insert(t, "db.t", r), v1, at(int64(10+i)), 1)
	}
	if err := first.b.FlushAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f := first.sink.files; len(f) != 1 || f[0].Key != key("db.t/date=2024-01-31", 11) || f[0].First != 11 {
		t.Fatalf("files %+v, want one named after offset 11, its first landed row", f)
	}
	replay := newHarness(t, Config{}, TableConfig{})
	replay.b.Restore("orders", 0, []int64{11, 12}, nil)
	for i, r := range rows {
		replay.add(insert(t, "db.t", r), v1, at(int64(10+i)), 1)
	}
	if err := replay.b.FlushAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f := replay.sink.files; len(f) != 1 || f[0].Key != key("db.t/date=2024-01-31", 13) || !slices.Equal(f[0].Offsets, []int64{13}) {
		t.Errorf("replay wrote %+v, want only offset 13, named after it", f)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestBatcherRepeatsRecordedCuts: a restored partition's files that were
// about to be written are cut again at the recorded offsets, whatever the
// replay's own limits say, and not written early when the input stops
// before the cut's end.
func TestBatcherRepeatsRecordedCuts(t *testing.T) {
	v1 := table("db.t", 1, schema.LayoutImages, cols("v"))
	other := table("db.u", 1, schema.LayoutImages, cols("v"))
	dir := "db.t/date=2024-01-31"
	cut := state.Cut{Key: key(dir, 10), Table: "db.t", Fingerprint: v1.Fingerprint, First: 10, Last: 13, Rows: 4}
	row := func(off int64) *change.Change { return insert(t, "db.t", fmt.Sprintf(`{"id":%d}`, off)) }

	t.Run("limits of the replay", func(t *testing.T) {
		// Two rows per file, one open file, a tiny memory bound and an
		// expired age: none of them cuts the recorded file short.
		h := newHarness(t, Config{MaxOpenFiles: 1, MaxBufferedBytes: 1}, TableConfig{MaxRows: 2, MaxAge: time.Nanosecond})
		h.b.Restore("orders", 0, nil, []state.Cut{cut})
		for off := int64(10); off < 16; off++ {
			h.add(row(off), v1, at(off), 1)
			must(t, h.b.FlushExpired(context.Background()))
		}
		must(t, h.b.FlushAll(context.Background()))
		var got [][]int64
		for _, f := range h.sink.files {
			got = append(got, f.Offsets)
		}
		if len(got) != 3 || h.sink.files[0].Key != cut.Key || !slices.Equal(got[0], []int64{10, 11, 12, 13}) ||
			!slices.Equal(got[1], []int64{14}) || !slices.Equal(got[2], []int64{15}) {
			t.Errorf("files hold %v, want the recorded cut [10 11 12 13], then the replay's own", got)
		}
	})
	t.Run("input ends inside the cut", func(t *testing.T) {
		h := newHarness(t, Config{}, TableConfig{})
		h.b.Restore("orders", 0, nil, []state.Cut{cut})
		h.add(row(10), v1, at(10), 1)
		h.add(row(11), v1, at(11), 1)
		must(t, h.b.FlushAll(context.Background()))
		must(t, h.b.FlushPartition(context.Background(), "orders", 0))
		if len(h.sink.files) != 0 || h.durable() != 10 {
			t.Errorf("files %+v, durable %d: a cut not complete must stay unwritten and undurable", h.sink.files, h.durable())
		}
	})
	t.Run("cut not met", func(t *testing.T) {
		// The recorded last offset holds another table's row now: the
		// file is written when that offset passes, with what it has.
		h := newHarness(t, Config{}, TableConfig{})
		h.b.Restore("orders", 0, nil, []state.Cut{cut})
		for off := int64(10); off < 13; off++ {
			h.add(row(off), v1, at(off), 1)
		}
		h.add(insert(t, "db.u", `{"id":13}`), other, at(13), 1)
		if len(h.sink.files) != 1 || !slices.Equal(h.sink.files[0].Offsets, []int64{10, 11, 12}) {
			t.Errorf("files %+v, want the cut's file written at offset 13 with 10-12", h.sink.files)
		}
	})
}

// TestBatcherFenced: once another instance took a partition over, its open
// files are dropped unwritten and its messages ignored until a Restore;
// the run goes on.
func TestBatcherFenced(t *testing.T) {
	h := newHarness(t, Config{}, TableConfig{MaxRows: 2})
	j := &journal{sink: h.sink, fenced: true}
	h.b.SetJournal(j)
	v1 := table("db.t", 1, schema.LayoutImages, cols("v"))
	u := table("db.u", 1, schema.LayoutImages, cols("v"))
	h.add(insert(t, "db.u", `{"id":0}`), u, at(0), 1)
	for off := int64(1); off < 6; off++ {
		h.add(insert(t, "db.t", fmt.Sprintf(`{"id":%d}`, off)), v1, at(off), 1)
	}
	must(t, h.b.FlushAll(context.Background()))
	if len(h.sink.files) != 0 || h.b.OpenFiles() != 0 {
		t.Errorf("a fenced partition wrote %d files and keeps %d open", len(h.sink.files), h.b.OpenFiles())
	}
	if _, ok := h.b.Durable("orders", 0); ok {
		t.Error("a fenced partition reports a durable offset")
	}
	j.fenced = false
	h.b.Restore("orders", 0, nil, nil)
	h.add(insert(t, "db.t", `{"id":6}`), v1, at(6), 1)
	must(t, h.b.FlushAll(context.Background()))
	if len(h.sink.files) != 1 || !slices.Equal(h.sink.files[0].Offsets, []int64{6}) {
		t.Errorf("after Restore: files %+v, want offset 6 landed", h.sink.files)
	}
}

// TestBatcherSpillsIdleFilesFirst lands a hot table between rows of many
// cold ones under a bound that holds a few buffers: the cold files give
// their builders back, the hot one keeps its own (it is also the largest,
// which used to go first) and every table still gets one file.
func TestBatcherSpillsIdleFilesFirst(t *testing.T) {
	h := newHarness(t, Config{}, TableConfig{})
	hot := table("db.hot", 1, schema.LayoutImages, textCols())
	var cold []*schema.Table
	for i := range 40 {
		cold = append(cold, table(fmt.Sprintf("db.cold%02d", i), 1, schema.LayoutImages, textCols()))
	}
	off := int64(0)
	add := func(tb *schema.Table) {
		h.add(insert(t, tb.Name, fmt.Sprintf(`{"id":%d,"s":"row %d"}`, off, off)), tb, at(off), 100)
		off++
	}
	h.b.freezeLimit = never // every file has builders
	add(hot)
	setBound(h.b, 8*h.b.held.Load()) // a few buffers' builders
	for range 5 {
		for _, c := range cold {
			add(c)
			add(hot)
		}
	}
	buf := allOpen(h.b)[bufKey{table: "db.hot", fp: hot.Fingerprint, dir: "db.hot/date=2024-01-31", source: "orders"}]
	if buf == nil {
		t.Fatalf("the hot table's file is not open: %v", h.keys())
	}
	if buf.builds > 2 {
		t.Errorf("the hot table built its builders %d times", buf.builds)
	}
	if h.b.held.Load() > h.b.cfg.MaxBufferedBytes {
		t.Errorf("holding %d over the bound %d", h.b.held.Load(), h.b.cfg.MaxBufferedBytes)
	}
	if err := h.b.FlushAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(h.sink.files) != 41 {
		t.Errorf("%d files for 41 tables", len(h.sink.files))
	}
}

// setBound changes the memory bound of b.
func setBound(b *Batcher, n int64) {
	b.cfg.MaxBufferedBytes = n
	b.bound.Store(n)
}

// allOpen returns the open buffers of every partition.
func allOpen(b *Batcher) map[bufKey]*buffer {
	out := map[bufKey]*buffer{}
	for _, p := range b.partitions() {
		p.mu.Lock()
		maps.Copy(out, p.open)
		p.mu.Unlock()
	}
	return out
}

// TestBatcherFailAfterPanic: a call that panics inside the batcher leaves
// no partition locked, and after Fail nothing more is written while Close
// still releases every buffer (the harness checks the allocator).
func TestBatcherFailAfterPanic(t *testing.T) {
	h := newHarness(t, Config{}, TableConfig{})
	v1 := table("db.t", 1, schema.LayoutImages, cols("v"))
	h.add(insert(t, "db.t", `{"id":0}`), v1, at(0), 1)
	panics := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s did not panic", name)
			}
		}()
		f()
	}
	ctx := context.Background()
	panics("Add without a table", func() { _ = h.b.Add(ctx, insert(t, "db.t", `{"id":1}`), nil, at(1), 1) })
	panics("AddRun without a table", func() {
		_ = h.b.AddRun(ctx, []Item{{C: insert(t, "db.t", `{"id":1}`), At: at(1), Size: 1}}, nil)
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.b.Durable("orders", 0)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the partition is still locked after a panic")
	}
	failed := errors.New("batch stage failed")
	h.b.Fail(failed)
	if err := h.b.Add(ctx, insert(t, "db.t", `{"id":2}`), v1, at(2), 1); !errors.Is(err, failed) {
		t.Errorf("Add after Fail: %v, want %v", err, failed)
	}
	if err := h.b.FlushAll(ctx); !errors.Is(err, failed) {
		t.Errorf("FlushAll after Fail: %v, want %v", err, failed)
	}
	if len(h.sink.files) != 0 {
		t.Errorf("%d files written after Fail", len(h.sink.files))
	}
}

// TestBatcherCreatesJournaledFilesOnce: a journaled file is created once.
// Found written, by the instance that recorded the same cut and lost the
// partition during its upload, it counts as written; found holding other
// rows, it is left as it is and the run stops, saying why.
func TestBatcherCreatesJournaledFilesOnce(t *testing.T) {
	v1 := table("db.t", 1, schema.LayoutImages, cols("v"))
	dir := "db.t/date=2024-01-31"
	cut := state.Cut{Key: key(dir, 10), Table: "db.t", Fingerprint: v1.Fingerprint, First: 10, Last: 13, Rows: 4}
	row := func(off int64) *change.Change { return insert(t, "db.t", fmt.Sprintf(`{"id":%d}`, off)) }
	exists := fmt.Errorf("test: %w", sinks.ErrExists)

	h := newHarness(t, Config{}, TableConfig{})
	j := &journal{sink: h.sink}
	h.b.SetJournal(j)
	var once []bool
	h.sink.inspect = func(f *sinks.File) { once = append(once, f.Once) }
	h.b.Restore("orders", 0, nil, []state.Cut{cut})
	for off := int64(10); off < 13; off++ {
		h.add(row(off), v1, at(off), 1)
	}
	h.sink.fail = exists // the previous owner's upload completed meanwhile
	h.add(row(13), v1, at(13), 1)
	must(t, h.b.FlushAll(context.Background()))
	if want := []string{"intend 10-13 rows 4 (files 0)", "done 10-13 durable 14 (files 0)"}; !slices.Equal(j.calls, want) {
		t.Errorf("journal calls %q, want %q: the repeated cut found written counts as written", j.calls, want)
	}

	h.add(row(14), v1, at(14), 1)
	must(t, h.b.FlushAll(context.Background()))
	if !slices.Equal(once, []bool{true}) {
		t.Errorf("create-once flags of the files written: %v, want the journaled file's true", once)
	}
	h.add(row(15), v1, at(15), 1)
	h.sink.fail = exists
	err := h.b.FlushAll(context.Background())
	if err == nil || !errors.Is(err, sinks.ErrExists) || !strings.Contains(err.Error(), "another instance, which lost the partition, wrote other rows") {
		t.Fatalf("a file found holding other rows: %v, want the run to stop saying why", err)
	}
}

// TestBatcherTakesKeysOfCutsNotRepeated: a recorded cut the replay does
// not repeat has its name taken by an empty file, created once, before its
// rows land in another file: the late upload of the instance that recorded
// it then fails. A file found there is that upload's, and its rows are not
// landed again. Where the replay's own file takes the name, no empty file
// is written.
func TestBatcherTakesKeysOfCutsNotRepeated(t *testing.T) {
	v1 := table("db.t", 1, schema.LayoutImages, cols("v"))
	dir := "db.t/date=2024-01-31"
	cut := state.Cut{Key: key(dir, 10), Table: "db.t", Fingerprint: v1.Fingerprint, First: 10, Last: 13, Rows: 4}
	row := func(off int64) *change.Change { return insert(t, "db.t", fmt.Sprintf(`{"id":%d}`, off)) }
	offsets := func(h *harness) (out []string) {
		for _, f := range h.sink.files {
			out = append(out, fmt.Sprintf("%s %v", path.Base(f.Key), f.Offsets))
		}
		return out
	}

	t.Run("name taken", func(t *testing.T) {
		// The replay opens its file at 9, where the previous owner's began
		// at 10 (its decoding state differed): row 10 joins the open file.
		h := newHarness(t, Config{}, TableConfig{})
		var once []bool
		h.sink.inspect = func(f *sinks.File) { once = append(once, f.Once) }
		h.b.Restore("orders", 0, nil, []state.Cut{cut})
		for off := int64(9); off < 16; off++ {
			h.add(row(off), v1, at(off), 1)
		}
		must(t, h.b.FlushAll(context.Background()))
		want := []string{path.Base(cut.Key) + " []", path.Base(key(dir, 9)) + " [9 10 11 12 13 14 15]"}
		if got := offsets(h); !slices.Equal(got, want) || len(once) == 0 || !once[0] {
			t.Errorf("files %q (create-once %v), want %q: an empty file created once under the cut's name first", got, once, want)
		}
	})
	t.Run("written meanwhile", func(t *testing.T) {
		var asked []string
		h := newHarness(t, Config{Landed: func(_ context.Context, k string) ([]int64, error) {
			asked = append(asked, k)
			return []int64{10, 11, 12, 13}, nil
		}}, TableConfig{})
		h.b.Restore("orders", 0, nil, []state.Cut{cut})
		h.sink.fail = fmt.Errorf("test: %w", sinks.ErrExists) // the late upload won
		for off := int64(9); off < 16; off++ {
			h.add(row(off), v1, at(off), 1)
		}
		must(t, h.b.FlushAll(context.Background()))
		want := []string{path.Base(key(dir, 9)) + " [9 14 15]"}
		if got := offsets(h); !slices.Equal(got, want) || !slices.Equal(asked, []string{cut.Key}) {
			t.Errorf("files %q (offsets read of %q), want %q: the late upload's rows are not landed again", got, asked, want)
		}
	})
	t.Run("first message no row now", func(t *testing.T) {
		h := newHarness(t, Config{}, TableConfig{})
		h.b.Restore("orders", 0, nil, []state.Cut{cut})
		must(t, h.b.Skip(context.Background(), at(10)))
		for off := int64(11); off < 14; off++ {
			h.add(row(off), v1, at(off), 1)
		}
		must(t, h.b.FlushAll(context.Background()))
		want := []string{path.Base(cut.Key) + " []", path.Base(key(dir, 11)) + " [11 12 13]"}
		if got := offsets(h); !slices.Equal(got, want) {
			t.Errorf("files %q, want %q", got, want)
		}
	})
	t.Run("same name, another version", func(t *testing.T) {
		h := newHarness(t, Config{}, TableConfig{})
		other := cut
		other.Fingerprint++
		h.b.Restore("orders", 0, nil, []state.Cut{other})
		for off := int64(10); off < 16; off++ {
			h.add(row(off), v1, at(off), 1)
		}
		must(t, h.b.FlushAll(context.Background()))
		want := []string{path.Base(cut.Key) + " [10 11 12 13 14 15]"}
		if got := offsets(h); !slices.Equal(got, want) {
			t.Errorf("files %q, want %q: the replay's file takes the name", got, want)
		}
	})
}

// TestBatcherFencedDuringRetries: a journaled file's write carries the
// journal's Check; a write that ends because the check found the partition
// claimed by another instance fences the partition, and the run goes on.
func TestBatcherFencedDuringRetries(t *testing.T) {
	v1 := table("db.t", 1, schema.LayoutImages, cols("v"))
	h := newHarness(t, Config{}, TableConfig{})
	j := &journal{sink: h.sink}
	h.b.SetJournal(j)
	var checked bool
	h.sink.inspect = func(f *sinks.File) { checked = f.Check != nil }
	h.add(insert(t, "db.t", `{"id":1}`), v1, at(1), 1)
	must(t, h.b.FlushAll(context.Background()))
	if !checked {
		t.Error("a journaled file's write carries no Check")
	}
	h.add(insert(t, "db.t", `{"id":2}`), v1, at(2), 1)
	h.sink.fail = fmt.Errorf("a file: not written after all: %w", state.ErrFenced)
	must(t, h.b.FlushAll(context.Background()))
	if h.b.OpenFiles() != 0 {
		t.Errorf("%d files open in a fenced partition", h.b.OpenFiles())
	}
	if _, ok := h.b.Durable("orders", 0); ok {
		t.Error("a fenced partition reports a durable offset")
	}
}

// TestResumeIsDurable: a claimed partition whose state says it resumes at
// an offset counts that offset durable before any message comes, so that
// the commit of a file handed over again at the claim records it.
func TestResumeIsDurable(t *testing.T) {
	h := newHarness(t, Config{}, TableConfig{})
	if _, ok := h.b.TableDurable("orders", 0, "t", nil); ok {
		t.Fatal("a partition nothing was seen of is durable")
	}
	h.b.Resume("orders", 0, 100)
	c := &Committing{Key: "t/orders-p0-o00000000000000000120.parquet", Table: "t", Source: "orders", First: 120}
	h.b.HoldCommitting(c)
	if d, ok := h.b.TableDurable("orders", 0, "t", map[any]bool{c: true}); !ok || d != 100 {
		t.Errorf("durable at %d (%v) after resuming at 100, want 100", d, ok)
	}
	if d, ok := h.b.Durable("orders", 0); !ok || d != 100 {
		t.Errorf("the partition is durable at %d (%v), want 100", d, ok)
	}
}
