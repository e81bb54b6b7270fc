package schema

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/valyala/fastjson"
)

// benchRow is a realistic row: GoldenGate style, exact numbers and ISO text
// dates.
const benchRow = `{"ID":1234567,"NAME":"Ada Lovelace","AMOUNT":18043674494432.4369,
	"BALANCE":9999999999999999999.25,"UPDATED":"2015-11-05 18:45:36.123456","CREATED":"2024-01-31 00:00:00",
	"ACTIVE":true,"RATE":0.0425,"ATTRS":{"tier":"gold","tags":["a","b"]},"BLOB":"AAECAwQFBgcICQ=="}`

var benchCols = []Column{
	{Name: "ID", Type: Type{Kind: Int64}},
	{Name: "NAME", Type: Type{Kind: String}},
	{Name: "AMOUNT", Type: Type{Kind: Decimal, Precision: 38, Scale: 4}},
	{Name: "BALANCE", Type: Type{Kind: DecimalText}},
	{Name: "UPDATED", Type: Type{Kind: Timestamp, Unit: Micros}},
	{Name: "CREATED", Type: Type{Kind: Date}},
	{Name: "ACTIVE", Type: Type{Kind: Bool}},
	{Name: "RATE", Type: Type{Kind: Float64}},
	{Name: "ATTRS", Type: Type{Kind: JSON}},
	{Name: "BLOB", Type: Type{Kind: Binary}},
}

// BenchmarkAppendColumn appends one value of each column of benchRow, per
// column, to show where a row's time and allocations go.
func BenchmarkAppendColumn(b *testing.B) {
	row, err := fastjson.Parse(benchRow)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range benchCols {
		b.Run(c.Name+"_"+c.Type.Kind.String(), func(b *testing.B) {
			v := row.Get(c.Name)
			bl := array.NewBuilder(memory.NewGoAllocator(), c.Type.Arrow())
			defer bl.Release()
			app := NewConverters(memory.NewGoAllocator()).Compile(c.Name, c.Type, bl)
			b.ReportAllocs()
			for i := range b.N {
				if err := app(v); err != nil {
					b.Fatal(err)
				}
				if i%4096 == 4095 {
					bl.NewArray().Release()
				}
			}
		})
	}
}

// BenchmarkCompileAppendRow appends a realistic 10-column row (GoldenGate
// style: exact numbers, ISO text dates) through compiled appenders.
func BenchmarkCompileAppendRow(b *testing.B) {
	cols := benchCols
	row, err := fastjson.Parse(benchRow)
	if err != nil {
		b.Fatal(err)
	}
	obj := row.GetObject()
	vals := make([]*fastjson.Value, len(cols))
	for i, c := range cols {
		vals[i] = obj.Get(c.Name)
	}
	mem := memory.NewGoAllocator()
	builders := make([]array.Builder, len(cols))
	apps := make([]Appender, len(cols))
	conv := NewConverters(mem)
	defer conv.Release()
	for i, c := range cols {
		builders[i] = array.NewBuilder(mem, c.Type.Arrow())
		defer builders[i].Release()
		apps[i] = conv.Compile(c.Name, c.Type, builders[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		for j, app := range apps {
			if err := app(vals[j]); err != nil {
				b.Fatal(err)
			}
		}
		if i%4096 == 4095 {
			for _, bl := range builders {
				bl.NewArray().Release()
			}
		}
	}
}

// BenchmarkTextColumn appends the text values of a file's chunk (1,024
// rows, a third of them NULL, as a partial image's columns are) and makes
// the chunk's array, into a TextColumn and into Arrow's string builder
// started afresh for each chunk, as a file's builders are after each
// record they hand over.
func BenchmarkTextColumn(b *testing.B) {
	vals := make([][]byte, 1024)
	for i := range vals {
		if i%3 != 0 {
			vals[i] = []byte("name-" + string(rune('a'+i%26)) + "-value")
		}
	}
	mem := memory.NewGoAllocator()
	b.Run("TextColumn", func(b *testing.B) {
		col := NewTextColumn()
		for b.Loop() {
			for _, v := range vals {
				if v == nil {
					col.AppendNull()
				} else {
					col.Append(v)
				}
			}
			col.NewArray(mem).Release()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(vals)), "ns/value")
	})
	b.Run("StringBuilder", func(b *testing.B) {
		for b.Loop() {
			sb := array.NewStringBuilder(mem)
			for _, v := range vals {
				if v == nil {
					sb.AppendNull()
				} else {
					sb.BinaryBuilder.Append(v)
				}
			}
			sb.NewArray().Release()
			sb.Release()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(vals)), "ns/value")
	})
}
