package pipelines

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cdclake/cdclake/handlers/avro"
	"github.com/cdclake/cdclake/pipelines/observe"
	"github.com/cdclake/cdclake/pipelines/source/kafka"
)

// stalledAfter is how long the pipeline's heartbeat may stop, while the
// store works, before the process counts as not alive.
const stalledAfter = 2 * time.Minute

// Health returns the pipeline's probes (observe.Health), whose connecting
// checks run every interval:
//
//   - alive: the expire loop turned within the last two minutes, or the
//     store is failing (a loop waiting out an outage is not dead);
//   - source: a broker answers and every assigned partition's state was
//     claimed (Kafka);
//   - sink: the store takes writes (no outage in progress) and the
//     bucket is accessible;
//   - registry: the schema registry answers (an HTTP registry);
//   - progress: something became durable within stuck_after flush
//     intervals (the longest max_age), unless nothing is pending (no open
//     file, nothing left to read).
func (p *Pipeline) Health(interval time.Duration) *observe.Health {
	var checks []observe.Check
	if k, ok := p.source.(*kafka.Source); ok {
		checks = append(checks, observe.Check{Name: "source", Probe: true, Run: k.Ready})
	}
	checks = append(checks, observe.Check{Name: "sink", Probe: true, Run: p.sinkReady})
	if codec := p.plan.avro; codec != nil {
		if reg, ok := codec.Registry().(*avro.HTTPRegistry); ok {
			checks = append(checks, observe.Check{Name: "registry", Probe: true, Run: reg.Ping})
		}
	}
	checks = append(checks, observe.Check{Name: "progress", Run: func(context.Context) error { return p.stuck(time.Now()) }})
	return observe.NewHealth(p.alive, interval, checks...)
}

// alive fails when the expire loop stopped turning while the store works.
func (p *Pipeline) alive() error {
	last := time.Unix(0, p.beat.Load())
	if d := time.Since(last); d > stalledAfter && p.sink.Stats().Failing.IsZero() {
		return fmt.Errorf("the pipeline's loop last turned %s ago", d.Round(time.Second))
	}
	return nil
}

// sinkReady fails while the store fails writes or the bucket cannot be
// reached.
func (p *Pipeline) sinkReady(ctx context.Context) error {
	if since := p.sink.Stats().Failing; !since.IsZero() {
		return fmt.Errorf("the store has failed writes for %s (retried up to sink.retry_for)", time.Since(since).Round(time.Second))
	}
	ok, err := p.bucket.IsAccessible(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("the bucket is not accessible")
	}
	return nil
}

// stuck fails when nothing became durable for stuck_after flush intervals
// while data is pending.
func (p *Pipeline) stuck(now time.Time) error {
	open, backlog := p.batcher.OpenFiles(), p.source.Backlog()
	if open == 0 && backlog <= 0 {
		return nil
	}
	limit := time.Duration(p.plan.Config().Observability.StuckAfter) * p.plan.FlushInterval()
	if d := now.Sub(p.durable.at()); d > limit {
		return fmt.Errorf("nothing became durable for %s (observability.stuck_after × the longest max_age: %s) with %d files open and a backlog of %d",
			d.Round(time.Second), limit, open, backlog)
	}
	return nil
}
