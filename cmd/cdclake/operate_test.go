package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cdclake/cdclake/pipelines/source/kafka/kafkatest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// operations is what the operability tests need of make e2e's services.
type operations struct {
	broker, secure, ca, s3URL, s3Dir, infra, registry, python string
}

func needOperations(t *testing.T) operations {
	t.Helper()
	o := operations{broker: kafkatest.Brokers(t), secure: os.Getenv("CDCLAKE_TEST_KAFKA_SASL_SSL"), ca: os.Getenv("CDCLAKE_TEST_KAFKA_CA"),
		s3URL: os.Getenv("CDCLAKE_TEST_S3_URL"), s3Dir: os.Getenv("CDCLAKE_TEST_S3_DIR"), infra: os.Getenv("CDCLAKE_TEST_INFRA"),
		registry: os.Getenv("CDCLAKE_TEST_REGISTRY_URL"), python: os.Getenv("CDCLAKE_TEST_PYTHON")}
	if o.secure == "" || o.ca == "" || o.s3URL == "" || o.s3Dir == "" || o.infra == "" || o.registry == "" || o.python == "" {
		t.Skip("the SASL_SSL listener, the S3 server, the registry and DuckDB of make e2e are needed (it sets CDCLAKE_TEST_*)")
	}
	return o
}

// scramUser creates a SCRAM-SHA-512 user with a new password.
func scramUser(t *testing.T, broker, user string) string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	password := fmt.Sprintf("scram-%d-secret", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := kadm.NewClient(cl).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: user, Mechanism: kadm.ScramSha512, Iterations: 8192, Password: password}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("creating the SCRAM user: %v", err)
	}
	return password
}

// captureRecords returns the committed capture of the real PostgreSQL
// connector's topics (testdata/debezium-real/shop.*) as records keyed by
// their topic, and how many of them are row changes.
func captureRecords(t *testing.T, topic string) ([]*kgo.Record, int) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "debezium-real", "shop.*.ndjson"))
	if err != nil || len(files) < 5 {
		t.Fatalf("the capture: %v (%d files)", err, len(files))
	}
	op := regexp.MustCompile(`"op":"[cudrt]"`)
	var recs []*kgo.Record
	rows := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(filepath.Base(f)), Value: []byte(line)})
			if op.MatchString(line) {
				rows++
			}
		}
	}
	return recs, rows
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// probeClient gives up as a Kubernetes probe would, not after minutes.
var probeClient = &http.Client{Timeout: 5 * time.Second}

func httpGet(addr, path string) (int, string, error) {
	resp, err := probeClient.Get("http://" + addr + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

var sample = regexp.MustCompile(`^([a-z_:]+)(\{[^}]*\})? ([-+0-9.eE]+|NaN|\+Inf|-Inf)$`)

// scrapeText parses the text exposition format: name{labels} → value.
func scrapeText(body string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		m := sample.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err == nil {
			out[m[1]+m[2]] = v
		}
	}
	return out
}

// total adds the samples of name whose labels contain every part of with.
func total(m map[string]float64, name string, with ...string) float64 {
	var n float64
	for k, v := range m {
		if k != name && !strings.HasPrefix(k, name+"{") {
			continue
		}
		keep := true
		for _, w := range with {
			keep = keep && strings.Contains(k, w)
		}
		if keep {
			n += v
		}
	}
	return n
}

// TestKafkaOperability lands the real capture from Kafka through SASL_SSL
// into S3, as a long-running instance with its metrics endpoint, and
// scrapes it: the counters follow the landing (rows landed equal the
// capture's row changes and what DuckDB reads back, the lag reaches 0,
// files by cause add up to files written); /readyz turns not ready within
// its window when the S3 server stops, and ready when it is back; no
// configured secret appears in any log line, metric or probe answer.
func TestKafkaOperability(t *testing.T) {
	o := needOperations(t)
	bin := build(t, "github.com/cdclake/cdclake/cmd/cdclake")
	kafkaPassword := scramUser(t, o.broker, "cdclake-ops")
	registryPassword := fmt.Sprintf("registry-%d-secret", time.Now().UnixNano())
	awsSecret := os.Getenv("AWS_SECRET_ACCESS_KEY")
	if len(awsSecret) < 4 {
		t.Fatal("AWS_SECRET_ACCESS_KEY is not set")
	}
	secretsToFind := map[string]string{"the SASL password": kafkaPassword, "the registry password": registryPassword,
		"the S3 secret key": awsSecret}

	topic := fmt.Sprintf("ops-%d", time.Now().UnixNano())
	cl := kafkatest.CreateTopic(t, o.broker, topic, 3)
	defer cl.Close()
	recs, rows := captureRecords(t, topic)
	kafkatest.ProduceRecords(t, cl, recs)

	dir := t.TempDir()
	addr := freeAddr(t)
	prefix := topic
	cfg := filepath.Join(dir, "cdclake.yaml")
	yaml := fmt.Sprintf(`source:
  kafka:
    brokers: ["${OPS_BROKER}"]
    topics: [%s]
    group: g-%s
    commit_interval: 1s
    tls:
      ca_file: %s
    sasl:
      mechanism: SCRAM-SHA-512
      username: cdclake-ops
      password_env: OPS_KAFKA_PASSWORD
  schema_registry:
    url: %s
    username: cdclake
    password_env: OPS_REGISTRY_PASSWORD
sink:
  url: "%s&prefix=%s/"
  retry_for: 10m
defaults:
  max_rows: 40
  max_age: 1s
observability:
  listen: %s
  check_interval: 1s
log:
  format: json
progress_interval: 1s
`, topic, topic, o.ca, o.registry, o.s3URL, prefix, addr)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "cdclake.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "run", "--config", cfg)
	cmd.Env = append(os.Environ(), "OPS_BROKER="+o.secure, "OPS_KAFKA_PASSWORD="+kafkaPassword, "OPS_REGISTRY_PASSWORD="+registryPassword)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		// A failure with the S3 server stopped must not leave it so.
		_ = exec.Command(filepath.Join(o.infra, "start.sh"), "s3").Run()
	}()
	var answers []string // every body the endpoint gave, searched for secrets below
	get := func(path string) (int, string) {
		code, body, err := httpGet(addr, path)
		if err == nil {
			answers = append(answers, body)
		}
		return code, body
	}
	waitUntil := func(limit time.Duration, what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(limit)
		for !cond() {
			select {
			case err := <-exited:
				log, _ := os.ReadFile(logPath)
				t.Fatalf("cdclake exited (%v) while waiting for %s:\n%s", err, what, log)
			default:
			}
			if time.Now().After(deadline) {
				log, _ := os.ReadFile(logPath)
				t.Fatalf("waited %s for %s; the log:\n%s", limit, what, tail(log, 40))
			}
			time.Sleep(250 * time.Millisecond)
		}
	}

	// The counters follow the landing until every row is landed and
	// committed.
	var m map[string]float64
	landedAll := func(rows int) func() bool {
		return func() bool {
			code, body := get("/metrics")
			if code != 200 {
				return false
			}
			m = scrapeText(body)
			lags := 0
			for k, v := range m {
				if strings.HasPrefix(k, "cdclake_kafka_lag_records{") {
					lags++
					if v != 0 {
						return false
					}
				}
			}
			landed := total(m, "cdclake_rows_landed_total") - total(m, "cdclake_rows_landed_total", `table="_`)
			return lags == 3 && int(landed) == rows && m["cdclake_open_files"] == 0
		}
	}
	waitUntil(3*time.Minute, "every row landed and the lag at 0", landedAll(rows))
	files := total(m, "cdclake_table_files_written_total")
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"messages read", m["cdclake_messages_read_total"], float64(len(recs))}, // the first round
		{"row changes decoded", m[`cdclake_events_total{kind="dml"}`], float64(rows)},
		{"files by cause = files written", total(m, "cdclake_files_written_total"), files},
		{"file sizes observed", m["cdclake_file_size_bytes_count"], files},
		{"dead letters", total(m, "cdclake_dead_letters_total"), 0},
		{"partitions claimed", m[`cdclake_kafka_partitions_total{event="claimed"}`], 3},
		{"partitions assigned now", m["cdclake_kafka_assigned_partitions"], 3},
		{"buffered bytes", m["cdclake_buffered_bytes"], 0},
		{"store failing", m["cdclake_store_failing"], 0},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
	if files < 5 || m[`cdclake_files_written_total{cause="rows"}`] == 0 || m[`cdclake_files_written_total{cause="age"}`] == 0 {
		t.Errorf("files: %v written, by rows %v, by age %v", files, m[`cdclake_files_written_total{cause="rows"}`], m[`cdclake_files_written_total{cause="age"}`])
	}
	if m[`cdclake_state_writes_total{result="ok"}`] == 0 || m["cdclake_state_write_seconds_count"] == 0 {
		t.Errorf("state writes: %v ok, %v timed", m[`cdclake_state_writes_total{result="ok"}`], m["cdclake_state_write_seconds_count"])
	}
	commits := 0
	for k, v := range m {
		if strings.HasPrefix(k, "cdclake_kafka_last_commit_timestamp_seconds{") && v > float64(time.Now().Add(-time.Hour).Unix()) {
			commits++
		}
	}
	if commits != 3 || total(m, "cdclake_build_info") != 1 || m["process_resident_memory_bytes"] == 0 {
		t.Errorf("%d partitions with a commit time, build info %v, RSS %v", commits, total(m, "cdclake_build_info"),
			m["process_resident_memory_bytes"])
	}
	waitUntil(30*time.Second, "ready", func() bool {
		code, body := get("/readyz")
		return code == 200 && strings.Contains(body, "source: ok") && strings.Contains(body, "sink: ok") &&
			strings.Contains(body, "registry: ok") && strings.Contains(body, "progress: ok")
	})
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz answers %d", code)
	}

	// The S3 server stops while the capture comes again: not ready within
	// a few check intervals, the writes retried; back: ready again, and
	// every row landed once.
	if out, err := exec.Command(filepath.Join(o.infra, "stop.sh"), "s3").CombinedOutput(); err != nil {
		t.Fatalf("stopping the S3 server: %v\n%s", err, out)
	}
	stopped := time.Now()
	again, _ := captureRecords(t, topic)
	kafkatest.ProduceRecords(t, cl, again)
	waitUntil(20*time.Second, "not ready with the S3 server stopped", func() bool {
		code, body := get("/readyz")
		return code == 503 && strings.Contains(body, "sink: failed")
	})
	t.Logf("not ready %s after the S3 server stopped", time.Since(stopped).Round(100*time.Millisecond))
	waitUntil(30*time.Second, "the writes to fail", func() bool {
		code, body := get("/metrics")
		return code == 200 && scrapeText(body)["cdclake_store_failing"] == 1
	})
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz answers %d while the store is down: a restart would not help", code)
	}
	if out, err := exec.Command(filepath.Join(o.infra, "start.sh"), "s3").CombinedOutput(); err != nil {
		t.Fatalf("starting the S3 server: %v\n%s", err, out)
	}
	started := time.Now()
	waitUntil(60*time.Second, "ready with the S3 server back", func() bool {
		code, _ := get("/readyz")
		return code == 200
	})
	t.Logf("ready %s after the S3 server started", time.Since(started).Round(100*time.Millisecond))
	waitUntil(3*time.Minute, "every row of both rounds landed", landedAll(2*rows))
	if total(m, "cdclake_store_errors_total") == 0 || m["cdclake_store_retries_total"] == 0 || m["cdclake_store_outage_seconds_total"] == 0 {
		t.Errorf("the outage is not in the metrics: %v errors, %v retries, %v s", total(m, "cdclake_store_errors_total"),
			m["cdclake_store_retries_total"], m["cdclake_store_outage_seconds_total"])
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			log, _ := os.ReadFile(logPath)
			t.Fatalf("cdclake exited with %v after SIGTERM:\n%s", err, tail(log, 40))
		}
	case <-time.After(time.Minute):
		t.Fatal("cdclake did not exit within a minute of SIGTERM")
	}

	// DuckDB reads back what the metrics say landed.
	script := `import duckdb, glob, sys
files = [f for f in glob.glob(sys.argv[1] + "/**/*.parquet", recursive=True) if "/_" not in f[len(sys.argv[1]):]]
print(duckdb.sql("SELECT count(*) FROM read_parquet(?, union_by_name=true)", params=[files]).fetchone()[0])`
	out, err := exec.Command(o.python, "-c", script, filepath.Join(o.s3Dir, prefix)).CombinedOutput()
	if err != nil {
		t.Fatalf("DuckDB: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != strconv.Itoa(2*rows) {
		t.Errorf("DuckDB reads %s rows, the capture (twice) has %d row changes", got, 2*rows)
	}

	// One JSON object per line, and no secret anywhere.
	log, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(log)))
	lines := 0
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "== cdclake summary ==") {
			break // the summary on stdout follows the log
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Errorf("a log line is not a JSON object: %q", line)
		}
		lines++
	}
	if lines < 5 || !strings.Contains(string(log), `"msg":"the store fails; retrying"`) {
		t.Errorf("%d JSON lines; the outage logged: %v", lines, strings.Contains(string(log), "the store fails"))
	}
	for what, secret := range secretsToFind {
		if strings.Contains(string(log), secret) {
			t.Errorf("%s is in the log", what)
		}
		for _, a := range answers {
			if strings.Contains(a, secret) {
				t.Errorf("%s is in an answer of the metrics endpoint", what)
				break
			}
		}
	}
}

// TestKafkaDeadLetterStatus: a CronJob-style run (--until-caught-up) over
// a topic with bad records exits with status 4 when they are more than
// sink.max_dead_letters, 0 when they are not; both land every good row.
func TestKafkaDeadLetterStatus(t *testing.T) {
	broker := kafkatest.Brokers(t)
	bin := build(t, "github.com/cdclake/cdclake/cmd/cdclake")
	topic := kafkatest.Topic(t, broker, 2, 1500, 61)
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	bad := []string{"not JSON", `{"schema":{"type":"struct"},"payload":`, "\x00\x00\x00\x00\x07avro", `{"truncated":`, "{}{}"}
	var recs []*kgo.Record
	for i, v := range bad {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte(v)})
	}
	kafkatest.ProduceRecords(t, cl, recs)
	cl.Close()
	ref := filepath.Join(t.TempDir(), "ref")
	if out, err := exec.Command(bin, "run", "--metrics-addr", "off", "--until-caught-up", "--source",
		fmt.Sprintf("kafka://%s/%s?group=ref-%s", broker, topic, topic), "--sink", ref).CombinedOutput(); err != nil {
		t.Fatalf("the reference run: %v\n%s", err, out)
	}
	want := kafkatest.Landed(t, ref)
	for _, c := range []struct {
		limit  string
		status int
	}{{"4", exitDeadLetters}, {"5", exitOK}, {"0.01", exitOK}, {"0.001", exitDeadLetters}} {
		t.Run("max_dead_letters "+c.limit, func(t *testing.T) {
			dir := t.TempDir()
			cfg := filepath.Join(dir, "c.yaml")
			if err := os.WriteFile(cfg, []byte("sink:\n  max_dead_letters: "+c.limit+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			lakeDir := filepath.Join(dir, "lake")
			cmd := exec.Command(bin, "run", "--metrics-addr", "off", "--until-caught-up", "--config", cfg, "--source",
				fmt.Sprintf("kafka://%s/%s?group=g-%s-%s", broker, topic, topic, c.limit), "--sink", lakeDir)
			out, err := cmd.CombinedOutput()
			status := 0
			if ee, ok := err.(*exec.ExitError); ok {
				status = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if status != c.status {
				t.Fatalf("exit status %d, want %d:\n%s", status, c.status, tail(out, 30))
			}
			if !strings.Contains(string(out), "dead letters 5: ") || strings.Count(string(out), "dead letter: the first of its kind") < 2 {
				t.Errorf("the summary and the warnings do not tell the dead letters:\n%s", tail(out, 30))
			}
			kafkatest.SameOnce(t, "with dead letters", kafkatest.Landed(t, lakeDir), want)
			dead, _ := filepath.Glob(filepath.Join(lakeDir, "_dead_letter", "*.ndjson"))
			if len(dead) != len(bad) {
				t.Errorf("%d dead letters in the lake, want %d", len(dead), len(bad))
			}
		})
	}
}

// TestValidateCheckConnections: validate --check-connections reaches the
// broker, the registry and the bucket, where a second create of its probe
// is refused; a topic that does not exist, a registry that does not
// answer and a bucket that does not exist are each a problem.
func TestValidateCheckConnections(t *testing.T) {
	o := needOperations(t)
	topic := kafkatest.Empty(t, o.broker, 1)
	dir := t.TempDir()
	write := func(name, yaml string) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	good := write("good.yaml", fmt.Sprintf("source:\n  url: kafka://%s/%s?group=g\n  schema_registry:\n    url: %s\nsink:\n  url: \"%s&prefix=validate/\"\n",
		o.broker, topic, o.registry, o.s3URL))
	if rc, out, errs := inProcess("validate", good, "--check-connections"); rc != exitOK || !strings.Contains(out, "every connection works") {
		t.Errorf("validate --check-connections: %d\n%s%s", rc, out, errs)
	}
	probes, _ := filepath.Glob(filepath.Join(o.s3Dir, "validate", "_cdclake", "probe", "*"))
	if len(probes) != 0 {
		t.Errorf("probe objects left behind: %v", probes)
	}
	bad := write("bad.yaml", fmt.Sprintf("source:\n  url: kafka://%s/%s-missing?group=g\n  schema_registry:\n    url: http://127.0.0.1:1/\n"+
		"sink:\n  url: \"%s\"\n", o.broker, topic, strings.Replace(o.s3URL, "s3://scratch?", "s3://no-such-bucket?", 1)))
	rc, out, errs := inProcess("validate", bad, "--check-connections")
	if rc != exitFailed {
		t.Fatalf("validate --check-connections of unreachable things: %d\n%s%s", rc, out, errs)
	}
	p := problems(errs)
	for _, want := range []string{`source: topic "` + topic + `-missing" does not exist`, "source.schema_registry: ", "sink: "} {
		if !slices.ContainsFunc(p, func(s string) bool { return strings.HasPrefix(s, want) }) {
			t.Errorf("no problem starting %q in:\n%s", want, errs)
		}
	}
}
