package rewrite_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/cdclake/cdclake/sinks/lakehouse/rewrite"
)

func TestBins(t *testing.T) {
	size := func(n int64) int64 { return n }
	for _, tc := range []struct {
		sizes  []int64
		target int64
		want   [][]int64
	}{
		{nil, 10, nil},
		{[]int64{3, 3, 3}, 10, [][]int64{{3, 3, 3}}},
		{[]int64{3, 3, 4, 1}, 10, [][]int64{{3, 3, 4}, {1}}},
		{[]int64{12, 1, 1}, 10, [][]int64{{12}, {1, 1}}},
		{[]int64{5, 5, 5, 5}, 10, [][]int64{{5, 5}, {5, 5}}},
	} {
		got := rewrite.Bins(tc.sizes, size, tc.target)
		if !slices.EqualFunc(got, tc.want, slices.Equal) {
			t.Errorf("Bins(%v, %d) = %v, want %v", tc.sizes, tc.target, got, tc.want)
		}
	}
}

func TestName(t *testing.T) {
	a := rewrite.Name([]string{"t/date=1/a.parquet", "t/date=1/b.parquet"})
	if a != rewrite.Name([]string{"t/date=1/a.parquet", "t/date=1/b.parquet"}) {
		t.Error("the same files get another name")
	}
	if a == rewrite.Name([]string{"t/date=1/a.parquet"}) || a == rewrite.Name([]string{"t/date=1/b.parquet", "t/date=1/a.parquet"}) {
		t.Error("other files get the same name")
	}
}

// parquetFile writes a Parquet file of one column id of idType (and, with extra, a
// string column note), ids from..from+n.
func parquetFile(t *testing.T, idType arrow.DataType, extra bool, from, n int) []byte {
	t.Helper()
	fields := []arrow.Field{{Name: "id", Type: idType, Nullable: true}}
	if extra {
		fields = append(fields, arrow.Field{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true})
	}
	sch := arrow.NewSchema(fields, nil)
	bld := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	defer bld.Release()
	for i := from; i < from+n; i++ {
		switch b := bld.Field(0).(type) {
		case *array.Int64Builder:
			b.Append(int64(i))
		case *array.StringBuilder:
			b.Append(fmt.Sprint(i))
		}
		if extra {
			bld.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("note %d", i))
		}
	}
	rec := bld.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(sch, &buf, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestFiles: the rows of the inputs, in order, under their merged schema
// (NULL where a file lacks a column); schemas that do not merge are
// ErrNoMerge.
func TestFiles(t *testing.T) {
	ctx := context.Background()
	in := []rewrite.Input{
		{Name: "a", R: bytes.NewReader(parquetFile(t, arrow.PrimitiveTypes.Int64, false, 0, 3))},
		{Name: "b", R: bytes.NewReader(parquetFile(t, arrow.PrimitiveTypes.Int64, true, 3, 2))},
		{Name: "c", R: bytes.NewReader(parquetFile(t, arrow.PrimitiveTypes.Int64, false, 5, 1))},
	}
	var out bytes.Buffer
	w, err := rewrite.Files(ctx, &out, in, rewrite.Options{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	if w.Rows != 6 || w.Bytes != int64(out.Len()) || w.Schema.NumFields() != 2 {
		t.Errorf("wrote %+v (%d bytes)", w, out.Len())
	}
	pr, err := file.NewParquetReader(bytes.NewReader(out.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	fr, _ := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	tbl, err := fr.ReadTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	var got []string
	ids, notes := tbl.Column(0).Data().Chunk(0).(*array.Int64), tbl.Column(1).Data().Chunk(0).(*array.String)
	for i := range ids.Len() {
		got = append(got, fmt.Sprintf("%d:%s", ids.Value(i), notes.ValueStr(i)))
	}
	want := []string{"0:(null)", "1:(null)", "2:(null)", "3:note 3", "4:note 4", "5:(null)"}
	if !slices.Equal(got, want) {
		t.Errorf("rows %v, want %v", got, want)
	}
	in = []rewrite.Input{
		{Name: "a", R: bytes.NewReader(parquetFile(t, arrow.PrimitiveTypes.Int64, false, 0, 1))},
		{Name: "b", R: bytes.NewReader(parquetFile(t, arrow.BinaryTypes.String, false, 1, 1))},
	}
	if _, err := rewrite.Files(ctx, &out, in, rewrite.Options{}, memory.DefaultAllocator); !errors.Is(err, rewrite.ErrNoMerge) {
		t.Errorf("an int and a string id: %v, want ErrNoMerge", err)
	}
}
