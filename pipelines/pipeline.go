// Package pipelines composes the stages into a watermill router and owns
// its goroutines and shutdown.
//
// # How a block travels
//
// A source (package source) delivers blocks of consecutive records of one
// source partition, one watermill message per block. The router's "land"
// handler chains the stages as handler middleware, each a pass over a
// window of the block's records:
//
//	Recoverer            (router middleware) a panic nacks the block
//	partition            takes the partition's lock and a free worker
//	unwrap               tombstones, CloudEvents, Kafka Connect envelopes
//	classify             format detection, decoding, table filter
//	batch                (the handler) in record order: schema records
//	                     observed, table versions resolved, rows to the
//	                     batcher, the block's dead letters written; then
//	                     the block is acked
//
// A record that fails a stage is marked dead with its stage and reason;
// later stages skip it and the batch stage writes it to the dead letters,
// in order with the rows. A storage failure stops the run, and so does a
// panic in the batch stage: the batcher's buffers are then not known to be
// whole, so no open file is written, and what was not written is read
// again by the next run. A panic in unwrap or classify nacks the block. A
// panic on one of the batcher's own goroutines (converting, encoding or
// writing files) ends the process, which the next run recovers from as
// from any crash.
//
// # Concurrency
//
// A source may deliver blocks of different partitions at once, never two
// of one partition (source.Source). Each block is handled by one worker at
// a time, and there are GOMAXPROCS workers unless WithWorkers says
// otherwise. A partition's lock keeps its blocks in order even if a source
// broke that rule. Within a block, unwrap and classify run on the
// worker's lanes (GOMAXPROCS of them, at most 4, or WithLanes), each a
// goroutine that owns what those stages reuse between records (parse
// arenas, decoders, the Kafka Connect schema cache) and takes every
// lanes-th window of 64 records; the batch stage takes the finished
// windows back in record order on a goroutine of its own, so that a
// single partition keeps every core busy. Resolving is in the batch stage
// because a table's version depends on every schema-bearing record
// before it; the window's consecutive rows then go to the batcher as one
// run (batch.Batcher.AddRun), which converts the rows of different files
// on a goroutine per core. Workers share only the Resolver and the
// Batcher, both safe for concurrent use, and the counters.
//
// # Acknowledgement
//
// A block is acked when every record was handed to the batcher or
// dead-lettered and its dead letters are written. Durability is reported
// separately by the batcher: the offset below which everything is in
// written files (batch.Batcher.Durable).
package pipelines

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/handlers/batch"
	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/resolve"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/cdclake/cdclake/pipelines/source"
	"github.com/cdclake/cdclake/pipelines/source/kafka"
	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/deadletter"
	"github.com/cdclake/cdclake/sinks/deadletter/topic"
	"github.com/cdclake/cdclake/sinks/lake"
	"github.com/cdclake/cdclake/sinks/lakehouse"
	"github.com/cdclake/cdclake/sinks/parquet"
	"github.com/cdclake/cdclake/sinks/state"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fastjson"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
	"golang.org/x/sync/errgroup"
)

// Pipeline lands one source into one lake.
type Pipeline struct {
	plan   *Plan
	log    *slog.Logger
	source source.Source
	sink   *lake.Sink

	resolver *resolve.Resolver
	batcher  *batch.Batcher
	// journal keeps partition states in the lake, for sources that hand
	// partitions over; nil otherwise.
	journal *state.Journal
	// commits commits written files to lakehouse tables; nil when no
	// route has a table format.
	commits *committer
	// resume passes over the rows an input landed again has in its
	// lakehouse tables already (a source without partition states).
	resume *resumer
	// current builds the current-state tables (sink.current.interval);
	// nil when the run builds none.
	current *stateTables

	// dead is where the workers' dead letters go; closeDead releases it.
	dead      deadletter.Destination
	closeDead func()

	// idle holds the workers not handling a block; once ended is set (the
	// router returned), none takes another.
	idle  chan *worker
	ended atomic.Bool
	parts sync.Map // partKey → *sync.Mutex

	// landCtx is the context of storage writes: it outlives the source's
	// subscription, so that a stop signal ends reading but not the landing
	// of what was read; Run cancels it once everything is written.
	landCtx    context.Context
	landCancel context.CancelFunc

	stats   Stats
	fatal   error
	fatalMu sync.Mutex
	// closing counts the source closes a failure started (fail); Run
	// waits for them.
	closing sync.WaitGroup

	// gaps counts the gaps recorded (on_gap=skip).
	gaps atomic.Int64
	// dead counts the dead letters and stops the run (halt) past
	// sink.max_dead_letters.
	deadCount *deadLetters
	halt      chan struct{}
	halts     sync.Once

	bucket *blob.Bucket
	// metrics, nil without WithMetrics.
	metrics *metrics
	// beat is when the expire loop last turned (Unix nanoseconds);
	// durable watches what becomes durable.
	beat    atomic.Int64
	durable progress

	stageFault func(stage string)
}

// progress remembers when what the batcher holds as durable last moved.
type progress struct {
	mu   sync.Mutex
	last int64
	when time.Time
}

// watch samples the batcher's durable total at now.
func (g *progress) watch(total int64, now time.Time) {
	g.mu.Lock()
	if total != g.last || g.when.IsZero() {
		g.last, g.when = total, now
	}
	g.mu.Unlock()
}

// at returns when the durable total last moved.
func (g *progress) at() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.when
}

type partKey struct {
	source string
	part   int32
}

// Stats counts messages by what happened to them.
type Stats struct {
	Messages    atomic.Int64
	Rows        atomic.Int64
	Events      atomic.Int64 // DDL, schema change, transaction, metadata rows
	Tombstones  atomic.Int64
	Heartbeats  atomic.Int64
	Skipped     atomic.Int64 // logical messages (op m)
	Schemas     atomic.Int64 // GoldenGate JSON Schema records
	Filtered    atomic.Int64 // excluded tables
	InTable     atomic.Int64 // rows a lakehouse table holds already (an input landed again)
	DeadLetters atomic.Int64
	Bytes       atomic.Int64
	// Kinds counts the messages of each change.Kind: tombstones when
	// unwrapped, the others when decoded.
	Kinds [change.NumKinds]atomic.Int64
	// RegistryWait is the time, in nanoseconds, partitions waited for
	// the schema registry.
	RegistryWait atomic.Int64
}

// flushTimeout bounds the final flush and commit after the source ended
// by itself (drained); after a stop signal the config's shutdown_timeout
// does.
const flushTimeout = 5 * time.Minute

// Option changes how a pipeline runs.
type Option func(*options)

type options struct {
	workers int
	lanes   int
	metrics prometheus.Registerer
	// stageFault, when set, runs before a stage takes a window: tests
	// make it panic.
	stageFault func(stage string)
	// commitFault, when set, runs before each table commit: tests make it
	// fail.
	commitFault func(table string) error
	// replyFault, when set, runs after each table commit that went in:
	// tests make it fail, as a commit whose reply was lost.
	replyFault func(table string) error
	// noAppends, when set, commits nothing to Iceberg in process.
	noAppends bool
	// catalog opens the lakehouse catalog; nil: in the cdclake-lakehouse
	// process (lakehouse.Start).
	catalog lakehouse.Opener
}

// WithWorkers sets the number of workers, the most blocks handled at once
// (default GOMAXPROCS). One worker handles every block in turn.
func WithWorkers(n int) Option { return func(o *options) { o.workers = n } }

// WithMetrics registers the pipeline's metrics in reg (docs/operations.md
// lists them).
func WithMetrics(reg prometheus.Registerer) Option { return func(o *options) { o.metrics = reg } }

// recreated is a claim's error that wraps source.ErrRecreated, and says
// no more than the state's.
type recreated struct{ error }

func (e recreated) Unwrap() error        { return e.error }
func (e recreated) Is(target error) bool { return target == source.ErrRecreated }

// WithLanes sets the number of goroutines that decode one block's records
// at once (default GOMAXPROCS, at most 4).
func WithLanes(n int) Option { return func(o *options) { o.lanes = n } }

// New builds a pipeline from a compiled plan, a source and an open bucket.
func New(plan *Plan, src source.Source, bucket *blob.Bucket, log *slog.Logger, opts ...Option) (*Pipeline, error) {
	o := options{workers: runtime.GOMAXPROCS(0), lanes: min(runtime.GOMAXPROCS(0), 4)}
	for _, opt := range opts {
		opt(&o)
	}
	if o.workers < 1 || o.lanes < 1 {
		return nil, fmt.Errorf("pipeline: %d workers and %d lanes, want at least 1 of each", o.workers, o.lanes)
	}
	cfg := plan.Config()
	mem := memory.NewGoAllocator()
	landCtx, landCancel := context.WithCancel(context.Background())
	p := &Pipeline{plan: plan, log: log, source: src, landCtx: landCtx, landCancel: landCancel, stageFault: o.stageFault,
		sink:   lake.New(bucket, mem).Retrying(lake.Retry{For: time.Duration(cfg.Sink.RetryFor), Log: log.With("component", "store")}),
		bucket: bucket, halt: make(chan struct{})}
	p.beat.Store(time.Now().UnixNano())
	p.durable.watch(0, time.Now())
	// Past a count of dead letters, a run that would not end by itself
	// stops; one that does lands all of its input first.
	over := func() {}
	if u, ok := src.(interface{ Unbounded() bool }); ok && u.Unbounded() {
		over = func() { p.halts.Do(func() { close(p.halt) }) }
	}
	p.deadCount = newDeadLetters(log, cfg.Sink.MaxDeadLetters, over)
	p.resolver = resolve.New(plan.TableOptions, log)
	bcfg := p.batchConfig(bucket)
	if o.metrics != nil {
		p.metrics = newMetrics(o.metrics, newTableLabels(cfg.Observability.TableLabels, plan.Routed))
		bcfg.Written = p.metrics.fileWritten
		p.deadCount.metric = func(stage, class string) { p.metrics.deadLetters.WithLabelValues(stage, class).Inc() }
		for _, stage := range deadStages {
			p.metrics.deadLetters.WithLabelValues(stage, reasonClass(stage, nil))
		}
	}
	if plan.Commits() {
		bcfg.Commit = func(f *batch.Committing) { p.commits.add(f) }
	}
	if cfg.Sink.Current.Interval > 0 {
		p.current = newStateTables(plan, bucket, p.sink, state.NewStore(bucket, p.sink), nil, log)
		written := bcfg.Written
		bcfg.Written = func(f batch.WrittenFile) {
			p.current.wrote(f.Table)
			if written != nil {
				written(f)
			}
		}
	}
	b, err := batch.New(bcfg, plan.BatchConfig, p.sink, mem, log)
	if err != nil {
		return nil, err
	}
	p.batcher = b
	if plan.Commits() {
		open := o.catalog
		if open == nil {
			level := slog.LevelInfo
			_ = level.UnmarshalText([]byte(cfg.Log.Level))
			open = func(ctx context.Context, c lakehouse.Config, log *slog.Logger) (lakehouse.Catalog, error) {
				return lakehouse.Start(ctx, c, log, level, cfg.Log.Format)
			}
		}
		ice, err := plan.openCatalog(context.Background(), bucket, p.sink, log, !o.noAppends, open)
		if err != nil {
			return nil, err
		}
		p.commits = newCommitter(ice, b, log, plan.commitInterval(), time.Duration(cfg.Sink.RetryFor))
		p.commits.fault, p.commits.replyFault = o.commitFault, o.replyFault
		p.commits.compactEvery, p.commits.maintain = plan.maintenance()
		p.commits.granularity = func(table string) string { return plan.BatchConfig(table).Path.Granularity() }
		if p.current != nil {
			p.current.sb.cat = ice // the state of a table committed to Iceberg is an Iceberg table too
		}
		p.commits.schemaOf = func(ctx context.Context, key string) (sch *arrow.Schema, err error) {
			err = p.sink.Retried(ctx, key, func() error {
				sch, err = fileSchema(ctx, bucket, key)
				return err
			})
			return sch, err
		}
	}
	if err := p.openDeadLetters(); err != nil {
		return nil, err
	}
	if h, ok := src.(source.Handover); ok {
		p.bindHandover(h, bucket)
	} else if p.commits != nil {
		p.resume = newResumer(p.commits, p.sink.Retried, log)
	}
	p.idle = make(chan *worker, o.workers)
	for range o.workers {
		w, err := p.newWorker(o.lanes)
		if err != nil {
			return nil, err
		}
		p.idle <- w
	}
	if o.metrics != nil {
		o.metrics.MustRegister(collector{p})
	}
	return p, nil
}

// batchConfig returns the batch stage's settings: the plan's bounds, one
// writer and one appender per core (on one core that still overlaps a
// store's latency with the work), how a claim reads the offsets of a file
// written by another instance, and what a fenced partition does.
func (p *Pipeline) batchConfig(bucket *blob.Bucket) batch.Config {
	cfg := p.plan.Config()
	bcfg := batch.Config{MaxBufferedBytes: int64(cfg.Batch.MaxBufferedBytes), MaxOpenFiles: cfg.Batch.MaxOpenFiles,
		Writers: runtime.GOMAXPROCS(0), Appenders: runtime.GOMAXPROCS(0)}
	bcfg.Landed = func(ctx context.Context, key string) (offs []int64, err error) {
		err = p.sink.Retried(ctx, key, func() error {
			offs, err = fileOffsets(ctx, bucket, key)
			return err
		})
		return offs, err
	}
	// A partition taken over by another instance while this one held it
	// means this one lost its place in the group (a pause longer than the
	// session): its messages must not be acknowledged and dropped, so the
	// run stops, and the group gives what it held to the live members.
	bcfg.Fenced = func(src string, part int32, key string) {
		_ = p.fail(fmt.Errorf("%s partition %d: another instance took it over while this one held it (found writing %s): "+
			"stopping, so that the group reassigns this instance's partitions; what it read after its last commit is read again",
			src, part, key))
	}
	return bcfg
}

// openDeadLetters opens the dead-letter destination: the lake, or the
// Kafka topic the plan names.
func (p *Pipeline) openDeadLetters() error {
	p.dead, p.closeDead = deadletter.Lake(p.sink), func() {}
	dl := p.plan.deadLetters
	if dl == nil {
		return nil
	}
	opts, err := dl.ClientOptions()
	if err != nil {
		return fmt.Errorf("sink.dead_letters: %w", err)
	}
	pub, err := topic.New(opts, dl.Topics[0])
	if err != nil {
		return err
	}
	p.dead, p.closeDead = pub, pub.Close
	return nil
}

// bindHandover gives a source whose partitions move between instances the
// pipeline's hooks: each partition's state is kept in the lake (package
// state), claimed when the partition is assigned, and dropped when it
// leaves.
func (p *Pipeline) bindHandover(h source.Handover, bucket *blob.Bucket) {
	store := p.stateStore(bucket)
	journal := state.NewJournal(store, instanceName())
	p.journal = journal
	b := p.batcher
	b.SetJournal(journal)
	if p.commits != nil {
		p.commits.owns = journal.Check
	}
	h.Bind(source.Hooks{
		Durable: b.Durable,
		Flush: func(ctx context.Context, src string, part int32) error {
			if err := b.FlushPartition(ctx, src, part); err != nil {
				return err
			}
			only := func(s string, pt int32) bool { return s == src && pt == part }
			if p.commits != nil {
				// A partition is handed over with its files in their tables.
				if err := p.commits.commit(ctx, only); err != nil {
					return err
				}
				if err := p.commits.advance(ctx, only); err != nil {
					return err
				}
			}
			// Its next owner starts where this one got to (where its
			// tables' commits did), not where its last file's state says:
			// messages that needed no file moved it on since.
			return b.Checkpoint(ctx, only)
		},
		Drop: func(src string, part int32) {
			b.DropPartition(src, part)
			p.resolver.Forget(src, part)
			journal.Release(src, part)
			if p.commits != nil {
				p.commits.forget(src, part)
			}
		},
		Claim: func(ctx context.Context, src string, part int32, incarnation string) (int64, bool, error) {
			return p.claim(ctx, bucket, store, src, part, incarnation)
		},
		Start: journal.Start,
		Gap: func(ctx context.Context, src string, part int32, from, to int64) error {
			p.gaps.Add(1)
			return p.sink.WriteObject(ctx, GapKey(src, part, from), gapRecord(src, part, from, to), "application/json")
		},
	})
}

// stateStore returns the store of the partitions' states, which warns
// once when old states cannot be deleted and counts what fails.
func (p *Pipeline) stateStore(bucket *blob.Bucket) *state.Store {
	store := state.NewStore(bucket, p.sink)
	store.Retry = p.sink.Retried
	var pruneWarned atomic.Bool
	store.PruneFailed = func(src string, part int32, err error) {
		if pruneWarned.CompareAndSwap(false, true) {
			p.log.Warn("old partition states or catalog entries could not be deleted: the lake keeps them, and landing goes on "+
				"(grant the store's delete permission to keep _cdclake small; cdclake_state_prune_errors_total counts the failures)",
				"source", src, "partition", part, "err", err)
		}
		if p.metrics != nil {
			p.metrics.pruneErrors.Inc()
		}
	}
	store.Unreadable = func(key string, err error) {
		p.log.Warn("a partition state does not read and is passed over: the state before it is taken", "key", key, "err", err)
		if p.metrics != nil {
			p.metrics.unreadable.Inc()
		}
	}
	if p.metrics != nil {
		store.Appended = p.metrics.stateAppended
	}
	return store
}

// claim takes a partition's state in the lake over (source.Hooks.Claim):
// the offsets its written files hold and the cuts of those pending are
// handed to the batcher, its catalog to the resolver, and the offset it
// resumes from returned, with whether the lake had a state.
func (p *Pipeline) claim(ctx context.Context, bucket *blob.Bucket, store *state.Store, src string, part int32,
	incarnation string) (int64, bool, error) {
	st, err := p.journal.Claim(ctx, src, part, incarnation)
	if errors.Is(err, state.ErrRecreated) {
		return 0, false, recreated{err}
	}
	if err != nil {
		return 0, false, err
	}
	landed, cuts, err := landedOffsets(ctx, bucket, st)
	if err != nil {
		return 0, false, err
	}
	if err := p.restoreCatalog(ctx, store, src, part, st.Committed); err != nil {
		return 0, false, err
	}
	p.batcher.Restore(src, part, landed, cuts)
	if st.Seq > 0 { // the lake had a state: below its committed offset every message landed
		p.batcher.Resume(src, part, st.Committed)
	}
	if p.commits != nil {
		p.recommit(src, part, st, cuts)
	}
	p.log.Debug("partition claimed", "source", src, "partition", part, "state", st.Seq,
		"committed", st.Committed, "landed", len(landed), "cuts", len(cuts))
	return st.Committed, st.Seq > 0, nil
}

// Batcher exposes the batching stage (durable positions, stats).
func (p *Pipeline) Batcher() *batch.Batcher { return p.batcher }

// Stats returns the message counters.
func (p *Pipeline) Stats() *Stats { return &p.stats }

// Run lands the source until it ends or ctx is cancelled, then writes every
// open file. It returns the first fatal error.
//
// Shutdown, in order: the source is drained, ctx ends, or a failure or
// too many dead letters halt the run; the router is closed (once it runs)
// and Run's router returns once its handlers finished their blocks; the
// source is closed; the background loops (progress, expiry, the router's
// closer) are waited for; the open files are written (FlushAll) with the
// landing context, which a signal gives shutdown_timeout; a Handover
// source records the final durable positions (Finish); the batcher and
// the dead letters are closed; and the source closes a failure started
// are waited for. Every goroutine Run starts ends before it returns.
func (p *Pipeline) Run(ctx context.Context) error {
	defer p.closing.Wait()
	if p.journal != nil {
		// The partitions' states are fenced by create-once writes: a store
		// that ignores them would let two owners write on silently.
		if err := probeCreateOnce(ctx, p.bucket, p.sink, p.log); err != nil {
			return fmt.Errorf("the lake cannot hold partition states: %w", err)
		}
	}
	// The router's own lifecycle messages are debug-level here.
	wlog := watermill.NewSlogLoggerWithLevelMapping(p.log.With("component", "router"),
		map[slog.Level]slog.Level{slog.LevelInfo: slog.LevelDebug})
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: time.Minute}, wlog)
	if err != nil {
		return err
	}
	router.AddMiddleware(middleware.Recoverer)
	p.addHandler(router, p.unwrap, p.classify, p.batchStage)

	// From a stop signal on, the blocks in flight, the last files and the
	// final commit have shutdown_timeout.
	stopLanding := context.AfterFunc(ctx, func() {
		time.AfterFunc(time.Duration(p.plan.Config().ShutdownTimeout), p.landCancel)
	})
	defer stopLanding()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var bg sync.WaitGroup
	bg.Go(func() { p.progress(runCtx) })
	bg.Go(func() { p.expire(runCtx, router) })
	if p.commits != nil {
		bg.Go(func() { p.commits.run(runCtx, p.fail) })
	}
	if p.current != nil {
		bg.Go(func() { p.current.loop(runCtx) })
	}
	stop := make(chan struct{})
	bg.Go(func() { p.closeRouter(runCtx, router, stop) })
	runErr := router.Run(runCtx)
	p.quiesce(time.Minute)
	close(stop)
	_ = p.source.Close()
	cancel()
	bg.Wait()
	return p.finish(runErr)
}

// quiesce waits, up to limit, until every worker is idle, and lets none
// take a block after. The router may return with a block still being
// handled (after a stage panic, another worker's), and finish must not
// write or close the batcher under it. A worker still busy at the limit
// is logged at WARN; the run then ends without waiting for it.
func (p *Pipeline) quiesce(limit time.Duration) {
	p.ended.Store(true)
	timer := time.NewTimer(limit)
	defer timer.Stop()
	var back []*worker
	defer func() {
		for _, w := range back {
			p.idle <- w
		}
	}()
	for len(back) < cap(p.idle) {
		select {
		case w := <-p.idle:
			back = append(back, w)
		case <-timer.C:
			p.log.Warn("a worker still handles a block after the run stopped; the run ends without waiting for it",
				"busy_workers", cap(p.idle)-len(back), "waited", limit)
			return
		}
	}
}

// closeRouter closes the router once the source is drained, ctx ends or
// the run is halted, unless stop is closed first (the router returned).
func (p *Pipeline) closeRouter(ctx context.Context, router *message.Router, stop <-chan struct{}) {
	select {
	case <-ctx.Done():
	case <-p.source.Drained():
	case <-p.halt:
	case <-stop:
		return
	}
	// Only a running router is closed: a Close before Run has started the
	// handlers holds the router's handler lock while it waits for them,
	// which Run needs to start them, so both wait out the router's
	// CloseTimeout (a minute).
	select {
	case <-router.Running():
	case <-stop:
		return
	}
	_ = router.Close()
}

// finish ends a run whose router returned runErr: the open files are
// written, a Handover source records its final durable positions, the
// batcher and the dead letters are closed. It returns the run's errors,
// else whether there were too many dead letters.
func (p *Pipeline) finish(runErr error) error {
	// Flush with the landing context: a signal stops reading, not landing
	// what was read. It ends after flushTimeout, or shutdown_timeout after a
	// signal, also for a write still retrying in a stage; what is not
	// written by then is not committed either, and is read again by the
	// next run.
	timer := time.AfterFunc(flushTimeout, p.landCancel)
	defer timer.Stop()
	defer p.landCancel()
	flushCtx := p.landCtx
	errs := []error{p.fatalErr(), runErr, p.source.Err()}
	if p.fatalErr() == nil {
		errs = append(errs, p.batcher.FlushAll(flushCtx))
	}
	// Each partition's state then records where the run got to, not
	// where its last file's state says: messages that needed no file
	// (tombstones, heartbeats, rows a replay found in files already), and
	// files held until their tables' commits, moved it on since. The
	// current-state tables fold only what lies below it.
	checkpoint := p.fatalErr() == nil
	if p.commits != nil {
		// What was written goes into its tables before the source records
		// it as landed; a commit that fails leaves it held, and the next
		// run commits it.
		if checkpoint {
			if err := p.commits.flush(flushCtx); err != nil {
				errs = append(errs, err)
				checkpoint = false
			}
		}
		defer p.commits.ice.Close()
	}
	if checkpoint {
		errs = append(errs, p.batcher.Checkpoint(flushCtx, nil))
	}
	// Whatever was written is durable and may be recorded, even after a
	// failure.
	if h, ok := p.source.(source.Handover); ok {
		errs = append(errs, h.Finish(flushCtx))
	}
	if p.current != nil && errors.Join(errs...) == nil {
		// The state tables, up to everything the run landed. A build that
		// fails fails the run: a CronJob's last chance to say so.
		errs = append(errs, p.current.final(flushCtx))
	}
	p.batcher.Close()
	p.closeDead()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// Everything read landed: the dead letters may still be too many.
	return p.deadCount.exceeded(p.stats.Messages.Load())
}

// DeadLetters returns the run's dead letters by stage and reason class,
// the most frequent first.
func (p *Pipeline) DeadLetters() []DeadLetterCount { return p.deadCount.summary() }

// restoreCatalog gives a claimed partition's decoding state back what its
// catalog recorded below committed: the metadata records and table
// versions its messages from committed on depend on, in the order of
// their offsets. It deletes the entries no replay can need any more.
func (p *Pipeline) restoreCatalog(ctx context.Context, store *state.Store, src string, part int32, committed int64) error {
	entries, err := store.Catalog(ctx, src, part, committed)
	if err != nil {
		return fmt.Errorf("reading the catalog of %s partition %d: %w", src, part, err)
	}
	if err := store.PruneCatalog(ctx, src, part, committed); err != nil && store.PruneFailed != nil {
		store.PruneFailed(src, part, err)
	}
	slices.SortStableFunc(entries, func(a, b state.CatalogEntry) int { return cmp.Compare(a.Offset, b.Offset) })
	p.resolver.Forget(src, part)
	scope := p.resolver.Partition(src, part)
	var parser fastjson.Parser
	for _, e := range entries {
		if e.Kind == catalogVersion {
			if err := scope.Restore(e.Record); errors.Is(err, resolve.ErrRouteChanged) {
				p.log.Warn("a recorded table version is not what the route makes now: the partition's rows resolve afresh, "+
					"and files whose cuts were recorded with it are cut again under other names",
					"source", src, "partition", part, "table", e.Table, "offset", e.Offset)
			} else if err != nil {
				return fmt.Errorf("catalog of %s partition %d, %s at offset %d: %w", src, part, e.Table, e.Offset, err)
			}
			continue
		}
		v, err := parser.ParseBytes(e.Record)
		if err != nil {
			return fmt.Errorf("catalog of %s partition %d, %s: %w", src, part, e.Table, err)
		}
		c := &change.Change{Table: e.Table, Raw: v}
		switch e.Kind {
		case change.KindSchemaRecord.String():
			c.Kind = change.KindSchemaRecord
		case change.KindObjectMetadata.String():
			c.Kind = change.KindObjectMetadata
		default:
			continue
		}
		scope.Observe(c)
	}
	return nil
}

// landedOffsets reads which messages of a claimed partition the files its
// state names hold. A written file's cut records its offsets (Cut.Runs)
// when they make few runs: it was recorded written after its create-once
// write succeeded, so those are its rows. Every other file is read: the
// lake, not the state, says what a pending file holds. A pending file that
// is not there was not written, or is still being written by an instance
// that lost the partition: its cut is returned, to be repeated.
func landedOffsets(ctx context.Context, bucket *blob.Bucket, st *state.Partition) ([]int64, []state.Cut, error) {
	all := append(slices.Clone(st.Written), st.Pending...)
	// The files are read side by side: a claim runs during the group's
	// rebalance, and a partition can name thousands.
	offs := make([][]int64, len(all))
	missing := make([]bool, len(all))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(claimReads)
	for i, c := range all {
		if i < len(st.Written) {
			var ok bool
			if offs[i], ok = c.Offsets(); ok {
				continue
			}
		}
		g.Go(func() error {
			var err error
			offs[i], err = fileOffsets(gctx, bucket, c.Key)
			if gcerrors.Code(err) == gcerrors.NotFound && i >= len(st.Written) {
				missing[i] = true
				return nil
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	var landed []int64
	var cuts []state.Cut
	for i, c := range all {
		if missing[i] {
			cuts = append(cuts, c)
		}
		for _, o := range offs[i] {
			if o >= st.Committed {
				landed = append(landed, o)
			}
		}
	}
	return landed, cuts, nil
}

// fileOffsets reads the offsets of the messages whose rows a landed file
// holds.
func fileOffsets(ctx context.Context, bucket *blob.Bucket, key string) ([]int64, error) {
	obj, err := lake.OpenSmall(ctx, bucket, key, 1<<20)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", key, err)
	}
	offs, err := parquet.Int64Column(obj, schema.ColOffset, memory.DefaultAllocator)
	if err != nil {
		return nil, fmt.Errorf("reading the offsets of %s: %w", key, err)
	}
	return offs, nil
}

// recommit hands the committer again the files of a claimed partition
// that may have been written but not committed to their tables: those of
// its state's cuts at or past its committed offset (an earlier owner held
// that offset below every file it had not committed), but the pending
// cuts whose file is missing, which the replay writes. The committer adds
// those its tables do not hold.
func (p *Pipeline) recommit(src string, part int32, st *state.Partition, missing []state.Cut) {
	gone := map[string]bool{}
	for _, c := range missing {
		gone[c.Key] = true
	}
	for _, cut := range append(slices.Clone(st.Written), st.Pending...) {
		if cut.First < st.Committed || gone[cut.Key] || cut.Rows == 0 || !p.plan.BatchConfig(cut.Table).Commit {
			continue
		}
		c := &batch.Committing{Key: cut.Key, Table: cut.Table, Source: src, Partition: part, First: cut.First}
		p.batcher.HoldCommitting(c)
		p.commits.add(c)
	}
}

// fileSchema reads the Arrow schema of a landed file from its footer.
func fileSchema(ctx context.Context, bucket *blob.Bucket, key string) (*arrow.Schema, error) {
	obj, err := lake.OpenObject(ctx, bucket, key)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", key, err)
	}
	sch, err := parquet.ArrowSchema(obj, memory.DefaultAllocator)
	if err != nil {
		return nil, fmt.Errorf("reading the schema of %s: %w", key, err)
	}
	return sch, nil
}

// claimReads bounds the files a claim reads at once.
const claimReads = 32

// GapsDir is the folder of the lake that records the messages a partition
// lost before they landed (on_gap=skip), one object per gap.
const GapsDir = "_gaps"

// GapKey is the object key of the gap of a partition that starts at from.
func GapKey(src string, part int32, from int64) string {
	return GapsDir + "/" + sinks.ObjectName(sinks.Position{Source: src, Partition: part, Offset: from}, ".json")
}

// gapRecord is the JSON of a gap: the partition and its lost offsets.
func gapRecord(src string, part int32, from, to int64) []byte {
	return fmt.Appendf(nil, `{"source":%q,"partition":%d,"from":%d,"to":%d,"reason":"deleted from the log before they landed"}`+"\n",
		src, part, from, to)
}

// instanceName names this process in the partition states it writes: the
// host, the process id and a random tag, since a restarted container has
// the same host name and often the same process id. No other process
// writes a state with the same bytes (lake.Sink.CreateObject relies on
// it).
func instanceName() string {
	host, _ := os.Hostname()
	var tag [4]byte
	_, _ = rand.Read(tag[:])
	return fmt.Sprintf("%s/%d/%x", host, os.Getpid(), tag)
}

// addHandler adds the "land" handler: the stages as middleware, in order,
// inside the partition middleware, and the batch stage as the handler.
func (p *Pipeline) addHandler(router *message.Router, unwrap, classify func(*lane, int), batch message.NoPublishHandlerFunc) {
	land := router.AddConsumerHandler("land", "records", p.source, batch)
	land.AddMiddleware(
		p.partition,
		p.stage("unwrap", unwrap),
		p.stage("classify", classify),
	)
}

func (p *Pipeline) fatalErr() error {
	p.fatalMu.Lock()
	defer p.fatalMu.Unlock()
	return p.fatal
}

// fail records a storage failure and stops the source: nothing after it is
// acknowledged.
func (p *Pipeline) fail(err error) error {
	p.fatalMu.Lock()
	if p.fatal == nil {
		p.fatal = err
	}
	p.fatalMu.Unlock()
	// Not in line: a stage that fails holds a block Close waits for. Run
	// waits for it before it returns.
	p.closing.Go(func() { _ = p.source.Close() })
	return err
}

// expire writes files past their max age while the source is idle. Its
// turns are the pipeline's heartbeat (Health's liveness), and it watches
// what becomes durable (readiness: not stuck).
func (p *Pipeline) expire(ctx context.Context, router *message.Router) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			p.beat.Store(now.UnixNano())
			p.durable.watch(p.batcher.DurableTotal(), now)
			if err := p.batcher.FlushExpired(p.landCtx); err != nil && ctx.Err() == nil {
				_ = p.fail(err)
				_ = router.Close()
				return
			}
		}
	}
}

func (p *Pipeline) progress(ctx context.Context) {
	every := time.Duration(p.plan.Config().ProgressInterval)
	if every <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	last, lastAt := int64(0), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			n := p.stats.Messages.Load()
			rate := float64(n-last) / now.Sub(lastAt).Seconds()
			last, lastAt = n, now
			stats := p.batcher.Stats()
			attrs := []any{"events", n, "events_per_s", int64(rate), "tables", len(stats),
				"open_files", p.batcher.OpenFiles(), "dead_letters", p.stats.DeadLetters.Load()}
			if b := p.source.Backlog(); b >= 0 {
				unit := "backlog_bytes"
				if _, ok := p.source.(*kafka.Source); ok {
					unit = "lag_records"
				}
				attrs = append(attrs, unit, b)
			}
			p.log.Info("progress", attrs...)
		}
	}
}
