// Package current builds a table's current-state table from the change
// rows the lake holds: one row per key, as the source table holds it.
//
// A change folds into the state by key: an INSERT, UPDATE, UPSERT or READ
// sets the columns its after image carried (a column a partial image did
// not carry keeps its value), a DELETE removes the key's row, a TRUNCATE
// every row, and an UPDATE whose before image has another key moves the
// row. Changes fold in offset order within a source partition, and
// partitions interleave by source operation time.
//
// The state lives in a fixed number of buckets by key hash, one Parquet
// file each (bucket-NNNN-<hash of its bytes>.parquet, never overwritten),
// with the table's columns at top level
// and, per row, the change that made it last (_cdc_op, _cdc_ts,
// _cdc_source, _cdc_partition, _cdc_offset) and the columns no change
// ever carried for it (_cdc_absent: NULL there is "unknown", not a SQL
// NULL). A build reads only the change rows past the last build's
// offsets and rewrites only the buckets they touch; a manifest per build
// (_manifest/NNNNNNNNNNNNNNNNNNNN.json, created once) records the offsets
// the state is consistent up to.
package current

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/lakehouse/deletion"
	"github.com/cdclake/cdclake/sinks/parquet"
	"gocloud.dev/blob"
)

// DefaultBuckets is the number of buckets a new state table gets.
const DefaultBuckets = 16

// DefaultInto is the folder of a dataset's state table, under the lake.
func DefaultInto(dataset string) string { return "_current/" + dataset }

// Options say which table to build and how.
type Options struct {
	// Dataset is the folder of the table's change files in the lake.
	Dataset string
	// Into is the folder of its state table (DefaultInto when empty).
	Into string
	// Key names the key columns. Empty: the state table's own (its
	// manifest's), else the ones GoldenGate records name
	// (_gg_primary_keys).
	Key []string
	// Buckets is a new state table's number of buckets (DefaultBuckets
	// when 0); an existing one keeps its own unless Rebuild.
	Buckets int
	// Rebuild builds the state from every change again, with Key and
	// Buckets, replacing the table's files.
	Rebuild bool
	// KeepReplaced leaves the state files a build replaces: an Iceberg
	// table over the state (Result.StateFiles) keeps the files its older
	// snapshots name, until their expiry.
	KeepReplaced bool
	// MergeOnRead writes, of each bucket a build touches, only the rows
	// its changes touched, in a file of its own, and a deletion vector of
	// the rows they replace (an Iceberg v3 table's merge-on-read), rather
	// than the bucket's rows whole. A bucket that would hold more than
	// MaxMergeFiles files, or more deleted rows than live ones, is
	// written whole again, and so is every bucket of a build that
	// truncates. Only readers that apply deletion vectors read such a
	// table right: it needs KeepReplaced and Location.
	MergeOnRead bool
	// Whole writes every bucket whole, from the state as it stands (and
	// the changes past it), whatever the mode: a table format that holds
	// an older build than one whose manifest is no longer kept is set to
	// it in one snapshot.
	Whole bool
	// Location returns a state file's full path as the table names it
	// (deletion vectors record the data file they delete rows of).
	Location func(key string) string
	// Committed returns the offset below which every change of a source
	// partition is in the lake, and false when the lake keeps no landing
	// state for it (the file source: each file whole). source is the
	// name as it appears in object names (sinks.Sanitize).
	Committed func(ctx context.Context, source string, part int32) (int64, bool, error)
	// Write is the Parquet settings of the state files (zstd and row
	// groups of 128 Ki rows when unset).
	Write parquet.Options
	Mem   memory.Allocator
	Log   *slog.Logger
}

// Writer stores objects in the lake (lake.Sink).
type Writer interface {
	sinks.ObjectCreator
	WriteObject(ctx context.Context, key string, data []byte, contentType string) error
}

// Result is what a build did.
type Result struct {
	// Version is the manifest the build created (the last one when
	// nothing changed).
	Version int64
	// Files and Changes are the change files read and the change rows
	// folded.
	Files   int
	Changes int64
	// Buckets is the buckets rewritten (or merged), of Total; Rows the rows of the
	// whole state table.
	Buckets, Total int
	Rows           int64
	// Key is the key columns.
	Key []string
	// StateFiles is the state table's files, Schema a schema that covers
	// theirs.
	StateFiles []string
	Schema     *arrow.Schema
	// Offsets is where the state stands, per source partition: every
	// change below is in it.
	Offsets []Offset
	// Deletes is the deletion vectors of rows of StateFiles the table no
	// longer holds (merge-on-read).
	Deletes []deletion.Vector
	// Merged is true when the build wrote only the rows its changes
	// touched (merge-on-read); Base is the version it started from.
	Merged bool
	Base   int64
}

// MaxMergeFiles is the most files a bucket of a merge-on-read state table
// holds: a build that would add one more writes it whole again.
const MaxMergeFiles = 8

// Offset is where a state stands in a source partition.
type Offset struct {
	Source    string `json:"source"`
	Partition int32  `json:"partition"`
	// Next is the first offset not folded in.
	Next int64 `json:"next"`
}

func (o *Options) into() string {
	if o.Into != "" {
		return strings.TrimSuffix(o.Into, "/")
	}
	return DefaultInto(o.Dataset)
}

// ErrNoKey is returned for a table whose key columns are not known.
var ErrNoKey = errors.New("which columns are the table's key is not known")

// ErrNoChanges is returned for a dataset folder that holds no change
// file (a table name misspelt, a path template that puts them elsewhere).
var ErrNoChanges = errors.New("no change files")

// ErrConcurrent is returned when another build of the same state table
// created its manifest first.
var ErrConcurrent = errors.New("another build of this state table finished first")

// Build brings the dataset's state table up to date with the change rows
// the lake holds (see the package comment).
func Build(ctx context.Context, bucket *blob.Bucket, w Writer, opt Options) (Result, error) {
	if opt.Mem == nil {
		opt.Mem = memory.DefaultAllocator
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	if opt.Write.Compression == "" {
		opt.Write.Compression = "zstd"
	}
	if opt.Write.RowGroupRows <= 0 {
		opt.Write.RowGroupRows = 128 << 10
	}
	if opt.MergeOnRead && (!opt.KeepReplaced || opt.Location == nil) {
		return Result{}, errors.New("a merge-on-read state table is an Iceberg table's: it keeps replaced files and knows their locations")
	}
	if opt.Dataset == "" || strings.HasPrefix(opt.Dataset, "/") {
		return Result{}, fmt.Errorf("the dataset folder %q is no folder of the lake", opt.Dataset)
	}
	into := opt.into()
	if strings.HasPrefix(into+"/", opt.Dataset+"/") {
		return Result{}, fmt.Errorf("the state table's folder %s is inside the dataset's %s", into, opt.Dataset)
	}
	prev, err := latestManifest(ctx, bucket, into)
	if err != nil {
		return Result{}, err
	}
	b := &build{ctx: ctx, bucket: bucket, w: w, opt: opt, into: into}
	b.m = manifest{Dataset: opt.Dataset, Buckets: opt.Buckets, Key: opt.Key}
	if b.m.Buckets <= 0 {
		b.m.Buckets = DefaultBuckets
	}
	if prev != nil {
		b.old = prev
		b.m.Version = prev.Version
		if !opt.Rebuild {
			if len(opt.Key) > 0 && !slices.Equal(opt.Key, prev.Key) {
				return Result{}, fmt.Errorf("%s is keyed by %s, not %s: build it again with --rebuild to change its key",
					into, strings.Join(prev.Key, ","), strings.Join(opt.Key, ","))
			}
			b.m = *prev
			b.m.Rows, b.m.Files = slices.Clone(prev.Rows), slices.Clone(prev.Files) // rewritten in place
			b.m.Merge = cloneMerge(prev.Merge)
			b.prev = prev
		}
	}
	defer b.release()
	if err := b.run(); err != nil {
		return Result{}, err
	}
	return b.result, nil
}

// Recorded returns the state table at into as its build version left it,
// from its manifest while it is kept (KeepManifests): to commit that
// build to a table format again.
func Recorded(ctx context.Context, bucket *blob.Bucket, into string, version int64) (Result, error) {
	m, err := readManifest(ctx, bucket, manifestKey(strings.TrimSuffix(into, "/"), version))
	if err != nil {
		return Result{}, err
	}
	sch, err := decodeSchema(m.Schema)
	if err != nil {
		return Result{}, err
	}
	b := &build{m: *m, opt: Options{Dataset: m.Dataset}, fields: sch.Fields()}
	b.result.Total = m.Buckets
	b.fill()
	return b.result, nil
}
