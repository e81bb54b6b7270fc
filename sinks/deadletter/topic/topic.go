// Package topic is a deadletter.Destination that produces dead letters to a
// Kafka topic, with franz-go (the binary's one Kafka client).
//
// Each dead letter is one record with the original message's key, value
// and headers, followed by these headers:
//
//	cdclake.source, cdclake.partition, cdclake.offset   where the message was
//	cdclake.stage, cdclake.reason                        why it did not land
//
// Records are produced idempotently and acknowledged by all in-sync
// replicas before Write returns. A message dead-lettered again after a
// crash (its offset was not committed yet) is produced again: a consumer of
// the topic sees each dead letter at least once, and the position headers
// identify repeats.
package topic

import (
	"context"
	"fmt"
	"strconv"

	"github.com/cdclake/cdclake/sinks/deadletter"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Publisher produces dead letters to a topic. Safe for concurrent use.
type Publisher struct {
	cl    *kgo.Client
	topic string
}

var _ deadletter.Destination = (*Publisher)(nil)

// New returns a publisher to topic over a client made with opts (the
// connection: brokers, TLS, SASL). It connects on the first Write.
func New(opts []kgo.Opt, topic string) (*Publisher, error) {
	cl, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))...)
	if err != nil {
		return nil, fmt.Errorf("dead-letter topic %s: %w", topic, err)
	}
	return &Publisher{cl: cl, topic: topic}, nil
}

// Write produces letters and waits for their acknowledgements.
func (p *Publisher) Write(ctx context.Context, letters []deadletter.Letter) error {
	recs := make([]*kgo.Record, len(letters))
	for i := range letters {
		recs[i] = Record(&letters[i])
		recs[i].Topic = p.topic
	}
	if err := p.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("producing dead letters to %s: %w", p.topic, err)
	}
	return nil
}

// Record returns the record of a dead letter (its topic unset).
func Record(l *deadletter.Letter) *kgo.Record {
	r := &kgo.Record{Key: l.Key, Value: l.Value}
	for _, h := range l.Headers {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	r.Headers = append(r.Headers,
		kgo.RecordHeader{Key: "cdclake.source", Value: []byte(l.At.Source)},
		kgo.RecordHeader{Key: "cdclake.partition", Value: strconv.AppendInt(nil, int64(l.At.Partition), 10)},
		kgo.RecordHeader{Key: "cdclake.offset", Value: strconv.AppendInt(nil, l.At.Offset, 10)},
		kgo.RecordHeader{Key: "cdclake.stage", Value: []byte(l.Stage)},
		kgo.RecordHeader{Key: "cdclake.reason", Value: []byte(l.Reason)})
	return r
}

// Close flushes nothing (Write waits) and closes the client.
func (p *Publisher) Close() { p.cl.Close() }
