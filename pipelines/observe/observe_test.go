package observe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cdclake/cdclake/config/secrets"
	"github.com/prometheus/client_golang/prometheus"
)

func TestLogsAreOneLinePerEventWithoutSecrets(t *testing.T) {
	t.Setenv("CDCLAKE_TEST_LOG_SECRET", "pa55-w0rd-from-env")
	if _, err := secrets.Read("k", "CDCLAKE_TEST_LOG_SECRET", "", ""); err != nil {
		t.Fatal(err)
	}
	joined := errors.Join(errors.New("first: pa55-w0rd-from-env"), errors.New("second"))
	for _, format := range []string{"json", "text"} {
		var buf bytes.Buffer
		log := NewLogger(&buf, slog.LevelInfo, format)
		log.Info("connecting pa55-w0rd-from-env", "url", "kafka://u:pw@broker:9092/t", "err", joined,
			"partitions", []string{"a/1", "s3://x?token=abc"}, "n", 3)
		log.Debug("not shown")
		out := buf.String()
		if strings.Count(out, "\n") != 1 {
			t.Errorf("%s: want one line:\n%s", format, out)
		}
		for _, secret := range []string{"pa55-w0rd", "u:pw@", "token=abc"} {
			if strings.Contains(out, secret) {
				t.Errorf("%s: %q in the log:\n%s", format, secret, out)
			}
		}
		if format == "json" {
			var line map[string]any
			if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, out)
			}
			errs, ok := line["err"].([]any)
			if !ok || len(errs) != 2 || errs[1] != "second" {
				t.Errorf("a joined error is not an array of its lines: %#v", line["err"])
			}
			if line["n"] != 3.0 || line["msg"] != "connecting "+secrets.Placeholder {
				t.Errorf("line %v", line)
			}
		} else if !strings.Contains(out, `err="first: [REDACTED]; second"`) {
			t.Errorf("text: a joined error is not its lines joined:\n%s", out)
		}
	}
	if got := Lines(fmt.Errorf("x: %w", joined)); len(got) != 2 || got[0] != "x: first: "+secrets.Placeholder {
		t.Errorf("Lines = %q", got)
	}
}

func TestHealthAndServer(t *testing.T) {
	var alive, sinkDown atomic.Bool
	alive.Store(true)
	probes := atomic.Int64{}
	h := NewHealth(func() error {
		if !alive.Load() {
			return errors.New("the loop stopped")
		}
		return nil
	}, 20*time.Millisecond,
		Check{Name: "sink", Probe: true, Run: func(ctx context.Context) error {
			probes.Add(1)
			if sinkDown.Load() {
				return errors.New("connection refused")
			}
			return nil
		}},
		Check{Name: "progress", Run: func(context.Context) error { return nil }})
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "cdclake_test_total", Help: "A test."}))
	srv, err := Listen("127.0.0.1:0", reg, h, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	defer srv.Close()
	if _, err := Listen(srv.Addr().String(), reg, h, slog.New(slog.DiscardHandler)); err == nil {
		t.Error("a second endpoint on the same address was opened")
	}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + srv.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "sink: failed: not checked yet") {
		t.Errorf("before the first probe: %d %q", code, body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor := func(what, path string, code int, in string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			c, body := get(path)
			if c == code && strings.Contains(body, in) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s answers %d %q", what, path, c, body)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("ready", "/readyz", 200, "sink: ok\nprogress: ok\n")
	sinkDown.Store(true)
	waitFor("the sink down", "/readyz", 503, "sink: failed: connection refused\nprogress: ok\n")
	sinkDown.Store(false)
	waitFor("the sink back", "/readyz", 200, "sink: ok")
	waitFor("alive", "/healthz", 200, "ok")
	alive.Store(false)
	waitFor("the loop stopped", "/healthz", 503, "not alive: the loop stopped")
	waitFor("metrics", "/metrics", 200, "cdclake_test_total 0")
	if probes.Load() < 3 {
		t.Errorf("%d probes", probes.Load())
	}
}
