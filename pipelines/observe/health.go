package observe

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Check is one condition of readiness.
type Check struct {
	// Name names it in /readyz and in the cdclake_check_ok metric.
	Name string
	// Run returns nil when the condition holds. A check that connects to
	// something (Probe) must not block longer than its context allows.
	Run func(ctx context.Context) error
	// Probe makes the check run in the background every interval, each
	// run bounded by the interval, and /readyz report its last result; a
	// check that is not a probe runs at every request and must be cheap.
	Probe bool
}

// Health answers the liveness and readiness probes.
//
// Liveness is the live function: it fails when the process's loops stop
// turning, and Kubernetes then restarts it. Readiness is every check:
// the source connected, the sink writable, the registry reachable, the
// run not stuck.
type Health struct {
	live     func() error
	checks   []Check
	interval time.Duration

	mu      sync.Mutex
	results map[string]error // the probes' last results
}

// Result is a check's outcome.
type Result struct {
	Name string
	Err  error
}

// errNotYet is a probe's result before its first run.
var errNotYet = errors.New("not checked yet")

// NewHealth returns the probes of live and checks; probes run every
// interval once Run is called.
func NewHealth(live func() error, interval time.Duration, checks ...Check) *Health {
	h := &Health{live: live, checks: checks, interval: interval, results: map[string]error{}}
	for _, c := range checks {
		if c.Probe {
			h.results[c.Name] = errNotYet
		}
	}
	return h
}

// Run runs the probes at once and then every interval until ctx ends.
func (h *Health) Run(ctx context.Context) {
	t := time.NewTicker(h.interval)
	defer t.Stop()
	for {
		h.probe(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// probe runs every probe once, concurrently, each bounded by the interval.
func (h *Health) probe(ctx context.Context) {
	var wg sync.WaitGroup
	for _, c := range h.checks {
		if !c.Probe {
			continue
		}
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, h.interval)
			defer cancel()
			err := c.Run(pctx)
			if ctx.Err() != nil {
				return // stopping: the last result stands
			}
			h.mu.Lock()
			h.results[c.Name] = err
			h.mu.Unlock()
		})
	}
	wg.Wait()
}

// Live returns nil while the process is alive.
func (h *Health) Live() error {
	if h.live == nil {
		return nil
	}
	return h.live()
}

// Ready returns every check's result, in the order they were given, and
// whether all hold.
func (h *Health) Ready(ctx context.Context) ([]Result, bool) {
	out := make([]Result, 0, len(h.checks))
	ok := true
	for _, c := range h.checks {
		var err error
		if c.Probe {
			h.mu.Lock()
			err = h.results[c.Name]
			h.mu.Unlock()
		} else {
			err = c.Run(ctx)
		}
		ok = ok && err == nil
		out = append(out, Result{Name: c.Name, Err: err})
	}
	return out, ok
}
