package kafka_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/cdclake/cdclake/cmd/cdcgen/gen"
	"github.com/cdclake/cdclake/config"
	"github.com/cdclake/cdclake/pipelines"
	"github.com/cdclake/cdclake/pipelines/source/kafka"
	"github.com/cdclake/cdclake/pipelines/source/kafka/kafkatest"
	"github.com/cdclake/cdclake/sinks/lake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkKafkaLand lands a 6-partition topic of generated mixed changes
// from the real broker (CDCLAKE_TEST_KAFKA_BROKERS; skipped without) into
// a mem:// lake with --until-caught-up, a new consumer group each time:
// the Kafka source, the commit protocol's state objects and the pipeline
// together. It reports messages/s.
func BenchmarkKafkaLand(b *testing.B) {
	broker := kafkatest.Brokers(b)
	const events = 200000
	topic := fmt.Sprintf("cdclake-bench-%d", time.Now().UnixNano())
	recs, _ := kafkatest.Stream(b, topic, events, 24, 5, gen.Mixed)
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ProducerBatchMaxBytes(4<<20))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	kafkatest.CreateTopic(b, broker, topic, 6).Close()
	kafkatest.ProduceRecords(b, cl, recs)
	cfg, err := config.Load("")
	if err != nil {
		b.Fatal(err)
	}
	cfg.ProgressInterval = 0
	plan, err := pipelines.Compile(cfg)
	if err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("CDCLAKE_BENCH_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	b.ResetTimer()
	for i := range b.N {
		kc, err := kafka.ParseURL(fmt.Sprintf("kafka://%s/%s?group=bench-%s-%d", broker, topic, topic, i))
		if err != nil {
			b.Fatal(err)
		}
		kc.UntilCaughtUp = true
		src, err := kafka.New(kc, log)
		if err != nil {
			b.Fatal(err)
		}
		bucket, err := lake.OpenBucket(context.Background(), "mem://")
		if err != nil {
			b.Fatal(err)
		}
		p, err := pipelines.New(plan, src, bucket, log)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Run(context.Background()); err != nil {
			b.Fatal(err)
		}
		if n := p.Stats().Messages.Load(); n != int64(len(recs)) {
			b.Fatalf("read %d messages, want %d", n, len(recs))
		}
		bucket.Close()
	}
	b.ReportMetric(float64(len(recs))*float64(b.N)/b.Elapsed().Seconds(), "messages/s")
}
