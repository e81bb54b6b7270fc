package delta_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/cdclake/cdclake/sinks/lake"
	"github.com/cdclake/cdclake/sinks/lakehouse"
	"github.com/cdclake/cdclake/sinks/lakehouse/delta"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"
)

// rowsOf returns the rows of files, each as offset/id/name/email (NULL:
// "-"), in file order and row order within each.
func rowsOf(t *testing.T, b *blob.Bucket, keys []string) []string {
	t.Helper()
	var out []string
	for _, k := range keys {
		data, err := b.ReadAll(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		pr, err := file.NewParquetReader(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{BatchSize: 1 << 10}, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		tbl, err := fr.ReadTable(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		tr := array.NewTableReader(tbl, 1<<10)
		for tr.Next() {
			rec := tr.RecordBatch()
			offs := rec.Column(rec.Schema().FieldIndices("_cdc_offset")[0]).(*array.Int64)
			after := rec.Column(rec.Schema().FieldIndices("after")[0]).(*array.Struct)
			st := after.DataType().(*arrow.StructType)
			for i := range int(rec.NumRows()) {
				row := fmt.Sprint(offs.Value(i))
				for _, name := range []string{"id", "name", "email"} {
					idx, ok := st.FieldIdx(name)
					if !ok || after.Field(idx).IsNull(i) {
						row += "/-"
						continue
					}
					row += "/" + after.Field(idx).ValueStr(i)
				}
				out = append(out, row)
			}
		}
		tr.Release()
		tbl.Release()
		pr.Close()
	}
	return out
}

// newestCommit returns the actions of a table's newest version.
func newestCommit(t *testing.T, b *blob.Bucket, table string) []map[string]json.RawMessage {
	t.Helper()
	var last string
	for _, k := range logKeys(t, b, table) {
		if strings.HasSuffix(k, ".json") {
			last = k
		}
	}
	data, err := b.ReadAll(context.Background(), table+"/_delta_log/"+last)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]json.RawMessage
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var a map[string]json.RawMessage
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}

// TestCompact: the small files below the recorded offsets are rewritten,
// folder by folder, into files under _compacted that hold the same rows
// in the same order (the older schema's rows NULL in the newer columns),
// in one version of removes and adds without a data change; a file at or
// past its partition's offset stays; compacting again does nothing; the
// replaced compacted files, and those no version names, are deleted by
// Expire, and the lake's files never are.
func TestCompact(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	now := time.Now()
	d := delta.New(b, lake.New(b, memory.DefaultAllocator), delta.Config{
		Root: func(ds string) (string, error) { return ds, nil },
		Now:  func() time.Time { return now },
	}, quiet)
	p0 := lakehouse.Partition{Source: "s"}
	var files []lakehouse.File
	off := int64(0)
	for i := range 9 {
		dir, sch := "date=2024-05-01", schemaV1
		if i >= 6 {
			dir = "date=2024-05-02"
		}
		if i%2 == 1 {
			sch = schemaV2
		}
		files = append(files, putIn(t, b, "x", dir, sch, "s", 0, off, 3))
		off += 3
	}
	pending := putIn(t, b, "x", "date=2024-05-02", schemaV2, "s", 0, off, 3) // at the recorded offset: Landed may look it up
	if err := d.Commit(ctx, "x", append(slices.Clone(files), pending), map[lakehouse.Partition]int64{p0: off}, nil); err != nil {
		t.Fatal(err)
	}
	before, _ := d.Files(ctx, "x")
	want := rowsOf(t, b, before)

	opt := lakehouse.Compaction{TargetBytes: 1 << 20, MinFiles: 2}
	done, err := d.Compact(ctx, "x", opt)
	if err != nil {
		t.Fatal(err)
	}
	if done.Written != 2 || done.Replaced != 9 || done.Rows != 27 || done.Skipped != 0 {
		t.Errorf("compacted %+v, want 9 files into 2, 27 rows", done)
	}
	after, _ := d.Files(ctx, "x")
	var compacted []string
	for _, k := range after {
		if strings.HasPrefix(k, "x/"+delta.CompactedDir+"/") {
			compacted = append(compacted, k)
		}
	}
	if len(after) != 3 || len(compacted) != 2 || !slices.Contains(after, pending.Key) ||
		!strings.HasPrefix(compacted[0], "x/_compacted/date=2024-05-01/compacted-") || !strings.HasPrefix(compacted[1], "x/_compacted/date=2024-05-02/compacted-") {
		t.Fatalf("the table holds %v, want two compacted files, one a folder, and %s", after, pending.Key)
	}
	got := rowsOf(t, b, after)
	if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Errorf("rows after compaction\n%v,\nwant\n%v", got, want)
	}
	// In order within each compacted file: the replaced files' order.
	if first := rowsOf(t, b, compacted[:1]); !slices.Equal(first, rowsOf(t, b, keysOf(files[:6]))) {
		t.Errorf("the first compacted file holds\n%v,\nwant\n%v", first, rowsOf(t, b, keysOf(files[:6])))
	}
	for _, a := range newestCommit(t, b, "x") {
		if info, ok := a["commitInfo"]; ok && !strings.Contains(string(info), `"operation":"OPTIMIZE"`) {
			t.Errorf("commitInfo %s, want OPTIMIZE", info)
		}
		for _, kind := range []string{"add", "remove"} {
			if act, ok := a[kind]; ok && !strings.Contains(string(act), `"dataChange":false`) {
				t.Errorf("%s %s changes data", kind, act)
			}
		}
	}
	if offs, _ := d.Offsets(ctx, "x"); offs[p0] != off {
		t.Errorf("offsets %v after compaction, want %d", offs, off)
	}
	if again, err := d.Compact(ctx, "x", opt); err != nil || again.Written != 0 || again.Replaced != 0 {
		t.Errorf("compacting again: %+v (%v), want nothing", again, err)
	}

	// Two more files in the first folder: they and its compacted file are
	// compacted again; the compacted file they replace is expired.
	more := []lakehouse.File{putIn(t, b, "x", "date=2024-05-01", schemaV2, "s", 1, 0, 2), putIn(t, b, "x", "date=2024-05-01", schemaV1, "s", 1, 2, 2)}
	if err := d.Commit(ctx, "x", more, map[lakehouse.Partition]int64{{Source: "s", Partition: 1}: 4}, nil); err != nil {
		t.Fatal(err)
	}
	want = rowsOf(t, b, mustFiles(t, d, "x"))
	if done, err := d.Compact(ctx, "x", opt); err != nil || done.Written != 1 || done.Replaced != 3 {
		t.Errorf("compacting the compacted file and two new ones: %+v (%v)", done, err)
	}
	if got := rowsOf(t, b, mustFiles(t, d, "x")); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Errorf("rows after the second compaction\n%v,\nwant\n%v", got, want)
	}
	stray := "x/" + delta.CompactedDir + "/date=2024-05-01/compacted-00000000000000000000.parquet"
	if err := b.WriteAll(ctx, stray, []byte("a compaction that never committed"), nil); err != nil {
		t.Fatal(err)
	}
	exp := lakehouse.Expiry{OlderThan: 0, RetainLast: 1}
	if got, err := d.Expire(ctx, "x", exp); err != nil || got.Files != 1 {
		t.Errorf("expired %+v (%v), want the replaced compacted file", got, err)
	}
	if ok, _ := b.Exists(ctx, compacted[0]); ok {
		t.Errorf("the replaced compacted file %s is still there", compacted[0])
	}
	if ok, _ := b.Exists(ctx, stray); !ok {
		t.Error("an unreferenced compacted file younger than an hour was deleted")
	}
	for _, f := range append(append(slices.Clone(files), more...), pending) {
		if ok, _ := b.Exists(ctx, f.Key); !ok {
			t.Errorf("the lake's file %s was deleted", f.Key)
		}
	}
	now = now.Add(2 * time.Hour)
	if got, err := d.Expire(ctx, "x", exp); err != nil || got.Files != 1 {
		t.Errorf("expired %+v (%v), want the unreferenced compacted file", got, err)
	}
	if ok, _ := b.Exists(ctx, stray); ok {
		t.Error("an unreferenced compacted file older than an hour stays")
	}
	// A new reader sees the same table.
	if got := rowsOf(t, b, mustFiles(t, open(b, 10), "x")); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Errorf("a new reader reads\n%v,\nwant\n%v", got, want)
	}
}

func keysOf(files []lakehouse.File) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.Key
	}
	return out
}

func mustFiles(t *testing.T, d *delta.Delta, dataset string) []string {
	t.Helper()
	keys, err := d.Files(context.Background(), dataset)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestConcurrentCompactions: two processes compact a table at once while
// a third lands on it: the small files are all replaced, and no row is
// lost or doubled (the compaction that loses the race plans again, and
// may compact the winner's file with the files landed since).
func TestConcurrentCompactions(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	d := open(b, 10)
	p0 := lakehouse.Partition{Source: "s"}
	var files []lakehouse.File
	for i := range 20 {
		files = append(files, put(t, b, "x", schemaV1, "s", 0, int64(i*2), 2))
	}
	if err := d.Commit(ctx, "x", files, map[lakehouse.Partition]int64{p0: 40}, nil); err != nil {
		t.Fatal(err)
	}
	want := rowsOf(t, b, mustFiles(t, d, "x"))
	var wg sync.WaitGroup
	results := make([]lakehouse.Compacted, 2)
	errs := make([]error, 3)
	for i := range 2 {
		wg.Go(func() {
			results[i], errs[i] = open(b, 10).Compact(ctx, "x", lakehouse.Compaction{TargetBytes: 1 << 20})
		})
	}
	var landed []lakehouse.File
	for i := range 5 {
		landed = append(landed, put(t, b, "x", schemaV1, "s", 1, int64(i), 1))
	}
	wg.Go(func() {
		w := open(b, 10)
		for i, f := range landed {
			if err := w.Commit(ctx, "x", []lakehouse.File{f}, map[lakehouse.Partition]int64{{Source: "s", Partition: 1}: int64(i + 1)}, nil); err != nil {
				errs[2] = err
				return
			}
		}
	})
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if results[0].Written+results[1].Written == 0 {
		t.Errorf("compactions %+v compacted nothing", results)
	}
	keys := mustFiles(t, open(b, 10), "x")
	for _, f := range files {
		if slices.Contains(keys, f.Key) {
			t.Errorf("%s was not compacted (%+v)", f.Key, results)
		}
	}
	want = append(want, rowsOf(t, b, keysOf(landed))...)
	if got := rowsOf(t, b, keys); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Errorf("rows\n%v,\nwant\n%v", got, want)
	}
}
