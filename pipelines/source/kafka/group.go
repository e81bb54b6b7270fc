// The consumer group's callbacks: claiming an assigned partition in the
// lake, handing a revoked one over, dropping a lost one.

package kafka

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/cdclake/cdclake/pipelines/source"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func (s *Source) onAssigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	s.mu.Lock()
	var names []string
	for topic, parts := range assigned {
		for _, part := range parts {
			k := tp{topic, part}
			st := s.state(k)
			if st.deliv != nil {
				continue
			}
			p := &partition{tp: k, next: -1, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
			st.deliv = p
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
	st := s.state(k)
	st.claimed = true
	st.unclaimed, st.failedClaims = nil, 0
	s.counts.Claimed++
	if ok {
		// The group learns the lake's offset with the next commit, and
		// reading starts there.
		st.resume = off
		st.committed = -1
		if st.bounded {
			st.start = off
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
	s.state(k).unclaimed = err
	s.state(k).failedClaims++
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
	for k, st := range s.parts {
		switch {
		case st.unclaimed == nil:
		case st.deliv != nil:
			waiting = append(waiting, k)
		default:
			st.unclaimed = nil
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
			s.state(k).unclaimed = err
			s.state(k).failedClaims++
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
			st := s.state(tp{topic, part})
			if p := st.deliv; p != nil {
				close(p.stop)
				gone = append(gone, p)
				if p.paused || st.unclaimed != nil {
					// The client keeps a pause across rebalances: a
					// partition assigned here again must be fetched.
					s.cl.ResumeFetchPartitions(map[string][]int32{topic: {part}})
				}
			}
			st.release()
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
