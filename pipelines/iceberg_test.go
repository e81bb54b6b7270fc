package pipelines_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/config"
	"github.com/cdclake/cdclake/internal/pyenv"
	"github.com/cdclake/cdclake/pipelines"
	"github.com/cdclake/cdclake/pipelines/source/gen"
	"github.com/cdclake/cdclake/pipelines/source/kafka"
	"github.com/cdclake/cdclake/pipelines/source/kafka/kafkatest"
	"github.com/cdclake/cdclake/sinks/lake"
	"github.com/cdclake/cdclake/sinks/lakehouse"
	"github.com/cdclake/cdclake/sinks/lakehouse/icebergsql"
	"github.com/cdclake/cdclake/sinks/state"
)

// landIceberg lands topic to its end offsets with the group g, its tables
// committed to Iceberg in a SQLite catalog in dir, beside the lake in
// dir/lake, and returns the run's error.
func landIceberg(t *testing.T, broker, topic, dir string, opts ...pipelines.Option) error {
	t.Helper()
	return landIcebergWith(t, broker, topic, dir, nil, opts...)
}

// landIcebergWith is landIceberg with the config changed by tweak.
func landIcebergWith(t *testing.T, broker, topic, dir string, tweak func(*config.Config), opts ...pipelines.Option) error {
	t.Helper()
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.ProgressInterval = 0
	cfg.Source.BlockLines = 200
	cfg.Defaults.MaxRows = 40
	cfg.Defaults.TableFormat = "iceberg"
	cfg.Sink.Iceberg.Catalog = "sqlite://" + filepath.Join(dir, "catalog.db")
	cfg.Sink.Iceberg.Warehouse = "file://" + filepath.Join(dir, "lake")
	cfg.Sink.Iceberg.CommitInterval = config.Duration(200 * time.Millisecond)
	cfg.Sink.RetryFor = config.Duration(time.Second)
	if tweak != nil {
		tweak(cfg)
	}
	plan, err := pipelines.Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Sink.Iceberg.Warehouse != "" {
		// The lake is the warehouse: appends are committed in process.
		if err := plan.UseLake(filepath.Join(dir, "lake")); err != nil {
			t.Fatal(err)
		}
	}
	kc, err := kafka.ParseURL(fmt.Sprintf("kafka://%s/%s?group=g&commit_interval=200ms", broker, topic))
	if err != nil {
		t.Fatal(err)
	}
	kc.BlockRecords, kc.UntilCaughtUp = cfg.Source.BlockLines, true
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	src, err := kafka.New(kc, log)
	if err != nil {
		t.Fatal(err)
	}
	bucket, err := lake.OpenBucket(context.Background(), filepath.Join(dir, "lake"))
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	inProcess := pipelines.WithCatalog(func(ctx context.Context, cfg lakehouse.Config, log *slog.Logger) (lakehouse.Catalog, error) {
		return icebergsql.Open(ctx, cfg, log)
	})
	p, err := pipelines.New(plan, src, bucket, log, append([]pipelines.Option{inProcess}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return p.Run(ctx)
}

// TestIcebergCommitsAfterAFailedRun: a run whose commits all fail writes
// its files and records them in the partitions' states, but its offsets
// stay below them; the next run claims the partitions, commits those files
// (it does not land their rows again: the states say they are written) and
// lands the rest. Every table then reads exactly its files' rows, each row
// once, and the offsets it records; every dataset of the lake is a table
// (iceberg.py).
func TestIcebergCommitsAfterAFailedRun(t *testing.T) {
	py := pyenv.Python(t, "read the tables with pyiceberg")
	dir, _ := landAfterAFailedRun(t, nil)
	checkIceberg(t, py, dir)
}

// landAfterAFailedRun lands a topic with every commit failing, then again
// without faults, each run's config changed by tweak, and returns the
// folder of the lake (dir/lake) and catalog, and a function that runs the
// group once more.
func landAfterAFailedRun(t *testing.T, tweak func(*config.Config)) (string, func() error) {
	t.Helper()
	broker := kafkatest.Cluster(t)
	topic := kafkatest.TopicFormat(t, broker, 3, 1500, 7, gen.Debezium)
	dir := t.TempDir()
	broken := errors.New("the catalog is down")
	err := landIcebergWith(t, broker, topic, dir, tweak, pipelines.WithCommitFault(func(string) error { return broken }))
	if !errors.Is(err, broken) {
		t.Fatalf("the run with failing commits ended with %v, want its commits' error", err)
	}
	if got := kafkatest.Landed(t, filepath.Join(dir, "lake")); len(got) == 0 {
		t.Fatal("the first run wrote no file")
	}
	again := func() error { return landIcebergWith(t, broker, topic, dir, tweak) }
	if err := again(); err != nil {
		t.Fatal(err)
	}
	return dir, again
}

// TestIcebergCompactsWhileLanding: a run with sink.iceberg.compact_interval
// compacts its tables while it lands (slowed so that it lasts):
// every table then reads exactly its files' rows, each compaction
// snapshot the rows of the one before it (iceberg.py).
func TestIcebergCompactsWhileLanding(t *testing.T) {
	py := pyenv.Python(t, "read the tables with pyiceberg")
	broker := kafkatest.Cluster(t)
	topic := kafkatest.TopicFormat(t, broker, 3, 1500, 7, gen.Debezium)
	dir := t.TempDir()
	compact := func(cfg *config.Config) {
		cfg.Sink.Iceberg.CompactInterval = config.Duration(300 * time.Millisecond)
		cfg.Sink.Iceberg.CompactTargetSize = 1 << 20
	}
	// Each window of messages waits a little: the run lasts for several
	// commits and compactions.
	slow := pipelines.WithBatchFault(func() { time.Sleep(100 * time.Millisecond) })
	if err := landIcebergWith(t, broker, topic, dir, compact, slow); err != nil {
		t.Fatal(err)
	}
	out := checkIceberg(t, py, dir)
	var tables, rows, snaps, compactions int
	if _, err := fmt.Sscanf(out, "ok %d tables, %d rows, %d snapshots, %d compactions", &tables, &rows, &snaps, &compactions); err != nil || compactions == 0 {
		t.Errorf("iceberg.py: %q (%v), want compactions", out, err)
	}
}

// expiring counts the snapshots the catalog's Expire drops, by table.
type expiring struct {
	lakehouse.Catalog
	mu      sync.Mutex
	dropped map[string]int
}

func (e *expiring) Expire(ctx context.Context, dataset string, exp lakehouse.Expiry) (lakehouse.Expired, error) {
	done, err := e.Catalog.Expire(ctx, dataset, exp)
	e.mu.Lock()
	e.dropped[dataset] += done.Snapshots
	e.mu.Unlock()
	return done, err
}

// TestIcebergExpiresWhileLanding: with sink.iceberg.expire_older_than, each
// of a run's compactions also expires the table's snapshots but the newest
// retain_last, and its current-state table's: the tables still read
// exactly their files' rows, every snapshot kept naming only files that
// are there (iceberg.py).
func TestIcebergExpiresWhileLanding(t *testing.T) {
	py := pyenv.Python(t, "read the tables with pyiceberg")
	broker := kafkatest.Cluster(t)
	topic := kafkatest.TopicFormat(t, broker, 3, 1500, 7, gen.Debezium)
	dir := t.TempDir()
	expire := func(cfg *config.Config) {
		cfg.Sink.Iceberg.CompactInterval = config.Duration(300 * time.Millisecond)
		cfg.Sink.Iceberg.CompactTargetSize = 1 << 20
		cfg.Sink.Iceberg.ExpireOlderThan = config.Duration(time.Nanosecond)
		cfg.Sink.Iceberg.RetainLast = 2
	}
	cat := &expiring{dropped: map[string]int{}}
	counting := pipelines.WithCatalog(func(ctx context.Context, cfg lakehouse.Config, log *slog.Logger) (lakehouse.Catalog, error) {
		c, err := icebergsql.Open(ctx, cfg, log)
		cat.Catalog = c
		return cat, err
	})
	slow := pipelines.WithBatchFault(func() { time.Sleep(100 * time.Millisecond) })
	if err := landIcebergWith(t, broker, topic, dir, expire, counting, slow); err != nil {
		t.Fatal(err)
	}
	checkIceberg(t, py, dir)
	total, states := 0, 0
	for name, n := range cat.dropped {
		total += n
		if strings.HasSuffix(name, lakehouse.StateSuffix) {
			states++
		}
	}
	if total == 0 || states == 0 {
		t.Errorf("expiry dropped %d snapshots, asked of %d current-state tables: %v", total, states, cat.dropped)
	}
}

// checkIceberg checks the tables of the catalog in dir against the lake
// in dir/lake with iceberg.py: every dataset is a table, each reads its
// files' rows exactly, each row once, with the offsets it records past
// them.
func checkIceberg(t *testing.T, py, dir string) string {
	t.Helper()
	if d := kafkatest.Duplicates(kafkatest.Landed(t, filepath.Join(dir, "lake"))); d > 0 {
		t.Errorf("%d rows landed twice", d)
	}
	out, err := exec.Command(py, filepath.Join("..", "testdata", "e2e", "iceberg.py"), filepath.Join(dir, "catalog.db"),
		filepath.Join(dir, "lake")).CombinedOutput()
	if err != nil {
		t.Fatalf("iceberg.py: %v\n%s", err, out)
	}
	t.Log(strings.TrimSpace(string(out)))
	return strings.TrimSpace(string(out))
}

// TestIcebergLostCommitReplies: a commit that went in but was reported
// failed (the first of each table) is tried again; the retry finds its
// files in the table and adds none twice. In process, and with every
// commit in the full committer.
func TestIcebergLostCommitReplies(t *testing.T) {
	py := pyenv.Python(t, "read the tables with pyiceberg")
	broker := kafkatest.Cluster(t)
	for _, mode := range []string{"in process", "full committer"} {
		t.Run(mode, func(t *testing.T) {
			topic := kafkatest.TopicFormat(t, broker, 3, 1500, 7, gen.Debezium)
			dir := t.TempDir()
			var mu sync.Mutex
			lost := map[string]bool{}
			lossy := pipelines.WithReplyFault(func(table string) error {
				mu.Lock()
				defer mu.Unlock()
				if lost[table] {
					return nil
				}
				lost[table] = true
				return errors.New("the commit's reply was lost")
			})
			opts := []pipelines.Option{lossy}
			if mode == "full committer" {
				opts = append(opts, pipelines.WithoutAppends())
			}
			if err := landIcebergWith(t, broker, topic, dir, nil, opts...); err != nil {
				t.Fatal(err)
			}
			if len(lost) == 0 {
				t.Fatal("no commit was made")
			}
			checkIceberg(t, py, dir)
		})
	}
}

// TestIcebergRunRecordsItsEnd: a run to the end offsets whose commits all
// go in leaves the group's offsets and the partitions' states in the lake
// at the end, though its files' states were created while the files
// waited for their commits: the next run starts where it ended and reads
// nothing again (a restart after the topic's retention passed would
// otherwise ask for deleted messages).
func TestIcebergRunRecordsItsEnd(t *testing.T) {
	broker := kafkatest.Cluster(t)
	topic := kafkatest.TopicFormat(t, broker, 3, 900, 7, gen.Debezium)
	dir := t.TempDir()
	// Every file waits for its commit until the end of the run.
	late := func(cfg *config.Config) { cfg.Sink.Iceberg.CommitInterval = config.Duration(time.Hour) }
	if err := landIcebergWith(t, broker, topic, dir, late); err != nil {
		t.Fatal(err)
	}
	committed, ends := kafkatest.Offsets(t, broker, "g", topic)
	bucket, err := lake.OpenBucket(context.Background(), filepath.Join(dir, "lake"))
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	store := state.NewStore(bucket, lake.New(bucket, memory.DefaultAllocator))
	for p, end := range ends {
		if committed[p] != end {
			t.Errorf("partition %d: the group's offset is %d after the run, want the end %d", p, committed[p], end)
		}
		st, err := store.Latest(context.Background(), topic, p)
		if err != nil || st.Committed != end || len(st.Written) != 0 || len(st.Pending) != 0 {
			t.Errorf("partition %d: its state in the lake after the run: %+v (%v), want committed at the end %d and no cut", p, st, err, end)
		}
	}
}
