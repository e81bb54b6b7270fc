package batch

// partKey names a source partition.
type partKey struct {
	source string
	part   int32
}

// tracker knows, for one source partition, the offset below which every
// message is durable: landed in a written file, dead-lettered, or needing
// no landing.
type tracker struct {
	next int64 // highest offset seen + 1; -1 before the first
	// pending maps what still holds messages (open buffers, unwritten
	// dead letters) to the first offset it holds.
	pending map[any]int64
}

func newTracker() *tracker { return &tracker{next: -1, pending: map[any]int64{}} }

func (t *tracker) seen(offset int64) {
	if offset+1 > t.next {
		t.next = offset + 1
	}
}

func (t *tracker) open(offset int64, holder any) {
	if _, ok := t.pending[holder]; !ok {
		t.pending[holder] = offset
	}
}

func (t *tracker) close(holder any) { delete(t.pending, holder) }

// durable returns the offset below which every message is durable, and
// false when nothing was seen.
func (t *tracker) durable() (int64, bool) { return t.durableWithout(nil) }

// durableWithout is durable counting only the holders count reports (nil:
// all).
func (t *tracker) durableWithout(count func(holder any) bool) (int64, bool) {
	if t.next < 0 {
		return 0, false
	}
	low := t.next
	for h, first := range t.pending {
		if first < low && (count == nil || count(h)) {
			low = first
		}
	}
	return low, true
}
