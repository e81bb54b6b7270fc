// Package kafka is a source.Source that reads Kafka topics as a member of
// a consumer group, with franz-go.
//
// # Delivery
//
// One goroutine polls the brokers and queues each assigned partition's
// records; one goroutine per partition cuts its queue into blocks and
// hands them to the pipeline, the next only after the previous one was
// acked, so partitions are landed concurrently and each in order. A
// partition whose queue outgrows four blocks is paused at the brokers until
// it drains (backpressure), so memory stays bounded whatever the lag.
//
// # Offsets
//
// Nothing is committed on acknowledgement. Every CommitInterval, and when
// partitions are revoked or the source finishes, the group's offsets are
// set to what the pipeline reports durable (source.Hooks.Durable): every
// message below it is in a written file or a written dead letter. A
// restarted consumer therefore starts at or before the first message not
// yet landed: nothing is lost. Messages between the committed offset and
// what was written before a crash are read again and rewritten under the
// same object names when the files are cut at the same offsets.
//
// # Rebalances
//
// A revoked partition stops delivering, its in-flight block finishes, its
// open files are written (Hooks.Flush) and its durable offset is committed
// before the group moves it: the next owner starts where this one ended. A
// lost partition (the member was fenced out of the group) is dropped
// unwritten; its next owner reads it again from the committed offset.
package kafka

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/cdclake/cdclake/pipelines/source"
	"github.com/cenkalti/backoff/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type tp struct {
	topic string
	part  int32
}

// Source reads Kafka topics; see the package documentation.
type Source struct {
	cfg Config
	log *slog.Logger
	cl  *kgo.Client
	// clSet is closed once cl is set: the group's callbacks may run
	// before Subscribe has it (the client joins the group at once), and
	// wait for it (client).
	clSet chan struct{}
	hooks source.Hooks

	ctx    context.Context
	cancel context.CancelFunc
	out    chan *message.Message
	wg     sync.WaitGroup

	mu        sync.Mutex
	parts     map[tp]*partition
	committed map[tp]int64
	// commitAt is when committed last moved, per partition.
	commitAt map[tp]time.Time
	// counts are the group's events (Counters).
	counts Counters
	// targets are the end offsets at start (UntilCaughtUp), starts the
	// offsets consumption begins at.
	targets map[tp]int64
	starts  map[tp]int64
	// loaded is set once targets and starts are known: the group may
	// assign partitions before (the client joins while they are listed).
	loaded bool
	// beforeLoad, when set (tests), runs before the targets are listed.
	beforeLoad func()
	// groupDone marks target partitions the group committed up to their
	// target: landed by this member or another.
	groupDone map[tp]bool
	// resume holds the offsets claimed partitions resume from (the lake's
	// state): at least that much is committed.
	resume map[tp]int64
	// claimed marks assigned partitions whose state in the lake was read:
	// only then is it known where they start.
	claimed map[tp]bool
	// unclaimed holds the assigned partitions whose state in the lake
	// could not be read (claimError): they are paused, and claimed again
	// every CommitInterval, while the others land on.
	unclaimed map[tp]error
	assigned  bool
	err       error
	closed    bool
	// stopping is set once the subscription ended: no deliverer starts
	// after it, and out is closed once those running have returned.
	stopping bool
	stopped  chan struct{}
	drained  chan struct{}
	drainOne sync.Once
	lastErr  string // the last fetch or commit error logged
}

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

var (
	_ source.Source   = (*Source)(nil)
	_ source.Handover = (*Source)(nil)
)

// New returns a source for cfg; it connects when the pipeline subscribes.
func New(cfg Config, log *slog.Logger) (*Source, error) {
	if err := cfg.Check(); err != nil {
		return nil, fmt.Errorf("kafka source: %w", err)
	}
	if cfg.BlockRecords < 1 {
		cfg.BlockRecords = 4096
	}
	if cfg.BlockBytes < 1 {
		cfg.BlockBytes = 16 << 20
	}
	if cfg.CommitInterval <= 0 {
		cfg.CommitInterval = 5 * time.Second
	}
	return &Source{cfg: cfg, log: log.With("component", "kafka"), parts: map[tp]*partition{},
		committed: map[tp]int64{}, commitAt: map[tp]time.Time{}, targets: map[tp]int64{}, starts: map[tp]int64{}, groupDone: map[tp]bool{}, resume: map[tp]int64{},
		claimed: map[tp]bool{}, unclaimed: map[tp]error{},
		drained: make(chan struct{}), stopped: make(chan struct{})}, nil
}

// Bind sets the pipeline's hooks; call it before Subscribe.
func (s *Source) Bind(h source.Hooks) { s.hooks = h }

// Subscribe joins the group and starts delivering blocks. The topic
// argument is ignored: the topics are the config's.
func (s *Source) Subscribe(ctx context.Context, _ string) (<-chan *message.Message, error) {
	if s.hooks.Durable == nil {
		return nil, errors.New("kafka source: not bound to a pipeline")
	}
	opts, err := s.options()
	if err != nil {
		return nil, fmt.Errorf("kafka source: %w", err)
	}
	// The client joins the group at once, and the group's callbacks start
	// deliverers, which use the context and the channel: both exist first.
	s.ctx, s.cancel = context.WithCancel(ctx)
	s.out = make(chan *message.Message)
	s.clSet = make(chan struct{})
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		s.stop()
		return nil, fmt.Errorf("kafka source: %w", err)
	}
	s.mu.Lock()
	s.cl = cl
	s.mu.Unlock()
	close(s.clSet)
	if s.cfg.UntilCaughtUp {
		// The client joins the group meanwhile: partitions may be assigned
		// (and claimed) before the targets are known.
		if err := s.loadTargets(s.ctx); err != nil {
			// The subscription ends as a closed one does, and the client
			// leaves the group now: Close and Finish find both done.
			s.stop()
			cl.Close()
			s.mu.Lock()
			s.cl = nil
			s.mu.Unlock()
			return nil, fmt.Errorf("kafka source: reading the end offsets: %w", err)
		}
		s.checkCaughtUp()
	}
	s.wg.Add(2)
	go s.poll()
	go s.commitLoop()
	// The subscription ends with its context (a closed router) or Close.
	go func() {
		<-s.ctx.Done()
		s.stop()
	}()
	return s.out, nil
}

// stop ends the subscription: its context is cancelled, and out is closed
// once nothing sends on it any more.
func (s *Source) stop() {
	s.cancel()
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	s.wg.Wait()
	close(s.out)
	close(s.stopped)
}

func (s *Source) options() ([]kgo.Opt, error) {
	opts, err := s.cfg.ClientOptions()
	if err != nil {
		return nil, err
	}
	opts = append(opts,
		kgo.ConsumerGroup(s.cfg.Group),
		kgo.ConsumeTopics(s.cfg.Topics...),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.OnPartitionsAssigned(s.onAssigned),
		kgo.OnPartitionsRevoked(s.onRevoked),
		kgo.OnPartitionsLost(s.onLost),
		kgo.AdjustFetchOffsetsFn(s.adjustOffsets),
	)
	if s.cfg.Regex {
		opts = append(opts, kgo.ConsumeRegex())
	}
	if s.cfg.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(s.cfg.InstanceID))
	}
	if s.cfg.SessionTimeout > 0 {
		opts = append(opts, kgo.SessionTimeout(s.cfg.SessionTimeout))
	}
	if s.cfg.MetadataMaxAge > 0 {
		opts = append(opts, kgo.MetadataMaxAge(s.cfg.MetadataMaxAge), kgo.MetadataMinAge(min(s.cfg.MetadataMaxAge, 5*time.Second)))
	}
	// A partition with no committed offset starts where start says; one
	// whose offset is no longer in the log is never reset silently: the
	// client hands the error over (poll, outOfRange).
	if s.cfg.Start == "latest" {
		opts = append(opts, kgo.ConsumeResetOffset(kgo.NoResetOffset().AtEnd()))
	} else {
		opts = append(opts, kgo.ConsumeResetOffset(kgo.NoResetOffset().AtStart()))
	}
	if s.cfg.FetchMaxWait > 0 {
		opts = append(opts, kgo.FetchMaxWait(s.cfg.FetchMaxWait))
	}
	if s.cfg.FetchMaxBytes > 0 {
		opts = append(opts, kgo.FetchMaxBytes(s.cfg.FetchMaxBytes))
	}
	if s.cfg.FetchMaxPartitionBytes > 0 {
		opts = append(opts, kgo.FetchMaxPartitionBytes(s.cfg.FetchMaxPartitionBytes))
	}
	return opts, nil
}

// loadTargets records, for UntilCaughtUp, each partition's end offset and
// where the group starts reading it.
func (s *Source) loadTargets(ctx context.Context) error {
	if s.beforeLoad != nil {
		s.beforeLoad()
	}
	adm := kadm.NewClient(s.cl)
	topics := s.cfg.Topics
	if s.cfg.Regex {
		all, err := adm.ListTopics(ctx)
		if err != nil {
			return err
		}
		topics = nil
		for _, name := range all.Names() {
			for _, expr := range s.cfg.Topics {
				if ok, _ := regexp.MatchString("^(?:"+expr+")$", name); ok {
					topics = append(topics, name)
					break
				}
			}
		}
	}
	if len(topics) == 0 {
		s.mu.Lock()
		s.loaded = true
		s.mu.Unlock()
		return nil
	}
	// A topic just created can be missing from the first answers: ask
	// again until every topic has its partitions, rather than take an
	// empty answer for "nothing to read".
	var ends kadm.ListedOffsets
	for attempt := 0; ; attempt++ {
		var err error
		ends, err = adm.ListEndOffsets(ctx, topics...)
		if err == nil {
			err = ends.Error()
		}
		complete := err == nil
		for _, topic := range topics {
			if len(ends[topic]) == 0 {
				complete = false
			}
		}
		if complete {
			break
		}
		if attempt == 20 {
			if err == nil {
				err = fmt.Errorf("no partitions listed for every topic of %v", topics)
			}
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	startAt := ends
	if s.cfg.Start == "earliest" {
		if err := retrying(ctx, func() (err error) {
			startAt, err = adm.ListStartOffsets(ctx, topics...)
			return err
		}); err != nil {
			return err
		}
	}
	var committed kadm.OffsetResponses
	if err := retrying(ctx, func() (err error) {
		committed, err = groupOffsets(ctx, adm, s.cfg.Group)
		return err
	}); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var backlog int64
	ends.Each(func(o kadm.ListedOffset) {
		k := tp{o.Topic, o.Partition}
		s.targets[k] = o.Offset
		if r, claimed := s.resume[k]; claimed {
			s.starts[k] = r // claimed already: the lake's state says
		} else if c, ok := committed.Lookup(o.Topic, o.Partition); ok && c.Err == nil && c.At >= 0 {
			s.starts[k] = c.At
		} else if so, ok := startAt.Lookup(o.Topic, o.Partition); ok && so.Err == nil {
			s.starts[k] = so.Offset
		}
		if n := o.Offset - s.starts[k]; n > 0 {
			backlog += n
		}
	})
	s.loaded = true
	s.log.Info("reading up to the end offsets", "partitions", len(s.targets), "records", backlog)
	return nil
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
	from, known := s.committed[k]
	if p := s.parts[k]; p != nil && p.next >= 0 {
		from, known = p.next, true
	} else if r, ok := s.resume[k]; ok {
		from, known = r, true
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

// logOnce logs a failure once per distinct message, not per attempt.
func (s *Source) logOnce(msg string, attrs ...any) {
	key := fmt.Sprint(append([]any{msg}, attrs...)...)
	s.mu.Lock()
	same := key == s.lastErr
	s.lastErr = key
	s.mu.Unlock()
	if !same {
		s.log.Warn(msg, attrs...)
	}
}

func (s *Source) enqueue(fp kgo.FetchTopicPartition) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.parts[tp{fp.Topic, fp.Partition}]
	if p == nil {
		return // not assigned (any more)
	}
	p.hwm = fp.HighWatermark
	target, bounded := s.targets[p.tp]
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

func (s *Source) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	s.drainOne.Do(func() { close(s.drained) })
}

// checkCaughtUp closes Drained once, in UntilCaughtUp mode, every
// partition that had something to read at start was read to its target:
// an assigned one by this member, from where the lake's state says it
// starts (its claim; the group's offset may be ahead of the lake); one
// assigned to another member by the group (a commit at or past it). A
// member alone in the group does it all; a member whose partitions moved
// to another does not wait for them.
func (s *Source) checkCaughtUp() {
	if !s.cfg.UntilCaughtUp {
		return
	}
	s.mu.Lock()
	done := s.assigned && s.loaded
	for k, target := range s.targets {
		p, assigned := s.parts[k]
		if !assigned {
			if s.starts[k] >= target || s.groupDone[k] {
				continue
			}
			done = false
			break
		}
		if _, waiting := s.unclaimed[k]; waiting {
			continue // ends the run with its error, below
		}
		if !s.claimed[k] {
			done = false
			break
		}
		if s.starts[k] >= target {
			continue
		}
		if len(p.queue) > 0 || p.next < target {
			done = false
			break
		}
	}
	var unclaimed []error
	if done {
		for k, err := range s.unclaimed {
			unclaimed = append(unclaimed, fmt.Errorf("%s partition %d: its state in the lake cannot be claimed, so it was not read: %w",
				k.topic, k.part, err))
		}
	}
	s.mu.Unlock()
	if len(unclaimed) > 0 {
		s.fail(errors.Join(unclaimed...))
		return
	}
	if done {
		s.drainOne.Do(func() {
			s.log.Debug("caught up", "targets", fmt.Sprint(s.targets), "starts", fmt.Sprint(s.starts), "group_done", fmt.Sprint(s.groupDone))
			close(s.drained)
		})
	}
}

// retryFor is how long a request that fails with an error Kafka calls
// retriable is tried again: a group coordinator that is not up yet
// (COORDINATOR_NOT_AVAILABLE while a new broker creates its offsets
// topic, or while a coordinator moves) answers so for seconds.
const retryFor = 30 * time.Second

// retrying calls f until it succeeds, fails with an error that is not
// retriable, or retryFor has passed, waiting 250ms growing to 2s between
// attempts, jittered.
func retrying(ctx context.Context, f func() error) error {
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		err := f()
		var r retriableError
		if err != nil && !kerr.IsRetriable(err) && !errors.As(err, &r) {
			return struct{}{}, backoff.Permanent(err)
		}
		return struct{}{}, err
	}, backoff.WithBackOff(&backoff.ExponentialBackOff{InitialInterval: 250 * time.Millisecond, RandomizationFactor: 0.5,
		Multiplier: 1.5, MaxInterval: 2 * time.Second}), backoff.WithMaxElapsedTime(retryFor))
	return err
}

// groupOffsets returns the group's committed offsets: none for a group
// the brokers do not know yet (brokers answer that case with no offsets
// or with GROUP_ID_NOT_FOUND).
func groupOffsets(ctx context.Context, adm *kadm.Client, group string) (kadm.OffsetResponses, error) {
	offs, err := adm.FetchOffsets(ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return kadm.OffsetResponses{}, nil
	}
	return offs, err
}

// refreshGroupDone reads the group's committed offsets into groupDone.
func (s *Source) refreshGroupDone(ctx context.Context) error {
	offs, err := groupOffsets(ctx, kadm.NewClient(s.cl), s.cfg.Group)
	if err != nil {
		return err
	}
	s.mu.Lock()
	for k, target := range s.targets {
		if o, ok := offs.Lookup(k.topic, k.part); ok && o.Err == nil && o.At >= target {
			s.groupDone[k] = true
		}
	}
	s.mu.Unlock()
	s.checkCaughtUp()
	return nil
}

func (s *Source) onAssigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	s.mu.Lock()
	var names []string
	for topic, parts := range assigned {
		for _, part := range parts {
			k := tp{topic, part}
			if _, ok := s.parts[k]; ok {
				continue
			}
			p := &partition{tp: k, next: -1, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
			s.parts[k] = p
			if s.stopping {
				close(p.done) // assigned after the end: nothing to deliver
				continue
			}
			s.wg.Add(1)
			go s.deliver(p)
			names = append(names, fmt.Sprintf("%s/%d", topic, part))
		}
	}
	s.assigned = true
	s.counts.Rebalances++
	s.counts.Assigned += int64(len(names))
	s.mu.Unlock()
	sort.Strings(names)
	s.log.Info("partitions assigned", "partitions", names)
	s.checkCaughtUp()
}

// client waits until Subscribe has set s.cl, which the group's callbacks
// use; after it returns nil, they read s.cl without the lock.
func (s *Source) client(ctx context.Context) error {
	select {
	case <-s.clSet:
		return nil // set: whatever ctx says
	default:
	}
	select {
	case <-s.clSet:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// adjustOffsets claims newly assigned partitions in the lake: where the
// lake holds a partition's state, its committed offset wins over the
// group's (they differ after a crash between the two writes).
func (s *Source) adjustOffsets(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	if err := s.client(ctx); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(retryFor)
	ids, idErr := s.topicIDs(ctx, deadline, slices.Collect(maps.Keys(offsets)))
	for topic, parts := range offsets {
		for part := range parts {
			k := tp{topic, part}
			var off int64
			var ok bool
			// Retried within one bound for all the partitions of this
			// assignment: the group waits for this callback.
			rctx, cancel := context.WithDeadline(ctx, deadline)
			err := idErr
			if err == nil {
				_ = retrying(rctx, func() error {
					off, ok, err = s.claim(rctx, topic, ids[topic], part, parts[part])
					if errors.Is(err, source.ErrRecreated) {
						return err // no retry cures it
					}
					return retriable(err)
				})
			}
			cancel()
			if err != nil {
				// An error returned here would make the client give up
				// every partition of this member and rejoin: the partition
				// fails alone instead, paused and claimed again later.
				s.unclaimable(k, err)
				continue
			}
			s.claimedAt(k, off, ok)
			if ok {
				parts[part] = kgo.NewOffset().At(off)
			}
		}
	}
	// A partition whose state already reaches its target has nothing to
	// read: one with nothing anywhere ends the run now. Not on the
	// client's goroutine, which runs this callback; waited for as the
	// deliverers are.
	s.mu.Lock()
	if !s.stopping {
		s.wg.Go(s.checkCaughtUp)
	}
	s.mu.Unlock()
	return offsets, nil
}

// claim takes a newly assigned partition's state in the lake over
// (Hooks.Claim) and, when the lake has none, records where it starts
// (Hooks.Start): the offset to resume from, and whether there is one.
func (s *Source) claim(ctx context.Context, topic, id string, part int32, cur kgo.Offset) (int64, bool, error) {
	off, ok, err := s.hooks.Claim(ctx, topic, part, id)
	if err != nil || ok || s.hooks.Start == nil {
		return off, ok, err
	}
	// No state in the lake: where the partition starts is resolved now and
	// recorded in its state, so that a restart before its first file
	// resumes there, not at the end (or the log's start) of a later day.
	if off, err = s.startOffset(ctx, topic, part, cur); err == nil {
		err = s.hooks.Start(ctx, topic, part, off)
	}
	return off, err == nil, err
}

// topicIDs returns the ID of each topic, in the form Kafka's tools print
// (URL-safe base64), retried until deadline: a claim records its topic's
// ID and refuses a topic deleted and created again.
func (s *Source) topicIDs(ctx context.Context, deadline time.Time, topics []string) (map[string]string, error) {
	rctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	ids := map[string]string{}
	err := retrying(rctx, func() error {
		details, err := kadm.NewClient(s.cl).ListTopics(rctx, topics...)
		if err != nil {
			return err
		}
		for _, topic := range topics {
			d, ok := details[topic]
			switch {
			case !ok:
				return retriable(fmt.Errorf("topic %s: not in the brokers' metadata", topic))
			case d.Err != nil:
				return fmt.Errorf("topic %s: %w", topic, d.Err)
			}
			ids[topic] = base64.RawURLEncoding.EncodeToString(d.ID[:])
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the topics' IDs: %w", err)
	}
	return ids, nil
}

// retriable makes a claim's error one retrying tries again: the store's
// reads and writes fail for a while in an outage, and a claim that another
// instance's state beat is read again.
func retriable(err error) error {
	if err == nil {
		return nil
	}
	return retriableError{err}
}

type retriableError struct{ error }

func (e retriableError) Unwrap() error { return e.error }

// claimedAt records that partition k was claimed, to resume from off when
// ok.
func (s *Source) claimedAt(k tp, off int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.claimed[k] = true
	delete(s.unclaimed, k)
	s.counts.Claimed++
	if ok {
		// The group learns the lake's offset with the next commit, and
		// reading starts there.
		s.resume[k] = off
		delete(s.committed, k)
		if _, bounded := s.targets[k]; bounded {
			s.starts[k] = off
		}
	}
}

// unclaimable records that partition k's state could not be claimed: it
// is paused, counted and reported (Ready), and claimed again every
// CommitInterval (reclaim); with OnClaimError "fail" the run stops.
func (s *Source) unclaimable(k tp, err error) {
	var re retriableError
	if errors.As(err, &re) {
		err = re.error
	}
	s.mu.Lock()
	s.unclaimed[k] = err
	s.mu.Unlock()
	s.cl.PauseFetchPartitions(map[string][]int32{k.topic: {k.part}})
	if errors.Is(err, source.ErrRecreated) {
		s.fail(fmt.Errorf("%w; its offsets begin again and would take the old topic's file names. "+
			"Land it into another lake or prefix, or move the old topic's files and the folder of its states aside", err))
		return
	}
	if s.cfg.OnClaimError == "fail" {
		s.fail(fmt.Errorf("%s partition %d: its state in the lake cannot be claimed: %w", k.topic, k.part, err))
		return
	}
	s.log.Error("a partition's state in the lake cannot be claimed: the partition waits, unread, and is tried again; the others land on",
		"topic", k.topic, "partition", k.part, "err", err)
}

// reclaim claims the partitions unclaimable left waiting again; one that
// succeeds is read from its offset on.
func (s *Source) reclaim(ctx context.Context) {
	s.mu.Lock()
	var waiting []tp
	for k := range s.unclaimed {
		if _, assigned := s.parts[k]; assigned {
			waiting = append(waiting, k)
		} else {
			delete(s.unclaimed, k)
		}
	}
	s.mu.Unlock()
	var group kadm.OffsetResponses
	if len(waiting) > 0 {
		group, _ = groupOffsets(ctx, kadm.NewClient(s.cl), s.cfg.Group)
	}
	topics := map[string]bool{}
	for _, k := range waiting {
		topics[k.topic] = true
	}
	ids, idErr := s.topicIDs(ctx, time.Now().Add(retryFor), slices.Collect(maps.Keys(topics)))
	for _, k := range waiting {
		cur := kgo.NewOffset().AtCommitted()
		if o, found := group.Lookup(k.topic, k.part); found && o.Err == nil && o.At >= 0 {
			cur = kgo.NewOffset().At(o.At)
		}
		off, ok, err := int64(0), false, idErr
		if err == nil {
			off, ok, err = s.claim(ctx, k.topic, ids[k.topic], k.part, cur)
		}
		if errors.Is(err, source.ErrRecreated) {
			s.fail(err)
			return
		}
		if err != nil {
			s.mu.Lock()
			s.unclaimed[k] = err
			s.mu.Unlock()
			continue
		}
		if !ok {
			continue // no start resolved: tried again next time
		}
		s.claimedAt(k, off, ok)
		s.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{k.topic: {k.part: {Epoch: -1, Offset: off}}})
		s.cl.ResumeFetchPartitions(map[string][]int32{k.topic: {k.part}})
		s.log.Info("a partition's state in the lake was claimed after all: it lands on", "topic", k.topic, "partition", k.part, "offset", off)
	}
	s.checkCaughtUp()
}

// Ready reports whether a broker answers and every assigned partition's
// state was claimed.
func (s *Source) Ready(ctx context.Context) error {
	if err := s.Ping(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for k, err := range s.unclaimed {
		errs = append(errs, fmt.Errorf("%s partition %d cannot be claimed: %w", k.topic, k.part, err))
	}
	return errors.Join(errs...)
}

// Unclaimed returns the number of assigned partitions waiting to be
// claimed.
func (s *Source) Unclaimed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.unclaimed)
}

// startOffset resolves where a partition with no state in the lake
// starts: the group's committed offset when the client found one (cur is
// exact), else the log's first or end offset, as Config.Start says.
func (s *Source) startOffset(ctx context.Context, topic string, part int32, cur kgo.Offset) (int64, error) {
	if at := cur.EpochOffset().Offset; at >= 0 {
		return at, nil
	}
	adm := kadm.NewClient(s.cl)
	list := adm.ListStartOffsets
	if s.cfg.Start == "latest" {
		list = adm.ListEndOffsets
	}
	var listed kadm.ListedOffsets
	if err := retrying(ctx, func() (err error) {
		listed, err = list(ctx, topic)
		if err == nil {
			err = listed.Error()
		}
		return err
	}); err != nil {
		return 0, fmt.Errorf("%s partition %d: listing its %s offset: %w", topic, part, s.cfg.Start, err)
	}
	o, ok := listed.Lookup(topic, part)
	if !ok {
		return 0, fmt.Errorf("%s partition %d: no %s offset listed", topic, part, s.cfg.Start)
	}
	return o.Offset, nil
}

// release stops the deliverers of the given partitions, waits for their
// in-flight blocks and forgets them; it returns what it released.
func (s *Source) release(parts map[string][]int32) []tp {
	s.mu.Lock()
	var gone []*partition
	for topic, ps := range parts {
		for _, part := range ps {
			k := tp{topic, part}
			_, waiting := s.unclaimed[k]
			delete(s.unclaimed, k)
			if p, ok := s.parts[k]; ok {
				delete(s.parts, k)
				close(p.stop)
				gone = append(gone, p)
				if p.paused || waiting {
					// The client keeps a pause across rebalances: a
					// partition assigned here again must be fetched.
					s.cl.ResumeFetchPartitions(map[string][]int32{topic: {part}})
				}
			}
			delete(s.resume, k)
			delete(s.claimed, k)
		}
	}
	s.mu.Unlock()
	out := make([]tp, 0, len(gone))
	for _, p := range gone {
		<-p.done
		out = append(out, p.tp)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].topic != out[j].topic {
			return out[i].topic < out[j].topic
		}
		return out[i].part < out[j].part
	})
	return out
}

// onRevoked hands revoked partitions over: their files are written and
// their durable offsets committed before the group moves them.
func (s *Source) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	if s.client(ctx) != nil {
		return // the client is closing before it was set: nothing was assigned
	}
	gone := s.release(revoked)
	if len(gone) == 0 {
		return
	}
	s.mu.Lock()
	s.counts.Rebalances++
	s.counts.Revoked += int64(len(gone))
	s.mu.Unlock()
	fctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, k := range gone {
		if err := s.hooks.Flush(fctx, k.topic, k.part); err != nil {
			s.log.Error("writing a revoked partition's files failed; its next owner reads them again",
				"topic", k.topic, "partition", k.part, "err", err)
			s.hooks.Drop(k.topic, k.part)
		}
	}
	if err := s.commit(fctx, gone); err != nil {
		s.log.Warn("committing revoked partitions failed; their next owner rewrites from the last commit", "err", err)
	}
	for _, k := range gone {
		s.hooks.Drop(k.topic, k.part)
	}
	s.log.Info("partitions revoked", "count", len(gone))
}

// onLost drops partitions taken away without a handover: nothing of them
// is written or committed by this member any more.
func (s *Source) onLost(ctx context.Context, _ *kgo.Client, lost map[string][]int32) {
	if s.client(ctx) != nil {
		return
	}
	gone := s.release(lost)
	if len(gone) > 0 {
		s.mu.Lock()
		s.counts.Rebalances++
		s.counts.Lost += int64(len(gone))
		s.mu.Unlock()
	}
	for _, k := range gone {
		s.hooks.Drop(k.topic, k.part)
	}
	if len(gone) > 0 {
		s.log.Warn("partitions lost; their next owner reads them again from the last commit", "partitions", len(gone))
	}
}

// commitLoop commits durable offsets every CommitInterval.
func (s *Source) commitLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			if err := s.commit(s.ctx, nil); err != nil && s.ctx.Err() == nil {
				s.logOnce("committing offsets failed; retrying", "err", err)
			}
			s.reclaim(s.ctx)
			if s.cfg.UntilCaughtUp {
				if err := s.refreshGroupDone(s.ctx); err != nil && s.ctx.Err() == nil {
					s.logOnce("reading the group's offsets failed; retrying", "err", err)
				}
			}
		}
	}
}

// commit commits the durable offsets of the given partitions (nil: every
// assigned one) that advanced since the last commit.
func (s *Source) commit(ctx context.Context, only []tp) error {
	if only == nil {
		s.mu.Lock()
		for k := range s.parts {
			only = append(only, k)
		}
		s.mu.Unlock()
	}
	// Durable waits for the partition's lock, which a write waiting out a
	// store outage holds: it is asked without s.mu, which the metrics and
	// probes need meanwhile.
	durable := make([]struct {
		off int64
		ok  bool
	}, len(only))
	for i, k := range only {
		durable[i].off, durable[i].ok = s.hooks.Durable(k.topic, k.part)
	}
	offsets := map[string]map[int32]kgo.EpochOffset{}
	s.mu.Lock()
	for i, k := range only {
		off, ok := durable[i].off, durable[i].ok
		if r, claimed := s.resume[k]; claimed && (!ok || r > off) {
			off, ok = r, true
		}
		if c, done := s.committed[k]; !ok || (done && off <= c) {
			continue
		}
		if offsets[k.topic] == nil {
			offsets[k.topic] = map[int32]kgo.EpochOffset{}
		}
		offsets[k.topic][k.part] = kgo.EpochOffset{Epoch: -1, Offset: off}
	}
	s.mu.Unlock()
	if len(offsets) == 0 {
		return nil
	}
	var cerr error
	s.mu.Lock()
	cl := s.cl // set under the lock: the group may revoke before Subscribe returns
	s.mu.Unlock()
	if cl == nil {
		return errors.New("not connected")
	}
	cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			cerr = err
			return
		}
		cerr = commitError(resp)
	})
	if cerr != nil {
		return cerr
	}
	now := time.Now()
	s.mu.Lock()
	for topic, ps := range offsets {
		for part, o := range ps {
			s.committed[tp{topic, part}] = o.Offset
			s.commitAt[tp{topic, part}] = now
		}
	}
	s.mu.Unlock()
	return nil
}

// commitError returns the first partition error of a commit response.
func commitError(resp *kmsg.OffsetCommitResponse) error {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("%s partition %d: %w", t.Topic, p.Partition, err)
			}
		}
	}
	return nil
}

// Backlog returns the records not yet landed in the assigned partitions,
// as of the last fetches.
func (s *Source) Backlog() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, p := range s.parts {
		if p.next >= 0 && p.hwm > p.next {
			n += p.hwm - p.next
		}
	}
	return n
}

// Counters count the group's events as this member saw them.
type Counters struct {
	// Rebalances counts the changes of this member's assignment.
	Rebalances int64
	// Assigned, Revoked and Lost count partitions given to this member,
	// handed over by it, and taken from it without a handover; Claimed
	// counts the partitions whose state in the lake it took over.
	Assigned, Revoked, Lost, Claimed int64
}

// Counters returns the group's events so far.
func (s *Source) Counters() Counters {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts
}

// PartitionStatus is an assigned partition's progress.
type PartitionStatus struct {
	Topic     string
	Partition int32
	// End is the partition's end offset (high watermark) at the last
	// fetch, -1 before one.
	End int64
	// Committed is the offset committed for the group, or where the lake's
	// state resumes the partition before a commit; -1 when neither is
	// known. CommittedAt is when this member last committed it.
	Committed   int64
	CommittedAt time.Time
}

// Lag returns the records between the end offset and the committed one,
// -1 when either is unknown.
func (p PartitionStatus) Lag() int64 {
	if p.End < 0 || p.Committed < 0 {
		return -1
	}
	return max(p.End-p.Committed, 0)
}

// Partitions returns the progress of every assigned partition, in topic
// and partition order.
func (s *Source) Partitions() []PartitionStatus {
	s.mu.Lock()
	out := make([]PartitionStatus, 0, len(s.parts))
	for k, p := range s.parts {
		st := PartitionStatus{Topic: k.topic, Partition: k.part, End: -1, Committed: -1, CommittedAt: s.commitAt[k]}
		if p.hwm > 0 || p.next >= 0 {
			st.End = max(p.hwm, p.next)
		}
		if c, ok := s.committed[k]; ok {
			st.Committed = c
		} else if r, ok := s.resume[k]; ok {
			st.Committed = r
		}
		out = append(out, st)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// Ping reports whether a broker answers (a metadata request).
func (s *Source) Ping(ctx context.Context) error {
	s.mu.Lock()
	cl := s.cl
	s.mu.Unlock()
	if cl == nil {
		return errors.New("not connected")
	}
	return cl.Ping(ctx)
}

// Unbounded reports whether the source follows its topics with no end
// (without UntilCaughtUp).
func (s *Source) Unbounded() bool { return !s.cfg.UntilCaughtUp }

// Err returns the error that stopped the source early.
func (s *Source) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Drained is closed, with UntilCaughtUp, once every assigned partition was
// landed up to its end offset at start; otherwise only on failure.
func (s *Source) Drained() <-chan struct{} { return s.drained }

// Close stops fetching and delivering and waits for the goroutines; the
// group membership is kept for Finish.
func (s *Source) Close() error {
	s.mu.Lock()
	subscribed := s.cancel != nil
	s.closed = true
	s.mu.Unlock()
	if subscribed {
		s.cancel()
		<-s.stopped
	}
	return nil
}

// Finish commits the final durable offsets and leaves the group. Leaving
// revokes every partition; they were written by the pipeline's last flush.
func (s *Source) Finish(ctx context.Context) error {
	if s.cl == nil {
		return nil
	}
	err := s.commit(ctx, nil)
	if err != nil {
		err = fmt.Errorf("kafka source: final commit: %w", err)
	}
	s.cl.Close()
	return err
}
