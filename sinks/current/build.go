package current

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/cdclake/cdclake/internal/arrowmerge"
	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/lakehouse/deletion"
	"gocloud.dev/blob"
)

// build is one Build.
type build struct {
	ctx     context.Context
	bucket  *blob.Bucket
	w       Writer
	opt     Options
	into    string
	m       manifest  // the state as it stands, then as the build leaves it
	prev    *manifest // the one the build starts from (nil: from nothing)
	old     *manifest // the newest one, which a rebuild replaces
	written []string  // the state files it wrote
	seeds   []seed
	// origin is where each loaded row lives: a data file and its row;
	// dead the rows of each loaded data file deleted already.
	origin  map[string]origin
	dead    map[string]*deletion.Positions
	puffins map[string][]byte // the Puffin files read, by key

	files  []*changeFile
	inputs []*input
	st     state
	fields []arrow.Field // the state table's data columns
	result Result
}

func (b *build) release() {
	for _, f := range b.files {
		f.release()
	}
	for _, in := range b.inputs {
		in.release()
	}
}

// partKey is a source partition by the source's name in object names.
type partKey struct {
	source string
	part   int32
}

type limit struct {
	below int64
	known bool
}

var objectName = regexp.MustCompile(`^(.*)-p(\d+)-o(\d{20})\.parquet$`)

// changeFiles lists the dataset's change files, with their source
// partition and first offset, in name order; folders whose names begin
// with _ or . are not the table's.
func (b *build) changeFiles() ([]string, map[string]partKey, map[string]int64, map[string]int64, error) {
	var keys []string
	parts, firsts, sizes := map[string]partKey{}, map[string]int64{}, map[string]int64{}
	it := b.bucket.List(&blob.ListOptions{Prefix: b.opt.Dataset + "/"})
	for {
		obj, err := it.Next(b.ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("listing %s: %w", b.opt.Dataset, err)
		}
		rel := strings.TrimPrefix(obj.Key, b.opt.Dataset+"/")
		hidden := false
		for _, seg := range strings.Split(path.Dir(rel), "/") {
			hidden = hidden || strings.HasPrefix(seg, "_") || strings.HasPrefix(seg, ".")
		}
		m := objectName.FindStringSubmatch(path.Base(rel))
		if hidden || m == nil {
			continue
		}
		p, err1 := strconv.ParseInt(m[2], 10, 32)
		first, err2 := strconv.ParseInt(m[3], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		keys = append(keys, obj.Key)
		parts[obj.Key] = partKey{m[1], int32(p)}
		firsts[obj.Key] = first
		sizes[obj.Key] = obj.Size
	}
	sort.Strings(keys)
	return keys, parts, firsts, sizes, nil
}

func (b *build) run() error {
	ctx := b.ctx
	// The partitions' limits are read between two listings: a file with
	// rows below a limit was written before the limit was, so the second
	// listing holds it. A partition first seen in the second listing
	// waits for the next build.
	first, parts, _, _, err := b.changeFiles()
	if err != nil {
		return err
	}
	known := map[partKey]bool{}
	for _, k := range first {
		known[parts[k]] = true
	}
	for _, o := range b.m.Offsets {
		known[partKey{sinks.Sanitize(o.Source), o.Partition}] = true
	}
	limits := map[partKey]limit{}
	for pk := range known {
		var l limit
		if b.opt.Committed != nil {
			if l.below, l.known, err = b.opt.Committed(ctx, pk.source, pk.part); err != nil {
				return fmt.Errorf("%s partition %d: where its landing stands: %w", pk.source, pk.part, err)
			}
		}
		limits[pk] = l
	}
	files, parts, firsts, sizes, err := b.changeFiles()
	if err != nil {
		return err
	}
	if len(files) == 0 && b.old == nil {
		return fmt.Errorf("%w in %s/", ErrNoChanges, b.opt.Dataset)
	}
	// Which files to read. In a partition with a landing state, a file
	// that begins below where the state stands holds only changes folded
	// in, unless the last build found it holding some past (partial); one
	// that begins at or past the landing state's offset is not complete
	// yet. A file of a partition without one is read again only if it
	// changed.
	consumed, partial := map[string]bool{}, map[string]bool{}
	for _, c := range b.m.Consumed {
		consumed[c.Key] = sizes[c.Key] == c.Size
	}
	for _, k := range b.m.Partial {
		partial[k] = true
	}
	next, nextOf := map[[2]any]int64{}, map[partKey]int64{}
	for _, o := range b.m.Offsets {
		next[[2]any{o.Source, o.Partition}] = o.Next
		nextOf[partKey{sinks.Sanitize(o.Source), o.Partition}] = o.Next
	}
	for _, k := range files {
		l, ok := limits[parts[k]]
		n, seen := nextOf[parts[k]]
		switch {
		case !ok, consumed[k]:
			continue
		case l.known && firsts[k] >= l.below:
			continue
		case l.known && seen && firsts[k] < n && !partial[k]:
			continue
		}
		f, err := readChanges(ctx, b.bucket, k, b.opt.Mem)
		if err != nil {
			return err
		}
		b.files = append(b.files, f)
	}
	b.result.Files = len(b.files)
	if len(b.m.Key) == 0 {
		for _, f := range b.files {
			if b.m.Key, err = f.primaryKeys(); err != nil || len(b.m.Key) > 0 {
				break
			}
		}
		if err != nil {
			return err
		}
	}

	// The change rows past where the state stands.
	var changes []*change
	truncated := false
	top := map[[2]any]int64{}
	for _, f := range b.files {
		in := int32(len(b.inputs))
		b.inputs = append(b.inputs, f.afterInput())
		whole := true
		for row := range f.rows {
			src, _ := text(f.source, row)
			part, off := f.part.Value(row), f.off.Value(row)
			pk := [2]any{src, part}
			l := limits[partKey{sinks.Sanitize(src), part}]
			if l.known && off >= l.below {
				whole = false
				continue
			}
			if n, ok := next[pk]; ok && off < n {
				continue
			}
			top[pk] = max(top[pk], off+1)
			c, err := b.change(f, in, row, src, part, off)
			if err != nil {
				return fmt.Errorf("%s, the change at %s partition %d offset %d: %w", f.key, src, part, off, err)
			}
			truncated = truncated || c.op == opTruncate
			changes = append(changes, c)
		}
		switch {
		case !whole:
			partial[f.key] = true
		case limits[parts[f.key]].known:
			delete(partial, f.key) // its partition's offsets say it
		default:
			consumed[f.key] = true
		}
		if whole {
			delete(partial, f.key)
		}
	}
	if len(b.m.Key) == 0 {
		return fmt.Errorf("%s: %w: name them (--key, or the route's key); only GoldenGate records name them", b.opt.Dataset, ErrNoKey)
	}
	b.result.Changes = int64(len(changes))
	// Where the state stands afterwards.
	for _, f := range b.files {
		for row := range f.rows {
			src, _ := text(f.source, row)
			part := f.part.Value(row)
			pk := [2]any{src, part}
			if l := limits[partKey{sinks.Sanitize(src), part}]; l.known {
				next[pk] = max(next[pk], l.below)
			} else {
				next[pk] = max(next[pk], top[pk])
			}
		}
	}

	// The buckets the changes touch, and their rows as they stand.
	affected := map[int]bool{}
	if truncated || b.prev == nil {
		for i := range b.m.Buckets {
			affected[i] = true
		}
	} else {
		for _, c := range changes {
			if c.key != "" {
				affected[bucketOf(c.key, b.m.Buckets)] = true
			}
			if c.oldKey != "" {
				affected[bucketOf(c.oldKey, b.m.Buckets)] = true
			}
			if c.movedTo != "" {
				affected[bucketOf(c.movedTo, b.m.Buckets)] = true
			}
		}
	}
	if len(changes) == 0 && b.prev != nil {
		affected = map[int]bool{}
	}
	prevSchema, err := decodeSchema(b.m.Schema)
	if err != nil {
		return err
	}
	// A change file with a column the state table lacks (the state
	// table's columns grow by it even without a change to fold): every
	// bucket is written whole, so that each row has the column, unknown
	// where no change carried it (_cdc_absent), not a NULL its file lacks.
	widened := false
	if b.prev != nil {
		for _, in := range b.inputs {
			for _, f := range in.fields {
				widened = widened || len(prevSchema.FieldIndices(f.Name)) == 0
			}
		}
	}
	if widened || b.opt.Whole {
		for i := range b.m.Buckets {
			affected[i] = true
		}
	}
	b.fields = slices.Clone(prevSchema.Fields())
	b.st.rows = map[string]*stateRow{}
	b.origin, b.dead, b.puffins = map[string]origin{}, map[string]*deletion.Positions{}, map[string][]byte{}
	if b.prev != nil {
		for _, bk := range sortedKeys(affected) {
			rows, err := b.loadBucket(bk)
			if err != nil {
				return err
			}
			for k, r := range rows {
				b.st.rows[k] = r
			}
		}
	}
	// Column numbers: the state's columns, then the changes' new ones.
	for _, in := range b.inputs {
		if err := b.addColumns(in); err != nil {
			return err
		}
	}
	for _, s := range b.seeds {
		s.r.vals = make([]ref, len(b.fields))
		for i := range s.r.vals {
			s.r.vals[i] = unknown
		}
		for _, col := range b.st.cols[s.at.in] {
			if !containsString(s.absent, b.fields[col].Name) {
				s.r.vals[col] = s.at
			}
		}
	}
	for _, c := range inOrder(changes) {
		if err := b.st.apply(c); err != nil {
			return err
		}
	}

	// Each touched bucket, written whole, or merged.
	if b.m.Rows == nil || len(b.m.Rows) != b.m.Buckets {
		b.m.Rows = make([]int64, b.m.Buckets)
	}
	if len(b.m.Files) != b.m.Buckets {
		b.m.Files = make([]string, b.m.Buckets)
	}
	g := newGather(b)
	defer g.release()
	order := sortedKeys(affected)
	if plan := b.planMerge(changes, affected, truncated || widened || b.opt.Whole); plan != nil {
		if err := b.writeMerged(g, order, plan); err != nil {
			return err
		}
	} else if err := b.writeWhole(g, order, affected); err != nil {
		return err
	}
	err = b.commit(next, consumed, partial, files, sizes, len(order))
	b.tidy(err == nil)
	return err
}

// writeWhole writes each bucket of order whole.
func (b *build) writeWhole(g *gather, order []int, affected map[int]bool) error {
	byBucket := map[int][]string{}
	for k := range b.st.rows {
		bk := bucketOf(k, b.m.Buckets)
		if !affected[bk] {
			return fmt.Errorf("internal error: a row of bucket %d, which the build does not rewrite", bk)
		}
		byBucket[bk] = append(byBucket[bk], k)
	}
	for _, bk := range order {
		keys := byBucket[bk]
		slices.Sort(keys)
		key, err := b.writeBucket(g, bk, keys)
		if err != nil {
			return err
		}
		b.m.Rows[bk], b.m.Files[bk] = int64(len(keys)), key
		if bk < len(b.m.Merge) {
			b.m.Merge[bk] = nil
		}
	}
	if !slices.ContainsFunc(b.m.Merge, func(mg *merge) bool { return mg != nil }) {
		b.m.Merge = nil
	}
	return nil
}

// mergePlan is what a merge-on-read build writes: per bucket, the keys
// of the rows its changes touched that the state holds, and the rows of
// the bucket's files they replace.
type mergePlan struct {
	keys map[int][]string
	dead map[int]map[string][]int64 // bucket → data file → rows
}

// planMerge returns what a merge-on-read build writes, nil when the
// build writes the buckets it touches whole: a build that is not
// merge-on-read, the first, one that truncates or adds a column (whole),
// and one after which a bucket would hold more than MaxMergeFiles files
// or more deleted rows than live ones.
func (b *build) planMerge(changes []*change, affected map[int]bool, whole bool) *mergePlan {
	if !b.opt.MergeOnRead || b.prev == nil || whole {
		return nil
	}
	touched := map[string]bool{}
	for _, c := range changes {
		for _, k := range []string{c.key, c.oldKey, c.movedTo} {
			if k != "" {
				touched[k] = true
			}
		}
	}
	p := &mergePlan{keys: map[int][]string{}, dead: map[int]map[string][]int64{}}
	for k := range touched {
		bk := bucketOf(k, b.m.Buckets)
		if _, ok := b.st.rows[k]; ok {
			p.keys[bk] = append(p.keys[bk], k)
		}
		if o, ok := b.origin[k]; ok {
			if p.dead[bk] == nil {
				p.dead[bk] = map[string][]int64{}
			}
			p.dead[bk][o.file] = append(p.dead[bk][o.file], o.row)
		}
	}
	for bk := range affected {
		files := len(b.m.dataFiles(bk))
		if len(p.keys[bk]) > 0 {
			files++
		}
		var dead, gone int64
		if bk < len(b.m.Merge) && b.m.Merge[bk] != nil {
			dead = b.m.Merge[bk].Dead
		}
		for _, rows := range p.dead[bk] {
			gone += int64(len(rows))
		}
		live := b.m.Rows[bk] - gone + int64(len(p.keys[bk]))
		if files > MaxMergeFiles || dead+gone > live {
			return nil
		}
	}
	return p
}

// writeMerged writes, of each bucket of order, the rows plan names in a
// file of their own, and one Puffin file of the deletion vectors of every
// data file with rows deleted, the old rows and the new.
func (b *build) writeMerged(g *gather, order []int, plan *mergePlan) error {
	if len(order) == 0 {
		return nil
	}
	if len(b.m.Merge) == 0 {
		b.m.Merge = make([]*merge, b.m.Buckets)
	}
	b.result.Merged = true
	var blobs []deletion.Blob
	var blobBucket []int
	for _, bk := range order {
		keys := plan.keys[bk]
		slices.Sort(keys)
		key, err := b.writeBucket(g, bk, keys)
		if err != nil {
			return err
		}
		mg := b.m.Merge[bk]
		if mg == nil {
			mg = &merge{}
			b.m.Merge[bk] = mg
		}
		if key != "" {
			mg.Files = append(mg.Files, key)
		}
		var gone int64
		for _, file := range slices.Sorted(maps.Keys(plan.dead[bk])) {
			rows := deletion.NewPositions()
			if old := b.dead[file]; old != nil {
				rows.Or(old)
			}
			for _, r := range plan.dead[bk][file] {
				rows.Set(uint64(r))
			}
			gone += int64(len(plan.dead[bk][file]))
			blobs = append(blobs, deletion.Blob{File: file, Location: b.opt.Location(file), Rows: rows})
			blobBucket = append(blobBucket, bk)
		}
		mg.Dead += gone
		b.m.Rows[bk] += int64(len(keys)) - gone
	}
	if len(blobs) == 0 {
		return nil
	}
	data, vecs, err := deletion.Encode(blobs)
	if err != nil {
		return err
	}
	key := fmt.Sprintf("%s/deletes-%s.puffin", b.into, b.contentName(data))
	b.written = append(b.written, key)
	if err := b.w.WriteObject(b.ctx, key, data, "application/octet-stream"); err != nil {
		return fmt.Errorf("writing %s: %w", key, err)
	}
	for i, v := range vecs {
		v.Puffin = key
		mg := b.m.Merge[blobBucket[i]]
		if j := slices.IndexFunc(mg.Deletes, func(d deletion.Vector) bool { return d.File == v.File }); j >= 0 {
			mg.Deletes[j] = v
		} else {
			mg.Deletes = append(mg.Deletes, v)
		}
	}
	return nil
}

// change decodes the change at row of f.
func (b *build) change(f *changeFile, in int32, row int, src string, part int32, off int64) (*change, error) {
	op, ok := text(f.op, row)
	if !ok {
		return nil, fmt.Errorf("no %s", schema.ColOp)
	}
	c := &change{meta: meta{op: op, source: src, part: part, off: off}, in: in, row: int32(row)}
	if f.ts != nil && f.ts.IsValid(row) {
		c.ts, c.hasTS = int64(f.ts.Value(row)), true
	}
	if op == opTruncate {
		return c, nil
	}
	if len(b.m.Key) == 0 {
		return c, nil // reported once, with the dataset
	}
	var err error
	beforeAbsent := listStrings(f.beforeAbsent, row)
	if op == opDelete {
		if c.key, err = keyOf(f.before, f.beforeIndex, beforeAbsent, row, b.m.Key); err != nil {
			return nil, fmt.Errorf("DELETE without its key: %w", err)
		}
		if v, ok := text(f.newKey, row); ok {
			c.movedTo, _ = jsonKey(v, b.m.Key)
		}
		return c, nil
	}
	c.absent = listStrings(f.afterAbsent, row)
	if c.key, err = keyOf(f.after, f.afterIndex, c.absent, row, b.m.Key); err != nil {
		return nil, fmt.Errorf("%s without its key: %w", op, err)
	}
	if f.before != nil && f.before.IsValid(row) {
		if old, err := keyOf(f.before, f.beforeIndex, beforeAbsent, row, b.m.Key); err == nil && old != c.key {
			c.oldKey = old
		}
	}
	if v, ok := text(f.oldKey, row); ok && c.oldKey == "" {
		if old, ok := jsonKey(v, b.m.Key); ok && old != c.key {
			c.oldKey = old
		}
	}
	return c, nil
}

// addColumns numbers an input's columns, adding the ones the state table
// does not have yet, and merges their types.
func (b *build) addColumns(in *input) error {
	cols := make([]int, len(in.fields))
	for i, f := range in.fields {
		j := slices.IndexFunc(b.fields, func(g arrow.Field) bool { return g.Name == f.Name })
		if j < 0 {
			b.fields = append(b.fields, arrow.Field{Name: f.Name, Type: f.Type, Nullable: true})
			j = len(b.fields) - 1
		} else {
			t, ok := arrowmerge.Types(b.fields[j].Type, f.Type)
			if !ok {
				return fmt.Errorf("%s: column %s is %s there and %s elsewhere: a state table needs one type per column (%w)",
					in.key, f.Name, f.Type, b.fields[j].Type, arrowmerge.ErrNoMerge)
			}
			b.fields[j].Type = t
		}
		cols[i] = j
	}
	b.st.cols = append(b.st.cols, cols)
	b.st.names = make([]string, len(b.fields))
	for i, f := range b.fields {
		b.st.names[i] = f.Name
	}
	return nil
}

// commit records the build in a new manifest.
func (b *build) commit(next map[[2]any]int64, consumed, partial map[string]bool, listed []string, sizes map[string]int64, rewritten int) error {
	b.m.Offsets = b.m.Offsets[:0:0]
	for pk, n := range next {
		b.m.Offsets = append(b.m.Offsets, Offset{Source: pk[0].(string), Partition: pk[1].(int32), Next: n})
	}
	slices.SortFunc(b.m.Offsets, func(x, y Offset) int {
		if c := strings.Compare(x.Source, y.Source); c != 0 {
			return c
		}
		return int(x.Partition) - int(y.Partition)
	})
	b.m.Consumed, b.m.Partial = b.m.Consumed[:0:0], b.m.Partial[:0:0]
	for _, k := range listed {
		if consumed[k] {
			b.m.Consumed = append(b.m.Consumed, Consumed{k, sizes[k]})
		}
		if partial[k] {
			b.m.Partial = append(b.m.Partial, k)
		}
	}
	sch, err := encodeSchema(arrow.NewSchema(b.fields, nil))
	if err != nil {
		return err
	}
	b.m.Schema = sch
	b.result.Buckets, b.result.Total = rewritten, b.m.Buckets
	if b.prev != nil && rewritten == 0 && slices.Equal(b.m.Offsets, b.prev.Offsets) && slices.Equal(b.m.Consumed, b.prev.Consumed) &&
		slices.Equal(b.m.Partial, b.prev.Partial) && slices.Equal(b.m.Files, b.prev.Files) {
		b.fill()
		return nil // nothing new
	}
	b.m.Base = b.m.Version
	b.m.Version++
	b.fill()
	data, err := json.MarshalIndent(b.m, "", " ")
	if err != nil {
		return err
	}
	key := manifestKey(b.into, b.m.Version)
	if err := b.w.CreateObject(b.ctx, key, data, "application/json"); err != nil {
		if isExists(err) {
			return fmt.Errorf("%s: %w; build it again", key, ErrConcurrent)
		}
		return fmt.Errorf("writing %s: %w", key, err)
	}
	keys, err := manifests(b.ctx, b.bucket, b.into)
	if err == nil && len(keys) > KeepManifests {
		for _, k := range keys[:len(keys)-KeepManifests] {
			if err = b.bucket.Delete(b.ctx, k); err != nil && !isNotFound(err) {
				break
			}
			err = nil
		}
	}
	if err != nil {
		b.opt.Log.Warn("old manifests of a state table not deleted: the folder grows, nothing else changes", "table", b.into, "err", err)
	}
	return nil
}

// fill sets the result's description of the state table from the
// manifest.
func (b *build) fill() {
	r := &b.result
	r.Version, r.Base, r.Key, r.Offsets = b.m.Version, b.m.Base, b.m.Key, b.m.Offsets
	r.StateFiles, r.Deletes, r.Rows = nil, b.m.vectors(), 0
	for bk := range b.m.Files {
		r.StateFiles = append(r.StateFiles, b.m.dataFiles(bk)...)
	}
	for _, n := range b.m.Rows {
		r.Rows += n
	}
	r.Schema = b.schema()
}

// tidy deletes the state files no manifest will name: after a build that
// committed, those of the manifest it replaced that the new one does not
// name (unless Options.KeepReplaced); after one that did not, those it
// wrote that the newest manifest does not name (another build's commit
// may name the same bytes). What it cannot delete stays, and is logged.
func (b *build) tidy(committed bool) {
	var gone []string
	if committed {
		if b.opt.KeepReplaced {
			return
		}
		if b.old != nil {
			for _, f := range b.old.Files {
				if f != "" && !b.m.names(f) {
					gone = append(gone, f)
				}
			}
		}
		gone = append(gone, b.orphans()...)
	} else if len(b.written) > 0 {
		newest, err := latestManifest(b.ctx, b.bucket, b.into)
		if err != nil {
			b.opt.Log.Warn("the files of a state table build that did not commit are left: the newest manifest does not read",
				"table", b.into, "err", err)
			return
		}
		for _, f := range b.written {
			if newest == nil || !newest.names(f) {
				gone = append(gone, f)
			}
		}
	}
	for _, f := range gone {
		if err := b.bucket.Delete(b.ctx, f); err != nil && !isNotFound(err) {
			b.opt.Log.Warn("a state file no manifest names is left: the folder holds it until deleted by hand", "file", f, "err", err)
		}
	}
}

// OrphanAge is the least age of a state file no manifest names that a
// build deletes: what a build that died left. A build under way creates
// its manifest within seconds of its files, or fails to (a newer build's
// manifest took its number).
const OrphanAge = time.Hour

var stateFile = regexp.MustCompile(`/bucket-\d{4}-[0-9a-f]{16}\.parquet$`)

// orphans lists the state files of the table's folder that the new
// manifest does not name, older than OrphanAge.
func (b *build) orphans() []string {
	var out []string
	it := b.bucket.List(&blob.ListOptions{Prefix: b.into + "/", Delimiter: "/"})
	for {
		obj, err := it.Next(b.ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			b.opt.Log.Warn("the folder of a state table does not list: files of builds that died are left", "table", b.into, "err", err)
			return out
		}
		if !obj.IsDir && stateFile.MatchString(obj.Key) && !b.m.names(obj.Key) && time.Since(obj.ModTime) > OrphanAge {
			out = append(out, obj.Key)
		}
	}
	return out
}

// loadBucket reads a bucket's data files, but the rows their deletion
// vectors delete: an input per file, and the bucket's rows by key.
func (b *build) loadBucket(bk int) (map[string]*stateRow, error) {
	var dels []deletion.Vector
	if bk < len(b.m.Merge) && b.m.Merge[bk] != nil {
		dels = b.m.Merge[bk].Deletes
	}
	rows := map[string]*stateRow{}
	for _, key := range b.m.dataFiles(bk) {
		var dead *deletion.Positions
		if i := slices.IndexFunc(dels, func(v deletion.Vector) bool { return v.File == key }); i >= 0 {
			var err error
			if dead, err = b.readVector(dels[i]); err != nil {
				return nil, err
			}
			b.dead[key] = dead
		}
		if err := b.loadFile(key, dead, rows); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// readVector reads a deletion vector of the state table.
// A Puffin file holds the vectors of every file a build deleted rows of:
// it is read once a build.
func (b *build) readVector(v deletion.Vector) (*deletion.Positions, error) {
	data, ok := b.puffins[v.Puffin]
	if !ok {
		var err error
		if data, err = b.bucket.ReadAll(b.ctx, v.Puffin); err != nil {
			return nil, fmt.Errorf("reading %s: %w", v.Puffin, err)
		}
		b.puffins[v.Puffin] = data
	}
	return deletion.Decode(data, v)
}

// origin is where a state row lives: a data file's row.
type origin struct {
	file string
	row  int64
}

// loadFile reads a state file into rows, but the rows dead deletes.
func (b *build) loadFile(key string, dead *deletion.Positions, rows map[string]*stateRow) error {
	sch, cols, err := readTable(b.ctx, b.bucket, key, b.opt.Mem)
	if isNotFound(err) && !b.opt.KeepReplaced {
		return nil // another build's tidy went first (its manifest is newer)
	}
	if err != nil {
		return err
	}
	in := &input{key: key}
	idx := map[string]int{}
	var metaCols = map[string]arrow.Array{}
	for i, f := range sch.Fields() {
		if strings.HasPrefix(f.Name, "_cdc_") {
			metaCols[f.Name] = cols[i]
			continue
		}
		idx[f.Name] = len(in.fields)
		in.fields = append(in.fields, f)
		in.arrays = append(in.arrays, cols[i])
	}
	defer func() {
		for _, a := range metaCols {
			a.Release()
		}
	}()
	// Its input number is the one addColumns gives it next.
	n := int32(len(b.inputs))
	b.inputs = append(b.inputs, in)
	ops, ts, src := metaCols[schema.ColOp], metaCols[schema.ColTS], metaCols[schema.ColSource]
	part, _ := metaCols[schema.ColPartition].(*array.Int32)
	off, _ := metaCols[schema.ColOffset].(*array.Int64)
	absent, _ := metaCols[schema.ColAbsent].(*array.List)
	tsa, _ := ts.(*array.Timestamp)
	if ops == nil || src == nil || part == nil || off == nil || absent == nil || tsa == nil {
		return fmt.Errorf("%s: not a state file of cdclake (%s)", key, sch)
	}
	for row := range off.Len() {
		if dead != nil && dead.Contains(uint64(row)) {
			continue
		}
		k, err := keyOfColumns(in, idx, row, b.m.Key)
		if err != nil {
			return fmt.Errorf("%s row %d: %w", key, row, err)
		}
		if o, ok := b.origin[k]; ok {
			return fmt.Errorf("%s row %d: the key's row is %s row %d as well: the state table's deletion vectors miss one", key, row, o.file, o.row)
		}
		r := &stateRow{}
		r.last.op, _ = text(ops, row)
		r.last.source, _ = text(src, row)
		r.last.part, r.last.off = part.Value(row), off.Value(row)
		if tsa.IsValid(row) {
			r.last.ts, r.last.hasTS = int64(tsa.Value(row)), true
		}
		b.seeds = append(b.seeds, seed{r: r, at: ref{n, int32(row)}, absent: listStrings(absent, row)})
		rows[k] = r
		b.origin[k] = origin{key, int64(row)}
	}
	return nil
}

// seed is a state row read from a state file, its values to point at
// that file's row once the columns are numbered.
type seed struct {
	r      *stateRow
	at     ref
	absent []string
}

func sortedKeys(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func isExists(err error) bool { return errors.Is(err, sinks.ErrExists) }

// keyOfColumns is keyOf for an input's top-level columns.
func keyOfColumns(in *input, idx map[string]int, row int, key []string) (string, error) {
	return encodeKey(func(name string) arrow.Array {
		if i, ok := idx[name]; ok {
			return in.arrays[i]
		}
		return nil
	}, row, key)
}
