package pipelines_test

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/cdclake/cdclake/config"
	"github.com/cdclake/cdclake/pipelines"
	"github.com/cdclake/cdclake/pipelines/source"
	"github.com/cdclake/cdclake/pipelines/source/gen"
	"gocloud.dev/blob"
)

// tableNumber finds the generated table a message belongs to.
var tableNumber = regexp.MustCompile(`(?:SALES\.T|shop\.public\.t|shop\.t|"table":"t)(\d{3})`)

// partitionedStream generates a mixed stream (GoldenGate with metadata,
// DDL and CloudEvents, Debezium with and without schemas, transactions,
// tombstones, heartbeats) and splits it into parts partitions of one topic
// the way Kafka producers key CDC topics: every message of a table goes to
// the same partition, in order. Messages of no table go to partition 0.
func partitionedStream(t *testing.T, events, tables, parts, blockLen int) []*source.Block {
	t.Helper()
	var stream bytes.Buffer
	if _, err := gen.Generate(&stream, events, tables, 42); err != nil {
		t.Fatal(err)
	}
	recs := make([][]source.Record, parts)
	for line := range bytes.Lines(stream.Bytes()) {
		line = bytes.TrimSuffix(line, []byte{'\n'})
		p := 0
		if m := tableNumber.FindSubmatch(line); m != nil {
			n, _ := strconv.Atoi(string(m[1]))
			p = n % parts
		}
		recs[p] = append(recs[p], source.Record{Offset: int64(len(recs[p])), Value: line})
	}
	var blocks []*source.Block
	for p, rs := range recs {
		for lo := 0; lo < len(rs); lo += blockLen {
			blocks = append(blocks, &source.Block{Source: "cdc.topic", Partition: int32(p), Records: rs[lo:min(lo+blockLen, len(rs))]})
		}
	}
	return blocks
}

// landBlocks lands blocks with the given options into a mem:// bucket.
func landBlocks(t *testing.T, blocks []*source.Block, opts ...pipelines.Option) (*blob.Bucket, *pipelines.Pipeline) {
	t.Helper()
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Defaults.MaxRows = 300 // several files per table and partition
	return landSource(t, cfg, source.NewMemory(blocks...), opts...)
}

// rowsOf renders every row of a Parquet object as its non-null columns.
func rowsOf(t *testing.T, b *blob.Bucket, key string) []string {
	t.Helper()
	tbl := readTable(t, b, key)
	defer tbl.Release()
	rdr := array.NewTableReader(tbl, 1<<20)
	defer rdr.Release()
	var out []string
	for rdr.Next() {
		rec := rdr.RecordBatch()
		for i := range int(rec.NumRows()) {
			var cols []string
			for j, f := range rec.Schema().Fields() {
				if rec.Column(j).IsNull(i) {
					continue
				}
				cols = append(cols, f.Name+"="+rec.Column(j).ValueStr(i))
			}
			out = append(out, strings.Join(cols, " "))
		}
	}
	return out
}

// TestConcurrentPartitions lands four partitions at once, with four
// workers, and one partition at a time, with one worker: the same objects
// must hold the same rows. Under -race it also checks that workers share
// nothing unsynchronised.
func TestConcurrentPartitions(t *testing.T) {
	blocks := partitionedStream(t, 6000, 12, 4, 50)
	seqBucket, seq := landBlocks(t, blocks, pipelines.WithWorkers(1), pipelines.WithLanes(1))
	parBucket, par := landBlocks(t, blocks, pipelines.WithWorkers(4), pipelines.WithLanes(2))
	sameLanding(t, seqBucket, parBucket, seq, par, 4)
}

// TestLanes lands one partition in blocks of many windows with one lane
// and with three: the lanes decode windows at once, the batch stage must
// still take every record in order.
func TestLanes(t *testing.T) {
	blocks := partitionedStream(t, 6000, 12, 1, 1000)
	seqBucket, seq := landBlocks(t, blocks, pipelines.WithWorkers(1), pipelines.WithLanes(1))
	parBucket, par := landBlocks(t, blocks, pipelines.WithWorkers(1), pipelines.WithLanes(3))
	sameLanding(t, seqBucket, parBucket, seq, par, 1)
}

// sameLanding checks that two landings of the same blocks hold the same
// objects with the same rows, from files of the given number of partitions.
func sameLanding(t *testing.T, seqBucket, parBucket *blob.Bucket, seq, par *pipelines.Pipeline, partitions int) {
	t.Helper()

	if d := seq.Stats().DeadLetters.Load(); d != 0 {
		t.Fatalf("%d dead letters", d)
	}
	for _, c := range []struct {
		name     string
		seq, par int64
	}{
		{"messages", seq.Stats().Messages.Load(), par.Stats().Messages.Load()},
		{"rows", seq.Stats().Rows.Load(), par.Stats().Rows.Load()},
		{"events", seq.Stats().Events.Load(), par.Stats().Events.Load()},
		{"tombstones", seq.Stats().Tombstones.Load(), par.Stats().Tombstones.Load()},
	} {
		if c.seq != c.par || c.seq == 0 {
			t.Errorf("%s: sequential %d, concurrent %d", c.name, c.seq, c.par)
		}
	}
	seqKeys, parKeys := keys(t, seqBucket), keys(t, parBucket)
	if !slices.Equal(seqKeys, parKeys) {
		t.Fatalf("object names differ:\nsequential %v\nconcurrent %v", seqKeys, parKeys)
	}
	parts := map[string]bool{}
	for _, k := range seqKeys {
		if !strings.HasSuffix(k, ".parquet") {
			continue
		}
		parts[k[strings.LastIndex(k, "-p"):strings.LastIndex(k, "-o")]] = true
		if s, p := rowsOf(t, seqBucket, k), rowsOf(t, parBucket, k); !slices.Equal(s, p) {
			t.Errorf("%s: rows differ\nsequential %d rows, concurrent %d rows\n%s", k, len(s), len(p), firstDiff(s, p))
		}
	}
	if len(parts) != partitions {
		t.Errorf("files of %d partitions, want %d: %v", len(parts), partitions, parts)
	}
}

func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("row %d:\n  %s\n  %s", i, a[i], b[i])
		}
	}
	return "one is a prefix of the other"
}
