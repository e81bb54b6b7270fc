package iceappend_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/cdclake/cdclake/internal/pyenv"
	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/lake"
	"github.com/cdclake/cdclake/sinks/lakehouse"
	"github.com/cdclake/cdclake/sinks/lakehouse/iceappend"
	"github.com/cdclake/cdclake/sinks/lakehouse/icebergsql"
	"github.com/cdclake/cdclake/sinks/parquet"
	"github.com/cdclake/cdclake/sinks/parquet/parquettest"
)

const dataset = "inventory.public.customers"

// write writes rows [lo, hi) of rec to the lake in dir as the file of
// source partition part starting at offset lo, with its footer kept.
func write(t *testing.T, dir string, rec arrow.RecordBatch, part int32, lo, hi int) lakehouse.File {
	t.Helper()
	key := dataset + "/date=2024-05-31/" + sinks.ObjectName(sinks.Position{Source: "topic", Partition: part, Offset: int64(lo)}, ".parquet")
	var buf bytes.Buffer
	if err := parquet.Write(&buf, rec, [][2]int{{lo, hi}}, parquet.Options{Compression: "zstd", RowGroupRows: 40},
		memory.DefaultAllocator); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	n := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
	return lakehouse.File{Key: key, Table: dataset, Schema: rec.Schema(), Source: "topic", Partition: part, First: int64(lo),
		Granularity: "day", Bytes: int64(len(data)), Footer: slices.Clone(data[len(data)-8-n : len(data)-8])}
}

// rows returns n change rows as a table committed to Iceberg lands them
// (JSON as plain strings), with a memo column of NULLs only (Arrow's null
// type); and the same rows as a later version of the table, whose memo
// has values and which has a loyalty_tier column added at the end. They
// are released when the test ends.
func rows(t *testing.T, n int) (rec, evolved arrow.RecordBatch) {
	mem := memory.DefaultAllocator
	images := parquettest.Images(mem, n)
	defer images.Release()
	sch := schema.PlainJSON(images.Schema())
	cols := make([]arrow.Array, images.NumCols())
	for i, c := range images.Columns() {
		cols[i] = array.MakeFromData(retyped(c.Data(), sch.Field(i).Type))
	}
	strings := func(f func(i int) string) arrow.Array {
		b := array.NewStringBuilder(mem)
		defer b.Release()
		for i := range n {
			if v := f(i); v != "" {
				b.Append(v)
			} else {
				b.AppendNull()
			}
		}
		return b.NewArray()
	}
	none := array.NewNull(n)
	memo := strings(func(i int) string { return map[bool]string{true: fmt.Sprintf("memo %d", i)}[i%5 == 0] })
	tier := strings(func(i int) string { return map[bool]string{true: fmt.Sprintf("tier-%d", i%7)}[i%3 != 0] })
	md := sch.Metadata()
	fields := append(sch.Fields(), arrow.Field{Name: "memo", Type: arrow.Null, Nullable: true})
	rec = array.NewRecordBatch(arrow.NewSchema(fields, &md), append(slices.Clone(cols), none), int64(n))
	fields = append(sch.Fields(), arrow.Field{Name: "memo", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "loyalty_tier", Type: arrow.BinaryTypes.String, Nullable: true})
	evolved = array.NewRecordBatch(arrow.NewSchema(fields, &md), append(slices.Clone(cols), memo, tier), int64(n))
	t.Cleanup(func() { rec.Release(); evolved.Release() })
	return rec, evolved
}

// retyped returns d as data of type t, which has the same layout.
func retyped(d arrow.ArrayData, t arrow.DataType) arrow.ArrayData {
	var kids []arrow.ArrayData
	for i, c := range d.Children() {
		ct := c.DataType()
		switch x := t.(type) {
		case *arrow.StructType:
			ct = x.Field(i).Type
		case *arrow.ListType:
			ct = x.Elem()
		case *arrow.MapType:
			ct = x.Elem()
		}
		kids = append(kids, retyped(c, ct))
	}
	return array.NewData(t, d.Len(), d.Buffers(), kids, d.NullN(), d.Offset())
}

// run tells one test process's namespaces in a REST catalog from
// another's: the service outlives the tests.
var run = strconv.FormatInt(time.Now().UnixNano(), 36)

// restCatalog returns the REST catalog's URI the tests commit to
// (CDCLAKE_TEST_ICEBERG_CATALOG, infra/start.sh iceberg-rest); "": a
// SQLite catalog in each lake.
func restCatalog() string {
	if u := os.Getenv("CDCLAKE_TEST_ICEBERG_CATALOG"); strings.HasPrefix(u, "http") {
		return u
	}
	return ""
}

// config returns the catalog of the lake in dir: a SQLite file there or
// the REST catalog, under a namespace of the lake's own.
func config(dir string) lakehouse.Config {
	cfg := lakehouse.Config{Catalog: "sqlite://" + filepath.Join(dir, "catalog.db"), Warehouse: "file://" + dir}
	if u := restCatalog(); u != "" {
		sum := sha256.Sum256([]byte(dir))
		cfg.Catalog, cfg.Namespace = u, []string{"t" + run + "_" + hex.EncodeToString(sum[:6])}
	}
	return cfg
}

// pyArgs are pyLoad's arguments for the lake in dir.
func pyArgs(dir string) []string {
	cfg := config(dir)
	return []string{dir, cfg.Catalog, strings.Join(cfg.Namespace, ".")}
}

// full opens the full committer (iceberg-go, in the test's process) of
// the lake in dir.
func full(t *testing.T, dir string) *icebergsql.Iceberg {
	t.Helper()
	c, err := icebergsql.Open(context.Background(), config(dir), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// appender opens the in-process Catalog of the lake in dir, its full
// committer iceberg-go's in the test's process.
func appender(t *testing.T, dir string) *iceappend.Catalog {
	t.Helper()
	return appenderOf(t, dir, config(dir))
}

// appenderOf is appender with the catalog of cfg.
func appenderOf(t *testing.T, dir string, cfg lakehouse.Config) *iceappend.Catalog {
	t.Helper()
	ctx := context.Background()
	bucket, err := lake.OpenBucket(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bucket.Close() })
	store := lake.New(bucket, memory.DefaultAllocator)
	c, err := iceappend.Open(ctx, cfg, bucket, store, true, slog.New(slog.DiscardHandler),
		func(ctx context.Context) (lakehouse.Catalog, error) {
			return icebergsql.Open(ctx, cfg, slog.New(slog.DiscardHandler))
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	a, ok := c.(*iceappend.Catalog)
	if !ok {
		t.Fatalf("a SQLite catalog over its lake opened %T, not the in-process one", c)
	}
	return a
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// pyLoad is Python that loads the test table, of the lake in its
// argument, as t.
const pyLoad = `
import sys, os
lake, uri, ns = sys.argv[1], sys.argv[2], sys.argv[3]
if uri.startswith("http"):
    from pyiceberg.catalog.rest import RestCatalog
    cat = RestCatalog("cdclake", uri=uri)
else:
    from pyiceberg.catalog.sql import SqlCatalog
    cat = SqlCatalog("cdclake", uri="sqlite:///" + lake + "/catalog.db", warehouse="file://" + lake)
t = cat.load_table(tuple(([ns] if ns else []) + ["inventory", "public", "customers"]))
`

// dump prints, with pyiceberg, a table's schema, partition spec, every
// snapshot (its summary and rows) and the current files with their
// statistics; the bounds of top-level columns only (the in-process
// commits give those of struct fields too), and no statistics of memo
// (for a column of Arrow's null type iceberg-go counts one row group of
// the file; the in-process commits count all: checked on their own).
const dump = pyLoad + `
top = {f.field_id for f in t.schema().fields}
memo = t.schema().find_field("memo").field_id
print(t.schema())
print(t.spec())
print({k: v for k, v in t.properties.items() if k.startswith("cdclake") or k.startswith("schema.")})
for s in t.snapshots():
    summary = {k: v for k, v in s.summary.additional_properties.items() if k != "iceberg-version"}
    print(s.sequence_number, s.summary.operation, s.schema_id, sorted(summary.items()), t.scan(snapshot_id=s.snapshot_id).to_arrow().num_rows)
for task in sorted(t.scan().plan_files(), key=lambda x: os.path.basename(x.file.file_path)):
    f = task.file
    print(os.path.basename(f.file_path), f.record_count, f.file_size_in_bytes, f.partition, f.split_offsets,
          *[sorted((k, v) for k, v in m.items() if k != memo) for m in (f.column_sizes, f.value_counts, f.null_value_counts)],
          sorted((k, v) for k, v in f.lower_bounds.items() if k in top), sorted((k, v) for k, v in f.upper_bounds.items() if k in top))
rows = t.scan().to_arrow().sort_by([("_cdc_partition", "ascending"), ("_cdc_offset", "ascending")])
print(rows.num_rows, "rows")
print(rows.to_pylist())
`

// TestAppendsAsTheFullCommitter commits the same files to two lakes, in
// process and with the full committer only: made at the first commit,
// evolved by a file with a new column, with files of two source
// partitions, a column of NULLs only that later gets values. pyiceberg
// reads the same tables from both (schemas, specs,
// snapshots and the rows of each, files and their statistics), and every
// commit was made in process. The full committer reads the same offsets
// and landed files from the lake committed in process.
func TestAppendsAsTheFullCommitter(t *testing.T) {
	py := pyenv.Python(t, "read the tables with pyiceberg")
	ctx := context.Background()
	rec, evolved := rows(t, 400)
	inProcess, committed := t.TempDir(), t.TempDir()
	a, f := appender(t, inProcess), full(t, committed)
	p0, p1 := lakehouse.Partition{Source: "topic"}, lakehouse.Partition{Source: "topic", Partition: 1}
	steps := []struct {
		rec    arrow.RecordBatch
		ranges [][3]int // partition, lo, hi
	}{
		{rec, [][3]int{{0, 0, 100}}},
		{rec, [][3]int{{0, 100, 150}, {1, 150, 200}}},
		{evolved, [][3]int{{0, 200, 300}}},
		{evolved, [][3]int{{1, 300, 400}}},
	}
	for i, step := range steps {
		var fa, fc []lakehouse.File
		recorded := map[lakehouse.Partition]int64{}
		for _, r := range step.ranges {
			fa = append(fa, write(t, inProcess, step.rec, int32(r[0]), r[1], r[2]))
			fc = append(fc, write(t, committed, step.rec, int32(r[0]), r[1], r[2]))
			recorded[lakehouse.Partition{Source: "topic", Partition: int32(r[0])}] = int64(r[2])
		}
		must(t, a.Commit(ctx, dataset, fa, recorded, nil))
		must(t, f.Commit(ctx, dataset, fc, recorded, nil))
		if a.Appended() != int64(i+1) || a.Handed() != 0 {
			t.Fatalf("after commit %d: %d commits in process, %d handed to the full committer", i+1, a.Appended(), a.Handed())
		}
	}
	read := func(dir string) string {
		out, err := exec.Command(py, append([]string{"-c", dump}, pyArgs(dir)...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("pyiceberg: %v\n%s", err, out)
		}
		return string(out)
	}
	got, want := read(inProcess), read(committed)
	if got != want {
		t.Errorf("the table committed in process:\n%s\nthe full committer's:\n%s", got, want)
	}
	if !strings.Contains(got, "\n400 rows\n") {
		t.Errorf("want 400 rows:\n%s", got)
	}
	memo := pyLoad + `
memo = t.schema().find_field("memo").field_id
for task in t.scan().plan_files():
    f = task.file
    # NULLs only before the column got values (offset 200: a value every
    # fifth row after); counted, or not known.
    first = int(os.path.basename(f.file_path).split("-o")[1].split(".")[0])
    nulls = f.record_count if first < 200 else f.record_count * 4 // 5
    if f.value_counts.get(memo) != f.record_count or f.null_value_counts.get(memo, nulls) != nulls:
        print("memo:", f.file_path, f.record_count, f.value_counts.get(memo), f.null_value_counts.get(memo))
`
	if out, err := exec.Command(py, append([]string{"-c", memo}, pyArgs(inProcess)...)...).CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("the statistics of the column of NULLs only: %v\n%s", err, out)
	}

	// The full committer reads the lake committed in process as its own.
	other := full(t, inProcess)
	want2, err := other.Offsets(ctx, dataset)
	must(t, err)
	got2, err := a.Offsets(ctx, dataset)
	must(t, err)
	if !maps.Equal(got2, want2) || got2[p0] != 300 || got2[p1] != 400 {
		t.Errorf("offsets in process %v, the full committer's %v", got2, want2)
	}
	parts := map[lakehouse.Partition]bool{p0: true, p1: true}
	// What a commit whose reply was lost leaves: a file past the offsets.
	late := write(t, inProcess, evolved, 0, 300, 320)
	must(t, a.Commit(ctx, dataset, []lakehouse.File{late}, nil, nil))
	fresh := appender(t, inProcess)
	landed, err := fresh.Landed(ctx, dataset, parts)
	must(t, err)
	wantLanded, err := full(t, inProcess).Landed(ctx, dataset, parts)
	must(t, err)
	if !maps.Equal(landed, wantLanded) || !landed[late.Key] || len(landed) != 1 {
		t.Errorf("landed in process %v, the full committer's %v; want %s alone", landed, wantLanded, late.Key)
	}
	// The retry skips it, and the table holds it once.
	must(t, fresh.Commit(ctx, dataset, []lakehouse.File{late}, map[lakehouse.Partition]int64{p0: 320}, landed))
	if out := read(inProcess); !strings.Contains(out, "\n420 rows\n") {
		t.Errorf("want 420 rows after the retry:\n%s", out)
	}
}

// TestConcurrentAppends: two instances append to one table at once, each
// its own source partition's files, and lose swaps of the catalog row to
// each other; each plans the commit again from the table as it is. A file
// one of them commits that the other committed meanwhile (a zombie that
// still had the partition) is not added twice. pyiceberg reads every row
// once, and both partitions' offsets.
func TestConcurrentAppends(t *testing.T) {
	py := pyenv.Python(t, "read the tables with pyiceberg")
	ctx := context.Background()
	rec, _ := rows(t, 400)
	dir := t.TempDir()
	a, b := appender(t, dir), appender(t, dir)
	// The table is made first: two instances making it at once is the
	// full committer's (a table made meanwhile).
	first := write(t, dir, rec, 0, 0, 20)
	must(t, a.Commit(ctx, dataset, []lakehouse.File{first}, map[lakehouse.Partition]int64{{Source: "topic"}: 20}, nil))
	errs := make(chan error, 2)
	for i, c := range []*iceappend.Catalog{a, b} {
		go func() {
			part := int32(i)
			for lo := 20; lo < 200; lo += 20 {
				f := write(t, dir, rec, part, lo+200*int(part), lo+200*int(part)+20)
				hi := int64(lo + 200*int(part) + 20)
				if err := c.Commit(ctx, dataset, []lakehouse.File{f}, map[lakehouse.Partition]int64{{Source: "topic", Partition: part}: hi}, nil); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 2 {
		must(t, <-errs)
	}
	// a commits again a file b committed: b's view of it is the table's.
	again := write(t, dir, rec, 1, 380, 400)
	must(t, a.Commit(ctx, dataset, []lakehouse.File{again}, nil, nil))
	// b commits a file of a partition no offset is recorded for, a
	// commits another on top, then the first again: a's own commit holds
	// b's, and the file is not added twice.
	k := write(t, dir, rec, 2, 0, 10)
	must(t, b.Commit(ctx, dataset, []lakehouse.File{k}, nil, nil))
	must(t, a.Commit(ctx, dataset, []lakehouse.File{write(t, dir, rec, 3, 10, 20)}, nil, nil))
	must(t, a.Commit(ctx, dataset, []lakehouse.File{k}, nil, nil))
	if a.Handed()+b.Handed() != 0 {
		t.Errorf("%d and %d commits handed to the full committer", a.Handed(), b.Handed())
	}
	out, err := exec.Command(py, "-c", pyLoad+`
rows = t.scan().to_arrow()
paths = [task.file.file_path for task in t.scan().plan_files()]
print(rows.num_rows, len(paths), len(set(paths)), sorted(k for k in t.properties if k.startswith("cdclake.offset")))
`, pyArgs(dir)[0], pyArgs(dir)[1], pyArgs(dir)[2]).CombinedOutput()
	if err != nil {
		t.Fatalf("pyiceberg: %v\n%s", err, out)
	}
	// 20 rows of partition 0 first, then 9 files of 20 rows from each,
	// then 10 rows of partitions 2 and 3: 21 files, each once.
	want := "400 21 21 ['cdclake.offset.topic.0', 'cdclake.offset.topic.1']"
	if strings.TrimSpace(string(out)) != want {
		t.Errorf("read %s, want %s", out, want)
	}
}

// TestReplayWritesTheSameNames: the same commits into a fresh lake and
// catalog at the same place, later, write metadata objects of the same
// names (their contents hold the time; their names do not).
func TestReplayWritesTheSameNames(t *testing.T) {
	if restCatalog() != "" {
		t.Skip("a REST catalog names the metadata files itself")
	}
	ctx := context.Background()
	rec, evolved := rows(t, 200)
	dir := t.TempDir()
	land := func() []string {
		a := appender(t, dir)
		p0 := lakehouse.Partition{Source: "topic"}
		must(t, a.Commit(ctx, dataset, []lakehouse.File{write(t, dir, rec, 0, 0, 100)}, map[lakehouse.Partition]int64{p0: 100}, nil))
		must(t, a.RecordOffsets(ctx, dataset, map[lakehouse.Partition]int64{p0: 120}))
		must(t, a.Commit(ctx, dataset, []lakehouse.File{write(t, dir, evolved, 0, 120, 200)}, map[lakehouse.Partition]int64{p0: 200}, nil))
		must(t, a.Close())
		entries, err := os.ReadDir(filepath.Join(dir, dataset, "metadata"))
		must(t, err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}
	first := land()
	entries, err := os.ReadDir(dir)
	must(t, err)
	for _, e := range entries {
		must(t, os.RemoveAll(filepath.Join(dir, e.Name())))
	}
	time.Sleep(20 * time.Millisecond) // another last-updated-ms
	if again := land(); !slices.Equal(again, first) || len(first) != 7 {
		t.Errorf("the replay wrote %v, the first landing %v (want 3 metadata files, 2 manifests, 2 lists)", again, first)
	}
}

// TestRESTCommitsWhoseRepliesAreLost: a REST catalog's commit applied
// whose reply is lost (a 504 after the service took it), one that failed
// before it was applied (a 500), and one applied whose connection closes
// without an answer, of a partition without offsets; each is tried again
// as the landing does, with the same files. A commit answered 429 and a
// load answered 503 are sent again at once, by the client. pyiceberg reads
// every row once and the offsets of the last commit. The faults come from
// a proxy in front of the real service.
// A load of the table that did not move since is answered 304, by its
// ETag. The catalog is reached with OAuth2 client credentials: an answer
// 401 gets another token.
func TestRESTCommitsWhoseRepliesAreLost(t *testing.T) {
	uri := restCatalog()
	if uri == "" {
		t.Skip("needs a REST catalog: CDCLAKE_TEST_ICEBERG_CATALOG (infra/start.sh iceberg-rest)")
	}
	py := pyenv.Python(t, "read the tables with pyiceberg")
	target, err := url.Parse(uri)
	must(t, err)
	var mode atomic.Value // "lose", "refuse", "drop", "busy" or ""
	mode.Store("")
	var faults, unchanged, tokens, unauthorized, busy atomic.Int64
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(r *http.Response) error {
		if r.StatusCode == http.StatusNotModified {
			unchanged.Add(1)
		}
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		commit := r.Method == http.MethodPost && strings.Contains(r.URL.Path, "/tables/")
		if strings.HasSuffix(r.URL.Path, "/oauth/tokens") {
			tokens.Add(1)
		} else if r.Header.Get("Authorization") != "Bearer client-credentials-token:sub=cdclake" || r.Header.Get("X-Client") != "cdclake-test" {
			t.Errorf("%s %s: Authorization %q, X-Client %q", r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("X-Client"))
		}
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/tables/") && unauthorized.CompareAndSwap(0, 1) {
			http.Error(w, `{"error":{"message":"the token expired","type":"NotAuthorizedException","code":401}}`, http.StatusUnauthorized)
			return
		}
		switch m := mode.Load().(string); {
		case commit && m == "refuse":
			faults.Add(1)
			http.Error(w, "internal error", http.StatusInternalServerError)
		case m == "busy" && (commit && busy.CompareAndSwap(0, 1) || r.Method == http.MethodGet && busy.CompareAndSwap(1, 2)):
			// Too many requests (the commit, told when to come back),
			// then not available now (a load, told nothing): neither was
			// processed, and each is sent again.
			if commit {
				w.Header().Set("Retry-After", "1")
				http.Error(w, `{"error":{"message":"slow down","type":"TooManyRequestsException","code":429}}`, http.StatusTooManyRequests)
				return
			}
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
		case commit && (m == "lose" || m == "drop"):
			faults.Add(1)
			rec := httptest.NewRecorder()
			proxy.ServeHTTP(rec, r)
			if rec.Code != http.StatusOK {
				t.Errorf("the commit whose reply is lost: %d %s", rec.Code, rec.Body)
			}
			if m == "lose" {
				http.Error(w, "gateway timeout", http.StatusGatewayTimeout)
				return
			}
			// No answer at all: the connection closes.
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			conn.Close()
		default:
			proxy.ServeHTTP(w, r)
		}
	}))
	defer srv.Close()

	ctx := context.Background()
	rec, _ := rows(t, 400)
	dir := t.TempDir()
	cfg := config(dir)
	// OAuth2 client credentials, whose token the service gives (its
	// fixture's token endpoint) and takes again after a 401; a header of
	// the configuration's own.
	cfg.Catalog, cfg.Properties = srv.URL, map[string]string{"credential": "cdclake:secret", "header.X-Client": "cdclake-test"}
	a := appenderOf(t, dir, cfg)
	p0 := lakehouse.Partition{Source: "topic"}
	must(t, a.Commit(ctx, dataset, []lakehouse.File{write(t, dir, rec, 0, 0, 100)}, map[lakehouse.Partition]int64{p0: 100}, nil))
	// The last commit records no offset for its partition: only the
	// table's moving past the view held says its file went in.
	for i, m := range []string{"lose", "refuse", "drop"} {
		lo, hi := 100*(i+1), 100*(i+2)
		f, recorded := write(t, dir, rec, 0, lo, hi), map[lakehouse.Partition]int64{p0: int64(hi)}
		if m == "drop" {
			f, recorded = write(t, dir, rec, 1, lo, hi), nil
		}
		mode.Store(m)
		if err := a.Commit(ctx, dataset, []lakehouse.File{f}, recorded, nil); err == nil {
			t.Fatalf("the commit of %d..%d (%s): no error", lo, hi, m)
		}
		mode.Store("")
		must(t, a.Commit(ctx, dataset, []lakehouse.File{f}, recorded, nil))
	}
	if faults.Load() != 3 || a.Handed() != 0 {
		t.Errorf("%d faults, %d commits handed to the full committer; want 3 and 0", faults.Load(), a.Handed())
	}
	// A commit answered 429 and a load answered 503 are sent again: the
	// commit goes in without an error. It moves no offset, and the loads
	// before it (to plan it) see no other commit.
	mode.Store("busy")
	if err := a.Commit(ctx, dataset, []lakehouse.File{write(t, dir, rec, 2, 0, 100)}, nil, nil); err != nil {
		t.Errorf("the commit answered 429 once: %v", err)
	}
	must(t, a.Commit(ctx, dataset, nil, map[lakehouse.Partition]int64{p0: 300}, nil))
	mode.Store("")
	if busy.Load() != 2 {
		t.Errorf("%d answers 429 or 503, want 2 (one commit, one load)", busy.Load())
	}
	// A table read that did not move since is answered by its ETag.
	must(t, a.Commit(ctx, dataset, nil, map[lakehouse.Partition]int64{p0: 300}, nil))
	if unchanged.Load() == 0 {
		t.Error("no load of the table was answered 304 Not Modified")
	}
	if tokens.Load() != 2 || unauthorized.Load() != 1 {
		t.Errorf("%d tokens asked for after %d answers 401, want 2 after 1", tokens.Load(), unauthorized.Load())
	}
	out, err := exec.Command(py, append([]string{"-c", pyLoad + `
paths = [task.file.file_path for task in t.scan().plan_files()]
print(t.scan().to_arrow().num_rows, len(paths), len(set(paths)), t.properties.get("cdclake.offset.topic.0"))
`}, pyArgs(dir)...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("pyiceberg: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "500 5 5 300" {
		t.Errorf("read %s, want 500 rows in 5 files, each once, and offset 300", got)
	}
}
