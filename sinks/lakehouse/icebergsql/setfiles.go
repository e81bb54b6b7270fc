package icebergsql

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/cdclake/cdclake/sinks/lakehouse"
)

// SetFiles makes the table name hold exactly set.Keys (see
// lakehouse.Catalog): one snapshot that removes the data files it holds
// and set does not name, and adds those it names the table lacks, with
// set.Properties in its summary and the table's properties. A commit
// another one overtook is planned again on the table as it is then.
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
	want := map[string]bool{}
	for _, k := range set.Keys {
		want[c.location(k)] = true
	}
	var remove []string
	if snap := tbl.CurrentSnapshot(); snap != nil {
		fs, err := tbl.FS(ctx)
		if err != nil {
			return err
		}
		manifests, err := snap.Manifests(fs)
		if err != nil {
			return fmt.Errorf("reading the manifests of %s: %w", tbl.Identifier(), err)
		}
		for _, m := range manifests {
			if m.ManifestContent() != iceberg.ManifestContentData {
				continue
			}
			entries, err := m.FetchEntries(fs, true)
			if err != nil {
				return fmt.Errorf("reading the manifest %s: %w", m.FilePath(), err)
			}
			for _, e := range entries {
				path := e.DataFile().FilePath()
				if want[path] {
					delete(want, path) // held already
				} else {
					remove = append(remove, path)
				}
			}
		}
	}
	add := slices.Sorted(maps.Keys(want))
	slices.Sort(remove)
	props := iceberg.Properties{}
	same := true
	for k, v := range set.Properties {
		props[k] = v
		same = same && tbl.Properties()[k] == v
	}
	if len(add) == 0 && len(remove) == 0 && same {
		return nil
	}
	tx := tbl.NewTransaction()
	if err := tx.SetProperties(props); err != nil {
		return err
	}
	switch {
	case len(remove) > 0:
		err = tx.ReplaceDataFiles(ctx, remove, add, props)
	case len(add) > 0:
		err = tx.AddFiles(ctx, add, props, false)
	}
	if err != nil {
		return fmt.Errorf("setting the files of %s (%d added, %d removed): %w", strings.Join(tbl.Identifier(), "."), len(add), len(remove), err)
	}
	if _, err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("committing the files of %s: %w", strings.Join(tbl.Identifier(), "."), err)
	}
	c.log.Info("iceberg table files set", "table", strings.Join(tbl.Identifier(), "."), "added", len(add), "removed", len(remove))
	return nil
}
