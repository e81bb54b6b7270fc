// Package sinktest is the conformance suite every sink runs, against every
// store it supports (go-cloud's drivertest in spirit): what a sink wrote
// reads back equal, a failed or cancelled write leaves no object, and the
// same writes give the same objects, byte for byte, on every run.
//
// Run takes a constructor of the sink under test over an empty store;
// RunFaults takes one over a Faulty bucket, a store that fails on purpose.
package sinktest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/cdclake/cdclake/sinks"
	"gocloud.dev/blob"
)

// Sink is what the suite tests: a sink of files and small objects.
type Sink interface {
	sinks.Sink
	sinks.ObjectWriter
	sinks.ObjectCreator
}

// Open returns the sink under test and the bucket it writes to, which the
// suite reads back. The bucket holds nothing under the keys the suite uses.
type Open func(t *testing.T) (Sink, *blob.Bucket)

// Keys the suite writes.
const (
	KeyA    = "db.orders/date=2026-07-13/topic-p0-o00000000000000000000.parquet"
	KeyB    = "db.orders/date=2026-07-14/topic-p3-o00000000000000000042.parquet"
	KeyDead = "_dead_letter/topic-p0-o00000000000000000007.ndjson"
)

// Run runs the suite.
func Run(t *testing.T, open Open) {
	t.Run("ReadsBackEqual", func(t *testing.T) { readsBackEqual(t, open) })
	t.Run("PartsMakeTheSameFile", func(t *testing.T) { partsMakeTheSameFile(t, open) })
	t.Run("Objects", func(t *testing.T) { objectsReadBack(t, open) })
	t.Run("CreateOnce", func(t *testing.T) { createOnce(t, open) })
	t.Run("WriteOnce", func(t *testing.T) { writeOnce(t, open) })
	t.Run("OverwriteReplaces", func(t *testing.T) { overwriteReplaces(t, open) })
	t.Run("SameObjectsEveryRun", func(t *testing.T) { sameObjectsEveryRun(t, open) })
	t.Run("CancelledWriteLeavesNothing", func(t *testing.T) { cancelledWriteLeavesNothing(t, open) })
}

// readsBackEqual checks that a file written reads back with the rows it
// was given, and that Write returns the size of the object it made.
func readsBackEqual(t *testing.T, open Open) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s, b := open(t)
	rec := Record(mem, 10, 0)
	defer rec.Release()
	f := NewFile(KeyA, rec, [][2]int{{0, 3}, {5, 10}})
	n, err := s.Write(context.Background(), f)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	attrs, err := b.Attributes(context.Background(), KeyA)
	if err != nil {
		t.Fatalf("the written object is missing: %v", err)
	}
	if attrs.Size != n {
		t.Errorf("Write returned %d bytes, the object has %d", n, attrs.Size)
	}
	CheckRows(t, mem, b, KeyA, rec, f.Parts[0].Ranges)
	CheckFooter(t, b, f)
}

// CheckFooter checks that the footer a Write kept (sinks.File.Footer), if
// any, is the stored file's own: its last bytes before the footer's
// length and PAR1.
func CheckFooter(t *testing.T, b *blob.Bucket, f *sinks.File) {
	t.Helper()
	if f.Footer == nil {
		return
	}
	data, err := b.ReadAll(context.Background(), f.Key)
	if err != nil {
		t.Fatal(err)
	}
	n := len(f.Footer)
	if len(data) < n+8 || !bytes.Equal(data[len(data)-8-n:len(data)-8], f.Footer) || string(data[len(data)-4:]) != "PAR1" {
		t.Errorf("the footer Write kept (%d bytes) is not %s's", n, f.Key)
	}
}

// partsMakeTheSameFile checks that the same rows split into parts at other
// places make the same file, byte for byte.
func partsMakeTheSameFile(t *testing.T, open Open) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s, b := open(t)
	rec := Record(mem, 10, 0)
	defer rec.Release()
	whole := NewFile(KeyA, rec, [][2]int{{0, 3}, {5, 10}})
	if _, err := s.Write(context.Background(), whole); err != nil {
		t.Fatalf("Write: %v", err)
	}
	want, err := b.ReadAll(context.Background(), KeyA)
	if err != nil {
		t.Fatal(err)
	}
	head, tail := rec.NewSlice(0, 6), rec.NewSlice(6, 10)
	defer head.Release()
	defer tail.Release()
	split := NewFile(KeyB, rec, [][2]int{{0, 3}, {5, 10}})
	split.Parts = []sinks.Part{{Record: head, Ranges: [][2]int{{0, 2}}}, {Record: head, Ranges: [][2]int{{2, 3}, {5, 6}}},
		{Record: tail, Ranges: [][2]int{{0, 4}}}}
	if _, err := s.Write(context.Background(), split); err != nil {
		t.Fatalf("Write: %v", err)
	}
	got, err := b.ReadAll(context.Background(), KeyB)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the rows in three parts make another file (%d bytes) than in one (%d)", len(got), len(want))
	}
}

// objectsReadBack checks that a small object written reads back equal.
func objectsReadBack(t *testing.T, open Open) {
	s, b := open(t)
	data := []byte(`{"source":"topic","offset":7,"reason":"x"}` + "\n")
	if err := s.WriteObject(context.Background(), KeyDead, data, "application/x-ndjson"); err != nil {
		t.Fatalf("WriteObject: %v", err)
	}
	got, err := b.ReadAll(context.Background(), KeyDead)
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("read back %q, %v; want %q", got, err, data)
	}
}

// createOnce checks that CreateObject refuses a key that exists with
// ErrExists and leaves the first object as it was.
func createOnce(t *testing.T, open Open) {
	s, b := open(t)
	const key = "_cdclake/state/topic/p0/00000000000000000001.json"
	ctx := context.Background()
	if err := s.CreateObject(ctx, key, []byte(`{"seq":1,"owner":"a"}`), "application/json"); err != nil {
		t.Fatalf("CreateObject: %v", err)
	}
	err := s.CreateObject(ctx, key, []byte(`{"seq":1,"owner":"b"}`), "application/json")
	if !errors.Is(err, sinks.ErrExists) {
		t.Fatalf("a second CreateObject of the same key: %v, want ErrExists", err)
	}
	if got, err := b.ReadAll(ctx, key); err != nil || string(got) != `{"seq":1,"owner":"a"}` {
		t.Errorf("the first object was replaced: %s, %v", got, err)
	}
}

// writeOnce checks a create-once file large enough for a multipart upload:
// again with the same bytes (a retry after a lost reply) it succeeds, with
// other bytes it is refused and the object stays.
func writeOnce(t *testing.T, open Open) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s, b := open(t)
	ctx := context.Background()
	first, other := Record(mem, 80_000, 0), Record(mem, 5, 100)
	defer first.Release()
	defer other.Release()
	f := NewFile(KeyA, first, [][2]int{{0, 80_000}})
	f.Once = true
	n, err := s.Write(ctx, f)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	if n <= 16<<20 {
		t.Errorf("the file has %d bytes: too few for a multipart upload", n)
	}
	if again, err := s.Write(ctx, f); err != nil || again != n {
		t.Errorf("the same create-once file again: %d bytes, %v; want %d, nil", again, err, n)
	}
	g := NewFile(KeyA, other, [][2]int{{0, 5}})
	g.Once = true
	if _, err := s.Write(ctx, g); !errors.Is(err, sinks.ErrExists) {
		t.Fatalf("another create-once file under the key: %v, want ErrExists", err)
	}
	if attrs, err := b.Attributes(ctx, KeyA); err != nil || attrs.Size != n {
		t.Errorf("the first file was replaced: %v, %v", attrs, err)
	}
}

// overwriteReplaces checks that a file written again under the same key
// replaces the one before.
func overwriteReplaces(t *testing.T, open Open) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s, b := open(t)
	first, second := Record(mem, 8, 0), Record(mem, 5, 100)
	defer first.Release()
	defer second.Release()
	for _, rec := range []arrow.RecordBatch{first, second} {
		if _, err := s.Write(context.Background(), NewFile(KeyA, rec, [][2]int{{0, int(rec.NumRows())}})); err != nil {
			t.Fatalf("Write: %v", err)
		}
	}
	CheckRows(t, mem, b, KeyA, second, [][2]int{{0, 5}})
}

// sameObjectsEveryRun checks that the same writes, in two runs over empty
// stores, make exactly the suite's objects, with the same bytes.
func sameObjectsEveryRun(t *testing.T, open Open) {
	var runs [2]map[string][]byte
	for i := range runs {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		s, b := open(t)
		writeAll(t, mem, s)
		runs[i] = objects(t, b)
		mem.AssertSize(t, 0)
	}
	want := []string{KeyDead, KeyA, KeyB}
	slices.Sort(want)
	if got := slices.Sorted(mapsKeys(runs[0])); !slices.Equal(got, want) {
		t.Errorf("objects %q, want exactly %q", got, want)
	}
	for k, v := range runs[0] {
		if !bytes.Equal(v, runs[1][k]) {
			t.Errorf("%s: the same write gave different bytes in two runs", k)
		}
	}
}

// cancelledWriteLeavesNothing checks that writes with a cancelled context
// fail and leave no object.
func cancelledWriteLeavesNothing(t *testing.T, open Open) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s, b := open(t)
	rec := Record(mem, 10, 0)
	defer rec.Release()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Write(ctx, NewFile(KeyA, rec, [][2]int{{0, 10}})); err == nil {
		t.Error("Write with a cancelled context succeeded")
	}
	if err := s.WriteObject(ctx, KeyDead, []byte("x\n"), "application/x-ndjson"); err == nil {
		t.Error("WriteObject with a cancelled context succeeded")
	}
	if objs := objects(t, b); len(objs) != 0 {
		t.Errorf("a cancelled write left %q", slices.Sorted(mapsKeys(objs)))
	}
}

// OpenFaulty returns the sink under test writing through a Faulty bucket
// over an empty store, the control of its faults, and the store itself.
type OpenFaulty func(t *testing.T) (Sink, *FaultControl, *blob.Bucket)

// RunFaults checks that every way a store can fail a write leaves no
// object, and that the write succeeds once the store is back.
func RunFaults(t *testing.T, open OpenFaulty) {
	for _, tc := range []struct {
		name string
		f    Faults
	}{
		{"OnOpen", Faults{OnOpen: true}},
		{"FirstByte", Faults{AfterBytes: 1}},
		{"MidUpload", Faults{AfterBytes: 300}},
		{"OnClose", Faults{OnClose: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			s, ctl, store := open(t)
			rec := Record(mem, 50, 0)
			defer rec.Release()
			f := NewFile(KeyA, rec, [][2]int{{0, 50}})
			ctl.SetFaults(tc.f)
			if _, err := s.Write(context.Background(), f); !errors.Is(err, ErrInjected) {
				t.Errorf("Write: error %v, want the injected failure", err)
			}
			dead := bytes.Repeat([]byte(`{"reason":"a dead letter long enough to fail mid-upload"}`+"\n"), 20)
			if err := s.WriteObject(context.Background(), KeyDead, dead, "application/x-ndjson"); !errors.Is(err, ErrInjected) {
				t.Errorf("WriteObject: error %v, want the injected failure", err)
			}
			if objs := objects(t, store); len(objs) != 0 {
				t.Fatalf("a failed write left %q", slices.Sorted(mapsKeys(objs)))
			}
			// The store is back: the same file is written in full.
			ctl.SetFaults(Faults{})
			if _, err := s.Write(context.Background(), f); err != nil {
				t.Fatalf("Write after the store came back: %v", err)
			}
			CheckRows(t, mem, store, KeyA, rec, f.Parts[0].Ranges)
		})
	}
}

// writeAll writes the suite's objects.
func writeAll(t *testing.T, mem memory.Allocator, s Sink) {
	t.Helper()
	a, b := Record(mem, 20, 0), Record(mem, 7, 1000)
	defer a.Release()
	defer b.Release()
	ctx := context.Background()
	if _, err := s.Write(ctx, NewFile(KeyA, a, [][2]int{{0, 20}})); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, NewFile(KeyB, b, [][2]int{{1, 7}})); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteObject(ctx, KeyDead, []byte("{}\n"), "application/x-ndjson"); err != nil {
		t.Fatal(err)
	}
}

// objects returns every object of a bucket with its bytes.
func objects(t *testing.T, b *blob.Bucket) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	it := b.List(nil)
	for {
		obj, err := it.Next(context.Background())
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := b.ReadAll(context.Background(), obj.Key)
		if err != nil {
			t.Fatal(err)
		}
		out[obj.Key] = data
	}
}

func mapsKeys(m map[string][]byte) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// NewFile returns a file of rec's rows in ranges, under key.
func NewFile(key string, rec arrow.RecordBatch, ranges [][2]int) *sinks.File {
	rows := 0
	for _, r := range ranges {
		rows += r[1] - r[0]
	}
	return &sinks.File{Key: key, Table: "db.orders", Version: 1, Parts: []sinks.Part{{Record: rec, Ranges: ranges}}, Rows: rows,
		First: sinks.Position{Source: "topic", Offset: int64(ranges[0][0])}, LastOffset: int64(ranges[len(ranges)-1][1] - 1),
		Options: sinks.WriteOptions{Compression: "zstd", RowGroupRows: 4}}
}

var recordSchema = arrow.NewSchema([]arrow.Field{
	{Name: "_cdc_offset", Type: arrow.PrimitiveTypes.Int64},
	{Name: "_cdc_ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "amount", Type: &arrow.Decimal128Type{Precision: 20, Scale: 4}, Nullable: true},
	{Name: "raw", Type: arrow.BinaryTypes.Binary, Nullable: true},
	{Name: "after", Type: arrow.StructOf(
		arrow.Field{Name: "id", Type: arrow.PrimitiveTypes.Int32},
		arrow.Field{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	), Nullable: true},
}, nil)

// Record builds n rows of a record shaped like the lake's, with NULLs,
// empty values, extremes and non-ASCII text; seed varies the values.
func Record(mem memory.Allocator, n, seed int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, recordSchema)
	defer b.Release()
	off := b.Field(0).(*array.Int64Builder)
	ts := b.Field(1).(*array.TimestampBuilder)
	name := b.Field(2).(*array.StringBuilder)
	amount := b.Field(3).(*array.Decimal128Builder)
	raw := b.Field(4).(*array.BinaryBuilder)
	after := b.Field(5).(*array.StructBuilder)
	id := after.FieldBuilder(0).(*array.Int32Builder)
	tags := after.FieldBuilder(1).(*array.ListBuilder)
	tag := tags.ValueBuilder().(*array.StringBuilder)
	for i := range n {
		v := seed + i
		off.Append(int64(v))
		if v%7 == 3 {
			ts.AppendNull()
		} else {
			ts.Append(arrow.Timestamp(1783915261123456 + int64(v)*1000001))
		}
		switch v % 4 {
		case 0:
			name.AppendNull()
		case 1:
			name.Append("")
		default:
			name.Append("naïve ✓ " + string(rune('a'+v%26)))
		}
		amount.Append(decimal128.FromI64(int64(v)*12345 - 99999999))
		if v%5 == 0 {
			raw.AppendNull()
		} else {
			raw.Append([]byte{byte(v), 0, 0xff})
		}
		if v%6 == 5 {
			after.AppendNull()
			continue
		}
		after.Append(true)
		id.Append(int32(v))
		if v%3 == 0 {
			tags.AppendNull()
		} else {
			tags.Append(true)
			tag.Append("x")
			tag.Append("ü")
		}
	}
	return b.NewRecordBatch()
}

// CheckRows reads the Parquet object key back and compares its rows with
// want's rows in ranges, value for value.
func CheckRows(t *testing.T, mem memory.Allocator, b *blob.Bucket, key string, want arrow.RecordBatch, ranges [][2]int) {
	t.Helper()
	data, err := b.ReadAll(context.Background(), key)
	if err != nil {
		t.Fatalf("reading %s: %v", key, err)
	}
	rdr, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s is not a Parquet file: %v", key, err)
	}
	defer rdr.Close()
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, mem)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	var slices []arrow.RecordBatch
	for _, r := range ranges {
		slices = append(slices, want.NewSlice(int64(r[0]), int64(r[1])))
	}
	expect := array.NewTableFromRecords(want.Schema(), slices)
	for _, s := range slices {
		s.Release()
	}
	defer expect.Release()
	if tbl.NumRows() != expect.NumRows() || tbl.NumCols() != expect.NumCols() {
		t.Fatalf("%s: %d rows × %d columns, want %d × %d", key, tbl.NumRows(), tbl.NumCols(), expect.NumRows(), expect.NumCols())
	}
	for i := range int(expect.NumCols()) {
		got, exp := tbl.Column(i), expect.Column(i)
		if !arrow.TypeEqual(got.DataType(), exp.DataType()) {
			t.Errorf("%s column %s: type %s, want %s", key, exp.Name(), got.DataType(), exp.DataType())
			continue
		}
		g, err := array.Concatenate(got.Data().Chunks(), mem)
		if err != nil {
			t.Fatal(err)
		}
		e, err := array.Concatenate(exp.Data().Chunks(), mem)
		if err != nil {
			t.Fatal(err)
		}
		if !array.Equal(g, e) {
			t.Errorf("%s column %s:\n got %s\nwant %s", key, exp.Name(), g, e)
		}
		g.Release()
		e.Release()
	}
}
