// Current-state tables: cdclake snapshot.

package pipelines

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/sinks/current"
	"github.com/cdclake/cdclake/sinks/lake"
	"github.com/cdclake/cdclake/sinks/parquet"
	"github.com/cdclake/cdclake/sinks/state"
	"gocloud.dev/blob"
)

// SnapshotOptions say how Snapshot builds the state tables.
type SnapshotOptions struct {
	// Key overrides the routes' key columns; Into the state table's
	// folder (current.DefaultInto). Both need exactly one table.
	Key  []string
	Into string
	// Buckets and Rebuild are current.Options'.
	Buckets int
	Rebuild bool
}

// TableSnapshot is what building one table's state did: its result, or
// why it was not built.
type TableSnapshot struct {
	Table string
	current.Result
	// Err is the table's error; Skipped is true when it is ErrNoKey for
	// a table Snapshot found rather than was given.
	Err     error
	Skipped bool
}

// Snapshot brings the current-state tables of tables (empty: every
// dataset of the lake) up to date from the change rows the lake holds,
// each with its route's key and Parquet settings (current.Build). A lake
// landed from Kafka holds where each partition's landing stands: only
// the changes below it are folded in, so that a run may land meanwhile.
func (s *Setup) Snapshot(ctx context.Context, bucket *blob.Bucket, tables []string, o SnapshotOptions, log *slog.Logger) ([]TableSnapshot, error) {
	found := len(tables) == 0
	if (len(o.Key) > 0 || o.Into != "") && len(tables) != 1 {
		return nil, errors.New("a key or a folder of its own is for one table: name it")
	}
	if found {
		var err error
		if tables, err = lakeDatasets(ctx, bucket); err != nil {
			return nil, err
		}
	}
	w := lake.New(bucket, memory.DefaultAllocator)
	store := state.NewStore(bucket, w)
	committed := func(ctx context.Context, source string, part int32) (int64, bool, error) {
		st, err := store.Latest(ctx, source, part)
		if err != nil || st == nil {
			return 0, false, err
		}
		return st.Committed, true, nil
	}
	var out []TableSnapshot
	var errs []error
	for _, t := range tables {
		bc := s.Plan.BatchConfig(t)
		dataset, err := bc.Path.Root(t)
		if err != nil {
			out = append(out, TableSnapshot{Table: t, Err: err})
			errs = append(errs, fmt.Errorf("%s: %w", t, err))
			continue
		}
		key := s.Plan.Key(t)
		if len(o.Key) > 0 {
			key = o.Key
		}
		res, err := current.Build(ctx, bucket, w, current.Options{
			Dataset: dataset, Into: o.Into, Key: key, Buckets: o.Buckets, Rebuild: o.Rebuild,
			Committed: committed,
			Write: parquet.Options{Compression: bc.Write.Compression, Level: bc.Write.CompressionLevel,
				RowGroupRows: bc.Write.RowGroupRows},
			Log: log,
		})
		ts := TableSnapshot{Table: t, Result: res, Err: err}
		if found && errors.Is(err, current.ErrNoKey) {
			ts.Skipped = true
		} else if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", t, err))
		}
		out = append(out, ts)
	}
	return out, errors.Join(errs...)
}

// lakeDatasets lists the lake's top folders but cdclake's own (their names
// begin with _ or .), in order.
func lakeDatasets(ctx context.Context, bucket *blob.Bucket) ([]string, error) {
	var out []string
	it := bucket.List(&blob.ListOptions{Delimiter: "/"})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("listing the lake: %w", err)
		}
		name := strings.TrimSuffix(obj.Key, "/")
		if obj.IsDir && !strings.HasPrefix(name, "_") && !strings.HasPrefix(name, ".") {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}
