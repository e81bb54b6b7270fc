package pipelines_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cdclake/cdclake/config"
	"github.com/cdclake/cdclake/internal/pyenv"
	"github.com/cdclake/cdclake/pipelines"
	"github.com/cdclake/cdclake/pipelines/source/gen"
	"github.com/cdclake/cdclake/pipelines/source/kafka/kafkatest"
)

// asDelta makes landIcebergWith's run commit to Delta tables, checkpointed
// every 3 versions.
func asDelta(cfg *config.Config) {
	cfg.Defaults.TableFormat = "delta"
	cfg.Sink.Iceberg.Catalog = ""
	cfg.Sink.Delta.CommitInterval = config.Duration(50 * time.Millisecond)
	cfg.Sink.Delta.CheckpointInterval = 3
}

// checkDelta checks a lake's Delta tables with delta.py (delta-rs): every
// table reads exactly its files' rows, each version its own files' rows,
// with the offsets each records; no row landed twice.
func checkDelta(t *testing.T, py, dir string, args ...string) string {
	t.Helper()
	if d := kafkatest.Duplicates(kafkatest.Landed(t, filepath.Join(dir, "lake"))); d > 0 {
		t.Errorf("%d rows landed twice", d)
	}
	out, err := exec.Command(py, append([]string{filepath.Join("..", "testdata", "e2e", "delta.py"), filepath.Join(dir, "lake")}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("delta.py: %v\n%s", err, out)
	}
	t.Log(strings.TrimSpace(string(out)))
	return strings.TrimSpace(string(out))
}

// TestDeltaCommitsAfterAFailedRun is TestIcebergCommitsAfterAFailedRun
// with Delta tables: a run whose commits all fail leaves its files out of
// the tables and its offsets below them; the next commits them and lands
// the rest, and every table and version reads exactly its files' rows; a
// run that finds nothing new changes nothing.
func TestDeltaCommitsAfterAFailedRun(t *testing.T) {
	py := pyenv.Python(t, "read the tables with delta-rs")
	dir, rerun := landAfterAFailedRun(t, asDelta)
	first := checkDelta(t, py, dir)
	if err := rerun(); err != nil {
		t.Fatal(err)
	}
	if again := checkDelta(t, py, dir); again != first {
		t.Errorf("a run that found nothing new changed the tables: %s, first %s", again, first)
	}
}

// TestDeltaCheckpointsWhileLanding: a run slowed so that it commits each
// table many times writes checkpoints as it goes; delta-rs reads every
// table from its newest checkpoint and the commits after it, and every
// version (of 5 per table) as its files.
func TestDeltaCheckpointsWhileLanding(t *testing.T) {
	py := pyenv.Python(t, "read the tables with delta-rs")
	broker := kafkatest.Cluster(t)
	topic := kafkatest.TopicFormat(t, broker, 2, 1200, 3, gen.Debezium)
	dir := t.TempDir()
	small := func(cfg *config.Config) {
		asDelta(cfg)
		cfg.Source.BlockLines, cfg.Defaults.MaxRows = 20, 10
	}
	slow := pipelines.WithStageFault(func(string) { time.Sleep(30 * time.Millisecond) })
	if err := landIcebergWith(t, broker, topic, dir, small, slow); err != nil {
		t.Fatal(err)
	}
	out := checkDelta(t, py, dir, "--checkpoints", "--rows-of", "5")
	if strings.Contains(out, " 0 checkpoints") {
		t.Errorf("no table was checkpointed: %s", out)
	}
}

// TestDeltaCompactsWhileLanding: with sink.delta.compact_interval, a run
// compacts the Delta tables it commits to as it lands, and expires the
// compacted files later compactions replaced: every version reads as its
// files, each compaction as its parent's rows (delta.py), and no row lands
// twice.
func TestDeltaCompactsWhileLanding(t *testing.T) {
	py := pyenv.Python(t, "read the tables with delta-rs")
	broker := kafkatest.Cluster(t)
	topic := kafkatest.TopicFormat(t, broker, 3, 1500, 7, gen.Debezium)
	dir := t.TempDir()
	compact := func(cfg *config.Config) {
		asDelta(cfg)
		cfg.Source.BlockLines = 50 // a run of several compactions
		cfg.Sink.Delta.CompactInterval = config.Duration(300 * time.Millisecond)
		cfg.Sink.Delta.CompactTargetSize = 1 << 20
		cfg.Sink.Delta.ExpireOlderThan = 0
		cfg.Sink.Delta.RetainLast = 1
	}
	slow := pipelines.WithBatchFault(func() { time.Sleep(100 * time.Millisecond) })
	if err := landIcebergWith(t, broker, topic, dir, compact, slow); err != nil {
		t.Fatal(err)
	}
	out := checkDelta(t, py, dir, "--rows-of", "6")
	if !strings.Contains(out, " compactions") || !strings.Contains(out, "versions with expired compacted files") {
		t.Errorf("no compaction, or none expired, was read back: %s", out)
	}
	compacted, _ := filepath.Glob(filepath.Join(dir, "lake", "*", "_compacted", "*", "*.parquet"))
	if len(compacted) == 0 {
		t.Error("no compacted file is left")
	}
}
