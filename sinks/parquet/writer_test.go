package parquet_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/cdclake/cdclake/internal/pyenv"
	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/parquet"
	"github.com/cdclake/cdclake/sinks/parquet/parquettest"
)

// writeBoth writes the ranges of rec with the package's own writer and
// with pqarrow, and fails unless the own writer took the first.
func writeBoth(t *testing.T, mem memory.Allocator, rec arrow.RecordBatch, ranges [][2]int, opts parquet.Options) (own, pq []byte) {
	t.Helper()
	var a, b bytes.Buffer
	enc, err := parquet.NewEncoder(&a, rec.Schema(), opts, mem)
	if err != nil {
		t.Fatal(err)
	}
	if !parquet.Own(enc) {
		t.Fatalf("the own writer does not take schema %v", rec.Schema())
	}
	if err := enc.Write(sinks.Part{Record: rec, Ranges: ranges}); err != nil {
		t.Fatalf("own writer: %v", err)
	}
	if err := enc.Close(); err != nil {
		t.Fatalf("own writer: %v", err)
	}
	viaPqarrow := opts
	viaPqarrow.Pqarrow = true
	if err := parquet.Write(&b, rec, ranges, viaPqarrow, mem); err != nil {
		t.Fatalf("pqarrow: %v", err)
	}
	return a.Bytes(), b.Bytes()
}

// sameFile fails unless two Parquet files hold the same schema, footer
// keys, row groups, column statistics and values.
func sameFile(t *testing.T, mem memory.Allocator, own, pq []byte) {
	t.Helper()
	ro, to := readBack(t, mem, own)
	defer ro.Close()
	defer to.Release()
	rp, tp := readBack(t, mem, pq)
	defer rp.Close()
	defer tp.Release()
	mo, mp := ro.MetaData(), rp.MetaData()
	if !mo.Schema.Equals(mp.Schema) {
		t.Fatalf("schemas differ:\n%s\npqarrow:\n%s", mo.Schema, mp.Schema)
	}
	if !slices.Equal(mo.KeyValueMetadata().Keys(), mp.KeyValueMetadata().Keys()) ||
		!slices.Equal(mo.KeyValueMetadata().Values(), mp.KeyValueMetadata().Values()) {
		t.Fatalf("footer keys differ: %v, pqarrow %v", mo.KeyValueMetadata().Keys(), mp.KeyValueMetadata().Keys())
	}
	if mo.NumRows != mp.NumRows || ro.NumRowGroups() != rp.NumRowGroups() {
		t.Fatalf("%d rows in %d groups, pqarrow %d in %d", mo.NumRows, ro.NumRowGroups(), mp.NumRows, rp.NumRowGroups())
	}
	if mo.Version() != mp.Version() || mo.GetCreatedBy() != mp.GetCreatedBy() {
		t.Errorf("version %v %q, pqarrow %v %q", mo.Version(), mo.GetCreatedBy(), mp.Version(), mp.GetCreatedBy())
	}
	for g := range ro.NumRowGroups() {
		go_, gp := mo.RowGroup(g), mp.RowGroup(g)
		if go_.NumRows() != gp.NumRows() {
			t.Fatalf("group %d: %d rows, pqarrow %d", g, go_.NumRows(), gp.NumRows())
		}
		for c := range go_.NumColumns() {
			co, err := go_.ColumnChunk(c)
			if err != nil {
				t.Fatal(err)
			}
			cp, err := gp.ColumnChunk(c)
			if err != nil {
				t.Fatal(err)
			}
			name := mo.Schema.Column(c).Path()
			if co.NumValues() != cp.NumValues() || co.Compression() != cp.Compression() || co.Type() != cp.Type() {
				t.Errorf("group %d %s: %d values %v %v, pqarrow %d %v %v", g, name, co.NumValues(), co.Compression(), co.Type(),
					cp.NumValues(), cp.Compression(), cp.Type())
			}
			if !slices.Equal(co.Encodings(), cp.Encodings()) {
				t.Errorf("group %d %s: encodings %v, pqarrow %v", g, name, co.Encodings(), cp.Encodings())
			}
			so, err := co.Statistics()
			if err != nil {
				t.Fatal(err)
			}
			sp, err := cp.Statistics()
			if err != nil {
				t.Fatal(err)
			}
			if (so == nil) != (sp == nil) {
				t.Fatalf("group %d %s: statistics %v, pqarrow %v", g, name, so, sp)
			}
			if so == nil {
				continue
			}
			if so.NullCount() != sp.NullCount() || so.HasNullCount() != sp.HasNullCount() {
				t.Errorf("group %d %s: nulls %d, pqarrow %d", g, name, so.NullCount(), sp.NullCount())
			}
			// pqarrow's minimum and maximum are not to be trusted under a
			// list (it takes them from every value of the list's child,
			// also those of rows it does not write) nor for empty byte
			// arrays (it drops them): checkStats checks these against the
			// values.
			if mo.Schema.Column(c).MaxRepetitionLevel() > 0 {
				continue
			}
			if so.HasMinMax() != sp.HasMinMax() && !(so.HasMinMax() && len(so.EncodeMin()) == 0) {
				t.Errorf("group %d %s: min/max %v, pqarrow %v", g, name, so.HasMinMax(), sp.HasMinMax())
			}
			if so.HasMinMax() && sp.HasMinMax() &&
				(!bytes.Equal(so.EncodeMin(), sp.EncodeMin()) || !bytes.Equal(so.EncodeMax(), sp.EncodeMax())) {
				t.Errorf("group %d %s: min %x max %x, pqarrow %x %x", g, name, so.EncodeMin(), so.EncodeMax(), sp.EncodeMin(), sp.EncodeMax())
			}
		}
	}
	if to.NumRows() != tp.NumRows() || to.NumCols() != tp.NumCols() {
		t.Fatalf("read %d×%d, pqarrow %d×%d", to.NumRows(), to.NumCols(), tp.NumRows(), tp.NumCols())
	}
	for c := range int(to.NumCols()) {
		if !chunkedSame(to.Column(c).Data(), tp.Column(c).Data()) {
			t.Errorf("column %s: values differ from pqarrow's", to.Schema().Field(c).Name)
		}
	}
}

// TestWriterMatchesPqarrow: the package writes the landed layouts itself;
// its files must read back as pqarrow's do, with the same Parquet schema,
// footer keys, row groups and statistics, for every type and nesting the
// layouts have, NULLs at every level, many pages and row groups, and
// ranges of sliced records.
func TestWriterMatchesPqarrow(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)

	cols := slices.DeleteFunc(allTypes(), func(c column) bool { return c.name == "n" })
	types := record(t, mem, cols)
	defer types.Release()
	// Many rows of every type: the rows above again and again, as one
	// record of 30,000 rows.
	many := func() arrow.RecordBatch {
		cols := make([]arrow.Array, types.NumCols())
		for i := range cols {
			parts := make([]arrow.Array, 10000)
			for k := range parts {
				parts[k] = types.Column(i)
			}
			c, err := array.Concatenate(parts, mem)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Release()
			cols[i] = c
		}
		return array.NewRecordBatch(types.Schema(), cols, 30000)
	}()
	defer many.Release()
	images := parquettest.Images(mem, 30000)
	defer images.Release()
	sliced := images.NewSlice(777, 25000)
	defer sliced.Release()
	edges := edgeRecord(mem)
	defer edges.Release()

	zstd := parquet.Options{Compression: "zstd", RowGroupRows: 128 * 1024}
	for _, tc := range []struct {
		name   string
		rec    arrow.RecordBatch
		ranges [][2]int
		opts   parquet.Options
	}{
		{"all types", types, [][2]int{{0, 3}}, zstd},
		{"all types, part of the rows", types, [][2]int{{1, 3}}, zstd},
		{"all types, many row groups", many, [][2]int{{0, 30000}}, parquet.Options{Compression: "snappy", RowGroupRows: 7000}},
		{"images", images, [][2]int{{0, 30000}}, zstd},
		{"images, ranges of a slice", sliced, [][2]int{{0, 5}, {9, 12000}, {12001, 24000}}, parquet.Options{Compression: "none", RowGroupRows: 5000}},
		{"images, gzip", images, [][2]int{{0, 3000}}, parquet.Options{Compression: "gzip", RowGroupRows: 1000}},
		{"images, lz4", images, [][2]int{{0, 3000}}, parquet.Options{Compression: "lz4", RowGroupRows: 1 << 20}},
		{"edges", edges, [][2]int{{0, int(edges.NumRows())}}, zstd},
		{"edges, one row a group", edges, [][2]int{{1000, 1100}}, parquet.Options{Compression: "zstd", RowGroupRows: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			own, pq := writeBoth(t, mem, tc.rec, tc.ranges, tc.opts)
			sameFile(t, mem, own, pq)
			checkStats(t, own)
			// Within a few percent of pqarrow's size.
			if d := math.Abs(float64(len(own))/float64(len(pq)) - 1); d > 0.05 && len(pq) > 100_000 {
				t.Errorf("%d bytes, pqarrow %d", len(own), len(pq))
			}
		})
	}
}

// edgeRecord has the values statistics get wrong: NaN and signed zeros,
// empty and long strings, all-NULL columns, extreme integers and decimals,
// a required struct with optional fields, lists of structs and lists of
// lists, and booleans across byte boundaries.
func edgeRecord(mem memory.Allocator) arrow.RecordBatch {
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "nan", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "zeros", Type: arrow.PrimitiveTypes.Float64},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "long", Type: arrow.BinaryTypes.String},
		{Name: "nulls", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "dec", Type: &arrow.Decimal128Type{Precision: 20, Scale: 3}, Nullable: true},
		{Name: "dec4", Type: &arrow.Decimal128Type{Precision: 4, Scale: 0}},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Second, TimeZone: "UTC"}, Nullable: true},
		{Name: "req", Type: arrow.StructOf(
			arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "y", Type: arrow.BinaryTypes.Binary})},
		{Name: "ls", Type: arrow.ListOf(arrow.StructOf(
			arrow.Field{Name: "k", Type: arrow.BinaryTypes.String},
			arrow.Field{Name: "v", Type: arrow.PrimitiveTypes.Int16, Nullable: true})), Nullable: true},
		{Name: "ll", Type: arrow.ListOfNonNullable(arrow.ListOf(arrow.PrimitiveTypes.Int8))},
		{Name: "names", Type: arrow.ListOfNonNullable(arrow.BinaryTypes.String), Nullable: true},
		{Name: "li", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32)},
	}, nil)
	rb := array.NewRecordBuilder(mem, sch)
	defer rb.Release()
	r := rand.New(rand.NewPCG(7, 7))
	long := string(bytes.Repeat([]byte("x"), 5000))
	for i := range 3000 {
		f64 := rb.Field(0).(*array.Float64Builder)
		switch i % 5 {
		case 0:
			f64.AppendNull()
		case 1:
			f64.Append(math.Copysign(0, -1))
		default:
			f64.Append(r.NormFloat64())
		}
		f32 := rb.Field(1).(*array.Float32Builder)
		if i%7 == 0 {
			f32.Append(float32(math.NaN()))
		} else {
			f32.Append(float32(r.NormFloat64()))
		}
		if i%2 == 0 {
			rb.Field(2).(*array.Float64Builder).Append(math.NaN())
		} else {
			rb.Field(2).(*array.Float64Builder).AppendNull()
		}
		rb.Field(3).(*array.Float64Builder).Append([]float64{0, math.Copysign(0, -1)}[i%2])
		s := rb.Field(4).(*array.StringBuilder)
		switch i % 4 {
		case 0:
			s.Append("")
		case 1:
			s.AppendNull()
		default:
			s.Append(fmt.Sprintf("é%06d", r.IntN(1000000)))
		}
		if i == 1500 {
			rb.Field(5).(*array.StringBuilder).Append(long)
		} else {
			rb.Field(5).(*array.StringBuilder).Append(fmt.Sprint(i))
		}
		rb.Field(6).(*array.Int64Builder).AppendNull()
		rb.Field(7).(*array.Int64Builder).Append([]int64{math.MinInt64, math.MaxInt64, r.Int64()}[i%3])
		if i%3 == 2 {
			rb.Field(8).(*array.BooleanBuilder).AppendNull()
		} else {
			rb.Field(8).(*array.BooleanBuilder).Append(r.IntN(2) == 0)
		}
		dec := rb.Field(9).(*array.Decimal128Builder)
		if i%6 == 0 {
			dec.AppendNull()
		} else {
			v := r.Int64N(1e15) - 5e14
			dec.Append(decimalOf(v))
		}
		rb.Field(10).(*array.Decimal128Builder).Append(decimalOf(int64(i%19999) - 9999))
		if i%9 == 0 {
			rb.Field(11).(*array.TimestampBuilder).AppendNull()
		} else {
			rb.Field(11).(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000 + int64(i)))
		}
		req := rb.Field(12).(*array.StructBuilder)
		req.Append(true)
		if i%4 == 0 {
			req.FieldBuilder(0).(*array.Int32Builder).AppendNull()
		} else {
			req.FieldBuilder(0).(*array.Int32Builder).Append(int32(i))
		}
		req.FieldBuilder(1).(*array.BinaryBuilder).Append([]byte{byte(i), byte(i >> 8)})
		ls := rb.Field(13).(*array.ListBuilder)
		switch i % 5 {
		case 0:
			ls.AppendNull()
		case 1:
			ls.Append(true)
		default:
			ls.Append(true)
			sb := ls.ValueBuilder().(*array.StructBuilder)
			for k := range i % 5 {
				sb.Append(true)
				sb.FieldBuilder(0).(*array.StringBuilder).Append(fmt.Sprint("k", k))
				if k == 1 {
					sb.FieldBuilder(1).(*array.Int16Builder).AppendNull()
				} else {
					sb.FieldBuilder(1).(*array.Int16Builder).Append(int16(i * k))
				}
			}
		}
		ll := rb.Field(14).(*array.ListBuilder)
		ll.Append(true)
		inner := ll.ValueBuilder().(*array.ListBuilder)
		for k := range i % 4 {
			switch k {
			case 1:
				inner.AppendNull()
			case 2:
				inner.Append(true)
			default:
				inner.Append(true)
				ib := inner.ValueBuilder().(*array.Int8Builder)
				ib.Append(int8(i))
				ib.AppendNull()
				ib.Append(int8(-i))
			}
		}
		// Top-level lists of scalars (the absent columns' lists): NULL,
		// empty, of several elements; elements NULL or not.
		names := rb.Field(15).(*array.ListBuilder)
		li := rb.Field(16).(*array.ListBuilder)
		switch i % 6 {
		case 0:
			names.AppendNull()
			li.Append(true)
		case 1:
			names.Append(true)
			li.Append(true)
			li.ValueBuilder().(*array.Int32Builder).AppendNull()
		default:
			names.Append(true)
			li.Append(true)
			for k := range i % 6 {
				names.ValueBuilder().(*array.StringBuilder).Append(fmt.Sprint("COL", k, i%7))
				if (i+k)%3 == 0 {
					li.ValueBuilder().(*array.Int32Builder).AppendNull()
				} else {
					li.ValueBuilder().(*array.Int32Builder).Append(int32(i*k - 500))
				}
			}
		}
	}
	return rb.NewRecordBatch()
}

func decimalOf(v int64) decimal128.Num { return decimal128.FromI64(v) }

// checkStats fails unless the statistics of every column chunk of a file
// are those of its values: the NULL count, and the minimum and maximum
// in the order of the column's type (signed integers and decimals, bytes
// unsigned, NaN left out, a zero minimum -0 and a zero maximum +0).
func checkStats(t *testing.T, data []byte) {
	t.Helper()
	rdr, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Close()
	for g := range rdr.NumRowGroups() {
		rg := rdr.RowGroup(g)
		for c := range rdr.MetaData().Schema.NumColumns() {
			desc := rdr.MetaData().Schema.Column(c)
			meta, err := rg.MetaData().ColumnChunk(c)
			if err != nil {
				t.Fatal(err)
			}
			st, err := meta.Statistics()
			if err != nil || st == nil {
				t.Fatalf("group %d %s: no statistics (%v)", g, desc.Path(), err)
			}
			cr, err := rg.Column(c)
			if err != nil {
				t.Fatal(err)
			}
			n := meta.NumValues()
			defs, reps := make([]int16, n), make([]int16, n)
			var vals [][]byte // plain encodings, for the order below
			var less func(a, b []byte) bool
			switch r := cr.(type) {
			case *file.Int32ColumnChunkReader:
				v := make([]int32, n)
				_, k, err := r.ReadBatch(n, v, defs, reps)
				must(t, err)
				for _, x := range v[:k] {
					vals = append(vals, binary.LittleEndian.AppendUint32(nil, uint32(x)))
				}
				less = func(a, b []byte) bool {
					return int32(binary.LittleEndian.Uint32(a)) < int32(binary.LittleEndian.Uint32(b))
				}
			case *file.Int64ColumnChunkReader:
				v := make([]int64, n)
				_, k, err := r.ReadBatch(n, v, defs, reps)
				must(t, err)
				for _, x := range v[:k] {
					vals = append(vals, binary.LittleEndian.AppendUint64(nil, uint64(x)))
				}
				less = func(a, b []byte) bool {
					return int64(binary.LittleEndian.Uint64(a)) < int64(binary.LittleEndian.Uint64(b))
				}
			case *file.Float32ColumnChunkReader:
				v := make([]float32, n)
				_, k, err := r.ReadBatch(n, v, defs, reps)
				must(t, err)
				for _, x := range v[:k] {
					if x == x {
						vals = append(vals, binary.LittleEndian.AppendUint32(nil, math.Float32bits(x)))
					}
				}
				less = func(a, b []byte) bool {
					return math.Float32frombits(binary.LittleEndian.Uint32(a)) < math.Float32frombits(binary.LittleEndian.Uint32(b))
				}
			case *file.Float64ColumnChunkReader:
				v := make([]float64, n)
				_, k, err := r.ReadBatch(n, v, defs, reps)
				must(t, err)
				for _, x := range v[:k] {
					if x == x {
						vals = append(vals, binary.LittleEndian.AppendUint64(nil, math.Float64bits(x)))
					}
				}
				less = func(a, b []byte) bool {
					return math.Float64frombits(binary.LittleEndian.Uint64(a)) < math.Float64frombits(binary.LittleEndian.Uint64(b))
				}
			case *file.BooleanColumnChunkReader:
				v := make([]bool, n)
				_, k, err := r.ReadBatch(n, v, defs, reps)
				must(t, err)
				for _, x := range v[:k] {
					vals = append(vals, []byte{map[bool]byte{false: 0, true: 1}[x]})
				}
				less = func(a, b []byte) bool { return a[0] < b[0] }
			case *file.ByteArrayColumnChunkReader:
				v := make([]pq.ByteArray, n)
				_, k, err := r.ReadBatch(n, v, defs, reps)
				must(t, err)
				for _, x := range v[:k] {
					vals = append(vals, slices.Clone(x))
				}
				less = func(a, b []byte) bool { return bytes.Compare(a, b) < 0 }
			case *file.FixedLenByteArrayColumnChunkReader:
				v := make([]pq.FixedLenByteArray, n)
				_, k, err := r.ReadBatch(n, v, defs, reps)
				must(t, err)
				for _, x := range v[:k] {
					vals = append(vals, slices.Clone(x))
				}
				less = func(a, b []byte) bool {
					if (a[0] >= 0x80) != (b[0] >= 0x80) {
						return a[0] >= 0x80
					}
					return bytes.Compare(a, b) < 0
				}
			default:
				t.Fatalf("%s: reader %T", desc.Path(), cr)
			}
			nulls := int64(0)
			for _, d := range defs {
				if d < desc.MaxDefinitionLevel() {
					nulls++
				}
			}
			if st.NullCount() != nulls {
				t.Errorf("group %d %s: null count %d, the values have %d", g, desc.Path(), st.NullCount(), nulls)
			}
			if len(vals) == 0 {
				if st.HasMinMax() {
					t.Errorf("group %d %s: min/max without values", g, desc.Path())
				}
				continue
			}
			lo, hi := vals[0], vals[0]
			for _, v := range vals[1:] {
				if less(v, lo) {
					lo = v
				}
				if less(hi, v) {
					hi = v
				}
			}
			if len(lo) > 4096 || len(hi) > 4096 {
				// Dropped, the other kept (as pqarrow does).
				if st.HasMinMax() && (len(lo) > 4096 && len(st.EncodeMin()) > 0 || len(hi) > 4096 && len(st.EncodeMax()) > 0) {
					t.Errorf("group %d %s: min/max longer than 4096 bytes kept", g, desc.Path())
				}
				continue
			}
			switch desc.PhysicalType() {
			case pq.Types.Float:
				if math.Float32frombits(binary.LittleEndian.Uint32(lo)) == 0 {
					lo = binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(math.Copysign(0, -1))))
				}
				if math.Float32frombits(binary.LittleEndian.Uint32(hi)) == 0 {
					hi = make([]byte, 4)
				}
			case pq.Types.Double:
				if math.Float64frombits(binary.LittleEndian.Uint64(lo)) == 0 {
					lo = binary.LittleEndian.AppendUint64(nil, math.Float64bits(math.Copysign(0, -1)))
				}
				if math.Float64frombits(binary.LittleEndian.Uint64(hi)) == 0 {
					hi = make([]byte, 8)
				}
			}
			if !st.HasMinMax() || !bytes.Equal(st.EncodeMin(), lo) || !bytes.Equal(st.EncodeMax(), hi) {
				t.Errorf("group %d %s: min %x max %x (%v), the values' %x %x", g, desc.Path(), st.EncodeMin(), st.EncodeMax(), st.HasMinMax(), lo, hi)
			}
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// chunkedSame compares two columns value by value, NaN equal to NaN.
func chunkedSame(a, b *arrow.Chunked) bool {
	if array.ChunkedEqual(a, b) {
		return true
	}
	if len(a.Chunks()) != 1 || len(b.Chunks()) != 1 {
		return false
	}
	return array.ApproxEqual(a.Chunk(0), b.Chunk(0), array.WithNaNsEqual(true), array.WithAbsTolerance(0))
}

var (
	imagesOnce  sync.Once
	imagesBatch arrow.RecordBatch
)

// imagesRecord returns 100,000 rows of parquettest.Images, built once. It
// is never released: the test binary's lifetime owns it.
func imagesRecord() arrow.RecordBatch {
	imagesOnce.Do(func() { imagesBatch = parquettest.Images(memory.NewGoAllocator(), 100_000) })
	return imagesBatch
}

// BenchmarkWriteFile times writing one file of the images layout
// (parquettest.Images): small files (50 rows, a table's share
// of a batch when thousands of tables interleave) and large ones, by the
// package's own writer and by pqarrow, compressed or not.
func BenchmarkWriteFile(b *testing.B) {
	rec := imagesRecord()
	for _, rows := range []int{50, 100000} {
		for _, codec := range []string{"zstd", "none"} {
			opts := parquet.Options{Compression: codec, RowGroupRows: 128 * 1024}
			ranges := [][2]int{{0, rows}}
			run := func(b *testing.B, opts parquet.Options) {
				var buf bytes.Buffer
				b.ReportAllocs()
				for b.Loop() {
					buf.Reset()
					if err := parquet.Write(&buf, rec, ranges, opts, memory.DefaultAllocator); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(buf.Len()), "B/file")
				b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			}
			name := fmt.Sprintf("rows=%d/%s", rows, codec)
			b.Run(name+"/own", func(b *testing.B) { run(b, opts) })
			pq := opts
			pq.Pqarrow = true
			b.Run(name+"/pqarrow", func(b *testing.B) { run(b, pq) })
		}
	}
}

// TestWriterTimestampUnits: timestamps land as microseconds. Seconds and
// milliseconds are widened exactly; a nanosecond timestamp with a digit
// below the microsecond fails the write (as pqarrow's does) rather than
// losing it, and so does a value the widening would overflow.
func TestWriterTimestampUnits(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for _, tc := range []struct {
		unit  arrow.TimeUnit
		v     int64
		want  int64 // µs
		fails bool
	}{
		{unit: arrow.Second, v: -2, want: -2_000_000},
		{unit: arrow.Millisecond, v: 1_700_000_000_123, want: 1_700_000_000_123_000},
		{unit: arrow.Microsecond, v: -1, want: -1},
		{unit: arrow.Nanosecond, v: 1_700_000_000_123_456_000, want: 1_700_000_000_123_456},
		{unit: arrow.Nanosecond, v: -7_000, want: -7},
		{unit: arrow.Nanosecond, v: 1_500, fails: true},
		{unit: arrow.Millisecond, v: math.MaxInt64 / 10, fails: true},
		{unit: arrow.Second, v: math.MinInt64 / 100_000, fails: true},
	} {
		sch := arrow.NewSchema([]arrow.Field{{Name: "ts", Type: &arrow.TimestampType{Unit: tc.unit}, Nullable: true}}, nil)
		rb := array.NewRecordBuilder(mem, sch)
		rb.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(tc.v))
		rec := rb.NewRecordBatch()
		rb.Release()
		var buf bytes.Buffer
		err := parquet.Write(&buf, rec, [][2]int{{0, 1}}, testOptions, mem)
		rec.Release()
		if tc.fails {
			if err == nil {
				t.Errorf("%s %d: written, want an error", tc.unit, tc.v)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %d: %v", tc.unit, tc.v, err)
			continue
		}
		got, err := parquet.Int64Column(bytes.NewReader(buf.Bytes()), "ts", memory.DefaultAllocator)
		if err != nil || len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s %d: read %v (%v), want %d µs", tc.unit, tc.v, got, err, tc.want)
		}
	}
}

// FuzzWriter: any rows of the layouts' shapes (NULLs anywhere, structs,
// lists, several row groups, any ranges of them) read back as written,
// with statistics that are those of the values.
func FuzzWriter(f *testing.F) {
	f.Add([]byte("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\xff\xfe\xfd"), uint8(3), uint8(1), uint8(9))
	f.Add(bytes.Repeat([]byte{0xff, 0, 7}, 700), uint8(200), uint8(0), uint8(255))
	f.Fuzz(func(t *testing.T, data []byte, groupRows, from, to uint8) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		sch := arrow.NewSchema([]arrow.Field{
			{Name: "i", Type: arrow.PrimitiveTypes.Int64},
			{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
			{Name: "st", Type: arrow.StructOf(
				arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
				arrow.Field{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
				arrow.Field{Name: "d", Type: &arrow.Decimal128Type{Precision: 18, Scale: 2}, Nullable: true}), Nullable: true},
			{Name: "l", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
			{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		}, nil)
		rb := array.NewRecordBuilder(mem, sch)
		defer rb.Release()
		rows := len(data) / 3
		for r := range rows {
			b0, b1, b2 := data[3*r], data[3*r+1], data[3*r+2]
			rb.Field(0).(*array.Int64Builder).Append(int64(r))
			if b0&1 != 0 {
				rb.Field(1).(*array.StringBuilder).AppendNull()
			} else {
				rb.Field(1).(*array.StringBuilder).Append(string(data[3*r : 3*r+int(b1%3)]))
			}
			st := rb.Field(2).(*array.StructBuilder)
			if b0&2 != 0 {
				st.AppendNull()
			} else {
				st.Append(true)
				if b0&4 != 0 {
					st.FieldBuilder(0).(*array.Int32Builder).AppendNull()
				} else {
					st.FieldBuilder(0).(*array.Int32Builder).Append(int32(int8(b1)) * 1000003)
				}
				if b0&8 != 0 {
					st.FieldBuilder(1).(*array.BooleanBuilder).AppendNull()
				} else {
					st.FieldBuilder(1).(*array.BooleanBuilder).Append(b2&1 != 0)
				}
				if b0&16 != 0 {
					st.FieldBuilder(2).(*array.Decimal128Builder).AppendNull()
				} else {
					st.FieldBuilder(2).(*array.Decimal128Builder).Append(decimalOf(int64(int16(uint16(b1)<<8|uint16(b2))) * 99991))
				}
			}
			lb := rb.Field(3).(*array.ListBuilder)
			if b0&32 != 0 {
				lb.AppendNull()
			} else {
				lb.Append(true)
				for k := range int(b2 % 4) {
					if (b1>>k)&1 != 0 {
						lb.ValueBuilder().(*array.StringBuilder).AppendNull()
					} else {
						lb.ValueBuilder().(*array.StringBuilder).Append(fmt.Sprint(k, b1))
					}
				}
			}
			if b0&64 != 0 {
				rb.Field(4).(*array.Float64Builder).AppendNull()
			} else {
				rb.Field(4).(*array.Float64Builder).Append(float64(int8(b2)) / 4)
			}
		}
		rec := rb.NewRecordBatch()
		defer rec.Release()
		lo, hi := 0, rows
		if rows > 0 {
			lo, hi = int(from)%rows, int(to)%(rows+1)
		}
		ranges := [][2]int{{0, lo}, {lo, hi}, {max(lo, hi), rows}}
		opts := parquet.Options{Compression: "snappy", RowGroupRows: int(groupRows) + 1}
		var buf bytes.Buffer
		enc, err := parquet.NewEncoder(&buf, sch, opts, mem)
		if err != nil || !parquet.Own(enc) {
			t.Fatalf("encoder: %v", err)
		}
		if err := enc.Write(sinks.Part{Record: rec, Ranges: ranges}); err != nil {
			t.Fatal(err)
		}
		if err := enc.Close(); err != nil {
			t.Fatal(err)
		}
		rdr, tbl := readBack(t, mem, buf.Bytes())
		defer rdr.Close()
		defer tbl.Release()
		var want []arrow.RecordBatch
		for _, r := range ranges {
			if r[1] > r[0] {
				want = append(want, rec.NewSlice(int64(r[0]), int64(r[1])))
			}
		}
		wantTbl := array.NewTableFromRecords(sch, want)
		defer wantTbl.Release()
		for _, w := range want {
			w.Release()
		}
		if tbl.NumRows() != wantTbl.NumRows() {
			t.Fatalf("%d rows, wrote %d", tbl.NumRows(), wantTbl.NumRows())
		}
		for c := range int(tbl.NumCols()) {
			if !array.ChunkedEqual(tbl.Column(c).Data(), wantTbl.Column(c).Data()) && !sameValues(tbl.Column(c).Data(), wantTbl.Column(c).Data(), mem) {
				t.Errorf("column %s differs", sch.Field(c).Name)
			}
		}
		checkStats(t, buf.Bytes())
	})
}

// sameValues compares two columns whatever their chunks.
func sameValues(a, b *arrow.Chunked, mem memory.Allocator) bool {
	x, err := array.Concatenate(a.Chunks(), mem)
	if err != nil {
		return false
	}
	defer x.Release()
	y, err := array.Concatenate(b.Chunks(), mem)
	if err != nil {
		return false
	}
	defer y.Release()
	return array.Equal(x, y)
}

// TestWriterLongValues: a block of long byte arrays does not make a page
// much larger than the bound of such pages (a page's size is an int32),
// and reads back whole; the pages do not depend on how the rows came.
func TestWriterLongValues(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "lob", Type: arrow.BinaryTypes.Binary, Nullable: true},
	}, nil)
	rb := array.NewRecordBuilder(mem, sch)
	defer rb.Release()
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 1500 {
		rb.Field(0).(*array.Int64Builder).Append(int64(i))
		if i%7 == 3 {
			rb.Field(1).(*array.BinaryBuilder).AppendNull()
			continue
		}
		v := make([]byte, 5000+r.IntN(20000))
		for k := range v {
			v[k] = byte(r.IntN(256))
		}
		rb.Field(1).(*array.BinaryBuilder).Append(v)
	}
	rec := rb.NewRecordBatch()
	defer rec.Release()
	const bound = 2 << 20
	var whole, split []byte
	opts := parquet.Options{Compression: "none", RowGroupRows: 1 << 20, MaxPage: bound}
	var a, b bytes.Buffer
	if err := parquet.Write(&a, rec, [][2]int{{0, 1500}}, opts, mem); err != nil {
		t.Fatal(err)
	}
	if err := parquet.Write(&b, rec, [][2]int{{0, 17}, {17, 900}, {900, 1500}}, opts, mem); err != nil {
		t.Fatal(err)
	}
	whole, split = a.Bytes(), b.Bytes()
	if !bytes.Equal(whole, split) {
		t.Error("the file depends on how its rows were split")
	}
	rdr, tbl := readBack(t, mem, whole)
	defer rdr.Close()
	defer tbl.Release()
	if !array.Equal(tbl.Column(1).Data().Chunk(0), rec.Column(1)) {
		t.Error("the long values read back differently")
	}
	plain, err := file.NewParquetReader(bytes.NewReader(whole))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	pr, err := plain.RowGroup(0).GetColumnPageReader(1)
	if err != nil {
		t.Fatal(err)
	}
	pages := 0
	for pr.Next() {
		if n := len(pr.Page().Data()); n > bound+25000 {
			t.Errorf("page of %d bytes, over the bound %d by more than a value", n, bound)
		}
		pages++
	}
	if pages < 8 {
		t.Errorf("%d pages for ~20 MB of values", pages)
	}
}

// TestWriterSplitsWithSmallPages: with a bound on pages of byte arrays
// small enough to cut pages inside blocks, a file still does not depend
// on how its rows were split into parts and ranges.
func TestWriterSplitsWithSmallPages(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	edges := edgeRecord(mem)
	defer edges.Release()
	images := parquettest.Images(mem, 3000)
	defer images.Release()
	rng := rand.New(rand.NewPCG(9, 9))
	for _, bound := range []int{100, 5000, 30000} {
		opts := parquet.Options{Compression: "snappy", RowGroupRows: 2500, MaxPage: bound}
		for name, rec := range map[string]arrow.RecordBatch{"edges": edges, "images": images} {
			rows := int(rec.NumRows())
			var whole bytes.Buffer
			if err := parquet.Write(&whole, rec, [][2]int{{0, rows}}, opts, mem); err != nil {
				t.Fatal(err)
			}
			for trial := range 3 {
				parts := randomParts(rec, rng, 700, 300)
				var split bytes.Buffer
				err := parquet.WriteParts(&split, parts, opts, mem)
				for _, p := range parts {
					p.Record.Release()
				}
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(whole.Bytes(), split.Bytes()) {
					t.Errorf("%s, pages of byte arrays up to %d bytes, trial %d: the file depends on the split", name, bound, trial)
				}
			}
		}
	}
}

// TestReadersSeeWhatPqarrowWrites reads files of the own writer and of
// pqarrow, of the same rows, with two other Parquet implementations:
// pyarrow (parquet-cpp) and DuckDB (testdata/readers.py; `make test`
// installs both). Both must see the same schema, values and statistics:
// of every type, of edge values, of the images layout, and of random
// schemas of FuzzWriterSchemas' seeds (nested lists, maps and structs,
// wide decimals, every timestamp unit, each codec).
func TestReadersSeeWhatPqarrowWrites(t *testing.T) {
	py := pyenv.Python(t, "read the files with pyarrow and DuckDB")
	mem := memory.NewGoAllocator()
	cols := slices.DeleteFunc(allTypes(), func(c column) bool { return c.name == "n" })
	types := record(t, mem, cols)
	defer types.Release()
	edges := edgeRecord(mem)
	defer edges.Release()
	images := parquettest.Images(mem, 5000)
	defer images.Release()
	dir := t.TempDir()
	args := []string{"testdata/readers.py"}
	type pair struct {
		name string
		rec  arrow.RecordBatch
		opts parquet.Options
	}
	pairs := []pair{
		{"types", types, parquet.Options{Compression: "zstd", RowGroupRows: 2}},
		{"edges", edges, parquet.Options{Compression: "zstd", RowGroupRows: 1000}},
		{"images", images, parquet.Options{Compression: "snappy", RowGroupRows: 128 * 1024}},
	}
	for seed := range uint64(24) {
		rng := rand.New(rand.NewPCG(seed, seed>>7|1))
		rec := randomRecord(rng, mem, 1+int(seed*37%200))
		defer rec.Release()
		pairs = append(pairs, pair{fmt.Sprintf("random-%d", seed), rec, randomOptions(uint8(seed))})
	}
	for _, tc := range pairs {
		own, pq := writeBoth(t, mem, tc.rec, [][2]int{{0, int(tc.rec.NumRows())}}, tc.opts)
		a, b := filepath.Join(dir, tc.name+"-own.parquet"), filepath.Join(dir, tc.name+"-pqarrow.parquet")
		if err := os.WriteFile(a, own, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(b, pq, 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, a, b)
	}
	out, err := exec.Command(py, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// TestWriterShapesOfSchemas checks that schemas of the same fields share
// what comes from the fields, never what does not: each file keeps its
// schema's metadata, and fields that differ only in their metadata (a
// Parquet field id) keep theirs.
func TestWriterShapesOfSchemas(t *testing.T) {
	mem := memory.NewGoAllocator()
	write := func(sch *arrow.Schema) *file.Reader {
		t.Helper()
		b := array.NewRecordBuilder(mem, sch)
		defer b.Release()
		b.Field(0).(*array.Int64Builder).Append(7)
		b.Field(1).(*array.StringBuilder).Append("x")
		rec := b.NewRecordBatch()
		defer rec.Release()
		var out bytes.Buffer
		enc, err := parquet.NewEncoder(&out, sch, parquet.Options{Compression: "zstd", RowGroupRows: 10}, mem)
		if err != nil {
			t.Fatal(err)
		}
		if err := enc.Write(sinks.Part{Record: rec, Ranges: [][2]int{{0, 1}}}); err != nil {
			t.Fatal(err)
		}
		if err := enc.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := file.NewParquetReader(bytes.NewReader(out.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	fields := func(ids ...string) []arrow.Field {
		fs := []arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}}
		for i, id := range ids {
			fs[i].Metadata = arrow.NewMetadata([]string{"PARQUET:field_id"}, []string{id})
		}
		return fs
	}
	for _, table := range []string{"db.a", "db.b", "db.a"} {
		md := arrow.NewMetadata([]string{"cdclake.table"}, []string{table})
		r := write(arrow.NewSchema(fields(), &md))
		if got := r.MetaData().KeyValueMetadata().FindValue("cdclake.table"); got == nil || *got != table {
			t.Errorf("a file of %s has cdclake.table %v", table, got)
		}
	}
	for _, ids := range [][]string{{"1", "2"}, {"3", "4"}} {
		r := write(arrow.NewSchema(fields(ids...), nil))
		for i, id := range ids {
			if got := r.MetaData().Schema.Column(i).SchemaNode().FieldID(); fmt.Sprint(got) != id {
				t.Errorf("field ids %v: column %d has field id %d", ids, i, got)
			}
		}
	}
}
