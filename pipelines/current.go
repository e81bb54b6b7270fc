// Current-state tables: cdclake snapshot.

package pipelines

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/config"
	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/current"
	"github.com/cdclake/cdclake/sinks/lake"
	"github.com/cdclake/cdclake/sinks/lakehouse"
	"github.com/cdclake/cdclake/sinks/parquet"
	"github.com/cdclake/cdclake/sinks/state"
	"gocloud.dev/blob"
)

// SnapshotOptions say how Snapshot builds the state tables.
type SnapshotOptions struct {
	// Key overrides the routes' key columns; Into the state table's
	// folder (current.DefaultInto). Both need exactly one table.
	Key  []string
	Into string
	// Buckets and Rebuild are current.Options'.
	Buckets int
	Rebuild bool
}

// TableSnapshot is what building one table's state did: its result, or
// why it was not built.
type TableSnapshot struct {
	Table string
	current.Result
	// Err is the table's error; Skipped is true when it is ErrNoKey for
	// a table Snapshot found rather than was given.
	Err     error
	Skipped bool
}

// Snapshot brings the current-state tables of tables (empty: every
// dataset of the lake) up to date from the change rows the lake holds,
// each with its route's key and Parquet settings (current.Build). A lake
// landed from Kafka holds where each partition's landing stands: only
// the changes below it are folded in, so that a run may land meanwhile.
// The state of a table committed to Iceberg is an Iceberg table too
// (StateTableName), whose snapshots record the offsets it is consistent
// up to.
func (s *Setup) Snapshot(ctx context.Context, bucket *blob.Bucket, tables []string, o SnapshotOptions, log *slog.Logger) ([]TableSnapshot, error) {
	found := len(tables) == 0
	if (len(o.Key) > 0 || o.Into != "") && len(tables) != 1 {
		return nil, errors.New("a key or a folder of its own is for one table: name it")
	}
	if found {
		if r, err := s.Plan.BatchConfig("t").Path.Root("t"); err != nil || r != "t" {
			return nil, errors.New("name the tables (--table): the path template does not begin with {table}/, so the lake's folders are not its tables")
		}
		var err error
		if tables, err = lakeDatasets(ctx, bucket); err != nil {
			return nil, err
		}
	}
	w := lake.New(bucket, memory.DefaultAllocator)
	sb := &stateBuilder{plan: s.Plan, bucket: bucket, w: w, committed: committedOf(state.NewStore(bucket, w)), log: log}
	if s.Plan.Commits() && slices.ContainsFunc(tables, func(t string) bool { return s.Plan.BatchConfig(t).Commit }) {
		cat, err := s.Plan.startCatalog(ctx, bucket, log)
		if err != nil {
			return nil, err
		}
		defer cat.Close()
		sb.cat = cat
	}
	var out []TableSnapshot
	var errs []error
	for _, t := range tables {
		res, err := sb.build(ctx, t, o)
		ts := TableSnapshot{Table: t, Result: res, Err: err}
		if found && errors.Is(err, current.ErrNoKey) {
			ts.Skipped = true
		} else if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", t, err))
		}
		out = append(out, ts)
	}
	return out, errors.Join(errs...)
}

// StateTableName is the Iceberg table of a dataset's current state.
func StateTableName(dataset string) string { return dataset + lakehouse.StateSuffix }

// stateBuilder builds tables' current-state tables, as Parquet, and as
// Iceberg tables for the tables committed to Iceberg.
type stateBuilder struct {
	plan      *Plan
	bucket    *blob.Bucket
	w         current.Writer
	committed func(ctx context.Context, source string, part int32) (int64, bool, error)
	cat       lakehouse.Catalog // nil: no table is committed to Iceberg
	log       *slog.Logger
}

// build brings table's state table up to date. For a table committed to
// Iceberg, the state's files are named after their content and set as
// the files of its Iceberg table, every time: a build whose commit did not
// go in (a crash, a catalog down) is committed by the next.
func (sb *stateBuilder) build(ctx context.Context, table string, o SnapshotOptions) (current.Result, error) {
	bc := sb.plan.BatchConfig(table)
	dataset, err := bc.Path.Root(table)
	if err != nil {
		return current.Result{}, err
	}
	key := sb.plan.Key(table)
	if len(o.Key) > 0 {
		key = o.Key
	}
	iceberg := bc.Commit && sb.cat != nil
	opt := current.Options{Dataset: dataset, Into: o.Into, Key: key, Buckets: o.Buckets, Rebuild: o.Rebuild,
		KeepReplaced: iceberg, Committed: sb.committed, Log: sb.log,
		Write: parquet.Options{Compression: bc.Write.Compression, Level: bc.Write.CompressionLevel, RowGroupRows: bc.Write.RowGroupRows}}
	if iceberg && sb.plan.TableFormat(table) == "iceberg" && sb.plan.cfg.Sink.Current.Mode == config.MergeOnRead {
		wh := strings.TrimSuffix(sb.plan.iceberg.Warehouse, "/")
		opt.MergeOnRead, opt.Location = true, func(key string) string { return wh + "/" + key }
	}
	res, err := current.Build(ctx, sb.bucket, sb.w, opt)
	if err != nil || !iceberg {
		return res, err
	}
	into := o.Into
	if into == "" {
		into = current.DefaultInto(dataset)
	}
	err = sb.setFiles(ctx, table, into, res, current.KeepManifests)
	if errors.Is(err, lakehouse.ErrStateBehind) {
		// The builds between are not all kept: every bucket written whole
		// is one snapshot from whatever the table holds.
		sb.log.Warn("a state table's table is behind builds no longer kept: writing every bucket whole", "table", StateTableName(table),
			"build", res.Version, "err", err)
		opt.Whole, opt.Rebuild, opt.Key, opt.Buckets = true, false, nil, 0
		if res, err = current.Build(ctx, sb.bucket, sb.w, opt); err == nil {
			err = sb.setFiles(ctx, table, into, res, 0)
		}
	}
	if err != nil {
		return res, fmt.Errorf("committing the state table %s to %s: %w", StateTableName(table), sb.plan.TableFormat(table), err)
	}
	if sb.plan.TableFormat(table) == "delta" {
		// A Delta state table's replaced files go once no version to keep
		// names them (lakehouse.Expiry); failing that, the next build tries.
		d := sb.plan.cfg.Sink.Delta
		exp, err := sb.cat.Expire(ctx, StateTableName(table), lakehouse.Expiry{OlderThan: time.Duration(d.ExpireOlderThan), RetainLast: d.RetainLast})
		if err != nil {
			sb.log.Warn("deleting the replaced files of a delta state table failed; the next build tries again",
				"table", StateTableName(table), "err", err)
		} else if exp.Files > 0 {
			sb.log.Info("replaced files of a delta state table deleted", "table", StateTableName(table), "files", exp.Files)
		}
	}
	return res, nil
}

// setFiles commits a build of table's state table (at into) to its table
// format. A table that holds a build older than the one res started from
// (a build whose commit did not go in), when one snapshot cannot bring it
// to res (deletion vectors added and files removed), gets the builds
// between first, as their manifests recorded them, up to depth of them.
func (sb *stateBuilder) setFiles(ctx context.Context, table, into string, res current.Result, depth int) error {
	keyJSON, _ := json.Marshal(res.Key)
	props := map[string]string{lakehouse.StateVersionKey: strconv.FormatInt(res.Version, 10), "cdclake.current.key": string(keyJSON)}
	for _, off := range res.Offsets {
		props[lakehouse.OffsetKey(lakehouse.Partition{Source: sinks.Sanitize(off.Source), Partition: off.Partition})] =
			strconv.FormatInt(off.Next, 10)
	}
	set := lakehouse.FileSet{Location: into, Keys: res.StateFiles, Deletes: res.Deletes, Schema: res.Schema, Properties: props,
		Version: res.Version, Base: res.Base}
	err := sb.cat.SetFiles(ctx, StateTableName(table), set)
	if !errors.Is(err, lakehouse.ErrStateBehind) || res.Base == 0 || depth == 0 {
		return err
	}
	base, berr := current.Recorded(ctx, sb.bucket, into, res.Base)
	if berr != nil {
		return fmt.Errorf("%w; build %d, which it started from: %w", err, res.Base, berr)
	}
	sb.log.Warn("a state table's table is behind its builds: committing the builds between first", "table", StateTableName(table),
		"build", res.Version, "from", res.Base)
	if err := sb.setFiles(ctx, table, into, base, depth-1); err != nil {
		return err
	}
	return sb.cat.SetFiles(ctx, StateTableName(table), set)
}

// lakeDatasets lists the lake's top folders but cdclake's own (their names
// begin with _ or .), in order.
func lakeDatasets(ctx context.Context, bucket *blob.Bucket) ([]string, error) {
	var out []string
	it := bucket.List(&blob.ListOptions{Delimiter: "/"})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("listing the lake: %w", err)
		}
		name := strings.TrimSuffix(obj.Key, "/")
		if obj.IsDir && !strings.HasPrefix(name, "_") && !strings.HasPrefix(name, ".") {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// stateTables builds the current-state tables of the tables a run lands
// (sink.current.interval): every interval, those with files written
// since their last build, and at the end of the run all it landed. A
// table whose key is not known is skipped (a WARN, once); a build that
// fails is logged at WARN and counted, and landing goes on.
type stateTables struct {
	sb      *stateBuilder
	every   time.Duration
	buckets int
	log     *slog.Logger

	mu                      sync.Mutex
	dirty                   map[string]bool // tables written since their last build
	landed                  map[string]bool // every table the run wrote files of
	skipped                 map[string]bool // tables whose key is not known, warned of
	builds, errors, changes int64
	merged                  int64 // builds that wrote deletion vectors rather than buckets whole
}

// newStateTables returns the builder of a run's state tables; cat is the
// run's Iceberg catalog (nil: none).
func newStateTables(plan *Plan, bucket *blob.Bucket, w current.Writer, store *state.Store, cat lakehouse.Catalog, log *slog.Logger) *stateTables {
	cfg := plan.Config().Sink.Current
	log = log.With("component", "current")
	return &stateTables{sb: &stateBuilder{plan: plan, bucket: bucket, w: w, committed: committedOf(store), cat: cat, log: log},
		every: time.Duration(cfg.Interval), buckets: cfg.Buckets, log: log,
		dirty: map[string]bool{}, landed: map[string]bool{}, skipped: map[string]bool{}}
}

// committedOf returns where each partition's landing stands in store,
// for current.Options.Committed.
func committedOf(store *state.Store) func(ctx context.Context, source string, part int32) (int64, bool, error) {
	return func(ctx context.Context, source string, part int32) (int64, bool, error) {
		st, err := store.Latest(ctx, source, part)
		if err != nil || st == nil {
			return 0, false, err
		}
		return st.Committed, true, nil
	}
}

// wrote notes a file written of table (batch.Config.Written).
func (s *stateTables) wrote(table string) {
	if strings.HasPrefix(table, "_") { // cdclake's own datasets
		return
	}
	s.mu.Lock()
	s.dirty[table], s.landed[table] = true, true
	s.mu.Unlock()
}

type stateStats struct{ builds, errors, changes, merged int64 }

func (s *stateTables) stats() stateStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return stateStats{s.builds, s.errors, s.changes, s.merged}
}

// loop builds the tables written since their last build every interval,
// until ctx ends.
func (s *stateTables) loop(ctx context.Context) {
	every(ctx, s.every, func() {
		s.mu.Lock()
		tables := slices.Sorted(maps.Keys(s.dirty))
		clear(s.dirty)
		s.mu.Unlock()
		_ = s.build(ctx, tables, nil)
	})
}

// final builds every table the run landed, after its last files; its error
// lists the tables whose build failed.
//
// The lake's other tables are built too, when its folders are its tables
// (the path template begins with {table}/): a run that died before its
// last build leaves states behind, and the next run may land nothing of
// those tables. Those whose key is not known are skipped quietly.
func (s *stateTables) final(ctx context.Context) error {
	s.mu.Lock()
	landed := maps.Clone(s.landed)
	s.mu.Unlock()
	others := map[string]bool{}
	if r, err := s.sb.plan.BatchConfig("t").Path.Root("t"); err == nil && r == "t" {
		all, err := lakeDatasets(ctx, s.sb.bucket)
		if err != nil {
			return fmt.Errorf("current-state tables: %w", err)
		}
		for _, t := range all {
			if !landed[t] {
				others[t], landed[t] = true, true
			}
		}
	}
	return s.build(ctx, slices.Sorted(maps.Keys(landed)), others)
}

// build builds tables; of those in quiet, an unknown key or a folder
// without change files is no news.
func (s *stateTables) build(ctx context.Context, tables []string, quiet map[string]bool) error {
	var errs []error
	for _, t := range tables {
		res, err := s.sb.build(ctx, t, SnapshotOptions{Buckets: s.buckets})
		// Another instance built the table meanwhile: this build starts
		// again from that one's manifest.
		for try := 0; try < 3 && errors.Is(err, current.ErrConcurrent) && ctx.Err() == nil; try++ {
			s.log.Debug("another build of a current-state table finished first; building it again", "table", t)
			res, err = s.sb.build(ctx, t, SnapshotOptions{Buckets: s.buckets})
		}
		if ctx.Err() != nil {
			return errors.Join(append(errs, ctx.Err())...)
		}
		s.mu.Lock()
		switch {
		case quiet[t] && (errors.Is(err, current.ErrNoKey) || errors.Is(err, current.ErrNoChanges)):
		case errors.Is(err, current.ErrNoKey):
			if !s.skipped[t] {
				s.skipped[t] = true
				s.log.Warn("no current-state table for a table whose key is not known: set its route's key", "table", t)
			}
		case err != nil:
			s.errors++
			errs = append(errs, fmt.Errorf("%s: %w", t, err))
			s.log.Warn("building a current-state table failed; it is built again next time", "table", t, "err", err)
		default:
			s.builds++
			s.changes += res.Changes
			if res.Merged {
				s.merged++
			}
			s.log.Debug("current-state table built", "table", t, "changes", res.Changes, "rows", res.Rows,
				"buckets", res.Buckets, "merged", res.Merged, "manifest", res.Version)
		}
		s.mu.Unlock()
	}
	if len(errs) > 0 {
		return fmt.Errorf("current-state tables: %w", errors.Join(errs...))
	}
	return nil
}
