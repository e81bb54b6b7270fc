package delta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/sinks/lakehouse"
	"github.com/cdclake/cdclake/sinks/lakehouse/rewrite"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// CompactedDir is the folder, under a table's, of the files compaction
// writes: a hidden one (_), which readers of the plain lake's files skip,
// since its files hold rows the lake's files hold too.
const CompactedDir = "_compacted"

// conflictTries is how many times a compaction whose files another
// compaction replaced first is planned and tried again.
const conflictTries = 10

// errOvertaken fails a compaction's plan when a file it replaces is no
// longer in the table: another compaction took it first.
var errOvertaken = errors.New("a file the compaction replaces was replaced by another commit")

// compactFile is a data file of a table's newest version.
type compactFile struct {
	rel  string // table-relative
	size int64
}

// Compact rewrites the small files of the dataset's table (see
// lakehouse.Compaction; a Delta table of cdclake is unpartitioned, so the
// files are grouped by their folder, date=… under the default path) in one
// version that removes them and adds the compacted files, both with
// dataChange false: streaming readers of the table skip it, the rows
// being the same. The compacted files go under the table's CompactedDir,
// named after the files they replace.
func (d *Delta) Compact(ctx context.Context, dataset string, opt lakehouse.Compaction) (lakehouse.Compacted, error) {
	if opt.TargetBytes <= 0 {
		return lakehouse.Compacted{}, errors.New("compaction: the target size must be positive")
	}
	opt.MinFiles = max(opt.MinFiles, 2)
	t, err := d.open(ctx, dataset)
	if err != nil {
		return lakehouse.Compacted{}, err
	}
	defer t.Unlock()
	for try := 1; ; try++ {
		done, err := d.compact(ctx, t, opt)
		if !errors.Is(err, errOvertaken) || try == conflictTries {
			return done, err
		}
		select {
		case <-ctx.Done():
			return lakehouse.Compacted{}, err
		case <-time.After(time.Duration(try) * 200 * time.Millisecond):
		}
	}
}

// compact is one try of Compact; t is held.
func (d *Delta) compact(ctx context.Context, t *table, opt lakehouse.Compaction) (lakehouse.Compacted, error) {
	var done lakehouse.Compacted
	if err := d.read(ctx, t); err != nil {
		return done, err
	}
	if t.snap.version < 0 {
		return done, nil
	}
	var replaced []string
	var adds []*addFile
	for _, g := range smallFiles(t.snap, opt.TargetBytes) {
		for _, bin := range rewrite.Bins(g, func(f compactFile) int64 { return f.size }, opt.TargetBytes) {
			if len(bin) < opt.MinFiles {
				continue
			}
			add, rows, err := d.rewriteBin(ctx, t.root, bin, opt)
			if errors.Is(err, rewrite.ErrNoMerge) {
				d.log.Warn("files not compacted: their schemas do not merge", "table", t.root, "first", bin[0].rel, "err", err)
				done.Skipped++
				continue
			}
			if err != nil {
				return lakehouse.Compacted{}, err
			}
			for _, f := range bin {
				replaced = append(replaced, f.rel)
			}
			adds = append(adds, add)
			done.Written++
			done.Replaced += len(bin)
			done.Rows += rows
			done.Bytes += add.Size
		}
	}
	if len(adds) == 0 {
		return done, nil
	}
	err := d.commit(ctx, t, "OPTIMIZE", func(s *snapshot) ([]action, error) {
		now := d.cfg.Now().UnixMilli()
		var acts []action
		for _, rel := range replaced {
			f := s.files[rel]
			if f == nil {
				return nil, errOvertaken
			}
			acts = append(acts, action{Remove: &removeFile{Path: f.Path, DeletionTimestamp: now, DataChange: false, Size: f.Size}})
		}
		for _, a := range adds {
			if s.files[unescape(a.Path)] == nil {
				acts = append(acts, action{Add: a})
			}
		}
		return acts, nil
	})
	if err != nil {
		return lakehouse.Compacted{}, fmt.Errorf("compacting the delta table %s: %w", t.root, err)
	}
	d.log.Info("delta table compacted", "table", t.root, "version", t.snap.version, "written", done.Written,
		"replaced", done.Replaced, "rows", done.Rows)
	return done, nil
}

// smallFiles returns the table's files smaller than target that start
// below their source partition's recorded offset (a replay skips them by
// offset, never by path), and the compacted ones, grouped by folder (a
// compacted file by the folder of the files it replaced), each group in
// path order; the groups come in the order of their folders.
func smallFiles(s *snapshot, target int64) [][]compactFile {
	recorded := offsets(s)
	byDir := map[string][]compactFile{}
	for rel, f := range s.files {
		if f.Size >= target {
			continue
		}
		dir := path.Dir(rel)
		if rest, ok := strings.CutPrefix(rel, CompactedDir+"/"); ok {
			dir = path.Dir(rest)
		} else if src, part, first, ok := lakehouse.Origin(rel); !ok || first >= recorded[lakehouse.Partition{Source: src, Partition: part}] {
			continue // not cdclake's, or may be looked up by its path (Landed)
		}
		byDir[dir] = append(byDir[dir], compactFile{rel: rel, size: f.Size})
	}
	var out [][]compactFile
	for _, dir := range sortedKeys(byDir) {
		g := byDir[dir]
		slices.SortFunc(g, func(a, b compactFile) int { return strings.Compare(a.rel, b.rel) })
		out = append(out, g)
	}
	return out
}

// compactedRel is the table-relative path of the file that replaces bin:
// under CompactedDir, in the folder of its first file, named after the
// files it replaces (compacting the same files again, after a failed
// commit, writes the same file).
func compactedRel(bin []compactFile) string {
	rels := make([]string, len(bin))
	for i, f := range bin {
		rels[i] = f.rel
	}
	dir := path.Dir(strings.TrimPrefix(bin[0].rel, CompactedDir+"/"))
	return path.Join(CompactedDir, dir, rewrite.Name(rels))
}

// rewriteBin writes the rows of bin's files, in order, as one file, and
// returns its add action and its rows.
func (d *Delta) rewriteBin(ctx context.Context, root string, bin []compactFile, opt lakehouse.Compaction) (*addFile, int64, error) {
	var in []rewrite.Input
	for _, f := range bin {
		data, err := d.bucket.ReadAll(ctx, root+"/"+f.rel)
		if err != nil {
			return nil, 0, fmt.Errorf("reading %s/%s: %w", root, f.rel, err)
		}
		in = append(in, rewrite.Input{Name: root + "/" + f.rel, R: bytes.NewReader(data)})
	}
	rel := compactedRel(bin)
	var buf bytes.Buffer
	w, err := rewrite.Files(ctx, &buf, in, rewrite.Options{Compression: opt.Compression, Level: opt.Level, RowGroupRows: opt.RowGroupRows},
		memory.DefaultAllocator)
	if err != nil {
		return nil, 0, fmt.Errorf("writing %s/%s: %w", root, rel, err)
	}
	stats, _, err := statsOf(bytes.NewReader(buf.Bytes()), w.Schema)
	if err != nil {
		return nil, 0, fmt.Errorf("the stats of %s/%s: %w", root, rel, err)
	}
	if err := d.store.WriteObject(ctx, root+"/"+rel, buf.Bytes(), "application/vnd.apache.parquet"); err != nil {
		return nil, 0, err
	}
	return &addFile{Path: escape(rel), PartitionValues: map[string]string{}, Size: int64(buf.Len()),
		ModificationTime: d.cfg.Now().UnixMilli(), DataChange: false, Stats: stats}, w.Rows, nil
}

// orphanGrace is how much older than the expiry's age an unreferenced
// compacted file must be to be deleted: a compaction under way may have
// written it and not committed it yet.
const orphanGrace = time.Hour

// expireCompacted deletes the compacted files of the table at root that
// no version to keep names: those its versions replaced (as Expire does
// for a current-state table's), and those no version names at all (a
// compaction whose commit failed), once older than exp.OlderThan and
// orphanGrace. The lake's own files stay, even those a compaction
// replaced. t is held and read.
func (d *Delta) expireCompacted(ctx context.Context, t *table, exp lakehouse.Expiry) (lakehouse.Expired, error) {
	out, err := d.deleteReplaced(ctx, t, exp, func(rel string) bool { return strings.HasPrefix(rel, CompactedDir+"/") })
	if err != nil {
		return out, err
	}
	before := d.cfg.Now().Add(-exp.OlderThan - orphanGrace)
	s := t.snap
	var errs []error
	it := d.bucket.List(&blob.ListOptions{Prefix: t.root + "/" + CompactedDir + "/"})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return out, err
		}
		rel := strings.TrimPrefix(obj.Key, t.root+"/")
		if obj.IsDir || s.files[rel] != nil || s.removed[rel] != nil || !obj.ModTime.Before(before) {
			continue
		}
		errs = append(errs, d.delete(ctx, obj.Key, &out))
	}
	return out, errors.Join(errs...)
}

// deleteReplaced deletes the files of t (those ours says are) that its
// versions replaced once no version to keep names them: none of the newest
// exp.RetainLast, and the version that replaced the file is older than
// exp.OlderThan. t is held and read.
func (d *Delta) deleteReplaced(ctx context.Context, t *table, exp lakehouse.Expiry, ours func(rel string) bool) (lakehouse.Expired, error) {
	s := t.snap
	keep := max(exp.RetainLast, 1)
	before := d.cfg.Now().Add(-exp.OlderThan).UnixMilli()
	var out lakehouse.Expired
	var errs []error
	for _, p := range sortedKeys(s.removed) {
		// A file removed at version r is named by the versions before r.
		if !ours(p) || s.files[p] != nil || s.removedAt[p] > s.version-int64(keep)+1 || s.removed[p].DeletionTimestamp > before {
			continue
		}
		errs = append(errs, d.delete(ctx, t.root+"/"+p, &out))
	}
	return out, errors.Join(errs...)
}

// delete deletes a replaced file, counting it in out; one already gone is
// no error.
func (d *Delta) delete(ctx context.Context, key string, out *lakehouse.Expired) error {
	err := d.bucket.Delete(ctx, key)
	switch {
	case err == nil:
		out.Files++
	case gcerrors.Code(err) == gcerrors.NotFound:
		return nil
	}
	return err
}
