package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cdclake/cdclake/pipelines/source/gen"
	"github.com/cdclake/cdclake/pipelines/source/kafka/kafkatest"
)

// TestKafkaKill9 kills cdclake with SIGKILL at random moments while it
// lands a topic (mid-batch, mid-upload, between a file and its state or
// its commit), restarts it each time, and checks the lake after every kill
// and at the end: no row twice, ever, and in the end every row once.
//
// make crash-test runs it larger: CDCLAKE_CRASH_EVENTS changes per format
// (default 12000) and CDCLAKE_CRASH_KILLS kills (default 8).
func TestKafkaKill9(t *testing.T) {
	broker := kafkatest.Brokers(t)
	bin := build(t, "github.com/cdclake/cdclake/cmd/cdclake")
	events, kills := envInt(t, "CDCLAKE_CRASH_EVENTS", 12000), envInt(t, "CDCLAKE_CRASH_KILLS", 8)
	for _, f := range []struct {
		name   string
		format int
	}{{"debezium", gen.Debezium}, {"mixed", gen.Mixed}} {
		t.Run(f.name, func(t *testing.T) {
			topic := kafkatest.TopicFormat(t, broker, 6, events, 7, f.format)
			dir := t.TempDir()
			if keep := os.Getenv("CDCLAKE_TEST_KEEP"); keep != "" {
				dir = filepath.Join(keep, f.name) // kept for a look after a failure
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			// Small files, short ages and few open files: many cuts, for
			// many reasons, all of them to be repeated after a kill.
			cfg := filepath.Join(dir, "cdclake.yaml")
			if err := os.WriteFile(cfg, []byte("progress_interval: 0s\nsource:\n  block_lines: 100\nbatch:\n  max_open_files: 8\n"+
				"defaults:\n  max_rows: 250\n  max_age: 1s\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			lakeDir := filepath.Join(dir, "lake")
			// A static member: each restart takes the killed one's
			// partitions back at once, as a restarted pod does.
			url := fmt.Sprintf("kafka://%s/%s?group=g-%s&commit_interval=300ms&instance_id=pod-0&session_timeout=10s", broker, topic, topic)
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
			killed, worst := 0, 0
			for range kills {
				cmd := exec.Command(bin, "run", "--metrics-addr", "127.0.0.1:0", "--source", url, "--sink", lakeDir, "--config", cfg, "--log-level", "debug")
				logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("run-%d.log", killed)))
				if err != nil {
					t.Fatal(err)
				}
				cmd.Stdout, cmd.Stderr = logf, logf
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Duration(300+rng.IntN(1500)) * time.Millisecond)
				if err := cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
				_ = cmd.Wait()
				logf.Close()
				killed++
				if d := kafkatest.Duplicates(kafkatest.Landed(t, lakeDir)); d > worst {
					worst = d
				}
			}
			out, err := exec.Command(bin, "run", "--metrics-addr", "127.0.0.1:0", "--until-caught-up", "--source", url, "--sink", lakeDir, "--config", cfg, "--log-level", "debug").CombinedOutput()
			_ = os.WriteFile(filepath.Join(dir, "final.log"), out, 0o644)
			if err != nil {
				t.Fatalf("the last run failed: %v\n%s", err, out)
			}
			refDir := filepath.Join(dir, "ref")
			refURL := fmt.Sprintf("kafka://%s/%s?group=ref-%s", broker, topic, topic)
			if out, err := exec.Command(bin, "run", "--metrics-addr", "127.0.0.1:0", "--until-caught-up", "--source", refURL, "--sink", refDir).CombinedOutput(); err != nil {
				t.Fatalf("the reference run failed: %v\n%s", err, out)
			}
			got := kafkatest.Landed(t, lakeDir)
			t.Logf("%d kills; worst duplicates after a kill %d; %d rows landed", killed, worst, len(got))
			if worst > 0 {
				t.Errorf("after a kill the lake held %d duplicated rows", worst)
			}
			kafkatest.SameOnce(t, "after the kills", got, kafkatest.Landed(t, refDir))
			// A restarted instance decodes as the first did: GoldenGate rows
			// after the kills still take their types from OBJECT_METADATA
			// sent before the committed offset (ID a number: exact text),
			// not from inference (which would make it an integer).
			if f.format == gen.Mixed {
				if types := kafkatest.FieldTypes(t, lakeDir, "SALES.", "ID"); len(types) != 1 || types["utf8"] == 0 {
					t.Errorf("SALES.* after.ID landed as %v, want utf8 (decimal text from the metadata) only", types)
				}
			}
			for _, d := range kafkatest.DuplicateFiles(t, lakeDir, 5) {
				t.Log(d)
			}
			if t.Failed() {
				dl, _ := exec.Command("sh", "-c", "ls "+lakeDir+"/_dead_letter 2>/dev/null | wc -l; cat "+lakeDir+"/_dead_letter/* 2>/dev/null | head -c 600; grep -h 'level=ERROR\\|level=WARN' "+dir+"/run-*.log | head -5").CombinedOutput()
				t.Logf("dead letters and warnings:\n%s", dl)
				ref := kafkatest.Landed(t, refDir)
				n := 0
				for k := range ref {
					if got[k] == 0 && n < 5 {
						t.Logf("missing: partition %d offset %d", k[0], k[1])
						n++
					}
				}
				states, _ := exec.Command("sh", "-c", "ls -R "+lakeDir+"/_cdclake | tail -20; for f in $(find "+lakeDir+"/_cdclake -name '*.json' | sort | tail -3); do echo $f; head -c 1500 $f; echo; done").CombinedOutput()
				t.Logf("states:\n%s", states)
			}
		})
	}
}

// TestKafkaStoreOutage stops the S3 server for ten seconds while cdclake
// lands a topic into it: writes are retried, the outage is logged once when
// it starts and once when it ends, and in the end every row is in the lake
// once. It needs the services of make e2e: CDCLAKE_TEST_S3_URL (a bucket
// URL), CDCLAKE_TEST_S3_DIR (the folder the server keeps that bucket in)
// and CDCLAKE_TEST_INFRA (the infra/ folder, to stop and start the server).
func TestKafkaStoreOutage(t *testing.T) {
	broker := kafkatest.Brokers(t)
	s3URL, s3Dir, infra := os.Getenv("CDCLAKE_TEST_S3_URL"), os.Getenv("CDCLAKE_TEST_S3_DIR"), os.Getenv("CDCLAKE_TEST_INFRA")
	if s3URL == "" || s3Dir == "" || infra == "" {
		t.Skip("CDCLAKE_TEST_S3_URL, CDCLAKE_TEST_S3_DIR and CDCLAKE_TEST_INFRA are not set (make e2e sets them)")
	}
	bin := build(t, "github.com/cdclake/cdclake/cmd/cdclake")
	topic := kafkatest.Topic(t, broker, 6, 8000, 11)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "cdclake.yaml")
	if err := os.WriteFile(cfg, []byte("progress_interval: 0s\ndefaults:\n  max_rows: 300\n  max_age: 1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	prefix := "outage-" + topic
	lakeDir := filepath.Join(s3Dir, prefix)
	group := "g-" + topic
	url := fmt.Sprintf("kafka://%s/%s?group=%s&commit_interval=300ms&instance_id=outage", broker, topic, group)
	logPath := filepath.Join(dir, "cdclake.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "run", "--metrics-addr", "127.0.0.1:0", "--source", url, "--sink", s3URL+"&prefix="+prefix+"/", "--config", cfg)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	t.Cleanup(func() {
		if t.Failed() {
			log, _ := os.ReadFile(logPath)
			t.Logf("cdclake's log:\n%s", tail(log, 40))
		}
	})
	waitFor(t, time.Minute, "the first files", func() bool { return len(kafkatest.Landed(t, lakeDir)) > 0 })

	if out, err := exec.Command(filepath.Join(infra, "stop.sh"), "s3").CombinedOutput(); err != nil {
		t.Fatalf("stopping the S3 server: %v\n%s", err, out)
	}
	time.Sleep(10 * time.Second)
	if out, err := exec.Command(filepath.Join(infra, "start.sh"), "s3").CombinedOutput(); err != nil {
		t.Fatalf("starting the S3 server: %v\n%s", err, out)
	}
	waitFor(t, 2*time.Minute, "the group to commit the end offsets", func() bool {
		committed, ends := kafkatest.Offsets(t, broker, group, topic)
		for p, end := range ends {
			if committed[p] != end {
				return false
			}
		}
		return true
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		log, _ := os.ReadFile(logPath)
		t.Fatalf("cdclake exited with %v after SIGTERM:\n%s", err, log)
	}
	log, _ := os.ReadFile(logPath)
	if n := strings.Count(string(log), "the store fails; retrying"); n < 1 || !strings.Contains(string(log), "the store works again") {
		t.Errorf("want the outage's start and end logged (%d starts):\n%s", n, log)
	}
	refDir := filepath.Join(dir, "ref")
	refURL := fmt.Sprintf("kafka://%s/%s?group=ref-%s", broker, topic, topic)
	if out, err := exec.Command(bin, "run", "--metrics-addr", "127.0.0.1:0", "--until-caught-up", "--source", refURL, "--sink", refDir).CombinedOutput(); err != nil {
		t.Fatalf("the reference run failed: %v\n%s", err, out)
	}
	kafkatest.SameOnce(t, "across the outage", kafkatest.Landed(t, lakeDir), kafkatest.Landed(t, refDir))
}

func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", limit, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q is not a positive number", name, v)
	}
	return n
}
