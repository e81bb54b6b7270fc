// Package writers_test compares two Go Parquet writers on the file
// cdclake lands, the experiment behind the choice of writer
// (docs/adr/0001-own-parquet-writer.md). It is a module of its own, so
// that parquet-go is no dependency of cdclake. Every writer lands the same
// batch and its output is checked (TestCompareWriters) before it is timed.
//
// The batch: 100,000 rows of parquettest.Images, the images layout of a
// Debezium-like PostgreSQL table: the _cdc_ metadata columns, a ~250-byte
// _debezium_source JSON extra, before/after structs of 14 columns (int64,
// string, DECIMAL(12,2), decimal text, local and UTC timestamps, date, time,
// bool, JSON, binary, double, int16, mostly-NULL string; before is NULL for
// the 40% inserts, after for the 10% deletes) and the two absent lists,
// mostly empty.
//
// BenchmarkWriteArrowPqarrow (arrow-go pqarrow, from the Arrow record):
//   - parquet.Write: the package's settings through pqarrow (zstd, plain
//     values, 1 MiB pages, data page v1, statistics, 128Ki-row row
//     groups, the ARROW:schema footer key), as sinks/parquet wrote every
//     file before it had its own writer (its writer.go and
//     BenchmarkWriteFile).
//   - delta-encodings: the same with parquet-go's default encodings (no
//     dictionary, DELTA_LENGTH_BYTE_ARRAY for byte arrays, data page v2), to
//     tell the encodings' share of a size difference from the library's.
//
// BenchmarkWriteParquetGo (github.com/parquet-go/parquet-go): a Parquet
// schema built from the Arrow schema (in column order: parquet.Group sorts
// fields by name) that TestCompareWriters asserts is the one pqarrow writes,
// logical types and repetition included, and pqarrow's settings where
// parquet-go has them (zstd default level, dictionary for every non-boolean
// column with DictionaryMaxBytes 1 MiB, 1 MiB page buffers, data page v1,
// statistics, 128Ki-row row groups, the ARROW:schema key):
//   - rows: converts the Arrow record to parquet.Row values, 1024 rows at a
//     time, and calls WriteRows.
//   - columns: converts column by column and writes each leaf through the
//     writer's ColumnWriters (WriteRowValues), 4096 rows at a time.
//   - prebuilt: WriteRows and Close only, on rows converted beforehand: the
//     writer's own cost, though holding all 100,000 rows (~4.5M values with
//     pointers) adds GC work that a streaming conversion does not have.
//   - columns-defaults, prebuilt-defaults: the same with parquet-go's
//     default encodings instead (see delta-encodings above).
//   - convert-only: the rows conversion without a writer.
//
// Each writer benchmark sets bytes to the output size, so MB/s is output
// megabytes per second, and reports the size as B/file and the process's
// CPU time per write as cpu-ns/op (Linux), steadier than ns/op when the
// machine is shared. TestCompareWriters
// reads every output back with pqarrow (every column equal to the record;
// arrow-go reads JSON as binary) and with parquet-go (row count, column
// order, a few values), and logs each column chunk's size and encodings.
// With CDCLAKE_COMPARE_DIR set it leaves the files there for other readers.
//
// Reproduce (note uptime before and after; six runs of one count each
// interleave the benchmarks, so a change of load spreads over all of them):
//
//	cd bench/writers && CDCLAKE_COMPARE=1 go test -run TestCompareWriters -v .
//	go test -c -o /tmp/pq.test . &&
//	for i in 1 2 3 4 5 6; do /tmp/pq.test -test.run '^$' -test.benchmem \
//		-test.bench 'BenchmarkWrite(ArrowPqarrow|ParquetGo)' -test.benchtime 10x; done | tee /tmp/bench.txt
//	benchstat /tmp/bench.txt

package writers_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	pqcompress "github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	pqschema "github.com/apache/arrow-go/v18/parquet/schema"
	"github.com/cdclake/cdclake/sinks/parquet"
	"github.com/cdclake/cdclake/sinks/parquet/parquettest"
	pgo "github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	pgozstd "github.com/parquet-go/parquet-go/compress/zstd"
	"github.com/parquet-go/parquet-go/encoding"
)

const (
	cmpRows         = 100_000
	cmpRowGroupRows = 128 * 1024 // parquet.go's default
	cmpRowChunk     = 1024       // rows converted per WriteRows call
	cmpColChunk     = 4096       // rows converted per WriteRowValues call
)

var (
	cmpOnce  sync.Once
	cmpBatch arrow.RecordBatch
)

// cmpRecord returns the shared benchmark batch. It is never released: the
// test binary's lifetime owns it.
func cmpRecord() arrow.RecordBatch {
	cmpOnce.Do(func() { cmpBatch = parquettest.Images(memory.NewGoAllocator(), cmpRows) })
	return cmpBatch
}

// pqarrowWrite is Benchmark A's unit of work: the production writer.
func pqarrowWrite(w io.Writer, rec arrow.RecordBatch, mem memory.Allocator) (err error) {
	return parquet.Write(w, rec, [][2]int{{0, int(rec.NumRows())}},
		parquet.Options{Compression: "zstd", RowGroupRows: cmpRowGroupRows, Pqarrow: true}, mem)
}

// pqarrowWriteDelta is pqarrow with parquet-go's default encodings instead
// of parquet.go's: no dictionary, DELTA_LENGTH_BYTE_ARRAY for byte arrays,
// PLAIN otherwise, data page v2. The rest is parquet.go's settings.
func pqarrowWriteDelta(w io.Writer, rec arrow.RecordBatch, mem memory.Allocator) error {
	props := []pq.WriterProperty{
		pq.WithAllocator(mem),
		pq.WithCompression(pqcompress.Codecs.Zstd),
		pq.WithMaxRowGroupLength(cmpRowGroupRows),
		pq.WithDictionaryDefault(false),
		pq.WithDataPageVersion(pq.DataPageV2),
		pq.WithStats(true),
		pq.WithCreatedBy("cdclake"),
	}
	var walk func(prefix string, f arrow.Field)
	walk = func(prefix string, f arrow.Field) {
		switch t := f.Type.(type) {
		case *arrow.StructType:
			for _, c := range t.Fields() {
				walk(prefix+f.Name+".", c)
			}
		case *arrow.ListType:
			walk(prefix+f.Name+".list.", t.ElemField())
		case *arrow.StringType, *arrow.BinaryType, *extensions.JSONType:
			props = append(props, pq.WithEncodingFor(prefix+f.Name, pq.Encodings.DeltaLengthByteArray))
		}
	}
	for _, f := range rec.Schema().Fields() {
		walk("", f)
	}
	fw, err := pqarrow.NewFileWriter(rec.Schema(), struct{ io.Writer }{w}, pq.NewWriterProperties(props...),
		pqarrow.NewArrowWriterProperties(pqarrow.WithAllocator(mem), pqarrow.WithStoreSchema(),
			pqarrow.WithCoerceTimestamps(arrow.Microsecond)))
	if err != nil {
		return err
	}
	if err := fw.Write(rec); err != nil {
		_ = fw.Close()
		return err
	}
	return fw.Close()
}

// ---------------------------------------------------------------------------
// parquet-go schema from the Arrow schema.

// orderedGroup is a parquet-go group node that keeps its fields in the given
// order: parquet.Group is a map and sorts its fields by name, which would
// move the _cdc_ columns behind "after" and reorder the image columns.
type orderedGroup []pgo.Field

type orderedField struct {
	pgo.Node
	name string
}

func (f orderedField) Name() string { return f.name }

// Value is used only by parquet-go's reflection paths, which this file does
// not take.
func (f orderedField) Value(base reflect.Value) reflect.Value {
	return base.MapIndex(reflect.ValueOf(f.name))
}

func (g orderedGroup) ID() int                     { return 0 }
func (g orderedGroup) String() string              { return fmt.Sprintf("group(%d fields)", len(g)) }
func (g orderedGroup) Type() pgo.Type              { return pgo.Group{}.Type() }
func (g orderedGroup) Optional() bool              { return false }
func (g orderedGroup) Repeated() bool              { return false }
func (g orderedGroup) Required() bool              { return true }
func (g orderedGroup) Leaf() bool                  { return false }
func (g orderedGroup) Fields() []pgo.Field         { return g }
func (g orderedGroup) Encoding() encoding.Encoding { return nil }
func (g orderedGroup) Compression() compress.Codec { return nil }
func (g orderedGroup) GoType() reflect.Type        { return reflect.TypeFor[map[string]any]() }
func (g orderedGroup) field(name string, n pgo.Node) orderedGroup {
	return append(g, orderedField{Node: n, name: name})
}

// pgoSchema maps an Arrow schema to the Parquet schema pqarrow writes for it.
func pgoSchema(sc *arrow.Schema) *pgo.Schema {
	var root orderedGroup
	for _, f := range sc.Fields() {
		root = root.field(f.Name, pgoNode(f))
	}
	return pgo.NewSchema("schema", root)
}

func pgoNode(f arrow.Field) pgo.Node {
	var n pgo.Node
	switch t := f.Type.(type) {
	case *extensions.JSONType:
		n = pgo.JSON()
	case *arrow.StringType:
		n = pgo.String()
	case *arrow.BinaryType:
		n = pgo.Leaf(pgo.ByteArrayType)
	case *arrow.BooleanType:
		n = pgo.Leaf(pgo.BooleanType)
	case *arrow.Int8Type:
		n = pgo.Int(8)
	case *arrow.Int16Type:
		n = pgo.Int(16)
	case *arrow.Int32Type:
		n = pgo.Int(32)
	case *arrow.Int64Type:
		n = pgo.Int(64)
	case *arrow.Float32Type:
		n = pgo.Leaf(pgo.FloatType)
	case *arrow.Float64Type:
		n = pgo.Leaf(pgo.DoubleType)
	case *arrow.Decimal128Type:
		n = pgo.Decimal(int(t.Scale), int(t.Precision), pgo.FixedLenByteArrayType(int(pqarrow.DecimalSize(t.Precision))))
	case *arrow.Date32Type:
		n = pgo.Date()
	case *arrow.Time64Type:
		mustMicros(t.Unit)
		n = pgo.TimeAdjusted(pgo.Microsecond, false) // as pqarrow writes it
	case *arrow.TimestampType:
		mustMicros(t.Unit)
		n = pgo.TimestampAdjusted(pgo.Microsecond, t.TimeZone != "")
	case *arrow.StructType:
		var g orderedGroup
		for _, c := range t.Fields() {
			g = g.field(c.Name, pgoNode(c))
		}
		n = g
	case *arrow.ListType:
		n = pgo.List(pgoNode(t.ElemField()))
	default:
		panic("compare_test: no parquet-go mapping for " + f.Type.String())
	}
	if f.Nullable {
		n = pgo.Optional(n)
	}
	return n
}

func mustMicros(u arrow.TimeUnit) {
	if u != arrow.Microsecond {
		panic("compare_test: only microsecond times are mapped")
	}
}

// ---------------------------------------------------------------------------
// Arrow record → parquet-go values.

type cmpLevel struct {
	arr      arrow.Array
	nullable bool
}

// cmpLeaf converts one leaf column of a record. path holds the arrays from
// the top-level column down to the leaf's value array, or to its list array
// for a LIST of a leaf (the only list shape this converter handles).
type cmpLeaf struct {
	col       int
	path      []cmpLevel
	list      *array.List
	elem      arrow.Array // list values
	elemNulls bool        // the list element is optional
	flbaWidth int         // decimals: FIXED_LEN_BYTE_ARRAY width
	scratch   []byte      // decimals: big-endian bytes the values point into
	val       func(l *cmpLeaf, a arrow.Array, i int) pgo.Value
}

// compileLeaves walks rec in schema order, so leaf i is parquet column i.
func compileLeaves(rec arrow.RecordBatch) []*cmpLeaf {
	var leaves []*cmpLeaf
	var walk func(a arrow.Array, f arrow.Field, path []cmpLevel)
	walk = func(a arrow.Array, f arrow.Field, path []cmpLevel) {
		path = append(path[:len(path):len(path)], cmpLevel{a, f.Nullable})
		switch t := f.Type.(type) {
		case *arrow.StructType:
			st := a.(*array.Struct)
			for i, c := range t.Fields() {
				walk(st.Field(i), c, path)
			}
		case *arrow.ListType:
			la := a.(*array.List)
			ef := t.ElemField()
			if _, nested := ef.Type.(arrow.NestedType); nested {
				panic("compare_test: only lists of leaves are converted")
			}
			l := leafOf(la.ListValues(), ef.Type)
			l.list, l.elem, l.elemNulls, l.path = la, l.elemArray(la.ListValues()), ef.Nullable, path
			l.col = len(leaves)
			leaves = append(leaves, l)
		default:
			l := leafOf(a, f.Type)
			l.path = path
			l.col = len(leaves)
			leaves = append(leaves, l)
		}
	}
	for i, f := range rec.Schema().Fields() {
		walk(rec.Column(i), f, nil)
	}
	// The value array of a plain leaf is its last path entry; swap it for
	// the view the value function reads.
	for _, l := range leaves {
		if l.list == nil {
			last := &l.path[len(l.path)-1]
			last.arr = l.elemArray(last.arr)
		}
	}
	return leaves
}

// elemArray returns the array val reads: a Binary view of string and JSON
// arrays (zero-copy []byte values), else a itself.
func (l *cmpLeaf) elemArray(a arrow.Array) arrow.Array {
	switch a := a.(type) {
	case *array.String:
		return array.NewBinaryData(a.Data())
	case array.ExtensionArray:
		return array.NewBinaryData(a.Storage().Data())
	}
	return a
}

func leafOf(a arrow.Array, t arrow.DataType) *cmpLeaf {
	l := &cmpLeaf{}
	switch t := t.(type) {
	case *extensions.JSONType, *arrow.StringType, *arrow.BinaryType:
		l.val = func(_ *cmpLeaf, a arrow.Array, i int) pgo.Value {
			return pgo.ByteArrayValue(a.(*array.Binary).Value(i))
		}
	case *arrow.BooleanType:
		l.val = func(_ *cmpLeaf, a arrow.Array, i int) pgo.Value { return pgo.BooleanValue(a.(*array.Boolean).Value(i)) }
	case *arrow.Int8Type:
		l.val = func(_ *cmpLeaf, a arrow.Array, i int) pgo.Value {
			return pgo.Int32Value(int32(a.(*array.Int8).Value(i)))
		}
	case *arrow.Int16Type:
		l.val = func(_ *cmpLeaf, a arrow.Array, i int) pgo.Value {
			return pgo.Int32Value(int32(a.(*array.Int16).Value(i)))
		}
	case *arrow.Int32Type:
		l.val = func(_ *cmpLeaf, a arrow.Array, i int) pgo.Value { return pgo.Int32Value(a.(*array.Int32).Value(i)) }
	case *arrow.Int64Type:
		l.val = func(_ *cmpLeaf, a arrow.Array, i int) pgo.Value { return pgo.Int64Value(a.(*array.Int64).Value(i)) }
	case *arrow.Float32Type:
		l.val = func(_ *cmpLeaf, a arrow.Array, i int) pgo.Value { return pgo.FloatValue(a.(*array.Float32).Value(i)) }
	case *arrow.Float64Type:
		l.val = func(_ *cmpLeaf, a arrow.Array, i int) pgo.Value { return pgo.DoubleValue(a.(*array.Float64).Value(i)) }
	case *arrow.Date32Type:
		l.val = func(_ *cmpLeaf, a arrow.Array, i int) pgo.Value {
			return pgo.Int32Value(int32(a.(*array.Date32).Value(i)))
		}
	case *arrow.Time64Type:
		l.val = func(_ *cmpLeaf, a arrow.Array, i int) pgo.Value {
			return pgo.Int64Value(int64(a.(*array.Time64).Value(i)))
		}
	case *arrow.TimestampType:
		l.val = func(_ *cmpLeaf, a arrow.Array, i int) pgo.Value {
			return pgo.Int64Value(int64(a.(*array.Timestamp).Value(i)))
		}
	case *arrow.Decimal128Type:
		l.flbaWidth = int(pqarrow.DecimalSize(t.Precision))
		l.val = func(l *cmpLeaf, a arrow.Array, i int) pgo.Value {
			v := a.(*array.Decimal128).Value(i)
			var be [16]byte
			binary.BigEndian.PutUint64(be[:8], uint64(v.HighBits()))
			binary.BigEndian.PutUint64(be[8:], v.LowBits())
			// The values point into scratch: it is sized per chunk up front
			// (reserve) so appending never moves it.
			start := len(l.scratch)
			l.scratch = append(l.scratch, be[16-l.flbaWidth:]...)
			return pgo.FixedLenByteArrayValue(l.scratch[start:len(l.scratch):len(l.scratch)])
		}
	default:
		panic("compare_test: no value conversion for " + t.String())
	}
	return l
}

// reserve readies the leaf for converting n more rows, dropping the values
// converted before (their writes must have completed).
func (l *cmpLeaf) reserve(n int) {
	if l.flbaWidth == 0 {
		return
	}
	if need := n * l.flbaWidth; cap(l.scratch) < need {
		l.scratch = make([]byte, 0, need)
	}
	l.scratch = l.scratch[:0]
}

// appendRow appends the leaf's values of row i with their levels.
func (l *cmpLeaf) appendRow(dst []pgo.Value, i int) []pgo.Value {
	def := 0
	for _, lv := range l.path {
		if lv.nullable {
			if lv.arr.IsNull(i) {
				return append(dst, pgo.Value{}.Level(0, def, l.col))
			}
			def++
		}
	}
	if l.list == nil {
		return append(dst, l.val(l, l.path[len(l.path)-1].arr, i).Level(0, def, l.col))
	}
	lo, hi := l.list.ValueOffsets(i)
	if lo == hi {
		return append(dst, pgo.Value{}.Level(0, def, l.col))
	}
	def++ // the repeated group
	for j := int(lo); j < int(hi); j++ {
		rep := 1
		if j == int(lo) {
			rep = 0
		}
		switch {
		case !l.elemNulls:
			dst = append(dst, l.val(l, l.elem, j).Level(rep, def, l.col))
		case l.elem.IsNull(j):
			dst = append(dst, pgo.Value{}.Level(rep, def, l.col))
		default:
			dst = append(dst, l.val(l, l.elem, j).Level(rep, def+1, l.col))
		}
	}
	return dst
}

// listElems counts the list elements of rows [lo, hi) past one per row, to
// size value buffers.
func (l *cmpLeaf) listElems(lo, hi int) int {
	if l.list == nil {
		return 0
	}
	a, _ := l.list.ValueOffsets(lo)
	_, b := l.list.ValueOffsets(hi - 1)
	return int(b - a)
}

// pgoOptions are the writer settings matched to parquet.go's.
func pgoOptions(sc *pgo.Schema, arrowSchema string) []pgo.WriterOption {
	opts := []pgo.WriterOption{
		sc,
		pgo.Compression(&pgozstd.Codec{Level: pgozstd.SpeedDefault}),
		pgo.MaxRowsPerRowGroup(cmpRowGroupRows),
		pgo.PageBufferSize(1 << 20),
		pgo.DataPageVersion(1),
		pgo.DictionaryMaxBytes(1 << 20),
		pgo.CreatedBy("cdclake", "dev", ""),
	}
	for _, k := range []pgo.Kind{pgo.Int32, pgo.Int64, pgo.Float, pgo.Double, pgo.ByteArray, pgo.FixedLenByteArray} {
		opts = append(opts, pgo.DefaultEncodingFor(k, &pgo.RLEDictionary))
	}
	if arrowSchema != "" {
		opts = append(opts, pgo.KeyValueMetadata("ARROW:schema", arrowSchema))
	}
	return opts
}

// pgoDefaultOptions keep parquet-go's own encoding defaults.
func pgoDefaultOptions(sc *pgo.Schema, arrowSchema string) []pgo.WriterOption {
	return []pgo.WriterOption{
		sc,
		pgo.Compression(&pgozstd.Codec{Level: pgozstd.SpeedDefault}),
		pgo.MaxRowsPerRowGroup(cmpRowGroupRows),
		pgo.CreatedBy("cdclake", "dev", ""),
		pgo.KeyValueMetadata("ARROW:schema", arrowSchema),
	}
}

// pgoWriteRows converts rec row by row, cmpRowChunk rows at a time, and
// writes it with WriteRows.
func pgoWriteRows(w io.Writer, rec arrow.RecordBatch, opts []pgo.WriterOption) error {
	pw := pgo.NewWriter(w, opts...)
	leaves := compileLeaves(rec)
	n := int(rec.NumRows())
	var values []pgo.Value
	rows := make([]pgo.Row, 0, cmpRowChunk)
	for lo := 0; lo < n; lo += cmpRowChunk {
		hi := min(lo+cmpRowChunk, n)
		need := (hi - lo) * len(leaves)
		for _, l := range leaves {
			l.reserve(hi - lo)
			need += l.listElems(lo, hi)
		}
		if cap(values) < need {
			values = make([]pgo.Value, 0, need)
		}
		values, rows = values[:0], rows[:0]
		for i := lo; i < hi; i++ {
			start := len(values)
			for _, l := range leaves {
				values = l.appendRow(values, i)
			}
			rows = append(rows, values[start:len(values):len(values)])
		}
		if _, err := pw.WriteRows(rows); err != nil {
			return err
		}
	}
	return pw.Close()
}

// pgoConvertOnly is pgoWriteRows without the writer.
func pgoConvertOnly(rec arrow.RecordBatch) int {
	leaves := compileLeaves(rec)
	n, total := int(rec.NumRows()), 0
	var values []pgo.Value
	rows := make([]pgo.Row, 0, cmpRowChunk)
	for lo := 0; lo < n; lo += cmpRowChunk {
		hi := min(lo+cmpRowChunk, n)
		need := (hi - lo) * len(leaves)
		for _, l := range leaves {
			l.reserve(hi - lo)
			need += l.listElems(lo, hi)
		}
		if cap(values) < need {
			values = make([]pgo.Value, 0, need)
		}
		values, rows = values[:0], rows[:0]
		for i := lo; i < hi; i++ {
			start := len(values)
			for _, l := range leaves {
				values = l.appendRow(values, i)
			}
			rows = append(rows, values[start:len(values):len(values)])
		}
		total += len(values)
	}
	return total
}

// pgoWriteColumns converts rec column by column and writes each leaf's
// values through the writer's column writers, a row group at a time.
func pgoWriteColumns(w io.Writer, rec arrow.RecordBatch, opts []pgo.WriterOption) error {
	pw := pgo.NewWriter(w, opts...)
	leaves := compileLeaves(rec)
	n := int(rec.NumRows())
	var values []pgo.Value
	for rg := 0; rg < n; rg += cmpRowGroupRows {
		rgEnd := min(rg+cmpRowGroupRows, n)
		cols := pw.ColumnWriters()
		for _, l := range leaves {
			for lo := rg; lo < rgEnd; lo += cmpColChunk {
				hi := min(lo+cmpColChunk, rgEnd)
				l.reserve(hi - lo)
				values = values[:0]
				for i := lo; i < hi; i++ {
					values = l.appendRow(values, i)
				}
				if _, err := cols[l.col].WriteRowValues(values); err != nil {
					return err
				}
			}
		}
		if err := pw.Flush(); err != nil {
			return err
		}
	}
	return pw.Close()
}

// pgoPrebuilt converts all of rec to rows up front, for timing the writer
// alone. The rows point into rec and into the leaves' scratch.
func pgoPrebuilt(rec arrow.RecordBatch) []pgo.Row {
	leaves := compileLeaves(rec)
	n := int(rec.NumRows())
	need := n * len(leaves)
	for _, l := range leaves {
		l.reserve(n)
		need += l.listElems(0, n)
	}
	values := make([]pgo.Value, 0, need)
	rows := make([]pgo.Row, 0, n)
	for i := range n {
		start := len(values)
		for _, l := range leaves {
			values = l.appendRow(values, i)
		}
		rows = append(rows, values[start:len(values):len(values)])
	}
	return rows
}

func pgoWritePrebuilt(w io.Writer, rows []pgo.Row, opts []pgo.WriterOption) error {
	pw := pgo.NewWriter(w, opts...)
	for len(rows) > 0 {
		k := min(cmpRowChunk, len(rows))
		if _, err := pw.WriteRows(rows[:k]); err != nil {
			return err
		}
		rows = rows[k:]
	}
	return pw.Close()
}

// arrowSchemaKey returns the ARROW:schema footer value pqarrow stores for
// rec's schema, copied into the parquet-go files so both carry it.
func arrowSchemaKey(tb testing.TB, rec arrow.RecordBatch) string {
	tb.Helper()
	var buf bytes.Buffer
	if err := pqarrowWrite(&buf, rec, memory.NewGoAllocator()); err != nil {
		tb.Fatal(err)
	}
	rdr, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		tb.Fatal(err)
	}
	defer rdr.Close()
	v := rdr.MetaData().KeyValueMetadata().FindValue("ARROW:schema")
	if v == nil {
		tb.Fatal("pqarrow file has no ARROW:schema")
	}
	if _, err := base64.StdEncoding.DecodeString(*v); err != nil {
		tb.Fatalf("ARROW:schema: %v", err)
	}
	return *v
}

// cmpWriter is one way to write the record. prepare runs once, untimed,
// and returns the timed unit of work; what it builds (prebuilt rows) lives
// only as long as that benchmark, so it does not weigh on the others' GC.
type cmpWriter struct {
	name    string
	prepare func(rec arrow.RecordBatch) func(w io.Writer) error
}

func cmpWriters(tb testing.TB, rec arrow.RecordBatch) []cmpWriter {
	sc := pgoSchema(rec.Schema())
	key := arrowSchemaKey(tb, rec)
	mem := memory.NewGoAllocator()
	fromRecord := func(write func(io.Writer, arrow.RecordBatch) error) func(arrow.RecordBatch) func(io.Writer) error {
		return func(rec arrow.RecordBatch) func(io.Writer) error {
			return func(w io.Writer) error { return write(w, rec) }
		}
	}
	prebuilt := func(opts []pgo.WriterOption) func(arrow.RecordBatch) func(io.Writer) error {
		return func(rec arrow.RecordBatch) func(io.Writer) error {
			rows := pgoPrebuilt(rec)
			return func(w io.Writer) error { return pgoWritePrebuilt(w, rows, opts) }
		}
	}
	return []cmpWriter{
		{"pqarrow", fromRecord(func(w io.Writer, rec arrow.RecordBatch) error { return pqarrowWrite(w, rec, mem) })},
		{"pqarrow-delta", fromRecord(func(w io.Writer, rec arrow.RecordBatch) error { return pqarrowWriteDelta(w, rec, mem) })},
		{"parquet-go/rows", fromRecord(func(w io.Writer, rec arrow.RecordBatch) error {
			return pgoWriteRows(w, rec, pgoOptions(sc, key))
		})},
		{"parquet-go/columns", fromRecord(func(w io.Writer, rec arrow.RecordBatch) error {
			return pgoWriteColumns(w, rec, pgoOptions(sc, key))
		})},
		{"parquet-go/prebuilt", prebuilt(pgoOptions(sc, key))},
		{"parquet-go/columns-defaults", fromRecord(func(w io.Writer, rec arrow.RecordBatch) error {
			return pgoWriteColumns(w, rec, pgoDefaultOptions(sc, key))
		})},
		{"parquet-go/prebuilt-defaults", prebuilt(pgoDefaultOptions(sc, key))},
	}
}

// TestCompareWriters checks that every benchmarked writer produces a file
// that reads back as the source record, and logs sizes per column.
func TestCompareWriters(t *testing.T) {
	// The check behind the writer comparison runs with the benchmarks
	// (make bench sets CDCLAKE_COMPARE=1): it lands 100,000 rows four ways.
	if os.Getenv("CDCLAKE_COMPARE") == "" {
		t.Skip("set CDCLAKE_COMPARE=1 (make bench does) to check the writer comparison")
	}
	rec := cmpRecord()
	dir := os.Getenv("CDCLAKE_COMPARE_DIR")
	var pqarrowSchema string
	for _, cw := range cmpWriters(t, rec) {
		t.Run(strings.ReplaceAll(cw.name, "/", "_"), func(t *testing.T) {
			var buf bytes.Buffer
			if err := cw.prepare(rec)(&buf); err != nil {
				t.Fatalf("write: %v", err)
			}
			data := buf.Bytes()
			// The Parquet schemas must match pqarrow's, logical types and
			// repetition included.
			if sc := parquetSchemaText(t, data); pqarrowSchema == "" {
				pqarrowSchema = sc
				t.Log(sc)
			} else if sc != pqarrowSchema {
				t.Errorf("Parquet schema differs from pqarrow's:\n%s\npqarrow:\n%s", sc, pqarrowSchema)
			}
			checkPqarrowReadBack(t, data, rec)
			checkParquetGoReadBack(t, data, rec)
			logColumnSizes(t, data)
			if dir != "" {
				name := filepath.Join(dir, strings.ReplaceAll(cw.name, "/", "_")+".parquet")
				if err := os.WriteFile(name, data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// checkPqarrowReadBack reads data with pqarrow and compares every column
// with rec, leaf by leaf with the null bitmaps of the groups above. arrow-go
// reads the JSON logical type back as binary (and does not restore the
// arrow.json extension), so JSON leaves compare as binary.
func checkPqarrowReadBack(t *testing.T, data []byte, rec arrow.RecordBatch) {
	t.Helper()
	mem := memory.NewGoAllocator()
	rdr, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer rdr.Close()
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, mem)
	if err != nil {
		t.Fatalf("pqarrow reader: %v", err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatalf("ReadTable: %v", err)
	}
	defer tbl.Release()
	if tbl.NumRows() != rec.NumRows() || tbl.NumCols() != rec.NumCols() {
		t.Fatalf("read %d rows × %d columns, wrote %d × %d", tbl.NumRows(), tbl.NumCols(), rec.NumRows(), rec.NumCols())
	}
	for i := range int(rec.NumCols()) {
		want := rec.Schema().Field(i)
		got := tbl.Schema().Field(i)
		if want.Name != got.Name || want.Nullable != got.Nullable {
			t.Errorf("column %d: read %s, wrote %s", i, got, want)
			continue
		}
		chunks := tbl.Column(i).Data().Chunks()
		if len(chunks) != 1 {
			t.Fatalf("column %s: %d chunks", want.Name, len(chunks))
		}
		compareArrays(t, want.Name, chunks[0], rec.Column(i))
	}
	if rg := rdr.NumRowGroups(); rg != 1 {
		t.Errorf("%d row groups, want 1", rg)
	}
}

// compareArrays compares an array read back with the one written.
func compareArrays(t *testing.T, name string, got, want arrow.Array) {
	t.Helper()
	if got.Len() != want.Len() || got.NullN() != want.NullN() {
		t.Errorf("%s: read %d values (%d null), wrote %d (%d null)", name, got.Len(), got.NullN(), want.Len(), want.NullN())
		return
	}
	switch w := want.(type) {
	case *array.Struct:
		g, ok := got.(*array.Struct)
		if !ok || g.NumField() != w.NumField() {
			t.Errorf("%s: read %s, wrote %s", name, got.DataType(), want.DataType())
			return
		}
		for i := range w.Len() {
			if g.IsNull(i) != w.IsNull(i) {
				t.Errorf("%s: row %d null %t, wrote %t", name, i, g.IsNull(i), w.IsNull(i))
				return
			}
		}
		st := w.DataType().(*arrow.StructType)
		for j := range w.NumField() {
			compareArrays(t, name+"."+st.Field(j).Name, g.Field(j), w.Field(j))
		}
	case *extensions.JSONArray:
		g, ok := got.(*array.Binary)
		if !ok {
			t.Errorf("%s: JSON read as %s", name, got.DataType())
			return
		}
		ws := w.Storage().(*array.String)
		for i := range ws.Len() {
			if g.IsNull(i) != ws.IsNull(i) || g.ValueString(i) != ws.Value(i) {
				t.Errorf("%s: row %d read %q, wrote %q", name, i, g.ValueString(i), ws.Value(i))
				return
			}
		}
	default:
		if !arrow.TypeEqual(got.DataType(), want.DataType()) {
			t.Errorf("%s: read %s, wrote %s", name, got.DataType(), want.DataType())
		} else if !array.Equal(got, want) {
			t.Errorf("%s: values differ", name)
		}
	}
}

// checkParquetGoReadBack reads data with parquet-go: row count, the column
// order and a few values.
func checkParquetGoReadBack(t *testing.T, data []byte, rec arrow.RecordBatch) {
	t.Helper()
	f, err := pgo.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("parquet-go open: %v", err)
	}
	if f.NumRows() != rec.NumRows() {
		t.Fatalf("parquet-go: %d rows, want %d", f.NumRows(), rec.NumRows())
	}
	fields := f.Schema().Fields()
	for i, af := range rec.Schema().Fields() {
		if fields[i].Name() != af.Name {
			t.Fatalf("parquet-go: column %d is %q, want %q", i, fields[i].Name(), af.Name)
		}
	}
	lookup := func(path ...string) int {
		leaf, ok := f.Schema().Lookup(path...)
		if !ok {
			t.Fatalf("parquet-go: no column %v", path)
		}
		return leaf.ColumnIndex
	}
	posCol, idCol, amountCol := lookup("_cdc_pos"), lookup("after", "id"), lookup("after", "amount")
	absentCol := lookup("_cdc_after_absent", "list", "element")

	r := pgo.NewReader(bytes.NewReader(data))
	defer func() { _ = r.Close() }()
	rows := make([]pgo.Row, 1000)
	pos := rec.Column(4).(*array.String)
	after := rec.Column(11).(*array.Struct)
	ids, amounts := after.Field(0).(*array.Int64), after.Field(2).(*array.Decimal128)
	absent := rec.Column(13).(*array.List)
	read, checkedAbsent := 0, 0
	for read < int(rec.NumRows()) {
		n, err := r.ReadRows(rows)
		for _, row := range rows[:n] {
			i := read
			read++
			if i%997 != 0 && checkedAbsent > 20 {
				continue
			}
			vals := map[int][]pgo.Value{}
			for _, v := range row {
				vals[v.Column()] = append(vals[v.Column()], v)
			}
			if got := vals[posCol][0].String(); got != pos.Value(i) {
				t.Fatalf("row %d _cdc_pos %q, want %q", i, got, pos.Value(i))
			}
			if after.IsNull(i) {
				if !vals[idCol][0].IsNull() {
					t.Fatalf("row %d after.id %v, want NULL", i, vals[idCol][0])
				}
			} else {
				if got := vals[idCol][0].Int64(); got != ids.Value(i) {
					t.Fatalf("row %d after.id %d, want %d", i, got, ids.Value(i))
				}
				be := vals[amountCol][0].ByteArray()
				got := int64(binary.BigEndian.Uint64(append(bytes.Repeat([]byte{fill(be)}, 8-len(be)), be...)))
				if want := amounts.Value(i).LowBits(); got != int64(want) {
					t.Fatalf("row %d after.amount %d, want %d", i, got, int64(want))
				}
			}
			if lo, hi := absent.ValueOffsets(i); hi > lo {
				checkedAbsent++
				el := vals[absentCol]
				if len(el) != int(hi-lo) || el[0].String() != "attrs" {
					t.Fatalf("row %d _cdc_after_absent %v, want [attrs]", i, el)
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("parquet-go read: %v", err)
		}
	}
	if read != int(rec.NumRows()) {
		t.Fatalf("parquet-go read %d rows, want %d", read, rec.NumRows())
	}
}

// fill is the sign-extension byte of a big-endian two's-complement value.
func fill(be []byte) byte {
	if len(be) > 0 && be[0]&0x80 != 0 {
		return 0xff
	}
	return 0
}

// parquetSchemaText renders the file's Parquet schema.
func parquetSchemaText(t *testing.T, data []byte) string {
	t.Helper()
	rdr, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Close()
	var b strings.Builder
	pqschema.PrintSchema(rdr.MetaData().Schema.Root(), &b, 2)
	return b.String()
}

// logColumnSizes logs the file size and each column chunk's compressed
// size and encodings.
func logColumnSizes(t *testing.T, data []byte) {
	t.Helper()
	rdr, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Close()
	md := rdr.MetaData()
	var b strings.Builder
	fmt.Fprintf(&b, "%d bytes, footer %d bytes, created by %q\n", len(data), md.Size(), md.GetCreatedBy())
	rg := md.RowGroup(0)
	for j := range rg.NumColumns() {
		cc, err := rg.ColumnChunk(j)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "  %-32s %9d  %v\n", cc.PathInSchema().String(), cc.TotalCompressedSize(), cc.Encodings())
	}
	t.Log(b.String())
}

// ---------------------------------------------------------------------------
// Benchmarks.

// benchWrite times w on the shared record and reports the output size.
func benchWrite(b *testing.B, w cmpWriter) {
	write := w.prepare(cmpRecord())
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		b.Fatal(err)
	}
	size := buf.Len()
	buf.Grow(size + size/4)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	runtime.GC()
	cpu := startCPU(b)
	for b.Loop() {
		buf.Reset()
		if err := write(&buf); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report()
	b.ReportMetric(float64(buf.Len()), "B/file")
}

// cpuTimer reports the process's CPU time per iteration (all threads: GC
// and compression included), which a shared machine's load disturbs less
// than wall time. It reads /proc/self/stat and reports nothing elsewhere.
type cpuTimer struct {
	b     *testing.B
	start time.Duration
	ok    bool
}

func startCPU(b *testing.B) cpuTimer {
	start, ok := processCPU()
	return cpuTimer{b, start, ok}
}

func (c cpuTimer) report() {
	end, ok := processCPU()
	if c.ok && ok && c.b.N > 0 {
		c.b.ReportMetric(float64(end-c.start)/float64(c.b.N), "cpu-ns/op")
	}
}

// processCPU returns user+system time from /proc/self/stat, in the
// kernel's USER_HZ ticks of 10ms.
func processCPU() (time.Duration, bool) {
	data, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, false
	}
	// Fields after the parenthesized command name: state is field 3, utime
	// and stime are fields 14 and 15.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, true
}

// BenchmarkWriteArrowPqarrow times parquet.Write (pqarrow) of the record
// ("parquet.Write"), and pqarrow with parquet-go's default encodings
// ("delta-encodings").
func BenchmarkWriteArrowPqarrow(b *testing.B) {
	ws := cmpWriters(b, cmpRecord())
	b.Run("parquet.Write", func(b *testing.B) { benchWrite(b, ws[0]) })
	b.Run("delta-encodings", func(b *testing.B) { benchWrite(b, ws[1]) })
}

// BenchmarkWriteParquetGo times parquet-go writing the same data: converted
// from the record (rows, columns) or from rows converted beforehand
// (prebuilt), with pqarrow's encodings or parquet-go's defaults.
// convert-only is the rows conversion alone.
func BenchmarkWriteParquetGo(b *testing.B) {
	for _, w := range cmpWriters(b, cmpRecord())[2:] {
		b.Run(strings.TrimPrefix(w.name, "parquet-go/"), func(b *testing.B) { benchWrite(b, w) })
	}
	b.Run("convert-only", func(b *testing.B) {
		rec := cmpRecord()
		b.ReportAllocs()
		runtime.GC()
		cpu := startCPU(b)
		for b.Loop() {
			pgoConvertOnly(rec)
		}
		cpu.report()
	})
}
