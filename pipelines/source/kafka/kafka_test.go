package kafka_test

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cdclake/cdclake/config"
	"github.com/cdclake/cdclake/pipelines"
	"github.com/cdclake/cdclake/pipelines/source/kafka"
	"github.com/cdclake/cdclake/pipelines/source/kafka/kafkatest"
	"github.com/cdclake/cdclake/sinks/lake"
	"github.com/cdclake/cdclake/sinks/sinktest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"gocloud.dev/blob"
)

// member is one cdclake instance landing topic into dir.
type member struct {
	p    *pipelines.Pipeline
	done chan error
	stop context.CancelFunc
}

func start(t *testing.T, broker, topic, group, dir string, untilCaughtUp bool, maxRows int) *member {
	t.Helper()
	return startWith(t, broker, topic, group, dir, untilCaughtUp, memberOptions{maxRows: maxRows})
}

// memberOptions are the settings a test changes.
type memberOptions struct {
	maxRows      int
	maxOpenFiles int
	query        string                          // appended to the source URL
	beforeLoad   func()                          // kafka.SetBeforeLoad
	deadLetters  string                          // sink.dead_letters
	wrap         func(*blob.Bucket) *blob.Bucket // the lake as the member sees it
}

func startWith(t *testing.T, broker, topic, group, dir string, untilCaughtUp bool, o memberOptions) *member {
	t.Helper()
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.ProgressInterval = 0
	cfg.Source.BlockLines = 200
	cfg.Defaults.MaxRows = o.maxRows
	if o.maxOpenFiles > 0 {
		cfg.Batch.MaxOpenFiles = o.maxOpenFiles
	}
	cfg.Sink.DeadLetters = o.deadLetters
	plan, err := pipelines.Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := kafka.ParseURL(fmt.Sprintf("kafka://%s/%s?group=%s&commit_interval=200ms%s", broker, topic, group, o.query))
	if err != nil {
		t.Fatal(err)
	}
	kc.BlockRecords, kc.UntilCaughtUp = cfg.Source.BlockLines, untilCaughtUp
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		level := slog.LevelInfo
		if os.Getenv("CDCLAKE_TEST_DEBUG") != "" {
			level = slog.LevelDebug
		}
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("member", o.query+fmt.Sprint(untilCaughtUp))
	}
	src, err := kafka.New(kc, log)
	if err != nil {
		t.Fatal(err)
	}
	if o.beforeLoad != nil {
		kafka.SetBeforeLoad(src, o.beforeLoad)
	}
	bucket, err := lake.OpenBucket(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bucket.Close() })
	if o.wrap != nil {
		bucket = o.wrap(bucket)
	}
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

// reference lands topic once, uninterrupted, with a group of its own.
func reference(t *testing.T, broker, topic string) map[[2]int64]int {
	t.Helper()
	dir := t.TempDir()
	start(t, broker, topic, "ref-"+topic, dir, true, 1_000_000).wait(t, 2*time.Minute)
	ref := kafkatest.Landed(t, dir)
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
	broker := kafkatest.Cluster(t)
	topic := kafkatest.Topic(t, broker, 6, 3000, 1)
	dir := t.TempDir()
	start(t, broker, topic, "g-"+topic, dir, true, 1_000_000).wait(t, 2*time.Minute)
	c, e := kafkatest.Offsets(t, broker, "g-"+topic, topic)
	for p, end := range e {
		if c[p] != end {
			t.Errorf("partition %d: committed %d, end offset %d", p, c[p], end)
		}
	}
	first := len(kafkatest.Landed(t, dir))

	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	more := kafkatest.Produce(t, cl, topic, 1500, 2)
	cl.Close()
	m := start(t, broker, topic, "g-"+topic, dir, true, 1_000_000)
	m.wait(t, 2*time.Minute)
	if n := m.p.Stats().Messages.Load(); n != int64(more) {
		t.Errorf("the second run read %d messages, want the %d new ones", n, more)
	}
	got := kafkatest.Landed(t, dir)
	if len(got) <= first {
		t.Errorf("nothing new landed: %d rows, %d before", len(got), first)
	}
	kafkatest.SameOnce(t, "two runs", got, reference(t, broker, topic))

	// Every row carries its Kafka record's timestamp, not the time it
	// was read: a replay lands the same value.
	_, ends := kafkatest.Offsets(t, broker, "g-"+topic, topic)
	total := int64(0)
	for _, end := range ends {
		total += end
	}
	recs := consume(t, broker, topic, int(total))
	at := map[[2]int64]int64{}
	for _, r := range recs {
		at[[2]int64{int64(r.Partition), r.Offset}] = r.Timestamp.UnixMicro()
	}
	wrong := 0
	for k, v := range kafkatest.Times(t, dir) {
		if v != at[k] {
			if wrong++; wrong <= 3 {
				t.Errorf("partition %d offset %d: _cdc_ingested_at %d, its record's timestamp %d", k[0], k[1], v, at[k])
			}
		}
	}
}

// TestStopAndRestart: a long-running instance stopped mid-stream (SIGTERM)
// writes what it read and commits it; the next one goes on from there.
func TestStopAndRestart(t *testing.T) {
	broker := kafkatest.Cluster(t)
	topic := kafkatest.Topic(t, broker, 6, 6000, 3)
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
	kafkatest.SameOnce(t, "stop and restart", kafkatest.Landed(t, dir), reference(t, broker, topic))
}

// TestRebalance: a second instance joins the group while the first is
// landing and data keeps coming; the first hands over the partitions it
// loses (files written, offsets committed), and together they land every
// row once.
func TestRebalance(t *testing.T) {
	broker := kafkatest.Cluster(t)
	topic := kafkatest.Topic(t, broker, 6, 3000, 4)
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	total := int64(0)
	_, ends := kafkatest.Offsets(t, broker, "none", topic)
	for _, n := range ends {
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
		total += int64(kafkatest.Produce(t, cl, topic, 1000, uint64(10+round)))
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
	kafkatest.SameOnce(t, "two members", kafkatest.Landed(t, dir), reference(t, broker, topic))
}

// TestFencedInstance: an instance whose upload hangs loses its partition
// to another (a pod restarted under the same static member id while the
// old one still runs). The new owner repeats the hanging file's recorded
// cut although its own settings would cut elsewhere; when the old
// instance's upload completes after all, long after, it writes the same
// rows under the same name, its next state is refused (fenced), and it
// stops with an error saying so instead of writing on (or acknowledging
// and dropping what it reads). Every row is in the lake once.
func TestFencedInstance(t *testing.T) {
	broker := kafkatest.Cluster(t)
	topic := kafkatest.Topic(t, broker, 1, 4000, 21)
	dir := t.TempDir()
	group := "g-" + topic
	blocked, release := make(chan string, 1), make(chan struct{})
	var uploads atomic.Int32
	gate := func(key string) {
		if strings.HasPrefix(key, "_") || !strings.HasSuffix(key, ".parquet") {
			return
		}
		if uploads.Add(1) == 3 {
			blocked <- key
			<-release
		}
	}
	static := "&instance_id=pod-0&session_timeout=6s"
	// Files cut by the open-file bound: where depends on what else is open.
	a := startWith(t, broker, topic, group, dir, false, memberOptions{maxRows: 1_000_000, maxOpenFiles: 3, query: static,
		wrap: func(b *blob.Bucket) *blob.Bucket {
			fb, _ := sinktest.Faulty(b, sinktest.Faults{BeforeClose: gate})
			return fb
		}})
	var key string
	select {
	case key = <-blocked:
	case <-time.After(time.Minute):
		t.Fatal("the first instance wrote no third file")
	}
	b := startWith(t, broker, topic, group, dir, true, memberOptions{maxRows: 50, query: static})
	b.wait(t, 2*time.Minute)
	if _, err := os.Stat(dir + "/" + key); err != nil {
		t.Fatalf("the new owner did not write %s, the file it took over: %v", key, err)
	}
	close(release) // the hanging upload completes now
	// Its state then finds the partition taken: the instance stops with an
	// error saying so, rather than acknowledge and drop what it reads.
	select {
	case err := <-a.done:
		if err == nil || !strings.Contains(err.Error(), "another instance took it over") {
			t.Errorf("the fenced instance ended with %v, want the fence's error", err)
		}
	case <-time.After(time.Minute):
		a.stop()
		t.Fatal("the fenced instance went on running")
	}
	kafkatest.SameOnce(t, "after a fenced instance's late upload", kafkatest.Landed(t, dir), reference(t, broker, topic))
}

// TestDeadLetterTopic: with sink.dead_letters a Kafka topic, messages that
// cannot land are produced there with their original key, value and
// headers and their position and reason as headers; the lake has none.
func TestDeadLetterTopic(t *testing.T) {
	broker := kafkatest.Cluster(t)
	topic := kafkatest.Topic(t, broker, 1, 200, 31)
	dlq := kafkatest.Empty(t, broker, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	poison := []*kgo.Record{
		{Topic: topic, Key: []byte("k1"), Value: []byte(`{"op":"c","after":`), Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("t-1")}}},
		{Topic: topic, Key: []byte("k2"), Value: []byte{0xff, 0xfe, '{'}},
	}
	kafkatest.ProduceRecords(t, cl, poison)
	kafkatest.ProduceRecords(t, cl, []*kgo.Record{{Topic: topic, Key: []byte("none"), Value: []byte(`{"ts_ms":1}`)}})
	dir := t.TempDir()
	m := startWith(t, broker, topic, "g-"+topic, dir, true, memberOptions{maxRows: 1000, deadLetters: fmt.Sprintf("kafka://%s/%s", broker, dlq)})
	m.wait(t, 2*time.Minute)
	if n := m.p.Stats().DeadLetters.Load(); n != 2 {
		t.Errorf("%d dead letters, want 2", n)
	}
	if _, err := os.Stat(dir + "/_dead_letter"); !os.IsNotExist(err) {
		t.Errorf("dead letters in the lake too: %v", err)
	}
	got := consume(t, broker, dlq, 2)
	for i, r := range got {
		h := map[string]string{}
		for _, x := range r.Headers {
			h[x.Key] = string(x.Value)
		}
		want := poison[i]
		if string(r.Key) != string(want.Key) || string(r.Value) != string(want.Value) || h["cdclake.source"] != topic ||
			h["cdclake.partition"] != "0" || h["cdclake.offset"] == "" || h["cdclake.stage"] == "" || h["cdclake.reason"] == "" {
			t.Errorf("dead letter %d: key %q value %q headers %v", i, r.Key, r.Value, h)
		}
		if i == 0 && h["trace"] != "t-1" {
			t.Errorf("the original header is missing: %v", h)
		}
	}
}

// consume reads n records of a topic from its start.
func consume(t *testing.T, broker, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d records of %s, want %d", len(out), topic, n)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// TestSASLSSL lands a topic through the broker's SASL_SSL listener: TLS
// verified against the CA that infra/ generated, SCRAM-SHA-512 with a
// password from an environment variable. It needs
// CDCLAKE_TEST_KAFKA_SASL_SSL (the listener) and CDCLAKE_TEST_KAFKA_CA
// (the CA's PEM file), which make e2e sets.
func TestSASLSSL(t *testing.T) {
	broker := kafkatest.Cluster(t)
	secure, ca := os.Getenv("CDCLAKE_TEST_KAFKA_SASL_SSL"), os.Getenv("CDCLAKE_TEST_KAFKA_CA")
	if secure == "" || ca == "" {
		t.Skip("CDCLAKE_TEST_KAFKA_SASL_SSL and CDCLAKE_TEST_KAFKA_CA are not set (make e2e sets them)")
	}
	// A SCRAM user, created over the plaintext listener.
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	password := fmt.Sprintf("pw-%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := kadm.NewClient(cl).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "cdclake-test", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: password}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("creating the SCRAM user: %v", err)
	}
	t.Setenv("CDCLAKE_TEST_SASL_PASSWORD", password)
	topic := kafkatest.Topic(t, broker, 3, 2000, 41)
	dir := t.TempDir()
	startWith(t, secure, topic, "g-"+topic, dir, true, memberOptions{maxRows: 1000,
		query: "&tls=true&tls_ca=" + ca + "&sasl=SCRAM-SHA-512&sasl_user=cdclake-test&sasl_password_env=CDCLAKE_TEST_SASL_PASSWORD"}).wait(t, 2*time.Minute)
	kafkatest.SameOnce(t, "through SASL_SSL", kafkatest.Landed(t, dir), reference(t, broker, topic))
}

// TestStateWinsOverGroupOffsets: when the group's offsets are ahead of
// what the lake's state says landed, --until-caught-up reads from the
// lake's state and lands the rest, instead of taking the group's word that
// the partitions are done.
func TestStateWinsOverGroupOffsets(t *testing.T) {
	broker := kafkatest.Cluster(t)
	topic := kafkatest.Topic(t, broker, 2, 1000, 51)
	dir, group := t.TempDir(), "g-"+topic
	start(t, broker, topic, group, dir, true, 1_000_000).wait(t, 2*time.Minute)
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	kafkatest.Produce(t, cl, topic, 500, 52)
	// The group says everything is done; the lake's state does not.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if err := adm.CommitAllOffsets(ctx, group, ends.Offsets()); err != nil {
		t.Fatal(err)
	}
	start(t, broker, topic, group, dir, true, 1_000_000).wait(t, 2*time.Minute)
	kafkatest.SameOnce(t, "after the group's offsets ran ahead", kafkatest.Landed(t, dir), reference(t, broker, topic))
}

// TestAssignedBeforeTargets: the client joins the group while
// --until-caught-up lists the end offsets; partitions assigned (and
// claimed) before the listing ends are read to their end all the same, not
// taken for done because no target was known yet.
func TestAssignedBeforeTargets(t *testing.T) {
	broker := kafkatest.Cluster(t)
	topic := kafkatest.Topic(t, broker, 3, 1500, 61)
	dir := t.TempDir()
	m := startWith(t, broker, topic, "g-"+topic, dir, true, memberOptions{maxRows: 1_000_000,
		beforeLoad: func() { time.Sleep(3 * time.Second) }})
	m.wait(t, 2*time.Minute)
	kafkatest.SameOnce(t, "assigned before the targets", kafkatest.Landed(t, dir), reference(t, broker, topic))
}

// TestSubscribeFailureEndsTheRun: a subscription that fails (here: the run
// is stopped while it lists the end offsets) ends the run with an error;
// closing the source does not wait for a subscription that never started.
// Without a broker the listing fails before it asks one.
//
// With a broker (CDCLAKE_TEST_KAFKA_BROKERS), the run is stopped once the
// client had time to join the group and be assigned the partitions, whose
// deliverers then run when the subscription fails.
func TestSubscribeFailureEndsTheRun(t *testing.T) {
	broker, topic, hold := "127.0.0.1:1", "none", time.Duration(0)
	if b := os.Getenv("CDCLAKE_TEST_KAFKA_BROKERS"); b != "" {
		broker, topic, hold = b, kafkatest.Topic(t, b, 3, 300, 67), 3*time.Second
	}
	gate := make(chan struct{})
	m := startWith(t, broker, topic, "g-"+topic, t.TempDir(), true, memberOptions{maxRows: 10,
		beforeLoad: func() { <-gate }})
	time.Sleep(hold)
	m.stop()
	close(gate)
	select {
	case err := <-m.done:
		if err == nil {
			t.Error("a run whose subscription failed ended without an error")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not end after its subscription failed")
	}
}

// TestOffsetOutOfRange: messages deleted from the log before they landed
// (retention during an outage) are never skipped silently. The restart
// stops with an error naming the partition and the gap; with on_gap=skip
// it records the gap in the lake's _gaps/ and lands on from the log's
// first offset.
func TestOffsetOutOfRange(t *testing.T) {
	broker := kafkatest.Cluster(t)
	topic := kafkatest.Topic(t, broker, 1, 300, 81)
	dir, group := t.TempDir(), "g-"+topic
	start(t, broker, topic, group, dir, true, 100).wait(t, 2*time.Minute)
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	_, ends := kafkatest.Offsets(t, broker, group, topic)
	landedTo := ends[0]
	kafkatest.Produce(t, cl, topic, 300, 82)
	// Retention deletes the first 50 messages that did not land.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	deleted, err := kadm.NewClient(cl).DeleteRecords(ctx, kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: landedTo + 50}}})
	if err == nil {
		err = deleted.Error()
	}
	if err != nil {
		t.Fatalf("deleting records: %v", err)
	}
	m := start(t, broker, topic, group, dir, true, 100)
	select {
	case err := <-m.done:
		want := fmt.Sprintf("%s partition 0: offset %d is no longer in the log, which holds %d to", topic, landedTo, landedTo+50)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "on_gap=skip") {
			t.Fatalf("the restart ended with %v, want an error saying %q and how to go on", err, want)
		}
	case <-time.After(2 * time.Minute):
		m.stop()
		t.Fatal("the restart did not stop")
	}
	startWith(t, broker, topic, group, dir, true, memberOptions{maxRows: 100, query: "&on_gap=skip"}).wait(t, 2*time.Minute)
	gap, err := os.ReadFile(filepath.Join(dir, "_gaps", fmt.Sprintf("%s-p0-o%020d.json", topic, landedTo)))
	if err != nil || !strings.Contains(string(gap), fmt.Sprintf(`"from":%d,"to":%d`, landedTo, landedTo+50)) {
		t.Errorf("the gap's record: %s, %v", gap, err)
	}
	got := kafkatest.Landed(t, dir)
	ref := reference(t, broker, topic) // the log as it is now: from landedTo+50 on
	for k, n := range got {
		switch {
		case k[1] >= landedTo && k[1] < landedTo+50:
			t.Errorf("offset %d, deleted before it landed, is in the lake", k[1])
		case k[1] >= landedTo+50 && ref[k] != n:
			t.Errorf("offset %d landed %d times, the reference %d", k[1], n, ref[k])
		case n != 1:
			t.Errorf("offset %d landed %d times", k[1], n)
		}
	}
	for k := range ref {
		if got[k] == 0 {
			t.Errorf("offset %d, after the gap, did not land", k[1])
		}
	}
}

// TestTopicRecreated: a topic deleted and created again under its name
// has offsets that begin again, still in range of what the lake
// committed: landed on, its rows would take the old topic's file names and
// overwrite them. The lake records each partition's topic ID, and a run
// that meets another one stops with an error saying so and what to do,
// writing nothing.
func TestTopicRecreated(t *testing.T) {
	broker := kafkatest.Cluster(t)
	topic := kafkatest.Topic(t, broker, 1, 200, 101)
	dir, group := t.TempDir(), "g-"+topic
	start(t, broker, topic, group, dir, true, 100).wait(t, 2*time.Minute)
	before := kafkatest.Landed(t, dir)
	files := lakeFiles(t, dir)
	if len(before) == 0 {
		t.Fatal("nothing landed")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := adm.DeleteTopics(ctx, topic); err != nil {
		t.Fatal(err)
	}
	// Deletion completes in the background: create until the name is free.
	for {
		resp, err := adm.CreateTopic(ctx, 1, 1, nil, topic)
		if err == nil && resp.Err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("creating the topic again: %v, %v", err, resp.Err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// More messages than before: the lake's committed offset is in range.
	kafkatest.Produce(t, cl, topic, 400, 102)
	m := start(t, broker, topic, group, dir, true, 100)
	select {
	case err := <-m.done:
		if err == nil || !strings.Contains(err.Error(), "the source's is") || !strings.Contains(err.Error(), "another lake or prefix") {
			t.Fatalf("the run on the recreated topic ended with %v, want an error saying the topic is another one", err)
		}
		t.Logf("the run stopped: %v", err)
	case <-time.After(2 * time.Minute):
		m.stop()
		t.Fatal("the run on the recreated topic did not stop")
	}
	if after := lakeFiles(t, dir); !maps.Equal(after, files) {
		t.Errorf("the lake's files changed: %d before, %d after", len(files), len(after))
	}
}

// lakeFiles returns the lake's Parquet files and their sizes.
func lakeFiles(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".parquet") {
			info, err := d.Info()
			if err != nil {
				return err
			}
			out[path] = info.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStartIsRecorded: with start=latest, where a partition the lake has
// no state of starts is recorded in its state when it is claimed. A run
// that stops before its first file (here: nothing arrived) leaves the
// lake saying where it began, and the next run, even of another group,
// lands from there: every message since the first start, none before.
func TestStartIsRecorded(t *testing.T) {
	broker := kafkatest.Cluster(t)
	topic := kafkatest.Topic(t, broker, 1, 100, 91)
	dir := t.TempDir()
	_, ends := kafkatest.Offsets(t, broker, "none-"+topic, topic)
	began := ends[0]
	startWith(t, broker, topic, "g1-"+topic, dir, true, memberOptions{maxRows: 100, query: "&start=latest"}).wait(t, 2*time.Minute)
	if n := len(kafkatest.Landed(t, dir)); n != 0 {
		t.Fatalf("the first run landed %d rows of messages from before it started", n)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	kafkatest.Produce(t, cl, topic, 50, 92)
	startWith(t, broker, topic, "g2-"+topic, dir, true, memberOptions{maxRows: 100, query: "&start=latest"}).wait(t, 2*time.Minute)
	got := kafkatest.Landed(t, dir)
	if len(got) == 0 {
		t.Fatal("the second run landed nothing: it started at the end, skipping what came after the first start")
	}
	for k, n := range got {
		if k[1] < began || n != 1 {
			t.Errorf("offset %d landed %d times; the first run began at %d", k[1], n, began)
		}
	}
}

// TestUnclaimablePartitionWaitsAlone: a partition whose state in the lake
// cannot be read (here every state of it is cut short: a newest state
// alone cut short is passed over for the one before) fails alone: the
// others land, and the run, which has an end, stops with an error naming
// it. Once the states are whole again, the next run lands it; every row
// once.
func TestUnclaimablePartitionWaitsAlone(t *testing.T) {
	broker := kafkatest.Cluster(t)
	topic := kafkatest.Topic(t, broker, 3, 600, 95)
	dir, group := t.TempDir(), "g-"+topic
	start(t, broker, topic, group, dir, true, 100).wait(t, 2*time.Minute)
	first := kafkatest.Landed(t, dir)
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	kafkatest.Produce(t, cl, topic, 600, 96)
	restore := kafkatest.CutStatesShort(t, filepath.Join(dir, "_cdclake", "state", topic, "p1"))
	m := start(t, broker, topic, group, dir, true, 100)
	select {
	case err := <-m.done:
		if err == nil || !strings.Contains(err.Error(), topic+" partition 1: its state in the lake cannot be claimed") {
			t.Fatalf("the run ended with %v, want partition 1's error", err)
		}
	case <-time.After(3 * time.Minute):
		m.stop()
		t.Fatal("the run did not end")
	}
	ref := reference(t, broker, topic)
	got := kafkatest.Landed(t, dir)
	for k, n := range ref {
		switch {
		case k[0] != 1 && got[k] != n:
			t.Errorf("partition %d offset %d landed %d times beside the unclaimable partition", k[0], k[1], got[k])
		case k[0] == 1 && got[k] != first[k]:
			t.Errorf("partition 1 offset %d landed while its state could not be read", k[1])
		}
	}
	restore()

	start(t, broker, topic, group, dir, true, 100).wait(t, 2*time.Minute)
	kafkatest.SameOnce(t, "once the states were whole again", kafkatest.Landed(t, dir), ref)
}

// TestDecodingStateMovesWithThePartition: the table version a partition's
// rows land in depends on the rows before them (here a column inferred
// from the first row only). An instance that takes the partition over
// past that row resolves the rows after it as the previous owner would
// have, from the partition's catalog: the lake holds the same files, of
// the same schemas, as one uninterrupted run.
func TestDecodingStateMovesWithThePartition(t *testing.T) {
	broker := kafkatest.Cluster(t)
	topic := kafkatest.Empty(t, broker, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	row := func(i int, cols string) *kgo.Record {
		return &kgo.Record{Topic: topic, Key: []byte("s.t"), Value: fmt.Appendf(nil,
			`{"op":"c","ts_ms":1700000000000,"before":null,"after":{"id":%d%s},"source":{"db":"s","table":"t","ts_ms":1700000000000}}`, i, cols)}
	}
	first := []*kgo.Record{row(0, `,"a":1.5`)}
	for i := 1; i <= 100; i++ {
		first = append(first, row(i, `,"b":"x"`))
	}
	var rest []*kgo.Record
	for i := 101; i < 200; i++ {
		rest = append(rest, row(i, `,"b":"y"`))
	}
	kafkatest.ProduceRecords(t, cl, first)
	split := t.TempDir()
	startWith(t, broker, topic, "g-"+topic, split, true, memberOptions{maxRows: 50}).wait(t, 2*time.Minute)
	kafkatest.ProduceRecords(t, cl, rest)
	startWith(t, broker, topic, "g-"+topic, split, true, memberOptions{maxRows: 50}).wait(t, 2*time.Minute)

	whole := t.TempDir()
	startWith(t, broker, topic, "ref-"+topic, whole, true, memberOptions{maxRows: 50}).wait(t, 2*time.Minute)
	got, want := kafkatest.Schemas(t, split), kafkatest.Schemas(t, whole)
	if len(want) != 5 {
		t.Fatalf("the uninterrupted run wrote %d files, want 5: %v", len(want), slices.Collect(maps.Keys(want)))
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: the second instance landed\n%s\nwant, as one run does,\n%s", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("the split run wrote %d files, the uninterrupted one %d", len(got), len(want))
	}
	kafkatest.SameOnce(t, "split", kafkatest.Landed(t, split), kafkatest.Landed(t, whole))
}

// TestRegexMatchesWholeNames: with regex, a topic is read when an
// expression matches its whole name, as the catch-up's listing does: not
// x-<topic>, which franz-go alone would match (it matches anywhere).
func TestRegexMatchesWholeNames(t *testing.T) {
	broker := kafkatest.Cluster(t)
	topic := kafkatest.Empty(t, broker, 1)
	other := "x-" + topic
	cl := kafkatest.CreateTopic(t, broker, other, 1)
	defer cl.Close()
	n := kafkatest.Produce(t, cl, topic, 100, 1)
	kafkatest.Produce(t, cl, other, 100, 2)
	dir := t.TempDir()
	m := startWith(t, broker, topic, "g-"+topic, dir, false, memberOptions{maxRows: 1_000_000, query: "&regex=true"})
	deadline := time.Now().Add(time.Minute)
	for m.p.Stats().Messages.Load() < int64(n) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // time to read the other topic too, were it assigned
	m.stop()
	if err := <-m.done; err != nil {
		t.Fatal(err)
	}
	if got := m.p.Stats().Messages.Load(); got != int64(n) {
		t.Errorf("read %d messages, want the %d of %s alone", got, n, topic)
	}
	var others []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), other) {
			others = append(others, p)
		}
		return nil
	})
	if len(others) > 0 {
		t.Errorf("landed %s too: %v", other, others)
	}
}
