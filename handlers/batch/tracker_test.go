package batch

import (
	"testing"

	"github.com/cdclake/cdclake/sinks"
)

func TestTrackerDurable(t *testing.T) {
	tr := NewTracker()
	pos := func(off int64) sinks.Position { return sinks.Position{Source: "s", Partition: 1, Offset: off} }
	durable := func(want int64, wantOK bool) {
		t.Helper()
		got, ok := tr.Durable("s", 1)
		if got != want || ok != wantOK {
			t.Fatalf("Durable = %d, %v, want %d, %v", got, ok, want, wantOK)
		}
	}
	durable(0, false)

	// Messages that need no landing are durable as soon as seen.
	tr.seen(pos(0))
	tr.seen(pos(1))
	durable(2, true)

	// An open buffer holds everything from its first offset on.
	b1, b2 := &buffer{src: pos(2)}, &buffer{src: pos(4)}
	tr.open(pos(2), b1)
	tr.seen(pos(2))
	tr.seen(pos(3))
	tr.open(pos(4), b2)
	tr.seen(pos(4))
	tr.seen(pos(5))
	durable(2, true)

	// Closing the later buffer first does not move past the earlier one.
	tr.close("s", 1, b2)
	durable(2, true)
	tr.close("s", 1, b1)
	durable(6, true)

	// Offsets seen out of order never move the position back.
	tr.seen(pos(3))
	durable(6, true)

	// Partitions and sources are independent.
	if _, ok := tr.Durable("s", 2); ok {
		t.Errorf("partition 2 was never seen")
	}
	if _, ok := tr.Durable("t", 1); ok {
		t.Errorf("source t was never seen")
	}
	other := sinks.Position{Source: "s", Partition: 2, Offset: 100}
	b3 := &buffer{src: other}
	tr.open(other, b3)
	tr.seen(other)
	if got, _ := tr.Durable("s", 2); got != 100 {
		t.Errorf("partition 2 durable %d, want 100", got)
	}
	durable(6, true)
	// A holder opened twice keeps its first offset.
	dl := new(int)
	tr.open(pos(6), dl)
	tr.open(pos(8), dl)
	tr.seen(pos(8))
	durable(6, true)
	tr.close("s", 1, dl)
	durable(9, true)
	// Closing an unknown buffer is harmless.
	tr.close("s", 1, &buffer{src: pos(99)})
	durable(9, true)
}
