package kafka_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/cdclake/cdclake/pipelines/source"
	"github.com/cdclake/cdclake/pipelines/source/kafka"
	"github.com/cdclake/cdclake/pipelines/source/kafka/kafkatest"
	"github.com/cdclake/cdclake/pipelines/source/sourcetest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestConformance runs the source suite on the Kafka source: following
// its topic (unbounded), and with until_caught_up (bounded). Each
// partition of the suite is a partition of a topic of its own.
func TestConformance(t *testing.T) {
	for _, bounded := range []bool{true, false} {
		t.Run(fmt.Sprint("until_caught_up=", bounded), func(t *testing.T) {
			sourcetest.Run(t, sourcetest.Harness{Bounded: bounded, New: func(t *testing.T, parts [][]string) source.Source {
				return conformanceSource(t, parts, bounded)
			}})
		})
	}
}

var conformanceTopics int

func conformanceSource(t *testing.T, parts [][]string, untilCaughtUp bool) source.Source {
	broker := kafkatest.Cluster(t)
	conformanceTopics++
	topic := fmt.Sprintf("cdclake-conformance-%d-%d", time.Now().UnixNano(), conformanceTopics)
	cl := kafkatest.CreateTopic(t, broker, topic, int32(len(parts)))
	defer cl.Close()
	var recs []*kgo.Record
	for p, values := range parts {
		for _, v := range values {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(p), Value: []byte(v)})
		}
	}
	pcl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	kc, err := kafka.ParseURL(fmt.Sprintf("kafka://%s/%s?group=g-%s&commit_interval=100ms", broker, topic, topic))
	if err != nil {
		t.Fatal(err)
	}
	kc.BlockRecords, kc.UntilCaughtUp = sourcetest.BlockRecords, untilCaughtUp
	src, err := kafka.New(kc, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return src
}
