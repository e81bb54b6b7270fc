package pipelines_test

import (
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/cdclake/cdclake/config"
	"github.com/cdclake/cdclake/handlers/decode/decodetest"
	"github.com/cdclake/cdclake/pipelines"
	"github.com/cdclake/cdclake/pipelines/source"
)

// BenchmarkLandAvro lands the same real Debezium changes (the committed
// capture's PostgreSQL tables, repeated to 50,000 messages) as the JSON
// connector with schemas wrote them and as the Avro connector wrote them,
// to a mem:// bucket. It reports events/s.
func BenchmarkLandAvro(b *testing.B) {
	const capture = "../testdata/debezium-real"
	for _, bc := range []struct{ name, glob, registry string }{
		{"json-schemas", "shop.public.*.ndjson", ""},
		{"avro", "shopavro.public.*.b64", filepath.Join(capture, "_schemas.json")},
	} {
		b.Run(bc.name, func(b *testing.B) {
			files, err := filepath.Glob(filepath.Join(capture, bc.glob))
			if err != nil || len(files) == 0 {
				b.Fatalf("no %s: %v", bc.glob, err)
			}
			var msgs [][]byte
			for _, f := range files {
				for _, l := range decodetest.ReadLines(b, f) {
					if filepath.Ext(f) == ".b64" {
						if l, err = base64.StdEncoding.DecodeString(string(l)); err != nil {
							b.Fatal(err)
						}
					}
					msgs = append(msgs, l)
				}
			}
			var blocks []*source.Block
			var size int64
			const events = 50000
			for i := 0; i < events; i += 1024 {
				blk := &source.Block{Source: "bench", Topic: "bench"}
				for j := i; j < min(i+1024, events); j++ {
					m := msgs[j%len(msgs)]
					blk.Records = append(blk.Records, source.Record{Offset: int64(j), Value: m})
					size += int64(len(m))
				}
				blocks = append(blocks, blk)
			}
			cfg, err := config.Load("")
			if err != nil {
				b.Fatal(err)
			}
			cfg.ProgressInterval = 0
			cfg.Source.SchemaRegistry.URL = bc.registry
			if _, err := pipelines.Compile(cfg); err != nil {
				b.Fatal(err)
			}
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			b.SetBytes(size)
			b.ResetTimer()
			for range b.N {
				p, bucket := newPipeline(b, cfg, source.NewMemory(blocks...), log)
				if err := p.Run(context.Background()); err != nil {
					b.Fatal(err)
				}
				if p.Stats().DeadLetters.Load() != 0 {
					b.Fatalf("%d dead letters", p.Stats().DeadLetters.Load())
				}
				bucket.Close() // the lakes of earlier iterations are not kept
			}
			b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
