package batch

import "github.com/cdclake/cdclake/sinks"

// Tracker knows, per source partition, the offset below which every message
// is durable: landed in a written file, dead-lettered, or needing no landing.
type Tracker struct {
	parts map[partKey]*partState
}

type partKey struct {
	source string
	part   int32
}

type partState struct {
	next int64 // highest offset seen + 1
	// pending maps what still holds messages (open buffers, unwritten
	// dead letters) to the first offset it holds.
	pending map[any]int64
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker { return &Tracker{parts: map[partKey]*partState{}} }

func (t *Tracker) state(source string, part int32) *partState {
	k := partKey{source, part}
	s := t.parts[k]
	if s == nil {
		s = &partState{next: -1, pending: map[any]int64{}}
		t.parts[k] = s
	}
	return s
}

func (t *Tracker) seen(at sinks.Position) {
	s := t.state(at.Source, at.Partition)
	if at.Offset+1 > s.next {
		s.next = at.Offset + 1
	}
}

func (t *Tracker) open(at sinks.Position, holder any) {
	s := t.state(at.Source, at.Partition)
	if _, ok := s.pending[holder]; !ok {
		s.pending[holder] = at.Offset
	}
}

func (t *Tracker) close(source string, part int32, holder any) {
	delete(t.state(source, part).pending, holder)
}

// forget drops what is known of a source partition.
func (t *Tracker) forget(source string, part int32) {
	delete(t.parts, partKey{source, part})
}

// Durable returns the offset below which every message of a source
// partition is durable, and false when nothing was seen there.
func (t *Tracker) Durable(source string, part int32) (int64, bool) {
	s, ok := t.parts[partKey{source, part}]
	if !ok || s.next < 0 {
		return 0, false
	}
	low := s.next
	for _, first := range s.pending {
		if first < low {
			low = first
		}
	}
	return low, true
}
