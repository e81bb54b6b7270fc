package icebergsql

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/cdclake/cdclake/sinks/lakehouse"
	"github.com/cdclake/cdclake/sinks/lakehouse/rewrite"
)

// CompactedPrefix is where compacted files go, under the warehouse: out of
// the datasets' folders, which readers of the plain lake glob.
const CompactedPrefix = "_cdclake/iceberg/"

// dataFile is a data file of a table's current snapshot.
type dataFile struct {
	path string // its location
	key  string // Warehouse-relative
	size int64
	rows int64
}

// Compact rewrites the dataset table's small files (see
// lakehouse.Compaction) in one snapshot. It reads the table afresh: other
// processes may have committed since.
func (c *Iceberg) Compact(ctx context.Context, dataset string, opt lakehouse.Compaction) (lakehouse.Compacted, error) {
	if opt.TargetBytes <= 0 {
		return lakehouse.Compacted{}, errors.New("compaction: the target size must be positive")
	}
	opt.MinFiles = max(opt.MinFiles, 2)
	l := c.lock(dataset)
	defer l.Unlock()
	var done lakehouse.Compacted
	err := againOnConflict(ctx, func() (err error) {
		done, err = c.compact(ctx, l, dataset, opt)
		return err
	})
	return done, err
}

// conflictTries is how many times a maintenance commit that lost a race
// with another commit of its table is planned and tried again.
const conflictTries = 10

// againOnConflict calls f until it does not fail for another commit of
// the table (iceberg-go's own retry covers only a race at the catalog's
// update: the catalog checks the branch head before, and fails with
// "branch main has changed"), conflictTries times at most, waiting a
// little longer each time.
func againOnConflict(ctx context.Context, f func() error) error {
	for try := 1; ; try++ {
		err := f()
		if err == nil || try == conflictTries || !errors.Is(err, table.ErrCommitFailed) && !strings.Contains(err.Error(), "has changed") {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(try) * 200 * time.Millisecond):
		}
	}
}

// compact is one try of Compact; l is held.
func (c *Iceberg) compact(ctx context.Context, l *tableLock, dataset string, opt lakehouse.Compaction) (lakehouse.Compacted, error) {
	var done lakehouse.Compacted
	tbl, err := c.reload(ctx, l, dataset)
	if err != nil || tbl == nil {
		return done, err
	}
	groups, err := c.smallFiles(ctx, tbl, opt.TargetBytes)
	if err != nil {
		return done, err
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return done, err
	}
	wfs, ok := fs.(icebergio.WriteFileIO)
	if !ok {
		return done, fmt.Errorf("compaction: the file IO of %s cannot write", strings.Join(tbl.Identifier(), "."))
	}
	var remove, add []string
	for _, g := range groups {
		for _, bin := range rewrite.Bins(g, func(f dataFile) int64 { return f.size }, opt.TargetBytes) {
			if len(bin) < opt.MinFiles {
				continue
			}
			key := compactedKey(dataset, bin)
			rows, size, err := rewriteBin(ctx, fs, wfs, c.location(key), bin, opt)
			if errors.Is(err, rewrite.ErrNoMerge) {
				c.log.Warn("files not compacted: their schemas do not merge", "table", dataset, "first", bin[0].key, "err", err)
				done.Skipped++
				continue
			}
			if err != nil {
				return lakehouse.Compacted{}, err
			}
			for _, f := range bin {
				remove = append(remove, f.path)
			}
			add = append(add, c.location(key))
			done.Written++
			done.Replaced += len(bin)
			done.Rows += rows
			done.Bytes += size
		}
	}
	if len(add) == 0 {
		return done, nil
	}
	props, _ := merged(tbl, nil) // the offsets, carried forward
	tx := tbl.NewTransaction()
	if err := tx.ReplaceDataFiles(ctx, remove, add, props); err != nil {
		return lakehouse.Compacted{}, fmt.Errorf("compacting %s: %w", strings.Join(tbl.Identifier(), "."), err)
	}
	next, err := tx.Commit(ctx)
	if err != nil {
		l.tbl = nil
		return lakehouse.Compacted{}, fmt.Errorf("committing the compaction of %s: %w", strings.Join(tbl.Identifier(), "."), err)
	}
	l.tbl = next
	c.log.Info("iceberg table compacted", "table", strings.Join(next.Identifier(), "."), "written", done.Written,
		"replaced", done.Replaced, "rows", done.Rows)
	return done, nil
}

// reload loads a dataset's table afresh (other processes may have
// committed since it was loaded), nil when it has no snapshot yet; l is
// held.
func (c *Iceberg) reload(ctx context.Context, l *tableLock, dataset string) (*table.Table, error) {
	tbl, err := c.load(ctx, dataset)
	l.tbl = tbl
	if err != nil || tbl == nil || tbl.CurrentSnapshot() == nil {
		return nil, err
	}
	return tbl, nil
}

// smallFiles returns the current snapshot's files smaller than target
// that start below their source partition's recorded offset (or hold
// only such rows: compacted files), by table partition, each in key order.
// The groups come in the order of their first file's key.
func (c *Iceberg) smallFiles(ctx context.Context, tbl *table.Table, target int64) ([][]dataFile, error) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	manifests, err := tbl.CurrentSnapshot().Manifests(fs)
	if err != nil {
		return nil, fmt.Errorf("reading the manifests of %s: %w", tbl.Identifier(), err)
	}
	recorded := offsets(tbl)
	byPart := map[string][]dataFile{}
	for _, m := range manifests {
		if m.ManifestContent() != iceberg.ManifestContentData {
			continue
		}
		entries, err := m.FetchEntries(fs, true)
		if err != nil {
			return nil, fmt.Errorf("reading the manifest %s: %w", m.FilePath(), err)
		}
		for _, e := range entries {
			df := e.DataFile()
			key, ok := c.key(df.FilePath())
			if !ok || df.FileSizeBytes() >= target {
				continue
			}
			if src, part, first, ok := lakehouse.Origin(key); ok && first >= recorded[lakehouse.Partition{Source: src, Partition: part}] {
				continue // may be looked up by its path (Landed)
			} else if !ok && !strings.HasPrefix(key, CompactedPrefix) {
				continue // not cdclake's
			}
			pk := partitionKey(df)
			byPart[pk] = append(byPart[pk], dataFile{path: df.FilePath(), key: key, size: df.FileSizeBytes(), rows: df.Count()})
		}
	}
	var out [][]dataFile
	for _, g := range byPart {
		slices.SortFunc(g, func(a, b dataFile) int { return strings.Compare(a.key, b.key) })
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b []dataFile) int { return strings.Compare(a[0].key, b[0].key) })
	return out, nil
}

// partitionKey identifies a data file's table partition: its spec and
// partition values.
func partitionKey(df iceberg.DataFile) string {
	vals := df.Partition()
	ids := make([]int, 0, len(vals))
	for id := range vals {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var b strings.Builder
	fmt.Fprintf(&b, "spec %d", df.SpecID())
	for _, id := range ids {
		fmt.Fprintf(&b, " %d=%v", id, vals[id])
	}
	return b.String()
}

// compactedKey is the key of the file that replaces bin: under
// CompactedPrefix, in its first file's directory within the dataset, named
// after the keys it replaces, so that compacting the same files again
// (after a failed commit) writes the same file.
func compactedKey(dataset string, bin []dataFile) string {
	keys := make([]string, len(bin))
	for i, f := range bin {
		keys[i] = f.key
	}
	dir := path.Dir(bin[0].key)
	if rest, ok := strings.CutPrefix(bin[0].key, CompactedPrefix); ok {
		dir = path.Dir(rest)
	}
	dir = strings.TrimPrefix(strings.TrimPrefix(dir, dataset), "/")
	return path.Join(CompactedPrefix+dataset, dir, rewrite.Name(keys))
}

// rewriteBin writes the rows of bin, in order, to the file at location,
// under the schema that merges theirs; it returns its rows and size.
func rewriteBin(ctx context.Context, fs icebergio.IO, wfs icebergio.WriteFileIO, location string, bin []dataFile, opt lakehouse.Compaction) (int64, int64, error) {
	var in []rewrite.Input
	defer func() {
		for _, f := range in {
			f.R.(icebergio.File).Close()
		}
	}()
	for _, f := range bin {
		r, err := fs.Open(f.path)
		if err != nil {
			return 0, 0, fmt.Errorf("opening %s: %w", f.path, err)
		}
		in = append(in, rewrite.Input{Name: f.path, R: r})
	}
	w, err := wfs.Create(location)
	if err != nil {
		return 0, 0, fmt.Errorf("creating %s: %w", location, err)
	}
	done, err := rewrite.Files(ctx, w, in, rewrite.Options{Compression: opt.Compression, Level: opt.Level, RowGroupRows: opt.RowGroupRows},
		memory.DefaultAllocator)
	if err != nil {
		w.Close()
		return 0, 0, fmt.Errorf("writing %s: %w", location, err)
	}
	if err := w.Close(); err != nil {
		return 0, 0, fmt.Errorf("writing %s: %w", location, err)
	}
	return done.Rows, done.Bytes, nil
}

// Datasets returns the datasets of the catalog's tables under the
// configured namespace, not the current-state tables
// (lakehouse.StateSuffix).
func (c *Iceberg) Datasets(ctx context.Context) ([]string, error) {
	root := slices.Clone(c.cfg.Namespace)
	seen := map[string]bool{strings.Join(root, "\x00"): true}
	var out []string
	// A SQL catalog lists every namespace under the parent, at any depth,
	// the parent among them; a REST catalog lists its children: each
	// namespace's tables and children are listed once.
	queue := []table.Identifier{root}
	for len(queue) > 0 {
		ns := queue[0]
		queue = queue[1:]
		if len(ns) > 0 {
			for id, err := range c.cat.ListTables(ctx, ns) {
				if err != nil {
					return nil, fmt.Errorf("listing the tables of %s: %w", strings.Join(ns, "."), err)
				}
				if name := strings.Join(id[len(root):], "."); !strings.HasSuffix(name, lakehouse.StateSuffix) {
					out = append(out, name)
				}
			}
		}
		children, err := c.cat.ListNamespaces(ctx, ns)
		if err != nil {
			return nil, fmt.Errorf("listing the iceberg namespaces: %w", err)
		}
		for _, child := range children {
			if len(child) > 0 && !seen[strings.Join(child, "\x00")] {
				seen[strings.Join(child, "\x00")] = true
				queue = append(queue, child)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}
