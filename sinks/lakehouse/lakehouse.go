// Package lakehouse commits the Parquet files cdclake lands as snapshots
// of lakehouse tables, so that readers get atomic snapshots, time travel
// and incremental reads over the same files a plain lake holds.
//
// # Iceberg
//
// Iceberg keeps a table's snapshots in a catalog; cdclake uses a SQL
// catalog (SQLite for a single node and tests, PostgreSQL in production)
// or a REST catalog, through iceberg-go. Each route table is an Iceberg table of the same
// name, its dots making namespaces (db.public.orders is the table orders
// in the namespace db.public, under Config.Namespace). A table is made at
// its first commit, in format version 3 (nanosecond timestamps, columns of
// NULLs only), from the Arrow schema of its first file, partitioned by the
// time unit of _cdc_ts its files share (days(_cdc_ts) for the default
// {table}/date={date}). Files carry no Iceberg field
// ids: the table's name mapping (schema.name-mapping.default) gives them,
// refreshed whenever a file brings new columns, which evolve the table's
// schema first.
//
// # Exactly once
//
// Every commit records, in its snapshot's summary and in the table's
// properties, each source partition's offset up to which the table holds
// every file (cdclake.offset.<source>.<partition>), carried forward from
// commit to commit; RecordOffsets advances the properties alone when no
// file came since. The caller passes offsets that are true once the commit is in:
// no file of the partition that starts below it waits to be committed. A
// file that starts below its partition's recorded offset is in the table;
// one at or past it may be (written and committed in a run that then
// stopped), and is looked up by path, once per table and run, before the
// first commit (Landed).
//
// # A process of its own
//
// iceberg-go costs every process that links it about 90 ms and 32 MB at
// start (its Substrait function registry). The full Catalog is therefore
// the cdclake-lakehouse binary's (package icebergsql), which cdclake
// starts (Start) and talks to over its standard input and output (Serve):
// one JSON request and reply a line. The common commit, files appended
// to a table of a SQL catalog whose warehouse is the lake, cdclake writes
// itself (package iceappend), starting the process only for what it does
// not write.
package lakehouse

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/cdclake/cdclake/sinks/lakehouse/deletion"
)

// Catalog commits landed files to lakehouse tables; see the package
// documentation. Its methods are safe for concurrent use.
type Catalog interface {
	// Offsets returns the source partitions' offsets a dataset's table
	// records (none before its first commit).
	Offsets(ctx context.Context, dataset string) (map[Partition]int64, error)
	// Landed returns the keys of the table's files of the given partitions
	// that start at or past the offset it records for them.
	Landed(ctx context.Context, dataset string, parts map[Partition]bool) (map[string]bool, error)
	// Commit adds files, all of dataset, but those in skip, in one
	// snapshot recording recorded, making or evolving the table first.
	Commit(ctx context.Context, dataset string, files []File, recorded map[Partition]int64, skip map[string]bool) error
	// RecordOffsets advances the offsets the table records where recorded
	// is past them, without a snapshot.
	RecordOffsets(ctx context.Context, dataset string, recorded map[Partition]int64) error
	// Compact rewrites the table's small files into files of about
	// opt.TargetBytes, in one snapshot that replaces them: see Compaction.
	Compact(ctx context.Context, dataset string, opt Compaction) (Compacted, error)
	// Expire drops the table's snapshots older than exp.OlderThan but the
	// newest exp.RetainLast, and deletes the files only they referred to
	// that are the table's own (never the lake's): see Expiry.
	Expire(ctx context.Context, dataset string, exp Expiry) (Expired, error)
	// Datasets returns the datasets whose tables the catalog holds (not
	// the current-state tables: StateSuffix).
	Datasets(ctx context.Context) ([]string, error)
	// SetFiles makes the data files of the table name (one of cdclake's
	// own, not a dataset's: a current-state table) exactly set.Keys, in
	// one snapshot that adds the files it lacks and removes the others;
	// see FileSet. It does nothing when the table holds them already and
	// records the same properties.
	SetFiles(ctx context.Context, name string, set FileSet) error
	Close() error
}

// StateSuffix ends the name of a dataset's current-state table (SetFiles):
// shop.public.orders__current. Such tables are no datasets (Datasets).
const StateSuffix = "__current"

// FileSet is what SetFiles makes a table hold. A table it makes is
// unpartitioned, at Location; its schema evolves to Schema first.
type FileSet struct {
	// Location is the table's folder, Warehouse-relative.
	Location string
	// Keys are the files, Warehouse-relative.
	Keys []string
	// Schema is a schema whose columns cover each file's.
	Schema *arrow.Schema
	// Properties go into the snapshot's summary and the table's
	// properties.
	Properties map[string]string
	// Deletes are deletion vectors of rows of Keys the table no longer
	// holds (merge-on-read; Iceberg only).
	Deletes []deletion.Vector
	// Version is the build of the state table the set is, Base the one it
	// was built from (StateVersionKey): a table at a newer build than
	// Version is left as it is, and one whose files differ from the set's
	// in a way only Base's files lead to fails with ErrStateBehind.
	Version, Base int64
}

// StateVersionKey is the table property (and snapshot summary key) that
// records which build of a state table the table holds (FileSet.Version).
const StateVersionKey = "cdclake.current.version"

// ErrStateBehind is returned by SetFiles for a table that holds a build of
// a state table older than the set's Base, when the set adds deletion
// vectors and removes data files, or adds a deletion vector of a data file
// it adds: one snapshot cannot, so the builds between are to be set first,
// in order.
var ErrStateBehind = errors.New("the table holds an older build of the state table than the one this build started from")

// Compaction says how Compact rewrites a table's small files. Of each
// table partition, the files smaller than TargetBytes that start below
// their source partition's recorded offset (a replay skips them by offset,
// never by path) are grouped in path order into groups of about
// TargetBytes, and each group of MinFiles or more is rewritten as one
// file: the same rows, in the same order, under the table's schema as of
// the group (a column a file lacks is NULL). The lake's own files stay
// where they are, for readers of the plain lake; the compacted files go
// where the format's Catalog says (Iceberg: under _cdclake/iceberg/<dataset>/;
// Delta: under the table's _compacted/), named after the files they
// replace.
type Compaction struct {
	TargetBytes int64
	MinFiles    int
	// Compression, Level and RowGroupRows are the written files' Parquet
	// settings (the route's).
	Compression         string
	Level, RowGroupRows int
}

// Expiry says which snapshots Expire drops: those older than OlderThan,
// but the newest RetainLast (at least 1). Time travel reaches back as far
// as the snapshots kept. The files only the dropped snapshots referred to
// are deleted where they are the table's own: its manifests, manifest
// lists and compacted files; the lake's files stay. Compacted files no
// snapshot refers to go too, once older than OlderThan and an hour.
type Expiry struct {
	OlderThan  time.Duration
	RetainLast int
}

// Expired is what an Expire did.
type Expired struct {
	Snapshots int `json:"snapshots"` // dropped
	Files     int `json:"files"`     // deleted
}

// Compacted is what a Compact did.
type Compacted struct {
	Written  int   `json:"written"`  // files written
	Replaced int   `json:"replaced"` // files they replaced
	Rows     int64 `json:"rows"`
	Bytes    int64 `json:"bytes"`   // of the files written
	Skipped  int   `json:"skipped"` // groups left: their files' schemas do not merge
}

// ErrSchema is returned for a file whose schema its table cannot hold: a
// type the table format lacks (Iceberg: a time or timestamp in
// nanoseconds; Delta: a time of day, a column of NULLs only) or a type
// change the format cannot evolve. Trying again does not help; the route's
// types or table_format must change.
var ErrSchema = errors.New("the lakehouse table cannot hold the file's schema")

// ErrOtherLake is returned for a table the catalog holds at another
// location than the lake's: another lake (another sink prefix or bucket)
// commits to the catalog under the same names. Its files are not added:
// each lake needs a catalog, or a namespace (Config.Namespace), of its own.
var ErrOtherLake = errors.New("the iceberg table is another lake's")

// ErrRewritten is a commit's failure over a file a table holds that was
// written again with other content: the table's entry (its size, its row
// count, its statistics) no longer describes the file, and readers that
// trust the entry (they read the footer at the size it gives) fail. A
// replay writes such a file again with the same rows (a Kafka partition's
// after a crash before its state moved); a file source's input landed
// again resumes past what the table holds. This is the check that they
// did.
var ErrRewritten = errors.New("a file the table holds was written again with other content")

// Sizer is a Catalog that can tell the sizes its table's entries give
// their data files, to check files written again against them.
type Sizer interface {
	// EntrySizes returns the sizes by key; nil when it cannot tell.
	EntrySizes(ctx context.Context, dataset string) (map[string]int64, error)
}

// OffsetPrefix starts the snapshot summary keys that hold the source
// partitions' offsets: cdclake.offset.<source>.<partition>.
const OffsetPrefix = "cdclake.offset."

// Config says where the catalog is and how Iceberg reaches the lake.
type Config struct {
	// Catalog is the SQL catalog's database: sqlite:///path/catalog.db (or
	// sqlite://relative/path.db), or postgres://user@host/db?... ; or a
	// REST catalog's URI, http(s)://host:port[/path].
	Catalog string
	// Name is the catalog's name in its database (iceberg_tables'
	// catalog_name); empty: cdclake.
	Name string
	// Warehouse is the lake's root as Iceberg addresses it: file:///abs/dir
	// or s3://bucket/prefix. Tables live at Warehouse/<dataset>.
	Warehouse string
	// Properties are the catalog's and its file IO's properties (s3.endpoint,
	// s3.region, s3.access-key-id, ...).
	Properties map[string]string
	// Namespace is the namespace every table's own namespaces go under;
	// empty: none.
	Namespace []string
}

// File is a landed Parquet file to commit.
type File struct {
	// Key is the object's key in the lake, Warehouse-relative.
	Key string
	// Table is the dataset (the source table's name).
	Table string
	// Schema is the file's Arrow schema (its table version's).
	Schema *arrow.Schema
	// Source, Partition and First say where the file's rows come from:
	// the source partition and its first offset.
	Source    string
	Partition int32
	First     int64
	// Granularity is the time unit of _cdc_ts all the file's rows share
	// (hour, day, month, year; "": none): a table made for the file is
	// partitioned by it.
	Granularity string
	// Bytes and Footer, when known, are the file's size and its Parquet
	// footer (serialized FileMetaData), which spare a Catalog reading them
	// back from the store (Delta's stats).
	Bytes  int64
	Footer []byte
}

// Partition names a source partition in the offsets a commit records.
type Partition struct {
	Source    string
	Partition int32
}

// WarehouseOf returns the warehouse and file IO properties by which
// Iceberg reaches a lake of a normalized URL (lake.NormalizeURL): a
// file:// lake's folder, or an s3:// lake's bucket (and prefix) with its
// endpoint, region and addressing style. Credentials come from the
// environment, as the lake's do.
func WarehouseOf(lakeURL string) (string, map[string]string, error) {
	u, err := url.Parse(lakeURL)
	if err != nil {
		return "", nil, err
	}
	q := u.Query()
	switch u.Scheme {
	case "file":
		return "file://" + u.Path, nil, nil
	case "s3":
		props := map[string]string{}
		if v := q.Get("endpoint"); v != "" {
			props["s3.endpoint"] = v
		}
		if v := q.Get("region"); v != "" {
			props["s3.region"] = v
		}
		if q.Get("use_path_style") == "true" {
			props["s3.force-virtual-addressing"] = "false"
		}
		wh := "s3://" + u.Host
		if p := strings.Trim(q.Get("prefix"), "/"); p != "" {
			wh += "/" + p
		}
		return wh, props, nil
	}
	return "", nil, fmt.Errorf("iceberg reaches file:// and s3:// lakes; set sink.iceberg.warehouse and its properties for %s://", u.Scheme)
}

// Origin reads the source, partition and first offset from a landed file's
// name (sinks.ObjectName: <source>-p<partition>-o<offset>.parquet).
func Origin(key string) (string, int32, int64, bool) {
	name := strings.TrimSuffix(path.Base(key), ".parquet")
	o := strings.LastIndex(name, "-o")
	if o < 0 {
		return "", 0, 0, false
	}
	p := strings.LastIndex(name[:o], "-p")
	if p < 0 {
		return "", 0, 0, false
	}
	part, perr := strconv.ParseInt(name[p+2:o], 10, 32)
	first, ferr := strconv.ParseInt(name[o+2:], 10, 64)
	if perr != nil || ferr != nil {
		return "", 0, 0, false
	}
	return name[:p], int32(part), first, true
}

// RecordedOffsets reads the source partitions' offsets that summary or
// property maps record (OffsetKey), the greatest of each partition's.
func RecordedOffsets(maps ...map[string]string) map[Partition]int64 {
	out := map[Partition]int64{}
	for _, props := range maps {
		for k, v := range props {
			rest, ok := strings.CutPrefix(k, OffsetPrefix)
			if !ok {
				continue
			}
			i := strings.LastIndexByte(rest, '.')
			if i < 0 {
				continue
			}
			part, perr := strconv.ParseInt(rest[i+1:], 10, 32)
			off, oerr := strconv.ParseInt(v, 10, 64)
			if perr != nil || oerr != nil {
				continue
			}
			p := Partition{Source: rest[:i], Partition: int32(part)}
			out[p] = max(out[p], off)
		}
	}
	return out
}

// Advanced returns the offsets have records advanced to recorded where
// recorded is past them, as summary and property values (OffsetKey), and
// whether any advanced.
func Advanced(have, recorded map[Partition]int64) (map[string]string, bool) {
	props := map[string]string{}
	for k, v := range have {
		props[OffsetKey(k)] = strconv.FormatInt(v, 10)
	}
	advanced := false
	for k, v := range recorded {
		if old, ok := have[k]; !ok || v > old {
			props[OffsetKey(k)] = strconv.FormatInt(v, 10)
			advanced = true
		}
	}
	return props, advanced
}

// PastRecorded reports whether a landed file (its key) belongs to one of
// parts and starts at or past the offset recorded for its partition: a
// file a commit may have added after its offset was recorded (Landed).
func PastRecorded(key string, parts map[Partition]bool, recorded map[Partition]int64) bool {
	src, part, first, ok := Origin(key)
	p := Partition{Source: src, Partition: part}
	return ok && parts[p] && first >= recorded[p]
}

// OffsetKey is the summary and property key of a partition's offset.
func OffsetKey(p Partition) string {
	return OffsetPrefix + p.Source + "." + strconv.Itoa(int(p.Partition))
}

// Formats is a Catalog over the catalogs of two table formats: each
// dataset's table (and its current-state table) is its route's format's.
type Formats struct {
	// Iceberg and Delta are the formats' catalogs; nil where no route
	// uses the format.
	Iceberg, Delta Catalog
	// IsDelta reports whether a dataset's table is a Delta table.
	IsDelta func(dataset string) bool
}

// of returns the catalog of a dataset's (or a current-state table's)
// format.
func (f *Formats) of(name string) (Catalog, error) {
	c := f.Iceberg
	if f.Delta != nil && (f.Iceberg == nil || f.IsDelta(strings.TrimSuffix(name, StateSuffix))) {
		c = f.Delta
	}
	if c == nil {
		return nil, fmt.Errorf("%s: no lakehouse table format is configured", name)
	}
	return c, nil
}

func (f *Formats) EntrySizes(ctx context.Context, dataset string) (map[string]int64, error) {
	c, err := f.of(dataset)
	if err != nil {
		return nil, err
	}
	if s, ok := c.(Sizer); ok {
		return s.EntrySizes(ctx, dataset)
	}
	return nil, nil
}

func (f *Formats) Offsets(ctx context.Context, dataset string) (map[Partition]int64, error) {
	c, err := f.of(dataset)
	if err != nil {
		return nil, err
	}
	return c.Offsets(ctx, dataset)
}

func (f *Formats) Landed(ctx context.Context, dataset string, parts map[Partition]bool) (map[string]bool, error) {
	c, err := f.of(dataset)
	if err != nil {
		return nil, err
	}
	return c.Landed(ctx, dataset, parts)
}

func (f *Formats) Commit(ctx context.Context, dataset string, files []File, recorded map[Partition]int64, skip map[string]bool) error {
	c, err := f.of(dataset)
	if err != nil {
		return err
	}
	return c.Commit(ctx, dataset, files, recorded, skip)
}

func (f *Formats) RecordOffsets(ctx context.Context, dataset string, recorded map[Partition]int64) error {
	c, err := f.of(dataset)
	if err != nil {
		return err
	}
	return c.RecordOffsets(ctx, dataset, recorded)
}

func (f *Formats) Compact(ctx context.Context, dataset string, opt Compaction) (Compacted, error) {
	c, err := f.of(dataset)
	if err != nil {
		return Compacted{}, err
	}
	return c.Compact(ctx, dataset, opt)
}

func (f *Formats) Expire(ctx context.Context, dataset string, exp Expiry) (Expired, error) {
	c, err := f.of(dataset)
	if err != nil {
		return Expired{}, err
	}
	return c.Expire(ctx, dataset, exp)
}

func (f *Formats) SetFiles(ctx context.Context, name string, set FileSet) error {
	c, err := f.of(name)
	if err != nil {
		return err
	}
	return c.SetFiles(ctx, name, set)
}

// Datasets returns the datasets of both formats' tables, each once.
func (f *Formats) Datasets(ctx context.Context) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, c := range []Catalog{f.Iceberg, f.Delta} {
		if c == nil {
			continue
		}
		ds, err := c.Datasets(ctx)
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			if !seen[d] {
				seen[d] = true
				out = append(out, d)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

func (f *Formats) Close() error {
	var errs []error
	for _, c := range []Catalog{f.Iceberg, f.Delta} {
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}
