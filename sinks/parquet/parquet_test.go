package parquet_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	pqschema "github.com/apache/arrow-go/v18/parquet/schema"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/cdclake/cdclake/sinks/parquet"
	"github.com/valyala/fastjson"
)

// column is a landed column and its values, one JSON text per row.
type column struct {
	name string
	typ  schema.Type
	rows []string
}

func allTypes() []column {
	i32 := schema.Type{Kind: schema.Int32}
	i64 := schema.Type{Kind: schema.Int64}
	str := schema.Type{Kind: schema.String}
	return []column{
		{"b", schema.Type{Kind: schema.Bool}, []string{`true`, `false`, `null`}},
		{"i8", schema.Type{Kind: schema.Int8}, []string{`-128`, `127`, `null`}},
		{"i16", schema.Type{Kind: schema.Int16}, []string{`-32768`, `32767`, `null`}},
		{"i32", i32, []string{`-2147483648`, `2147483647`, `null`}},
		{"i64", i64, []string{`-9223372036854775808`, `9223372036854775807`, `null`}},
		{"f32", schema.Type{Kind: schema.Float32}, []string{`3.14`, `-0.5`, `null`}},
		{"f64", schema.Type{Kind: schema.Float64}, []string{`3.141592653589793`, `1e308`, `null`}},
		{"s", str, []string{`"héllo"`, `""`, `null`}},
		{"bin", schema.Type{Kind: schema.Binary}, []string{`"AAECAw=="`, `""`, `null`}},
		{"dec", schema.Type{Kind: schema.Decimal, Precision: 38, Scale: 4}, []string{`18043674494432.4369`, `-99999999999999999999999999999999.9999`, `null`}},
		{"dec9", schema.Type{Kind: schema.Decimal, Precision: 9, Scale: 2}, []string{`1234567.89`, `-0.01`, `null`}},
		{"dect", schema.Type{Kind: schema.DecimalText}, []string{`125.50`, `123456789012345678901234567890123456789012.5`, `null`}},
		{"d", schema.Type{Kind: schema.Date}, []string{`"2024-01-31"`, `"1969-12-31"`, `null`}},
		{"tms", schema.Type{Kind: schema.Time, Unit: schema.Millis}, []string{`"12:34:56.123"`, `"00:00:00"`, `null`}},
		{"tus", schema.Type{Kind: schema.Time, Unit: schema.Micros}, []string{`"12:34:56.123456"`, `"23:59:59.999999"`, `null`}},
		{"tns", schema.Type{Kind: schema.Time, Unit: schema.Nanos}, []string{`"12:34:56.123456789"`, `"00:00:00.000000001"`, `null`}},
		{"tsu", schema.Type{Kind: schema.Timestamp, Unit: schema.Micros, UTC: true}, []string{`"2024-01-31T12:34:56.123456+02:00"`, `"1900-01-01T00:00:00Z"`, `null`}},
		{"tsl", schema.Type{Kind: schema.Timestamp, Unit: schema.Micros}, []string{`"2015-11-05 18:45:36.000001"`, `"1969-12-31T23:59:59.999999"`, `null`}},
		{"tsm", schema.Type{Kind: schema.Timestamp, Unit: schema.Millis}, []string{`"2015-11-05 18:45:36.123"`, `"9999-12-31T23:59:59.999"`, `null`}},
		{"tsn", schema.Type{Kind: schema.Timestamp, Unit: schema.Nanos, UTC: true}, []string{`"2024-01-31T12:34:56.123456Z"`, `"1970-01-01T00:00:00.000001Z"`, `null`}},
		{"j", schema.Type{Kind: schema.JSON}, []string{`{"a":[1,{"b":null}]}`, `"[1,2]"`, `null`}},
		{"st", schema.Type{Kind: schema.Struct, Fields: []schema.Column{{Name: "x", Type: i32}, {Name: "y", Type: str}}},
			[]string{`{"x":1,"y":"a"}`, `{"x":null}`, `null`}},
		{"l", schema.Type{Kind: schema.List, Elem: &i64}, []string{`[1,2,null]`, `[]`, `null`}},
		{"m", schema.Type{Kind: schema.Map, Key: &str, Value: &i64}, []string{`{"k":1,"z":null}`, `[]`, `null`}},
		{"n", schema.Type{Kind: schema.Null}, []string{`null`, `null`, `null`}},
	}
}

// record builds a record of cols through the schema converters.
func record(t *testing.T, mem memory.Allocator, cols []column) arrow.RecordBatch {
	t.Helper()
	sc := make([]schema.Column, len(cols))
	for i, c := range cols {
		sc[i] = schema.Column{Name: c.name, Type: c.typ, Nullable: true}
	}
	rb := array.NewRecordBuilder(mem, arrow.NewSchema(schema.Fields(sc), nil))
	defer rb.Release()
	conv := schema.NewConverters(mem)
	defer conv.Release()
	for i, c := range cols {
		app := conv.Compile(c.name, c.typ, rb.Field(i))
		for _, r := range c.rows {
			if err := app(fastjson.MustParse(r)); err != nil {
				t.Fatalf("column %s: %v", c.name, err)
			}
		}
	}
	return rb.NewRecordBatch()
}

// readBack reads a Parquet file into an Arrow table.
func readBack(t *testing.T, mem memory.Allocator, data []byte) (*file.Reader, arrow.Table) {
	t.Helper()
	rdr, err := file.NewParquetReader(bytes.NewReader(data), file.WithReadProps(pq.NewReaderProperties(mem)))
	if err != nil {
		t.Fatalf("reading back: %v", err)
	}
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, mem)
	if err != nil {
		t.Fatalf("pqarrow reader: %v", err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatalf("ReadTable: %v", err)
	}
	return rdr, tbl
}

func TestWriteAllTypesRoundTrip(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cols := allTypes()
	rec := record(t, mem, cols)
	defer rec.Release()

	var buf bytes.Buffer
	if err := parquet.Write(&buf, rec, [][2]int{{0, int(rec.NumRows())}}, testOptions, mem); err != nil {
		t.Fatalf("Write: %v", err)
	}
	rdr, tbl := readBack(t, mem, buf.Bytes())
	defer rdr.Close()
	defer tbl.Release()

	if tbl.NumRows() != rec.NumRows() || tbl.NumCols() != rec.NumCols() {
		t.Fatalf("read %d rows × %d columns, wrote %d × %d", tbl.NumRows(), tbl.NumCols(), rec.NumRows(), rec.NumCols())
	}
	for i, c := range cols {
		got := tbl.Column(i)
		if got.Len() != int(rec.NumRows()) || len(got.Data().Chunks()) != 1 {
			t.Errorf("%s: %d rows in %d chunks", c.name, got.Len(), len(got.Data().Chunks()))
			continue
		}
		want := rec.Column(i)
		if c.typ.Kind == schema.JSON {
			// arrow-go reads the JSON logical type back as binary and does
			// not restore the arrow.json extension from the stored Arrow
			// schema (pqarrow applyOriginalStorageMetadata ignores string
			// storage), so compare the bytes.
			jsonEqual(t, c.name, got.Data().Chunk(0), want)
			continue
		}
		if c.typ.Kind == schema.Timestamp && c.typ.Unit != schema.Micros {
			// Written and read back as microseconds.
			tsEqual(t, c.name, got.Data().Chunk(0), want)
			continue
		}
		if !arrow.TypeEqual(got.DataType(), want.DataType()) {
			t.Errorf("%s: read back as %s, wrote %s", c.name, got.DataType(), want.DataType())
			continue
		}
		if !array.Equal(got.Data().Chunk(0), want) {
			t.Errorf("%s: read back %v, wrote %v", c.name, got.Data().Chunk(0), want)
		}
	}

	// The Parquet schema itself, as non-Arrow readers see it.
	ps := rdr.MetaData().Schema
	leaf := func(path string) *pqschema.Column {
		i := ps.ColumnIndexByName(path)
		if i < 0 {
			t.Fatalf("no Parquet column %s", path)
		}
		return ps.Column(i)
	}
	if lt := leaf("j").LogicalType(); !lt.Equals(pqschema.JSONLogicalType{}) {
		t.Errorf("JSON column has logical type %s, want JSON", lt)
	}
	for _, tt := range []struct {
		path string
		utc  bool
		unit pqschema.TimeUnitType
	}{
		{"tsu", true, pqschema.TimeUnitMicros},
		{"tsl", false, pqschema.TimeUnitMicros},
		{"tsm", false, pqschema.TimeUnitMicros},
		{"tsn", true, pqschema.TimeUnitMicros},
	} {
		lt, ok := leaf(tt.path).LogicalType().(pqschema.TimestampLogicalType)
		if !ok {
			t.Errorf("%s: logical type %s, want TIMESTAMP", tt.path, leaf(tt.path).LogicalType())
			continue
		}
		if lt.IsAdjustedToUTC() != tt.utc || lt.TimeUnit() != tt.unit {
			t.Errorf("%s: %s, want isAdjustedToUTC=%v unit %v", tt.path, lt, tt.utc, tt.unit)
		}
		if leaf(tt.path).PhysicalType() != pq.Types.Int64 {
			t.Errorf("%s: physical type %s, want INT64 (no INT96)", tt.path, leaf(tt.path).PhysicalType())
		}
	}
	if lt, ok := leaf("d").LogicalType().(pqschema.DateLogicalType); !ok {
		t.Errorf("date: logical type %v", lt)
	}
	if lt, ok := leaf("dec").LogicalType().(pqschema.DecimalLogicalType); !ok || lt.Precision() != 38 || lt.Scale() != 4 {
		t.Errorf("decimal: logical type %v", leaf("dec").LogicalType())
	}
	if lt, ok := leaf("s").LogicalType().(pqschema.StringLogicalType); !ok {
		t.Errorf("string: logical type %v", lt)
	}
	if lt, ok := leaf("dect").LogicalType().(pqschema.StringLogicalType); !ok {
		t.Errorf("decimal_text: logical type %v", lt)
	}
	// Spot-check values through the reader, not only array.Equal.
	tsu := tbl.Column(indexOf(cols, "tsu")).Data().Chunk(0).(*array.Timestamp)
	if got := tsu.Value(0).ToTime(arrow.Microsecond).UTC().Format("2006-01-02T15:04:05.000000Z"); got != "2024-01-31T10:34:56.123456Z" {
		t.Errorf("tsu[0] = %s", got)
	}
	dec := tbl.Column(indexOf(cols, "dec")).Data().Chunk(0).(*array.Decimal128)
	if got := dec.Value(0).ToString(4); got != "18043674494432.4369" {
		t.Errorf("dec[0] = %s", got)
	}
	tsn := tbl.Column(indexOf(cols, "tsn")).Data().Chunk(0).(*array.Timestamp)
	if tsn.Value(1) != 1 {
		t.Errorf("tsn[1] = %d µs, want 1", tsn.Value(1))
	}
}

// tsEqual compares a timestamp column read back in microseconds with the
// one written in another unit: same instants, same UTC adjustment.
func tsEqual(t *testing.T, name string, got, want arrow.Array) {
	t.Helper()
	g, ok := got.(*array.Timestamp)
	if !ok {
		t.Errorf("%s: read back as %s", name, got.DataType())
		return
	}
	w := want.(*array.Timestamp)
	gt, wt := g.DataType().(*arrow.TimestampType), w.DataType().(*arrow.TimestampType)
	if gt.Unit != arrow.Microsecond || (gt.TimeZone == "") != (wt.TimeZone == "") {
		t.Errorf("%s: read back as %s, wrote %s", name, gt, wt)
		return
	}
	for i := range w.Len() {
		if g.IsNull(i) != w.IsNull(i) {
			t.Errorf("%s[%d]: null %v, wrote null %v", name, i, g.IsNull(i), w.IsNull(i))
			continue
		}
		if !w.IsNull(i) && !g.Value(i).ToTime(arrow.Microsecond).Equal(w.Value(i).ToTime(wt.Unit)) {
			t.Errorf("%s[%d]: read back %v, wrote %v", name, i, g.Value(i).ToTime(arrow.Microsecond), w.Value(i).ToTime(wt.Unit))
		}
	}
}

// jsonEqual compares a JSON column read back (binary, or the extension)
// with the one written.
func jsonEqual(t *testing.T, name string, got, want arrow.Array) {
	t.Helper()
	w := want.(*extensions.JSONArray).Storage().(*array.String)
	var value func(i int) string
	switch g := got.(type) {
	case *array.Binary:
		value = func(i int) string { return string(g.Value(i)) }
	case *extensions.JSONArray:
		value = func(i int) string { return g.Storage().(*array.String).Value(i) }
	default:
		t.Errorf("%s: read back as %s", name, got.DataType())
		return
	}
	for i := range w.Len() {
		if got.IsNull(i) != w.IsNull(i) || (!w.IsNull(i) && value(i) != w.Value(i)) {
			t.Errorf("%s[%d]: read back %q (null %v), wrote %q (null %v)", name, i, value(i), got.IsNull(i), w.Value(i), w.IsNull(i))
		}
	}
}

func indexOf(cols []column, name string) int {
	for i, c := range cols {
		if c.name == name {
			return i
		}
	}
	panic(name)
}

// testOptions are the settings of tests that do not test settings.
var testOptions = parquet.Options{Compression: "zstd", RowGroupRows: 128 * 1024}

func TestCodecs(t *testing.T) {
	tests := []struct {
		name string
		want compress.Compression
	}{
		{"zstd", compress.Codecs.Zstd},
		{"snappy", compress.Codecs.Snappy},
		{"gzip", compress.Codecs.Gzip},
		{"lz4", compress.Codecs.Lz4Raw},
		{"none", compress.Codecs.Uncompressed},
	}
	if len(tests) != len(parquet.Compressions) {
		t.Errorf("%d codecs tested, %d listed", len(tests), len(parquet.Compressions))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			rows := make([]string, 100)
			for i := range rows {
				rows[i] = `"same text repeated to compress well"`
			}
			rec := record(t, mem, []column{{"s", schema.Type{Kind: schema.String}, rows}})
			defer rec.Release()
			var buf bytes.Buffer
			if err := parquet.Write(&buf, rec, [][2]int{{0, 100}}, parquet.Options{Compression: tt.name, RowGroupRows: 1000}, mem); err != nil {
				t.Fatalf("Write: %v", err)
			}
			rdr, tbl := readBack(t, mem, buf.Bytes())
			defer rdr.Close()
			defer tbl.Release()
			if tbl.NumRows() != 100 {
				t.Errorf("read %d rows", tbl.NumRows())
			}
			cc, err := rdr.MetaData().RowGroup(0).ColumnChunk(0)
			if err != nil {
				t.Fatal(err)
			}
			if cc.Compression() != tt.want {
				t.Errorf("codec %s, want %s", cc.Compression(), tt.want)
			}
			if got, err := parquet.Codec(tt.name); err != nil || got != tt.want {
				t.Errorf("Codec(%q) = %s, %v", tt.name, got, err)
			}
		})
	}
	for _, name := range []string{"", "uncompressed", "brotli", "ZSTD ", "lzo", "snapy"} {
		if _, err := parquet.Codec(name); err == nil {
			t.Errorf("Codec(%q): want an error", name)
		}
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		rec := record(t, mem, []column{{"i", schema.Type{Kind: schema.Int64}, []string{`1`}}})
		var buf bytes.Buffer
		err := parquet.Write(&buf, rec, [][2]int{{0, 1}}, parquet.Options{Compression: name, RowGroupRows: 1000}, mem)
		rec.Release()
		mem.AssertSize(t, 0)
		if err == nil || !strings.Contains(err.Error(), "compression") {
			t.Errorf("Write with codec %q: error %v, want an unknown compression error", name, err)
		}
		if buf.Len() != 0 {
			t.Errorf("Write with codec %q wrote %d bytes", name, buf.Len())
		}
	}
}

func TestRangesAndRowGroups(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var rows []string
	for i := range 10 {
		rows = append(rows, string(rune('0'+i)))
	}
	rec := record(t, mem, []column{{"i", schema.Type{Kind: schema.Int64}, rows}})
	defer rec.Release()

	tests := []struct {
		name    string
		ranges  [][2]int
		rg      int
		want    []int64
		wantRGs int
	}{
		{"all, one row group", [][2]int{{0, 10}}, 1000, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 1},
		// Row groups fill across ranges: rejected rows leave no trace.
		{"rejected rows skipped", [][2]int{{0, 3}, {5, 10}}, 1000, []int64{0, 1, 2, 5, 6, 7, 8, 9}, 1},
		{"row group length", [][2]int{{0, 3}, {5, 10}}, 2, []int64{0, 1, 2, 5, 6, 7, 8, 9}, 4},
		{"single rows", [][2]int{{1, 2}, {4, 5}, {9, 10}}, 1000, []int64{1, 4, 9}, 1},
		{"nothing", nil, 1000, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := parquet.Write(&buf, rec, tt.ranges, parquet.Options{Compression: "zstd", RowGroupRows: tt.rg}, mem); err != nil {
				t.Fatalf("Write: %v", err)
			}
			rdr, tbl := readBack(t, mem, buf.Bytes())
			defer rdr.Close()
			defer tbl.Release()
			var got []int64
			for _, ch := range tbl.Column(0).Data().Chunks() {
				got = append(got, ch.(*array.Int64).Int64Values()...)
			}
			if !equalInts(got, tt.want) {
				t.Errorf("rows %v, want %v", got, tt.want)
			}
			if n := rdr.NumRowGroups(); n != tt.wantRGs {
				t.Errorf("%d row groups, want %d", n, tt.wantRGs)
			}
			for i := range rdr.NumRowGroups() {
				if n := rdr.MetaData().RowGroup(i).NumRows(); tt.rg > 0 && n > int64(tt.rg) {
					t.Errorf("row group %d holds %d rows, max %d", i, n, tt.rg)
				}
			}
			if v := rdr.MetaData().KeyValueMetadata().FindValue("ARROW:schema"); v == nil {
				t.Errorf("Arrow schema not stored")
			}
			if cb := rdr.MetaData().GetCreatedBy(); !strings.HasPrefix(cb, "cdclake") {
				t.Errorf("created_by %q", cb)
			}
		})
	}
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// closeRecorder is a storage writer: Close would commit the object.
type closeRecorder struct {
	bytes.Buffer
	closed  bool
	failAt  int // fail writes once this many bytes were written (0: never)
	written int
}

func (c *closeRecorder) Write(p []byte) (int, error) {
	if c.failAt > 0 && c.written+len(p) > c.failAt {
		return 0, errors.New("disk full")
	}
	c.written += len(p)
	return c.Buffer.Write(p)
}

func (c *closeRecorder) Close() error {
	c.closed = true
	return nil
}

var _ io.WriteCloser = (*closeRecorder)(nil)

// TestWriteDoesNotClose: only the caller may close (commit) the storage
// writer, after a nil error; the Parquet writer must not, not even on
// failure.
func TestWriteDoesNotClose(t *testing.T) {
	for _, failAt := range []int{0, 1, 4, 64} {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		rows := make([]string, 1000)
		for i := range rows {
			rows[i] = `"` + strings.Repeat("x", i%50) + `"`
		}
		rec := record(t, mem, []column{{"s", schema.Type{Kind: schema.String}, rows}})
		w := &closeRecorder{failAt: failAt}
		err := parquet.Write(w, rec, [][2]int{{0, 1000}}, parquet.Options{Compression: "none", RowGroupRows: 1000}, mem)
		rec.Release()
		if failAt == 0 {
			// After a failed flush pqarrow's FileWriter.Close returns early
			// and leaves column buffers to the garbage collector
			// (apache/arrow-go#794), so only the success path is checked.
			mem.AssertSize(t, 0)
		}
		if failAt == 0 && err != nil {
			t.Errorf("Write: %v", err)
		}
		if failAt > 0 && err == nil {
			t.Errorf("failing at byte %d: Write returned nil", failAt)
		}
		if w.closed {
			t.Errorf("failing at byte %d (0: never): Write closed the writer (err %v)", failAt, err)
		}
	}
}

// TestCompressionLevels checks that a level reaches the codec (zstd 19
// compresses varied text smaller than the default, level 1) and that levels
// a codec does not have are refused.
func TestCompressionLevels(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rows := make([]string, 20000)
	for i := range rows {
		rows[i] = fmt.Sprintf(`"row %d of a text that repeats with variations %d"`, i*7919%10007, i%97)
	}
	rec := record(t, mem, []column{{"s", schema.Type{Kind: schema.String}, rows}})
	defer rec.Release()
	size := func(codec string, level int) int {
		var buf bytes.Buffer
		if err := parquet.Write(&buf, rec, [][2]int{{0, len(rows)}}, parquet.Options{Compression: codec, Level: level, RowGroupRows: 100000}, mem); err != nil {
			t.Fatalf("%s level %d: %v", codec, level, err)
		}
		rdr, tbl := readBack(t, mem, buf.Bytes())
		defer rdr.Close()
		defer tbl.Release()
		if tbl.NumRows() != int64(len(rows)) {
			t.Errorf("%s level %d: read %d rows", codec, level, tbl.NumRows())
		}
		return buf.Len()
	}
	def, one, best := size("zstd", 0), size("zstd", 1), size("zstd", 19)
	if def != one {
		t.Errorf("zstd default %d bytes, level 1 %d: the default is level 1", def, one)
	}
	if best >= one {
		t.Errorf("zstd level 19 wrote %d bytes, level 1 %d", best, one)
	}
	if g1, g9 := size("gzip", 1), size("gzip", 9); g9 >= g1 {
		t.Errorf("gzip level 9 wrote %d bytes, level 1 %d", g9, g1)
	}
	for _, c := range []struct {
		codec string
		level int
	}{{"zstd", 23}, {"zstd", -1}, {"gzip", 10}, {"snappy", 1}, {"lz4", 3}, {"none", 1}} {
		if err := parquet.CheckLevel(c.codec, c.level); err == nil {
			t.Errorf("CheckLevel(%s, %d): want an error", c.codec, c.level)
		}
		var buf bytes.Buffer
		if err := parquet.Write(&buf, rec, [][2]int{{0, 1}}, parquet.Options{Compression: c.codec, Level: c.level, RowGroupRows: 10}, mem); err == nil {
			t.Errorf("Write with %s level %d: want an error", c.codec, c.level)
		}
	}
}
