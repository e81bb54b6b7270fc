package pipelines_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/config"
	"github.com/cdclake/cdclake/pipelines/source"
	"github.com/cdclake/cdclake/pipelines/source/gen"
	"github.com/cdclake/cdclake/sinks/current"
	"github.com/cdclake/cdclake/sinks/lake"
	"gocloud.dev/blob"
)

// BenchmarkStateBuild measures an incremental build of a current-state
// table, copy-on-write against merge-on-read: a GoldenGate table of
// about 100,000 rows (16 buckets) built from all but its last changes,
// then a build that folds in the last 0.5 % or 5 % of them (inserts,
// updates and deletes of random keys, touching every bucket). Each
// iteration builds from the same state (the first build's manifest,
// copied); it reports the bytes a build writes and the files a reader
// then reads (data files and deletion vector files).
func BenchmarkStateBuild(b *testing.B) {
	var stream bytes.Buffer
	if _, err := gen.GenerateFormat(&stream, 500_000, 1, 1, gen.GoldenGate); err != nil {
		b.Fatal(err)
	}
	lines := int64(bytes.Count(stream.Bytes(), []byte{'\n'}))
	cfg, err := config.Load("")
	if err != nil {
		b.Fatal(err)
	}
	cfg.ProgressInterval = 0
	cfg.Defaults.MaxRows = 10_000
	src := source.NewReader("bench", bytes.NewReader(stream.Bytes()), cfg.Source.BlockLines, int(cfg.Source.BlockBytes))
	p, bucket := newPipeline(b, cfg, src, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	if err := p.Run(ctx); err != nil {
		b.Fatal(err)
	}
	dataset := ""
	it := bucket.List(&blob.ListOptions{Delimiter: "/"})
	for {
		obj, err := it.Next(ctx)
		if err != nil {
			break
		}
		if name := strings.TrimSuffix(obj.Key, "/"); obj.IsDir && !strings.HasPrefix(name, "_") {
			dataset = name
		}
	}
	w := lake.New(bucket, memory.DefaultAllocator)
	runs := 0 // each build into a folder of its own
	location := func(k string) string { return "mem://lake/" + k }
	for _, share := range []struct {
		name string
		per  int64 // of 1000
	}{{"0.5%", 5}, {"5%", 50}} {
		base := lines - lines*share.per/1000
		tpl := "tpl-" + share.name
		first, err := current.Build(ctx, bucket, w, current.Options{Dataset: dataset, Into: tpl, Key: []string{"ID"}, KeepReplaced: true, Location: location,
			Committed: func(context.Context, string, int32) (int64, bool, error) { return base, true, nil }})
		if err != nil {
			b.Fatal(err)
		}
		manifest := fmt.Sprintf("%s/_manifest/%020d.json", tpl, first.Version)
		data, err := bucket.ReadAll(ctx, manifest)
		if err != nil {
			b.Fatal(err)
		}
		for _, mode := range []string{config.CopyOnWrite, config.MergeOnRead} {
			b.Run(share.name+"/"+mode, func(b *testing.B) {
				var written, files int64
				var res current.Result
				for range b.N {
					b.StopTimer()
					runs++
					into := fmt.Sprintf("run-%d", runs)
					if err := bucket.WriteAll(ctx, fmt.Sprintf("%s/_manifest/%020d.json", into, first.Version), data, nil); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					res, err = current.Build(ctx, bucket, w, current.Options{Dataset: dataset, Into: into, KeepReplaced: true, Location: location,
						MergeOnRead: mode == config.MergeOnRead,
						Committed:   func(context.Context, string, int32) (int64, bool, error) { return lines + 1, true, nil }})
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					it := bucket.List(&blob.ListOptions{Prefix: into + "/"})
					for {
						obj, err := it.Next(ctx)
						if err != nil {
							break
						}
						if !strings.Contains(obj.Key, "/_manifest/") {
							written += obj.Size
						}
					}
					b.StartTimer()
				}
				if res.Merged != (mode == config.MergeOnRead) {
					b.Fatalf("%s: merged %v", mode, res.Merged)
				}
				files = int64(len(res.StateFiles))
				if len(res.Deletes) > 0 {
					files++ // one Puffin file a build
				}
				b.ReportMetric(float64(written)/float64(b.N), "B-written/op")
				b.ReportMetric(float64(res.Changes), "changes")
				b.ReportMetric(float64(res.Rows), "rows")
				b.ReportMetric(float64(files), "files-read")
			})
		}
	}
}
