package delta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/cdclake/cdclake/sinks/lakehouse"
	"gocloud.dev/blob"
)

// SetFiles makes the table at set.Location hold exactly set.Keys, in one
// version that removes the files it holds and set does not name, adds
// those it names the table lacks, and records set.Properties in the
// table's configuration. It does nothing when the table holds them
// already with the same properties. Deletion vectors (a merge-on-read
// state table) are Iceberg's only.
func (d *Delta) SetFiles(ctx context.Context, name string, set lakehouse.FileSet) error {
	if len(set.Deletes) > 0 {
		return fmt.Errorf("%s: a merge-on-read state table is for Iceberg tables only, not Delta", name)
	}
	root := strings.Trim(set.Location, "/")
	d.mu.Lock()
	d.stateRoots[name] = root // for Expire
	d.mu.Unlock()
	t := d.lock(root)
	defer t.Unlock()
	adds := map[string]*addFile{}
	return d.commit(ctx, t, "WRITE", func(s *snapshot) ([]action, error) {
		if s.version < 0 && set.Schema == nil {
			return nil, fmt.Errorf("the delta table %s of %s: a new table needs a schema", root, name)
		}
		sch, changed := s.schema, s.version < 0
		if set.Schema != nil {
			ft, err := tableType(set.Schema)
			if err != nil {
				return nil, fmt.Errorf("the delta schema of %s: %w", name, err)
			}
			if s.version < 0 {
				sch = ft
			} else {
				var c bool
				if sch, c, err = merge(sch, ft, ""); err != nil {
					return nil, fmt.Errorf("the delta table %s of %s: %w", root, name, err)
				}
				changed = changed || c
			}
		}
		for k, v := range set.Properties {
			if s.meta == nil || s.meta.Configuration[k] != v {
				changed = true
			}
		}
		var acts []action
		if s.version < 0 {
			p := ourProtocol
			acts = append(acts, action{Protocol: &p})
		}
		if changed {
			acts = append(acts, d.metaData(s, root, sch, set.Properties))
		}
		want := map[string]bool{}
		for _, k := range set.Keys {
			rel, err := relative(root, k)
			if err != nil {
				return nil, err
			}
			want[rel] = true
			if s.files[rel] != nil {
				continue
			}
			a, err := d.addOf(ctx, root, lakehouse.File{Key: k, Schema: set.Schema}, adds)
			if err != nil {
				return nil, err
			}
			acts = append(acts, action{Add: a})
		}
		now := d.cfg.Now().UnixMilli()
		for _, p := range sortedKeys(s.files) {
			if !want[p] {
				f := s.files[p]
				acts = append(acts, action{Remove: &removeFile{Path: f.Path, DeletionTimestamp: now, DataChange: true, Size: f.Size}})
			}
		}
		if len(acts) == 0 || !changed && !slices.ContainsFunc(acts, func(a action) bool { return a.Add != nil || a.Remove != nil }) {
			return nil, nil
		}
		return acts, nil
	})
}

// Datasets returns the datasets whose tables the lake holds: the folders
// at its top with a _delta_log, but cdclake's own (named _...).
func (d *Delta) Datasets(ctx context.Context) ([]string, error) {
	var out []string
	it := d.bucket.List(&blob.ListOptions{Delimiter: "/"})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		name := strings.TrimSuffix(obj.Key, "/")
		if !obj.IsDir || strings.HasPrefix(name, "_") {
			continue
		}
		log := d.bucket.List(&blob.ListOptions{Prefix: name + "/_delta_log/"})
		if _, err := log.Next(ctx); err == nil {
			out = append(out, name)
		} else if !errors.Is(err, io.EOF) {
			return nil, err
		}
	}
	slices.Sort(out)
	return out, nil
}

// Expire deletes the files cdclake wrote for the table name that its
// versions replaced, once no version to keep names them: none of the
// newest exp.RetainLast, and the version that replaced the file is older
// than exp.OlderThan. Of a dataset's table, those are the compacted files
// (the lake's own files stay, even those a compaction replaced), with
// the compacted files no version names (a compaction whose commit
// failed) once older than exp.OlderThan and an hour; of a current-state
// table (a dataset's StateSuffix table, which SetFiles sets), every file
// it replaced. The log keeps every version (reading one whose files are
// gone fails, as time travel past Iceberg's expiry does). Expired.Files
// counts the files deleted; Snapshots is 0, no version being dropped.
func (d *Delta) Expire(ctx context.Context, name string, exp lakehouse.Expiry) (lakehouse.Expired, error) {
	dataset, state := strings.CutSuffix(name, lakehouse.StateSuffix)
	if !state {
		t, err := d.open(ctx, name)
		if err != nil {
			return lakehouse.Expired{}, err
		}
		defer t.Unlock()
		if t.snap.version < 0 {
			return lakehouse.Expired{}, nil
		}
		return d.expireCompacted(ctx, t, exp)
	}
	d.mu.Lock()
	root, ok := d.stateRoots[name]
	d.mu.Unlock()
	if !ok && d.cfg.StateRoot != nil {
		r, err := d.cfg.StateRoot(dataset)
		if err != nil {
			return lakehouse.Expired{}, err
		}
		root, ok = strings.Trim(r, "/"), true
	}
	if !ok {
		return lakehouse.Expired{}, fmt.Errorf("expiring %s: the folder of its delta table is not known", name)
	}
	t := d.lock(root)
	defer t.Unlock()
	if err := d.read(ctx, t); err != nil {
		return lakehouse.Expired{}, err
	}
	return d.deleteReplaced(ctx, t, exp, func(string) bool { return true })
}

// Files returns the keys of the files the table of a dataset holds, for
// tests and tools.
func (d *Delta) Files(ctx context.Context, dataset string) ([]string, error) {
	t, err := d.open(ctx, dataset)
	if err != nil {
		return nil, err
	}
	defer t.Unlock()
	return slices.Sorted(func(yield func(string) bool) {
		for p := range maps.Keys(t.snap.files) {
			if !yield(t.root + "/" + p) {
				return
			}
		}
	}), nil
}
