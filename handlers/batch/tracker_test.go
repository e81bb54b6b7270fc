package batch

import "testing"

func TestTrackerDurable(t *testing.T) {
	tr := newTracker()
	durable := func(want int64, wantOK bool) {
		t.Helper()
		got, ok := tr.durable()
		if got != want || ok != wantOK {
			t.Fatalf("durable = %d, %v, want %d, %v", got, ok, want, wantOK)
		}
	}
	durable(0, false)

	// Messages that need no landing are durable as soon as seen.
	tr.seen(0)
	tr.seen(1)
	durable(2, true)

	// An open buffer holds everything from its first offset on.
	b1, b2 := &buffer{}, &buffer{}
	tr.open(2, b1)
	tr.seen(2)
	tr.seen(3)
	tr.open(4, b2)
	tr.seen(4)
	tr.seen(5)
	durable(2, true)

	// Closing the later buffer first does not move past the earlier one.
	tr.close(b2)
	durable(2, true)
	tr.close(b1)
	durable(6, true)

	// Offsets seen out of order never move the position back.
	tr.seen(3)
	durable(6, true)

	// A holder opened twice keeps its first offset.
	dl := new(int)
	tr.open(6, dl)
	tr.open(8, dl)
	tr.seen(8)
	durable(6, true)
	tr.close(dl)
	durable(9, true)
	// Closing an unknown holder is harmless.
	tr.close(&buffer{})
	durable(9, true)
}
