package icebergsql_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/cdclake/cdclake/internal/pyenv"
	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/lakehouse"
	"github.com/cdclake/cdclake/sinks/lakehouse/icebergsql"
	"github.com/cdclake/cdclake/sinks/parquet"
	"github.com/cdclake/cdclake/sinks/parquet/parquettest"
)

const dataset = "inventory.public.customers"

// lake writes the Parquet files of a test lake.
type lake struct {
	t   *testing.T
	dir string
	mem memory.Allocator
}

// write writes rows [lo, hi) of rec as the file of source partition 0
// starting at offset lo, and returns it.
func (l lake) write(rec arrow.RecordBatch, lo, hi int) lakehouse.File {
	l.t.Helper()
	key := dataset + "/date=2024-05-31/" + sinks.ObjectName(sinks.Position{Source: "topic", Offset: int64(lo)}, ".parquet")
	var buf bytes.Buffer
	if err := parquet.Write(&buf, rec, [][2]int{{lo, hi}}, parquet.Options{Compression: "zstd", RowGroupRows: 1 << 17}, l.mem); err != nil {
		l.t.Fatal(err)
	}
	p := filepath.Join(l.dir, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		l.t.Fatal(err)
	}
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		l.t.Fatal(err)
	}
	return lakehouse.File{Key: key, Table: dataset, Schema: rec.Schema(), Source: "topic", First: int64(lo)}
}

// plainJSON returns rec as a table committed to Iceberg lands it: its JSON
// columns, nested ones too, plain strings (schema.PlainJSON).
func plainJSON(rec arrow.RecordBatch) arrow.RecordBatch {
	sch := schema.PlainJSON(rec.Schema())
	cols := make([]arrow.Array, rec.NumCols())
	for i, c := range rec.Columns() {
		d := retyped(c.Data(), sch.Field(i).Type)
		cols[i] = array.MakeFromData(d)
		d.Release()
		defer cols[i].Release()
	}
	return array.NewRecordBatch(sch, cols, rec.NumRows())
}

// retyped returns d as data of type t, which has the same layout.
func retyped(d arrow.ArrayData, t arrow.DataType) arrow.ArrayData {
	var kids []arrow.ArrayData
	for i, c := range d.Children() {
		var ct arrow.DataType
		switch x := t.(type) {
		case *arrow.StructType:
			ct = x.Field(i).Type
		case *arrow.ListType:
			ct = x.Elem()
		case *arrow.MapType:
			ct = x.Elem()
		default:
			ct = c.DataType()
		}
		k := retyped(c, ct)
		defer k.Release()
		kids = append(kids, k)
	}
	return array.NewData(t, d.Len(), d.Buffers(), kids, d.NullN(), d.Offset())
}

// withColumn returns rec with a string column added at the end, NULL
// in every other row.
func withColumn(t *testing.T, mem memory.Allocator, rec arrow.RecordBatch, name string) arrow.RecordBatch {
	b := array.NewStringBuilder(mem)
	defer b.Release()
	for i := range rec.NumRows() {
		if i%2 == 0 {
			b.AppendNull()
		} else {
			b.Append(fmt.Sprintf("v%d", i))
		}
	}
	col := b.NewArray()
	defer col.Release()
	fields := append(rec.Schema().Fields(), arrow.Field{Name: name, Type: arrow.BinaryTypes.String, Nullable: true})
	md := rec.Schema().Metadata()
	return array.NewRecordBatch(arrow.NewSchema(fields, &md), append(rec.Columns(), col), rec.NumRows())
}

// versions returns n change rows of two table versions: as a table
// committed to Iceberg lands them, and with a loyalty_tier column added
// (withColumn). They are released when the test ends.
func versions(t *testing.T, mem memory.Allocator, n int) (rec, evolved arrow.RecordBatch) {
	images := parquettest.Images(mem, n)
	defer images.Release()
	rec = plainJSON(images)
	evolved = withColumn(t, mem, rec, "loyalty_tier")
	t.Cleanup(func() { rec.Release(); evolved.Release() })
	return rec, evolved
}

// run tells the REST catalogs' namespaces of one test process from
// another's: the server outlives the tests.
var run = strconv.FormatInt(time.Now().UnixNano(), 36)

// catalogOf returns the catalog of a test's tables, whose lake is in dir:
// a SQLite file there or, with CDCLAKE_TEST_ICEBERG_CATALOG, that catalog
// (a REST catalog's URI, infra/start.sh iceberg-rest; a PostgreSQL
// database's postgres:// URL), under a namespace of the test's own.
func catalogOf(t *testing.T, dir string) lakehouse.Config {
	cfg := lakehouse.Config{Catalog: "sqlite://" + filepath.Join(dir, "catalog.db")}
	if u := os.Getenv("CDCLAKE_TEST_ICEBERG_CATALOG"); u != "" {
		cfg = lakehouse.Config{Catalog: u, Namespace: []string{"test_" + run + "_" + strings.ReplaceAll(t.Name(), "/", "_")}}
	}
	return cfg
}

// pyLoad is Python that opens the catalog of catalogOf (its arguments:
// pyArgs) as cat, and names the test table ident.
const pyLoad = `
import sys
lake, uri, ns = sys.argv[1], sys.argv[2], sys.argv[3]
if uri.startswith("http"):
    from pyiceberg.catalog.rest import RestCatalog
    cat = RestCatalog("cdclake", uri=uri)
elif uri.startswith("postgres"):
    from pyiceberg.catalog.sql import SqlCatalog
    cat = SqlCatalog("cdclake", uri="postgresql+psycopg://" + uri.split("://", 1)[1], warehouse="file://" + lake)
else:
    from pyiceberg.catalog.sql import SqlCatalog
    cat = SqlCatalog("cdclake", uri="sqlite:///" + lake + "/catalog.db", warehouse="file://" + lake)
ident = tuple(([ns] if ns else []) + ["inventory", "public", "customers"])
`

// pyArgs are pyLoad's arguments for the lake in dir.
func pyArgs(t *testing.T, dir string) []string {
	cfg := catalogOf(t, dir)
	return []string{dir, cfg.Catalog, strings.Join(cfg.Namespace, ".")}
}

func open(t *testing.T, dir string) *icebergsql.Iceberg {
	t.Helper()
	cfg := catalogOf(t, dir)
	cfg.Warehouse = "file://" + dir
	c, err := icebergsql.Open(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestIcebergCommits commits landed files to a table: made at the first
// commit, its schema evolved by a file with a new column, each commit
// recording the partition's offset; a file committed past the recorded
// offset is found by Landed after a restart, and not added again.
func TestIcebergCommits(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	mem := memory.NewGoAllocator()
	l := lake{t, dir, mem}
	rec, evolved := versions(t, mem, 400)
	part := lakehouse.Partition{Source: "topic"}

	c := open(t, dir)
	a, b := l.write(rec, 0, 100), l.write(rec, 100, 200)
	must(t, c.Commit(ctx, dataset, []lakehouse.File{a, b}, map[lakehouse.Partition]int64{part: 200}, nil))
	e := l.write(evolved, 200, 250)
	must(t, c.Commit(ctx, dataset, []lakehouse.File{e}, map[lakehouse.Partition]int64{part: 250}, nil))
	// A file committed while an earlier offset of its partition is still
	// held elsewhere: the recorded offset stays.
	d := l.write(evolved, 250, 300)
	must(t, c.Commit(ctx, dataset, []lakehouse.File{d}, map[lakehouse.Partition]int64{part: 250}, nil))

	c = open(t, dir) // a restart
	offs, err := c.Offsets(ctx, dataset)
	must(t, err)
	if offs[part] != 250 {
		t.Errorf("offsets %v, want topic/0 at 250", offs)
	}
	landed, err := c.Landed(ctx, dataset, map[lakehouse.Partition]bool{part: true})
	must(t, err)
	if len(landed) != 1 || !landed[d.Key] {
		t.Errorf("landed past the offset: %v, want only %s", landed, d.Key)
	}
	// The replay hands d again, with the next file: d is skipped.
	f := l.write(evolved, 300, 400)
	must(t, c.Commit(ctx, dataset, []lakehouse.File{d, f}, map[lakehouse.Partition]int64{part: 400}, landed))

	rows, nulls := scan(t, dir)
	if rows != 400 || nulls != 200+100 {
		t.Errorf("the table reads %d rows with %d NULL loyalty_tier; want 400 and 300", rows, nulls)
	}
}

// TestIcebergEvolvesInOneCommit commits, at once, the files of three
// versions of a table, each with a column more than the last, to a new
// table and to one holding the first version: every row reads.
func TestIcebergEvolvesInOneCommit(t *testing.T) {
	mem := memory.NewGoAllocator()
	rec, evolved := versions(t, mem, 300)
	again := withColumn(t, mem, evolved, "segment")
	defer again.Release()
	part := lakehouse.Partition{Source: "topic"}
	for _, held := range []int{0, 100} {
		t.Run(fmt.Sprintf("held_%d", held), func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			l, c := lake{t, dir, mem}, open(t, dir)
			files := []lakehouse.File{l.write(rec, 0, 100), l.write(evolved, 100, 200), l.write(again, 200, 300)}
			if held > 0 {
				must(t, c.Commit(ctx, dataset, files[:1], map[lakehouse.Partition]int64{part: int64(held)}, nil))
				files = files[1:]
			}
			must(t, c.Commit(ctx, dataset, files, map[lakehouse.Partition]int64{part: 300}, nil))
			if rows, nulls := scan(t, dir); rows != 300 || nulls != 100+50+50 {
				t.Errorf("the table reads %d rows with %d NULL loyalty_tier; want 300 and 200", rows, nulls)
			}
		})
	}
}

// scan reads the table with pyiceberg (with `make test`'s Python) and
// returns its rows and its NULLs in loyalty_tier.
func scan(t *testing.T, dir string) (rows, nulls int) {
	t.Helper()
	py := pyenv.Python(t, "read the table with pyiceberg")
	script := `
` + pyLoad + `t = cat.load_table(ident).scan().to_arrow()
print(t.num_rows, t.column("loyalty_tier").null_count)
`
	out, err := exec.Command(py, append([]string{"-c", script}, pyArgs(t, dir)...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("pyiceberg: %v\n%s", err, out)
	}
	if _, err := fmt.Sscan(strings.TrimSpace(string(out)), &rows, &nulls); err != nil {
		t.Fatalf("pyiceberg printed %q", out)
	}
	return rows, nulls
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// noteRecord returns rows [lo, hi) of a change table whose note column is
// of NULLs only (arrow's null type, as a schemaless source lands a column it
// has seen no value of) or text, top-level and in the after image.
func noteRecord(mem memory.Allocator, lo, hi int, text bool) arrow.RecordBatch {
	noteType := arrow.DataType(arrow.Null)
	if text {
		noteType = arrow.BinaryTypes.String
	}
	after := arrow.StructOf(arrow.Field{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "note", Type: noteType, Nullable: true})
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "_cdc_source", Type: arrow.BinaryTypes.String},
		{Name: "_cdc_partition", Type: arrow.PrimitiveTypes.Int32},
		{Name: "_cdc_offset", Type: arrow.PrimitiveTypes.Int64},
		{Name: "note", Type: noteType, Nullable: true},
		{Name: "after", Type: after, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(mem, sch)
	defer b.Release()
	for i := lo; i < hi; i++ {
		b.Field(0).(*array.StringBuilder).Append("topic")
		b.Field(1).(*array.Int32Builder).Append(0)
		b.Field(2).(*array.Int64Builder).Append(int64(i))
		sb := b.Field(4).(*array.StructBuilder)
		sb.Append(true)
		sb.FieldBuilder(0).(*array.Int64Builder).Append(int64(i))
		for _, nb := range []array.Builder{b.Field(3), sb.FieldBuilder(1)} {
			if text {
				nb.(*array.StringBuilder).Append(fmt.Sprintf("n%d", i))
			} else {
				nb.AppendNull()
			}
		}
	}
	return b.NewRecordBatch()
}

// TestIcebergNullColumns: a column of NULLs only (Iceberg's unknown type)
// takes the type of the values a later file brings, top-level and nested,
// and a later file of NULLs only in a typed column is added as it is; the
// table reads every row, with the values where they are.
func TestIcebergNullColumns(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	mem := memory.NewGoAllocator()
	l := lake{t, dir, mem}
	part := lakehouse.Partition{Source: "topic"}
	c := open(t, dir)
	for i, text := range []bool{false, true, false, true} {
		rec := noteRecord(mem, 0, i*10+10, text)
		f := l.write(rec, i*10, i*10+10)
		rec.Release()
		must(t, c.Commit(ctx, dataset, []lakehouse.File{f}, map[lakehouse.Partition]int64{part: int64(i*10 + 10)}, nil))
	}
	py := pyenv.Python(t, "read the table with pyiceberg")
	script := `
` + pyLoad + `tbl = cat.load_table(ident)
t = tbl.scan().to_arrow().sort_by("_cdc_offset")
after = t.column("after").combine_chunks()
print(t.num_rows, t.column("note").type, t.column("note").null_count, after.field("note").null_count,
      sum(1 for v in t.column("note").to_pylist() if v is not None and v.startswith("n")))
`
	read := func(when string) {
		t.Helper()
		out, err := exec.Command(py, append([]string{"-c", script}, pyArgs(t, dir)...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("pyiceberg %s: %v\n%s", when, err, out)
		}
		if got, want := strings.TrimSpace(string(out)), "40 large_string 20 20 20"; got != want && got != "40 string 20 20 20" {
			t.Errorf("pyiceberg reads %q %s, want %q", got, when, want)
		}
	}
	read("as committed")
	// Compacted, the files of NULLs only take the column's type.
	done, err := c.Compact(ctx, dataset, lakehouse.Compaction{TargetBytes: 1 << 30, Compression: "zstd", RowGroupRows: 1 << 17})
	if err != nil || done.Written != 1 || done.Replaced != 4 {
		t.Fatalf("compacting: %+v %v, want 4 files into 1", done, err)
	}
	read("compacted")
}

// TestIcebergOtherLake: a lake whose catalog holds a table of its name at
// another lake's location adds no file to it, and says why.
func TestIcebergOtherLake(t *testing.T) {
	ctx := context.Background()
	dir, other := t.TempDir(), t.TempDir()
	mem := memory.NewGoAllocator()
	rec := noteRecord(mem, 0, 20, true)
	defer rec.Release()
	part := lakehouse.Partition{Source: "topic"}
	c := open(t, dir)
	must(t, c.Commit(ctx, dataset, []lakehouse.File{lake{t, dir, mem}.write(rec, 0, 10)}, map[lakehouse.Partition]int64{part: 10}, nil))
	// The other lake shares the first one's catalog.
	cfg := catalogOf(t, dir)
	cfg.Warehouse = "file://" + other
	o, err := icebergsql.Open(ctx, cfg, slog.New(slog.DiscardHandler))
	must(t, err)
	defer o.Close()
	err = o.Commit(ctx, dataset, []lakehouse.File{lake{t, other, mem}.write(rec, 10, 20)}, map[lakehouse.Partition]int64{part: 20}, nil)
	if !errors.Is(err, lakehouse.ErrOtherLake) || !strings.Contains(err.Error(), "file://"+dir) {
		t.Errorf("committing another lake's file: %v, want ErrOtherLake naming the table's location", err)
	}
	if _, err := o.Offsets(ctx, dataset); !errors.Is(err, lakehouse.ErrOtherLake) {
		t.Errorf("the other lake's offsets: %v, want ErrOtherLake", err)
	}
}

// TestIcebergCompact: a table's small files below the recorded offset,
// of two table versions, are rewritten into one file in a snapshot that
// reads the same rows as the one before it; a file past the recorded
// offset is left (a replay looks it up by its path), the offsets stay,
// and compacting again does nothing.
func TestIcebergCompact(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	mem := memory.NewGoAllocator()
	l := lake{t, dir, mem}
	rec, evolved := versions(t, mem, 250)
	part := lakehouse.Partition{Source: "topic"}
	c := open(t, dir)
	must(t, c.Commit(ctx, dataset, []lakehouse.File{l.write(rec, 0, 50), l.write(rec, 50, 100)}, map[lakehouse.Partition]int64{part: 100}, nil))
	must(t, c.Commit(ctx, dataset, []lakehouse.File{l.write(evolved, 100, 150)}, map[lakehouse.Partition]int64{part: 150}, nil))
	must(t, c.Commit(ctx, dataset, []lakehouse.File{l.write(evolved, 150, 200)}, map[lakehouse.Partition]int64{part: 200}, nil))
	past := l.write(evolved, 200, 250)
	must(t, c.Commit(ctx, dataset, []lakehouse.File{past}, map[lakehouse.Partition]int64{part: 200}, nil))

	opt := lakehouse.Compaction{TargetBytes: 1 << 30, Compression: "zstd", RowGroupRows: 1 << 17}
	done, err := c.Compact(ctx, dataset, opt)
	must(t, err)
	if done.Written != 1 || done.Replaced != 4 || done.Rows != 200 || done.Skipped != 0 {
		t.Errorf("compacted %+v, want 4 files of 200 rows into 1", done)
	}
	if again, err := c.Compact(ctx, dataset, opt); err != nil || again.Written != 0 {
		t.Errorf("compacting again: %+v %v, want nothing done", again, err)
	}
	c = open(t, dir) // as another process sees it
	if offs, err := c.Offsets(ctx, dataset); err != nil || offs[part] != 200 {
		t.Errorf("offsets after compaction: %v %v, want topic/0 at 200", offs, err)
	}
	if landed, err := c.Landed(ctx, dataset, map[lakehouse.Partition]bool{part: true}); err != nil || len(landed) != 1 || !landed[past.Key] {
		t.Errorf("landed past the offset: %v %v, want %s", landed, err, past.Key)
	}
	if names, err := c.Datasets(ctx); err != nil || strings.Join(names, " ") != dataset {
		t.Errorf("datasets %v %v", names, err)
	}
	py := pyenv.Python(t, "read the table with pyiceberg")
	script := `
` + pyLoad + `tbl = cat.load_table(ident)
cur = tbl.current_snapshot()
files = sorted(t.file.file_path.rsplit("/", 3)[-3] for t in tbl.scan().plan_files())
now = tbl.scan().to_arrow().sort_by("_cdc_offset")
before = tbl.scan(snapshot_id=cur.parent_snapshot_id).to_arrow().sort_by("_cdc_offset").select(now.column_names)
# pyiceberg may read a string column as string from one file and as
# large_string from several: the values are compared.
print(cur.summary.operation.value, len(files), now.num_rows, now.cast(before.schema).equals(before),
      now.column("loyalty_tier").null_count)
`
	out, err := exec.Command(py, append([]string{"-c", script}, pyArgs(t, dir)...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("pyiceberg: %v\n%s", err, out)
	}
	// 250 rows; loyalty_tier is NULL in the 100 rows of the first version
	// and every other row of the rest.
	if got, want := strings.TrimSpace(string(out)), "overwrite 2 250 True 175"; got != want {
		t.Errorf("pyiceberg reads %q, want %q (operation, files, rows, same as before, NULL loyalty_tier)", got, want)
	}

	// Every snapshot but the newest expires: their manifests and lists
	// go, the lake's files stay, and the table reads the same.
	exp, err := c.Expire(ctx, dataset, lakehouse.Expiry{RetainLast: 1})
	must(t, err)
	if exp.Snapshots != 4 || exp.Files == 0 {
		t.Errorf("expired %+v, want 4 snapshots and their own files", exp)
	}
	lakeFiles := 0
	err = filepath.WalkDir(filepath.Join(dir, dataset), func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".parquet") {
			lakeFiles++
		}
		return err
	})
	must(t, err)
	if lakeFiles != 5 {
		t.Errorf("%d of the lake's 5 files are left", lakeFiles)
	}
	out, err = exec.Command(py, append([]string{"-c", pyLoad + `tbl = cat.load_table(ident)
print(len(tbl.metadata.snapshots), tbl.scan().to_arrow().num_rows)
`}, pyArgs(t, dir)...)...).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "1 250" {
		t.Errorf("after the expiry pyiceberg reads %q (%v), want 1 snapshot of 250 rows", out, err)
	}

	// Orphans: compacted files no snapshot refers to go once older than
	// the grace period; a fresh one (a compaction under way) stays.
	compacted := filepath.Join(dir, "_cdclake", "iceberg", dataset, "date=2024-05-31")
	old, fresh := filepath.Join(compacted, "compacted-old.parquet"), filepath.Join(compacted, "compacted-fresh.parquet")
	for _, p := range []string{old, fresh} {
		must(t, os.WriteFile(p, []byte("PAR1"), 0o644))
	}
	then := time.Now().Add(-2 * icebergsql.OrphanGrace)
	must(t, os.Chtimes(old, then, then))
	exp, err = c.Expire(ctx, dataset, lakehouse.Expiry{RetainLast: 1})
	must(t, err)
	_, oldErr := os.Stat(old)
	_, freshErr := os.Stat(fresh)
	if exp.Files != 1 || !os.IsNotExist(oldErr) || freshErr != nil {
		t.Errorf("orphans: %+v, the old one: %v, the fresh one: %v; want the old one deleted", exp, oldErr, freshErr)
	}
	if rows, _ := scan(t, dir); rows != 250 {
		t.Errorf("the table reads %d rows after the orphans went, want 250", rows)
	}
}

// TestIcebergCommitOvertaken: a commit whose table another instance
// committed to since it was loaded (the catalog refuses it: "branch main
// has changed") is tried again on the table as it is, and goes in, files
// or offsets alone; the table then compacts and reads every row once.
func TestIcebergCommitOvertaken(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	mem := memory.NewGoAllocator()
	l := lake{t, dir, mem}
	rec, _ := versions(t, mem, 300)
	p0, p1 := lakehouse.Partition{Source: "topic"}, lakehouse.Partition{Source: "topic", Partition: 1}
	a, b := open(t, dir), open(t, dir)
	must(t, a.Commit(ctx, dataset, []lakehouse.File{l.write(rec, 0, 100)}, map[lakehouse.Partition]int64{p0: 100}, nil))
	if _, err := b.Offsets(ctx, dataset); err != nil { // b loads the table
		t.Fatal(err)
	}
	must(t, a.Commit(ctx, dataset, []lakehouse.File{l.write(rec, 100, 200)}, map[lakehouse.Partition]int64{p0: 200}, nil))
	f := l.write(rec, 200, 300)
	f.Partition = 1
	must(t, b.Commit(ctx, dataset, []lakehouse.File{f}, map[lakehouse.Partition]int64{p1: 300}, nil))
	offs, err := open(t, dir).Offsets(ctx, dataset)
	if err != nil || offs[p0] != 200 || offs[p1] != 300 {
		t.Errorf("offsets %v %v, want topic/0 at 200 and topic/1 at 300", offs, err)
	}
	if _, err := b.Offsets(ctx, dataset); err != nil { // b has the table as it is now
		t.Fatal(err)
	}
	must(t, a.Commit(ctx, dataset, nil, map[lakehouse.Partition]int64{p0: 250}, nil))
	if done, err := b.Compact(ctx, dataset, lakehouse.Compaction{TargetBytes: 1 << 30, Compression: "zstd", RowGroupRows: 1 << 17}); err != nil || done.Replaced != 3 {
		t.Errorf("compacting: %+v %v, want the 3 files in one", done, err)
	}
	py := pyenv.Python(t, "read the table with pyiceberg")
	out, err := exec.Command(py, append([]string{"-c", pyLoad + `t = cat.load_table(ident).scan().to_arrow()
print(t.num_rows, len(set(t.column("_cdc_offset").to_pylist())))
`}, pyArgs(t, dir)...)...).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "300 300" {
		t.Errorf("pyiceberg reads %q (%v), want 300 rows, 300 offsets", out, err)
	}
}

// TestKeptFooters commits the same files to two tables partitioned by
// day: to one with the footers their writes kept, the files themselves
// moved away during the commits (nothing is read back), to the other
// without, iceberg-go reading each file's footer. pyiceberg must find the
// same data files in both, with the same partitions, counts and bounds,
// and read the same rows.
func TestKeptFooters(t *testing.T) {
	if os.Getenv("CDCLAKE_TEST_ICEBERG_CATALOG") != "" {
		t.Skip("compares two SQLite catalogs")
	}
	ctx := context.Background()
	mem := memory.NewGoAllocator()
	rec, evolved := versions(t, mem, 300)
	kept, read := t.TempDir(), t.TempDir()
	ck, cr := open(t, kept), open(t, read)
	part := lakehouse.Partition{Source: "topic"}
	for _, step := range []struct {
		rec    arrow.RecordBatch
		lo, hi int
	}{{rec, 0, 100}, {rec, 100, 200}, {evolved, 200, 300}} {
		f := lake{t, read, mem}.write(step.rec, step.lo, step.hi)
		f.Granularity = "day"
		must(t, cr.Commit(ctx, dataset, []lakehouse.File{f}, map[lakehouse.Partition]int64{part: int64(step.hi)}, nil))

		g := lake{t, kept, mem}.write(step.rec, step.lo, step.hi)
		g.Granularity = "day"
		path := filepath.Join(kept, filepath.FromSlash(g.Key))
		data, err := os.ReadFile(path)
		must(t, err)
		n := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
		g.Bytes, g.Footer = int64(len(data)), data[len(data)-8-n:len(data)-8]
		must(t, os.Rename(path, path+".away"))
		must(t, ck.Commit(ctx, dataset, []lakehouse.File{g}, map[lakehouse.Partition]int64{part: int64(step.hi)}, nil))
		must(t, os.Rename(path+".away", path))
	}
	py := pyenv.Python(t, "read the tables with pyiceberg")
	script := pyLoad + `import os
t = cat.load_table(ident)
for task in sorted(t.scan().plan_files(), key=lambda x: os.path.basename(x.file.file_path)):
    f = task.file
    print(os.path.basename(f.file_path), f.record_count, f.file_size_in_bytes, f.partition,
          sorted(f.value_counts.items()), sorted(f.null_value_counts.items()),
          sorted(f.lower_bounds.items()), sorted(f.upper_bounds.items()))
print(t.scan().to_arrow().num_rows, "rows")
`
	dump := func(dir string) string {
		out, err := exec.Command(py, append([]string{"-c", script}, pyArgs(t, dir)...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("pyiceberg: %v\n%s", err, out)
		}
		return string(out)
	}
	k, r := dump(kept), dump(read)
	if k != r {
		t.Errorf("the table committed from kept footers:\n%s\nthe one that read them:\n%s", k, r)
	}
	if !strings.HasSuffix(strings.TrimSpace(k), "300 rows") || strings.Count(k, ".parquet") != 3 {
		t.Errorf("want 3 files and 300 rows:\n%s", k)
	}
}
