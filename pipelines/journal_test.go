package pipelines_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/config"
	"github.com/cdclake/cdclake/pipelines/source/gen"
	"github.com/cdclake/cdclake/pipelines/source/kafka/kafkatest"
	"github.com/cdclake/cdclake/sinks/lake"
	"github.com/cdclake/cdclake/sinks/state"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRunRecordsItsEndInParquet: a run of a plain Parquet lake records, in
// each partition's state in the lake, the end offset the group's offset
// records, also a run whose messages needed no file (here tombstones
// alone): a partition's state moved only with its files before. A state
// left behind made the current-state tables, which fold only the changes
// below it, miss the changes of the files past it after a restart that
// found every row of a partition in files already and wrote none.
func TestRunRecordsItsEndInParquet(t *testing.T) {
	broker := kafkatest.Cluster(t)
	const parts = 3
	topic := kafkatest.TopicFormat(t, broker, parts, 600, 11, gen.Debezium)
	dir := t.TempDir()
	parquet := func(cfg *config.Config) {
		cfg.Defaults.TableFormat = ""
		cfg.Sink.Iceberg.Catalog, cfg.Sink.Iceberg.Warehouse = "", ""
	}
	for run := range 2 {
		if run == 1 {
			tombstones(t, broker, topic, parts)
		}
		if err := landIcebergWith(t, broker, topic, dir, parquet); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		committed, ends := kafkatest.Offsets(t, broker, "g", topic)
		bucket, err := lake.OpenBucket(context.Background(), filepath.Join(dir, "lake"))
		if err != nil {
			t.Fatal(err)
		}
		store := state.NewStore(bucket, lake.New(bucket, memory.DefaultAllocator))
		for p, end := range ends {
			if committed[p] != end {
				t.Errorf("run %d, partition %d: the group's offset is %d, want the end %d", run, p, committed[p], end)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			st, err := store.Latest(ctx, topic, p)
			cancel()
			if err != nil || st == nil || st.Committed != end {
				t.Errorf("run %d, partition %d: its state in the lake: %+v (%v), want it committed at the end %d", run, p, st, err, end)
			}
		}
		bucket.Close()
	}
	if d := kafkatest.Duplicates(kafkatest.Landed(t, filepath.Join(dir, "lake"))); d > 0 {
		t.Errorf("%d rows landed more than once", d)
	}
}

// tombstones produces two tombstones into every partition of topic.
func tombstones(t *testing.T, broker, topic string, parts int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for p := range parts {
		for range 2 {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: []byte("t001")})
		}
	}
	kafkatest.ProduceRecords(t, cl, recs)
}
