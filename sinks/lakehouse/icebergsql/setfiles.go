package icebergsql

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/cdclake/cdclake/sinks/lakehouse"
	"github.com/cdclake/cdclake/sinks/lakehouse/deletion"
)

// SetFiles makes the table name hold exactly set.Keys and set.Deletes
// (see lakehouse.Catalog): one snapshot that removes the data files and
// deletion vectors it holds and set does not name, and adds those it
// names the table lacks, with set.Properties in its summary and the
// table's properties. A table at a newer build than set.Version is left
// as it is. A commit another one overtook is planned again on the table
// as it is then.
func (c *Iceberg) SetFiles(ctx context.Context, name string, set lakehouse.FileSet) error {
	l := c.lock(name)
	defer l.Unlock()
	return againOnConflict(ctx, func() error { return c.setFiles(ctx, l, name, set) })
}

func (c *Iceberg) setFiles(ctx context.Context, l *tableLock, name string, set lakehouse.FileSet) error {
	tbl, err := c.loadAt(ctx, name, set.Location)
	if err != nil {
		return err
	}
	if tbl == nil {
		if tbl, err = c.createAt(ctx, name, set.Location, set.Schema, ""); err != nil {
			return err
		}
	}
	l.tbl = nil // SetFiles tables are loaded afresh each time
	if tbl, err = c.evolve(ctx, tbl, []lakehouse.File{{Key: set.Location, Schema: set.Schema}}); err != nil {
		return err
	}
	at, _ := strconv.ParseInt(tbl.Properties()[lakehouse.StateVersionKey], 10, 64)
	if set.Version > 0 && at > set.Version {
		c.log.Info("iceberg state table left as it is: it holds a newer build", "table", strings.Join(tbl.Identifier(), "."),
			"holds", at, "build", set.Version)
		return nil
	}
	want := map[string]bool{}
	for _, k := range set.Keys {
		want[c.location(k)] = true
	}
	type dvKey struct{ puffin, file string }
	wantDV := map[dvKey]deletion.Vector{}
	for _, v := range set.Deletes {
		wantDV[dvKey{c.location(v.Puffin), c.location(v.File)}] = v
	}
	var remove, removeDV []iceberg.DataFile
	held := map[string]bool{}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return err
	}
	if snap := tbl.CurrentSnapshot(); snap != nil {
		manifests, err := snap.Manifests(fs)
		if err != nil {
			return fmt.Errorf("reading the manifests of %s: %w", tbl.Identifier(), err)
		}
		for _, m := range manifests {
			entries, err := m.FetchEntries(fs, true)
			if err != nil {
				return fmt.Errorf("reading the manifest %s: %w", m.FilePath(), err)
			}
			for _, e := range entries {
				df := e.DataFile()
				path := df.FilePath()
				if df.ContentType() == iceberg.EntryContentData && held[path] {
					return fmt.Errorf("%s names the data file %s twice", strings.Join(tbl.Identifier(), "."), path)
				}
				switch {
				case df.ContentType() == iceberg.EntryContentData && want[path]:
					delete(want, path) // held already
					held[path] = true
				case df.ContentType() == iceberg.EntryContentData:
					remove = append(remove, df)
					held[path] = true
				case df.ReferencedDataFile() != nil:
					k := dvKey{path, *df.ReferencedDataFile()}
					if _, ok := wantDV[k]; ok {
						delete(wantDV, k)
					} else {
						removeDV = append(removeDV, df)
					}
				default:
					return fmt.Errorf("%s holds a delete file cdclake does not write: %s", strings.Join(tbl.Identifier(), "."), path)
				}
			}
		}
	}
	add := slices.Sorted(maps.Keys(want))
	byPath := func(a, b iceberg.DataFile) int { return strings.Compare(a.FilePath(), b.FilePath()) }
	slices.SortFunc(remove, byPath)
	slices.SortFunc(removeDV, byPath)
	var addDV []iceberg.DataFile
	for _, k := range slices.SortedFunc(maps.Keys(wantDV), func(a, b dvKey) int {
		return cmp.Or(strings.Compare(a.puffin, b.puffin), strings.Compare(a.file, b.file))
	}) {
		v := wantDV[k]
		bld, err := iceberg.NewDataFileBuilder(tbl.Spec(), iceberg.EntryContentPosDeletes, k.puffin, iceberg.PuffinFile,
			map[int]any{}, nil, nil, v.Rows, v.PuffinSize)
		if err != nil {
			return err
		}
		addDV = append(addDV, bld.ReferencedDataFile(k.file).ContentOffset(v.Offset).ContentSizeInBytes(v.Length).Build())
	}
	props := iceberg.Properties{}
	same := true
	for k, v := range set.Properties {
		props[k] = v
		same = same && tbl.Properties()[k] == v
	}
	if len(add) == 0 && len(remove) == 0 && len(addDV) == 0 && len(removeDV) == 0 && same {
		return nil
	}
	name = strings.Join(tbl.Identifier(), ".")
	// One snapshot cannot drop data files and add deletion vectors, nor
	// add a deletion vector of a data file it adds (iceberg-go wants a
	// vector's data file in the table already): the builds between go
	// first.
	behind := len(remove) > 0 && len(addDV) > 0
	for k := range wantDV {
		behind = behind || want[k.file]
	}
	if behind {
		return fmt.Errorf("%w: %s holds build %d, build %d started from %d", lakehouse.ErrStateBehind, name, at, set.Version, set.Base)
	}
	// dataFiles describes the files to add, from their footers; with
	// rowIDs, each with its first row id (format v3's row lineage, which
	// ReplaceFiles wants given), after the table's last.
	dataFiles := func(rowIDs bool) ([]iceberg.DataFile, error) {
		var out []iceberg.DataFile
		next := tbl.Metadata().NextRowID()
		for _, p := range add {
			df, err := dataFileAt(fs, tbl, p, next, rowIDs)
			if err != nil {
				return nil, fmt.Errorf("reading the footer of %s: %w", p, err)
			}
			next += df.Count()
			out = append(out, df)
		}
		return out, nil
	}
	tx := tbl.NewTransaction()
	// Planned on the table as it is: another commit first fails this one
	// (planned again), rather than letting iceberg-go apply it on top.
	if err := tx.AssertRefSnapshotID(table.MainBranch); err != nil {
		return err
	}
	if err := tx.SetProperties(props); err != nil {
		return err
	}
	switch {
	case len(addDV) > 0 || (len(removeDV) > 0 && len(remove) == 0):
		// Merge-on-read: rows added, and deletion vectors that replace
		// those of the same data files.
		var files []iceberg.DataFile
		if files, err = dataFiles(false); err == nil {
			err = tx.NewRowDelta(props).AddRows(files...).AddDeletes(addDV...).RemoveDeletes(removeDV...).Commit(ctx)
		}
	case len(removeDV) > 0:
		var files []iceberg.DataFile
		if files, err = dataFiles(true); err == nil {
			err = tx.ReplaceFiles(ctx, remove, files, removeDV, props)
		}
	case len(remove) > 0:
		paths := make([]string, len(remove))
		for i, df := range remove {
			paths[i] = df.FilePath()
		}
		err = tx.ReplaceDataFiles(ctx, paths, add, props)
	case len(add) > 0:
		err = tx.AddFiles(ctx, add, props, false)
	}
	if err != nil {
		return fmt.Errorf("setting the files of %s (%d added, %d removed, %d deletion vectors added, %d removed): %w", name,
			len(add), len(remove), len(addDV), len(removeDV), err)
	}
	if _, err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("committing the files of %s: %w", name, err)
	}
	c.log.Info("iceberg table files set", "table", name, "added", len(add), "removed", len(remove),
		"deletion_vectors_added", len(addDV), "deletion_vectors_removed", len(removeDV))
	return nil
}

// dataFileAt describes the Parquet file at path as a data file of tbl,
// from its footer, with first as its first row id when rowID.
func dataFileAt(fs icebergio.IO, tbl *table.Table, path string, first int64, rowID bool) (iceberg.DataFile, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	r, err := file.NewParquetReader(f)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var firstRowID *int64
	if rowID {
		firstRowID = &first
	}
	return dataFileOf(tbl, path, info.Size(), r.MetaData(), firstRowID)
}
