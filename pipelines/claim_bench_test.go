package pipelines

import (
	"context"
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

// BenchmarkClaim claims a partition whose state names 10,000 files (5,000
// written above the committed offset, 5,000 pending), as after a long
// stall of the durable offset with many tables: the state is read and a
// claim's state created, and the offsets of every file are read. It runs
// against the S3 server of infra/ (CDCLAKE_TEST_S3_URL, make bench-claim);
// the files are made once, under a prefix of their own, and kept.
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
	st := claimFixture(b, bucket, files)
	store := state.NewStore(bucket, lake.New(bucket, memory.DefaultAllocator))
	b.ResetTimer()
	for i := range b.N {
		claimed, err := state.NewJournal(store, fmt.Sprintf("bench-%d", i)).Claim(ctx, st.Source, st.Partition, "")
		if err != nil {
			b.Fatal(err)
		}
		landed, cuts, err := landedOffsets(ctx, bucket, claimed)
		if err != nil {
			b.Fatal(err)
		}
		if len(landed) != files || len(cuts) != 0 {
			b.Fatalf("%d offsets landed and %d cuts to repeat, want %d and 0", len(landed), len(cuts), files)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/claim")
}

// claimFixture makes, unless made before, files one-row Parquet files and
// a state naming half of them written and half pending (the pending ones
// are written too: a claim reads them as landed).
func claimFixture(b *testing.B, bucket *blob.Bucket, files int) *state.Partition {
	ctx := context.Background()
	st := &state.Partition{Seq: 1, Owner: "fixture", Source: "bench", Partition: 0, Committed: 1}
	for i := range files {
		c := state.Cut{Key: fmt.Sprintf("t%03d/date=2026-12-06/bench-p0-o%020d.parquet", i%200, i+1), Table: fmt.Sprintf("t%03d", i%200),
			First: int64(i + 1), Last: int64(i + 1), Rows: 1}
		if i%2 == 0 {
			st.Written = append(st.Written, c)
		} else {
			st.Pending = append(st.Pending, c)
		}
	}
	if ok, _ := bucket.Exists(ctx, "ready"); ok {
		return st
	}
	sch := arrow.NewSchema([]arrow.Field{{Name: schema.ColOffset, Type: arrow.PrimitiveTypes.Int64}}, nil)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for _, c := range append(st.Written, st.Pending...) {
		g.Go(func() error {
			bld := array.NewInt64Builder(memory.DefaultAllocator)
			bld.Append(c.First)
			col := bld.NewArray()
			rec := array.NewRecordBatch(sch, []arrow.Array{col}, 1)
			defer rec.Release()
			defer col.Release()
			w, err := bucket.NewWriter(gctx, c.Key, nil)
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
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	store := state.NewStore(bucket, lake.New(bucket, memory.DefaultAllocator))
	if err := store.Append(ctx, st); err != nil {
		b.Fatal(err)
	}
	if err := bucket.WriteAll(ctx, "ready", nil, nil); err != nil {
		b.Fatal(err)
	}
	return st
}
