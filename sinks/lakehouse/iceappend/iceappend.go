// Package iceappend commits landed files to Iceberg tables of a SQL or a
// REST catalog in cdclake's own process, for the common commit: files
// appended to a table whose schema holds them, the source offsets in the
// snapshot's summary and the table's properties (see package lakehouse).
// It writes a manifest and a manifest list in Avro. With a SQL catalog it
// writes the metadata file too, then moves the table's metadata location
// in the catalog with one compare-and-swap; a table's first commit makes
// it, with that snapshot, in one metadata file and one catalog row. With
// a REST catalog it sends the snapshot as a commit's updates, whose
// requirements fail when another commit moved the table first, and the
// service writes the metadata file; a table is made by a create request
// first (the service assigns its columns' ids).
//
// Everything else goes to the full committer (the cdclake-lakehouse
// process, through iceberg-go), opened at its first use: schema changes,
// compaction, expiry, the current-state tables, a type or partition
// transform this package does not write, a table another writer left in
// a form it does not write, a commit a REST service refuses as written. So a run that only appends never
// starts the process, whose start-up and per-table costs dominate short
// runs (docs/lakehouse.md, Cost). A commit that loses the swap of the
// catalog row is planned again here from the table as it is; files other
// writers added are never added again (learn).
package iceappend

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/lakehouse"
	"gocloud.dev/blob"
)

// Store writes the metadata objects: the lake's sink, whose writes are
// retried and, on a file:// lake, synced before they appear.
type Store interface {
	sinks.ObjectWriter
}

// Catalog is a lakehouse.Catalog that appends in process where it can and
// hands the rest to the full committer.
type Catalog struct {
	cfg lakehouse.Config
	// cat or rest is the catalog: the rows of a SQL catalog, or a REST
	// catalog's service.
	cat    *sqlCatalog
	rest   *restCatalog
	bucket *blob.Bucket
	store  Store
	open   func(ctx context.Context) (lakehouse.Catalog, error)
	log    *slog.Logger
	now    func() time.Time

	mu     sync.Mutex
	tables map[string]*tableState

	fullMu sync.Mutex // held while the full committer is opened
	full   lakehouse.Catalog

	appended, handed atomic.Int64
}

// tableState is what is known of a table: its metadata as of its location.
type tableState struct {
	sync.Mutex
	loc  string
	meta *tableMetadata
	// handed is why its last commit went to the full committer.
	handed string
	// madeUnknown says a commit that was to make the table failed without
	// knowing whether it went in (a reply lost).
	madeUnknown bool
	// etag is a REST catalog's ETag of the version loc is (or ""): a
	// load of a table that did not move since answers 304.
	etag string
	// foreign are the data files other writers added since this process
	// first read the table (learn): never added again here.
	foreign map[string]bool
}

// Open returns the Catalog of cfg over a lake whose root is cfg.Warehouse
// (bucket and store reach it), or, for a catalog this package does not
// write, the full committer open opens. inLake says whether
// cfg.Warehouse is the bucket's root: when it is not, everything goes to
// the full committer too.
func Open(ctx context.Context, cfg lakehouse.Config, bucket *blob.Bucket, store Store, inLake bool, log *slog.Logger,
	open func(ctx context.Context) (lakehouse.Catalog, error)) (lakehouse.Catalog, error) {
	if cfg.Name == "" {
		cfg.Name = "cdclake"
	}
	if !inLake || bucket == nil || store == nil {
		return open(ctx)
	}
	cat, ok, err := openSQL(ctx, cfg.Catalog, cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("iceberg catalog: %w", err)
	}
	c := &Catalog{cfg: cfg, cat: cat, bucket: bucket, store: store, open: open, log: log.With("component", "iceberg"),
		now: time.Now, tables: map[string]*tableState{}}
	if ok {
		return c, nil
	}
	if c.rest, ok, err = openREST(ctx, cfg.Catalog, cfg.Properties); err != nil {
		return nil, fmt.Errorf("iceberg REST catalog %s: %w", cfg.Catalog, err)
	}
	if !ok {
		return open(ctx)
	}
	return c, nil
}

// Appended and Handed count the commits made in process and those handed
// to the full committer.
func (c *Catalog) Appended() int64 { return c.appended.Load() }
func (c *Catalog) Handed() int64   { return c.handed.Load() }

// fullCatalog returns the full committer, opened at the first call.
func (c *Catalog) fullCatalog(ctx context.Context) (lakehouse.Catalog, error) {
	c.fullMu.Lock()
	defer c.fullMu.Unlock()
	if c.full != nil {
		return c.full, nil
	}
	full, err := c.open(ctx)
	if err != nil {
		return nil, err
	}
	c.full = full
	return full, nil
}

func (c *Catalog) state(dataset string) *tableState {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.tables[dataset]
	if s == nil {
		s = &tableState{}
		c.tables[dataset] = s
	}
	return s
}

// ident returns a dataset's namespace and table name; unsupported for an
// identifier the catalog stores otherwise (a name part with a dot).
func (c *Catalog) ident(dataset string) ([]string, string, error) {
	id := append(slices.Clone(c.cfg.Namespace), strings.Split(dataset, ".")...)
	if len(id) < 2 {
		return nil, "", unsupported("%s: a table outside any namespace", dataset)
	}
	for _, p := range id {
		if p == "" || strings.Contains(p, ".") {
			return nil, "", unsupported("%s: a namespace the catalog encodes", dataset)
		}
	}
	return id[:len(id)-1], id[len(id)-1], nil
}

func (c *Catalog) location(key string) string {
	return strings.TrimSuffix(c.cfg.Warehouse, "/") + "/" + key
}

func (c *Catalog) key(location string) (string, bool) {
	return strings.CutPrefix(location, strings.TrimSuffix(c.cfg.Warehouse, "/")+"/")
}

// load returns a dataset's table metadata (nil: no table), read again only
// when the catalog's location moved; s is held.
func (c *Catalog) load(ctx context.Context, s *tableState, dataset string) (*tableMetadata, error) {
	ns, name, err := c.ident(dataset)
	if err != nil {
		return nil, err
	}
	var loc, etag string
	var body []byte // the metadata, where the catalog serves it
	if c.rest != nil {
		held := ""
		if s.meta != nil {
			held = s.etag
		}
		loc, body, etag, err = c.rest.load(ctx, ns, name, held)
		if errors.Is(err, errNotModified) {
			return s.meta, nil
		}
	} else {
		loc, err = c.cat.location(ctx, strings.Join(ns, "."), name)
	}
	if err != nil || loc == "" {
		s.loc, s.meta = "", nil
		return nil, err
	}
	if loc == s.loc && s.meta != nil {
		s.etag = etag
		return s.meta, nil
	}
	if body == nil {
		key, ok := c.key(loc)
		if !ok {
			return nil, unsupported("%s: metadata outside the lake (%s)", dataset, loc)
		}
		if body, err = c.bucket.ReadAll(ctx, key); err != nil {
			return nil, fmt.Errorf("reading the iceberg metadata of %s: %w", dataset, err)
		}
	}
	meta, err := c.accept(dataset, loc, body)
	if err != nil {
		return nil, err
	}
	switch {
	case s.meta != nil:
		// Moved since this process last read it: by another writer.
		if err := c.learn(ctx, s, s.meta, meta); err != nil {
			return nil, err
		}
	case s.madeUnknown:
		// Made by a commit of this process whose reply was lost: its
		// files, if it went in, are the table's from the start.
		if err := c.learn(ctx, s, &tableMetadata{}, meta); err != nil {
			return nil, err
		}
	}
	s.madeUnknown = false
	s.loc, s.meta, s.etag = loc, meta, etag
	return meta, nil
}

// accept parses a table's metadata (at loc) and checks that this package
// writes to it.
func (c *Catalog) accept(dataset, loc string, body []byte) (*tableMetadata, error) {
	meta, err := parseMetadata(body)
	if err != nil {
		// Another writer's form (a gzip-compressed metadata file): the
		// full committer reads it.
		return nil, unsupported("the iceberg metadata %s: %v", loc, err)
	}
	if strings.TrimSuffix(meta.Location, "/") != c.location(dataset) {
		return nil, unsupported("%s: a table at %s", dataset, meta.Location)
	}
	if meta.FormatVersion != 3 || meta.NextRowID == nil {
		return nil, unsupported("%s: format version %d", dataset, meta.FormatVersion)
	}
	return meta, nil
}

// learn adds to s.foreign the data files the snapshots of next that
// followed prev's current one added: another writer's commits (an
// instance that had the partition, a compaction), which the caller's view
// of the table may lack. Where next no longer leads back to it (snapshots
// expired), every data file of next's current snapshot is taken.
func (c *Catalog) learn(ctx context.Context, s *tableState, prev, next *tableMetadata) error {
	var stop int64 = -1
	if p := prev.current(); p != nil {
		stop = p.SnapshotID
	}
	byID := make(map[int64]*snapshot, len(next.Snapshots))
	for i := range next.Snapshots {
		byID[next.Snapshots[i].SnapshotID] = &next.Snapshots[i]
	}
	if s.foreign == nil {
		s.foreign = map[string]bool{}
	}
	// Back from next's current snapshot to prev's: reached says the walk
	// met it (or, from a table without snapshots, the first).
	reached := next.current() == nil
	for snap := next.current(); snap != nil; {
		if snap.SnapshotID == stop {
			reached = true
			break
		}
		added, err := c.addedFiles(ctx, snap)
		if err != nil {
			return err
		}
		for k := range added {
			s.foreign[k] = true
		}
		if snap.ParentSnapshotID == nil {
			reached = stop == -1
			break
		}
		snap = byID[*snap.ParentSnapshotID] // nil: expired
	}
	if reached {
		return nil
	}
	all, err := c.dataFiles(ctx, next.current(), 0)
	if err != nil {
		return err
	}
	for k := range all {
		s.foreign[k] = true
	}
	return nil
}

// EntrySizes returns the sizes the table's entries give its data files
// (lakehouse.Sizer); nil when this package does not read the table.
func (c *Catalog) EntrySizes(ctx context.Context, dataset string) (map[string]int64, error) {
	s := c.state(dataset)
	s.Lock()
	defer s.Unlock()
	meta, err := c.load(ctx, s, dataset)
	if handOver(err) {
		return nil, nil
	}
	if err != nil || meta == nil || meta.current() == nil {
		return nil, err
	}
	sizes, err := c.dataFileSizes(ctx, meta.current(), 0)
	if handOver(err) {
		return nil, nil
	}
	return sizes, err
}

// addedFiles returns the keys of the data files a snapshot added.
func (c *Catalog) addedFiles(ctx context.Context, snap *snapshot) (map[string]bool, error) {
	return c.dataFiles(ctx, snap, snap.SnapshotID)
}

// errConflict is a commit's failure to swap the catalog row: another
// writer (an instance, a compaction) moved the table first.
var errConflict = errors.New("another commit moved the iceberg table first")

// conflictTries is how many times a commit that lost the swap is planned
// again from the table as it is, before it fails (its caller tries again
// later, as after any failed commit).
const conflictTries = 8

// againOnConflict runs try until it does not lose the swap, at most
// conflictTries times, waiting a little longer before each try (with
// jitter, so that two writers that collide do not collide again).
func againOnConflict(ctx context.Context, try func() error) error {
	for n := 1; ; n++ {
		err := try()
		if n == conflictTries || !errors.Is(err, errConflict) {
			return err
		}
		wait := time.Duration(n)*10*time.Millisecond + time.Duration(rand.Int64N(int64(20*time.Millisecond)))
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// handOver reports whether err says the full committer is to do it.
func handOver(err error) bool {
	var u errUnsupported
	return errors.As(err, &u)
}

func (c *Catalog) Offsets(ctx context.Context, dataset string) (map[lakehouse.Partition]int64, error) {
	s := c.state(dataset)
	s.Lock()
	meta, err := c.load(ctx, s, dataset)
	s.Unlock()
	if handOver(err) {
		full, ferr := c.fullCatalog(ctx)
		if ferr != nil {
			return nil, ferr
		}
		return full.Offsets(ctx, dataset)
	}
	if err != nil || meta == nil {
		return map[lakehouse.Partition]int64{}, err
	}
	return meta.offsets(), nil
}

func (c *Catalog) Landed(ctx context.Context, dataset string, parts map[lakehouse.Partition]bool) (map[string]bool, error) {
	s := c.state(dataset)
	s.Lock()
	out, err := c.landed(ctx, s, dataset, parts)
	s.Unlock()
	if handOver(err) {
		full, ferr := c.fullCatalog(ctx)
		if ferr != nil {
			return nil, ferr
		}
		return full.Landed(ctx, dataset, parts)
	}
	return out, err
}

// landed returns the keys of the table's data files of parts that start
// at or past the offset it records for their partition; s is held.
func (c *Catalog) landed(ctx context.Context, s *tableState, dataset string, parts map[lakehouse.Partition]bool) (map[string]bool, error) {
	out := map[string]bool{}
	meta, err := c.load(ctx, s, dataset)
	if err != nil || meta == nil || meta.current() == nil {
		return out, err
	}
	recorded := meta.offsets()
	keys, err := c.dataFiles(ctx, meta.current(), 0)
	if err != nil {
		return nil, err
	}
	for key := range keys {
		if lakehouse.PastRecorded(key, parts, recorded) {
			out[key] = true
		}
	}
	return out, nil
}

// dataFiles returns the keys of the data files a snapshot holds (those in
// the lake); with addedBy, only those that snapshot added.
func (c *Catalog) dataFiles(ctx context.Context, snap *snapshot, addedBy int64) (map[string]bool, error) {
	sizes, err := c.dataFileSizes(ctx, snap, addedBy)
	out := make(map[string]bool, len(sizes))
	for k := range sizes {
		out[k] = true
	}
	return out, err
}

// dataFileSizes is dataFiles with each file's size as its entry says.
func (c *Catalog) dataFileSizes(ctx context.Context, snap *snapshot, addedBy int64) (map[string]int64, error) {
	out := map[string]int64{}
	list, err := c.manifests(ctx, snap)
	if err != nil {
		return nil, err
	}
	for _, m := range list {
		if m.Content != 0 || addedBy != 0 && (m.AddedSnapshotID != addedBy || m.AddedFiles == 0) {
			continue
		}
		key, ok := c.key(m.Path)
		if !ok {
			return nil, unsupported("a manifest outside the lake: %s", m.Path)
		}
		b, err := c.bucket.ReadAll(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("reading the manifest %s: %w", m.Path, err)
		}
		f, err := readOCF(b)
		if err != nil {
			return nil, fmt.Errorf("the manifest %s: %w", m.Path, err)
		}
		entries, err := decodeAll[struct {
			Status   int32 `avro:"status"`
			DataFile struct {
				FilePath string `avro:"file_path"`
				Size     int64  `avro:"file_size_in_bytes"`
			} `avro:"data_file"`
		}](f)
		if err != nil {
			return nil, fmt.Errorf("the manifest %s: %w", m.Path, err)
		}
		for _, e := range entries {
			live := e.Status != 2
			if addedBy != 0 {
				live = e.Status == 1
			}
			if key, ok := c.key(e.DataFile.FilePath); ok && live {
				out[key] = e.DataFile.Size
			}
		}
	}
	return out, nil
}

// listFields are the manifest list's fields read back: a list that lacks
// one is another writer's, left to the full committer.
var listFields = []string{"manifest_path", "manifest_length", "partition_spec_id", "content", "sequence_number",
	"min_sequence_number", "added_snapshot_id", "added_files_count", "existing_files_count", "deleted_files_count",
	"partitions", "added_rows_count", "existing_rows_count", "deleted_rows_count", "first_row_id"}

// manifests reads a snapshot's manifest list.
func (c *Catalog) manifests(ctx context.Context, snap *snapshot) ([]manifestFile, error) {
	key, ok := c.key(snap.ManifestList)
	if !ok {
		return nil, unsupported("a manifest list outside the lake: %s", snap.ManifestList)
	}
	b, err := c.bucket.ReadAll(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("reading the manifest list %s: %w", snap.ManifestList, err)
	}
	f, err := readOCF(b)
	if err != nil {
		return nil, fmt.Errorf("the manifest list %s: %w", snap.ManifestList, err)
	}
	for _, name := range listFields {
		if !strings.Contains(f.meta["avro.schema"], `"`+name+`"`) {
			return nil, unsupported("the manifest list %s has no %s", snap.ManifestList, name)
		}
	}
	out, err := decodeAll[manifestFile](f)
	if err != nil {
		return nil, fmt.Errorf("the manifest list %s: %w", snap.ManifestList, err)
	}
	return out, nil
}

func (c *Catalog) Commit(ctx context.Context, dataset string, files []lakehouse.File, recorded map[lakehouse.Partition]int64, skip map[string]bool) error {
	s := c.state(dataset)
	s.Lock()
	// A commit that failed leaves the view of the table as it was before
	// it: when the commit went in after all (its reply was lost), the next
	// read finds the table moved and notes its files as another writer's
	// (learn), which are never added again.
	err := againOnConflict(ctx, func() error { return c.append(ctx, s, dataset, files, recorded, skip) })
	if !handOver(err) {
		s.handed = ""
		s.Unlock()
		if err == nil {
			c.appended.Add(1)
		}
		return err
	}
	// Once per table and reason: a table whose every commit goes there
	// costs what the full committer costs (docs/lakehouse.md, Cost).
	if why := err.Error(); why != s.handed {
		s.handed = why
		c.log.Info("an iceberg commit goes to the full committer", "table", dataset, "why", why)
	}
	s.Unlock()
	c.handed.Add(1)
	full, ferr := c.fullCatalog(ctx)
	if ferr != nil {
		return ferr
	}
	return full.Commit(ctx, dataset, files, recorded, skip)
}

func (c *Catalog) RecordOffsets(ctx context.Context, dataset string, recorded map[lakehouse.Partition]int64) error {
	s := c.state(dataset)
	s.Lock()
	err := againOnConflict(ctx, func() error { return c.record(ctx, s, dataset, recorded) })
	s.Unlock()
	if !handOver(err) {
		return err
	}
	full, ferr := c.fullCatalog(ctx)
	if ferr != nil {
		return ferr
	}
	return full.RecordOffsets(ctx, dataset, recorded)
}

// merged returns the offsets meta records advanced to recorded, as
// properties, and whether any advanced.
func merged(meta *tableMetadata, recorded map[lakehouse.Partition]int64) (map[string]string, bool) {
	have := map[lakehouse.Partition]int64{}
	if meta != nil {
		have = meta.offsets()
	}
	return lakehouse.Advanced(have, recorded)
}

// record advances the offsets the table's properties record, in a new
// metadata file without a snapshot; s is held.
func (c *Catalog) record(ctx context.Context, s *tableState, dataset string, recorded map[lakehouse.Partition]int64) error {
	meta, err := c.load(ctx, s, dataset)
	if err != nil || meta == nil {
		return err
	}
	props, advanced := merged(meta, recorded)
	if !advanced {
		return nil
	}
	next, err := c.startUpdate(meta, s.loc)
	if err != nil {
		return err
	}
	if err := next.setProperties(props); err != nil {
		return err
	}
	next.what = recording(props)
	return c.publish(ctx, s, dataset, meta, next)
}

// recording is what names a metadata file that only records offsets.
func recording(props map[string]string) []byte {
	var b []byte
	for _, k := range slices.Sorted(maps.Keys(props)) {
		b = append(b, k+"="+props[k]+"\x00"...)
	}
	return b
}

// update is a new metadata file in the making.
type update struct {
	meta *tableMetadata // a copy of the table's, changed
	ts   int64          // its last-updated-ms
	prev string         // the location it follows; "" for a new table
	// what names the file with prev: the commit's content (its snapshot's
	// seed, or the offsets it records), never its time.
	what []byte
	// requirements and updates are the same change as a REST catalog's
	// commit: what the table must still be, and what changes.
	requirements, updates []any
}

// require adds a requirement of the REST commit.
func (u *update) require(kind string, kv ...any) {
	r := map[string]any{"type": kind}
	for i := 0; i+1 < len(kv); i += 2 {
		r[kv[i].(string)] = kv[i+1]
	}
	u.requirements = append(u.requirements, r)
}

// change adds an update of the REST commit.
func (u *update) change(action string, kv ...any) {
	c := map[string]any{"action": action}
	for i := 0; i+1 < len(kv); i += 2 {
		c[kv[i].(string)] = kv[i+1]
	}
	u.updates = append(u.updates, c)
}

// startUpdate starts a new metadata file from meta (at loc), logging loc
// in its metadata log.
func (c *Catalog) startUpdate(meta *tableMetadata, loc string) (*update, error) {
	next := &tableMetadata{raw: maps.Clone(meta.raw), Properties: maps.Clone(meta.Properties)}
	ts := max(c.now().UnixMilli(), meta.LastUpdatedMS)
	u := &update{meta: next, ts: ts, prev: loc}
	// The table is the one read, on the snapshot read: any commit of
	// another writer's snapshot in between fails the REST commit.
	u.require("assert-table-uuid", "uuid", meta.TableUUID)
	u.require("assert-ref-snapshot-id", "ref", "main", "snapshot-id", meta.mainSnapshot())
	if err := next.set("last-updated-ms", ts); err != nil {
		return nil, err
	}
	if loc != "" {
		if err := next.appendTo("metadata-log", map[string]any{"metadata-file": loc, "timestamp-ms": meta.LastUpdatedMS}); err != nil {
			return nil, err
		}
		keep := 100
		if v, err := strconv.Atoi(meta.Properties["write.metadata.previous-versions-max"]); err == nil && v > 0 {
			keep = v
		}
		var log []any
		if err := jsonUnmarshal(next.raw["metadata-log"], &log); err != nil {
			return nil, err
		}
		if len(log) > keep {
			if err := next.set("metadata-log", log[len(log)-keep:]); err != nil {
				return nil, err
			}
		}
	}
	return u, nil
}

// setProperties merges props into the new metadata's properties.
func (u *update) setProperties(props map[string]string) error {
	if u.meta.Properties == nil {
		u.meta.Properties = map[string]string{}
	}
	maps.Copy(u.meta.Properties, props)
	u.change("set-properties", "updates", maps.Clone(props))
	return u.meta.set("properties", u.meta.Properties)
}

// publish writes the new metadata file and moves the table to it (makes
// the table, for a new one); with a REST catalog, sends the commit. s is
// held.
func (c *Catalog) publish(ctx context.Context, s *tableState, dataset string, old *tableMetadata, u *update) error {
	if c.rest != nil {
		return c.commitREST(ctx, s, dataset, u)
	}
	body, err := u.meta.encode()
	if err != nil {
		return err
	}
	v := 0
	if u.prev != "" {
		if v = version(u.prev) + 1; v <= 0 {
			return unsupported("%s: a metadata file name without a version: %s", dataset, u.prev)
		}
	}
	// Named by what it follows and what it changes, not by its bytes
	// (which hold the time), so that a replay writes the same names.
	sum := sha256.Sum256(append([]byte(u.prev+"\x00"), u.what...))
	key := fmt.Sprintf("%s/metadata/%05d-%s.metadata.json", dataset, v, uuidOf(sum[:]))
	if err := c.store.WriteObject(ctx, key, body, "application/json"); err != nil {
		return fmt.Errorf("writing the iceberg metadata of %s: %w", dataset, err)
	}
	loc := c.location(key)
	ns, name, err := c.ident(dataset)
	if err != nil {
		return err
	}
	var ok bool
	if u.prev == "" {
		ok, err = c.cat.create(ctx, ns, name, loc)
	} else {
		ok, err = c.cat.swap(ctx, strings.Join(ns, "."), name, u.prev, loc)
	}
	if err != nil {
		s.madeUnknown = u.prev == ""
		return fmt.Errorf("committing to the iceberg table of %s: %w", dataset, err)
	}
	if !ok {
		return fmt.Errorf("%s: %w", dataset, errConflict)
	}
	meta, err := parseMetadata(body)
	if err != nil {
		return err
	}
	s.loc, s.meta = loc, meta
	return nil
}

// uuidOf formats 16 bytes of b as a UUID (version 8: custom).
func uuidOf(b []byte) string {
	var u [16]byte
	copy(u[:], b)
	u[6] = u[6]&0x0f | 0x80
	u[8] = u[8]&0x3f | 0x80
	h := hex.EncodeToString(u[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// snapshotID returns a positive snapshot id from b that meta does not use.
func snapshotID(meta *tableMetadata, b []byte) int64 {
	for {
		id := int64(binary.BigEndian.Uint64(b[:8]) & (1<<63 - 1))
		used := id == 0
		for _, s := range meta.Snapshots {
			used = used || s.SnapshotID == id
		}
		if !used {
			return id
		}
		next := sha256.Sum256(b)
		b = next[:]
	}
}

// fileSchemas returns the Iceberg fields of each distinct Arrow schema of
// files.
func fileSchemas(files []lakehouse.File) ([][]field, error) {
	seen := map[*arrow.Schema]bool{}
	var out [][]field
	for _, f := range files {
		if f.Schema == nil {
			return nil, unsupported("%s: no schema", f.Key)
		}
		if seen[f.Schema] {
			continue
		}
		seen[f.Schema] = true
		next := 0
		fs, err := fromArrow(f.Schema.Fields(), &next)
		if err != nil {
			return nil, err
		}
		out = append(out, fs)
	}
	return out, nil
}

// footers parses the footers of files: those their writes kept, else read
// from the store (the tail of each file). The files' sizes are set where
// they were not known.
func (c *Catalog) footers(ctx context.Context, files []lakehouse.File) ([]*metadata.FileMetaData, error) {
	out := make([]*metadata.FileMetaData, len(files))
	for i := range files {
		f := &files[i]
		footer := f.Footer
		if len(footer) == 0 || f.Bytes <= 0 {
			var err error
			if f.Bytes, footer, err = c.readFooter(ctx, f.Key); err != nil {
				return nil, fmt.Errorf("reading the footer of %s: %w", f.Key, err)
			}
		}
		md, err := metadata.NewFileMetaData(footer, nil)
		if err != nil {
			return nil, unsupported("%s: the footer does not parse: %v", f.Key, err)
		}
		out[i] = md
	}
	return out, nil
}

// readFooter reads the size and the Parquet footer of a landed file.
func (c *Catalog) readFooter(ctx context.Context, key string) (int64, []byte, error) {
	attrs, err := c.bucket.Attributes(ctx, key)
	if err != nil {
		return 0, nil, err
	}
	size := attrs.Size
	read := func(off, n int64) ([]byte, error) {
		r, err := c.bucket.NewRangeReader(ctx, key, off, n, nil)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		return io.ReadAll(r)
	}
	if size < 12 {
		return 0, nil, unsupported("%s: not a Parquet file (%d bytes)", key, size)
	}
	tail, err := read(size-8, 8)
	if err != nil {
		return 0, nil, err
	}
	n := int64(binary.LittleEndian.Uint32(tail))
	if len(tail) != 8 || string(tail[4:]) != "PAR1" || n <= 0 || n > size-12 {
		return 0, nil, unsupported("%s: not a Parquet file", key)
	}
	footer, err := read(size-8-n, n)
	return size, footer, err
}
