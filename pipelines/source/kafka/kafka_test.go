package kafka_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/cdclake/cdclake/cmd/cdcgen/gen"
	"github.com/cdclake/cdclake/config"
	"github.com/cdclake/cdclake/pipelines"
	"github.com/cdclake/cdclake/pipelines/source/kafka"
	"github.com/cdclake/cdclake/sinks/lake"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// brokers returns the broker of CDCLAKE_TEST_KAFKA_BROKERS, or skips: make
// e2e starts Kafka from infra/ and sets it.
func brokers(t *testing.T) string {
	b := os.Getenv("CDCLAKE_TEST_KAFKA_BROKERS")
	if b == "" {
		t.Skip("CDCLAKE_TEST_KAFKA_BROKERS is not set (make e2e sets it)")
	}
	return b
}

var tableKey = regexp.MustCompile(`(?:SALES\.T|shop\.public\.t|shop\.t|"table":"t)(\d{3})`)

// topicWith creates a topic of parts partitions and produces a generated
// mixed stream of events into it, keyed by table as CDC producers do.
func topicWith(t *testing.T, broker string, parts int32, events int, seed uint64) string {
	t.Helper()
	name := fmt.Sprintf("cdclake-test-%s-%d", strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), time.Now().UnixNano())
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, parts, 1, nil, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), name) })
	produce(t, cl, name, events, seed)
	return name
}

// produce writes a generated stream into topic and returns the number of
// messages.
func produce(t *testing.T, cl *kgo.Client, topic string, events int, seed uint64) int {
	t.Helper()
	var stream bytes.Buffer
	if _, err := gen.Generate(&stream, events, 12, seed); err != nil {
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
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return len(recs)
}

// member is one cdclake instance landing topic into dir.
type member struct {
	p    *pipelines.Pipeline
	done chan error
	stop context.CancelFunc
}

func start(t *testing.T, broker, topic, group, dir string, untilCaughtUp bool, maxRows int) *member {
	t.Helper()
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.ProgressInterval = 0
	cfg.Source.BlockLines = 200
	cfg.Defaults.MaxRows = maxRows
	plan, err := pipelines.Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := kafka.ParseURL(fmt.Sprintf("kafka://%s/%s?group=%s&commit_interval=200ms", broker, topic, group))
	if err != nil {
		t.Fatal(err)
	}
	kc.BlockRecords, kc.UntilCaughtUp = cfg.Source.BlockLines, untilCaughtUp
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	src, err := kafka.New(kc, log)
	if err != nil {
		t.Fatal(err)
	}
	bucket, err := lake.OpenBucket(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bucket.Close() })
	p, err := pipelines.New(plan, src, bucket, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{p: p, done: make(chan error, 1), stop: cancel}
	go func() { m.done <- p.Run(ctx) }()
	return m
}

func (m *member) wait(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case err := <-m.done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(timeout):
		m.stop()
		t.Fatalf("not caught up within %s", timeout)
	}
}

// landed counts the rows of every Parquet file under dir by (partition,
// offset); dead letters are NDJSON and not counted.
func landed(t *testing.T, dir string) map[[2]int64]int {
	t.Helper()
	out := map[[2]int64]int{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
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
		tbl, err := fr.ReadTable(context.Background())
		if err != nil {
			return err
		}
		defer tbl.Release()
		sc := tbl.Schema()
		parts := tbl.Column(sc.FieldIndices("_cdc_partition")[0]).Data().Chunks()
		offs := tbl.Column(sc.FieldIndices("_cdc_offset")[0]).Data().Chunks()
		for c := range parts {
			p, o := parts[c].(*array.Int32), offs[c].(*array.Int64)
			for i := range p.Len() {
				out[[2]int64{int64(p.Value(i)), o.Value(i)}]++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameOnce checks that got holds every row of want exactly once.
func sameOnce(t *testing.T, what string, got, want map[[2]int64]int) {
	t.Helper()
	dups, missing, extra := 0, 0, 0
	for k, n := range got {
		if n > 1 {
			dups++
		}
		if want[k] == 0 {
			extra++
		}
	}
	for k := range want {
		if got[k] == 0 {
			missing++
		}
	}
	if dups+missing+extra > 0 || len(want) == 0 {
		t.Errorf("%s: %d rows, want %d: %d duplicated, %d missing, %d unexpected", what, len(got), len(want), dups, missing, extra)
	}
}

func committed(t *testing.T, broker, group, topic string) (map[int32]int64, map[int32]int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	offs, err := adm.FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	c, e := map[int32]int64{}, map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) { c[o.Partition] = o.At })
	ends.Each(func(o kadm.ListedOffset) { e[o.Partition] = o.Offset })
	return c, e
}

// reference lands topic once, uninterrupted, with a group of its own.
func reference(t *testing.T, broker, topic string) map[[2]int64]int {
	t.Helper()
	dir := t.TempDir()
	start(t, broker, topic, "ref-"+topic, dir, true, 1_000_000).wait(t, 2*time.Minute)
	ref := landed(t, dir)
	for k, n := range ref {
		if n != 1 {
			t.Fatalf("the reference landing holds row %v %d times", k, n)
		}
	}
	return ref
}

// TestUntilCaughtUpAndResume: a run lands a topic to its end offsets,
// commits them and exits; a second run lands only what came since.
func TestUntilCaughtUpAndResume(t *testing.T) {
	broker := brokers(t)
	topic := topicWith(t, broker, 6, 3000, 1)
	dir := t.TempDir()
	start(t, broker, topic, "g-"+topic, dir, true, 1_000_000).wait(t, 2*time.Minute)
	c, e := committed(t, broker, "g-"+topic, topic)
	for p, end := range e {
		if c[p] != end {
			t.Errorf("partition %d: committed %d, end offset %d", p, c[p], end)
		}
	}
	first := len(landed(t, dir))

	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	more := produce(t, cl, topic, 1500, 2)
	cl.Close()
	m := start(t, broker, topic, "g-"+topic, dir, true, 1_000_000)
	m.wait(t, 2*time.Minute)
	if n := m.p.Stats().Messages.Load(); n != int64(more) {
		t.Errorf("the second run read %d messages, want the %d new ones", n, more)
	}
	got := landed(t, dir)
	if len(got) <= first {
		t.Errorf("nothing new landed: %d rows, %d before", len(got), first)
	}
	sameOnce(t, "two runs", got, reference(t, broker, topic))
}

// TestStopAndRestart: a long-running instance stopped mid-stream (SIGTERM)
// writes what it read and commits it; the next one goes on from there.
func TestStopAndRestart(t *testing.T) {
	broker := brokers(t)
	topic := topicWith(t, broker, 6, 6000, 3)
	dir := t.TempDir()
	m := start(t, broker, topic, "g-"+topic, dir, false, 1_000_000)
	deadline := time.Now().Add(time.Minute)
	for m.p.Stats().Messages.Load() < 1500 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	m.stop()
	m.wait(t, time.Minute)
	if n := m.p.Stats().Messages.Load(); n == 0 {
		t.Fatal("nothing read before the stop")
	}
	start(t, broker, topic, "g-"+topic, dir, true, 1_000_000).wait(t, 2*time.Minute)
	sameOnce(t, "stop and restart", landed(t, dir), reference(t, broker, topic))
}

// TestRebalance: a second instance joins the group while the first is
// landing and data keeps coming; the first hands over the partitions it
// loses (files written, offsets committed), and together they land every
// row once.
func TestRebalance(t *testing.T) {
	broker := brokers(t)
	topic := topicWith(t, broker, 6, 3000, 4)
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	total := int64(0)
	for _, n := range committedEnds(t, broker, topic) {
		total += n
	}
	dir := t.TempDir()
	a := start(t, broker, topic, "g-"+topic, dir, false, 1_000_000)
	deadline := time.Now().Add(time.Minute)
	for a.p.Stats().Messages.Load() < 500 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	b := start(t, broker, topic, "g-"+topic, dir, false, 1_000_000)
	// Keep producing while the group rebalances and after.
	for round := range 8 {
		total += int64(produce(t, cl, topic, 1000, uint64(10+round)))
		time.Sleep(500 * time.Millisecond)
	}
	deadline = time.Now().Add(2 * time.Minute)
	for a.p.Stats().Messages.Load()+b.p.Stats().Messages.Load() < total && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	for _, m := range []*member{a, b} {
		m.stop()
		m.wait(t, time.Minute)
	}
	na, nb := a.p.Stats().Messages.Load(), b.p.Stats().Messages.Load()
	t.Logf("first instance read %d messages, second %d, of %d", na, nb, total)
	if na == 0 || nb == 0 {
		t.Errorf("one instance read nothing: %d and %d", na, nb)
	}
	sameOnce(t, "two members", landed(t, dir), reference(t, broker, topic))
}

// committedEnds returns the topic's end offsets by partition.
func committedEnds(t *testing.T, broker, topic string) map[int32]int64 {
	t.Helper()
	_, ends := committed(t, broker, "none", topic)
	return ends
}
