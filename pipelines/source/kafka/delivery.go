// Delivery: one poller queues each assigned partition's records, and one
// deliverer per partition cuts them into blocks, each after the previous
// one's ack.

package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cdclake/cdclake/pipelines/source"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// partition is an assigned partition's queue and deliverer.
type partition struct {
	tp
	queue  []*kgo.Record
	bytes  int
	paused bool
	// ended: with UntilCaughtUp, every record up to the target is queued;
	// the partition stays paused, so that fetches the brokers hold for
	// want of data do not include it.
	ended bool
	hwm   int64 // high watermark seen in the last fetch
	next  int64 // offset after the last acked record, -1 before any
	wake  chan struct{}
	stop  chan struct{}
	done  chan struct{}
}

// poll fetches records and queues them per partition.
func (s *Source) poll() {
	defer s.wg.Done()
	for {
		fetches := s.cl.PollRecords(s.ctx, 4*s.cfg.BlockRecords)
		if fetches.IsClientClosed() || s.ctx.Err() != nil {
			s.cl.AllowRebalance()
			return
		}
		fetches.EachError(func(topic string, part int32, err error) {
			switch {
			case errors.Is(err, context.Canceled):
			case errors.Is(err, kerr.OffsetOutOfRange):
				s.outOfRange(topic, part)
			default:
				s.logOnce("fetch failed; retrying", "topic", topic, "partition", part, "err", err)
			}
		})
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			s.enqueue(fp)
		})
		s.cl.AllowRebalance()
	}
}

// outOfRange handles a partition whose next offset is no longer in the
// log: its messages from there to the log's first offset were deleted
// before they landed (retention during an outage, a recreated topic). By
// default the run stops, naming the partition and the gap; with OnGap
// "skip" the gap is recorded (Hooks.Gap) and the partition read on from
// the log's first offset.
func (s *Source) outOfRange(topic string, part int32) {
	k := tp{topic, part}
	s.mu.Lock()
	st := s.state(k)
	from, known := st.committed, st.committed >= 0
	if p := st.deliv; p != nil && p.next >= 0 {
		from, known = p.next, true
	} else if st.resume >= 0 {
		from, known = st.resume, true
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	var start, end int64 = -1, -1
	adm := kadm.NewClient(s.cl)
	if starts, err := adm.ListStartOffsets(ctx, topic); err == nil {
		if o, ok := starts.Lookup(topic, part); ok && o.Err == nil {
			start = o.Offset
		}
	}
	if ends, err := adm.ListEndOffsets(ctx, topic); err == nil {
		if o, ok := ends.Lookup(topic, part); ok && o.Err == nil {
			end = o.Offset
		}
	}
	where := "an offset"
	if known {
		where = fmt.Sprintf("offset %d", from)
	}
	if s.cfg.OnGap != "skip" || start < 0 || !known || from > end {
		s.fail(fmt.Errorf("%s partition %d: %s is no longer in the log, which holds %d to %d: the messages between were "+
			"deleted (retention) or the topic was recreated before they landed; nothing was skipped. To land on from %d "+
			"and record the gap in the lake (_gaps/), set on_gap=skip (source.kafka.on_gap: skip)", topic, part, where, start, end, start))
		return
	}
	if s.hooks.Gap != nil {
		if err := s.hooks.Gap(ctx, topic, part, from, start); err != nil {
			s.fail(fmt.Errorf("%s partition %d: recording the gap %d to %d: %w", topic, part, from, start, err))
			return
		}
	}
	s.log.Error("messages deleted before they landed: the gap is recorded in the lake and the partition lands on (on_gap=skip)",
		"topic", topic, "partition", part, "from", from, "to", start)
	s.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{topic: {part: {Epoch: -1, Offset: start}}})
}

func (s *Source) enqueue(fp kgo.FetchTopicPartition) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.parts[tp{fp.Topic, fp.Partition}]
	if st == nil || st.deliv == nil {
		return // not assigned (any more)
	}
	p := st.deliv
	p.hwm = fp.HighWatermark
	target, bounded := st.target, st.bounded
	for _, r := range fp.Records {
		if s.cfg.UntilCaughtUp && (!bounded || r.Offset >= target) {
			break // read next time
		}
		p.queue = append(p.queue, r)
		p.bytes += len(r.Value) + len(r.Key)
		if s.cfg.UntilCaughtUp && bounded && r.Offset+1 >= target {
			p.ended = true
		}
	}
	if !p.paused && (p.ended || p.bytes > 4*s.cfg.BlockBytes) {
		p.paused = true
		s.cl.PauseFetchPartitions(map[string][]int32{p.topic: {p.part}})
		s.log.Debug("partition paused", "topic", p.topic, "partition", p.part, "bytes", p.bytes, "read_to_end", p.ended)
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// take cuts the next block from a partition's queue, nil when it is empty.
func (s *Source) take(p *partition) *source.Block {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(p.queue) == 0 {
		return nil
	}
	b := &source.Block{Source: p.topic, Partition: p.part, Topic: p.topic}
	n, size := 0, 0
	for n < len(p.queue) && n < s.cfg.BlockRecords && (n == 0 || size+len(p.queue[n].Value) <= s.cfg.BlockBytes) {
		r := p.queue[n]
		rec := source.Record{Offset: r.Offset, Value: r.Value, Key: r.Key}
		if r.Timestamp.UnixMilli() > 0 { // -1: the record has none
			rec.TimeMicros = r.Timestamp.UnixMicro()
		}
		for _, h := range r.Headers {
			rec.Headers = append(rec.Headers, source.Header{Key: h.Key, Value: h.Value})
		}
		b.Records = append(b.Records, rec)
		size += len(r.Value)
		p.bytes -= len(r.Value) + len(r.Key)
		n++
	}
	clear(p.queue[:n])
	p.queue = p.queue[n:]
	if p.paused && !p.ended && p.bytes < s.cfg.BlockBytes {
		p.paused = false
		s.cl.ResumeFetchPartitions(map[string][]int32{p.topic: {p.part}})
		s.log.Debug("partition resumed", "topic", p.topic, "partition", p.part, "bytes", p.bytes)
	}
	return b
}

// deliver hands a partition's blocks to the pipeline, one at a time.
func (s *Source) deliver(p *partition) {
	defer s.wg.Done()
	defer close(p.done)
	for {
		select {
		case <-p.wake:
		case <-p.stop:
			return
		case <-s.ctx.Done():
			return
		}
		for {
			b := s.take(p)
			if b == nil {
				break
			}
			msg := source.NewMessage(s.ctx, b)
			select {
			case s.out <- msg:
			case <-p.stop:
				return
			case <-s.ctx.Done():
				return
			}
			// Once handed over, a block is waited for even when the
			// partition is revoked: its rows must be in the batcher
			// before the partition's files are written.
			select {
			case <-msg.Acked():
				s.acked(p, b.Records[len(b.Records)-1].Offset+1)
			case <-msg.Nacked():
				if s.ctx.Err() == nil {
					s.fail(fmt.Errorf("%s partition %d: block at offset %d was not processed", p.topic, p.part, b.Records[0].Offset))
				}
				return
			case <-s.ctx.Done():
				return
			}
		}
	}
}

func (s *Source) acked(p *partition, next int64) {
	s.mu.Lock()
	p.next = next
	s.mu.Unlock()
	s.checkCaughtUp()
}
