// Package batch is the batching stage: it appends row changes to the column
// builders of their output file and hands full files to a Sink.
//
// # Files
//
// An output file holds rows of one table version, one partition directory
// and one source partition (Kafka partition or input file), in source order.
// Its name is derived from the source, the partition and the offset of its
// first row, so a replay of the same input rewrites the same names.
//
// # When a file closes
//
//   - max rows, max bytes (estimated from the input size) or max age reached;
//   - a DDL or schema change event for its table (CloseTable);
//   - the memory bound: when all open buffers together exceed
//     Config.MaxBufferedBytes, those idle the longest first give their
//     builders back and keep their rows compressed (spill), staying open,
//     until the total is below three quarters of it; only if what is left
//     is above that are the largest written; when more than
//     Config.MaxOpenFiles are open, the one idle the longest is written;
//   - end of input (FlushAll).
//
// # Row logs
//
// A file opens without builders: its rows are checked (converted into
// scratch builders every table shares) and kept in a compact binary log,
// until the log is half of what the file's builders would cost; then they
// move to builders. A file of a few rows costs its rows' bytes, so that
// thousands of tables' files fit the bound without closing early.
//
// A table whose schema changes opens a file for the new version; the old
// version's file stays open until one of the rules above closes it, so two
// interleaving versions do not produce a file per switch.
//
// # Encoding while open
//
// With a sink that encodes files while they are open (sinks.Encoding), a
// file's rows leave its builders every 1,024 rows for its encoder, which
// encodes them on a goroutine of its own beside the appends; what the
// encoder holds (encoded pages, and at most a data page a column not yet
// compressed) counts against MaxBufferedBytes, and a spill hands it the
// builders' rows. The file is the same as one encoded when written.
//
// # Writers
//
// With Config.Writers > 0, a closed file is encoded and stored by a
// goroutine of its own while the batcher goes on appending (at most
// Writers at once); its rows count against MaxBufferedBytes until it is
// stored, and Add waits while open and in-flight files together exceed the
// bound. A failed write fails every later call. Files of a partition whose
// cuts are journaled (Kafka) are written in line, under the partition's
// lock, so that the journal records them in order. FlushAll and
// FlushPartition return once the files they closed are stored.
//
// # Source partitions
//
// Each source partition has its own lock: the appends, in-line writes and
// journal calls of one partition never wait for another's, so a store
// slow to take one partition's file stalls that partition alone. The
// bounds are the batcher's: a call over them takes the batcher's lock and
// may spill or write any partition's files.
//
// # Durability
//
// Only a nil error from sinks.Sink.Write means a file is durable. Each
// partition's tracker then advances the offset below which every message
// is durably landed (or needed no landing); a Kafka source commits exactly
// that.
package batch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/state"
)

// Config bounds the batcher as a whole.
type Config struct {
	// MaxBufferedBytes bounds the memory of open buffers (their Arrow
	// builders, counted by the allocator, and an estimate of the builders
	// themselves) and of files being written.
	MaxBufferedBytes int64
	// MaxOpenFiles bounds the number of open buffers.
	MaxOpenFiles int
	// Writers is the number of files written at once beside the appends;
	// 0 writes each file in line, before the call that closed it returns.
	Writers int
	// Appenders is the number of goroutines that convert the rows of a
	// run (AddRun), each taking whole files; 0 or 1 converts them on the
	// caller's.
	Appenders int
	// Written, when set, is told of every file stored. It is called on
	// the goroutines that write files, concurrently, after the file is
	// durable and before its rows count as durable.
	Written func(WrittenFile)
	// Fenced, when set, is told when a partition is given up because
	// another instance took it over: key is the file whose state found
	// it. It is called with the partition's lock held and must not call
	// back into the batcher.
	Fenced func(source string, part int32, key string)
	// Landed, when set, reads the offsets of the rows of a file the store
	// holds. A replay needs it for a recorded cut it does not repeat whose
	// file the instance that recorded it wrote late (see takeKey); without
	// it such a file stops the run.
	Landed func(ctx context.Context, key string) ([]int64, error)
}

// WrittenFile is a stored file, as Config.Written is told of it.
type WrittenFile struct {
	Table string
	// Cause is why the file was closed.
	Cause Cause
	Rows  int
	Bytes int64
	// Took is how long storing it took.
	Took time.Duration
}

// Cause is why a file was closed.
type Cause string

// The causes of closing a file.
const (
	CauseRows      Cause = "rows"       // it reached its route's max_rows
	CauseBytes     Cause = "bytes"      // it reached its route's max_bytes
	CauseAge       Cause = "age"        // it reached its route's max_age
	CauseDDL       Cause = "ddl"        // a DDL event of its table
	CauseSchema    Cause = "schema"     // a schema change event of its table
	CauseMemory    Cause = "memory"     // the memory bound (max_buffered_bytes)
	CauseOpenFiles Cause = "open_files" // the bound on open files (max_open_files)
	CauseHandover  Cause = "handover"   // its partition moved to another consumer
	CauseReplay    Cause = "replay"     // it repeats a cut a previous owner recorded
	CauseShutdown  Cause = "shutdown"   // the end of the input, or a stop
)

// Causes lists every Cause.
var Causes = []Cause{CauseRows, CauseBytes, CauseAge, CauseDDL, CauseSchema, CauseMemory, CauseOpenFiles,
	CauseHandover, CauseReplay, CauseShutdown}

// limitCause is why a file that reached a limit of tc closes.
func limitCause(buf *buffer, tc *TableConfig) Cause {
	if buf.rows >= tc.MaxRows {
		return CauseRows
	}
	return CauseBytes
}

// TableConfig is a table's route settings for batching and writing.
type TableConfig struct {
	// Path is the directory template (see Template).
	Path     *Template
	MaxRows  int
	MaxBytes int64
	MaxAge   time.Duration
	Write    sinks.WriteOptions
}

// RowError is returned by Add for a change that could not be converted; the
// caller dead-letters it. The pipeline goes on.
type RowError struct{ Err error }

func (e *RowError) Error() string { return e.Err.Error() }
func (e *RowError) Unwrap() error { return e.Err }

// TableStats counts what landed for one table.
type TableStats struct {
	Rows, Files, Bytes int64
	// Versions holds the table versions files were written in, by
	// fingerprint: each source partition numbers its own versions.
	Versions map[uint64]bool
}

// Journal records files' cut points around their writes (package state):
// Intend before a file of an owned partition is written, Done after. The
// Batcher calls both under its lock.
type Journal interface {
	Owns(source string, part int32) bool
	Intend(ctx context.Context, source string, part int32, cut state.Cut) error
	Done(ctx context.Context, source string, part int32, cut state.Cut, durable int64) error
	// Check returns an error wrapping state.ErrFenced once it knows that
	// another instance claimed the partition (asked before each retry of
	// a file's write).
	Check(ctx context.Context, source string, part int32) error
}

// replay is what a restored partition's state says of the messages a
// replay reads again: the offsets whose rows are in written files, and the
// cuts of files that were about to be written and are not there (yet).
type replay struct {
	landed []int64 // sorted
	// cuts are repeated exactly: the buffer that opens at a cut's first
	// offset, for its table version and directory, is written after the
	// cut's last offset and not before, whatever else would close it. An
	// instance that lost the partition while uploading that file may
	// still complete its upload: it then holds the same rows.
	cuts []state.Cut // by First
	// forced are the open buffers of cuts.
	forced []*buffer
}

// covered reports whether the row of the message at offset is in a written
// file (a message lands one row at most).
func (r *replay) covered(offset int64) bool {
	_, found := slices.BinarySearch(r.landed, offset)
	return found
}

type bufKey struct {
	table  string
	fp     uint64
	dir    string
	source string
	part   int32
}

// partition is what the batcher knows of one source partition. Its lock
// serializes the partition's appends, the writes of its files in line and
// its journal calls; partitions go on independently of each other.
type partition struct {
	mu   sync.Mutex
	key  partKey
	open map[bufKey]*buffer
	// byTable holds the open buffers of each table (CloseTable), and
	// aging counts those whose table has a max age (FlushExpired).
	byTable map[string][]*buffer
	aging   int
	// tracker advances the partition's durable offset.
	tracker *tracker
	replay  *replay
	// fenced is set when another instance took the partition over while
	// this one held it: nothing more of it is landed here until Restore.
	fenced bool
	// checks checks the rows its files log (scratch builders are not
	// shared between partitions): checks[k] is the k-th appender's of a
	// run (AddRun), checks[0] that of single rows.
	checks []*checks
	// run is AddRun's scratch; bounded is the group of offsets (see
	// boundsEvery) the bounds were last enforced in.
	run     runScratch
	bounded int64
}

// Batcher is the batching stage. Safe for concurrent use: calls for
// different source partitions run in parallel.
//
// Locks: a partition's (partition.mu) guards its files and positions; mu
// guards what spans partitions (the bounds, FlushAll) and is taken before
// a partition's, never while holding one. The counters every partition
// changes are atomic, and statsMu and errMu guard only their fields.
type Batcher struct {
	mu     sync.Mutex
	cfg    Config
	bound  atomic.Int64 // cfg.MaxBufferedBytes
	tables func(table string) *TableConfig
	sink   sinks.Sink
	mem    memory.Allocator
	log    *slog.Logger
	now    func() time.Time
	// parts holds a *partition per source partition seen (partKey).
	parts sync.Map
	// held is what open buffers hold (their footprints), spilledHeld the
	// part of it that is spilled rows; nopen counts them.
	held        atomic.Int64
	spilledHeld atomic.Int64
	nopen       atomic.Int64
	// written counts the files stored, fenced the partitions given up to
	// another instance.
	written atomic.Int64
	fenced  atomic.Int64
	// encoding is sink, when it encodes files while they are open.
	encoding sinks.Encoding
	// logLimit is how large a file's log grows before its rows move to
	// builders, given what the file's builders are estimated to cost (see
	// buffer.append).
	logLimit func(builders int64) int64
	// appends counts rows appended, to order buffers by their latest row.
	appends atomic.Int64
	journal Journal

	// obufs is enforceBounds' list of open buffers, kept for the next.
	obufs []openBuf

	statsMu sync.Mutex
	stats   map[string]*TableStats

	// Files being written beside the appends (Config.Writers): writing
	// holds a token of slots; inflight counts their input bytes, wrote is
	// signalled after each, werr is the first failure.
	slots    chan struct{}
	inflight atomic.Int64
	wrote    chan struct{}
	writes   sync.WaitGroup
	failed   atomic.Bool // werr is set
	errMu    sync.Mutex
	werr     error
}

// New returns a Batcher writing to sink. Both bounds of cfg must be at
// least 1.
func New(cfg Config, tables func(string) *TableConfig, sink sinks.Sink, mem memory.Allocator, log *slog.Logger) (*Batcher, error) {
	if cfg.MaxBufferedBytes < 1 || cfg.MaxOpenFiles < 1 {
		return nil, fmt.Errorf("batch: bounds must be at least 1 (max buffered bytes %d, max open files %d)",
			cfg.MaxBufferedBytes, cfg.MaxOpenFiles)
	}
	b := &Batcher{cfg: cfg, tables: tables, sink: sink, mem: mem, log: log, now: time.Now,
		stats: map[string]*TableStats{}, logLimit: halfOf}
	b.bound.Store(cfg.MaxBufferedBytes)
	b.encoding, _ = sink.(sinks.Encoding)
	if cfg.Writers > 0 {
		b.slots = make(chan struct{}, cfg.Writers)
		b.wrote = make(chan struct{}, 1)
	}
	return b, nil
}

func halfOf(n int64) int64 { return n / 2 }

// SetJournal makes the Batcher record the cut points of the files of the
// partitions j owns; call it before the first Add.
func (b *Batcher) SetJournal(j Journal) { b.journal = j }

// partition returns the state of a source partition, made on first use.
func (b *Batcher) partition(source string, part int32) *partition {
	k := partKey{source, part}
	if v, ok := b.parts.Load(k); ok {
		return v.(*partition)
	}
	v, _ := b.parts.LoadOrStore(k, &partition{key: k, open: map[bufKey]*buffer{}, byTable: map[string][]*buffer{}, tracker: newTracker(),
		checks: []*checks{newChecks(b.mem)}, bounded: -1})
	return v.(*partition)
}

// partitions returns every partition seen, in key order.
func (b *Batcher) partitions() []*partition {
	var out []*partition
	b.parts.Range(func(_, v any) bool {
		out = append(out, v.(*partition))
		return true
	})
	slices.SortFunc(out, func(x, y *partition) int {
		return cmp.Or(cmp.Compare(x.key.source, y.key.source), cmp.Compare(x.key.part, y.key.part))
	})
	return out
}

// failure returns the first write failure, which fails every later call.
func (b *Batcher) failure() error {
	if !b.failed.Load() {
		return nil
	}
	b.errMu.Lock()
	defer b.errMu.Unlock()
	return b.werr
}

// Fail makes every later call return err and keeps the open files from
// being written: after a panic in the batch stage, what the buffers hold is
// not known to be whole. Files already being written are complete and land.
func (b *Batcher) Fail(err error) { b.fail(err) }

func (b *Batcher) fail(err error) {
	b.errMu.Lock()
	if b.werr == nil {
		b.werr = err
		b.failed.Store(true)
	}
	b.errMu.Unlock()
}

// Restore prepares a claimed partition for the replay of its messages
// from its committed offset: the messages at the landed offsets (read from
// the files written above that offset) are not landed again, and the files
// of cuts (recorded as about to be written, and not found) are cut again
// at the same offsets.
func (b *Batcher) Restore(source string, part int32, landed []int64, cuts []state.Cut) {
	p := b.partition(source, part)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fenced = false
	if len(landed) == 0 && len(cuts) == 0 {
		p.replay = nil
		return
	}
	landed = slices.Clone(landed)
	slices.Sort(landed)
	cuts = slices.Clone(cuts)
	slices.SortFunc(cuts, func(a, c state.Cut) int { return cmp.Compare(a.First, c.First) })
	p.replay = &replay{landed: landed, cuts: cuts}
}

// passCuts deals with every recorded cut that begins at or before at and
// that no buffer repeats: one whose first message has passed, or that
// begins at at but that the row c of table version t (nil for a message
// that is no row now) does not open a buffer for. Such a cut's key is
// taken (takeKey), unless the replay's own file takes it: c opens a file
// in the cut's directory, named after the same first offset. p's lock is
// held; the caller returns when p.replay changed (the partition was
// fenced).
func (b *Batcher) passCuts(ctx context.Context, p *partition, at sinks.Position, c *change.Change, t *schema.Table) error {
	rp := p.replay
	for i := 0; i < len(rp.cuts) && rp.cuts[i].First <= at.Offset; {
		cut := rp.cuts[i]
		if cut.First == at.Offset && c != nil {
			key := b.bufferKey(b.tables(t.Name), c, t, at)
			if _, open := p.open[key]; !open && cut.Dir() == key.dir {
				if cut.Table == t.Name && cut.Fingerprint == t.Fingerprint {
					i++ // repeated: the buffer opened for c takes it (forcedCut)
					continue
				}
				rp.cuts = slices.Delete(rp.cuts, i, i+1)
				b.log.Warn("a recorded cut is not repeated on replay: its first row lands as another table version, in a file of the same name",
					"key", cut.Key, "first", cut.First, "last", cut.Last, "version", t.Version)
				continue
			}
		}
		rp.cuts = slices.Delete(rp.cuts, i, i+1)
		if err := b.takeKey(ctx, p, cut, t, at); err != nil || p.replay != rp {
			return err
		}
	}
	return nil
}

// takeKey deals with a recorded cut the replay does not repeat: the
// decoding state, or the route's settings, differ from those the previous
// owner cut it with, and its rows land in files of other names. The
// previous owner may still be uploading the cut's file (it lost the
// partition during the upload): an empty file now takes the name, created
// once, so that its upload fails and the rows do not land twice. A file
// already there is that upload's: its rows landed, and are passed over
// here. t, when of the cut's table, gives the empty file its columns, so
// that it reads as one more file of the table. p's lock is held.
func (b *Batcher) takeKey(ctx context.Context, p *partition, cut state.Cut, t *schema.Table, at sinks.Position) error {
	b.log.Warn("a recorded cut is not repeated on replay: its rows land in files of other names, and an empty file takes its name",
		"key", cut.Key, "first", cut.First, "last", cut.Last, "rows", cut.Rows)
	if t == nil || t.Name != cut.Table {
		t = schema.NewTable(cut.Table, 0, schema.LayoutImages, nil, nil, false, nil)
	}
	rb := array.NewRecordBuilder(b.mem, t.Arrow)
	rec := rb.NewRecordBatch()
	rb.Release()
	defer rec.Release()
	tc := b.tables(cut.Table)
	src, part := at.Source, at.Partition
	f := &sinks.File{Key: cut.Key, Table: cut.Table, Version: t.Version, Parts: []sinks.Part{{Record: rec}},
		First: sinks.Position{Source: src, Partition: part, Offset: cut.First}, LastOffset: cut.Last,
		Options: tc.Write, Once: true}
	if b.journal != nil {
		f.Check = func(ctx context.Context) error { return b.journal.Check(ctx, src, part) }
	}
	_, err := b.sink.Write(ctx, f)
	switch {
	case errors.Is(err, state.ErrFenced):
		b.fence(p, at, cut.Key, err)
		return nil
	case errors.Is(err, sinks.ErrExists):
		if b.cfg.Landed == nil {
			return fmt.Errorf("%s, a recorded cut not repeated on replay, was written meanwhile by the instance that recorded it, "+
				"and its rows cannot be read here: %w", cut.Key, err)
		}
		offs, err := b.cfg.Landed(ctx, cut.Key)
		if err != nil {
			return fmt.Errorf("reading the offsets of %s, written meanwhile by the instance that recorded its cut: %w", cut.Key, err)
		}
		b.log.Info("the file of a recorded cut not repeated was written by the instance that recorded it: its rows are not landed again",
			"key", cut.Key, "rows", len(offs))
		rp := p.replay
		rp.landed = append(rp.landed, offs...)
		slices.Sort(rp.landed)
		rp.landed = slices.Compact(rp.landed)
		return nil
	case err != nil:
		return fmt.Errorf("taking the name of %s, a recorded cut not repeated on replay: %w", cut.Key, err)
	}
	return nil
}

// forcedCut returns, and forgets, the recorded cut of a buffer opening at
// offset for table version t in dir.
func (r *replay) forcedCut(t *schema.Table, dir string, offset int64) *state.Cut {
	for i, c := range r.cuts {
		if c.First == offset && c.Table == t.Name && c.Fingerprint == t.Fingerprint && c.Dir() == dir {
			r.cuts = slices.Delete(r.cuts, i, i+1)
			return &c
		}
	}
	return nil
}

// settle deals with the recorded cuts that begin at or before offset and
// are not repeated (passCuts), and writes the files of the repeated ones
// that end at or before it: their last message was handed over. One that
// did not receive that message as its last row was cut differently than
// recorded (the decoding state differs); it is written as it is, and a
// warning says so. p's lock is held.
func (b *Batcher) settle(ctx context.Context, p *partition, at sinks.Position) error {
	rp := p.replay
	if rp == nil {
		return nil
	}
	if err := b.passCuts(ctx, p, at, nil, nil); err != nil || p.replay != rp {
		return err
	}
	for i := 0; i < len(rp.forced); {
		buf := rp.forced[i]
		if buf.forced.Last > at.Offset {
			i++
			continue
		}
		if buf.last != buf.forced.Last {
			b.log.Warn("a recorded cut ended differently on replay", "key", buf.forced.Key, "last", buf.forced.Last, "replayed_last", buf.last)
		}
		if err := b.flush(ctx, p, buf, CauseReplay); err != nil {
			return err
		}
		if p.replay != rp {
			return nil // fenced meanwhile
		}
	}
	return nil
}

// Durable returns the offset below which every message of a source
// partition is durable, and false when nothing was seen there.
func (b *Batcher) Durable(source string, part int32) (int64, bool) {
	p := b.partition(source, part)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tracker.durable()
}

// Add appends a change that resolved to table version t. size is the size of
// the source message, used for the bytes thresholds. A *RowError means the
// row was rejected; any other error is a storage failure.
func (b *Batcher) Add(ctx context.Context, c *change.Change, t *schema.Table, at sinks.Position, size int) error {
	if err := b.failure(); err != nil {
		return err
	}
	p := b.partition(at.Source, at.Partition)
	err := func() error {
		p.mu.Lock()
		defer p.mu.Unlock() // also when add panics, for Close
		return b.add(ctx, p, c, t, at, size, nil)
	}()
	var rowErr *RowError
	if err != nil && !errors.As(err, &rowErr) {
		return err
	}
	if berr := b.enforceBounds(ctx); berr != nil {
		return berr
	}
	return err
}

// add is Add under p's lock, but for the bounds. A row that does not
// convert is held for holder, unless nil, before any file is written.
func (b *Batcher) add(ctx context.Context, p *partition, c *change.Change, t *schema.Table, at sinks.Position, size int, holder any) error {
	if p.fenced {
		return nil
	}
	rp := p.replay
	if rp != nil && len(rp.cuts) > 0 && rp.cuts[0].First <= at.Offset {
		if err := b.passCuts(ctx, p, at, c, t); err != nil || p.replay != rp {
			return err
		}
	}
	if rp != nil && rp.covered(at.Offset) {
		p.tracker.seen(at.Offset) // already in a written file
		b.log.Debug("row already landed", "table", t.Name, "partition", at.Partition, "offset", at.Offset)
		return b.settle(ctx, p, at)
	}
	tc := b.tables(t.Name)
	buf, opened := b.openBuffer(p, tc, c, t, at)
	if opened && rp != nil {
		if buf.forced = rp.forcedCut(t, buf.dir, at.Offset); buf.forced != nil {
			rp.forced = append(rp.forced, buf)
		}
	}
	p.tracker.seen(at.Offset)
	buf.used = b.appends.Add(1)
	it := Item{C: c, T: t, At: at, Size: size}
	if err := b.appendItem(p.checks[0], buf, &it); err != nil {
		return err
	}
	b.account(buf)
	if it.Err != nil && holder != nil {
		p.tracker.open(at.Offset, holder)
	}
	if buf.forced == nil && (buf.rows >= tc.MaxRows || buf.bytes >= tc.MaxBytes) {
		if ferr := b.flush(ctx, p, buf, limitCause(buf, tc)); ferr != nil {
			return ferr
		}
	}
	if ferr := b.settle(ctx, p, at); ferr != nil {
		return ferr
	}
	return it.Err
}

// openBuffer returns p's open buffer for the row c of table version t at
// at, and whether it opened it; p's lock is held.
func (b *Batcher) openBuffer(p *partition, tc *TableConfig, c *change.Change, t *schema.Table, at sinks.Position) (*buffer, bool) {
	key := b.bufferKey(tc, c, t, at)
	if buf, ok := p.open[key]; ok {
		return buf, false
	}
	dir := key.dir
	// The clock dates the file for max_age alone; nothing landed reads it.
	buf := newBuffer(b.mem, key, t, dir, at, b.now().UnixNano(), b.logLimit)
	buf.maxAge = int64(tc.MaxAge)
	p.attach(buf)
	b.nopen.Add(1)
	p.tracker.open(at.Offset, buf)
	return buf, true
}

// bufferKey is the key of the buffer the row c of table version t at at
// goes to.
func (b *Batcher) bufferKey(tc *TableConfig, c *change.Change, t *schema.Table, at sinks.Position) bufKey {
	return bufKey{table: t.Name, fp: t.Fingerprint, dir: tc.Path.Expand(t.Name, dirMicros(c)), source: at.Source, part: at.Partition}
}

// account takes buf's footprint into the memory bound. The bound counts
// what the buffer holds, not the input: a Connect schema repeated in every
// message costs nothing here, and an open buffer's builders cost
// something before any row.
func (b *Batcher) account(buf *buffer) {
	mem := buf.footprint()
	b.held.Add(mem - buf.held)
	buf.held = mem
	if d := buf.spilledBytes - buf.heldSpilled; d != 0 {
		b.spilledHeld.Add(d)
		buf.heldSpilled = buf.spilledBytes
	}
}

// unaccount takes buf, no longer open, out of the memory bound.
func (b *Batcher) unaccount(buf *buffer) {
	b.held.Add(-buf.held)
	b.spilledHeld.Add(-buf.heldSpilled)
	buf.heldSpilled = 0
}

// Skip records that a message needed no landing (tombstones, heartbeats,
// schema records, dead letters already written).
func (b *Batcher) Skip(ctx context.Context, at sinks.Position) error {
	if err := b.failure(); err != nil {
		return err
	}
	p := b.partition(at.Source, at.Partition)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fenced {
		return nil
	}
	p.tracker.seen(at.Offset)
	return b.settle(ctx, p, at)
}

// Hold marks a message as not yet durable on behalf of holder (for example
// a dead letter not yet written) until Release.
func (b *Batcher) Hold(ctx context.Context, at sinks.Position, holder any) error {
	p := b.partition(at.Source, at.Partition)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fenced {
		return nil
	}
	p.tracker.open(at.Offset, holder)
	p.tracker.seen(at.Offset)
	return b.settle(ctx, p, at)
}

// Release ends a Hold of holder on a source partition.
func (b *Batcher) Release(source string, part int32, holder any) {
	p := b.partition(source, part)
	p.mu.Lock()
	p.tracker.close(holder)
	p.mu.Unlock()
}

// CloseTable writes every open file of a table (on DDL or schema change,
// the cause), whatever its source partition, but for the files of recorded
// cuts a replay repeats: they close at their recorded last offset, since
// when a DDL of another partition arrives depends on timing alone.
func (b *Batcher) CloseTable(ctx context.Context, table string, cause Cause) error {
	return b.flushWhere(ctx, cause, func(p *partition) []*buffer {
		bufs := slices.DeleteFunc(slices.Clone(p.byTable[table]), func(buf *buffer) bool { return buf.forced != nil })
		sortBuffers(bufs)
		return bufs
	})
}

// flushWhere writes the open files pick returns, a partition after
// another, each partition's oldest first; pick runs under the
// partition's lock.
func (b *Batcher) flushWhere(ctx context.Context, cause Cause, pick func(*partition) []*buffer) error {
	for _, p := range b.partitions() {
		err := func() error {
			p.mu.Lock()
			defer p.mu.Unlock()
			for _, buf := range pick(p) {
				if err := b.flush(ctx, p, buf, cause); err != nil {
					return err
				}
			}
			return nil
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

// FlushPartition writes every open file of a source partition (before the
// partition moves to another consumer).
func (b *Batcher) FlushPartition(ctx context.Context, source string, part int32) error {
	p := b.partition(source, part)
	err := func() error {
		p.mu.Lock()
		defer p.mu.Unlock()
		var bufs []*buffer
		for _, buf := range p.sorted(nil) {
			if p.complete(buf) {
				bufs = append(bufs, buf)
			}
		}
		return b.writeAll(ctx, p, bufs, CauseHandover)
	}()
	return cmp.Or(err, b.waitWrites())
}

// complete reports whether buf may be written before its rows reached a
// limit: always, unless it repeats a recorded cut whose last offset was not
// handed over yet. Such a buffer is left unwritten when its partition is
// handed over or the run ends; its next reader repeats the cut.
func (p *partition) complete(buf *buffer) bool {
	return buf.forced == nil || p.tracker.next > buf.forced.Last
}

// DropPartition forgets a source partition without writing its open files
// (the partition was lost to another consumer, which will read those
// messages again): its buffers are released and its positions reset.
func (b *Batcher) DropPartition(source string, part int32) {
	p := b.partition(source, part)
	p.mu.Lock()
	defer p.mu.Unlock()
	b.drop(p)
}

// drop releases p's buffers and forgets its positions; p's lock is held.
func (b *Batcher) drop(p *partition) {
	for k, buf := range p.open {
		b.unaccount(buf)
		b.nopen.Add(-1)
		buf.release()
		delete(p.open, k)
	}
	clear(p.byTable)
	p.aging = 0
	p.tracker = newTracker()
	p.replay = nil
}

// FlushExpired writes files older than their table's max age.
func (b *Batcher) FlushExpired(ctx context.Context) error {
	now := b.now().UnixNano()
	return b.flushWhere(ctx, CauseAge, func(p *partition) []*buffer {
		if p.aging == 0 {
			return nil
		}
		return p.sorted(func(buf *buffer) bool {
			return buf.maxAge > 0 && now-buf.born >= buf.maxAge && buf.forced == nil
		})
	})
}

// FlushAll writes every open file, but those repeating a recorded cut
// that the input did not complete (see complete), and returns once they
// are stored.
func (b *Batcher) FlushAll(ctx context.Context) error {
	for _, p := range b.partitions() {
		err := func() error {
			p.mu.Lock()
			defer p.mu.Unlock()
			var bufs []*buffer
			for _, buf := range p.sorted(nil) {
				if !p.complete(buf) {
					b.log.Info("a file repeating a recorded cut is left to the next run", "key", buf.forced.Key, "last", buf.forced.Last)
					continue
				}
				bufs = append(bufs, buf)
			}
			return b.writeAll(ctx, p, bufs, CauseShutdown)
		}()
		if err != nil {
			return err
		}
	}
	return b.waitWrites()
}

// writeAll writes bufs of p, in order; p's lock is held.
func (b *Batcher) writeAll(ctx context.Context, p *partition, bufs []*buffer, cause Cause) error {
	b.finishEncoders(bufs)
	for i, buf := range bufs {
		bufs[i] = nil // written: its memory is free to go
		if err := b.flush(ctx, p, buf, cause); err != nil {
			return err
		}
	}
	return nil
}

// finishEncoders encodes bufs, files about to be written, to their end
// (starting an encoder for those that have none) on a goroutine per core,
// and returns when they are done: the files written in line after it (a
// journaled partition's, in order) then only store what was encoded. A
// failure is the file's write's.
func (b *Batcher) finishEncoders(bufs []*buffer) {
	if b.encoding == nil {
		return
	}
	slots := make(chan struct{}, runtime.GOMAXPROCS(0))
	var done sync.WaitGroup
	for _, buf := range bufs {
		// Files with spilled or logged rows are left to their writes,
		// which decode those one file at a time.
		if len(buf.spilled) > 0 || buf.log.rows > 0 || (buf.enc == nil && !buf.live()) || b.startEncoding(buf) != nil {
			continue
		}
		parts, err := buf.parts()
		if err != nil {
			continue
		}
		buf.sealed = true
		slots <- struct{}{}
		done.Add(1)
		go func() {
			defer done.Done()
			if enc, err := buf.enc.finish(); err == nil {
				_ = enc.Finish(parts)
			}
			<-slots
		}()
	}
	done.Wait()
}

// waitWrites waits, holding no partition's lock, until every file being
// written is stored, and returns the first write failure.
func (b *Batcher) waitWrites() error {
	b.writes.Wait()
	return b.failure()
}

// Stats returns a copy of the per-table counters.
func (b *Batcher) Stats() map[string]TableStats {
	b.statsMu.Lock()
	defer b.statsMu.Unlock()
	out := make(map[string]TableStats, len(b.stats))
	for k, v := range b.stats {
		vs := make(map[uint64]bool, len(v.Versions))
		for x := range v.Versions {
			vs[x] = true
		}
		out[k] = TableStats{Rows: v.Rows, Files: v.Files, Bytes: v.Bytes, Versions: vs}
	}
	return out
}

// OpenFiles returns the number of open buffers.
func (b *Batcher) OpenFiles() int { return int(b.nopen.Load()) }

// Memory is what the batcher holds against Config.MaxBufferedBytes.
type Memory struct {
	// Buffered is what open files and files being written hold; Spilled
	// the part of it that open files keep as compressed rows.
	Buffered, Spilled int64
	// Bound is Config.MaxBufferedBytes.
	Bound int64
}

// Memory returns what the batcher holds now.
func (b *Batcher) Memory() Memory {
	return Memory{Buffered: b.held.Load() + b.inflight.Load(), Spilled: b.spilledHeld.Load(), Bound: b.bound.Load()}
}

// Written returns the number of files stored.
func (b *Batcher) Written() int64 { return b.written.Load() }

// Fenced returns how often a partition was given up because another
// instance took it over.
func (b *Batcher) Fenced() int64 { return b.fenced.Load() }

// DurableTotal returns the sum of every partition's durable offset: it
// grows whenever anything becomes durable (a file written, a message that
// needed no landing settled), which is how a watcher tells a run that makes
// progress from one that is stuck. Its value means nothing else.
func (b *Batcher) DurableTotal() int64 {
	var sum int64
	for _, p := range b.partitions() {
		p.mu.Lock()
		d, _ := p.tracker.durable()
		p.mu.Unlock()
		sum += d
	}
	return sum
}

// Close releases buffers that were never written (after a failure), once
// the files being written are done.
func (b *Batcher) Close() {
	b.writes.Wait()
	for _, p := range b.partitions() {
		p.mu.Lock()
		for k, buf := range p.open {
			buf.release()
			delete(p.open, k)
			b.nopen.Add(-1)
		}
		clear(p.byTable)
		p.aging = 0
		for _, cs := range p.checks {
			cs.release()
		}
		p.mu.Unlock()
	}
}

// sorted returns p's open buffers that match (all with nil) oldest
// first, for a deterministic order.
func (p *partition) sorted(match func(*buffer) bool) []*buffer {
	var out []*buffer
	for _, buf := range p.open {
		if match == nil || match(buf) {
			out = append(out, buf)
		}
	}
	sortBuffers(out)
	return out
}

// attach makes buf an open buffer of p.
func (p *partition) attach(buf *buffer) {
	p.open[buf.key] = buf
	p.byTable[buf.key.table] = append(p.byTable[buf.key.table], buf)
	if buf.maxAge > 0 {
		p.aging++
	}
}

func sortBuffers(out []*buffer) {
	sort.Slice(out, func(i, j int) bool {
		a, c := out[i], out[j]
		if a.born != c.born {
			return a.born < c.born
		}
		if a.key.table != c.key.table {
			return a.key.table < c.key.table
		}
		if a.key.dir != c.key.dir {
			return a.key.dir < c.key.dir
		}
		if a.src.Source != c.src.Source {
			return a.src.Source < c.src.Source
		}
		if a.src.Partition != c.src.Partition {
			return a.src.Partition < c.src.Partition
		}
		if a.table.Version != c.table.Version {
			return a.table.Version < c.table.Version
		}
		return a.key.fp < c.key.fp
	})
}

// openBuf is an open buffer of a partition, as enforceBounds sees it.
type openBuf struct {
	p   *partition
	buf *buffer
	// used, held and the flags are read under its partition's lock.
	used, held int64
	// forced: it repeats a recorded cut; spillable: it has builders.
	forced, spillable bool
}

// openBuffers returns every open buffer, in the order of their latest
// rows. The slice is reused by the next call; b.mu is held.
func (b *Batcher) openBuffers() []openBuf {
	out := b.obufs[:0]
	b.parts.Range(func(_, v any) bool {
		p := v.(*partition)
		p.mu.Lock()
		for _, buf := range p.open {
			out = append(out, openBuf{p: p, buf: buf, used: buf.used, held: buf.held,
				forced: buf.forced != nil, spillable: buf.forced == nil && buf.rb != nil})
		}
		p.mu.Unlock()
		return true
	})
	slices.SortFunc(out, func(x, y openBuf) int { return cmp.Compare(x.used, y.used) })
	b.obufs = out
	return out
}

// overBounds reports whether the open files are over a bound, or open
// and in-flight files together over the memory bound.
func (b *Batcher) overBounds() bool {
	bound, held := b.bound.Load(), b.held.Load()
	return held > bound || b.nopen.Load() > int64(b.cfg.MaxOpenFiles) ||
		(b.cfg.Writers > 0 && b.inflight.Load() > 0 && held+b.inflight.Load() > bound)
}

// enforceBounds brings the open files back under the bounds. Over the
// memory bound, buffers give their builders back (spill: the files stay
// open, their rows kept compressed), those idle the longest first, so that
// the tables being written keep theirs, until three quarters of the bound;
// if spilled rows alone still exceed that, the largest files are written.
// Buffers repeating a recorded cut are exempt: they hold no more than they
// held when the cut was made. It holds no partition's lock when called.
func (b *Batcher) enforceBounds(ctx context.Context) error {
	if !b.overBounds() {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	bound := b.bound.Load()
	if b.held.Load() > bound {
		bufs := b.openBuffers()
		defer clear(bufs) // no written buffer stays reachable
		for _, o := range bufs {
			if b.held.Load() <= bound*3/4 {
				break
			}
			if !o.spillable {
				continue
			}
			if err := b.spill(o.p, o.buf); err != nil {
				return err
			}
		}
		// The largest first; among equals, those idle the longest.
		slices.SortStableFunc(bufs, func(x, y openBuf) int { return cmp.Compare(y.held, x.held) })
		for _, o := range bufs {
			if b.held.Load() <= bound*3/4 {
				break
			}
			if o.forced {
				continue
			}
			if err := b.flushOpen(ctx, o.p, o.buf, CauseMemory); err != nil {
				return err
			}
		}
	}
	// Files being written count too: wait for writes to end while open and
	// in-flight files together are above the bound.
	for b.cfg.Writers > 0 && b.inflight.Load() > 0 && b.held.Load()+b.inflight.Load() > bound {
		<-b.wrote
	}
	// Over the open files' bound, the file idle the longest is written: a
	// file still being appended to (a table's metadata dataset, today's
	// file) stays open, one whose table moved on (yesterday's) goes.
	for b.nopen.Load() > int64(b.cfg.MaxOpenFiles) {
		p, idle := b.idlest()
		if idle == nil {
			return nil
		}
		if err := b.flushOpen(ctx, p, idle, CauseOpenFiles); err != nil {
			return err
		}
	}
	return nil
}

// idlest returns the open buffer idle the longest, but those repeating a
// recorded cut, and its partition.
func (b *Batcher) idlest() (*partition, *buffer) {
	var (
		idleP *partition
		idle  *buffer
		used  int64
	)
	b.parts.Range(func(_, v any) bool {
		p := v.(*partition)
		p.mu.Lock()
		for _, buf := range p.open {
			if buf.forced == nil && (idle == nil || buf.used < used) {
				idleP, idle, used = p, buf, buf.used
			}
		}
		p.mu.Unlock()
		return true
	})
	return idleP, idle
}

// spill makes buf, an open buffer of p, give its builders back, unless it
// was written or spilled meanwhile.
func (b *Batcher) spill(p *partition, buf *buffer) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open[buf.key] != buf || buf.rb == nil {
		return nil
	}
	before := buf.held
	if err := buf.spill(); err != nil {
		return err
	}
	b.account(buf)
	b.log.Debug("file spilled", "table", buf.key.table, "dir", buf.dir, "rows", buf.rows,
		"held_before", before, "held", buf.held)
	return nil
}

// flushOpen writes buf, an open buffer of p, unless it was written
// meanwhile.
func (b *Batcher) flushOpen(ctx context.Context, p *partition, buf *buffer, cause Cause) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open[buf.key] != buf {
		return nil
	}
	return b.flush(ctx, p, buf, cause)
}

// fence gives up a partition another instance took over: its open files
// are dropped unwritten, and its messages ignored until it is restored.
func (b *Batcher) fence(p *partition, at sinks.Position, key string, err error) {
	b.log.Warn("another instance took the partition over; its files here are dropped for it to write",
		"source", at.Source, "partition", at.Partition, "key", key, "err", err)
	b.drop(p)
	p.fenced = true
	b.fenced.Add(1)
	if b.cfg.Fenced != nil {
		b.cfg.Fenced(at.Source, at.Partition, key)
	}
}

// flush writes buf, a buffer of p closed for cause, and forgets it; p's
// lock is held. On failure buf is kept open (its rows are not durable) and
// the error returned.
func (b *Batcher) flush(ctx context.Context, p *partition, buf *buffer, cause Cause) error {
	if err := b.failure(); err != nil {
		return err
	}
	if p.open[buf.key] != buf {
		return nil // dropped: its partition was fenced
	}
	// The built record stays with the buffer until it is written, so a
	// failed write can be retried with the same rows; spilled rows are
	// decoded for this write and released after it.
	parts, err := buf.parts()
	if err != nil {
		return err
	}
	buf.sealed = true
	spilled := parts[:len(buf.spilled)]
	owned := true
	defer func() {
		if owned {
			releaseParts(spilled)
		}
	}()
	valid := buf.encodedRows
	tc := b.tables(buf.key.table)
	// A file is named after its first row that lands: a row that failed
	// conversion goes to the dead letters, and a replay must not name a
	// new file after it when the rows that followed it are in a written
	// file of that name already.
	first := buf.src
	named := buf.named
	if named {
		first.Offset = buf.first
	}
	for _, p := range parts {
		for _, r := range p.Ranges {
			valid += r[1] - r[0]
		}
		if !named && len(p.Ranges) > 0 {
			first.Offset = p.Record.Column(7).(*array.Int64).Value(p.Ranges[0][0])
			named = true
		}
	}
	f := &sinks.File{Key: buf.dir + "/" + sinks.ObjectName(first, ".parquet"),
		Table: buf.table.Name, Version: buf.table.Version, Parts: parts, Rows: valid,
		First: first, LastOffset: buf.last, Options: tc.Write}
	var n int64
	journaled := valid > 0 && b.journal != nil && b.journal.Owns(buf.src.Source, buf.src.Partition)
	if valid > 0 && b.journal != nil && !journaled {
		// Every file of a partition handed over between instances must be
		// recorded; one that is not could be rewritten with other rows.
		b.log.Warn("writing a file of a partition this instance has not claimed",
			"key", f.Key, "partition", buf.src.Partition)
	}
	cut := state.Cut{Key: f.Key, Table: buf.table.Name, Fingerprint: buf.table.Fingerprint,
		First: buf.src.Offset, Last: buf.last, Rows: valid}
	buf.offsets.record(&cut)
	if journaled {
		if err := b.journal.Intend(ctx, buf.src.Source, buf.src.Partition, cut); err != nil {
			if errors.Is(err, state.ErrFenced) {
				b.fence(p, buf.src, f.Key, err)
				return nil
			}
			return fmt.Errorf("recording the cut of %s: %w", f.Key, err)
		}
	}
	if valid > 0 && !journaled && b.cfg.Writers > 0 {
		p.detach(buf)
		b.nopen.Add(-1)
		owned = false
		b.writeBeside(ctx, p, buf, f, spilled, cause)
		return nil
	}
	var took time.Duration
	if valid > 0 {
		var err error
		start := time.Now()
		// A journaled file is created once: nothing replaces a file a
		// state names, whoever wrote it.
		f.Once = journaled
		if journaled {
			src, part := buf.src.Source, buf.src.Partition
			f.Check = func(ctx context.Context) error { return b.journal.Check(ctx, src, part) }
		}
		n, err = b.write(ctx, buf, f)
		if errors.Is(err, state.ErrFenced) {
			// The partition went to another instance while the store
			// failed: the new owner writes the file.
			b.fence(p, buf.src, f.Key, err)
			return nil
		}
		if errors.Is(err, sinks.ErrExists) && buf.forced != nil && buf.last == buf.forced.Last && valid == buf.forced.Rows {
			// The previous owner, which recorded this cut, wrote it
			// meanwhile (it lost the partition during its upload): the
			// same rows are there.
			b.log.Info("a file repeating a recorded cut was written by the instance that recorded it", "key", f.Key)
			err = nil
			cut.Runs, cut.Bits = nil, "" // what the file holds is that instance's: a claim reads it
		}
		if errors.Is(err, sinks.ErrExists) {
			return fmt.Errorf("writing %s (%d rows): another instance, which lost the partition, wrote other rows under its name; "+
				"the file is left as it is and the run stops: %w", f.Key, valid, err)
		}
		if err != nil {
			return fmt.Errorf("writing %s (%d rows): %w", f.Key, valid, err)
		}
		took = time.Since(start)
	}
	p.detach(buf)
	b.nopen.Add(-1)
	b.unaccount(buf)
	p.tracker.close(buf)
	buf.release()
	if journaled {
		durable, _ := p.tracker.durable()
		b.log.Debug("file recorded", "key", f.Key, "first", cut.First, "last", cut.Last, "durable", durable)
		if err := b.journal.Done(ctx, buf.src.Source, buf.src.Partition, cut, durable); err != nil {
			if errors.Is(err, state.ErrFenced) {
				// The file holds the rows the new owner's replay puts in
				// it: that replay repeats this file's recorded cut.
				b.fence(p, buf.src, f.Key, err)
				return nil
			}
			return fmt.Errorf("recording %s as written: %w", f.Key, err)
		}
	}
	b.count(buf, f, n, cause, took)
	return nil
}

// write stores f, the file of buf, after the rows buf's encoder holds,
// if it has one.
func (b *Batcher) write(ctx context.Context, buf *buffer, f *sinks.File) (int64, error) {
	if buf.enc != nil {
		enc, err := buf.enc.finish()
		if err != nil {
			return 0, err
		}
		f.Encoder = enc
	}
	return b.sink.Write(ctx, f)
}

// detach takes buf out of the open files.
func (p *partition) detach(buf *buffer) {
	delete(p.open, buf.key)
	t := buf.key.table
	if bufs := slices.DeleteFunc(p.byTable[t], func(x *buffer) bool { return x == buf }); len(bufs) > 0 {
		p.byTable[t] = bufs
	} else {
		delete(p.byTable, t)
	}
	if buf.maxAge > 0 {
		p.aging--
	}
	if rp := p.replay; rp != nil && buf.forced != nil {
		rp.forced = slices.DeleteFunc(rp.forced, func(x *buffer) bool { return x == buf })
	}
}

// writeBeside writes the detached buf of p as f on a goroutine of its own,
// at most Config.Writers at once, and releases the decoded spilled parts.
// Its rows stay pending in p's tracker, and its bytes in the memory bound,
// until f is stored.
func (b *Batcher) writeBeside(ctx context.Context, p *partition, buf *buffer, f *sinks.File, spilled []sinks.Part, cause Cause) {
	b.unaccount(buf)
	b.inflight.Add(buf.held)
	b.slots <- struct{}{} // a writer's token is returned before it takes p's lock
	b.writes.Add(1)
	go func() {
		defer b.writes.Done()
		start := time.Now()
		n, err := b.write(ctx, buf, f)
		took := time.Since(start)
		releaseParts(spilled)
		// The detached buffer is this goroutine's: its memory goes
		// before the partition's lock is taken, which FlushAll holds
		// while it writes the partition's other files.
		buf.release()
		<-b.slots
		b.inflight.Add(-buf.held)
		select {
		case b.wrote <- struct{}{}:
		default:
		}
		if err != nil {
			b.fail(fmt.Errorf("writing %s (%d rows): %w", f.Key, f.Rows, err))
			return
		}
		// Told before the rows count as durable: whoever reads the
		// counters after an offset commit sees the file.
		b.count(buf, f, n, cause, took)
		p.mu.Lock()
		p.tracker.close(buf)
		p.mu.Unlock()
	}()
}

// count adds a written file to its table's counters and tells
// Config.Written.
func (b *Batcher) count(buf *buffer, f *sinks.File, n int64, cause Cause, took time.Duration) {
	if f.Rows > 0 {
		b.written.Add(1)
		if b.cfg.Written != nil {
			b.cfg.Written(WrittenFile{Table: buf.key.table, Cause: cause, Rows: f.Rows, Bytes: n, Took: took})
		}
	}
	b.statsMu.Lock()
	defer b.statsMu.Unlock()
	st := b.stats[buf.key.table]
	if st == nil {
		st = &TableStats{Versions: map[uint64]bool{}}
		b.stats[buf.key.table] = st
	}
	st.Versions[buf.table.Fingerprint] = true
	if f.Rows > 0 {
		st.Rows += int64(f.Rows)
		st.Files++
		st.Bytes += n
		b.log.Debug("file written", "key", f.Key, "rows", f.Rows, "bytes", n)
	}
}
