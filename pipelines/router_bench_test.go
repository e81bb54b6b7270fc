package pipelines

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/cdclake/cdclake/config"
	"github.com/cdclake/cdclake/pipelines/source"
	"github.com/cdclake/cdclake/sinks/lake"
)

// BenchmarkRouterPerBlock measures what the router and the stage
// middleware cost per block, with stages that do nothing: a block of the
// default size (1024 records) travels the same chain as in Run. Compare
// its ns/op with the time a real block takes (BenchmarkLand's ns/op per
// 1024 events) for the router's share of the CPU.
func BenchmarkRouterPerBlock(b *testing.B) {
	cfg, err := config.Load("")
	if err != nil {
		b.Fatal(err)
	}
	plan, err := Compile(cfg)
	if err != nil {
		b.Fatal(err)
	}
	records := make([]source.Record, cfg.Source.BlockLines)
	for i := range records {
		records[i] = source.Record{Offset: int64(i), Value: []byte(`{}`)}
	}
	blocks := make([]*source.Block, b.N)
	for i := range blocks {
		blocks[i] = &source.Block{Source: "bench", Partition: int32(i % 4), Records: records}
	}
	bucket, err := lake.OpenBucket(context.Background(), "mem://")
	if err != nil {
		b.Fatal(err)
	}
	defer bucket.Close()
	src := source.NewMemory(blocks...)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	p, err := New(plan, src, bucket, log, WithWorkers(1))
	if err != nil {
		b.Fatal(err)
	}
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: time.Minute}, watermill.NopLogger{})
	if err != nil {
		b.Fatal(err)
	}
	router.AddMiddleware(middleware.Recoverer)
	nop := func(*lane, int) {}
	p.addHandler(router, nop, nop, p.batchStage)
	b.ResetTimer()
	go func() {
		<-src.Drained()
		_ = router.Close()
	}()
	if err := router.Run(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	_ = src.Close()
}
