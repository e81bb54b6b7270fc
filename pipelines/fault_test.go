package pipelines_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cdclake/cdclake/config"
	"github.com/cdclake/cdclake/pipelines"
	"github.com/cdclake/cdclake/pipelines/source"
)

// TestBatchStagePanic makes the batch stage panic in the middle of blocks
// whose windows three lanes decode, with two partitions landing at once.
// The run must end with the panic as its error, not hang, and leave no
// lane or handler running; what it wrote before must be what a clean run
// writes under the same names, and nothing else.
func TestBatchStagePanic(t *testing.T) {
	blocks := partitionedStream(t, 6000, 12, 2, 1000)
	cleanBucket, _ := landBlocks(t, blocks, pipelines.WithWorkers(2), pipelines.WithLanes(3))

	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Defaults.MaxRows = 300
	cfg.ProgressInterval = 0
	var windows atomic.Int32
	fault := pipelines.WithBatchFault(func() {
		if windows.Add(1) == 75 {
			panic("injected fault")
		}
	})
	p, bucket := newPipeline(t, cfg, source.NewMemory(blocks...), slog.New(slog.NewTextHandler(io.Discard, nil)),
		pipelines.WithWorkers(2), pipelines.WithLanes(3), fault)
	err = runPanicking(t, p, "batch")
	var sp *pipelines.StagePanic
	if !errors.As(err, &sp) || sp.Stage != "batch" || sp.Value != "injected fault" || sp.At.Source == "" ||
		!strings.Contains(err.Error(), "panic in the batch stage at ") {
		t.Fatalf("run error %v, want the injected panic as a StagePanic naming the batch stage and a record", err)
	}
	if s := stacks(); strings.Contains(s, "pipelines.(*Pipeline).partition") || strings.Contains(s, "pipelines.(*Pipeline).runLane") {
		t.Fatalf("stages still running after the run ended:\n%s", s)
	}

	clean := keys(t, cleanBucket)
	var written int
	for _, k := range keys(t, bucket) {
		if !strings.HasSuffix(k, ".parquet") {
			continue
		}
		written++
		if !slices.Contains(clean, k) {
			t.Errorf("%s: not written by a clean run", k)
			continue
		}
		if got, want := rowsOf(t, bucket, k), rowsOf(t, cleanBucket, k); !slices.Equal(got, want) {
			t.Errorf("%s: %d rows, a clean run's %d, or they differ", k, len(got), len(want))
		}
	}
	if written == 0 {
		t.Fatal("no file written before the panic: the fault comes too early to test anything")
	}
}

// runPanicking runs p, which a stage's panic must end within a minute,
// and returns its error.
func runPanicking(t *testing.T, p *pipelines.Pipeline, stage string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background()) }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("the run did not end after a panic in the %s stage:\n%s", stage, stacks())
	}
	return nil
}

// stacks returns every goroutine's stack.
func stacks() string {
	buf := make([]byte, 1<<22)
	return string(buf[:runtime.Stack(buf, true)])
}

// TestLaneStagePanic makes the classify stage panic on a lane: the run
// ends with a StagePanic naming the stage and a record of the block, and
// leaves no lane or handler running.
func TestLaneStagePanic(t *testing.T) {
	blocks := partitionedStream(t, 3000, 6, 2, 500)
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.ProgressInterval = 0
	var windows atomic.Int32
	fault := pipelines.WithStageFault(func(stage string) {
		if stage == "classify" && windows.Add(1) == 20 {
			panic("injected fault")
		}
	})
	p, _ := newPipeline(t, cfg, source.NewMemory(blocks...), slog.New(slog.NewTextHandler(io.Discard, nil)),
		pipelines.WithWorkers(2), pipelines.WithLanes(3), fault)
	err = runPanicking(t, p, "classify")
	var sp *pipelines.StagePanic
	if !errors.As(err, &sp) || sp.Stage != "classify" || sp.Value != "injected fault" || sp.At.Source == "" {
		t.Fatalf("run error %v, want the injected panic as a StagePanic of the classify stage", err)
	}
	// The router may return while another worker's handler finishes its
	// block; the run waits for it (a goroutine may still be returning from
	// the handler for an instant).
	for deadline := time.Now().Add(time.Second); ; time.Sleep(10 * time.Millisecond) {
		s := stacks()
		if !strings.Contains(s, "pipelines.(*Pipeline).partition") && !strings.Contains(s, "pipelines.(*Pipeline).runLane") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stages still running after the run ended:\n%s", s)
		}
	}
}
