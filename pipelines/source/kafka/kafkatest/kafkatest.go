// Package kafkatest has the helpers of the tests that run against a real
// broker: topics of generated CDC streams, and checks of what landed.
package kafkatest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/cdclake/cdclake/pipelines/source/gen"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Brokers returns the broker of CDCLAKE_TEST_KAFKA_BROKERS, or skips the
// test: make e2e starts Kafka from infra/ and sets it.
func Brokers(t testing.TB) string {
	b := os.Getenv("CDCLAKE_TEST_KAFKA_BROKERS")
	if b == "" {
		t.Skip("CDCLAKE_TEST_KAFKA_BROKERS is not set (make e2e sets it)")
	}
	return b
}

// Cluster returns the brokers of CDCLAKE_TEST_KAFKA_BROKERS, or else those
// of an in-process cluster (franz-go's kfake) of three brokers, closed
// when the test ends: the tests of the group's behaviour run in make test
// too, and against the real broker in make e2e.
func Cluster(t testing.TB) string {
	if b := os.Getenv("CDCLAKE_TEST_KAFKA_BROKERS"); b != "" {
		return b
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.GroupMinSessionTimeout(time.Second))
	if err != nil {
		t.Fatalf("starting an in-process Kafka cluster: %v", err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()[0] // a seed: the client finds the others
}

var tableKey = regexp.MustCompile(`(?:SALES\.T|shop\.public\.t|shop\.t|"table":"t)(\d{3})`)

// Topic creates a topic of parts partitions, deleted when the test ends,
// and produces a generated mixed stream of events into it.
func Topic(t *testing.T, broker string, parts int32, events int, seed uint64) string {
	return TopicFormat(t, broker, parts, events, seed, gen.Mixed)
}

// TopicFormat is Topic with every table in one format of package gen
// (gen.Mixed for all three).
func TopicFormat(t *testing.T, broker string, parts int32, events int, seed uint64, format int) string {
	t.Helper()
	name, cl := create(t, broker, parts)
	defer cl.Close()
	ProduceFormat(t, cl, name, events, seed, format)
	return name
}

// Empty creates an empty topic of parts partitions, deleted when the test
// ends.
func Empty(t *testing.T, broker string, parts int32) string {
	t.Helper()
	name, cl := create(t, broker, parts)
	cl.Close()
	return name
}

func create(t *testing.T, broker string, parts int32) (string, *kgo.Client) {
	t.Helper()
	name := fmt.Sprintf("cdclake-test-%s-%d", strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), time.Now().UnixNano())
	return name, CreateTopic(t, broker, name, parts)
}

// CreateTopic creates a topic of parts partitions, deleted when the test
// ends, and returns a client of the broker.
func CreateTopic(t testing.TB, broker, name string, parts int32) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, parts, 1, nil, name); err != nil {
		cl.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dcl, err := kgo.NewClient(kgo.SeedBrokers(broker))
		if err != nil {
			return
		}
		defer dcl.Close()
		_, _ = kadm.NewClient(dcl).DeleteTopics(context.Background(), name)
	})
	return cl
}

// Produce writes a generated mixed stream (GoldenGate with metadata, DDL
// and CloudEvents; Debezium with and without schemas, transactions,
// tombstones, heartbeats) into topic, keyed by table as CDC producers do,
// and returns the number of messages.
func Produce(t *testing.T, cl *kgo.Client, topic string, events int, seed uint64) int {
	return ProduceFormat(t, cl, topic, events, seed, gen.Mixed)
}

// ProduceFormat is Produce with every table in one format of package gen.
func ProduceFormat(t *testing.T, cl *kgo.Client, topic string, events int, seed uint64, format int) int {
	t.Helper()
	recs, _ := Stream(t, topic, events, 12, seed, format)
	ProduceRecords(t, cl, recs)
	return len(recs)
}

// Stream generates a stream of events changes over tables tables (package
// gen) as records for topic, keyed by table as CDC producers do, and
// returns them with what a correct landing of them holds.
func Stream(t testing.TB, topic string, events, tables int, seed uint64, format int) ([]*kgo.Record, *gen.Expected) {
	t.Helper()
	var stream bytes.Buffer
	exp, err := gen.GenerateFormat(&stream, events, tables, seed, format)
	if err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for line := range bytes.Lines(stream.Bytes()) {
		line = bytes.TrimSuffix(line, []byte{'\n'})
		key := []byte("none")
		if m := tableKey.FindSubmatch(line); m != nil {
			key = m[1]
		}
		if bytes.Equal(line, []byte("null")) {
			line = nil // a tombstone
		}
		recs = append(recs, &kgo.Record{Topic: topic, Key: key, Value: line})
	}
	return recs, exp
}

// ProduceRecords produces recs, in order, in batches.
func ProduceRecords(t testing.TB, cl *kgo.Client, recs []*kgo.Record) {
	t.Helper()
	for len(recs) > 0 {
		n := min(len(recs), 20000)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := cl.ProduceSync(ctx, recs[:n]...).FirstErr()
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		recs = recs[n:]
	}
}

// Landed counts the rows of every Parquet file under dir by (partition,
// offset); dead letters are NDJSON and not counted.
func Landed(t testing.TB, dir string) map[[2]int64]int {
	t.Helper()
	out, _ := landed(t, dir)
	return out
}

// DuplicateFiles names, for up to n duplicated rows, the files that hold
// them.
func DuplicateFiles(t testing.TB, dir string, n int) []string {
	t.Helper()
	counts, where := landed(t, dir)
	var out []string
	for k, c := range counts {
		if c > 1 && len(out) < n {
			out = append(out, fmt.Sprintf("partition %d offset %d: %v", k[0], k[1], where[k]))
		}
	}
	return out
}

func landed(t testing.TB, dir string) (map[[2]int64]int, map[[2]int64][]string) {
	t.Helper()
	out := map[[2]int64]int{}
	where := map[[2]int64][]string{}
	eachRow(t, dir, func(rel string, k [2]int64, _ int64) {
		out[k]++
		where[k] = append(where[k], rel)
	})
	return out, where
}

// Times returns, by (partition, offset), the _cdc_ingested_at of every
// row of the Parquet files under dir in microseconds, -1 where it is NULL.
func Times(t testing.TB, dir string) map[[2]int64]int64 {
	t.Helper()
	out := map[[2]int64]int64{}
	eachRow(t, dir, func(_ string, k [2]int64, at int64) { out[k] = at })
	return out
}

// eachRow calls f with every row of the Parquet files under dir: the
// file's path relative to dir, the row's (partition, offset) and its
// _cdc_ingested_at in microseconds, -1 where it is NULL.
func eachRow(t testing.TB, dir string, f func(rel string, k [2]int64, at int64)) {
	t.Helper()
	err := eachParquet(dir, func(rel string, fr *pqarrow.FileReader) error {
		tbl, err := fr.ReadTable(context.Background())
		if err != nil {
			return err
		}
		defer tbl.Release()
		sc := tbl.Schema()
		col := func(name string) []arrow.Array { return tbl.Column(sc.FieldIndices(name)[0]).Data().Chunks() }
		parts, offs, times := col("_cdc_partition"), col("_cdc_offset"), col("_cdc_ingested_at")
		for c := range parts {
			p, o, ts := parts[c].(*array.Int32), offs[c].(*array.Int64), times[c].(*array.Timestamp)
			for i := range p.Len() {
				at := int64(-1)
				if ts.IsValid(i) {
					at = int64(ts.Value(i))
				}
				f(rel, [2]int64{int64(p.Value(i)), o.Value(i)}, at)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Duplicates counts the rows landed more than once.
func Duplicates(got map[[2]int64]int) int {
	n := 0
	for _, c := range got {
		if c > 1 {
			n++
		}
	}
	return n
}

// SameOnce checks that got holds every row of want exactly once.
func SameOnce(t testing.TB, what string, got, want map[[2]int64]int) {
	t.Helper()
	missing, extra := 0, 0
	for k := range got {
		if want[k] == 0 {
			extra++
		}
	}
	for k := range want {
		if got[k] == 0 {
			missing++
		}
	}
	if dups := Duplicates(got); dups+missing+extra > 0 || len(want) == 0 {
		t.Errorf("%s: %d rows, want %d: %d duplicated, %d missing, %d unexpected", what, len(got), len(want), dups, missing, extra)
	}
}

// Offsets returns the group's committed offsets and the topic's end
// offsets, by partition.
func Offsets(t testing.TB, broker, group, topic string) (committed, ends map[int32]int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	offs, err := adm.FetchOffsets(context.Background(), group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		offs, err = kadm.OffsetResponses{}, nil // no offsets yet
	}
	if err != nil {
		t.Fatal(err)
	}
	e, err := adm.ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	committed, ends = map[int32]int64{}, map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) { committed[o.Partition] = o.At })
	e.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	return committed, ends
}

// FieldTypes counts, over the Parquet files under dir whose path starts
// with prefix, the Arrow types of the field name of the after struct.
func FieldTypes(t testing.TB, dir, prefix, name string) map[string]int {
	t.Helper()
	out := map[string]int{}
	err := eachParquet(dir, func(rel string, fr *pqarrow.FileReader) error {
		if !strings.HasPrefix(rel, prefix) {
			return nil
		}
		sc, err := fr.Schema()
		if err != nil {
			return err
		}
		for _, f := range sc.Fields() {
			if st, ok := f.Type.(*arrow.StructType); ok && f.Name == "after" {
				if i, ok := st.FieldIdx(name); ok {
					out[st.Field(i).Type.String()]++
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// eachParquet calls f with a reader of every Parquet file of the lake in
// dir but cdclake's own (_cdclake/), the current-state tables' (_current/)
// and those in a dataset's hidden folders (a Delta table's _delta_log/ and
// _compacted/), and its path relative to dir. The lake's own datasets
// (_ddl/, _stream_metadata/) are read: their rows are messages too.
func eachParquet(dir string, f func(rel string, fr *pqarrow.FileReader) error) error {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil // nothing landed yet
	}
	return filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		top := filepath.Dir(path) == filepath.Clean(dir)
		if err == nil && d.IsDir() && path != dir && (top && (d.Name() == "_cdclake" || d.Name() == "_current") ||
			!top && (strings.HasPrefix(d.Name(), "_") || strings.HasPrefix(d.Name(), "."))) {
			// cdclake's own (states, Iceberg's compacted files), the
			// current-state tables, whose rows are no change rows, and
			// Delta's checkpoints and compacted files
			return filepath.SkipDir
		}
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".parquet") {
			return err
		}
		rdr, err := file.OpenParquetFile(path, false)
		if err != nil {
			return err
		}
		defer rdr.Close()
		fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, memory.NewGoAllocator())
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		return f(rel, fr)
	})
}

// CutStatesShort cuts every partition state in dir (a partition's state
// folder of a lake on disk) to half its bytes, as a store that lost them
// leaves it, and returns the function that makes them whole again.
func CutStatesShort(t testing.TB, dir string) (restore func()) {
	t.Helper()
	states, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(states) == 0 {
		t.Fatalf("no partition state in %s: %v", dir, err)
	}
	whole := map[string][]byte{}
	for _, st := range states {
		data, err := os.ReadFile(st)
		if err != nil {
			t.Fatal(err)
		}
		whole[st] = data
		if err := os.WriteFile(st, data[:len(data)/2], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return func() {
		for st, data := range whole {
			if err := os.WriteFile(st, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Schemas returns the Arrow schema of every Parquet file under dir, as
// text, by the file's path relative to dir.
func Schemas(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := eachParquet(dir, func(rel string, fr *pqarrow.FileReader) error {
		sch, err := fr.Schema()
		if err != nil {
			return err
		}
		out[rel] = sch.String()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
