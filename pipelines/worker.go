package pipelines

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/cdclake/cdclake/handlers/avro"
	"github.com/cdclake/cdclake/handlers/batch"
	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/classify"
	"github.com/cdclake/cdclake/handlers/decode"
	"github.com/cdclake/cdclake/handlers/resolve"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/cdclake/cdclake/handlers/unwrap"
	"github.com/cdclake/cdclake/pipelines/source"
	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/deadletter"
	"github.com/cdclake/cdclake/sinks/lake"
	"github.com/cdclake/cdclake/sinks/state"
	"github.com/cenkalti/backoff/v5"
	"github.com/valyala/fastjson"
)

// worker is the state the stages reuse from block to block. One block at a
// time uses it; it is never shared.
//
// The stages pass over a block a window of records at a time. The stages
// before batch (unwrap, classify) run on the worker's lanes, each a
// goroutine with its own decoders, taking the block's windows in turn
// (window k on lane k mod lanes); every stage handles the window's records
// before the next stage starts, and the window stays small enough for its
// decoded records to stay in the CPU's cache between stages. The batch
// stage takes the finished windows in record order on the block's own
// goroutine: it resolves each record's table version and hands it to the
// batcher, while the lanes decode the next windows (see partition).
type worker struct {
	dead  *deadletter.Queue
	block *source.Block
	lanes []*lane
	// hold keeps the block's dead letters and catalog entries from
	// counting as durable until they are written.
	hold *sinks.Position
	// catalog holds the block's metadata records to keep in the lake for
	// a partition's next owner (sources that hand partitions over).
	catalog []catalogEntry
	// scope is the block's partition's decoding state.
	scope *resolve.Scope
	// at is the record the batch stage took last.
	at sinks.Position
	// bcounts are the batch stage's counters.
	bcounts counts
	// run is the run of records the batch stage hands to the batcher
	// next (batch.Batcher.AddRun), runSlots their slots in the window.
	run      []batch.Item
	runSlots []int
}

// lane is the state of the stages before batch on one goroutine: its
// decoders and caches are its own.
type lane struct {
	w          *worker
	unwrapper  unwrap.Unwrapper
	classifier *classify.Classifier
	// win is the window the stages fill, one of windows.
	windows [2]window
	win     *window
	// done receives each window the lane finished, in order, for the
	// batch stage.
	done    chan *window
	headers []unwrap.Header // scratch
	key     []byte          // scratch: a transcoded record key
	// abort stops the block: a stage met an error that is no record's
	// fault and could not wait it out.
	abort error
	// stage and rec are the stage running and its record in the window.
	stage  string
	rec    int
	counts counts
}

// window is a window of records on its way through the stages: slots[i]
// carries record base+i of the block, each with its own parse arena so the
// window stays decoded between stages. free holds a token while no stage
// uses it.
type window struct {
	base  int
	slots []slot
	free  chan struct{}
}

type catalogEntry struct {
	key  string
	data []byte
	// version is set for a table version (catalogVersion).
	version bool
}

// windowRecords is the number of records in a window: enough to make the
// per-window cost of the middleware chain negligible, few enough for their
// decoded values to stay in a core's cache.
const windowRecords = 64

// slot is one record on its way through the stages.
type slot struct {
	arena unwrap.Arena
	c     change.Change
	v     *fastjson.Value
	dec   decode.Decoder
	table *schema.Table
	act   action
	// keep is set for a metadata record kept in the catalog.
	keep bool
	// stage and err say why a dead record failed.
	stage string
	err   error
}

// action is what the batch stage does with a record; the stages before it
// decide.
type action uint8

const (
	actPending action = iota // no stage has decided yet
	actSkip                  // needs no landing
	actDead                  // dead letter: stage and err say why
	actMeta                  // a schema record: observed, not landed
	actRow                   // a row change
	actEvent                 // a row of an event dataset
	actDDL                   // an event row that first closes its table's files
)

// counts are a block's counters, added to the pipeline's once per block.
type counts struct {
	messages, bytes, rows, events, tombstones, heartbeats, skipped, schemas, filtered, dead int64
	kinds                                                                                   [change.NumKinds]int64
}

func (c *counts) addTo(s *Stats) {
	for _, x := range [...]struct {
		n *int64
		a *atomic.Int64
	}{{&c.messages, &s.Messages}, {&c.bytes, &s.Bytes}, {&c.rows, &s.Rows}, {&c.events, &s.Events},
		{&c.tombstones, &s.Tombstones}, {&c.heartbeats, &s.Heartbeats}, {&c.skipped, &s.Skipped},
		{&c.schemas, &s.Schemas}, {&c.filtered, &s.Filtered}, {&c.dead, &s.DeadLetters}} {
		if *x.n != 0 {
			x.a.Add(*x.n)
			*x.n = 0
		}
	}
	for k, n := range c.kinds {
		if n != 0 {
			s.Kinds[k].Add(n)
			c.kinds[k] = 0
		}
	}
}

func (p *Pipeline) newWorker(lanes int) (*worker, error) {
	w := &worker{dead: deadletter.New(p.dead)}
	for range lanes {
		cl, err := p.plan.newClassifier()
		if err != nil {
			return nil, err
		}
		ln := &lane{w: w, classifier: cl}
		ln.unwrapper.Avro = p.plan.avro
		for i := range ln.windows {
			ln.windows[i].free = make(chan struct{}, 1)
			ln.windows[i].free <- struct{}{}
		}
		w.lanes = append(w.lanes, ln)
	}
	return w, nil
}

// start prepares w for block b.
func (w *worker) start(b *source.Block, r *resolve.Resolver) {
	w.block, w.hold = b, nil
	w.scope = r.Partition(b.Source, b.Partition)
	w.dead.Reset()
	w.catalog = w.catalog[:0]
	for _, ln := range w.lanes {
		ln.abort = nil
		ln.done = make(chan *window, len(ln.windows))
	}
}

// window prepares the lane's next window for the records [lo, hi) of its
// block, once the batch stage is done with it.
func (ln *lane) window(lo, hi int) {
	win := &ln.windows[0]
	if ln.win == win {
		win = &ln.windows[1]
	}
	<-win.free
	win.base = lo
	if cap(win.slots) < hi-lo {
		win.slots = make([]slot, hi-lo)
	}
	win.slots = win.slots[:hi-lo]
	for i := range win.slots {
		s := &win.slots[i]
		s.c.Reset()
		s.v, s.dec, s.table, s.act, s.keep, s.stage, s.err = nil, nil, nil, actPending, false, "", nil
	}
	ln.win = win
}

func (s *slot) die(stage string, err error) {
	s.act, s.stage, s.err = actDead, stage, err
}

type laneKey struct{}

func laneOf(msg *message.Message) *lane {
	return msg.Context().Value(laneKey{}).(*lane)
}

// partition is the outermost stage middleware: it takes the block's
// partition lock and a free worker, runs the block's windows through the
// stages on the worker's lanes and the batch stage on its own goroutine,
// and ends the block: its dead letters are written and files past their
// age are closed.
func (p *Pipeline) partition(next message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		b, err := source.BlockOf(msg)
		if err != nil {
			return nil, err
		}
		v, _ := p.parts.LoadOrStore(partKey{b.Source, b.Partition}, &sync.Mutex{})
		lock := v.(*sync.Mutex)
		lock.Lock()
		defer lock.Unlock()
		var w *worker
		// A block that arrives as the run stops is not handled: it is
		// nacked (not an error, which the router logs), and read again by
		// the next run.
		select {
		case w = <-p.idle:
		case <-msg.Context().Done():
			msg.Nack()
			return nil, nil
		}
		if p.ended.Load() {
			p.idle <- w
			msg.Nack()
			return nil, nil
		}
		defer func() {
			w.block, w.scope = nil, nil
			p.idle <- w
		}()
		w.start(b, p.resolver)
		defer w.bcounts.addTo(&p.stats)
		if err := p.fanOut(msg, next, w, b); err != nil {
			return nil, err
		}
		return nil, p.guard(w, func() error { return p.endBlock(p.landCtx, w) })
	}
}

// guard runs part of the batch stage. A panic there leaves the batcher's
// buffers in a state not known to be whole, so it fails the pipeline as a
// storage failure does: no open file is written after it, and what was
// not written is read again by the next run. The caller then stops and
// waits for its lanes as after any failure.
func (p *Pipeline) guard(w *worker, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &StagePanic{Stage: "batch", At: w.at, Value: r, Stack: debug.Stack()}
			p.batcher.Fail(err)
			err = p.fail(err)
		}
	}()
	return f()
}

// StagePanic is a panic in a stage, recovered: the run stops with it as
// its error, saying which stage and which record.
type StagePanic struct {
	// Stage is "unwrap", "classify" or "batch".
	Stage string
	// At is the record the stage was handling (in the batch stage, the
	// last one it took).
	At    sinks.Position
	Value any
	Stack []byte
}

func (e *StagePanic) Error() string {
	return fmt.Sprintf("panic in the %s stage at %s partition %d offset %d: %v\n%s",
		e.Stage, e.At.Source, e.At.Partition, e.At.Offset, e.Value, e.Stack)
}

// endBlock writes the block's dead letters and catalog entries, after
// which they count as durable, and closes files past their age.
func (p *Pipeline) endBlock(ctx context.Context, w *worker) error {
	if err := w.dead.Flush(ctx); err != nil {
		return p.fail(err)
	}
	if err := writeCatalog(ctx, p.sink, w.catalog, p.log); err != nil {
		return p.fail(err)
	}
	if w.hold != nil {
		p.batcher.Release(w.block.Source, w.block.Partition, w.hold)
	}
	if err := p.batcher.FlushExpired(ctx); err != nil {
		return p.fail(err)
	}
	return nil
}

// writeCatalog writes a block's catalog entries. Each is created once: a
// replay, or an instance that lost the partition, writes the same bytes
// under the same key, and nothing replaces an entry. A table version
// recorded otherwise at that offset before (the route's settings, or
// cdclake, changed since) stays: it is what the files written then were
// cut with.
func writeCatalog(ctx context.Context, sink *lake.Sink, entries []catalogEntry, log *slog.Logger) error {
	for _, e := range entries {
		err := sink.CreateObject(ctx, e.key, e.data, "application/json")
		if errors.Is(err, sinks.ErrExists) && e.version {
			log.Debug("a table version recorded before at this offset is kept", "key", e.key)
			err = nil
		}
		if err != nil {
			return fmt.Errorf("writing %s: %w", e.key, err)
		}
	}
	return nil
}

// stage makes a middleware that runs one stage over every record of the
// lane's window that no earlier stage settled.
func (p *Pipeline) stage(name string, run func(ln *lane, i int)) message.HandlerMiddleware {
	return func(next message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			ln := laneOf(msg)
			ln.stage, ln.rec = name, 0
			if p.stageFault != nil {
				p.stageFault(name)
			}
			for i := range ln.win.slots {
				if a := ln.win.slots[i].act; a != actSkip && a != actDead && ln.abort == nil {
					ln.rec = i // for a panic's StagePanic
					run(ln, i)
				}
			}
			if ln.abort != nil {
				return nil, p.fail(ln.abort)
			}
			return next(msg)
		}
	}
}

// unwrap parses a record and removes its envelopes.
func (p *Pipeline) unwrap(ln *lane, i int) {
	rec := &ln.w.block.Records[ln.win.base+i]
	s, raw := &ln.win.slots[i], rec.Value
	ln.counts.messages++
	ln.counts.bytes += int64(len(raw))
	if len(rec.Headers) > 0 {
		ln.headers = ln.headers[:0]
		for _, h := range rec.Headers {
			ln.headers = append(ln.headers, unwrap.Header{Key: h.Key, Value: h.Value})
		}
		unwrap.Headers(ln.headers, &s.c)
	}
	v, err := p.unwrapHolding(ln, rec, &s.arena, &s.c)
	switch {
	case ln.abort != nil:
	case err != nil:
		s.die("unwrap", err)
	case s.c.Kind == change.KindTombstone:
		s.act = actSkip
		ln.counts.tombstones++
		ln.counts.kinds[change.KindTombstone]++
	default:
		s.v = v
	}
}

// unwrapHolding unwraps a record, waiting out registry outages (holding).
func (p *Pipeline) unwrapHolding(ln *lane, rec *source.Record, a *unwrap.Arena, c *change.Change) (*fastjson.Value, error) {
	var v *fastjson.Value
	err := p.holding(ln, rec, func() (err error) {
		v, err = ln.unwrapper.UnwrapContext(p.landCtx, a, rec.Value, c)
		return err
	})
	return v, err
}

// holding runs f until it does not fail for want of the schema registry.
// While the registry cannot be asked for the schema of an Avro record,
// the record, and so its partition, waits: f is tried again with jittered
// exponential backoff until the registry answers or landing stops, which
// aborts the block unlanded. The time waited counts in
// Stats.RegistryWait.
func (p *Pipeline) holding(ln *lane, rec *source.Record, f func() error) error {
	// Every record comes through here: the one that needs no registry,
	// or finds it answering, costs one call.
	err := f()
	if !errors.Is(err, avro.ErrUnavailable) {
		return err
	}
	return p.waitRegistry(ln, rec, f, err)
}

// waitRegistry is holding once the registry failed to answer (first).
func (p *Pipeline) waitRegistry(ln *lane, rec *source.Record, f func() error, first error) error {
	start, last := time.Now(), first // the registry's last failure
	tried := false
	attempt := func() (struct{}, error) {
		if !tried { // the first attempt was holding's
			tried = true
			return struct{}{}, first
		}
		err := f()
		if errors.Is(err, avro.ErrUnavailable) {
			last = err
			return struct{}{}, err
		}
		return struct{}{}, backoff.Permanent(err)
	}
	wait := &backoff.ExponentialBackOff{InitialInterval: registryBackoff, RandomizationFactor: 0.5, Multiplier: 2,
		MaxInterval: maxRegistryBackoff}
	_, err := backoff.Retry(p.landCtx, attempt, backoff.WithBackOff(wait), backoff.WithMaxElapsedTime(0),
		backoff.WithNotify(func(err error, next time.Duration) {
			p.log.Warn("schema registry unavailable: the partition waits", "source", ln.w.block.Source,
				"partition", ln.w.block.Partition, "offset", rec.Offset, "retry_in", next.Round(time.Millisecond), "err", err)
		}))
	p.stats.RegistryWait.Add(int64(time.Since(start)))
	if err != nil && p.landCtx.Err() != nil {
		ln.abort = fmt.Errorf("%s partition %d offset %d: %w", ln.w.block.Source, ln.w.block.Partition, rec.Offset, last)
		return last
	}
	return err
}

// The backoff of registry lookups: 250ms doubling to 30s, jittered.
var (
	registryBackoff    = 250 * time.Millisecond
	maxRegistryBackoff = 30 * time.Second
)

// classify decodes a record and decides what becomes of it.
func (p *Pipeline) classify(ln *lane, i int) {
	s := &ln.win.slots[i]
	s.c.Topic = ln.w.block.Topic
	dec, err := ln.classifier.Decode(s.v, &s.c)
	if err != nil {
		s.die("decode", err)
		return
	}
	s.dec = dec
	c := &s.c
	ln.counts.kinds[c.Kind]++
	c.RecordMicros = ln.w.block.Records[ln.win.base+i].TimeMicros
	if c.Table != "" && c.Kind != change.KindSchemaRecord && !p.plan.Allowed(c.Table) {
		s.act = actSkip
		ln.counts.filtered++
		return
	}
	switch c.Kind {
	case change.KindSchemaRecord:
		s.act = actMeta
		ln.counts.schemas++
	case change.KindHeartbeat:
		s.act = actSkip
		ln.counts.heartbeats++
	case change.KindMessage:
		s.act = actSkip
		ln.counts.skipped++
	case change.KindObjectMetadata, change.KindStreamMetadata, change.KindTransaction:
		s.act = actEvent
	case change.KindDDL, change.KindSchemaChange:
		s.act = actDDL
	case change.KindDML:
		s.act = actRow
		if o := p.plan.TableOptions(c.Table); o.SourceKey || o.SourceHeaders {
			if err := p.addSourceColumns(ln, c, &ln.w.block.Records[ln.win.base+i], o); err != nil && ln.abort == nil {
				s.die("unwrap", fmt.Errorf("record key: %w", err))
			}
		}
	default:
		s.die("classify", fmt.Errorf("unhandled record class %s", c.Kind))
	}
}

// resolve gives a record the table version it lands in, after the
// resolver saw every schema-bearing record of its partition before it. It
// runs in the batch stage, which takes records in order.
func (p *Pipeline) resolve(w *worker, s *slot, offset int64) {
	c := &s.c
	if p.journal != nil && (c.Kind == change.KindSchemaRecord || c.Kind == change.KindObjectMetadata) {
		p.keepInCatalog(w, s, offset, c.Kind.String(), c.Table, c.Raw.MarshalTo(nil))
	}
	switch s.act {
	case actMeta:
		w.scope.Observe(c)
		s.act = actSkip
	case actRow:
		t, changed, err := w.scope.Resolve(c, s.dec)
		if err != nil {
			s.die("schema", err)
			return
		}
		s.table = t
		if changed && p.journal != nil {
			// The version a partition's rows land in depends on the rows
			// before (inference, widening): a new owner takes it from the
			// catalog rather than from rows it does not read again.
			rec, err := w.scope.Record(c.Table)
			if err != nil {
				s.die("schema", err)
				return
			}
			p.keepInCatalog(w, s, offset, catalogVersion, c.Table, rec)
		}
	case actEvent, actDDL:
		w.scope.Observe(c)
		s.table = p.resolver.Event(eventDataset(c.Kind), c)
	}
}

// catalogVersion is the kind of the catalog entries that hold the table
// version a partition's rows land in (resolve.Scope.Record).
const catalogVersion = "table_version"

// keepInCatalog queues an entry, at offset of its partition, for the
// partition's catalog in the lake (package state): a metadata record or a
// table version, which a new owner of the partition observes again when it
// resumes past it. The record's offset is held from counting as durable
// until the entry is written.
func (p *Pipeline) keepInCatalog(w *worker, s *slot, offset int64, kind, table string, record []byte) {
	data, err := json.Marshal(state.CatalogEntry{Kind: kind, Table: table, Offset: offset, Record: record})
	if err != nil {
		return
	}
	w.catalog = append(w.catalog, catalogEntry{
		key: state.CatalogKey(w.block.Source, w.block.Partition, kind, table, offset), data: data, version: kind == catalogVersion})
	s.keep = true
}

func eventDataset(k change.Kind) string {
	switch k {
	case change.KindDDL, change.KindSchemaChange:
		return schema.TableDDL
	case change.KindTransaction:
		return schema.TableTransactions
	}
	return schema.TableStreamMetadata
}

// batchStage is the handler: the window a lane finished goes to the
// block's batching goroutine (batchWindow), which takes windows in order
// while the lanes go on with the next.
func (p *Pipeline) batchStage(msg *message.Message) error {
	ln := laneOf(msg)
	ln.done <- ln.win
	return nil
}

// batchWindow resolves a window's records and hands them to the batcher
// in order, and queues its dead letters. Only storage failures are errors.
// Consecutive rows and messages that need no landing go to the batcher as
// one run (batch.Batcher.AddRun), which converts the rows of different
// files in parallel; a DDL, a dead letter or a record kept in the catalog
// ends the run and is handled on its own.
func (p *Pipeline) batchWindow(w *worker, win *window) error {
	if p.stageFault != nil {
		p.stageFault("batch")
	}
	ctx := p.landCtx // a stop signal ends reading, not the landing of what was read
	b := w.block
	w.run, w.runSlots = w.run[:0], w.runSlots[:0]
	for i := range win.slots {
		s := &win.slots[i]
		j := win.base + i
		at := b.Position(j)
		w.at = at
		if s.act != actSkip && s.act != actDead {
			p.resolve(w, s, at.Offset)
		}
		// cdclake's own datasets (events, DDL) are never committed.
		if p.resume != nil && s.act == actRow && p.plan.BatchConfig(s.table.Name).Commit {
			held, err := p.resume.holds(ctx, s.table.Name, at)
			if err != nil {
				return p.fail(err)
			}
			if held {
				s.act = actSkip
				p.stats.InTable.Add(1)
			}
		}
		if !s.keep && (s.act == actSkip || s.act == actRow || s.act == actEvent) {
			it := batch.Item{At: at}
			if s.act != actSkip {
				it.C, it.T, it.Size = &s.c, s.table, len(b.Records[j].Value)
			}
			w.run, w.runSlots = append(w.run, it), append(w.runSlots, i)
			continue
		}
		if err := p.addRun(w, win); err != nil {
			return err
		}
		switch s.act {
		case actSkip:
			if err := p.batcher.Skip(ctx, at); err != nil {
				return p.fail(err)
			}
		case actDDL, actRow, actEvent:
			if s.act == actDDL {
				cause := batch.CauseDDL
				if s.c.Kind == change.KindSchemaChange {
					cause = batch.CauseSchema
				}
				if err := p.batcher.CloseTable(ctx, s.c.Table, cause); err != nil {
					return p.fail(err)
				}
			}
			w.run = append(w.run, batch.Item{C: &s.c, T: s.table, At: at, Size: len(b.Records[j].Value)})
			w.runSlots = append(w.runSlots, i)
			if err := p.addRun(w, win); err != nil {
				return err
			}
		}
		if s.keep && s.act != actDead {
			if err := p.batcher.Hold(ctx, at, w.holder(at)); err != nil {
				return p.fail(err)
			}
		}
		if s.act == actDead {
			if err := p.deadLetter(w, s, j); err != nil {
				return err
			}
		}
	}
	return p.addRun(w, win)
}

// addRun hands the run of the window's records gathered in w to the
// batcher, and dead-letters its rows that did not convert.
func (p *Pipeline) addRun(w *worker, win *window) error {
	if len(w.run) == 0 {
		return nil
	}
	defer func() {
		clear(w.run)
		w.run, w.runSlots = w.run[:0], w.runSlots[:0]
	}()
	if err := p.batcher.AddRun(p.landCtx, w.run, w.holder(w.run[0].At)); err != nil {
		return p.fail(err)
	}
	for k, it := range w.run {
		s := &win.slots[w.runSlots[k]]
		rowErr, isRow := it.Err.(*batch.RowError)
		switch {
		case it.C == nil:
		case it.Err == nil && s.act == actRow:
			w.bcounts.rows++
		case it.Err == nil:
			w.bcounts.events++
		case isRow:
			s.die("convert", rowErr.Err)
			if err := p.deadLetter(w, s, win.base+w.runSlots[k]); err != nil {
				return err
			}
		default:
			return p.fail(it.Err)
		}
	}
	return nil
}

// deadLetter queues the dead letter of record j of the block, held until
// the block's dead letters are written.
func (p *Pipeline) deadLetter(w *worker, s *slot, j int) error {
	b := w.block
	at := b.Position(j)
	w.bcounts.dead++
	rec := &b.Records[j]
	w.dead.Add(at, s.stage, s.err, rec.Key, rec.Value, deadHeaders(rec.Headers))
	p.deadCount.add(at, s.c.Table, s.stage, s.err)
	if err := p.batcher.Hold(p.landCtx, at, w.holder(at)); err != nil {
		return p.fail(err)
	}
	p.log.Debug("dead letter", "source", at.Source, "offset", at.Offset, "stage", s.stage, "reason", s.err)
	return nil
}

// holder returns what holds the block's dead letters and catalog entries
// from counting as durable until they are written, made at its first use.
func (w *worker) holder(at sinks.Position) any {
	if w.hold == nil {
		w.hold = &at
	}
	return w.hold
}

// deadHeaders returns a record's headers for its dead letter.
func deadHeaders(hs []source.Header) []deadletter.Header {
	if len(hs) == 0 {
		return nil
	}
	out := make([]deadletter.Header, len(hs))
	for i, h := range hs {
		out[i] = deadletter.Header{Key: h.Key, Value: h.Value}
	}
	return out
}

// Names of the source columns a route can land (resolve.TableOptions).
const (
	colKey     = "_cdc_key"
	colHeaders = "_cdc_headers"
)

// addSourceColumns adds a row's record key and headers as extra columns:
// the key as binary (NULL when the record has none), the headers as a JSON
// array of {"key", "value"} objects, a value that is not UTF-8 as
// "value_base64" instead. A Confluent-framed Avro key, with a registry,
// lands as the JsonConverter would have sent it: {"schema":…,"payload":…}.
func (p *Pipeline) addSourceColumns(ln *lane, c *change.Change, rec *source.Record, o *resolve.TableOptions) error {
	if o.SourceKey {
		key := rec.Key
		if avro.Framed(key) && ln.unwrapper.Avro != nil {
			err := p.holding(ln, rec, func() error {
				s, payload, err := ln.unwrapper.Avro.Transcode(p.landCtx, rec.Key, ln.key[:0])
				if err == nil {
					ln.key = append(append(append(append(append(payload, `{"schema":`...), s.Connect...),
						`,"payload":`...), payload...), '}')
					key = ln.key[len(payload):]
				}
				return err
			})
			if err != nil {
				return err
			}
		}
		c.AddBytes(colKey, key)
	}
	if o.SourceHeaders {
		type header struct {
			Key         string  `json:"key"`
			Value       *string `json:"value,omitempty"`
			ValueBase64 string  `json:"value_base64,omitempty"`
		}
		hs := make([]header, len(rec.Headers))
		for i, h := range rec.Headers {
			hs[i].Key = h.Key
			if utf8.Valid(h.Value) {
				v := string(h.Value)
				hs[i].Value = &v
			} else {
				hs[i].ValueBase64 = base64.StdEncoding.EncodeToString(h.Value)
			}
		}
		text, _ := json.Marshal(hs)
		c.AddJSONText(colHeaders, text)
	}
	return nil
}
