package icebergsql

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/cdclake/cdclake/internal/arrowmerge"
	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/lakehouse"
	"github.com/cdclake/cdclake/sinks/parquet"
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
		for _, bin := range bins(g, opt.TargetBytes) {
			if len(bin) < opt.MinFiles {
				continue
			}
			key := compactedKey(dataset, bin)
			rows, size, err := rewrite(ctx, fs, wfs, c.location(key), bin, opt)
			if errors.Is(err, arrowmerge.ErrNoMerge) {
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

// bins cuts a partition's files, in order, into runs of about target
// bytes: a run ends with the file that brings it to target.
func bins(files []dataFile, target int64) [][]dataFile {
	var out [][]dataFile
	var cur []dataFile
	var size int64
	for _, f := range files {
		cur = append(cur, f)
		size += f.size
		if size >= target {
			out = append(out, cur)
			cur, size = nil, 0
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// compactedKey is the key of the file that replaces bin: under
// CompactedPrefix, in its first file's directory within the dataset, named
// after the keys it replaces, so that compacting the same files again
// (after a failed commit) writes the same file.
func compactedKey(dataset string, bin []dataFile) string {
	h := sha256.New()
	for _, f := range bin {
		h.Write([]byte(f.key))
		h.Write([]byte{'\n'})
	}
	dir := path.Dir(bin[0].key)
	if rest, ok := strings.CutPrefix(bin[0].key, CompactedPrefix); ok {
		dir = path.Dir(rest)
	}
	dir = strings.TrimPrefix(strings.TrimPrefix(dir, dataset), "/")
	return path.Join(CompactedPrefix+dataset, dir, "compacted-"+hex.EncodeToString(h.Sum(nil))[:20]+".parquet")
}

// rewrite writes the rows of bin, in order, to the file at location, under
// the schema that merges theirs; it returns its rows and size.
func rewrite(ctx context.Context, fs icebergio.IO, wfs icebergio.WriteFileIO, location string, bin []dataFile, opt lakehouse.Compaction) (int64, int64, error) {
	mem := memory.DefaultAllocator
	var tables []arrow.Table
	defer func() {
		for _, t := range tables {
			t.Release()
		}
	}()
	for _, f := range bin {
		t, err := readTable(ctx, fs, f.path, mem)
		if err != nil {
			return 0, 0, err
		}
		tables = append(tables, t)
	}
	target := tables[0].Schema()
	for _, t := range tables[1:] {
		var ok bool
		if target, ok = arrowmerge.Schemas(target, t.Schema()); !ok {
			return 0, 0, fmt.Errorf("%w: %s and %s", arrowmerge.ErrNoMerge, tables[0].Schema(), t.Schema())
		}
	}
	target = arrowmerge.WithoutFieldIDs(target)
	var parts []sinks.Part
	defer func() {
		for _, p := range parts {
			p.Record.Release()
		}
	}()
	var rows int64
	for _, t := range tables {
		tr := array.NewTableReader(t, 1<<16)
		for tr.Next() {
			rec, err := arrowmerge.Record(tr.RecordBatch(), target, mem)
			if err != nil {
				tr.Release()
				return 0, 0, err
			}
			parts = append(parts, sinks.Part{Record: rec, Ranges: [][2]int{{0, int(rec.NumRows())}}})
			rows += rec.NumRows()
		}
		err := tr.Err()
		tr.Release()
		if err != nil {
			return 0, 0, err
		}
	}
	w, err := wfs.Create(location)
	if err != nil {
		return 0, 0, fmt.Errorf("creating %s: %w", location, err)
	}
	cw := &countingWriter{w: w}
	popt := parquet.Options{Compression: opt.Compression, Level: opt.Level, RowGroupRows: opt.RowGroupRows}
	if err := parquet.WriteParts(cw, parts, popt, mem); err != nil {
		w.Close()
		return 0, 0, fmt.Errorf("writing %s: %w", location, err)
	}
	if err := w.Close(); err != nil {
		return 0, 0, fmt.Errorf("writing %s: %w", location, err)
	}
	return rows, cw.n, nil
}

type countingWriter struct {
	w interface{ Write([]byte) (int, error) }
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// readTable reads a Parquet file whole, with the Arrow schema it stores.
func readTable(ctx context.Context, fs icebergio.IO, location string, mem memory.Allocator) (arrow.Table, error) {
	f, err := fs.Open(location)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", location, err)
	}
	defer f.Close()
	pr, err := file.NewParquetReader(f)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", location, err)
	}
	defer pr.Close()
	fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{BatchSize: 1 << 16}, mem)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", location, err)
	}
	t, err := fr.ReadTable(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", location, err)
	}
	return t, nil
}

// Datasets returns the datasets of the catalog's tables under the
// configured namespace, not the current-state tables
// (lakehouse.StateSuffix).
func (c *Iceberg) Datasets(ctx context.Context) ([]string, error) {
	root := slices.Clone(c.cfg.Namespace)
	// The SQL catalog lists every namespace under the parent, at any
	// depth, the parent among them.
	spaces, err := c.cat.ListNamespaces(ctx, root)
	if err != nil {
		return nil, fmt.Errorf("listing the iceberg namespaces: %w", err)
	}
	seen := map[string]bool{}
	var out []string
	for _, ns := range spaces {
		if len(ns) == 0 || seen[strings.Join(ns, "\x00")] {
			continue
		}
		seen[strings.Join(ns, "\x00")] = true
		for id, err := range c.cat.ListTables(ctx, ns) {
			if err != nil {
				return nil, fmt.Errorf("listing the tables of %s: %w", strings.Join(ns, "."), err)
			}
			if name := strings.Join(id[len(root):], "."); !strings.HasSuffix(name, lakehouse.StateSuffix) {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}
