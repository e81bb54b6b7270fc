package pipelines_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cdclake/cdclake/config"
	"github.com/cdclake/cdclake/handlers/avro"
	"github.com/cdclake/cdclake/internal/syncbuf"
	"github.com/cdclake/cdclake/pipelines"
	"github.com/cdclake/cdclake/pipelines/source"
	hamba "github.com/hamba/avro/v2"
)

// registryURL is a real Confluent-compatible registry's API
// (infra/start.sh registry), or the test is skipped.
func registryURL(t *testing.T) string {
	u := os.Getenv("CDCLAKE_TEST_REGISTRY_URL")
	if u == "" {
		t.Skip("CDCLAKE_TEST_REGISTRY_URL is not set (infra/start.sh registry: http://127.0.0.1:58081/apis/ccompat/v7)")
	}
	return u
}

// register registers an Avro schema under a fresh subject and returns its id.
func register(t *testing.T, base, schema string) int {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"schema": schema})
	subject := fmt.Sprintf("cdclake-test-%d-value", time.Now().UnixNano())
	resp, err := http.Post(base+"/subjects/"+subject+"/versions", "application/vnd.schemaregistry.v1+json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		ID int `json:"id"`
	}
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &out) != nil || out.ID == 0 {
		t.Fatalf("registering %s: %s %s", subject, resp.Status, data)
	}
	return out.ID
}

// outage is a TCP proxy to the registry that can refuse connections, as a
// registry that is down or unreachable does.
type outage struct {
	ln    net.Listener
	down  atomic.Bool
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

func newOutage(t *testing.T, target string) *outage {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &outage{ln: ln}
	o.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if o.down.Load() {
				c.Close()
				continue
			}
			o.wg.Go(func() {
				defer c.Close()
				r, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer r.Close()
				o.mu.Lock()
				o.conns = append(o.conns, c, r)
				o.mu.Unlock()
				go func() { _, _ = io.Copy(r, c); r.Close() }()
				_, _ = io.Copy(c, r)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		// Idle keep-alive connections end with the test.
		o.mu.Lock()
		for _, c := range o.conns {
			c.Close()
		}
		o.mu.Unlock()
		o.wg.Wait()
	})
	return o
}

// TestRegistryOutage lands Avro records through a real schema registry
// that is unreachable at first: the partition waits, nothing is
// dead-lettered for it, and everything lands once the registry answers.
// An id the registry does not know is a dead letter. A stop during an
// outage ends the run with the outage as error and lands nothing.
func TestRegistryOutage(t *testing.T) {
	base := registryURL(t)
	text, err := os.ReadFile("../handlers/avro/testdata/envelope.avsc")
	if err != nil {
		t.Fatal(err)
	}
	id := register(t, base, string(text))
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	schema := hamba.MustParse(string(text))
	values, _ := avroRows()
	recs := []source.Record{
		{Offset: 0, Value: avroFrame(t, schema, id, values[0])},
		{Offset: 1, Value: avroFrame(t, schema, id, values[1])},
		{Offset: 2, Value: avroFrame(t, schema, 1<<30, values[1])},
		{Offset: 3, Value: avroFrame(t, schema, id, values[2])},
	}
	run := func(t *testing.T, stopDuringOutage bool) {
		proxy := newOutage(t, u.Host)
		proxy.down.Store(true)
		cfg, err := config.Load("")
		if err != nil {
			t.Fatal(err)
		}
		cfg.ProgressInterval = 0
		cfg.ShutdownTimeout = config.Duration(time.Second)
		cfg.Source.SchemaRegistry.URL = "http://" + proxy.ln.Addr().String() + u.Path
		cfg.Source.SchemaRegistry.Timeout = config.Duration(2 * time.Second)
		var logs syncbuf.Buffer
		p, bucket := newPipeline(t, cfg, source.NewMemory(&source.Block{Source: "shop.public.orders", Topic: "shop.public.orders", Records: recs}),
			slog.New(slog.NewTextHandler(&logs, nil)))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		deadline := time.Now().Add(20 * time.Second)
		for strings.Count(logs.String(), `msg="schema registry unavailable`) < 2 {
			if time.Now().After(deadline) {
				t.Fatalf("no outage logged:\n%s", logs.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		if stopDuringOutage {
			cancel()
		} else {
			proxy.down.Store(false)
		}
		var runErr error
		select {
		case runErr = <-done:
		case <-time.After(60 * time.Second):
			t.Fatal("the run did not end")
		}
		st := p.Stats()
		if stopDuringOutage {
			if !errors.Is(runErr, avro.ErrUnavailable) {
				t.Errorf("run error %v, want the outage", runErr)
			}
			if n := len(keys(t, bucket)); st.Rows.Load() != 0 || st.DeadLetters.Load() != 0 || n != 0 {
				t.Errorf("stopped during the outage: %d rows, %d dead letters, %d objects", st.Rows.Load(), st.DeadLetters.Load(), n)
			}
			return
		}
		if runErr != nil {
			t.Fatal(runErr)
		}
		if st.Rows.Load() != 3 || st.DeadLetters.Load() != 1 {
			t.Errorf("%d rows, %d dead letters; want 3 and 1", st.Rows.Load(), st.DeadLetters.Load())
		}
		if r := deadReasons(t, bucket); !strings.Contains(r, "unknown Avro schema") || !strings.Contains(r, `"offset":2`) {
			t.Errorf("dead letter: %s", r)
		}
	}
	t.Run("recovers", func(t *testing.T) { run(t, false) })
	t.Run("stopped", func(t *testing.T) { run(t, true) })
}

// TestRegistryTLSAndAuth reaches the real registry through an HTTPS
// gateway that wants basic auth, as registries are often exposed: with
// the gateway's CA and the right password the records land; with a wrong
// password the registry answers 401, which is no fault of the records:
// they wait, and nothing is dead-lettered.
func TestRegistryTLSAndAuth(t *testing.T) {
	base := registryURL(t)
	text, err := os.ReadFile("../handlers/avro/testdata/envelope.avsc")
	if err != nil {
		t.Fatal(err)
	}
	id := register(t, base, string(text))
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	gw := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "cdclake" || p != "s3cret" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error_code":40101,"message":"Unauthorized"}`)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer gw.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: gw.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	schema := hamba.MustParse(string(text))
	values, _ := avroRows()
	recs := []source.Record{{Offset: 0, Value: avroFrame(t, schema, id, values[0])}}
	land := func(password string, wait time.Duration) (*pipelines.Pipeline, string, error) {
		t.Setenv("CDCLAKE_TEST_REGISTRY_PASSWORD", password)
		cfg, err := config.Load("")
		if err != nil {
			t.Fatal(err)
		}
		cfg.ProgressInterval = 0
		cfg.ShutdownTimeout = config.Duration(time.Second)
		cfg.Source.SchemaRegistry = config.SchemaRegistry{URL: gw.URL + target.Path, Username: "cdclake",
			PasswordEnv: "CDCLAKE_TEST_REGISTRY_PASSWORD", CAFile: ca,
			Timeout: config.Duration(5 * time.Second), CacheSize: 16}
		var logs syncbuf.Buffer
		p, _ := newPipeline(t, cfg, source.NewMemory(&source.Block{Source: "shop.public.orders", Topic: "shop.public.orders", Records: recs}),
			slog.New(slog.NewTextHandler(&logs, nil)))
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		err = p.Run(ctx)
		return p, logs.String(), err
	}
	p, logs, err := land("s3cret", time.Minute)
	if err != nil || p.Stats().Rows.Load() != 1 {
		t.Fatalf("with the password: %v, %d rows\n%s", err, p.Stats().Rows.Load(), logs)
	}
	p, logs, err = land("wrong", 2*time.Second)
	if !errors.Is(err, avro.ErrUnavailable) || p.Stats().DeadLetters.Load() != 0 || !strings.Contains(logs, "HTTP 401 from https://") {
		t.Errorf("with a wrong password: %v, %d dead letters\n%s", err, p.Stats().DeadLetters.Load(), logs)
	}
}
