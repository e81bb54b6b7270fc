// Compaction of the lakehouse tables: cdclake compact.

package pipelines

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/sinks/current"
	"github.com/cdclake/cdclake/sinks/lake"
	"github.com/cdclake/cdclake/sinks/lakehouse/delta"
	"gocloud.dev/blob"

	"github.com/cdclake/cdclake/sinks/lakehouse"
	"github.com/cdclake/cdclake/sinks/lakehouse/iceappend"
)

// TableCompaction is what compacting one table did.
type TableCompaction struct {
	Table string
	lakehouse.Compacted
	Expired lakehouse.Expired
}

// Maintenance says what Compact does to each table.
type Maintenance struct {
	// TargetBytes and MinFiles are lakehouse.Compaction's.
	TargetBytes int64
	MinFiles    int
	// Expire, when set, expires the table's snapshots after its
	// compaction (lakehouse.Expiry).
	Expire *lakehouse.Expiry
}

// Compact rewrites the small files of the lakehouse tables (of tables;
// empty: every table the catalog holds) into files of about
// m.TargetBytes, in one snapshot per table, with each table's route's
// Parquet settings (lakehouse.Compaction), then expires their old
// snapshots if m says so, and those of their current-state tables. It
// opens the catalogs as a run does (Iceberg's committer process, the
// Delta tables in the lake in bucket); landing may go on meanwhile. It
// returns what it did, table by table, and the errors of the tables it
// could not maintain.
func (s *Setup) Compact(ctx context.Context, bucket *blob.Bucket, tables []string, m Maintenance, log *slog.Logger) ([]TableCompaction, error) {
	if s.Plan == nil || !s.Plan.Commits() {
		return nil, errors.New("no route has table_format iceberg or delta: there is no table to compact")
	}
	cat, err := s.Plan.startCatalog(ctx, bucket, log)
	if err != nil {
		return nil, err
	}
	defer cat.Close()
	if len(tables) == 0 {
		if tables, err = cat.Datasets(ctx); err != nil {
			return nil, err
		}
	}
	var out []TableCompaction
	var errs []error
	for _, t := range tables {
		w := s.Plan.BatchConfig(t).Write
		done, err := cat.Compact(ctx, t, lakehouse.Compaction{TargetBytes: m.TargetBytes, MinFiles: m.MinFiles,
			Compression: w.Compression, Level: w.CompressionLevel, RowGroupRows: w.RowGroupRows})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", t, err))
			continue
		}
		tc := TableCompaction{Table: t, Compacted: done}
		if m.Expire != nil {
			// The table's, then its current-state table's (if it has one).
			for _, name := range []string{t, StateTableName(t)} {
				exp, err := cat.Expire(ctx, name, *m.Expire)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", name, err))
				}
				tc.Expired.Snapshots += exp.Snapshots
				tc.Expired.Files += exp.Files
			}
		}
		out = append(out, tc)
	}
	return out, errors.Join(errs...)
}

// startCatalog opens the catalogs of the plan's table formats, as a run
// does, for a command that maintains its tables: Iceberg's in the
// committer process, and, with a bucket, Delta's in the lake.
func (p *Plan) startCatalog(ctx context.Context, bucket *blob.Bucket, log *slog.Logger) (lakehouse.Catalog, error) {
	level := slog.LevelWarn
	_ = level.UnmarshalText([]byte(p.cfg.Log.Level))
	var store delta.Store
	if bucket != nil {
		store = lake.New(bucket, memory.DefaultAllocator).Retrying(lake.Retry{For: time.Duration(p.cfg.Sink.RetryFor), Log: log})
	}
	return p.openCatalog(ctx, bucket, store, log, true, func(ctx context.Context, c lakehouse.Config, log *slog.Logger) (lakehouse.Catalog, error) {
		return lakehouse.Start(ctx, c, log, level, p.cfg.Log.Format)
	})
}

// openCatalog opens the catalogs of the plan's table formats: Iceberg's
// with open (its appends in process, with appends, where the warehouse is
// the lake's root: package iceappend), and Delta's over the lake in
// bucket, its log written through store (none without a bucket).
func (p *Plan) openCatalog(ctx context.Context, bucket *blob.Bucket, store delta.Store, log *slog.Logger, appends bool,
	open lakehouse.Opener) (lakehouse.Catalog, error) {
	f := &lakehouse.Formats{IsDelta: func(dataset string) bool { return p.TableFormat(dataset) == "delta" }}
	if p.iceberg != nil {
		// Appends are committed in process where the catalog and the
		// table allow (package iceappend); the rest goes to open's.
		cfg := *p.iceberg
		var ostore iceappend.Store
		if store != nil {
			ostore = store
		}
		ice, err := iceappend.Open(ctx, cfg, bucket, ostore, appends && p.icebergInLake && p.icebergAppends, log, func(ctx context.Context) (lakehouse.Catalog, error) {
			return open(ctx, cfg, log)
		})
		if err != nil {
			return nil, fmt.Errorf("sink.iceberg: %w", err)
		}
		f.Iceberg = ice
	}
	if p.delta && bucket != nil {
		root := func(dataset string) (string, error) { return p.BatchConfig(dataset).Path.Root(dataset) }
		f.Delta = delta.New(bucket, store, delta.Config{
			Root: root,
			StateRoot: func(dataset string) (string, error) {
				r, err := root(dataset)
				return current.DefaultInto(r), err
			},
			CheckpointInterval: p.cfg.Sink.Delta.CheckpointInterval,
			LogRetention:       time.Duration(p.cfg.Sink.Delta.LogRetention),
		}, log)
	}
	return f, nil
}

// maintenance returns how a run compacts each table (its format's
// settings, its route's Parquet settings), and how often the compaction
// loop looks for tables due: the shortest interval of the table formats
// its routes use (0: none compacts).
func (p *Plan) maintenance() (time.Duration, func(table string) maintenance) {
	ice, dl := p.cfg.Sink.Iceberg, p.cfg.Sink.Delta
	var used []time.Duration
	if p.iceberg != nil {
		used = append(used, time.Duration(ice.CompactInterval))
	}
	if p.delta {
		used = append(used, time.Duration(dl.CompactInterval))
	}
	var tick time.Duration
	for _, every := range used {
		if every > 0 && (tick == 0 || every < tick) {
			tick = every
		}
	}
	return tick, func(table string) maintenance {
		w := p.BatchConfig(table).Write
		comp := lakehouse.Compaction{MinFiles: 2, Compression: w.Compression, Level: w.CompressionLevel, RowGroupRows: w.RowGroupRows}
		if p.TableFormat(table) == "delta" {
			comp.TargetBytes = int64(dl.CompactTargetSize)
			// Versions are never dropped: the files compactions replaced
			// are, as the current-state tables' are after each build.
			return maintenance{every: time.Duration(dl.CompactInterval), compaction: comp,
				expiry: &lakehouse.Expiry{OlderThan: time.Duration(dl.ExpireOlderThan), RetainLast: dl.RetainLast}}
		}
		comp.TargetBytes = int64(ice.CompactTargetSize)
		m := maintenance{every: time.Duration(ice.CompactInterval), compaction: comp}
		if older := time.Duration(ice.ExpireOlderThan); older > 0 {
			m.expiry = &lakehouse.Expiry{OlderThan: older, RetainLast: ice.RetainLast}
		}
		return m
	}
}

// commitInterval is how often a run commits: the shortest interval of the
// table formats its routes use.
func (p *Plan) commitInterval() time.Duration {
	d := time.Duration(p.cfg.Sink.Delta.CommitInterval)
	if p.iceberg != nil && (!p.delta || time.Duration(p.cfg.Sink.Iceberg.CommitInterval) < d) {
		d = time.Duration(p.cfg.Sink.Iceberg.CommitInterval)
	}
	return d
}
