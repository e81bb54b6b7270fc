package parquet_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/parquet"
)

// TestSplitsMakeTheSameFile writes the same rows whole and split into
// parts and ranges at random places: the files must be identical byte for
// byte, also when data pages fill up (pages are cut where the writer's
// batches end, so the writer must see the rows in the same batches however
// they were split). Every column is plain: a column falling back from a
// dictionary would have its two page encodings listed in the footer in map
// order, which differs from run to run whatever the rows.
func TestSplitsMakeTheSameFile(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "_cdc_offset", Type: arrow.PrimitiveTypes.Int64},
		// Its pages fill up and are cut where a batch ends.
		{Name: "_cdc_pos", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "status", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "absent", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	}, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	const rows = 70000
	rb := array.NewRecordBuilder(mem, sch)
	defer rb.Release()
	for i := range rows {
		rb.Field(0).(*array.Int64Builder).Append(int64(i))
		rb.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("customer %08x %d", rng.Uint64(), i))
		rb.Field(2).(*array.StringBuilder).Append([]string{"new", "paid", "shipped", "returned"}[rng.IntN(4)])
		lb := rb.Field(3).(*array.ListBuilder)
		lb.Append(true)
		for range rng.IntN(4) {
			lb.ValueBuilder().(*array.StringBuilder).Append(fmt.Sprintf("column_%d", rng.IntN(40)))
		}
	}
	rec := rb.NewRecordBatch()
	defer rec.Release()
	opts := parquet.Options{Compression: "zstd", RowGroupRows: 1 << 20}
	var whole bytes.Buffer
	if err := parquet.Write(&whole, rec, [][2]int{{0, rows}}, opts, mem); err != nil {
		t.Fatal(err)
	}
	for trial := range 4 {
		parts := randomParts(rec, rng, 9000, 3000)
		var split bytes.Buffer
		err := parquet.WriteParts(&split, parts, opts, mem)
		for _, p := range parts {
			p.Record.Release()
		}
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(whole.Bytes(), split.Bytes()) {
			a, b := whole.Bytes(), split.Bytes()
			i := 0
			for i < len(a) && i < len(b) && a[i] == b[i] {
				i++
			}
			t.Logf("first difference at byte %d: %q vs %q", i, a[max(0, i-40):min(len(a), i+40)], b[max(0, i-40):min(len(b), i+40)])
			t.Fatalf("trial %d: %d parts make a file of %d bytes that differs from the whole's %d bytes",
				trial, len(parts), split.Len(), whole.Len())
		}
	}
}

// randomParts splits rec's rows into parts of random lengths (up to
// maxPart rows), slices of rec, each a few ranges (up to maxRange rows) of
// itself. The caller releases the parts' records.
func randomParts(rec arrow.RecordBatch, rng *rand.Rand, maxPart, maxRange int) []sinks.Part {
	rows := int(rec.NumRows())
	var parts []sinks.Part
	for lo := 0; lo < rows; {
		hi := min(rows, lo+1+rng.IntN(maxPart))
		var ranges [][2]int
		for a := 0; a < hi-lo; {
			b := min(hi-lo, a+1+rng.IntN(maxRange))
			ranges = append(ranges, [2]int{a, b})
			a = b
		}
		parts = append(parts, sinks.Part{Record: rec.NewSlice(int64(lo), int64(hi)), Ranges: ranges})
		lo = hi
	}
	return parts
}
