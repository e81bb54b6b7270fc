package pipelines

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cdclake/cdclake/config"
	"github.com/cdclake/cdclake/pipelines/source"
	"github.com/cdclake/cdclake/sinks/lake"
)

// behind is a source with a backlog, which never delivers.
type behind struct {
	source.Source
	backlog int64
}

func (b behind) Backlog() int64 { return b.backlog }

// TestStuckAndAlive: the progress check fails once nothing became durable
// for stuck_after flush intervals while something is left to read, and
// holds while nothing is pending; liveness follows the loop's heartbeat
// unless the store is failing.
func TestStuckAndAlive(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(file, []byte("defaults:\n  max_age: 1m\nroutes:\n  - match: A.*\n    max_age: 2m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if plan.FlushInterval() != 2*time.Minute {
		t.Fatalf("flush interval %s, want the longest max_age, 2m", plan.FlushInterval())
	}
	bucket, err := lake.OpenBucket(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	src := &behind{Source: source.NewReader("in", strings.NewReader(""), 1, 1<<10)}
	p, err := New(plan, src, bucket, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	p.durable.watch(7, now.Add(-5*time.Minute))
	if err := p.stuck(now); err != nil {
		t.Errorf("nothing pending, yet stuck: %v", err)
	}
	src.backlog = 42
	if err := p.stuck(now); err != nil {
		t.Errorf("5 minutes without progress, under 3 × 2m: %v", err)
	}
	if err := p.stuck(now.Add(2 * time.Minute)); err == nil || !strings.Contains(err.Error(), "nothing became durable for 7m0s") {
		t.Errorf("7 minutes without progress: %v", err)
	}
	p.durable.watch(8, now.Add(2*time.Minute))
	if err := p.stuck(now.Add(3 * time.Minute)); err != nil {
		t.Errorf("just after progress: %v", err)
	}

	h := p.Health(time.Second)
	if err := h.Live(); err != nil {
		t.Errorf("a new pipeline is not alive: %v", err)
	}
	p.beat.Store(now.Add(-3 * time.Minute).UnixNano())
	if err := h.Live(); err == nil {
		t.Error("alive with a loop that stopped three minutes ago")
	}
	if err := p.sinkReady(context.Background()); err != nil {
		t.Errorf("a mem:// bucket is not ready: %v", err)
	}
	results, ok := h.Ready(context.Background())
	if ok || len(results) != 2 || results[0].Name != "sink" || results[1].Name != "progress" {
		t.Errorf("readiness before the first probe: %v %v", ok, results)
	}
}
