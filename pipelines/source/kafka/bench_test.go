package kafka_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cdclake/cdclake/config"
	"github.com/cdclake/cdclake/pipelines"
	"github.com/cdclake/cdclake/pipelines/source"
	"github.com/cdclake/cdclake/pipelines/source/gen"
	"github.com/cdclake/cdclake/pipelines/source/kafka"
	"github.com/cdclake/cdclake/pipelines/source/kafka/kafkatest"
	"github.com/cdclake/cdclake/sinks/lake"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"gocloud.dev/blob"
)

// BenchmarkKafkaLand lands a 6-partition topic of generated mixed changes
// from the real broker (CDCLAKE_TEST_KAFKA_BROKERS; skipped without) into
// a mem:// lake (or, under a new prefix each time, the bucket URL
// CDCLAKE_BENCH_LAKE, for example the S3 server's) with
// --until-caught-up, a new consumer group each time: the Kafka source, the
// commit protocol's state objects and the pipeline together. It reports
// messages/s.
func BenchmarkKafkaLand(b *testing.B) {
	broker, topic, n := benchTopic(b)
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
	url := "mem://"
	if u := os.Getenv("CDCLAKE_BENCH_LAKE"); u != "" {
		url = u
	}
	b.ResetTimer()
	for i := range b.N {
		src := benchSource(b, broker, topic, log)
		bucket, err := lake.OpenBucket(context.Background(), url)
		if err != nil {
			b.Fatal(err)
		}
		if url != "mem://" {
			bucket = blob.PrefixedBucket(bucket, fmt.Sprintf("bench-%d-%d/", time.Now().UnixNano(), i))
		}
		p, err := pipelines.New(plan, src, bucket, log)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Run(context.Background()); err != nil {
			b.Fatal(err)
		}
		if got := p.Stats().Messages.Load(); got != int64(n) {
			b.Fatalf("read %d messages, want %d", got, n)
		}
		bucket.Close()
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "messages/s")
}

// BenchmarkKafkaConsume reads the topic of BenchmarkKafkaLand with the
// same client and fetch settings and does nothing else: the ceiling the
// landing is compared with.
func BenchmarkKafkaConsume(b *testing.B) {
	broker, topic, n := benchTopic(b)
	b.ResetTimer()
	for range b.N {
		cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			b.Fatal(err)
		}
		read := 0
		for read < n {
			fs := cl.PollRecords(context.Background(), 4096)
			if err := fs.Err0(); err != nil {
				b.Fatal(err)
			}
			read += fs.NumRecords()
		}
		cl.Close()
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "messages/s")
}

// BenchmarkKafkaSource reads the topic through the Kafka source alone,
// acknowledging every block at once: what the source costs, between the
// bare consume and the landing.
func BenchmarkKafkaSource(b *testing.B) {
	broker, topic, n := benchTopic(b)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	b.ResetTimer()
	for range b.N {
		src := benchSource(b, broker, topic, log)
		src.Bind(source.Hooks{
			Durable: func(string, int32) (int64, bool) { return 0, false },
			Flush:   func(context.Context, string, int32) error { return nil },
			Drop:    func(string, int32) {},
			Claim:   func(context.Context, string, int32, string) (int64, bool, error) { return 0, false, nil },
		})
		msgs, err := src.Subscribe(context.Background(), "")
		if err != nil {
			b.Fatal(err)
		}
		read := 0
	loop:
		for {
			select {
			case m, ok := <-msgs:
				if !ok {
					break loop
				}
				blk, err := source.BlockOf(m)
				if err != nil {
					b.Fatal(err)
				}
				read += len(blk.Records)
				m.Ack()
			case <-src.Drained():
				break loop
			}
		}
		_ = src.Close()
		_ = src.Finish(context.Background())
		if read != n {
			b.Fatalf("read %d messages, want %d", read, n)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "messages/s")
}

// benchSource is an --until-caught-up source of the topic in a new group
// (the benchmark framework runs a benchmark more than once).
func benchSource(b *testing.B, broker, topic string, log *slog.Logger) *kafka.Source {
	kc, err := kafka.ParseURL(fmt.Sprintf("kafka://%s/%s?group=bench-%s-%d", broker, topic, topic, bench.groups.Add(1)))
	if err != nil {
		b.Fatal(err)
	}
	kc.UntilCaughtUp = true
	src, err := kafka.New(kc, log)
	if err != nil {
		b.Fatal(err)
	}
	return src
}

var bench struct {
	once          sync.Once
	broker, topic string
	n             int
	groups        atomic.Int64
}

// TestMain deletes the benchmarks' topic once every benchmark ran.
func TestMain(m *testing.M) {
	code := m.Run()
	if bench.topic != "" {
		if cl, err := kgo.NewClient(kgo.SeedBrokers(bench.broker)); err == nil {
			_, _ = kadm.NewClient(cl).DeleteTopics(context.Background(), bench.topic)
			cl.Close()
		}
	}
	os.Exit(code)
}

// benchTopic creates, once per test binary, a 6-partition topic of 200,000
// generated mixed changes over 24 tables (deleted by TestMain).
func benchTopic(b *testing.B) (broker, topic string, n int) {
	broker = kafkatest.Brokers(b)
	bench.once.Do(func() {
		bench.topic = fmt.Sprintf("cdclake-bench-%d", time.Now().UnixNano())
		recs, _ := kafkatest.Stream(b, bench.topic, 200000, 24, 5, gen.Mixed)
		cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ProducerBatchMaxBytes(4<<20))
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		if _, err := kadm.NewClient(cl).CreateTopic(context.Background(), 6, 1, nil, bench.topic); err != nil {
			b.Fatal(err)
		}
		bench.broker = broker
		kafkatest.ProduceRecords(b, cl, recs)
		bench.n = len(recs)
	})
	if bench.n == 0 {
		b.Fatal("the benchmark topic could not be made")
	}
	return broker, bench.topic, bench.n
}
