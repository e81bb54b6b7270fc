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
// # Where each policy lives
//
//   - batch.go: the Batcher, its partitions, and appending a row (Add, Skip,
//     Hold) to the file it opens or continues; run.go: a run of rows at
//     once (AddRun), on several goroutines;
//   - rotation.go: when a file closes (full, expired, CloseTable);
//   - bounds.go: the memory bound and the bound on open files, spill;
//   - writers.go: writing a file, in line or on the writer pool;
//   - handover.go: the journal, the replay of a claimed partition (landed
//     offsets, recorded cuts repeated or their names taken), fencing;
//   - buffer.go: an open file (its frozen rows, builders, spilled runs and
//     encoder); frozen.go, image.go, check.go, encoding.go: its parts;
//   - tracker.go: the durable offset of a partition; names.go and
//     template.go: object names and directories.
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
// # Frozen rows
//
// A file opens without builders: its rows are checked (converted into
// scratch builders every table shares) and frozen in a compact binary form,
// until they take half of what the file's builders would cost; then they
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
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/cdclake/cdclake/sinks"
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
	// Commit, when set, is handed every written file with rows of a table
	// whose TableConfig says Commit, to commit to a table format. The
	// file's first offset counts as not durable until the receiver calls
	// Release with the Committing it was handed. It is called with the
	// partition's lock held and must not call back into the batcher.
	Commit func(*Committing)
}

// Committing is a written file on its way into a lakehouse table: its
// partition's durable offset stays below First until Release(Source,
// Partition, the *Committing).
type Committing struct {
	// Key is the file's object key; Table its dataset.
	Key, Table string
	// Schema is the file's Arrow schema, its table version's.
	Schema *arrow.Schema
	// Source, Partition and First are where its rows come from: First is
	// the offset the file's buffer held from (at or before its first row).
	Source    string
	Partition int32
	First     int64
	// Bytes is the file's size and Footer its Parquet footer, when the
	// sink kept it (sinks.File.Footer); a file handed over again after a
	// claim has neither.
	Bytes  int64
	Footer []byte
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

// TableConfig is a table's route settings for batching and writing.
type TableConfig struct {
	// Path is the directory template (see Template).
	Path     *Template
	MaxRows  int
	MaxBytes int64
	MaxAge   time.Duration
	Write    sinks.WriteOptions
	// Commit hands the table's written files to Config.Commit.
	Commit bool
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
	// checks checks the rows its files freeze (scratch builders are not
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
	// freezeLimit is how large a file's frozen rows grow before its rows move to
	// builders, given what the file's builders are estimated to cost (see
	// buffer.append).
	freezeLimit func(builders int64) int64
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
		stats: map[string]*TableStats{}, freezeLimit: halfOf}
	b.bound.Store(cfg.MaxBufferedBytes)
	b.encoding, _ = sink.(sinks.Encoding)
	if cfg.Writers > 0 {
		b.slots = make(chan struct{}, cfg.Writers)
		b.wrote = make(chan struct{}, 1)
	}
	return b, nil
}

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
	if full(buf, tc) {
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
	buf := newBuffer(b.mem, key, t, dir, at, b.now().UnixNano(), b.freezeLimit)
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

// Resume records that a claimed partition resumes at committed, where its
// state says every message below is landed: until a message comes, that
// is its durable offset (a commit of the files a claim hands over again
// records it), where otherwise nothing would be known.
func (b *Batcher) Resume(source string, part int32, committed int64) {
	p := b.partition(source, part)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tracker.next < 0 {
		p.tracker.next = committed
	}
}

// HoldCommitting holds c's first offset from counting as durable until
// Release(c.Source, c.Partition, c), for a file written before this
// instance claimed its partition and handed to the committer again.
func (b *Batcher) HoldCommitting(c *Committing) {
	p := b.partition(c.Source, c.Partition)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.fenced {
		p.tracker.open(c.First, c)
	}
}

// TableDurable returns the offset of a source partition below which every
// row of table is in a written file that is not waiting for its commit
// but those in skip (or is no row of the table): the partition's offsets
// seen, less what the table's open files and the table's files handed to
// Config.Commit hold. A table's lakehouse commit records it.
func (b *Batcher) TableDurable(source string, part int32, table string, skip map[any]bool) (int64, bool) {
	p := b.partition(source, part)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tracker.durableWithout(func(h any) bool {
		switch x := h.(type) {
		case *buffer:
			return x.key.table == table
		case *Committing:
			return x.Table == table && !skip[x]
		}
		return false
	})
}

// Release ends a Hold of holder on a source partition.
func (b *Batcher) Release(source string, part int32, holder any) {
	p := b.partition(source, part)
	p.mu.Lock()
	p.tracker.close(holder)
	p.mu.Unlock()
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
