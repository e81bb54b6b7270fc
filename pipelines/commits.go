// Lakehouse commits: the written files of routes with a table format go
// into their tables in batches, and their offsets count as durable once
// they are in.

package pipelines

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/cdclake/cdclake/handlers/batch"
	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/lakehouse"
	"github.com/cdclake/cdclake/sinks/state"
	"golang.org/x/sync/errgroup"
)

// committer commits the files the batcher hands over (batch.Config.Commit)
// to their Iceberg tables: every interval, when maxFiles wait, when a
// partition is handed over, and at the end of a run. Each file's first
// offset counts as not durable until its commit is in, so that neither the
// group's offsets nor a partition's state in the lake pass a file its
// table does not hold.
//
// A commit records, per source partition of its files, the durable offset
// as it is once the commit's files are released: every file of the
// partition that starts below it is in its table then. A file handed over
// again (a replay) that starts below its table's recorded offset, or that
// the table was found to hold past it (lakehouse.Iceberg.Landed, read once
// per table and partition), is not added again.
type committer struct {
	ice      lakehouse.Catalog
	batcher  *batch.Batcher
	log      *slog.Logger
	interval time.Duration
	maxFiles int
	retryFor time.Duration

	// round is held by a commit or advance round: the periodic one and a
	// handover's do not overlap, so that a round's tables, committed
	// concurrently, are each its own.
	round sync.Mutex

	mu      sync.Mutex
	pending map[string][]*batch.Committing // by dataset, in the order handed
	// held are the files handed over and not released yet, of every table.
	held map[any]bool
	wake chan struct{}
	// tables is what is known of each dataset's table: the offsets it
	// records and the files found past them, per partition looked up.
	tables map[string]*tableView
	// fault, when set (tests), runs before each table's commit and fails
	// it with its error.
	fault func(table string) error
	// replyFault, when set (tests), runs after each table's commit went
	// in and fails it with its error, as if its reply was lost.
	replyFault func(table string) error
	// granularity is the time unit of _cdc_ts the files of a table share.
	granularity func(table string) string
	// schemaOf reads a landed file's schema, for files handed over again
	// after a claim (recommit) without one.
	schemaOf func(ctx context.Context, key string) (*arrow.Schema, error)
	// owns, when set (a source whose partitions move between instances),
	// returns an error wrapping state.ErrFenced once another instance
	// claimed a partition (state.Journal.Check); asked for each partition
	// with files in a commit round, before it.
	owns func(ctx context.Context, source string, part int32) error
	// compactEvery, when positive, is how often the compaction loop
	// looks for tables due (the shortest of their intervals); maintain
	// says how each table is compacted, and how often.
	compactEvery time.Duration
	maintain     func(table string) maintenance
	// committedTo are the tables this run committed files to.
	committedTo map[string]bool
	// failing is, per table whose commits fail, when they started to.
	failing map[string]time.Time
	commits int64 // snapshots committed
	files   int64 // files added
	errors  int64 // table commits that failed
	// compacted are the files compaction replaced, compactErrors the
	// table compactions that failed.
	compacted, compactErrors int64
	expired                  int64 // snapshots
}

// commitStats are the committer's counters (the metrics').
type commitStats struct{ commits, files, errors, waiting, compacted, compactErrors, expired int64 }

func (c *committer) stats() commitStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return commitStats{c.commits, c.files, c.errors, int64(len(c.held)), c.compacted, c.compactErrors, c.expired}
}

// tableView is what the committer knows of one table.
type tableView struct {
	recorded map[lakehouse.Partition]int64
	checked  map[lakehouse.Partition]bool
	landed   map[string]bool
	// sources are the source names of the partitions this run committed
	// files of, as the batcher knows them (recorded has them sanitized).
	sources map[lakehouse.Partition]string
}

func newCommitter(ice lakehouse.Catalog, b *batch.Batcher, log *slog.Logger, interval, retryFor time.Duration) *committer {
	return &committer{ice: ice, batcher: b, log: log.With("component", "commits"), interval: interval, maxFiles: 1000,
		retryFor: retryFor, pending: map[string][]*batch.Committing{}, held: map[any]bool{}, failing: map[string]time.Time{}, wake: make(chan struct{}, 1),
		tables: map[string]*tableView{}, committedTo: map[string]bool{}}
}

// add takes a written file over (batch.Config.Commit); it runs under the
// file's partition lock and only queues it.
func (c *committer) add(f *batch.Committing) {
	c.mu.Lock()
	c.pending[f.Table] = append(c.pending[f.Table], f)
	c.held[f] = true
	full := len(c.held) >= c.maxFiles
	c.mu.Unlock()
	if full {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// run commits every interval, or sooner when many files wait, until ctx
// ends. A table whose commits keep failing for retryFor fails the run
// (fail); other tables' failures in between do not add up.
func (c *committer) run(ctx context.Context, fail func(error) error) {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	var compacting sync.WaitGroup
	defer compacting.Wait() // until ctx ends
	if c.compactEvery > 0 {
		compacting.Go(func() { c.compactLoop(ctx) })
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.wake:
		}
		err := c.commit(ctx, nil)
		if err == nil || ctx.Err() != nil {
			continue
		}
		if errors.Is(err, lakehouse.ErrSchema) {
			_ = fail(schemaAdvice(err))
			return
		}
		if errors.Is(err, lakehouse.ErrOtherLake) || errors.Is(err, lakehouse.ErrRewritten) {
			_ = fail(err)
			return
		}
		c.mu.Lock()
		long := false
		for table, since := range c.failing {
			if len(c.pending[table]) == 0 { // its files went to another owner
				delete(c.failing, table)
				continue
			}
			long = long || time.Since(since) > c.retryFor
		}
		c.mu.Unlock()
		if long {
			_ = fail(fmt.Errorf("committing to the lakehouse tables failed for %s: %w", c.retryFor, err))
			return
		}
		c.log.Warn("committing to a lakehouse table failed; the files stay held and the commit is tried again", "err", err)
	}
}

// maintenance is how a run compacts a table: how often (0: never), with
// what settings, and what each compaction also expires of the table and
// of its current-state table (nil: nothing).
type maintenance struct {
	every      time.Duration
	compaction lakehouse.Compaction
	expiry     *lakehouse.Expiry
}

// compactLoop compacts the tables this run committed to, each every its
// maintenance interval, one after the other, until ctx ends. Compaction
// runs beside the commits (the catalog serializes a table's, and one
// that another overtook is tried again); a table that cannot be
// compacted is logged at WARN and counted, and landing goes on.
func (c *committer) compactLoop(ctx context.Context) {
	start := time.Now()
	last := map[string]time.Time{} // each table's last compaction
	every(ctx, c.compactEvery, func() {
		c.mu.Lock()
		tables := slices.Sorted(maps.Keys(c.committedTo))
		c.mu.Unlock()
		for _, table := range tables {
			m := c.maintain(table)
			since, ok := last[table]
			if !ok {
				since = start
			}
			// A tenth of slack: the ticks of an equal interval are due.
			if m.every <= 0 || time.Since(since) < m.every-m.every/10 {
				continue
			}
			last[table] = time.Now()
			c.compactTable(ctx, table, m)
			if ctx.Err() != nil {
				return
			}
		}
	})
}

// compactTable compacts a table, then expires it and its current-state
// table as m says.
func (c *committer) compactTable(ctx context.Context, table string, m maintenance) {
	done, err := c.ice.Compact(ctx, table, m.compaction)
	if ctx.Err() != nil {
		return
	}
	c.mu.Lock()
	c.compacted += int64(done.Replaced)
	if err != nil {
		c.compactErrors++
	}
	c.mu.Unlock()
	switch {
	case err != nil:
		c.log.Warn("compacting a lakehouse table failed; it is compacted again next time", "table", table, "err", err)
	case done.Written > 0:
		c.log.Info("lakehouse table compacted", "table", table, "replaced", done.Replaced, "written", done.Written,
			"rows", done.Rows)
	}
	if m.expiry == nil {
		return
	}
	for _, name := range []string{table, table + lakehouse.StateSuffix} {
		exp, err := c.ice.Expire(ctx, name, *m.expiry)
		if ctx.Err() != nil {
			return
		}
		c.mu.Lock()
		c.expired += int64(exp.Snapshots)
		if err != nil {
			c.compactErrors++
		}
		c.mu.Unlock()
		if err != nil {
			c.log.Warn("expiring a lakehouse table's snapshots failed; they are expired next time", "table", name, "err", err)
		}
	}
}

func every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

// flush commits every waiting file, trying again while the catalog fails,
// for at most retryFor or until ctx ends.
func (c *committer) flush(ctx context.Context) error {
	deadline := time.Now().Add(c.retryFor)
	wait := 250 * time.Millisecond
	for {
		err := c.commit(ctx, nil)
		if err == nil {
			err = c.advance(ctx, nil)
		}
		if err == nil {
			return nil
		}
		if errors.Is(err, lakehouse.ErrSchema) {
			return schemaAdvice(err)
		}
		if errors.Is(err, lakehouse.ErrOtherLake) || errors.Is(err, lakehouse.ErrRewritten) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("committing to the lakehouse tables: %w", err)
		}
		c.log.Warn("committing to a lakehouse table failed; trying again", "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("committing to the lakehouse tables: %w (then %w)", err, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 10*time.Second)
	}
}

// advance records, in each table this run committed to, the offsets of
// its partitions (those only selects; nil: all) where they moved past what
// its last commit recorded: at the end of a run or a handover, every row
// of the table below them is in it, and a replay then skips its files by
// offset rather than look them up.
func (c *committer) advance(ctx context.Context, only func(source string, part int32) bool) error {
	c.round.Lock()
	defer c.round.Unlock()
	c.mu.Lock()
	type todo struct {
		table string
		at    map[lakehouse.Partition]int64
	}
	var work []todo
	for table, v := range c.tables {
		at := map[lakehouse.Partition]int64{}
		for p, src := range v.sources {
			if only != nil && !only(src, p.Partition) {
				continue
			}
			if d, ok := c.batcher.TableDurable(src, p.Partition, table, nil); ok && d > v.recorded[p] {
				at[p] = d
			}
		}
		if len(at) > 0 {
			work = append(work, todo{table, at})
		}
	}
	c.mu.Unlock()
	errs := make([]error, len(work))
	concurrently(len(work), func(i int) {
		w := work[i]
		if errs[i] = c.ice.RecordOffsets(ctx, w.table, w.at); errs[i] != nil {
			return
		}
		c.mu.Lock()
		if v := c.tables[w.table]; v != nil {
			for p, off := range w.at {
				v.recorded[p] = max(v.recorded[p], off)
			}
		}
		c.mu.Unlock()
	})
	return errors.Join(errs...)
}

// commitConcurrency is how many tables are committed at once: each commit
// waits on the catalog's database and the lake's store more than it
// computes.
const commitConcurrency = 4

// concurrently calls f(0) … f(n-1), commitConcurrency at a time, and
// returns when all have.
func concurrently(n int, f func(i int)) {
	var g errgroup.Group
	g.SetLimit(commitConcurrency)
	for i := range n {
		g.Go(func() error { f(i); return nil })
	}
	_ = g.Wait() // f returns no error: each call keeps its own
}

// schemaAdvice says what to do about a table Iceberg cannot hold.
func schemaAdvice(err error) error {
	return fmt.Errorf("%w. The files are in the lake but not in the table; the run stops. Override the column's type in the "+
		"route (types: {COLUMN: time(us)}, string, …) or land the table without table_format, then run again", err)
}

// commit commits the waiting files of the partitions only selects (nil:
// all), one snapshot per table, several tables at once. Files of a table
// whose commit fails go back to wait; the errors are returned.
func (c *committer) commit(ctx context.Context, only func(source string, part int32) bool) error {
	c.round.Lock()
	defer c.round.Unlock()
	c.mu.Lock()
	take := c.take(func(f *batch.Committing) bool { return only == nil || only(f.Source, f.Partition) })
	c.mu.Unlock()
	take = c.owned(ctx, take)
	tables := make([]string, 0, len(take))
	for t := range take {
		tables = append(tables, t)
	}
	slices.Sort(tables)
	errs := make([]error, len(tables))
	concurrently(len(tables), func(i int) {
		table := tables[i]
		fs := take[table]
		if err := c.commitTable(ctx, table, fs); err != nil {
			errs[i] = err
			c.mu.Lock()
			c.pending[table] = append(fs, c.pending[table]...)
			c.errors++
			if _, ok := c.failing[table]; !ok {
				c.failing[table] = time.Now()
			}
			// What the table holds is read again before its next commit:
			// a commit whose reply was lost may be in.
			delete(c.tables, table)
			c.mu.Unlock()
			return
		}
		for _, f := range fs {
			c.batcher.Release(f.Source, f.Partition, f)
		}
		c.mu.Lock()
		for _, f := range fs {
			delete(c.held, f)
		}
		delete(c.failing, table)
		c.mu.Unlock()
	})
	return errors.Join(errs...)
}

// owned returns the files of take whose partitions this instance still
// owns. The files of a partition another instance claimed (this one was
// paused, or cut off, past its session) are left to it: its claim hands
// them to its own committer, and two committers adding one file at once
// could both get it in (iceberg-go replays a commit that lost a race onto
// the new head, unchecked). They are dropped as a partition given up is.
func (c *committer) owned(ctx context.Context, take map[string][]*batch.Committing) map[string][]*batch.Committing {
	if c.owns == nil {
		return take
	}
	type part struct {
		source string
		part   int32
	}
	fenced := map[part]bool{}
	for _, fs := range take {
		for _, f := range fs {
			p := part{f.Source, f.Partition}
			if _, asked := fenced[p]; !asked {
				fenced[p] = errors.Is(c.owns(ctx, f.Source, f.Partition), state.ErrFenced)
			}
		}
	}
	out := map[string][]*batch.Committing{}
	c.mu.Lock()
	defer c.mu.Unlock()
	for table, fs := range take {
		for _, f := range fs {
			if fenced[part{f.Source, f.Partition}] {
				delete(c.held, f)
				continue
			}
			out[table] = append(out[table], f)
		}
	}
	for p, yes := range fenced {
		if yes {
			c.log.Warn("a partition was claimed by another instance: its files waiting for their commit are left to it",
				"source", p.source, "partition", p.part)
			c.tables = map[string]*tableView{} // the other owner commits to them
		}
	}
	return out
}

// commitTable commits files, all of table, in one snapshot.
func (c *committer) commitTable(ctx context.Context, table string, fs []*batch.Committing) error {
	view, err := c.view(ctx, table, fs)
	if err != nil {
		return err
	}
	// The offset recorded for a partition is where the table's rows are
	// durable once this commit is in: below it every row of the table is
	// in a committed file (batch.Batcher.TableDurable).
	skip := map[any]bool{}
	for _, f := range fs {
		skip[f] = true
	}
	type source struct {
		name string
		part int32
	}
	raw := map[lakehouse.Partition]source{}
	var files []lakehouse.File
	var again []*batch.Committing
	for _, f := range fs {
		p := lakehouse.Partition{Source: sinks.Sanitize(f.Source), Partition: f.Partition}
		raw[p] = source{f.Source, f.Partition}
		if rec, ok := view.recorded[p]; ok && f.First < rec {
			// In the table: committed before its offset was recorded.
			// Written again by this run (its size is known): it must
			// still be what the table's entry says.
			if f.Bytes > 0 {
				again = append(again, f)
			}
			continue
		}
		files = append(files, lakehouse.File{Key: f.Key, Table: table, Schema: f.Schema, Source: p.Source,
			Partition: f.Partition, First: f.First, Granularity: c.granularity(table), Bytes: f.Bytes, Footer: f.Footer})
	}
	if err := c.sameAsEntries(ctx, table, again); err != nil {
		return err
	}
	recorded := map[lakehouse.Partition]int64{}
	for p, r := range raw {
		if d, ok := c.batcher.TableDurable(r.name, r.part, table, skip); ok {
			recorded[p] = d
		}
	}
	if len(files) == 0 {
		return nil
	}
	for i := range files {
		if files[i].Schema == nil {
			sch, err := c.schemaOf(ctx, files[i].Key)
			if err != nil {
				return err
			}
			files[i].Schema = sch
		}
	}
	if c.fault != nil {
		if err := c.fault(table); err != nil {
			return err
		}
	}
	if err := c.ice.Commit(ctx, table, files, recorded, view.landed); err != nil {
		return err
	}
	if c.replyFault != nil {
		if err := c.replyFault(table); err != nil {
			return err
		}
	}
	c.mu.Lock()
	for p, off := range recorded {
		view.recorded[p] = max(view.recorded[p], off)
	}
	for p, r := range raw {
		view.sources[p] = r.name
	}
	c.commits++
	c.files += int64(len(files))
	c.committedTo[table] = true
	c.mu.Unlock()
	c.log.Debug("files committed", "table", table, "files", len(files), "offsets", fmt.Sprint(recorded))
	return nil
}

// sameAsEntries checks that files written again that table holds have
// the sizes its entries give, where the catalog tells them
// (lakehouse.Sizer): a replay writes them with the same rows. The run
// fails with ErrRewritten otherwise.
func (c *committer) sameAsEntries(ctx context.Context, table string, again []*batch.Committing) error {
	sz, ok := c.ice.(lakehouse.Sizer)
	if !ok || len(again) == 0 {
		return nil
	}
	sizes, err := sz.EntrySizes(ctx, table)
	if err != nil {
		return err
	}
	for _, f := range again {
		if size, ok := sizes[f.Key]; ok && size != f.Bytes {
			return fmt.Errorf("%s: %s: %w (%d bytes, its entry says %d); readers that trust the entry fail on it",
				table, f.Key, lakehouse.ErrRewritten, f.Bytes, size)
		}
	}
	return nil
}

// view returns what is known of table, looking up the partitions of fs
// not looked up yet: the offsets the table records, and its files past
// them.
func (c *committer) view(ctx context.Context, table string, fs []*batch.Committing) (*tableView, error) {
	c.mu.Lock()
	v := c.tables[table]
	c.mu.Unlock()
	if v == nil {
		recorded, err := c.ice.Offsets(ctx, table)
		if err != nil {
			return nil, err
		}
		v = &tableView{recorded: recorded, checked: map[lakehouse.Partition]bool{}, landed: map[string]bool{},
			sources: map[lakehouse.Partition]string{}}
		c.mu.Lock()
		c.tables[table] = v
		c.mu.Unlock()
	}
	look := map[lakehouse.Partition]bool{}
	for _, f := range fs {
		p := lakehouse.Partition{Source: sinks.Sanitize(f.Source), Partition: f.Partition}
		if !v.checked[p] {
			look[p] = true
		}
	}
	if len(look) == 0 {
		return v, nil
	}
	landed, err := c.ice.Landed(ctx, table, look)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	for k := range landed {
		v.landed[k] = true
	}
	for p := range look {
		v.checked[p] = true
	}
	c.mu.Unlock()
	return v, nil
}

// forget drops a partition that went to another instance: its files that
// wait are no longer this instance's to commit (their next owner does), and
// what is known of the tables is read again, since the other owner may
// commit to them before the partition comes back.
func (c *committer) forget(source string, part int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, fs := range c.take(func(f *batch.Committing) bool { return f.Source == source && f.Partition == part }) {
		for _, f := range fs {
			delete(c.held, f)
		}
	}
	c.tables = map[string]*tableView{}
}

// take removes the waiting files match selects and returns them by
// table, in the order they were handed; c.mu is held.
func (c *committer) take(match func(*batch.Committing) bool) map[string][]*batch.Committing {
	out := map[string][]*batch.Committing{}
	for table, fs := range c.pending {
		keep := fs[:0]
		for _, f := range fs {
			if match(f) {
				out[table] = append(out[table], f)
			} else {
				keep = append(keep, f)
			}
		}
		if len(keep) == 0 {
			delete(c.pending, table)
		} else {
			c.pending[table] = keep
		}
	}
	return out
}
