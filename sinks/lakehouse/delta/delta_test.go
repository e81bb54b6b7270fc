package delta_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/cdclake/cdclake/sinks/lake"
	"github.com/cdclake/cdclake/sinks/lakehouse"
	"github.com/cdclake/cdclake/sinks/lakehouse/delta"
	"github.com/cdclake/cdclake/sinks/sinktest"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/memblob"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// schemaV1 is a change file's schema; schemaV2 adds a column to the
// image.
var (
	image    = func(fs ...arrow.Field) arrow.DataType { return arrow.StructOf(fs...) }
	idName   = []arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, {Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}}
	meta     = []arrow.Field{{Name: "_cdc_ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true}, {Name: "_cdc_source", Type: arrow.BinaryTypes.String, Nullable: true}, {Name: "_cdc_partition", Type: arrow.PrimitiveTypes.Int32, Nullable: true}, {Name: "_cdc_offset", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}
	schemaV1 = arrow.NewSchema(append(slices.Clone(meta), arrow.Field{Name: "after", Type: image(idName...), Nullable: true}), nil)
	schemaV2 = arrow.NewSchema(append(slices.Clone(meta), arrow.Field{Name: "after", Type: image(append(slices.Clone(idName),
		arrow.Field{Name: "email", Type: arrow.BinaryTypes.String, Nullable: true})...), Nullable: true}), nil)
)

// put writes a change file of rows at offsets first.. of partition part
// of source src, under table, and returns it as a lakehouse.File.
func put(t *testing.T, b *blob.Bucket, table string, sch *arrow.Schema, src string, part int32, first int64, rows int) lakehouse.File {
	t.Helper()
	return putIn(t, b, table, "date=2024-05-01", sch, src, part, first, rows)
}

// putIn is put into the table's folder dir.
func putIn(t *testing.T, b *blob.Bucket, table, dir string, sch *arrow.Schema, src string, part int32, first int64, rows int) lakehouse.File {
	t.Helper()
	bld := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	defer bld.Release()
	base := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	for i := range rows {
		off := first + int64(i)
		bld.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(base.Add(time.Duration(off)*time.Second + 1500*time.Microsecond).UnixMicro()))
		bld.Field(1).(*array.StringBuilder).Append(src)
		bld.Field(2).(*array.Int32Builder).Append(part)
		bld.Field(3).(*array.Int64Builder).Append(off)
		img := bld.Field(4).(*array.StructBuilder)
		img.Append(true)
		img.FieldBuilder(0).(*array.Int64Builder).Append(off * 10)
		img.FieldBuilder(1).(*array.StringBuilder).Append(fmt.Sprintf("row %d", off))
		if img.NumField() > 2 {
			img.FieldBuilder(2).(*array.StringBuilder).AppendNull()
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
	key := fmt.Sprintf("%s/%s/%s-p%d-o%020d.parquet", table, dir, src, part, first)
	if err := b.WriteAll(context.Background(), key, buf.Bytes(), nil); err != nil {
		t.Fatal(err)
	}
	return lakehouse.File{Key: key, Table: table, Schema: sch, Source: src, Partition: part, First: first}
}

func open(b *blob.Bucket, interval int) *delta.Delta {
	return delta.New(b, lake.New(b, memory.DefaultAllocator), delta.Config{
		Root:               func(dataset string) (string, error) { return dataset, nil },
		CheckpointInterval: interval,
	}, quiet)
}

func logKeys(t *testing.T, b *blob.Bucket, table string) []string {
	t.Helper()
	var out []string
	it := b.List(&blob.ListOptions{Prefix: table + "/_delta_log/"})
	for {
		o, err := it.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.TrimPrefix(o.Key, table+"/_delta_log/"))
	}
}

// TestCommitsReadBack: a table committed version by version records each
// partition's offsets and files; another instance reads the same from a
// checkpoint and the commits after it, also once the commits before the
// checkpoint are gone.
func TestCommitsReadBack(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	d := open(b, 10)
	p0, p1 := lakehouse.Partition{Source: "topic", Partition: 0}, lakehouse.Partition{Source: "topic", Partition: 1}
	var keys []string
	for i := range 24 {
		part := int32(i % 2)
		f := put(t, b, "db.t", schemaV1, "topic", part, int64(i*10), 10)
		keys = append(keys, f.Key)
		rec := map[lakehouse.Partition]int64{{Source: "topic", Partition: part}: int64(i*10 + 10)}
		if err := d.Commit(ctx, "db.t", []lakehouse.File{f}, rec, nil); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(keys)
	want := map[lakehouse.Partition]int64{p0: 230, p1: 240}
	check := func(d *delta.Delta, when string) {
		t.Helper()
		got, err := d.Offsets(ctx, "db.t")
		if err != nil || !maps.Equal(got, want) {
			t.Errorf("%s: offsets %v (%v), want %v", when, got, err, want)
		}
		files, err := d.Files(ctx, "db.t")
		if err != nil || !slices.Equal(files, keys) {
			t.Errorf("%s: files %v (%v), want %v", when, files, err, keys)
		}
	}
	check(d, "the writer")
	logs := logKeys(t, b, "db.t")
	for _, want := range []string{"00000000000000000010.checkpoint.parquet", "00000000000000000020.checkpoint.parquet", "_last_checkpoint", "00000000000000000023.json"} {
		if !slices.Contains(logs, want) {
			t.Errorf("the log lacks %s: %v", want, logs)
		}
	}
	last, _ := b.ReadAll(ctx, "db.t/_delta_log/_last_checkpoint")
	if !strings.Contains(string(last), `"version":20`) {
		t.Errorf("_last_checkpoint %s, want version 20", last)
	}
	check(open(b, 10), "a new reader")
	for v := range 20 {
		if err := b.Delete(ctx, fmt.Sprintf("db.t/_delta_log/%020d.json", v)); err != nil {
			t.Fatal(err)
		}
	}
	check(open(b, 10), "a reader of the checkpoint")
	// A file past its partition's recorded offset is one a Landed finds.
	late := put(t, b, "db.t", schemaV1, "topic", 0, 500, 5)
	if err := d.Commit(ctx, "db.t", []lakehouse.File{late}, map[lakehouse.Partition]int64{p0: 230}, nil); err != nil {
		t.Fatal(err)
	}
	landed, err := open(b, 10).Landed(ctx, "db.t", map[lakehouse.Partition]bool{p0: true})
	if err != nil || !maps.Equal(landed, map[string]bool{late.Key: true}) {
		t.Errorf("landed %v (%v), want only %s", landed, err, late.Key)
	}
}

// TestCommitsAreIdempotent: a file the table holds is not added again, a
// skipped one not at all; offsets alone make a version of txn actions,
// and nothing when they do not advance; offsets alone make no table.
func TestCommitsAreIdempotent(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	d := open(b, 10)
	p := lakehouse.Partition{Source: "s", Partition: 0}
	if err := d.RecordOffsets(ctx, "x", map[lakehouse.Partition]int64{p: 5}); err != nil {
		t.Fatal(err)
	}
	if got := logKeys(t, b, "x"); len(got) != 0 {
		t.Fatalf("offsets alone made a table: %v", got)
	}
	f1, f2 := put(t, b, "x", schemaV1, "s", 0, 0, 3), put(t, b, "x", schemaV1, "s", 0, 3, 3)
	if err := d.Commit(ctx, "x", []lakehouse.File{f1, f2}, map[lakehouse.Partition]int64{p: 3}, map[string]bool{f2.Key: true}); err != nil {
		t.Fatal(err)
	}
	if err := d.Commit(ctx, "x", []lakehouse.File{f1, f2}, map[lakehouse.Partition]int64{p: 6}, nil); err != nil {
		t.Fatal(err)
	}
	if err := open(b, 10).Commit(ctx, "x", []lakehouse.File{f1, f2}, map[lakehouse.Partition]int64{p: 6}, nil); err != nil {
		t.Fatal(err)
	}
	if err := d.RecordOffsets(ctx, "x", map[lakehouse.Partition]int64{p: 9}); err != nil {
		t.Fatal(err)
	}
	logs := logKeys(t, b, "x")
	if want := []string{"00000000000000000000.json", "00000000000000000001.json", "00000000000000000002.json"}; !slices.Equal(logs, want) {
		t.Fatalf("log %v, want %v", logs, want)
	}
	adds := map[string]int{}
	for _, k := range logs {
		data, _ := b.ReadAll(ctx, "x/_delta_log/"+k)
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var a struct {
				Add *struct{ Path string }   `json:"add"`
				Txn *struct{ Version int64 } `json:"txn"`
			}
			if err := json.Unmarshal([]byte(line), &a); err != nil {
				t.Fatal(err)
			}
			if a.Add != nil {
				adds[a.Add.Path]++
			}
		}
	}
	if len(adds) != 2 || adds["date=2024-05-01/s-p0-o00000000000000000000.parquet"] != 1 || adds["date=2024-05-01/s-p0-o00000000000000000003.parquet"] != 1 {
		t.Errorf("adds %v, want each file once", adds)
	}
	got, _ := open(b, 10).Offsets(ctx, "x")
	if got[p] != 9 {
		t.Errorf("offset %d, want 9", got[p])
	}
}

// TestSchemaEvolves: a file with a column the table lacks adds it in the
// same version; a type Delta lacks, or a changed type, fails with
// ErrSchema and commits nothing.
func TestSchemaEvolves(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	d := open(b, 10)
	if err := d.Commit(ctx, "x", []lakehouse.File{put(t, b, "x", schemaV1, "s", 0, 0, 2)}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := d.Commit(ctx, "x", []lakehouse.File{put(t, b, "x", schemaV2, "s", 0, 2, 2)}, nil, nil); err != nil {
		t.Fatal(err)
	}
	data, _ := b.ReadAll(ctx, "x/_delta_log/00000000000000000001.json")
	if !strings.Contains(string(data), `{\"name\":\"email\",\"type\":\"string\"`) {
		t.Errorf("version 1 does not add after.email:\n%s", data)
	}
	for _, bad := range []arrow.Field{
		{Name: "after", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "clock", Type: arrow.FixedWidthTypes.Time64us, Nullable: true},
		{Name: "nothing", Type: arrow.Null, Nullable: true},
		{Name: "_cdc_offset", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	} {
		fs := slices.Clone(schemaV1.Fields())
		if i := slices.IndexFunc(fs, func(f arrow.Field) bool { return f.Name == bad.Name }); i >= 0 {
			fs[i] = bad
		} else {
			fs = append(fs, bad)
		}
		f := lakehouse.File{Key: "x/date=2024-05-01/s-p0-o00000000000000000009.parquet", Schema: arrow.NewSchema(fs, nil)}
		if err := d.Commit(ctx, "x", []lakehouse.File{f}, nil, nil); !errors.Is(err, lakehouse.ErrSchema) {
			t.Errorf("%s %s: %v, want ErrSchema", bad.Name, bad.Type, err)
		}
	}
	if logs := logKeys(t, b, "x"); len(logs) != 2 {
		t.Errorf("the failed commits wrote %v", logs)
	}
}

// TestConcurrentWriters: writers that share nothing but the store commit
// to one table at once, each version created once: every file is in the
// table once, and the offsets are each writer's last.
func TestConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	b, err := blob.OpenBucket(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const writers, each = 4, 12
	files := make([][]lakehouse.File, writers)
	for w := range writers {
		for i := range each {
			files[w] = append(files[w], put(t, b, "x", schemaV1, "s", int32(w), int64(i*2), 2))
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			d := open(b, 5)
			for i, f := range files[w] {
				rec := map[lakehouse.Partition]int64{{Source: "s", Partition: int32(w)}: int64(i*2 + 2)}
				if err := d.Commit(ctx, "x", []lakehouse.File{f}, rec, nil); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	d := open(b, 5)
	got, err := d.Files(ctx, "x")
	if err != nil || len(got) != writers*each {
		t.Fatalf("%d files (%v), want %d", len(got), err, writers*each)
	}
	offs, _ := d.Offsets(ctx, "x")
	for w := range writers {
		if o := offs[lakehouse.Partition{Source: "s", Partition: int32(w)}]; o != each*2 {
			t.Errorf("partition %d: offset %d, want %d", w, o, each*2)
		}
	}
	if n := len(slices.DeleteFunc(logKeys(t, b, "x"), func(k string) bool { return !strings.HasSuffix(k, ".json") })); n != writers*each {
		t.Errorf("%d versions, want one a commit: %d", n, writers*each)
	}
}

// TestLostCommitReply: a commit stored whose reply was lost is found as
// this writer's own (its bytes) and not committed again.
func TestLostCommitReply(t *testing.T) {
	ctx := context.Background()
	base := memblob.OpenBucket(nil)
	var mu sync.Mutex
	lost := map[string]bool{}
	b, _ := sinktest.Faulty(base, sinktest.Faults{LoseReply: func(key string) bool {
		mu.Lock()
		defer mu.Unlock()
		if strings.HasSuffix(key, ".json") && !lost[key] {
			lost[key] = true
			return true
		}
		return false
	}})
	d := delta.New(b, lake.New(b, memory.DefaultAllocator).Retrying(lake.Retry{For: 10 * time.Second}),
		delta.Config{Root: func(ds string) (string, error) { return ds, nil }}, quiet)
	for i := range 3 {
		f := put(t, base, "x", schemaV1, "s", 0, int64(i), 1)
		if err := d.Commit(ctx, "x", []lakehouse.File{f}, map[lakehouse.Partition]int64{{Source: "s"}: int64(i + 1)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if logs := logKeys(t, base, "x"); len(logs) != 3 {
		t.Errorf("log %v, want 3 versions", logs)
	}
	if files, _ := open(base, 10).Files(ctx, "x"); len(files) != 3 {
		t.Errorf("files %v, want 3", files)
	}
}

// TestStats: each add's stats count rows and NULLs, and bound integers
// and UTC timestamps (to the millisecond, outward), nested ones too; the
// same from the footer a write kept as from the stored file.
func TestStats(t *testing.T) {
	ctx := context.Background()
	want := `{"numRecords":4,"minValues":{"_cdc_offset":7,"_cdc_partition":3,"_cdc_ts":"2024-05-01T10:00:07.001Z","after":{"id":70}},` +
		`"maxValues":{"_cdc_offset":10,"_cdc_partition":3,"_cdc_ts":"2024-05-01T10:00:10.002Z","after":{"id":100}},` +
		`"nullCount":{"_cdc_offset":0,"_cdc_partition":0,"_cdc_source":0,"_cdc_ts":0,"after":{"email":4,"id":0,"name":0}}}`
	// Read back from the store, or from the footer and size the write
	// kept: then the object is deleted first, so that nothing but the
	// footer can give them.
	for _, kept := range []bool{false, true} {
		b := memblob.OpenBucket(nil)
		d := open(b, 10)
		f := put(t, b, "x", schemaV2, "s", 3, 7, 4)
		data, _ := b.ReadAll(ctx, f.Key)
		if kept {
			n := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
			f.Footer, f.Bytes = data[len(data)-8-n:len(data)-8], int64(len(data))
			if err := b.Delete(ctx, f.Key); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Commit(ctx, "x", []lakehouse.File{f}, nil, nil); err != nil {
			t.Fatalf("footer kept %v: %v", kept, err)
		}
		log, _ := b.ReadAll(ctx, "x/_delta_log/00000000000000000000.json")
		var stats string
		var size int64
		for _, line := range strings.Split(string(log), "\n") {
			var a struct {
				Add *struct {
					Stats string
					Size  int64
				}
			}
			if json.Unmarshal([]byte(line), &a) == nil && a.Add != nil {
				stats, size = a.Add.Stats, a.Add.Size
			}
		}
		if stats != want || size != int64(len(data)) {
			t.Errorf("footer kept %v: size %d, stats\n%s\nwant %d,\n%s", kept, size, stats, len(data), want)
		}
	}
}

// TestSetFiles: a table set to files holds exactly them, with the
// properties in its configuration; setting the same again writes nothing.
func TestSetFiles(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	d := open(b, 10)
	a, c := put(t, b, "_current/x", schemaV1, "s", 0, 0, 2), put(t, b, "_current/x", schemaV1, "s", 0, 2, 2)
	e := put(t, b, "_current/x", schemaV2, "s", 0, 4, 2)
	set := func(props string, keys ...string) {
		t.Helper()
		err := d.SetFiles(ctx, "x__current", lakehouse.FileSet{Location: "_current/x", Keys: keys, Schema: schemaV2,
			Properties: map[string]string{"cdclake.current.version": props}})
		if err != nil {
			t.Fatal(err)
		}
	}
	set("1", a.Key, c.Key)
	set("1", a.Key, c.Key)
	set("2", c.Key, e.Key)
	if logs := logKeys(t, b, "_current/x"); len(logs) != 2 {
		t.Errorf("log %v, want 2 versions", logs)
	}
	got, err := open(b, 10).Files(ctx, "_current/x")
	if err != nil || !slices.Equal(got, []string{c.Key, e.Key}) {
		t.Errorf("files %v (%v)", got, err)
	}
	data, _ := b.ReadAll(ctx, "_current/x/_delta_log/00000000000000000001.json")
	if !strings.Contains(string(data), `"remove":{"path":"date=2024-05-01/s-p0-o00000000000000000000.parquet"`) ||
		!strings.Contains(string(data), `"cdclake.current.version":"2"`) {
		t.Errorf("version 1:\n%s", data)
	}
}

// TestUpgradedTableRefused: a table another writer upgraded to a feature
// cdclake does not write (deletion vectors) gets no commit.
func TestUpgradedTableRefused(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	d := open(b, 10)
	if err := d.Commit(ctx, "x", []lakehouse.File{put(t, b, "x", schemaV1, "s", 0, 0, 2)}, nil, nil); err != nil {
		t.Fatal(err)
	}
	up := `{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["deletionVectors","timestampNtz"],"writerFeatures":["deletionVectors","timestampNtz"]}}` + "\n"
	if err := b.WriteAll(ctx, "x/_delta_log/00000000000000000001.json", []byte(up), nil); err != nil {
		t.Fatal(err)
	}
	err := d.Commit(ctx, "x", []lakehouse.File{put(t, b, "x", schemaV1, "s", 0, 2, 2)}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "protocol cdclake does not write") {
		t.Errorf("commit to an upgraded table: %v", err)
	}
}

// TestExpireStateTable: the files a current-state table's versions
// replaced are deleted once neither the newest RetainLast versions name
// them nor is the version that replaced them younger than OlderThan; a
// dataset's table loses nothing.
func TestExpireStateTable(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := delta.New(b, lake.New(b, memory.DefaultAllocator), delta.Config{
		Root: func(ds string) (string, error) { return ds, nil },
		Now:  func() time.Time { return now },
	}, quiet)
	var files []lakehouse.File
	for i := range 4 {
		files = append(files, put(t, b, "_current/x", schemaV1, "s", 0, int64(i*2), 2))
	}
	// Versions 0..3 each hold one file, an hour apart.
	for i, f := range files {
		now = now.Add(time.Hour)
		if err := d.SetFiles(ctx, "x__current", lakehouse.FileSet{Location: "_current/x", Keys: []string{f.Key}, Schema: schemaV1,
			Properties: map[string]string{"v": fmt.Sprint(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(time.Minute)
	exists := func() (n int) {
		for _, f := range files {
			if ok, _ := b.Exists(ctx, f.Key); ok {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct {
		exp        lakehouse.Expiry
		deleted    int
		filesAfter int
	}{
		{lakehouse.Expiry{OlderThan: 24 * time.Hour, RetainLast: 1}, 0, 4},   // every replacement is younger
		{lakehouse.Expiry{OlderThan: 90 * time.Minute, RetainLast: 1}, 1, 3}, // v0's file, replaced 2 h ago (v2's, 1 h ago, stays)
		{lakehouse.Expiry{OlderThan: 0, RetainLast: 2}, 1, 2},                // v1's; version 2, kept, names v2's
		{lakehouse.Expiry{OlderThan: 0, RetainLast: 1}, 1, 1},                // v2's: only version 3 is kept
	} {
		got, err := d.Expire(ctx, "x__current", tc.exp)
		if err != nil || got.Files != tc.deleted || exists() != tc.filesAfter {
			t.Errorf("%+v: deleted %d (%v), %d files left; want %d deleted, %d left", tc.exp, got.Files, err, exists(), tc.deleted, tc.filesAfter)
		}
	}
	if got, _ := d.Files(ctx, "_current/x"); len(got) != 1 || got[0] != files[3].Key {
		t.Errorf("the table holds %v, want %s", got, files[3].Key)
	}
	// A dataset's table: nothing is deleted.
	if err := d.Commit(ctx, "y", []lakehouse.File{put(t, b, "y", schemaV1, "s", 0, 0, 2)}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := d.Expire(ctx, "y", lakehouse.Expiry{RetainLast: 1}); err != nil || got.Files != 0 {
		t.Errorf("a dataset's table expired %+v (%v)", got, err)
	}
	// A new process finds the folder by Config.StateRoot.
	d2 := delta.New(b, lake.New(b, memory.DefaultAllocator), delta.Config{Root: func(ds string) (string, error) { return ds, nil },
		StateRoot: func(ds string) (string, error) { return "_current/" + ds, nil }}, quiet)
	if _, err := d2.Expire(ctx, "x__current", lakehouse.Expiry{RetainLast: 1}); err != nil {
		t.Error(err)
	}
}

// TestLogCleanup: once a checkpoint's commit is older than the log
// retention, the log files of the versions before it are deleted at the
// next checkpoint; a new reader reads the same table from what is left.
func TestLogCleanup(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	d := delta.New(b, lake.New(b, memory.DefaultAllocator), delta.Config{
		Root: func(ds string) (string, error) { return ds, nil }, CheckpointInterval: 5, LogRetention: time.Nanosecond,
	}, quiet)
	p := lakehouse.Partition{Source: "s"}
	for i := range 12 {
		f := put(t, b, "x", schemaV1, "s", 0, int64(i), 1)
		if err := d.Commit(ctx, "x", []lakehouse.File{f}, map[lakehouse.Partition]int64{p: int64(i + 1)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Checkpoints at 5 and 10: at 10, its own commit is older than the
	// retention already, so every version before 10 goes.
	logs := logKeys(t, b, "x")
	want := []string{"00000000000000000010.checkpoint.parquet", "00000000000000000010.json", "00000000000000000011.json", "_last_checkpoint"}
	if !slices.Equal(logs, want) {
		t.Errorf("log %v,\nwant %v", logs, want)
	}
	r := open(b, 5)
	if offs, err := r.Offsets(ctx, "x"); err != nil || offs[p] != 12 {
		t.Errorf("offsets %v (%v), want 12", offs, err)
	}
	if files, err := r.Files(ctx, "x"); err != nil || len(files) != 12 {
		t.Errorf("%d files (%v), want 12", len(files), err)
	}
	// Within the retention, every version's log stays.
	keep := delta.New(b, lake.New(b, memory.DefaultAllocator), delta.Config{
		Root: func(ds string) (string, error) { return ds, nil }, CheckpointInterval: 5, LogRetention: time.Hour,
	}, quiet)
	for i := range 11 {
		f := put(t, b, "y", schemaV1, "s", 0, int64(i), 1)
		if err := keep.Commit(ctx, "y", []lakehouse.File{f}, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if logs := logKeys(t, b, "y"); len(logs) != 11+2+1 {
		t.Errorf("log %v, want 11 commits, 2 checkpoints and _last_checkpoint", logs)
	}
}
