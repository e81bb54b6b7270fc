// Commits: the group's offsets follow what the pipeline reports durable.

package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

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
		only = s.assignedParts()
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
		st := s.state(k)
		if r := st.resume; r >= 0 && (!ok || r > off) {
			off, ok = r, true
		}
		if !ok || (st.committed >= 0 && off <= st.committed) {
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
			st := s.state(tp{topic, part})
			st.committed, st.commitAt = o.Offset, now
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
