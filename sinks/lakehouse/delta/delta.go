// Package delta is lakehouse.Catalog for Delta Lake tables: it writes each
// table's transaction log (_delta_log, PROTOCOL.md of the Delta project)
// beside the files it commits, in the lake itself. No catalog service is
// involved: a table is its folder.
//
// # Tables
//
// A dataset's table is the folder its route's path puts its files in
// (Config.Root: the path's expansion up to {table}'s folder), so that its
// add actions name the files by their paths under it. A table is made at
// its first commit: protocol 3/7 with the timestampNtz feature (cdclake's
// local date-times), unpartitioned (readers skip files by the _cdc_ts
// bounds in each add's stats), with the Delta schema of its first file.
// A file with columns the table lacks adds them first, in a metaData
// action of the same commit (additive evolution, at every struct depth);
// a column whose type changes, or a type Delta lacks (a time of day, a
// column of NULLs only), is lakehouse.ErrSchema.
//
// # Exactly once
//
// Each commit records, per source partition, the offset below which every
// row of that partition is in the table as a txn action (appId
// cdclake.offset.<source>.<partition>, version the offset), in the same
// version as the files: the offsets and the files go in together or not at
// all. A version is created with a conditional create (If-None-Match:
// gocloud's IfNotExist); a writer that finds its version taken reads the
// table again and plans the commit anew (a file the table now holds is not
// added twice). A commit whose reply was lost is told from another
// writer's by its bytes (each carries a txnId of its own).
//
// # Checkpoints
//
// Every CheckpointInterval versions a checkpoint (<version>.checkpoint.parquet,
// and _last_checkpoint naming it) holds the table's state, so that readers,
// and cdclake at its start, read it and the few commits after it. A
// failed checkpoint is logged and written at the next interval: readers
// replay the commits.
//
// # Compaction
//
// Compact rewrites a table's small files folder by folder into files
// under its CompactedDir, in an OPTIMIZE version that removes them and
// adds the new ones without a data change; Expire deletes the compacted
// files later versions replaced. The lake's own files are never deleted.
package delta

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/lake"
	"github.com/cdclake/cdclake/sinks/lakehouse"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// Store is what the log is written through: create-once commits, and
// checkpoints written whole.
type Store interface {
	sinks.ObjectCreator
	sinks.ObjectWriter
}

// Config says where the tables are and how they are written.
type Config struct {
	// Root returns the folder of a dataset's table, bucket-relative.
	Root func(dataset string) (string, error)
	// StateRoot returns the folder of a dataset's current-state table,
	// for an Expire of one no SetFiles of this process named; nil: none.
	StateRoot func(dataset string) (string, error)
	// CheckpointInterval is the number of versions between checkpoints
	// (default 10, as Delta's delta.checkpointInterval).
	CheckpointInterval int
	// LogRetention is how long the log files of the versions before a
	// checkpoint are kept once that checkpoint's own commit is older than
	// it (Delta's delta.logRetentionDuration); 0: forever.
	LogRetention time.Duration
	// Engine names the writer in each commit's commitInfo.
	Engine string
	// Now is the clock of commitInfo and txn timestamps (default
	// time.Now).
	Now func() time.Time
}

// Delta commits files to the Delta tables of a lake; see the package
// documentation. It is safe for concurrent use; commits to one table are
// serialized.
type Delta struct {
	bucket *blob.Bucket
	store  Store
	cfg    Config
	log    *slog.Logger

	mu         sync.Mutex
	tables     map[string]*table // by root
	stateRoots map[string]string // current-state table → root, from SetFiles
}

type table struct {
	sync.Mutex
	root string
	snap *snapshot // nil: not read yet
}

// New returns the Delta tables of the lake in bucket, whose log is written
// through store (the lake's sink, with its retries).
func New(bucket *blob.Bucket, store Store, cfg Config, log *slog.Logger) *Delta {
	if cfg.CheckpointInterval <= 0 {
		cfg.CheckpointInterval = 10
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Engine == "" {
		cfg.Engine = "cdclake"
	}
	return &Delta{bucket: bucket, store: store, cfg: cfg, log: log.With("component", "delta"), tables: map[string]*table{},
		stateRoots: map[string]string{}}
}

// Close releases nothing: the tables are the lake's objects.
func (d *Delta) Close() error { return nil }

// lock returns the table at root, locked.
func (d *Delta) lock(root string) *table {
	d.mu.Lock()
	t := d.tables[root]
	if t == nil {
		t = &table{root: root}
		d.tables[root] = t
	}
	d.mu.Unlock()
	t.Lock()
	return t
}

// open returns the dataset's table, locked and read up to its newest
// version.
func (d *Delta) open(ctx context.Context, dataset string) (*table, error) {
	root, err := d.cfg.Root(dataset)
	if err != nil {
		return nil, fmt.Errorf("the delta table of %s: %w", dataset, err)
	}
	t := d.lock(strings.Trim(root, "/"))
	if err := d.read(ctx, t); err != nil {
		t.Unlock()
		return nil, err
	}
	return t, nil
}

// Offsets returns the offsets the dataset's table records, from its txn
// actions.
func (d *Delta) Offsets(ctx context.Context, dataset string) (map[lakehouse.Partition]int64, error) {
	t, err := d.open(ctx, dataset)
	if err != nil {
		return nil, err
	}
	defer t.Unlock()
	return offsets(t.snap), nil
}

func offsets(s *snapshot) map[lakehouse.Partition]int64 {
	out := map[lakehouse.Partition]int64{}
	for app, v := range s.txns {
		if p, ok := partitionOf(app); ok {
			out[p] = v
		}
	}
	return out
}

// partitionOf reads the partition of a txn appId (lakehouse.OffsetKey).
func partitionOf(app string) (lakehouse.Partition, bool) {
	rest, ok := strings.CutPrefix(app, lakehouse.OffsetPrefix)
	i := strings.LastIndexByte(rest, '.')
	if !ok || i < 0 {
		return lakehouse.Partition{}, false
	}
	var part int32
	if _, err := fmt.Sscanf(rest[i+1:], "%d", &part); err != nil {
		return lakehouse.Partition{}, false
	}
	return lakehouse.Partition{Source: rest[:i], Partition: part}, true
}

// Landed returns the keys of the table's files of the given partitions
// that start at or past the offset it records for them.
func (d *Delta) Landed(ctx context.Context, dataset string, parts map[lakehouse.Partition]bool) (map[string]bool, error) {
	t, err := d.open(ctx, dataset)
	if err != nil {
		return nil, err
	}
	defer t.Unlock()
	recorded := offsets(t.snap)
	out := map[string]bool{}
	for p := range t.snap.files {
		src, part, first, ok := lakehouse.Origin(p)
		key := lakehouse.Partition{Source: src, Partition: part}
		if ok && parts[key] && first >= recorded[key] {
			out[t.root+"/"+p] = true
		}
	}
	return out, nil
}

// Commit adds files, all of dataset, but those in skip and those the
// table holds, in one version that records recorded where it advances the
// table's offsets; the table is made, or its schema evolved, in the same
// version.
func (d *Delta) Commit(ctx context.Context, dataset string, files []lakehouse.File, recorded map[lakehouse.Partition]int64, skip map[string]bool) error {
	t, err := d.open(ctx, dataset)
	if err != nil {
		return err
	}
	defer t.Unlock()
	adds := map[string]*addFile{} // read once, whatever the tries
	return d.commit(ctx, t, "WRITE", func(s *snapshot) ([]action, error) {
		if s.version < 0 && len(files) == 0 {
			return nil, nil // offsets alone make no table
		}
		sch, meta, err := d.evolve(s, t.root, files)
		if err != nil {
			return nil, err
		}
		var acts []action
		if s.version < 0 {
			p := ourProtocol
			acts = append(acts, action{Protocol: &p})
		}
		if meta {
			acts = append(acts, d.metaData(s, t.root, sch, nil))
		}
		acts = append(acts, d.txns(s, recorded)...)
		for _, f := range files {
			rel, err := relative(t.root, f.Key)
			if err != nil {
				return nil, err
			}
			if skip[f.Key] || s.files[rel] != nil {
				continue
			}
			a, err := d.addOf(ctx, t.root, f, adds)
			if err != nil {
				return nil, err
			}
			acts = append(acts, action{Add: a})
		}
		return acts, nil
	})
}

// RecordOffsets advances the offsets the table records where recorded is
// past them, in a version of txn actions alone.
func (d *Delta) RecordOffsets(ctx context.Context, dataset string, recorded map[lakehouse.Partition]int64) error {
	return d.Commit(ctx, dataset, nil, recorded, nil)
}

// txns returns the txn actions that advance the table's offsets to
// recorded, in partition order.
func (d *Delta) txns(s *snapshot, recorded map[lakehouse.Partition]int64) []action {
	parts := slices.SortedFunc(maps.Keys(recorded), func(a, b lakehouse.Partition) int {
		return strings.Compare(lakehouse.OffsetKey(a), lakehouse.OffsetKey(b))
	})
	var acts []action
	now := d.cfg.Now().UnixMilli()
	for _, p := range parts {
		app := lakehouse.OffsetKey(p)
		if at, ok := s.txns[app]; !ok || recorded[p] > at {
			acts = append(acts, action{Txn: &txn{AppID: app, Version: recorded[p], LastUpdated: now}})
		}
	}
	return acts
}

// evolve returns the table's schema with the columns of files it lacks,
// and whether it changed (or the table is new).
func (d *Delta) evolve(s *snapshot, root string, files []lakehouse.File) (dataType, bool, error) {
	sch, changed := s.schema, s.version < 0
	seen := map[any]bool{}
	for i, f := range files {
		if f.Schema == nil || seen[f.Schema] {
			continue
		}
		seen[f.Schema] = true
		ft, err := tableType(f.Schema)
		if err != nil {
			return dataType{}, false, fmt.Errorf("the delta schema of %s: %w", f.Key, err)
		}
		if s.version < 0 && i == 0 {
			sch = ft
			continue
		}
		merged, c, err := merge(sch, ft, "")
		if err != nil {
			return dataType{}, false, fmt.Errorf("%s, table %s: %w", f.Key, root, err)
		}
		sch, changed = merged, changed || c
	}
	return sch, changed, nil
}

// metaData returns the table's metaData action with schema sch and its
// configuration updated with props.
func (d *Delta) metaData(s *snapshot, root string, sch dataType, props map[string]string) action {
	m := metaData{ID: tableID(root), Format: format{Provider: "parquet", Options: map[string]string{}},
		PartitionColumns: []string{}, Configuration: map[string]string{}, CreatedTime: d.cfg.Now().UnixMilli()}
	if s.meta != nil {
		m = *s.meta
		m.Configuration = maps.Clone(m.Configuration)
		if m.Configuration == nil {
			m.Configuration = map[string]string{}
		}
	}
	maps.Copy(m.Configuration, props)
	m.SchemaString = schemaString(sch)
	return action{MetaData: &m}
}

// tableID is the id of the table at root: a UUID made of the root's hash,
// so that a table made again from the same files has the same id.
func tableID(root string) string {
	h := sha256.Sum256([]byte("cdclake delta table " + root))
	h[6] = h[6]&0x0f | 0x50 // version 5 (name-based, SHA)
	h[8] = h[8]&0x3f | 0x80
	x := hex.EncodeToString(h[:16])
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}

// relative returns key's path under root.
func relative(root, key string) (string, error) {
	rel, ok := strings.CutPrefix(key, root+"/")
	if !ok || rel == "" {
		return "", fmt.Errorf("%s is not in the folder of its delta table, %s: the route's path must begin with {table}/", key, root)
	}
	return rel, nil
}

// addOf returns the add action of a file: its size, modification time and
// stats, read once (cache).
func (d *Delta) addOf(ctx context.Context, root string, f lakehouse.File, cache map[string]*addFile) (*addFile, error) {
	if a := cache[f.Key]; a != nil {
		return a, nil
	}
	rel, err := relative(root, f.Key)
	if err != nil {
		return nil, err
	}
	a := &addFile{Path: escape(rel), PartitionValues: map[string]string{}, DataChange: true}
	if f.Footer != nil && f.Bytes > 0 {
		// Known from the write: nothing is read back.
		stats, err := footerStats(f.Footer, f.Schema)
		if err == nil {
			a.Size, a.ModificationTime, a.Stats = f.Bytes, d.cfg.Now().UnixMilli(), stats
			cache[f.Key] = a
			return a, nil
		}
		d.log.Warn("a written file's footer does not parse; its stats are read from the store", "key", f.Key, "err", err)
	}
	attrs, err := d.bucket.Attributes(ctx, f.Key)
	if err != nil {
		return nil, statsError(f.Key, err)
	}
	r, err := lake.OpenSmall(ctx, d.bucket, f.Key, 4<<20)
	if err != nil {
		return nil, statsError(f.Key, err)
	}
	if a.Stats, _, err = statsOf(r, f.Schema); err != nil {
		return nil, statsError(f.Key, err)
	}
	a.Size, a.ModificationTime = attrs.Size, attrs.ModTime.UnixMilli()
	cache[f.Key] = a
	return a, nil
}

// maxTries bounds the versions a commit tries to take when other writers
// take them first.
const maxTries = 100

// commit writes the next version of t with the actions plan returns for
// the table as it is (none: nothing to commit). A version another writer
// took first is read, and the commit planned again on top of it. t is
// held.
func (d *Delta) commit(ctx context.Context, t *table, op string, plan func(*snapshot) ([]action, error)) error {
	for try := 1; ; try++ {
		if err := d.read(ctx, t); err != nil {
			return err
		}
		s := t.snap
		if s.version >= 0 && (s.protocol == nil || !s.protocol.writable()) {
			return fmt.Errorf("the delta table %s has a protocol cdclake does not write (%+v): "+
				"another writer upgraded it; land it into a table of its own", t.root, s.protocol)
		}
		acts, err := plan(s)
		if err != nil || len(acts) == 0 {
			return err
		}
		v := s.version + 1
		var id [16]byte
		_, _ = rand.Read(id[:])
		info := map[string]any{"timestamp": d.cfg.Now().UnixMilli(), "operation": op, "engineInfo": d.cfg.Engine,
			"txnId": hex.EncodeToString(id[:]), "isBlindAppend": op == "WRITE", "operationParameters": map[string]string{}}
		if s.version >= 0 {
			info["readVersion"] = s.version
		}
		data := encode(append([]action{{CommitInfo: info}}, acts...))
		err = d.store.CreateObject(ctx, logKey(t.root, v), data, "application/json")
		if errors.Is(err, sinks.ErrExists) {
			if try >= maxTries {
				return fmt.Errorf("committing to the delta table %s: version %d and %d more were taken by other writers", t.root, v, maxTries-1)
			}
			continue // read it, and plan again
		}
		if err != nil {
			return fmt.Errorf("committing version %d of the delta table %s: %w", v, t.root, err)
		}
		if err := s.apply(v, acts); err != nil {
			t.snap = nil
			return err
		}
		if v > 0 && v%int64(d.cfg.CheckpointInterval) == 0 {
			if err := d.checkpoint(ctx, t); err != nil {
				d.log.Warn("writing a delta checkpoint failed; readers replay the commits, and the next interval writes one",
					"table", t.root, "version", v, "err", err)
			} else if err := d.cleanLog(ctx, t.root); err != nil {
				d.log.Warn("deleting a delta table's old log files failed; the next checkpoint tries again",
					"table", t.root, "err", err)
			}
		}
		return nil
	}
}

// tombstoneRetention is how long a checkpoint keeps removed files'
// tombstones (Delta's delta.deletedFileRetentionDuration default).
const tombstoneRetention = 7 * 24 * time.Hour

// checkpoint writes the checkpoint of t's version, then _last_checkpoint.
func (d *Delta) checkpoint(ctx context.Context, t *table) error {
	acts := checkpointActions(t.snap, d.cfg.Now().Add(-tombstoneRetention).UnixMilli())
	data, err := encodeCheckpoint(acts)
	if err != nil {
		return err
	}
	if err := d.store.WriteObject(ctx, checkpointKey(t.root, t.snap.version), data, "application/vnd.apache.parquet"); err != nil {
		return err
	}
	last, _ := json.Marshal(lastCheckpoint{Version: t.snap.version, Size: int64(len(acts))})
	return d.store.WriteObject(ctx, lastCheckpointKey(t.root), last, "application/json")
}

// cleanLog deletes the log files (commits and checkpoints) of the versions
// before the newest checkpoint whose own commit is older than the log
// retention: readers start from that checkpoint, and time travel reaches
// back to it.
func (d *Delta) cleanLog(ctx context.Context, root string) error {
	if d.cfg.LogRetention <= 0 {
		return nil
	}
	cutoff := d.cfg.Now().Add(-d.cfg.LogRetention)
	type entry struct {
		key     string
		version int64
	}
	var all []entry
	commitAt := map[int64]time.Time{}
	var checkpoints []int64
	it := d.bucket.List(&blob.ListOptions{Prefix: root + "/_delta_log/"})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		v, cp, ok := logVersion(path.Base(obj.Key))
		if !ok {
			continue
		}
		all = append(all, entry{obj.Key, v})
		if cp {
			checkpoints = append(checkpoints, v)
		} else {
			commitAt[v] = obj.ModTime
		}
	}
	from := int64(-1)
	for _, cp := range checkpoints {
		if at, ok := commitAt[cp]; ok && at.Before(cutoff) {
			from = max(from, cp)
		}
	}
	var errs []error
	for _, e := range all {
		if e.version < from {
			if err := d.bucket.Delete(ctx, e.key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// read brings t's snapshot up to the table's newest version: from its
// newest checkpoint and the commits after it at first, then commit by
// commit. t is held.
func (d *Delta) read(ctx context.Context, t *table) error {
	if t.snap == nil {
		s, err := d.readFromStart(ctx, t.root)
		if err != nil {
			return fmt.Errorf("reading the delta table %s: %w", t.root, err)
		}
		t.snap = s
		return nil
	}
	for {
		data, err := d.bucket.ReadAll(ctx, logKey(t.root, t.snap.version+1))
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil
		}
		if err == nil {
			err = d.applyCommit(t.snap, t.snap.version+1, data)
		}
		if err != nil {
			t.snap = nil // read afresh next time
			return fmt.Errorf("reading the delta table %s: %w", t.root, err)
		}
	}
}

func (d *Delta) applyCommit(s *snapshot, v int64, data []byte) error {
	acts, err := decode(data)
	if err != nil {
		return fmt.Errorf("version %d: %w", v, err)
	}
	return s.apply(v, acts)
}

// readFromStart reads a table from its log's listing: its newest
// checkpoint, then each commit after it.
func (d *Delta) readFromStart(ctx context.Context, root string) (*snapshot, error) {
	commits := map[int64]bool{}
	var checkpoints []int64
	it := d.bucket.List(&blob.ListOptions{Prefix: root + "/_delta_log/"})
	for {
		obj, err := it.Next(ctx)
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, err
		}
		v, cp, ok := logVersion(path.Base(obj.Key))
		switch {
		case !ok:
		case cp:
			checkpoints = append(checkpoints, v)
		default:
			commits[v] = true
		}
	}
	s := newSnapshot()
	if len(commits) == 0 && len(checkpoints) == 0 {
		return s, nil
	}
	slices.Sort(checkpoints)
	from := int64(0)
	for i := len(checkpoints) - 1; i >= 0; i-- {
		cp := checkpoints[i]
		data, err := d.bucket.ReadAll(ctx, checkpointKey(root, cp))
		if err == nil {
			var acts []action
			if acts, err = decodeCheckpoint(ctx, data); err == nil {
				err = s.apply(cp, acts)
			}
		}
		if err != nil {
			// A checkpoint cut short by a crash: the one before it, or
			// the commits, hold the same.
			d.log.Warn("a delta checkpoint is unreadable; reading an earlier one", "table", root, "version", cp, "err", err)
			s = newSnapshot()
			continue
		}
		from = cp + 1
		break
	}
	if from == 0 && !commits[0] {
		return nil, fmt.Errorf("its log has no version 0 and no readable checkpoint")
	}
	for v := from; ; v++ {
		data, err := d.bucket.ReadAll(ctx, logKey(root, v))
		if gcerrors.Code(err) == gcerrors.NotFound {
			if v <= maxKey(commits) {
				return nil, fmt.Errorf("version %d is missing from its log", v)
			}
			return s, nil
		}
		if err != nil {
			return nil, err
		}
		if err := d.applyCommit(s, v, data); err != nil {
			return nil, err
		}
	}
}

func maxKey(m map[int64]bool) int64 {
	out := int64(-1)
	for k := range m {
		out = max(out, k)
	}
	return out
}
