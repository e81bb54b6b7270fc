package icebergsql

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"strconv"
	"strings"
	"time"

	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/cdclake/cdclake/sinks/current"
	"github.com/cdclake/cdclake/sinks/lakehouse"
)

// Expire drops the dataset table's snapshots older than exp.OlderThan but
// the newest exp.RetainLast, then deletes the files only they referred to
// that are the table's own: its manifests and manifest lists, and
// compacted files (CompactedPrefix); and the compacted files no snapshot
// refers to, older than exp.OlderThan and OrphanGrace. The lake's files are never deleted:
// readers of the plain lake and cdclake's replay rely on them. Of a
// current-state table (lakehouse.StateSuffix) every file in its folder is
// its own: the state files only the dropped snapshots named go too, and
// those no snapshot names that no build newer than the table's names
// (builds whose commits were lost), older than exp.OlderThan and
// OrphanGrace.
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
	if state {
		n, err := c.stateOrphans(ctx, fs, next, after, before, max(exp.OlderThan, OrphanGrace))
		if err != nil {
			errs = append(errs, err)
		}
		if n > 0 {
			c.log.Info("files of state table builds no snapshot names deleted", "table", dataset, "files", n)
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

// stateOrphans marks, in before, the files of a state table's folder that
// no snapshot of tbl refers to (after) and no build newer than the one
// tbl holds names, older than grace: those of builds whose commits did
// not go in and that later builds replaced. A build under way, or one
// whose commit a later build makes, is newer than the one tbl holds. It
// returns how many it marked.
func (c *Iceberg) stateOrphans(ctx context.Context, fs icebergio.IO, tbl *table.Table, after, before map[string]bool, grace time.Duration) (int, error) {
	walker, ok := fs.(icebergio.ListableIO)
	if !ok {
		return 0, nil
	}
	root := strings.TrimSuffix(tbl.Location(), "/")
	holds, _ := strconv.ParseInt(tbl.Properties()[lakehouse.StateVersionKey], 10, 64)
	keep := map[string]bool{}
	var files []string
	var infos []iofs.FileInfo
	err := walker.WalkDir(root, func(loc string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !strings.Contains(loc, "://") {
			loc = "file://" + loc // the local file IO walks paths, not locations
		}
		rel := strings.TrimPrefix(loc, root+"/")
		switch {
		case d.IsDir() && loc != root && rel != current.ManifestDir:
			return iofs.SkipDir
		case d.IsDir():
			return nil
		case strings.HasPrefix(rel, current.ManifestDir+"/") && strings.HasSuffix(rel, ".json"):
			f, err := fs.Open(loc)
			if err != nil {
				return err
			}
			data, err := io.ReadAll(f)
			f.Close()
			if err != nil {
				return err
			}
			version, named, err := current.Named(data)
			if err != nil {
				return fmt.Errorf("%s: %w", loc, err)
			}
			for _, k := range named {
				keep[c.location(k)] = keep[c.location(k)] || version > holds
			}
		case !strings.Contains(rel, "/") && (strings.HasSuffix(rel, ".parquet") || strings.HasSuffix(rel, ".puffin")):
			info, err := d.Info()
			if err != nil {
				return err
			}
			files, infos = append(files, loc), append(infos, info)
		}
		return nil
	})
	if errors.Is(err, iofs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("listing the files of %s: %w", root, err)
	}
	n := 0
	for i, loc := range files {
		if !after[loc] && !keep[loc] && time.Since(infos[i].ModTime()) >= grace {
			before[loc] = true // deleted with the files only dropped snapshots named
			n++
		}
	}
	return n, nil
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
