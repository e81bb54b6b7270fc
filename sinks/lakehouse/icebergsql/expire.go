package icebergsql

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"strings"
	"time"

	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/cdclake/cdclake/sinks/lakehouse"
)

// Expire drops the dataset table's snapshots older than exp.OlderThan but
// the newest exp.RetainLast, then deletes the files only they referred to
// that are the table's own: its manifests and manifest lists, and
// compacted files (CompactedPrefix); and the compacted files no snapshot
// refers to, older than exp.OlderThan and OrphanGrace. The lake's files are never deleted:
// readers of the plain lake and cdclake's replay rely on them. Of a
// current-state table (lakehouse.StateSuffix) every file in its folder is
// its own: the state files only the dropped snapshots named go too.
func (c *Iceberg) Expire(ctx context.Context, dataset string, exp lakehouse.Expiry) (lakehouse.Expired, error) {
	var done lakehouse.Expired
	if exp.RetainLast < 1 {
		return done, errors.New("expiry: at least one snapshot must be kept")
	}
	l := c.lock(dataset)
	defer l.Unlock()
	err := againOnConflict(ctx, func() (err error) {
		done, err = c.expire(ctx, l, dataset, exp)
		return err
	})
	return done, err
}

// expire is one try of Expire; l is held.
func (c *Iceberg) expire(ctx context.Context, l *tableLock, dataset string, exp lakehouse.Expiry) (lakehouse.Expired, error) {
	var done lakehouse.Expired
	state := strings.HasSuffix(dataset, lakehouse.StateSuffix)
	var tbl *table.Table
	var err error
	if state {
		// Its folder is the state's (current.Options.Into).
		tbl, err = c.loadAt(ctx, dataset, "")
	} else {
		tbl, err = c.reload(ctx, l, dataset)
	}
	if err != nil || tbl == nil || tbl.CurrentSnapshot() == nil {
		return done, err
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return done, err
	}
	before, err := referenced(fs, tbl)
	if err != nil {
		return done, err
	}
	tx := tbl.NewTransaction()
	if err := tx.ExpireSnapshots(table.WithOlderThan(exp.OlderThan), table.WithRetainLast(exp.RetainLast),
		table.WithPostCommit(false)); err != nil {
		return done, fmt.Errorf("expiring the snapshots of %s: %w", dataset, err)
	}
	next, err := tx.Commit(ctx)
	if err != nil {
		l.tbl = nil
		return done, fmt.Errorf("expiring the snapshots of %s: %w", dataset, err)
	}
	l.tbl = next
	done.Snapshots = max(0, len(tbl.Metadata().Snapshots())-len(next.Metadata().Snapshots()))
	after, err := referenced(fs, next)
	if err != nil {
		return done, err
	}
	// Orphans: compacted files no snapshot refers to (a compaction that
	// failed after writing, or whose groups changed before it went in),
	// old enough that no compaction under way is about to commit them.
	var errs []error
	if walker, ok := fs.(icebergio.ListableIO); ok && !state {
		grace := max(exp.OlderThan, OrphanGrace)
		root := c.location(CompactedPrefix + dataset)
		err := walker.WalkDir(root, func(loc string, d iofs.DirEntry, err error) error {
			if errors.Is(err, iofs.ErrNotExist) {
				return iofs.SkipAll // never compacted
			}
			if !strings.Contains(loc, "://") {
				loc = "file://" + loc // the local file IO walks paths, not locations
			}
			if err != nil || d.IsDir() || after[loc] || !strings.HasSuffix(loc, ".parquet") {
				return err
			}
			if info, err := d.Info(); err != nil || time.Since(info.ModTime()) < grace {
				return err
			}
			before[loc] = true // deleted below
			return nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("listing the compacted files of %s: %w", dataset, err))
		}
	}
	metadataDir := strings.TrimSuffix(next.Location(), "/") + "/metadata/"
	own := func(loc, key string) bool {
		if state {
			return strings.HasPrefix(loc, strings.TrimSuffix(next.Location(), "/")+"/")
		}
		return strings.HasPrefix(loc, metadataDir) || strings.HasPrefix(key, CompactedPrefix)
	}
	for loc := range before {
		if after[loc] {
			continue
		}
		key, ok := c.key(loc)
		if !ok || !own(loc, key) {
			continue // the lake's own
		}
		if err := fs.Remove(loc); err != nil && !errors.Is(err, iofs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("deleting %s: %w", loc, err))
			continue
		}
		done.Files++
	}
	if done.Snapshots > 0 || done.Files > 0 {
		c.log.Info("iceberg snapshots expired", "table", dataset, "snapshots", done.Snapshots, "files", done.Files)
	}
	return done, errors.Join(errs...)
}

// OrphanGrace is the least age of a compacted file no snapshot refers to
// that Expire deletes: a compaction writes its files and commits them
// within seconds.
const OrphanGrace = time.Hour

// referenced returns the locations every snapshot of tbl refers to: its
// manifest list, its manifests and their live data files (not those a
// manifest lists as deleted by its snapshot: an overwrite's removed
// files).
func referenced(fs icebergio.IO, tbl *table.Table) (map[string]bool, error) {
	out := map[string]bool{}
	for _, s := range tbl.Metadata().Snapshots() {
		if s.ManifestList != "" {
			out[s.ManifestList] = true
		}
		manifests, err := s.Manifests(fs)
		if err != nil {
			return nil, fmt.Errorf("reading the manifests of snapshot %d: %w", s.SnapshotID, err)
		}
		for _, m := range manifests {
			if out[m.FilePath()] {
				continue // read for an earlier snapshot
			}
			out[m.FilePath()] = true
			entries, err := m.FetchEntries(fs, true)
			if err != nil {
				return nil, fmt.Errorf("reading the manifest %s: %w", m.FilePath(), err)
			}
			for _, e := range entries {
				out[e.DataFile().FilePath()] = true
			}
		}
	}
	return out, nil
}
