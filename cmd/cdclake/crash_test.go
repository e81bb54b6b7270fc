package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cdclake/cdclake/internal/pyenv"
	"github.com/cdclake/cdclake/pipelines/source/gen"
	"github.com/cdclake/cdclake/pipelines/source/kafka/kafkatest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCrashHarness lands a generated stream of mixed CDC changes (package
// gen: GoldenGate with metadata, DDL and CloudEvents, Debezium with and
// without schemas) from a 6-partition topic into the S3 server, through
// everything that can go wrong at once:
//
//  1. kills: an instance is started and killed with SIGKILL at a random
//     moment, again and again; then lost replies: an instance lands
//     through a proxy that loses the reply of the first create of every
//     partition state, and must take its own states for its own;
//  2. scaling and a zombie: one instance, then a fourth that is paused
//     (SIGSTOP), then two more while the rest of the stream, with its
//     table-version changes (GoldenGate DDL), is produced; the paused one
//     is resumed (SIGCONT) after its partitions moved, and must not land
//     anything of them; then one instance again;
//  3. an outage: the S3 server is stopped for a while under the last
//     instance, then started again; with CDCLAKE_CRASH_BROKER_DOWN
//     (seconds) the broker is then restarted too;
//  4. a poisoned partition: every state of one partition is cut short;
//     an instance lands the others, the poisoned one waits, and once the
//     states are whole again it lands on without a restart;
//  5. the end: a run with --until-caught-up;
//  6. an out-of-range restart, on a topic of its own: messages deleted
//     before they landed stop the restart with an error and a non-zero
//     status, and on_gap=skip then lands on and records the gap.
//
// With CDCLAKE_CRASH_TABLE_FORMAT=iceberg every table is committed to
// Iceberg (a SQLite catalog, the tables' files on the S3 server): every
// instance appends in process (package iceappend) but the one whose
// committer process (cdclake-lakehouse) a round after the kills kills
// again and again, which commits everything there (sink.iceberg.appends:
// committer) to the same tables at once, cutting commits whose reply
// is then lost, while cdclake compact rewrites the tables' small files
// and expires all but their newest five snapshots, four times; at the
// end pyiceberg must read each table as exactly the
// lake's rows, every snapshot as its files, none referenced twice or
// missing (testdata/e2e/iceberg.py). With CDCLAKE_CRASH_TABLE_FORMAT=delta
// every table is a Delta table (its log beside its files on the S3
// server, checkpointed every 5 versions), whose commits the kills, the
// group's scaling, the zombie, the outage, the lost replies and cdclake
// compact (four times, as with Iceberg, its replaced compacted files
// expired) cut and race; at the end delta-rs must read each table and
// version as exactly its files' rows with the offsets recorded, each
// compaction as its parent's rows, and each current-state table as its
// newest manifest's files (testdata/e2e/delta.py).
//
// While it runs, DuckDB samples the lake every few seconds: no sample may
// hold a message's row twice. At the end the lake must hold exactly the
// stream's change rows, each once, every value and each table's current
// state as generated (testdata/e2e/verify.py).
//
// It needs the services of make e2e (CDCLAKE_TEST_KAFKA_BROKERS,
// CDCLAKE_TEST_S3_URL, CDCLAKE_TEST_S3_DIR, CDCLAKE_TEST_INFRA) and
// CDCLAKE_TEST_PYTHON, a Python with DuckDB (with Iceberg, CDCLAKE_PYTHON
// too, make test's, with pyiceberg). Sizes: CDCLAKE_CRASH_EVENTS
// (default 30000), CDCLAKE_CRASH_KILLS (default 5), CDCLAKE_CRASH_OUTAGE
// (seconds, default 10); make crash-test runs 1,000,000 events, 20 kills
// and 30 seconds.
func TestCrashHarness(t *testing.T) {
	broker := kafkatest.Brokers(t)
	s3URL, s3Dir, infra, py := os.Getenv("CDCLAKE_TEST_S3_URL"), os.Getenv("CDCLAKE_TEST_S3_DIR"),
		os.Getenv("CDCLAKE_TEST_INFRA"), os.Getenv("CDCLAKE_TEST_PYTHON")
	if s3URL == "" || s3Dir == "" || infra == "" || py == "" {
		t.Skip("CDCLAKE_TEST_S3_URL, CDCLAKE_TEST_S3_DIR, CDCLAKE_TEST_INFRA and CDCLAKE_TEST_PYTHON are not set (make e2e sets them)")
	}
	events, kills := envInt(t, "CDCLAKE_CRASH_EVENTS", 30000), envInt(t, "CDCLAKE_CRASH_KILLS", 5)
	outage := time.Duration(envInt(t, "CDCLAKE_CRASH_OUTAGE", 10)) * time.Second
	var brokerDown time.Duration
	if os.Getenv("CDCLAKE_CRASH_BROKER_DOWN") != "" {
		brokerDown = time.Duration(envInt(t, "CDCLAKE_CRASH_BROKER_DOWN", 10)) * time.Second
	}
	format := os.Getenv("CDCLAKE_CRASH_TABLE_FORMAT")
	if format != "" && format != "iceberg" && format != "delta" {
		t.Fatalf("CDCLAKE_CRASH_TABLE_FORMAT %q: want iceberg, delta or nothing", format)
	}
	bin := build(t, "github.com/cdclake/cdclake/cmd/cdclake")
	icePy := ""
	if format == "delta" {
		icePy = pyenv.Python(t, "read the Delta tables with delta-rs")
	}
	if format == "iceberg" {
		icePy = pyenv.Python(t, "read the Iceberg tables with pyiceberg")
		// The committer's binary, which cdclake starts.
		t.Setenv("CDCLAKE_LAKEHOUSE", build(t, "github.com/cdclake/cdclake/cmd/cdclake-lakehouse"))
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if keep := os.Getenv("CDCLAKE_TEST_KEEP"); keep != "" {
		dir = keep
	}

	// The topic, and the stream: 40% produced now, the rest, with the
	// table-version changes, while the group scales.
	topic := fmt.Sprintf("cdclake-crash-%d", time.Now().UnixNano())
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ProducerBatchMaxBytes(4<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(context.Background(), 6, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The test's client is closed by then.
		if dcl, err := kgo.NewClient(kgo.SeedBrokers(broker)); err == nil {
			_, _ = kadm.NewClient(dcl).DeleteTopics(context.Background(), topic)
			dcl.Close()
		}
	})
	recs, exp := kafkatest.Stream(t, topic, events, 24, 42, gen.Mixed)
	expPath := filepath.Join(dir, "expected.json")
	if data, err := json.Marshal(exp); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(expPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	split := len(recs) * 4 / 10
	kafkatest.ProduceRecords(t, cl, recs[:split])

	prefix := "crash-" + topic
	lakeDir := filepath.Join(s3Dir, prefix)
	sink := s3URL + "&prefix=" + prefix + "/"
	cfg := filepath.Join(dir, "cdclake.yaml")
	catalog := filepath.Join(dir, "catalog.db")
	// Every instance builds the current-state tables of the tables it
	// lands every 3 s, and all at its end: builds of one table race
	// between instances, and kills and the outage cut them.
	tables, sinkCfg := "", "sink:\n  current:\n    interval: 3s\n    buckets: 8\n"
	if format == "iceberg" {
		_ = os.Remove(catalog) // CDCLAKE_TEST_KEEP's, of an earlier run
		tables = "  table_format: iceberg\n"
		// Merge-on-read: builds that lose their commits, race and
		// merge into each other's files.
		sinkCfg += "    mode: merge-on-read\n"
		sinkCfg += "  iceberg:\n    catalog: sqlite://" + catalog + "\n    commit_interval: 500ms\n"
	}
	if format == "delta" {
		tables = "  table_format: delta\n"
		sinkCfg += "  delta:\n    commit_interval: 500ms\n    checkpoint_interval: 5\n"
	}
	config := func(sinkCfg string) []byte {
		return []byte("progress_interval: 0s\nshutdown_timeout: 2m\nsource:\n  block_lines: 500\n" +
			"batch:\n  max_open_files: 24\n" + sinkCfg + "defaults:\n  max_rows: 4000\n  max_age: 2s\n  key: [id]\n" + tables +
			// The generated GoldenGate tables declare their CREATED text column
			// a timestamp (testdata/bench/config.yaml), and their key ID.
			"routes:\n  - match: \"SALES.*\"\n    key: [ID]\n    types:\n      CREATED: timestamp\n")
	}
	if err := os.WriteFile(cfg, config(sinkCfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// With Iceberg, instances append in process (package iceappend); the
	// one whose committer process is killed commits everything there, to
	// the same tables at once.
	inCommitter := []string{}
	if format == "iceberg" {
		committerCfg := filepath.Join(dir, "committer.yaml")
		if err := os.WriteFile(committerCfg, config(sinkCfg+"    appends: committer\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		inCommitter = []string{"--config", committerCfg}
	}
	group := "g-" + topic
	url := func(instance string) string {
		u := fmt.Sprintf("kafka://%s/%s?group=%s&commit_interval=500ms&session_timeout=10s", broker, topic, group)
		if instance != "" {
			u += "&instance_id=" + instance
		}
		return u
	}
	runs := 0
	var startSink func(instance, sink string, extra ...string) *proc
	start := func(instance string, extra ...string) *proc {
		t.Helper()
		return startSink(instance, sink, extra...)
	}
	startSink = func(instance, sink string, extra ...string) *proc {
		t.Helper()
		logPath := filepath.Join(dir, fmt.Sprintf("run-%02d.log", runs))
		runs++
		logf, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		// Up to three instances at once: each its own metrics port.
		args := append([]string{"run", "--source", url(instance), "--sink", sink, "--config", cfg, "--metrics-addr", "127.0.0.1:0"}, extra...)
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p := &proc{cmd: cmd, log: logPath, done: make(chan struct{})}
		go func() { _ = cmd.Wait(); logf.Close(); close(p.done) }()
		t.Cleanup(func() {
			// A test that failed leaves no instance running.
			select {
			case <-p.done:
			default:
				_ = cmd.Process.Kill()
				<-p.done
			}
		})
		return p
	}
	stop := func(p *proc) {
		t.Helper()
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		p.wait(t, 3*time.Minute, "stop after SIGTERM")
	}

	// The sampler.
	var sampleMu sync.Mutex
	samples, unreadable, worst := 0, 0, 0
	sample := func() {
		out, err := exec.Command(py, filepath.Join(repo, "infra", "crash_sample.py"), lakeDir).CombinedOutput()
		sampleMu.Lock()
		defer sampleMu.Unlock()
		var rows, dups int
		if _, serr := fmt.Sscanf(string(out), "rows %d duplicates %d", &rows, &dups); serr != nil {
			if err == nil || !strings.HasPrefix(string(out), "unreadable") {
				t.Errorf("sampling the lake: %v\n%s", err, out)
			}
			unreadable++
			return
		}
		samples++
		if dups > worst {
			worst = dups
			t.Errorf("a sample held %d duplicated rows (%d rows)", dups, rows)
		}
	}
	sampling, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-sampling:
				return
			case <-time.After(3 * time.Second):
				sample()
			}
		}
	}()
	began := time.Now()

	// 1. Kills.
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	for range kills {
		p := start("pod-0")
		time.Sleep(time.Duration(500+rng.IntN(2500)) * time.Millisecond)
		_ = p.cmd.Process.Kill()
		<-p.done
	}

	// Lost replies: the instance takes the states it created for its own.
	lossy, lost := lossyS3(t, s3URL, 1<<30)
	lossyRun := startSink("pod-0", strings.Replace(sink, s3URL, lossy, 1))
	time.Sleep(8 * time.Second)
	stop(lossyRun)
	if data, _ := os.ReadFile(lossyRun.log); strings.Contains(string(data), "another instance took it over") {
		t.Errorf("a lost reply was taken for another instance's state (%s)", lossyRun.log)
	}
	lostReplies, lostVersions := lost.count(), lost.versions()
	if lostReplies == 0 {
		t.Error("the proxy lost no reply: the round proves nothing")
	}

	// 2. Scaling 1 → 2 → 4 → 1 while the rest of the stream arrives; the
	// second instance is paused meanwhile and resumed after its
	// partitions moved.
	first := start("pod-0", inCommitter...)
	time.Sleep(3 * time.Second)
	zombie := start("")
	waitLog(t, zombie, `msg="partitions assigned"`, time.Minute)
	time.Sleep(time.Duration(1000+rng.IntN(2000)) * time.Millisecond)
	_ = zombie.cmd.Process.Signal(syscall.SIGSTOP)
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		rest := recs[split:]
		for len(rest) > 0 {
			n := min(len(rest), len(recs)/20+1)
			kafkatest.ProduceRecords(t, cl, rest[:n])
			rest = rest[n:]
			time.Sleep(time.Second)
		}
	}()
	// With Iceberg, the first instance's committer is killed again and
	// again meanwhile: the commits it has under way are cut (their replies
	// lost), and it is started again.
	var committerKills int
	killed := make(chan struct{})
	krng := rand.New(rand.NewPCG(rng.Uint64(), 5))
	go func() {
		defer close(killed)
		if format != "iceberg" {
			return
		}
		seen := map[int]bool{}
		for range kills {
			time.Sleep(time.Duration(1000+krng.IntN(2000)) * time.Millisecond)
			for _, c := range children(t, first.cmd.Process.Pid) {
				if !seen[c] && syscall.Kill(c, syscall.SIGKILL) == nil {
					seen[c] = true
					committerKills++
				}
			}
		}
	}()
	// With table formats, cdclake compact runs again and again meanwhile,
	// while the group lands and scales: its snapshots (versions) race the
	// landing commits.
	var compactions []string
	compacted := make(chan struct{})
	// A compaction and the S3 outage take turns: cdclake compact fails
	// when the store is down (a CronJob's next run compacts), which this
	// harness does not test.
	var storeTurn sync.Mutex
	go func() {
		defer close(compacted)
		if format == "" {
			return
		}
		for range 4 {
			time.Sleep(5 * time.Second)
			// Every snapshot but each table's newest five expires too
			// (Delta: the compacted files replaced before them; with a
			// table's few versions here, hardly any, so that delta.py
			// checks each compaction against its parent's rows): the
			// lake's files must all stay.
			storeTurn.Lock()
			out, err := exec.Command(bin, "compact", "--config", cfg, "--sink", sink, "--target-size", "1048576",
				"--expire-older-than", "1ns", "--retain-last", "5").CombinedOutput()
			storeTurn.Unlock()
			if err != nil {
				t.Errorf("cdclake compact while landing: %v\n%s", err, tail(out, 20))
				return
			}
			compactions = append(compactions, string(out))
		}
	}()
	time.Sleep(4 * time.Second)
	second, third := start(""), start("")
	// The zombie's session (10 s) ends and its partitions move.
	time.Sleep(14 * time.Second)
	_ = zombie.cmd.Process.Signal(syscall.SIGCONT)
	zombieEnd := "still running after 30 s"
	select {
	case <-zombie.done:
		zombieEnd = zombie.cmd.ProcessState.String()
	case <-time.After(30 * time.Second):
		stop(zombie)
	}
	stop(second)
	stop(third)

	// 3. The S3 server goes away under the remaining instance while the
	// stream still arrives.
	storeTurn.Lock()
	if out, err := exec.Command(filepath.Join(infra, "stop.sh"), "s3").CombinedOutput(); err != nil {
		t.Fatalf("stopping the S3 server: %v\n%s", err, out)
	}
	down := time.Now()
	time.Sleep(outage)
	if out, err := exec.Command(filepath.Join(infra, "start.sh"), "s3").CombinedOutput(); err != nil {
		t.Fatalf("starting the S3 server: %v\n%s", err, out)
	}
	outageFor := time.Since(down)
	storeTurn.Unlock()
	time.Sleep(3 * time.Second)
	if brokerDown > 0 {
		if out, err := exec.Command(filepath.Join(infra, "stop.sh"), "kafka").CombinedOutput(); err != nil {
			t.Fatalf("stopping the broker: %v\n%s", err, out)
		}
		time.Sleep(brokerDown)
		if out, err := exec.Command(filepath.Join(infra, "start.sh"), "kafka").CombinedOutput(); err != nil {
			t.Fatalf("starting the broker: %v\n%s", err, out)
		}
		time.Sleep(5 * time.Second)
	}
	<-produced
	<-killed
	<-compacted
	select {
	case <-first.done:
		log, _ := os.ReadFile(first.log)
		t.Fatalf("the instance under the outage exited:\n%s", tail(log, 20))
	default:
	}
	stop(first)
	restarts, cut := 0, 0
	if format == "iceberg" {
		data, _ := os.ReadFile(first.log)
		if !first.cmd.ProcessState.Success() {
			t.Errorf("the run whose committer was killed ended %s:\n%s", first.cmd.ProcessState, tail(data, 20))
		}
		// Every restart follows a SIGKILL: a committer that ended on its
		// own (a panic, an exit status) fails the harness. A SIGKILL the
		// harness did not send (the kernel's) is reported, not failed.
		ended := regexp.MustCompile(`(?m)^.*the lakehouse committer process ended; starting it again.*$`).FindAll(data, -1)
		restarts = len(ended)
		killed := 0
		for _, l := range ended {
			if bytes.Contains(l, []byte(`exit="signal: killed"`)) {
				killed++
			}
		}
		why := crashText(data, ended)
		switch {
		case committerKills == 0 || restarts == 0 || killed < restarts:
			t.Errorf("the committer was killed %d times and started again %d times, %d after a SIGKILL (%s):\n%s",
				committerKills, restarts, killed, first.log, why)
		case restarts > committerKills:
			t.Logf("the committer was killed %d times and started again %d times, each after a SIGKILL:\n%s", committerKills, restarts, why)
		}
		// Calls cut by a kill, commits among them.
		cut = len(regexp.MustCompile(`level=WARN.*the cdclake-lakehouse process: `).FindAll(data, -1))
	}

	// 4. A poisoned partition: it waits, the others land on; made whole,
	// it is claimed again without a restart.
	poisoned := kafkatest.CutStatesShort(t, filepath.Join(lakeDir, "_cdclake", "state", topic, "p2"))
	sick := start("pod-0")
	waitLog(t, sick, "a partition's state in the lake cannot be claimed", time.Minute)
	time.Sleep(5 * time.Second)
	poisoned()
	waitLog(t, sick, "a partition's state in the lake was claimed after all", time.Minute)
	time.Sleep(2 * time.Second)
	stop(sick)

	// 5. The end.
	start("pod-0", "--until-caught-up").wait(t, 20*time.Minute, "catch up")
	close(sampling)
	<-sampled
	sample()
	elapsed := time.Since(began)

	// 6. An out-of-range restart, on a topic and lake prefix of their own.
	gapCfg := cfg
	if format == "iceberg" {
		// Its lake's tables go into a catalog of their own.
		gapCfg = filepath.Join(dir, "gap.yaml")
		data, err := os.ReadFile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		_ = os.Remove(filepath.Join(dir, "gap-catalog.db"))
		data = []byte(strings.Replace(string(data), catalog, filepath.Join(dir, "gap-catalog.db"), 1))
		if err := os.WriteFile(gapCfg, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gapStatus := outOfRange(t, broker, bin, gapCfg, s3URL, s3Dir)

	// What landed, against what was produced.
	got := kafkatest.Landed(t, lakeDir)
	rows := 0
	for _, te := range exp.Tables {
		rows += te.Changes
	}
	dups := kafkatest.Duplicates(got)
	rebalances := 0
	logs, _ := filepath.Glob(filepath.Join(dir, "run-*.log"))
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		rebalances += strings.Count(string(data), `msg="partitions assigned"`)
		if m := regexp.MustCompile(`level=ERROR.*`).Find(data); m != nil {
			t.Logf("%s: %s", filepath.Base(l), m)
		}
	}
	verifyArgs := []string{filepath.Join(repo, "testdata", "e2e", "verify.py"), lakeDir, expPath, "--current"}
	if format == "iceberg" {
		verifyArgs = append(verifyArgs, "--plain-json") // Iceberg has no JSON type
	}
	if format == "delta" {
		verifyArgs = append(verifyArgs, "--delta") // nor Delta, nor a time type
	}
	out, verr := exec.Command(py, verifyArgs...).CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	summary := fmt.Sprintf("produced %d messages (%d change rows in %d tables); landed %d message rows; duplicates %d (worst sample %d, %d samples, %d unreadable); "+
		"kills %d; lost replies %d; zombie resumed: %s; rebalances %d; S3 outage %s; broker down %s; poisoned partition claimed after all; "+
		"out-of-range restart: %s; %s; verify: %s",
		len(recs), rows, len(exp.Tables), len(got), dups, worst, samples, unreadable, kills, lostReplies, zombieEnd, rebalances,
		outageFor.Round(time.Second), brokerDown, gapStatus, elapsed.Round(time.Second), lines[len(lines)-1])
	if format != "" {
		replaced, written, expired, deleted := 0, 0, 0, 0
		for _, out := range compactions {
			for _, m := range regexp.MustCompile(`: (\d+) files into (\d+) `).FindAllStringSubmatch(out, -1) {
				var r, w int
				fmt.Sscan(m[1], &r)
				fmt.Sscan(m[2], &w)
				replaced, written = replaced+r, written+w
			}
			for _, m := range regexp.MustCompile(`(\d+) snapshots expired, (\d+) of their files`).FindAllStringSubmatch(out, -1) {
				var e, d int
				fmt.Sscan(m[1], &e)
				fmt.Sscan(m[2], &d)
				expired, deleted = expired+e, deleted+d
			}
			for _, m := range regexp.MustCompile(`(\d+) replaced files deleted`).FindAllStringSubmatch(out, -1) {
				var d int
				fmt.Sscan(m[1], &d)
				deleted += d
			}
		}
		if replaced == 0 {
			t.Errorf("%d compactions while landing replaced no file:\n%s", len(compactions), strings.Join(compactions, "\n"))
		}
		summary += fmt.Sprintf("; %d compactions while landing: %d files into %d, %d snapshots expired, %d of their files deleted",
			len(compactions), replaced, written, expired, deleted)
	}
	if format == "iceberg" {
		iout, ierr := exec.Command(icePy, filepath.Join(repo, "testdata", "e2e", "iceberg.py"), catalog, lakeDir, "--rows-of", "3",
			"--warehouse", "s3://"+bucketOf(t, s3URL)+"/"+prefix, "--s3-endpoint", endpointOf(t, s3URL)).CombinedOutput()
		ilines := strings.Split(strings.TrimSpace(string(iout)), "\n")
		summary += fmt.Sprintf("; iceberg: committer killed %d times, started again %d, %d calls cut; %s", committerKills, restarts, cut, ilines[len(ilines)-1])
		if ierr != nil {
			t.Errorf("the Iceberg tables differ from the lake: %v\n%s", ierr, iout)
		}
		// The current-state tables are Iceberg tables too, each snapshot
		// reading as its version's files.
		cout, cerr := exec.Command(icePy, filepath.Join(repo, "testdata", "e2e", "current_iceberg.py"), catalog, lakeDir,
			"--tables", strconv.Itoa(len(exp.Tables)),
			"--warehouse", "s3://"+bucketOf(t, s3URL)+"/"+prefix, "--s3-endpoint", endpointOf(t, s3URL)).CombinedOutput()
		clines := strings.Split(strings.TrimSpace(string(cout)), "\n")
		summary += "; " + clines[len(clines)-1]
		if cerr != nil {
			t.Errorf("the current-state Iceberg tables do not read as their manifests' files: %v\n%s", cerr, cout)
		}
	}
	if format == "delta" {
		dout, derr := exec.Command(icePy, filepath.Join(repo, "testdata", "e2e", "delta.py"), lakeDir, "--rows-of", "3",
			"--current", strconv.Itoa(len(exp.Tables))).CombinedOutput()
		dlines := strings.Split(strings.TrimSpace(string(dout)), "\n")
		summary += fmt.Sprintf("; delta: %d lost replies of log versions; %s", lostVersions, dlines[len(dlines)-1])
		if lostVersions == 0 {
			t.Errorf("no reply of a Delta log version was lost")
		}
		if derr != nil {
			t.Errorf("the Delta tables differ from the lake: %v\n%s", derr, dout)
		}
	}
	t.Log(summary)
	_ = os.WriteFile(filepath.Join(dir, "summary.txt"), []byte(summary+"\n"), 0o644)
	if verr != nil {
		for _, l := range lines {
			if strings.HasPrefix(l, "FAIL") {
				t.Error(l)
			}
		}
		t.Errorf("the lake differs from the stream: %v", verr)
	}
	if dups > 0 {
		t.Errorf("%d rows landed more than once", dups)
	}
}

// crashText returns what tells why a committer ended: the restart lines,
// then, from the first line of a Go crash (a panic, a fatal error, a data
// race a -race build found), its
// next 60 lines, and the other lines that name the committer process
// without being its routine logs.
func crashText(log []byte, restarts [][]byte) string {
	var b strings.Builder
	for _, l := range restarts {
		b.Write(l)
		b.WriteByte('\n')
	}
	lines := strings.Split(string(log), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") || strings.HasPrefix(l, "WARNING: DATA RACE") {
			b.WriteString(strings.Join(lines[i:min(len(lines), i+60)], "\n"))
			b.WriteByte('\n')
			break
		}
	}
	for _, l := range lines {
		if strings.Contains(l, "cdclake-lakehouse") && !strings.Contains(l, "process=cdclake-lakehouse") &&
			!strings.Contains(l, "the lakehouse committer process ended") {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// children returns the process ids of pid's children (the committer).
func children(t *testing.T, pid int) []int {
	t.Helper()
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, task := range tasks {
		data, _ := os.ReadFile(task)
		for _, f := range strings.Fields(string(data)) {
			var c int
			if _, err := fmt.Sscan(f, &c); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// bucketOf and endpointOf return the bucket and the endpoint of an s3://
// sink URL.
func bucketOf(t *testing.T, s3URL string) string {
	t.Helper()
	u, err := neturl.Parse(s3URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

func endpointOf(t *testing.T, s3URL string) string {
	t.Helper()
	u, err := neturl.Parse(s3URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query().Get("endpoint")
}

// waitLog waits until p's log holds pattern (a regular expression), and
// fails the test after limit or when p exits first.
func waitLog(t *testing.T, p *proc, pattern string, limit time.Duration) {
	t.Helper()
	re := regexp.MustCompile(pattern)
	deadline := time.Now().Add(limit)
	for {
		data, _ := os.ReadFile(p.log)
		if re.Match(data) {
			return
		}
		select {
		case <-p.done:
			t.Fatalf("an instance exited before its log said %q:\n%s", pattern, tail(data, 20))
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("an instance's log did not say %q within %s (%s)", pattern, limit, p.log)
		}
	}
}

// outOfRange lands a topic of its own into a lake prefix of its own, lets
// the log lose messages that did not land, and checks that the restart
// stops with an error naming the gap and a non-zero status, and that a
// run with on_gap=skip lands on and records the gap. It returns what the
// restart did, for the summary.
func outOfRange(t *testing.T, broker, bin, cfg, s3URL, s3Dir string) string {
	t.Helper()
	topic := kafkatest.Topic(t, broker, 1, 300, 7)
	prefix := "gap-" + topic
	run := func(query string) ([]byte, error) {
		return exec.Command(bin, "run", "--until-caught-up", "--metrics-addr", "off", "--config", cfg,
			"--source", fmt.Sprintf("kafka://%s/%s?group=g-%s%s", broker, topic, topic, query),
			"--sink", s3URL+"&prefix="+prefix+"/").CombinedOutput()
	}
	if out, err := run(""); err != nil {
		t.Fatalf("landing the topic of the out-of-range round: %v\n%s", err, tail(out, 20))
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	_, ends := kafkatest.Offsets(t, broker, "g-"+topic, topic)
	kafkatest.Produce(t, cl, topic, 300, 8)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	deleted, err := kadm.NewClient(cl).DeleteRecords(ctx, kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: ends[0] + 40}}})
	if err == nil {
		err = deleted.Error()
	}
	if err != nil {
		t.Fatalf("deleting records: %v", err)
	}
	out, err := run("")
	want := fmt.Sprintf("offset %d is no longer in the log", ends[0])
	if err == nil || !strings.Contains(string(out), want) {
		t.Errorf("the out-of-range restart ended with %v, want a non-zero status and %q:\n%s", err, want, tail(out, 20))
		return "did not stop"
	}
	status := err.Error()
	if out, err := run("&on_gap=skip"); err != nil {
		t.Errorf("the run with on_gap=skip: %v\n%s", err, tail(out, 20))
	}
	gap, err := os.ReadFile(filepath.Join(s3Dir, prefix, "_gaps", fmt.Sprintf("%s-p0-o%020d.json", topic, ends[0])))
	if want := fmt.Sprintf(`"from":%d,"to":%d`, ends[0], ends[0]+40); err != nil || !strings.Contains(string(gap), want) {
		t.Errorf("the gap's record: %s, %v; want %s", gap, err, want)
	}
	return fmt.Sprintf("stopped (%s), then on_gap=skip landed on and recorded the 40 messages lost", status)
}

// proc is a running cdclake.
type proc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed once it exited
}

// wait fails the test unless p exits successfully within limit.
func (p *proc) wait(t *testing.T, limit time.Duration, what string) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(limit):
		t.Fatalf("an instance did not %s within %s (%s)", what, limit, p.log)
	}
	if !p.cmd.ProcessState.Success() {
		log, _ := os.ReadFile(p.log)
		t.Fatalf("an instance did not %s: %v\n%s", what, p.cmd.ProcessState, tail(log, 30))
	}
}

// tail returns the last n lines of a log.
func tail(log []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(log), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
