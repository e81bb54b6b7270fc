package icebergsql

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// TestFooterBounds checks the partition bounds read from a footer's row
// group statistics against iceberg-go's own, for each column type the
// shortcut answers for, with a row group of NULLs only among others, a
// column of NULLs only, and row groups out of order.
func TestFooterBounds(t *testing.T) {
	mem := memory.NewGoAllocator()
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "us", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
		{Name: "ns", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}, Nullable: true},
		{Name: "tz", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "d", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		{Name: "none", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(sch, &buf, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(3)),
		pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(mem, sch)
	// Three row groups: later values first, then NULLs only, then the
	// earliest, so that neither the first nor the last group holds a bound.
	base := int64(1_780_000_000_000_000) // a microsecond in 2026
	rows := []struct {
		v    int64
		null bool
	}{{base + 5_000_000, false}, {base + 9_000_000, false}, {base + 7_000_000, false},
		{0, true}, {0, true}, {0, true},
		{base + 1_000_000, false}, {base + 3_000_000, false}, {0, true}}
	for _, r := range rows {
		for i := range 4 {
			if r.null {
				b.Field(i).AppendNull()
				continue
			}
			switch i {
			case 1:
				b.Field(i).(*array.TimestampBuilder).Append(arrow.Timestamp(r.v*1000 + 17))
			case 3:
				b.Field(i).(*array.Date32Builder).Append(arrow.Date32(r.v / 86_400_000_000))
			default:
				b.Field(i).(*array.TimestampBuilder).Append(arrow.Timestamp(r.v))
			}
		}
		b.Field(4).AppendNull()
		b.Field(5).(*array.Int64Builder).Append(r.v)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rd, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	md := rd.MetaData()
	if md.NumRowGroups() != 3 {
		t.Fatalf("%d row groups, want 3", md.NumRowGroups())
	}
	isch, err := table.ArrowSchemaToIcebergWithFreshIDs(sch, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		col       string
		transform iceberg.Transform
		answers   bool
	}{
		{"us", iceberg.DayTransform{}, true},
		{"us", iceberg.HourTransform{}, true},
		{"ns", iceberg.DayTransform{}, true},
		{"tz", iceberg.MonthTransform{}, true},
		{"d", iceberg.YearTransform{}, true},
		{"none", iceberg.DayTransform{}, true},
		{"n", iceberg.IdentityTransform{}, false},
	} {
		f, ok := isch.FindFieldByName(tc.col)
		if !ok {
			t.Fatalf("no column %s", tc.col)
		}
		spec := iceberg.NewPartitionSpec(iceberg.PartitionField{SourceIDs: []int{f.ID}, FieldID: 1000, Name: "p", Transform: tc.transform})
		bounds, ok := footerBounds(spec, isch, md)
		if ok != tc.answers {
			t.Errorf("%s: answers %v, want %v", tc.col, ok, tc.answers)
			continue
		}
		if !ok {
			continue
		}
		df, err := table.DataFileFromMetadata(table.DataFileArgs{Schema: isch, Spec: *iceberg.UnpartitionedSpec,
			Format: iceberg.ParquetFile, Metadata: md, FilePath: "f.parquet", FileSize: int64(buf.Len()),
			Content: iceberg.EntryContentData, FormatVersion: 3})
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := bounds(f.ID)
		if !bytes.Equal(lo, df.LowerBoundValues()[f.ID]) || !bytes.Equal(hi, df.UpperBoundValues()[f.ID]) {
			t.Errorf("%s: bounds %x..%x, iceberg-go's %x..%x", tc.col, lo, hi, df.LowerBoundValues()[f.ID], df.UpperBoundValues()[f.ID])
		}
		if tc.col != "none" && lo == nil {
			t.Errorf("%s: no bounds", tc.col)
		}
	}
}
