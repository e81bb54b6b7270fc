// Package pipelines composes the stages into a watermill router and owns
// its goroutines and shutdown.
//
// # Flow
//
// A source (a watermill Subscriber) delivers blocks of consecutive records
// of one source partition. The "land" handler runs each record through the
// stages, in order:
//
//	unwrap → classify/decode → resolve schema → batch → (sink)
//
// Blocks, not single records, travel through the router: its per-message
// cost would otherwise dominate. A record that fails a stage is
// dead-lettered with its stage and reason and the block goes on; dead
// letters are written when the block ends. A storage failure stops the run.
//
// # Acknowledgement
//
// A block is acked when every record was handed to the batcher (or
// dead-lettered). Durability is reported separately by the batcher's
// Tracker: the offset below which everything is in written files.
package pipelines

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/config"
	"github.com/cdclake/cdclake/handlers/batch"
	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/classify"
	"github.com/cdclake/cdclake/handlers/resolve"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/cdclake/cdclake/handlers/unwrap"
	"github.com/cdclake/cdclake/sinks/deadletter"
	"github.com/cdclake/cdclake/sinks/lake"
	"gocloud.dev/blob"
)

// Source is where blocks of records come from.
type Source interface {
	message.Subscriber
	// Backlog returns the bytes or messages left to read, -1 if unknown.
	Backlog() int64
	// Err returns the error that stopped the source early, if any.
	Err() error
	// Drained is closed when a bounded source has been read to the end and
	// every block acked; it is never closed for an unbounded one.
	Drained() <-chan struct{}
}

// Pipeline lands one source into one lake.
type Pipeline struct {
	cfg    *config.Config
	log    *slog.Logger
	source Source
	bucket *blob.Bucket

	unwrapper  unwrap.Unwrapper
	classifier *classify.Classifier
	resolver   *resolve.Resolver
	batcher    *batch.Batcher
	dead       *deadletter.Queue
	// deadHold keeps a block's dead letters from counting as durable until
	// they are written.
	deadHold *change.Position
	events   map[string]*schema.Table

	tableCfg sync.Map // table → *batch.TableConfig
	c        change.Change

	stats    Stats
	fatal    error
	fatalMu  sync.Mutex
	runStart time.Time
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
	DeadLetters atomic.Int64
	Bytes       atomic.Int64
}

// New builds a pipeline from config, a source and an open bucket.
func New(cfg *config.Config, source Source, bucket *blob.Bucket, log *slog.Logger) (*Pipeline, error) {
	format, _ := change.ParseFormat(cfg.Source.Format)
	cl, err := classify.New(classify.Options{
		Format:     format,
		GoldenGate: cfg.Source.GoldenGate,
		BigData:    cfg.Source.GoldenGateBigData,
		Debezium:   cfg.Source.Debezium.UnavailableValuePlaceholder,
	})
	if err != nil {
		return nil, err
	}
	p := &Pipeline{cfg: cfg, log: log, source: source, bucket: bucket, classifier: cl,
		events: map[string]*schema.Table{}}
	mem := memory.NewGoAllocator()
	sink := lake.New(bucket, mem)
	p.dead = deadletter.New(sink)
	p.resolver = resolve.New(p.tableOptions, log)
	p.batcher = batch.New(batch.Config{MaxBufferedBytes: int64(cfg.Batch.MaxBufferedBytes), MaxOpenFiles: cfg.Batch.MaxOpenFiles},
		p.batchConfig, sink, mem, log)
	return p, nil
}

func (p *Pipeline) tableOptions(table string) *resolve.TableOptions {
	r := p.cfg.RouteFor(table)
	layout, _ := schema.ParseLayout(r.Layout)
	numbers, _ := schema.ParseType(r.Numbers)
	o := &resolve.TableOptions{Layout: layout, Numbers: numbers, Overrides: map[string]schema.Type{}}
	for col, ty := range r.Types {
		o.Overrides[col], _ = schema.ParseType(ty)
	}
	if len(r.Columns.Include) > 0 || len(r.Columns.Exclude) > 0 {
		f := r.Columns
		o.Ignore = func(col string) bool { return !f.Allowed(col) }
	}
	return o
}

func (p *Pipeline) batchConfig(table string) *batch.TableConfig {
	if v, ok := p.tableCfg.Load(table); ok {
		return v.(*batch.TableConfig)
	}
	r := p.cfg.RouteFor(table)
	tmpl, _ := batch.ParseTemplate(r.Path)
	tc := &batch.TableConfig{Path: tmpl, MaxRows: r.MaxRows, MaxBytes: int64(r.MaxBytes), MaxAge: time.Duration(r.MaxAge),
		Write: batch.WriteOptions{Compression: r.Compression, RowGroupRows: r.RowGroup}}
	v, _ := p.tableCfg.LoadOrStore(table, tc)
	return v.(*batch.TableConfig)
}

// Batcher exposes the batching stage (durable positions, stats).
func (p *Pipeline) Batcher() *batch.Batcher { return p.batcher }

// Stats returns the message counters.
func (p *Pipeline) Stats() *Stats { return &p.stats }

// Run lands the source until it ends or ctx is cancelled, then writes every
// open file. It returns the first fatal error.
func (p *Pipeline) Run(ctx context.Context) error {
	p.runStart = time.Now()
	// The router's own lifecycle messages are debug-level here.
	wlog := watermill.NewSlogLoggerWithLevelMapping(p.log.With("component", "router"),
		map[slog.Level]slog.Level{slog.LevelInfo: slog.LevelDebug})
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: time.Minute}, wlog)
	if err != nil {
		return err
	}
	router.AddMiddleware(middleware.Recoverer)
	router.AddConsumerHandler("land", "records", p.source, p.handle)

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		p.progress(runCtx)
	}()
	tickerDone := make(chan struct{})
	go func() {
		defer close(tickerDone)
		p.expire(runCtx, router)
	}()
	stop := make(chan struct{})
	go func() {
		// The source says when it is drained; a signal or a fatal error
		// closes the router early.
		select {
		case <-runCtx.Done():
		case <-p.source.Drained():
		case <-stop:
			return
		}
		_ = router.Close()
	}()
	runErr := router.Run(runCtx)
	close(stop)
	_ = p.source.Close()
	cancel()
	<-progressDone
	<-tickerDone

	// Flush with a fresh context: a signal stops reading, not landing what
	// was read.
	flushCtx, flushCancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer flushCancel()
	errs := []error{p.fatalErr(), runErr, p.source.Err()}
	if p.fatalErr() == nil {
		errs = append(errs, p.flushDead(flushCtx), p.batcher.FlushAll(flushCtx))
	}
	p.batcher.Close()
	return errors.Join(errs...)
}

func (p *Pipeline) fatalErr() error {
	p.fatalMu.Lock()
	defer p.fatalMu.Unlock()
	return p.fatal
}

func (p *Pipeline) setFatal(err error) {
	p.fatalMu.Lock()
	defer p.fatalMu.Unlock()
	if p.fatal == nil {
		p.fatal = err
	}
}

// handle is the router handler: one block of records.
func (p *Pipeline) handle(msg *message.Message) error {
	ctx := msg.Context()
	source := msg.Metadata.Get(MetaSource)
	part, _ := strconv.ParseInt(msg.Metadata.Get(MetaPartition), 10, 32)
	off, err := strconv.ParseInt(msg.Metadata.Get(MetaOffset), 10, 64)
	if err != nil {
		return fmt.Errorf("block without offset metadata: %w", err)
	}
	pos := change.Position{Source: source, Partition: int32(part), Offset: off}
	payload := msg.Payload
	for len(payload) > 0 {
		i := indexNL(payload)
		rec := payload[:i]
		if i < len(payload) {
			payload = payload[i+1:]
		} else {
			payload = nil
		}
		if err := p.record(ctx, rec, pos); err != nil {
			p.setFatal(err)
			// Stop the whole run: a storage failure is not retried record
			// by record.
			go func() { _ = p.source.Close() }()
			return err
		}
		pos.Offset++
	}
	if err := p.flushDead(ctx); err != nil {
		p.setFatal(err)
		return err
	}
	if err := p.batcher.FlushExpired(ctx); err != nil {
		p.setFatal(err)
		return err
	}
	return nil
}

func indexNL(b []byte) int {
	for i, c := range b {
		if c == '\n' {
			return i
		}
	}
	return len(b)
}

// record runs one record through the stages. Only storage failures are
// returned; everything else is counted or dead-lettered.
func (p *Pipeline) record(ctx context.Context, raw []byte, at change.Position) error {
	p.stats.Messages.Add(1)
	p.stats.Bytes.Add(int64(len(raw)))
	c := &p.c
	c.Reset()
	v, err := p.unwrapper.Unwrap(raw, c)
	if err != nil {
		return p.deadLetter(at, "unwrap", err, raw)
	}
	if c.Kind == change.KindTombstone {
		p.stats.Tombstones.Add(1)
		p.batcher.Skip(at)
		return nil
	}
	if err := p.classifier.Decode(v, c); err != nil {
		return p.deadLetter(at, "decode", err, raw)
	}
	if c.Table != "" && c.Kind != change.KindSchemaRecord && !p.cfg.Tables.Allowed(c.Table) {
		p.stats.Filtered.Add(1)
		p.batcher.Skip(at)
		return nil
	}
	switch c.Kind {
	case change.KindSchemaRecord:
		p.resolver.Observe(c)
		p.stats.Schemas.Add(1)
		p.batcher.Skip(at)
		return nil
	case change.KindHeartbeat:
		p.stats.Heartbeats.Add(1)
		p.batcher.Skip(at)
		return nil
	case change.KindMessage:
		p.stats.Skipped.Add(1)
		p.batcher.Skip(at)
		return nil
	case change.KindObjectMetadata, change.KindStreamMetadata:
		p.resolver.Observe(c)
		return p.landEvent(ctx, schema.TableStreamMetadata, c, at, raw)
	case change.KindDDL, change.KindSchemaChange:
		p.resolver.Observe(c)
		if err := p.batcher.CloseTable(ctx, c.Table); err != nil {
			return err
		}
		return p.landEvent(ctx, schema.TableDDL, c, at, raw)
	case change.KindTransaction:
		return p.landEvent(ctx, schema.TableTransactions, c, at, raw)
	case change.KindDML:
		t, err := p.resolver.Resolve(c)
		if err != nil {
			return p.deadLetter(at, "schema", err, raw)
		}
		return p.add(ctx, c, t, at, raw, &p.stats.Rows)
	}
	return p.deadLetter(at, "classify", fmt.Errorf("unhandled record class %s", c.Kind), raw)
}

func (p *Pipeline) add(ctx context.Context, c *change.Change, t *schema.Table, at change.Position, raw []byte, counter *atomic.Int64) error {
	err := p.batcher.Add(ctx, c, t, at, len(raw))
	if err == nil {
		counter.Add(1)
		return nil
	}
	var rowErr *batch.RowError
	if errors.As(err, &rowErr) {
		return p.deadLetter(at, "convert", rowErr.Err, raw)
	}
	if err == nil {
		counter.Add(1)
	}
	return err
}

// landEvent lands a DDL, schema change, transaction or metadata record in
// its dataset. The dataset's version changes only when new extras appear.
func (p *Pipeline) landEvent(ctx context.Context, name string, c *change.Change, at change.Position, raw []byte) error {
	t := p.events[name]
	missing := t == nil
	if t != nil {
		for _, e := range c.Extras {
			if _, ok := t.ExtraIndex(e.Name); !ok {
				missing = true
				break
			}
		}
	}
	if missing {
		var extras []schema.ExtraColumn
		version := 1
		if t != nil {
			extras = append(extras, t.Extras...)
			version = t.Version + 1
		}
		for _, e := range c.Extras {
			dup := false
			for _, x := range extras {
				dup = dup || x.Name == e.Name
			}
			if !dup {
				extras = append(extras, schema.ExtraColumn{Name: e.Name, Kind: e.Kind})
			}
		}
		t = schema.NewTable(name, version, schema.LayoutEvents, nil, extras, true, nil)
		p.events[name] = t
	}
	return p.add(ctx, c, t, at, raw, &p.stats.Events)
}

func (p *Pipeline) deadLetter(at change.Position, stage string, reason error, raw []byte) error {
	p.stats.DeadLetters.Add(1)
	p.dead.Add(at, stage, reason, raw)
	if p.deadHold == nil {
		p.deadHold = &at
	}
	p.batcher.Hold(at, p.deadHold)
	p.log.Debug("dead letter", "source", at.Source, "offset", at.Offset, "stage", stage, "reason", reason)
	return nil
}

// expire writes files past their max age while the source is idle.
func (p *Pipeline) expire(ctx context.Context, router *message.Router) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := p.batcher.FlushExpired(ctx); err != nil && ctx.Err() == nil {
				p.setFatal(err)
				_ = router.Close()
				return
			}
		}
	}
}

// flushDead writes pending dead letters; only then do their positions count
// as durable.
func (p *Pipeline) flushDead(ctx context.Context) error {
	if err := p.dead.Flush(ctx); err != nil {
		return err
	}
	if h := p.deadHold; h != nil {
		p.batcher.Release(h.Source, h.Partition, h)
		p.deadHold = nil
	}
	return nil
}

func (p *Pipeline) progress(ctx context.Context) {
	every := time.Duration(p.cfg.ProgressInterval)
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
				attrs = append(attrs, "backlog_bytes", b)
			}
			p.log.Info("progress", attrs...)
		}
	}
}
