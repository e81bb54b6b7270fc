package pipelines_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/cdclake/cdclake/config"
	"github.com/cdclake/cdclake/pipelines"
	"github.com/cdclake/cdclake/pipelines/source"
	"github.com/cdclake/cdclake/pipelines/source/gen"
)

// BenchmarkLand measures the whole pipeline — decode, resolve, batch, Parquet
// to a mem:// bucket — on generated streams, one format at a time and mixed.
// It reports events/s (source messages, tombstones and heartbeats included).
func BenchmarkLand(b *testing.B) {
	for _, bc := range []struct {
		name   string
		format int
	}{
		{"goldengate", gen.GoldenGate},
		{"debezium-schemas", gen.Debezium},
		{"debezium-schemaless", gen.DebeziumSchemaless},
		{"mixed", gen.Mixed},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var stream bytes.Buffer
			if _, err := gen.GenerateFormat(&stream, 20000, 10, 1, bc.format); err != nil {
				b.Fatal(err)
			}
			lines := bytes.Count(stream.Bytes(), []byte{'\n'})
			cfg, err := config.Load("")
			if err != nil {
				b.Fatal(err)
			}
			cfg.ProgressInterval = 0
			if _, err := pipelines.Compile(cfg); err != nil {
				b.Fatal(err)
			}
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			b.SetBytes(int64(stream.Len()))
			b.ResetTimer()
			for range b.N {
				src := source.NewReader("bench", bytes.NewReader(stream.Bytes()), cfg.Source.BlockLines, int(cfg.Source.BlockBytes))
				p, bucket := newPipeline(b, cfg, src, log)
				if err := p.Run(context.Background()); err != nil {
					b.Fatal(err)
				}
				if p.Stats().DeadLetters.Load() != 0 {
					b.Fatalf("%d dead letters", p.Stats().DeadLetters.Load())
				}
				bucket.Close() // the lakes of earlier iterations are not kept
			}
			b.ReportMetric(float64(lines)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
