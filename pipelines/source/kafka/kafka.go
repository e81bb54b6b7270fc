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
//
// # Files
//
//   - kafka.go: the Source, its subscription and its end (Close, Finish),
//     its status (Backlog, Partitions, Ready);
//   - state.go: what is known of each partition, in one struct: its
//     commits and target for the run, its deliverer and claim while
//     assigned;
//   - group.go: the group's callbacks: a partition assigned is claimed in
//     the lake (its topic's ID, its start), one revoked is handed over,
//     one lost dropped; partitions that cannot be claimed wait alone;
//   - delivery.go: polling, each partition's queue and its deliverer;
//   - commits.go: the group's offsets set to what is durable;
//   - catchup.go: --until-caught-up: the end offsets at start and when
//     every partition reached them.
package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/cdclake/cdclake/pipelines/source"
	"github.com/cenkalti/backoff/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
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

	mu sync.Mutex
	// parts holds every partition's state (state.go).
	parts map[tp]*partState
	// counts are the group's events (Counters).
	counts Counters
	// loaded is set once the targets and starts are known (UntilCaughtUp):
	// the group may assign partitions before (the client joins while they
	// are listed).
	loaded bool
	// beforeLoad, when set (tests), runs before the targets are listed.
	beforeLoad func()
	assigned   bool
	err        error
	closed     bool
	// stopping is set once the subscription ended: no deliverer starts
	// after it, and out is closed once those running have returned.
	stopping bool
	stopped  chan struct{}
	drained  chan struct{}
	drainOne sync.Once
	lastErr  string // the last fetch or commit error logged
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
	return &Source{cfg: cfg, log: log.With("component", "kafka"), parts: map[tp]*partState{},
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
	topics := s.cfg.Topics
	if s.cfg.Regex {
		// franz-go matches an expression anywhere in a name; the topics
		// are documented, and listed for --until-caught-up, as matching
		// whole names.
		topics = make([]string, len(s.cfg.Topics))
		for i, t := range s.cfg.Topics {
			topics[i] = "^(?:" + t + ")$"
		}
	}
	opts = append(opts,
		kgo.ConsumerGroup(s.cfg.Group),
		kgo.ConsumeTopics(topics...),
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

func (s *Source) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	s.drainOne.Do(func() { close(s.drained) })
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

// Ready reports whether a broker answers and every assigned partition's
// state was claimed.
func (s *Source) Ready(ctx context.Context) error {
	if err := s.Ping(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for k, st := range s.parts {
		if st.unclaimed != nil {
			errs = append(errs, fmt.Errorf("%s partition %d cannot be claimed: %w", k.topic, k.part, st.unclaimed))
		}
	}
	return errors.Join(errs...)
}

// Unclaimed returns the number of assigned partitions waiting to be
// claimed.
func (s *Source) Unclaimed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, st := range s.parts {
		if st.unclaimed != nil {
			n++
		}
	}
	return n
}

// Backlog returns the records not yet landed in the assigned partitions,
// as of the last fetches.
func (s *Source) Backlog() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, st := range s.parts {
		if p := st.deliv; p != nil && p.next >= 0 && p.hwm > p.next {
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
	var out []PartitionStatus
	for k, ps := range s.parts {
		p := ps.deliv
		if p == nil {
			continue
		}
		st := PartitionStatus{Topic: k.topic, Partition: k.part, End: -1, Committed: -1, CommittedAt: ps.commitAt}
		if p.hwm > 0 || p.next >= 0 {
			st.End = max(p.hwm, p.next)
		}
		if ps.committed >= 0 {
			st.Committed = ps.committed
		} else if ps.resume >= 0 {
			st.Committed = ps.resume
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
