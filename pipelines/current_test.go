package pipelines_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/config"
	"github.com/cdclake/cdclake/internal/pyenv"
	"github.com/cdclake/cdclake/pipelines/source"
	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/current"
	"github.com/cdclake/cdclake/sinks/lake"
	"github.com/cdclake/cdclake/sinks/lakehouse"
	"github.com/cdclake/cdclake/sinks/lakehouse/deletion"
	"github.com/cdclake/cdclake/sinks/lakehouse/icebergsql"
	"gocloud.dev/blob"
)

// TestStateTableInSteps lands real PostgreSQL changes (a TRUNCATE, an
// ADD COLUMN, unchanged TOAST values among them), then builds each
// table's state three times as the landing state's offset moves past a
// third, two thirds and all of them, and once from nothing with no
// landing state: the bucket files must be the same bytes, and the
// manifest must not list the files it folded in whole.
func TestStateTableInSteps(t *testing.T) {
	tables := []string{"customers", "events", "orders", "audit_log"}
	bucket, lines := landCapture(t, tables)
	ctx := context.Background()
	w := lake.New(bucket, memory.DefaultAllocator)
	for _, name := range tables {
		dataset := "shop.public." + name
		for _, below := range []int64{lines / 3, 2 * lines / 3, lines + 1} {
			res, err := current.Build(ctx, bucket, w, current.Options{Dataset: dataset, Into: "steps/" + name, Key: []string{"id"},
				Buckets: 4, Committed: func(context.Context, string, int32) (int64, bool, error) { return below, true, nil }})
			if err != nil {
				t.Fatalf("%s below %d: %v", name, below, err)
			}
			t.Logf("%s below %d: %d changes from %d files, %d rows, %d buckets rewritten", name, below, res.Changes, res.Files, res.Rows, res.Buckets)
		}
		if _, err := current.Build(ctx, bucket, w, current.Options{Dataset: dataset, Into: "once/" + name, Key: []string{"id"}, Buckets: 4}); err != nil {
			t.Fatal(err)
		}
		steps, once := objects(t, bucket, "steps/"+name+"/"), objects(t, bucket, "once/"+name+"/")
		var buckets int
		for k, data := range once {
			if strings.Contains(k, "_manifest/") {
				continue
			}
			buckets++
			if !bytes.Equal(steps[k], data) {
				t.Errorf("%s: %s differs when built in steps", name, k)
			}
		}
		if buckets == 0 {
			t.Errorf("%s: no bucket files", name)
		}
		var m struct {
			Consumed []json.RawMessage `json:"consumed"`
			Partial  []string          `json:"partial"`
		}
		for k, data := range steps {
			if strings.HasSuffix(k, "00000000000000000003.json") {
				if err := json.Unmarshal(data, &m); err != nil {
					t.Fatal(err)
				}
			}
		}
		if len(m.Consumed) != 0 || len(m.Partial) != 0 {
			t.Errorf("%s: the last manifest lists %d consumed and %d partial files, want none (the offsets say it)",
				name, len(m.Consumed), len(m.Partial))
		}
	}
}

// TestMergeOnReadInSteps lands real PostgreSQL changes (a TRUNCATE, an
// ADD COLUMN, a key change and unchanged TOAST values among them) and
// builds each table's state in eight steps as merge-on-read: its rows,
// the data files' rows but those their deletion vectors delete, must be
// the rows of the state built at once, copy-on-write, column for column;
// and some steps must have merged.
func TestMergeOnReadInSteps(t *testing.T) {
	tables := []string{"customers", "events", "orders", "audit_log"}
	bucket, lines := landCapture(t, tables)
	ctx := context.Background()
	w := lake.New(bucket, memory.DefaultAllocator)
	location := func(k string) string { return "mem://lake/" + k }
	merged := 0
	for _, name := range tables {
		dataset := "shop.public." + name
		for step := int64(1); step <= 8; step++ {
			below := lines * step / 8
			if step == 8 {
				below = lines + 1
			}
			res, err := current.Build(ctx, bucket, w, current.Options{Dataset: dataset, Into: "mor/" + name, Key: []string{"id"},
				Buckets: 4, KeepReplaced: true, MergeOnRead: true, Location: location,
				Committed: func(context.Context, string, int32) (int64, bool, error) { return below, true, nil }})
			if err != nil {
				t.Fatalf("%s below %d: %v", name, below, err)
			}
			if res.Merged {
				merged++
			}
			t.Logf("%s below %d: %d changes, %d rows, %d buckets, merged %v, %d deletion vectors", name, below, res.Changes, res.Rows,
				res.Buckets, res.Merged, len(res.Deletes))
		}
		once, err := current.Build(ctx, bucket, w, current.Options{Dataset: dataset, Into: "cow/" + name, Key: []string{"id"}, Buckets: 4})
		if err != nil {
			t.Fatal(err)
		}
		got, want := stateRows(t, bucket, "mor/"+name), stateRows(t, bucket, "cow/"+name)
		if int64(len(want)) != once.Rows || !slices.Equal(got, want) {
			t.Errorf("%s: merge-on-read holds %d rows, copy-on-write %d (%d)", name, len(got), len(want), once.Rows)
			for i := range min(len(got), len(want)) {
				if got[i] != want[i] {
					t.Errorf("first difference:\n got %s\nwant %s", got[i], want[i])
					break
				}
			}
		}
	}
	if merged == 0 {
		t.Error("no build merged")
	}
}

// stateRows reads a state table as its newest manifest says: each data
// file's rows but those its deletion vector deletes, rendered by rowsOf
// and sorted.
func stateRows(t *testing.T, bucket *blob.Bucket, into string) []string {
	t.Helper()
	var newest string
	for _, k := range keys(t, bucket) {
		if strings.HasPrefix(k, into+"/_manifest/") {
			newest = max(newest, k)
		}
	}
	data, err := bucket.ReadAll(context.Background(), newest)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Files []string
		Merge []*struct {
			Files   []string
			Deletes []deletion.Vector
		}
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	files := slices.DeleteFunc(slices.Clone(m.Files), func(f string) bool { return f == "" })
	dead := map[string]*deletion.Positions{}
	for _, mg := range m.Merge {
		if mg == nil {
			continue
		}
		files = append(files, mg.Files...)
		for _, v := range mg.Deletes {
			puffin, err := bucket.ReadAll(context.Background(), v.Puffin)
			if err != nil {
				t.Fatal(err)
			}
			if dead[v.File], err = deletion.Decode(puffin, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	var out []string
	for _, f := range files {
		for i, r := range rowsOf(t, bucket, f) {
			if d := dead[f]; d == nil || !d.Contains(uint64(i)) {
				out = append(out, r)
			}
		}
	}
	slices.Sort(out)
	return out
}

// landCapture lands the real PostgreSQL capture of tables, in files of
// 20 rows, and returns the lake and how many lines it landed.
func landCapture(t *testing.T, tables []string) (*blob.Bucket, int64) {
	t.Helper()
	return landCaptureWith(t, tables, "")
}

// landCaptureWith is landCapture with more config (routes).
func landCaptureWith(t *testing.T, tables []string, more string) (*blob.Bucket, int64) {
	t.Helper()
	var input strings.Builder
	for _, name := range tables {
		data, err := os.ReadFile(filepath.Join("..", "testdata", "debezium-real", "shop.public."+name+".ndjson"))
		if err != nil {
			t.Fatal(err)
		}
		input.Write(data)
	}
	bucket, _ := land(t, "defaults:\n  max_rows: 20\n"+more, input.String())
	return bucket, int64(strings.Count(input.String(), "\n"))
}

// objects reads the objects under prefix, by name relative to it.
func objects(t *testing.T, bucket *blob.Bucket, prefix string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, k := range keys(t, bucket) {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		data, err := bucket.ReadAll(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(k, prefix)] = data
	}
	return out
}

// TestStateTableKeyChangeInTwoEvents lands PostgreSQL's primary-key update
// of the real capture (customers 4 → 40: Debezium's DELETE of 4, a
// tombstone, then a CREATE of 40 whose unchanged TOAST values are
// placeholders) with the __debezium.newkey and __debezium.oldkey headers
// Kafka carries: the state's row 40 takes the values the CREATE did not
// carry from row 4, as PostgreSQL holds them.
func TestStateTableKeyChangeInTwoEvents(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "testdata", "debezium-real", "shop.public.customers.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	key := func(id int) []byte {
		return fmt.Appendf(nil, `{"schema":{"type":"struct","fields":[{"type":"int64","optional":false,"field":"id"}],"optional":false,"name":"shop.public.customers.Key"},"payload":{"id":%d}}`, id)
	}
	var recs []source.Record
	moves := 0
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		r := source.Record{Offset: int64(i), Value: []byte(line)}
		var m struct {
			Payload struct {
				Op            string
				Before, After *struct{ ID int }
			}
		}
		if line != "" {
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatal(err)
			}
		}
		switch p := m.Payload; {
		case p.Op == "d" && p.Before.ID == 4:
			r.Headers = []source.Header{{Key: "__debezium.newkey", Value: key(40)}}
			moves++
		case p.Op == "c" && p.After.ID == 40:
			r.Headers = []source.Header{{Key: "__debezium.oldkey", Value: key(4)}}
			moves++
		}
		recs = append(recs, r)
	}
	if moves != 2 {
		t.Fatalf("the capture's key change: %d events, want 2", moves)
	}
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	bucket, _ := landSource(t, cfg, source.NewMemory(&source.Block{Source: "shop.public.customers", Topic: "shop.public.customers", Records: recs}))
	ctx := context.Background()
	res, err := current.Build(ctx, bucket, lake.New(bucket, memory.DefaultAllocator),
		current.Options{Dataset: "shop.public.customers", Key: []string{"id"}, Buckets: 1})
	if err != nil {
		t.Fatal(err)
	}
	var pg map[string]struct {
		Columns [][]any
		Rows    [][]any
	}
	if data, err = os.ReadFile(filepath.Join("..", "testdata", "debezium-real", "_postgres.json")); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &pg); err != nil {
		t.Fatal(err)
	}
	var want string
	for _, r := range pg["customers"].Rows {
		if r[0].(float64) == 40 {
			want = r[6].(string) // notes
		}
	}
	tbl := readTable(t, bucket, res.StateFiles[0])
	defer tbl.Release()
	rdr := array.NewTableReader(tbl, 1<<20)
	defer rdr.Release()
	found := false
	for rdr.Next() {
		rec := rdr.RecordBatch()
		col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
		for i := range int(rec.NumRows()) {
			if col("id").(*array.Int64).Value(i) != 40 {
				continue
			}
			found = true
			if got := col("notes").ValueStr(i); got != want || want == "" {
				t.Errorf("row 40's notes: %.40q, PostgreSQL's %.40q", got, want)
			}
			// Only the columns added after its last change are unknown.
			if absent := col("_cdc_absent").ValueStr(i); absent != `["loyalty_tier","score"]` {
				t.Errorf("row 40's unknown columns: %s, want only those added since", absent)
			}
		}
	}
	if !found {
		t.Error("no row 40")
	}
}

// raceWriter holds a build's first state file back, once it has read
// everything (closing arrived), until release is closed.
type raceWriter struct {
	current.Writer
	arrived, release chan struct{}
	once             sync.Once
}

func (w *raceWriter) WriteObject(ctx context.Context, key string, data []byte, contentType string) error {
	w.once.Do(func() {
		close(w.arrived)
		<-w.release
	})
	return w.Writer.WriteObject(ctx, key, data, contentType)
}

// TestStateTableRaces runs two builds of one table at once from the same
// manifest, the one that folds in less writing its files after the other
// committed (a paused instance, resumed): it fails as concurrent and
// deletes what it wrote, the folder holds exactly the other's files, and
// the table then equals a build from nothing (with files replaced in
// place, its older buckets would stay under the newer manifest).
func TestStateTableRaces(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "testdata", "debezium-real", "shop.public.events.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	lines := int64(strings.Count(string(data), "\n"))
	bucket, _ := land(t, "defaults:\n  max_rows: 20\n", string(data))
	ctx := context.Background()
	w := lake.New(bucket, memory.DefaultAllocator)
	build := func(w current.Writer, into string, below int64) (current.Result, error) {
		return current.Build(ctx, bucket, w, current.Options{Dataset: "shop.public.events", Into: into, Key: []string{"id"}, Buckets: 4,
			Committed: func(context.Context, string, int32) (int64, bool, error) { return below, true, nil }})
	}
	if _, err := build(w, "race", lines/3); err != nil {
		t.Fatal(err)
	}
	slow := &raceWriter{Writer: w, arrived: make(chan struct{}), release: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := build(slow, "race", 2*lines/3)
		done <- err
	}()
	<-slow.arrived // it has read the manifest the other starts from too
	first, err := build(w, "race", lines+1)
	if err != nil {
		t.Fatal(err)
	}
	close(slow.release)
	if err := <-done; !errors.Is(err, current.ErrConcurrent) {
		t.Fatalf("the slower build: %v, want ErrConcurrent", err)
	}
	files := objects(t, bucket, "race/")
	for k := range files {
		if !strings.HasPrefix(k, "_manifest/") && !slices.Contains(first.StateFiles, "race/"+k) {
			t.Errorf("race/%s is left: the newest manifest names %v", k, first.StateFiles)
		}
	}
	if again, err := build(w, "race", lines+1); err != nil || again.Changes != 0 {
		t.Errorf("a build after the race: %+v, %v; want nothing new", again, err)
	}
	if _, err := build(w, "once", lines+1); err != nil {
		t.Fatal(err)
	}
	once := objects(t, bucket, "once/")
	for k, data := range once {
		if !strings.HasPrefix(k, "_manifest/") && !bytes.Equal(files[k], data) {
			t.Errorf("%s differs from a build from nothing", k)
		}
	}
}

// TestMergeOnReadLostBuild builds a state table merge-on-read in three
// steps and commits the first and the third to Iceberg, the second's
// commit lost: the third's deletion vectors delete rows of files only the
// second added, which one snapshot cannot add with them, so its commit
// fails with ErrStateBehind; committed after the second, it goes in, and
// pyiceberg reads the table as the third build's files but the rows its
// deletion vectors delete (current_iceberg.py). (The lake is landed plain,
// without the table's JSON column, which Iceberg lands as text.)
func TestMergeOnReadLostBuild(t *testing.T) {
	ctx := context.Background()
	mem, lines := landCaptureWith(t, []string{"events"}, "routes:\n  - match: shop.public.events\n    columns:\n      exclude: [payload]\n")
	dir := t.TempDir()
	bucket, err := lake.OpenBucket(ctx, filepath.Join(dir, "lake"))
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	for _, k := range keys(t, mem) { // the landed lake, on disk for the catalog
		data, err := mem.ReadAll(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if err := bucket.WriteAll(ctx, k, data, nil); err != nil {
			t.Fatal(err)
		}
	}
	warehouse := "file://" + filepath.Join(dir, "lake")
	cat, err := icebergsql.Open(ctx, lakehouse.Config{Catalog: "sqlite://" + filepath.Join(dir, "catalog.db"), Warehouse: warehouse},
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	w := lake.New(bucket, memory.DefaultAllocator)
	const name = "shop.public.events" + lakehouse.StateSuffix
	var builds []current.Result
	for _, below := range []int64{lines / 3, 2 * lines / 3, lines + 1} {
		res, err := current.Build(ctx, bucket, w, current.Options{Dataset: "shop.public.events", Key: []string{"id"}, Buckets: 2,
			KeepReplaced: true, MergeOnRead: true, Location: func(k string) string { return warehouse + "/" + k },
			Committed: func(context.Context, string, int32) (int64, bool, error) { return below, true, nil }})
		if err != nil {
			t.Fatal(err)
		}
		builds = append(builds, res)
	}
	set := func(res current.Result) error {
		props := map[string]string{lakehouse.StateVersionKey: strconv.FormatInt(res.Version, 10)}
		for _, o := range res.Offsets {
			props[lakehouse.OffsetKey(lakehouse.Partition{Source: sinks.Sanitize(o.Source), Partition: o.Partition})] = strconv.FormatInt(o.Next, 10)
		}
		return cat.SetFiles(ctx, name, lakehouse.FileSet{Location: current.DefaultInto("shop.public.events"), Keys: res.StateFiles,
			Deletes: res.Deletes, Schema: res.Schema, Version: res.Version, Base: res.Base, Properties: props})
	}
	if !builds[1].Merged || !builds[2].Merged || len(builds[2].Deletes) == 0 {
		t.Fatalf("the builds did not merge: %+v", builds)
	}
	if err := set(builds[0]); err != nil {
		t.Fatal(err)
	}
	if err := set(builds[2]); !errors.Is(err, lakehouse.ErrStateBehind) {
		t.Fatalf("the third build over the first: %v, want ErrStateBehind", err)
	}
	if err := set(builds[1]); err != nil {
		t.Fatal(err)
	}
	if err := set(builds[2]); err != nil {
		t.Fatal(err)
	}
	py := pyenv.Python(t, "read the state table with pyiceberg")
	out, err := exec.Command(py, filepath.Join("..", "testdata", "e2e", "current_iceberg.py"), filepath.Join(dir, "catalog.db"),
		filepath.Join(dir, "lake"), "--tables", "1").CombinedOutput()
	if err != nil {
		t.Fatalf("current_iceberg.py: %v\n%s", err, out)
	}
	t.Log(strings.TrimSpace(string(out)))
}
