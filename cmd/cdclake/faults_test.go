package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cdclake/cdclake/pipelines/source/kafka/kafkatest"
)

// lostReplies is an HTTP proxy in front of the S3 server that forwards
// the first conditional create (If-None-Match: *) of each of the first
// max partition-state keys (and as many Delta log versions) and then drops
// its reply: the object is created, the client sees its connection reset,
// as after a timeout.
type lostReplies struct {
	mu      sync.Mutex
	seen    map[string]bool
	dropped int
	delta   int // of them, Delta log versions
	max     int
}

var errDropped = errors.New("reply dropped")

func (l *lostReplies) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	version := strings.Contains(r.URL.Path, "/_delta_log/") && strings.HasSuffix(r.URL.Path, ".json")
	if err != nil || r.Method != http.MethodPut || r.Header.Get("If-None-Match") != "*" ||
		!strings.Contains(r.URL.Path, "/_cdclake/state/") && !version {
		return resp, err
	}
	l.mu.Lock()
	n := l.dropped - l.delta
	if version {
		n = l.delta
	}
	drop := !l.seen[r.URL.Path] && n < l.max && resp.StatusCode == http.StatusOK
	l.seen[r.URL.Path] = true
	if drop {
		l.dropped++
		if version {
			l.delta++
		}
	}
	l.mu.Unlock()
	if !drop {
		return resp, nil
	}
	resp.Body.Close()
	return nil, errDropped
}

// lossyS3 starts a lostReplies proxy, losing up to max replies, in front
// of the S3 server of the bucket URL s3URL, and returns the bucket's URL
// through it.
func lossyS3(t *testing.T, s3URL string, max int) (string, *lostReplies) {
	t.Helper()
	endpoint := regexp.MustCompile(`endpoint=([^&]+)`).FindStringSubmatch(s3URL)
	if endpoint == nil {
		t.Fatalf("no endpoint in %s", s3URL)
	}
	backend, err := url.Parse(endpoint[1])
	if err != nil {
		t.Fatal(err)
	}
	lost := &lostReplies{seen: map[string]bool{}, max: max}
	proxy := httputil.NewSingleHostReverseProxy(backend)
	proxy.Transport = lost
	proxy.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		if errors.Is(err, errDropped) {
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, herr := hj.Hijack(); herr == nil {
					conn.Close() // the reply never comes
					return
				}
			}
		}
		http.Error(w, err.Error(), http.StatusBadGateway)
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return strings.Replace(s3URL, endpoint[0], "endpoint="+srv.URL, 1), lost
}

func (l *lostReplies) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dropped
}

// versions returns how many of the lost replies were Delta log versions'.
func (l *lostReplies) versions() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.delta
}

// TestKafkaLostReply lands a topic into the S3 server through a proxy that
// loses the reply of the first create of 20 partition states: each create
// succeeded, and its retry (the SDK's or cdclake's) finds the object there.
// The instance must recognise its own state and land on, not take itself
// for fenced: the run ends 0 with every row once.
func TestKafkaLostReply(t *testing.T) {
	broker := kafkatest.Brokers(t)
	s3URL, s3Dir := os.Getenv("CDCLAKE_TEST_S3_URL"), os.Getenv("CDCLAKE_TEST_S3_DIR")
	if s3URL == "" || s3Dir == "" {
		t.Skip("CDCLAKE_TEST_S3_URL and CDCLAKE_TEST_S3_DIR are not set (make e2e sets them)")
	}
	sink, lost := lossyS3(t, s3URL, 20)

	bin := build(t, "github.com/cdclake/cdclake/cmd/cdclake")
	topic := kafkatest.Topic(t, broker, 3, 3000, 71)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "cdclake.yaml")
	if err := os.WriteFile(cfg, []byte("progress_interval: 0s\ndefaults:\n  max_rows: 200\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	prefix := "lost-" + topic
	out, err := exec.Command(bin, "run", "--metrics-addr", "off", "--until-caught-up", "--config", cfg,
		"--source", fmt.Sprintf("kafka://%s/%s?group=g-%s&commit_interval=300ms", broker, topic, topic),
		"--sink", sink+"&prefix="+prefix+"/").CombinedOutput()
	if err != nil {
		t.Fatalf("the run across lost replies: %v\n%s", err, tail(out, 30))
	}
	if n := lost.count(); n < 10 {
		t.Fatalf("the proxy lost %d replies, want at least 10: the test proves nothing", n)
	}
	if !strings.Contains(string(out), "a create found its own object") {
		t.Errorf("no create found its own object:\n%s", tail(out, 30))
	}
	// A lost reply of a claim's state made the claim fail, the client drop
	// every partition and the group rebalance, again and again.
	for _, storm := range []string{"partitions lost", "could not claim", "another instance took it over"} {
		if strings.Contains(string(out), storm) {
			t.Errorf("%q: a lost reply was taken for another instance's state:\n%s", storm, tail(out, 30))
		}
	}
	refDir := filepath.Join(dir, "ref")
	if out, err := exec.Command(bin, "run", "--metrics-addr", "off", "--until-caught-up", "--source",
		fmt.Sprintf("kafka://%s/%s?group=ref-%s", broker, topic, topic), "--sink", refDir).CombinedOutput(); err != nil {
		t.Fatalf("the reference run: %v\n%s", err, out)
	}
	kafkatest.SameOnce(t, "across lost replies", kafkatest.Landed(t, filepath.Join(s3Dir, prefix)), kafkatest.Landed(t, refDir))
	t.Logf("%d replies of state creates lost; every row once", lost.count())
}

// TestKafkaStoreIgnoringConditions: a store that answers a conditional
// create of an existing object with success (it ignores If-None-Match) is
// refused at start, before anything is read: on it two owners of a
// partition would write on, one over the other.
func TestKafkaStoreIgnoringConditions(t *testing.T) {
	broker := kafkatest.Brokers(t)
	s3URL := os.Getenv("CDCLAKE_TEST_S3_URL")
	if s3URL == "" {
		t.Skip("CDCLAKE_TEST_S3_URL is not set (make e2e sets it)")
	}
	endpoint := regexp.MustCompile(`endpoint=([^&]+)`).FindStringSubmatch(s3URL)
	backend, err := url.Parse(endpoint[1])
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(backend)
	proxy.ModifyResponse = func(r *http.Response) error {
		if r.StatusCode == http.StatusPreconditionFailed {
			r.StatusCode, r.Status = http.StatusOK, "200 OK"
			r.Body, r.ContentLength = http.NoBody, 0
			r.Header.Del("Content-Length")
		}
		return nil
	}
	srv := httptest.NewServer(proxy)
	defer srv.Close()
	sink := strings.Replace(s3URL, endpoint[0], "endpoint="+srv.URL, 1)
	bin := build(t, "github.com/cdclake/cdclake/cmd/cdclake")
	topic := kafkatest.Topic(t, broker, 1, 100, 72)
	out, err := exec.Command(bin, "run", "--metrics-addr", "off", "--until-caught-up",
		"--source", fmt.Sprintf("kafka://%s/%s?group=g-%s", broker, topic, topic),
		"--sink", sink+"&prefix=careless-"+topic+"/").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitFailed || !strings.Contains(string(out), "ignores create-once writes") {
		t.Fatalf("a store ignoring If-None-Match: %v\n%s", err, tail(out, 20))
	}
}

// TestKafkaOneProcessPerFileLake: a second process landing from Kafka into
// a file:// lake another one lands into is refused at its start.
func TestKafkaOneProcessPerFileLake(t *testing.T) {
	broker := kafkatest.Brokers(t)
	bin := build(t, "github.com/cdclake/cdclake/cmd/cdclake")
	topic := kafkatest.Topic(t, broker, 2, 500, 73)
	lakeDir := t.TempDir()
	first := exec.Command(bin, "run", "--metrics-addr", "off", "--source",
		fmt.Sprintf("kafka://%s/%s?group=g-%s", broker, topic, topic), "--sink", lakeDir)
	var log strings.Builder
	first.Stdout, first.Stderr = &log, &log
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Process.Kill(); _ = first.Wait() }()
	waitFor(t, time.Minute, "the first process to land", func() bool {
		files, _ := filepath.Glob(filepath.Join(lakeDir, "*", "*", "*.parquet"))
		return len(files) > 0
	})
	out, err := exec.Command(bin, "run", "--metrics-addr", "off", "--until-caught-up", "--source",
		fmt.Sprintf("kafka://%s/%s?group=g2-%s", broker, topic, topic), "--sink", lakeDir).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitFailed || !strings.Contains(string(out), "another process lands into") {
		t.Fatalf("a second process on the lake: %v\n%s", err, tail(out, 20))
	}
}
