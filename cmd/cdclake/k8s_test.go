package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cdclake/cdclake/pipelines/source/kafka/kafkatest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kube runs kubectl against the test cluster of infra/k8s.
type kube struct {
	t       *testing.T
	kubectl string
}

func (k kube) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, k.kubectl, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func (k kube) must(args ...string) string {
	k.t.Helper()
	out, err := k.run(args...)
	if err != nil {
		k.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// logs prints what the cluster knows of cdclake's pods, for a failure.
func (k kube) logs() {
	out, _ := k.run("get", "pods,jobs,statefulsets", "-o", "wide")
	k.t.Logf("objects:\n%s", out)
	out, _ = k.run("get", "events", "--sort-by=.lastTimestamp")
	k.t.Logf("events:\n%s", tail([]byte(out), 30))
	names, _ := k.run("get", "pods", "-o", "name")
	for _, p := range strings.Fields(names) {
		out, _ := k.run("logs", p, "--tail=20")
		k.t.Logf("%s:\n%s", p, out)
	}
}

// TestKubernetes lands a Kafka topic of the real capture with the
// manifests of deploy/kubernetes/e2e on the single-node cluster of
// infra/k8s (make k8s-e2e): the StatefulSet's two pods become Ready and
// serve their metrics on their ports; a pod deleted mid-landing stops on
// the kubelet's SIGTERM and lands what it read; the replicas go from 2 to
// 1; a Job made from the CronJob drains what was produced since, and
// completes; DuckDB then finds every row of the topic in the lake once. The
// pods run as uid 65532 on a read-only root.
func TestKubernetes(t *testing.T) {
	kubectl := os.Getenv("CDCLAKE_TEST_K8S_KUBECTL")
	if kubectl == "" {
		t.Skip("CDCLAKE_TEST_K8S_KUBECTL is not set (make k8s-e2e sets it and starts the cluster)")
	}
	broker := kafkatest.Brokers(t)
	s3URL, s3Dir, py := os.Getenv("CDCLAKE_TEST_S3_URL"), os.Getenv("CDCLAKE_TEST_S3_DIR"), os.Getenv("CDCLAKE_TEST_PYTHON")
	if s3URL == "" || s3Dir == "" || py == "" {
		t.Fatal("CDCLAKE_TEST_S3_URL, CDCLAKE_TEST_S3_DIR and CDCLAKE_TEST_PYTHON are needed")
	}
	k := kube{t: t, kubectl: kubectl}
	defer func() {
		if t.Failed() {
			k.logs()
		}
	}()
	topic := fmt.Sprintf("k8s-%d", time.Now().UnixNano())
	cl := kafkatest.CreateTopic(t, broker, topic, 4)
	defer cl.Close()
	produce := func() int {
		recs, rows := captureRecords(t, topic)
		kafkatest.ProduceRecords(t, cl, recs)
		return rows
	}
	rows := produce()

	prefix := topic
	k.must("create", "configmap", "cdclake-e2e", "--from-literal=E2E_TOPIC="+topic, "--from-literal=E2E_GROUP=g-"+topic,
		"--from-literal=E2E_SINK="+s3URL+"&prefix="+prefix+"/")
	k.must("create", "secret", "generic", "cdclake-credentials", "--from-literal=AWS_ACCESS_KEY_ID="+os.Getenv("AWS_ACCESS_KEY_ID"),
		"--from-literal=AWS_SECRET_ACCESS_KEY="+os.Getenv("AWS_SECRET_ACCESS_KEY"))
	defer func() {
		_, _ = k.run("delete", "-k", filepath.Join("..", "..", "deploy", "kubernetes", "e2e"), "--wait=true", "--timeout=90s")
		_, _ = k.run("delete", "job", "--all", "--wait=true", "--timeout=60s")
		_, _ = k.run("delete", "configmap", "cdclake-e2e")
		_, _ = k.run("delete", "secret", "cdclake-credentials")
	}()
	k.must("apply", "-k", filepath.Join("..", "..", "deploy", "kubernetes", "e2e"))
	k.must("rollout", "status", "statefulset/cdclake", "--timeout=180s")
	k.must("wait", "--for=condition=Ready", "pod/cdclake-0", "pod/cdclake-1", "--timeout=120s")
	t.Log("both pods Ready")

	// Each pod serves its metrics on its own port (1946<index>).
	var landed float64
	waitFor(t, 2*time.Minute, "the first round landed", func() bool {
		landed = 0
		for i := range 2 {
			code, body, err := httpGet("127.0.0.1:"+strconv.Itoa(19460+i), "/metrics")
			if err != nil || code != 200 {
				return false
			}
			m := scrapeText(body)
			if total(m, "cdclake_build_info", `version="e2e"`) != 1 {
				t.Fatalf("pod %d: cdclake_build_info is not the e2e image's", i)
			}
			landed += total(m, "cdclake_rows_landed_total") - total(m, "cdclake_rows_landed_total", `table="_`)
		}
		return int(landed) == rows
	})
	t.Logf("the pods' metrics: %v rows landed", landed)

	// The pods run the image as it is meant to: uid 65532, a read-only root.
	for _, pod := range []string{"cdclake-0", "cdclake-1"} {
		checkProcess(t, pod)
	}

	// A second round, and a pod deleted in the middle of it: the kubelet's
	// SIGTERM, within its grace period, lands what it read.
	logs := filepath.Join(t.TempDir(), "cdclake-1.log")
	logf, err := os.Create(logs)
	if err != nil {
		t.Fatal(err)
	}
	follow := exec.Command(kubectl, "logs", "-f", "cdclake-1")
	follow.Stdout, follow.Stderr = logf, logf
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	read1 := func() float64 {
		_, body, err := httpGet("127.0.0.1:19461", "/metrics")
		if err != nil {
			return -1
		}
		return scrapeText(body)["cdclake_messages_read_total"]
	}
	before := read1()
	// The capture twenty times, each record keyed apart so that every
	// partition gets its share, produced while the pod is deleted.
	var recs []*kgo.Record
	for i := range 20 {
		round, n := captureRecords(t, topic)
		for j, r := range round {
			r.Key = fmt.Appendf(nil, "%d-%d", i, j)
		}
		recs, rows = append(recs, round...), rows+n
	}
	produced := make(chan struct{})
	go func() { defer close(produced); kafkatest.ProduceRecords(t, cl, recs) }()
	waitFor(t, time.Minute, "cdclake-1 to read the second round", func() bool { return read1() > before })
	k.must("delete", "pod", "cdclake-1", "--wait=true", "--timeout=90s")
	<-produced
	_ = follow.Wait()
	logf.Close()
	log, _ := os.ReadFile(logs)
	if !strings.Contains(string(log), "stopped by signal after flushing") {
		t.Errorf("the deleted pod did not stop gracefully:\n%s", tail(log, 20))
	}
	k.must("wait", "--for=condition=Ready", "pod/cdclake-1", "--timeout=120s")
	t.Log("cdclake-1 deleted mid-landing, stopped gracefully, replaced and Ready")

	// 2 → 1, then a third round, drained by a Job made from the CronJob.
	k.must("scale", "statefulset/cdclake", "--replicas=1")
	k.must("wait", "--for=delete", "pod/cdclake-1", "--timeout=90s")
	rows += produce()
	k.must("create", "job", "--from=cronjob/cdclake-drain", "drain-1")
	k.must("wait", "--for=condition=Complete", "job/drain-1", "--timeout=300s")
	jobLog := k.must("logs", "job/drain-1")
	if !strings.Contains(jobLog, "== cdclake summary ==") {
		t.Errorf("the Job's pod printed no summary:\n%s", jobLog)
	}
	t.Log("the Job from the CronJob completed")

	// The last pod stops; the lake holds every row once.
	k.must("scale", "statefulset/cdclake", "--replicas=0")
	k.must("wait", "--for=delete", "pod/cdclake-0", "--timeout=90s")
	lakeDir := filepath.Join(s3Dir, prefix)
	ref := filepath.Join(t.TempDir(), "ref")
	bin := build(t, "github.com/cdclake/cdclake/cmd/cdclake")
	if out, err := exec.Command(bin, "run", "--metrics-addr", "off", "--until-caught-up", "--source",
		fmt.Sprintf("kafka://%s/%s?group=ref-%s", broker, topic, topic), "--sink", ref).CombinedOutput(); err != nil {
		t.Fatalf("the reference run: %v\n%s", err, out)
	}
	kafkatest.SameOnce(t, "landed by the pods", kafkatest.Landed(t, lakeDir), kafkatest.Landed(t, ref))
	script := `import duckdb, glob, sys
files = [f for f in glob.glob(sys.argv[1] + "/**/*.parquet", recursive=True) if "/_" not in f[len(sys.argv[1]):]]
print(*duckdb.sql("SELECT count(*), count(DISTINCT (_cdc_partition, _cdc_offset)) FROM read_parquet(?, union_by_name=true)",
    params=[files]).fetchone())`
	out, err := exec.Command(py, "-c", script, lakeDir).CombinedOutput()
	if err != nil {
		t.Fatalf("DuckDB: %v\n%s", err, out)
	}
	if got, want := strings.TrimSpace(string(out)), fmt.Sprintf("%d %d", rows, rows); got != want {
		t.Errorf("DuckDB: %s rows and distinct positions, want %s", got, want)
	}
	t.Logf("DuckDB: %d rows, each once", rows)
}

// checkProcess finds the cdclake process of a pod on this node and checks
// that it runs as uid 65532 with a read-only root file system.
func checkProcess(t *testing.T, pod string) {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, env := range procs {
		data, err := os.ReadFile(env)
		if err != nil || !bytes.Contains(data, []byte("CDCLAKE_INSTANCE_ID="+pod+"\x00")) {
			continue
		}
		dir := filepath.Dir(env)
		cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		if !bytes.HasPrefix(cmdline, []byte("/cdclake\x00run\x00")) {
			continue
		}
		status, _ := os.ReadFile(filepath.Join(dir, "status"))
		if !strings.Contains(string(status), "\nUid:\t65532\t65532\t65532\t65532\n") {
			t.Errorf("%s: cdclake does not run as 65532:\n%s", pod, status)
		}
		mounts, _ := os.ReadFile(filepath.Join(dir, "mountinfo"))
		for _, line := range strings.Split(string(mounts), "\n") {
			if f := strings.Fields(line); len(f) > 5 && f[4] == "/" {
				if !slices.Contains(strings.Split(f[5], ","), "ro") {
					t.Errorf("%s: the root is mounted %s, not read-only", pod, f[5])
				}
				return
			}
		}
		t.Errorf("%s: no root mount in %s/mountinfo", pod, dir)
		return
	}
	t.Errorf("%s: no cdclake process found on this node", pod)
}
