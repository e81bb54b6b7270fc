package parquet_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/sinks/parquet"
)

// FuzzWriterSchemas writes random schemas of every type the own writer
// covers (structs, lists and maps nested up to three deep, decimals up to
// 38 digits, every timestamp unit, binary, nullable or not at every level)
// filled with random values and NULLs, with the own writer and with
// pqarrow, under zstd, snappy or no compression, and requires the same
// file: schema, footer keys, row groups, statistics and values read back.
func FuzzWriterSchemas(f *testing.F) {
	for seed := range uint64(8) {
		f.Add(seed, uint8(seed*37), uint8(seed))
	}
	f.Fuzz(func(t *testing.T, seed uint64, rows, setting uint8) {
		rng := rand.New(rand.NewPCG(seed, seed>>7|1))
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		rec := randomRecord(rng, mem, int(rows))
		defer rec.Release()
		n := int(rows)
		opts := randomOptions(setting)
		lo := 0
		if n > 0 {
			lo = rng.IntN(n)
		}
		own, pq := writeBoth(t, mem, rec, [][2]int{{0, lo}, {lo, n}}, opts)
		sameFile(t, mem, own, pq)
	})
}

// randomRecord returns n rows of a random schema of one to five columns
// (randomType) with random values and NULLs.
func randomRecord(rng *rand.Rand, mem memory.Allocator, n int) arrow.RecordBatch {
	var fields []arrow.Field
	for i := range 1 + rng.IntN(5) {
		fields = append(fields, arrow.Field{Name: fmt.Sprintf("c%d", i), Type: randomType(rng, 3), Nullable: rng.IntN(3) > 0})
	}
	rb := array.NewRecordBuilder(mem, arrow.NewSchema(fields, nil))
	defer rb.Release()
	for range n {
		for i, fld := range fields {
			appendRandom(rng, rb.Field(i), fld.Type, fld.Nullable)
		}
	}
	return rb.NewRecordBatch()
}

// randomOptions returns the codec and row group size a setting picks.
func randomOptions(setting uint8) parquet.Options {
	codec := []string{"zstd", "snappy", "none"}[int(setting)%3]
	return parquet.Options{Compression: codec, RowGroupRows: 1 + int(setting)%97}
}

// randomType returns a type the own writer covers, nested up to depth.
func randomType(rng *rand.Rand, depth int) arrow.DataType {
	k := rng.IntN(19)
	if depth == 0 {
		k = rng.IntN(16)
	}
	switch k {
	case 0:
		return arrow.FixedWidthTypes.Boolean
	case 1:
		return arrow.PrimitiveTypes.Int8
	case 2:
		return arrow.PrimitiveTypes.Int16
	case 3:
		return arrow.PrimitiveTypes.Int32
	case 4:
		return arrow.PrimitiveTypes.Int64
	case 5:
		return arrow.FixedWidthTypes.Date32
	case 6:
		return arrow.FixedWidthTypes.Time32ms
	case 7:
		return arrow.FixedWidthTypes.Time64us
	case 8, 9:
		units := []arrow.TimeUnit{arrow.Second, arrow.Millisecond, arrow.Microsecond, arrow.Nanosecond}
		zones := []string{"", "UTC"}
		return &arrow.TimestampType{Unit: units[rng.IntN(4)], TimeZone: zones[rng.IntN(2)]}
	case 10:
		return arrow.PrimitiveTypes.Float32
	case 11:
		return arrow.PrimitiveTypes.Float64
	case 12:
		return arrow.BinaryTypes.String
	case 13:
		return arrow.BinaryTypes.Binary
	case 14, 15:
		p := int32(1 + rng.IntN(38))
		return &arrow.Decimal128Type{Precision: p, Scale: int32(rng.IntN(int(p) + 1))}
	case 16:
		var fs []arrow.Field
		for i := range 1 + rng.IntN(3) {
			fs = append(fs, arrow.Field{Name: fmt.Sprintf("f%d", i), Type: randomType(rng, depth-1), Nullable: rng.IntN(3) > 0})
		}
		return arrow.StructOf(fs...)
	case 17:
		return arrow.ListOfField(arrow.Field{Name: "element", Type: randomType(rng, depth-1), Nullable: rng.IntN(3) > 0})
	default:
		m := arrow.MapOf(arrow.BinaryTypes.String, randomType(rng, depth-1))
		m.SetItemNullable(rng.IntN(3) > 0)
		return m
	}
}

// appendRandom appends a random value of t (NULL now and then where
// nullable) to b.
func appendRandom(rng *rand.Rand, b array.Builder, t arrow.DataType, nullable bool) {
	if nullable && rng.IntN(5) == 0 {
		b.AppendNull()
		return
	}
	switch b := b.(type) {
	case *array.BooleanBuilder:
		b.Append(rng.IntN(2) == 0)
	case *array.Int8Builder:
		b.Append(int8(rng.Uint32()))
	case *array.Int16Builder:
		b.Append(int16(rng.Uint32()))
	case *array.Int32Builder:
		b.Append(int32(rng.Uint32()))
	case *array.Int64Builder:
		b.Append(int64(rng.Uint64()))
	case *array.Date32Builder:
		b.Append(arrow.Date32(rng.IntN(200000) - 100000))
	case *array.Time32Builder:
		b.Append(arrow.Time32(rng.IntN(86400000)))
	case *array.Time64Builder:
		b.Append(arrow.Time64(rng.Int64N(86400000000)))
	case *array.TimestampBuilder:
		v := rng.Int64N(4e12) - 2e12 // seconds to microseconds in range
		if t.(*arrow.TimestampType).Unit == arrow.Nanosecond {
			v *= 1000 // whole microseconds: the writer refuses finer
		}
		b.Append(arrow.Timestamp(v))
	case *array.Float32Builder:
		b.Append([]float32{0, float32(math.Copysign(0, -1)), float32(math.NaN()), float32(math.Inf(1)), rng.Float32() * 1e6}[rng.IntN(5)])
	case *array.Float64Builder:
		b.Append([]float64{0, math.Copysign(0, -1), math.NaN(), math.Inf(-1), rng.NormFloat64() * 1e9}[rng.IntN(5)])
	case *array.StringBuilder:
		b.Append(randomText(rng))
	case *array.BinaryBuilder:
		b.Append([]byte(randomText(rng)))
	case *array.Decimal128Builder:
		p := t.(*arrow.Decimal128Type).Precision
		hi := decimal128.GetMaxValue(p)
		v := decimal128.FromI64(rng.Int64())
		if p > 18 {
			v = v.Mul(decimal128.FromI64(rng.Int64()))
		}
		_, v = v.Div(hi.Add(decimal128.FromI64(1)))
		if rng.IntN(2) == 0 {
			v = v.Negate()
		}
		b.Append(v)
	case *array.StructBuilder:
		b.Append(true)
		st := t.(*arrow.StructType)
		for i, f := range st.Fields() {
			appendRandom(rng, b.FieldBuilder(i), f.Type, f.Nullable)
		}
	case *array.ListBuilder:
		b.Append(true)
		el := t.(*arrow.ListType).ElemField()
		for range rng.IntN(4) {
			appendRandom(rng, b.ValueBuilder(), el.Type, el.Nullable)
		}
	case *array.MapBuilder:
		b.Append(true)
		mt := t.(*arrow.MapType)
		for k := range rng.IntN(4) {
			b.KeyBuilder().(*array.StringBuilder).Append(fmt.Sprint("k", k))
			appendRandom(rng, b.ItemBuilder(), mt.ItemType(), mt.ItemField().Nullable)
		}
	default:
		panic(fmt.Sprintf("no random values of %s", t))
	}
}

func randomText(rng *rand.Rand) string {
	return []string{"", "a", "naïve", "line\nbreak", "😀", string(make([]byte, rng.IntN(300)))}[rng.IntN(6)]
}
