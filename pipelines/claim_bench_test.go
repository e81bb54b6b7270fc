package pipelines

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/cdclake/cdclake/sinks/lake"
	"github.com/cdclake/cdclake/sinks/state"
	"gocloud.dev/blob"
	"golang.org/x/sync/errgroup"
)

// BenchmarkClaim claims a partition whose state names 10,000 files, as
// after a long stall of the durable offset with many tables: the state is
// read and a claim's state created, and the offsets of every file are
// learnt. Three states name the same files:
//
//   - recorded: every file written, each cut with its offsets (Cut.Runs),
//     as cdclake records them; no file is read;
//   - in-flight: 32 of them pending (the writes in flight when the state
//     was made, which the claim must read), the rest written;
//   - unrecorded: half written, half pending, no cut with its offsets (the
//     states of older versions, or files of too many runs): every file is
//     read, 32 at a time.
//
// It runs against the S3 server of infra/ (CDCLAKE_TEST_S3_URL, make
// bench-claim); the files are made once, under a prefix of their own, and
// kept.
func BenchmarkClaim(b *testing.B) {
	url := os.Getenv("CDCLAKE_TEST_S3_URL")
	if url == "" {
		b.Skip("CDCLAKE_TEST_S3_URL is not set (make bench-claim sets it)")
	}
	const files = 10_000
	ctx := context.Background()
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	bucket, err := lake.OpenBucket(ctx, url+sep+"prefix=bench-claim-10000/")
	if err != nil {
		b.Fatal(err)
	}
	defer bucket.Close()
	cuts := claimFixture(b, bucket, files)
	store := state.NewStore(bucket, lake.New(bucket, memory.DefaultAllocator))
	for part, bc := range []struct {
		name    string
		pending int // the last ones
		runs    bool
	}{{"recorded", 0, true}, {"in-flight", 32, true}, {"unrecorded", files / 2, false}} {
		st := &state.Partition{Seq: 1, Owner: "fixture", Source: "bench-runs", Partition: int32(part), Committed: 1}
		for i, c := range cuts {
			if i >= len(cuts)-bc.pending {
				st.Pending = append(st.Pending, c)
				continue
			}
			if bc.runs {
				c.Runs = [][2]int64{{c.First, c.Last}}
			}
			st.Written = append(st.Written, c)
		}
		if err := store.Append(ctx, st); err != nil && !errors.Is(err, state.ErrFenced) {
			b.Fatal(err) // fenced: made by an earlier run
		}
		b.Run(bc.name, func(b *testing.B) {
			for i := range b.N {
				claimed, err := state.NewJournal(store, fmt.Sprintf("bench-%d", i)).Claim(ctx, st.Source, st.Partition, "")
				if err != nil {
					b.Fatal(err)
				}
				landed, missing, err := landedOffsets(ctx, bucket, claimed)
				if err != nil {
					b.Fatal(err)
				}
				if len(landed) != files || len(missing) != 0 {
					b.Fatalf("%d offsets landed and %d cuts to repeat, want %d and 0", len(landed), len(missing), files)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/claim")
		})
	}
}

// claimFixture makes, unless made before, files one-row Parquet files,
// and returns their cuts.
func claimFixture(b *testing.B, bucket *blob.Bucket, files int) []state.Cut {
	ctx := context.Background()
	var cuts []state.Cut
	for i := range files {
		cuts = append(cuts, state.Cut{Key: fmt.Sprintf("t%03d/date=2026-12-06/bench-p0-o%020d.parquet", i%200, i+1),
			Table: fmt.Sprintf("t%03d", i%200), First: int64(i + 1), Last: int64(i + 1), Rows: 1})
	}
	if ok, _ := bucket.Exists(ctx, "files-ready"); ok {
		return cuts
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for _, c := range cuts {
		g.Go(func() error { return writeOffsets(gctx, bucket, c.Key, c.First) })
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	if err := bucket.WriteAll(ctx, "files-ready", nil, nil); err != nil {
		b.Fatal(err)
	}
	return cuts
}

// writeOffsets writes a Parquet file of one column, the _cdc_offset of
// rows at the given offsets.
func writeOffsets(ctx context.Context, bucket *blob.Bucket, key string, offsets ...int64) error {
	sch := arrow.NewSchema([]arrow.Field{{Name: schema.ColOffset, Type: arrow.PrimitiveTypes.Int64}}, nil)
	bld := array.NewInt64Builder(memory.DefaultAllocator)
	bld.AppendValues(offsets, nil)
	col := bld.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(sch, []arrow.Array{col}, int64(len(offsets)))
	defer rec.Release()
	w, err := bucket.NewWriter(ctx, key, nil)
	if err != nil {
		return err
	}
	// The Parquet writer would close w itself, before its upload is checked.
	fw, err := pqarrow.NewFileWriter(sch, struct{ io.Writer }{w}, pq.NewWriterProperties(), pqarrow.DefaultWriterProps())
	if err != nil {
		return err
	}
	if err := fw.Write(rec); err != nil {
		return err
	}
	if err := fw.Close(); err != nil {
		return err
	}
	return w.Close()
}
