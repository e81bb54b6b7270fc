// Catching up (--until-caught-up): the end offsets read at start, and when
// every partition has reached them.

package kafka

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// loadTargets records, for UntilCaughtUp, each partition's end offset and
// where the group starts reading it.
func (s *Source) loadTargets(ctx context.Context) error {
	if s.beforeLoad != nil {
		s.beforeLoad()
	}
	adm := kadm.NewClient(s.cl)
	topics, err := s.targetTopics(ctx, adm)
	if err != nil {
		return err
	}
	if len(topics) == 0 {
		s.mu.Lock()
		s.loaded = true
		s.mu.Unlock()
		return nil
	}
	ends, err := endOffsets(ctx, adm, topics)
	if err != nil {
		return err
	}
	startAt, committed, err := s.startOffsets(ctx, adm, topics, ends)
	if err != nil {
		return err
	}
	s.recordTargets(ends, startAt, committed)
	return nil
}

// targetTopics returns the topics to read: the configured ones, or with
// Regex the existing topics that one of the expressions matches whole.
func (s *Source) targetTopics(ctx context.Context, adm *kadm.Client) ([]string, error) {
	if !s.cfg.Regex {
		return s.cfg.Topics, nil
	}
	all, err := adm.ListTopics(ctx)
	if err != nil {
		return nil, err
	}
	var topics []string
	for _, name := range all.Names() {
		for _, expr := range s.cfg.Topics {
			if ok, _ := regexp.MatchString("^(?:"+expr+")$", name); ok {
				topics = append(topics, name)
				break
			}
		}
	}
	return topics, nil
}

// endOffsets lists the end offset of every partition of topics. A topic
// just created can be missing from the first answers: it asks again, for
// about five seconds, until every topic has its partitions, rather than
// take an empty answer for "nothing to read".
func endOffsets(ctx context.Context, adm *kadm.Client, topics []string) (kadm.ListedOffsets, error) {
	for attempt := 0; ; attempt++ {
		ends, err := adm.ListEndOffsets(ctx, topics...)
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
			return ends, nil
		}
		if attempt == 20 {
			if err == nil {
				err = fmt.Errorf("no partitions listed for every topic of %v", topics)
			}
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// startOffsets lists where a partition of topics without a state in the
// lake starts: the group's committed offset and, for one without, the
// log's start offset when Start is "earliest", else its end in ends.
func (s *Source) startOffsets(ctx context.Context, adm *kadm.Client, topics []string, ends kadm.ListedOffsets) (kadm.ListedOffsets, kadm.OffsetResponses, error) {
	startAt := ends
	if s.cfg.Start == "earliest" {
		if err := retrying(ctx, func() (err error) {
			startAt, err = adm.ListStartOffsets(ctx, topics...)
			return err
		}); err != nil {
			return nil, nil, err
		}
	}
	var committed kadm.OffsetResponses
	if err := retrying(ctx, func() (err error) {
		committed, err = groupOffsets(ctx, adm, s.cfg.Group)
		return err
	}); err != nil {
		return nil, nil, err
	}
	return startAt, committed, nil
}

// recordTargets sets, under the lock, each partition's target, its end
// offset in ends, and its start: where the lake's state says for one
// claimed already, else the group's committed offset, else startAt's. It
// then marks the targets loaded and logs the backlog.
func (s *Source) recordTargets(ends, startAt kadm.ListedOffsets, committed kadm.OffsetResponses) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var backlog int64
	targets := 0
	ends.Each(func(o kadm.ListedOffset) {
		st := s.state(tp{o.Topic, o.Partition})
		st.bounded, st.target = true, o.Offset
		if st.resume >= 0 {
			st.start = st.resume // claimed already: the lake's state says
		} else if c, ok := committed.Lookup(o.Topic, o.Partition); ok && c.Err == nil && c.At >= 0 {
			st.start = c.At
		} else if so, ok := startAt.Lookup(o.Topic, o.Partition); ok && so.Err == nil {
			st.start = so.Offset
		}
		if n := o.Offset - st.start; n > 0 {
			backlog += n
		}
		targets++
	})
	s.loaded = true
	s.log.Info("reading up to the end offsets", "partitions", targets, "records", backlog)
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
	for _, st := range s.parts {
		if !st.bounded {
			continue
		}
		p := st.deliv
		if p == nil {
			if st.start >= st.target || st.groupDone {
				continue
			}
			done = false
			break
		}
		if st.unclaimed != nil {
			if st.failedClaims < 2 {
				// Not claimed again yet (reclaim): the assignment's
				// claim may have had no time left.
				done = false
				break
			}
			continue // ends the run with its error, below
		}
		if !st.claimed {
			done = false
			break
		}
		if st.start >= st.target {
			continue
		}
		if len(p.queue) > 0 || p.next < st.target {
			done = false
			break
		}
	}
	var unclaimed []error
	if done {
		for k, st := range s.parts {
			if st.unclaimed != nil {
				unclaimed = append(unclaimed, fmt.Errorf("%s partition %d: its state in the lake cannot be claimed, so it was not read: %w",
					k.topic, k.part, st.unclaimed))
			}
		}
	}
	s.mu.Unlock()
	if len(unclaimed) > 0 {
		s.fail(errors.Join(unclaimed...))
		return
	}
	if done {
		s.drainOne.Do(func() {
			s.log.Debug("caught up")
			close(s.drained)
		})
	}
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
	for k, st := range s.parts {
		if o, ok := offs.Lookup(k.topic, k.part); st.bounded && ok && o.Err == nil && o.At >= st.target {
			st.groupDone = true
		}
	}
	s.mu.Unlock()
	s.checkCaughtUp()
	return nil
}
