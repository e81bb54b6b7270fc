package pipelines

import (
	"context"
	"slices"
	"testing"

	"github.com/cdclake/cdclake/sinks/state"
	"gocloud.dev/blob/memblob"
)

// TestLandedOffsets: a claim takes a written file's offsets from its
// state where the state records them whole, reads every other file (a
// pending one always, whoever wrote it: the state's cut is the recording
// instance's, the file the first creator's), and returns the pending cuts
// whose files are not there, to be repeated.
func TestLandedOffsets(t *testing.T) {
	ctx := context.Background()
	bucket := memblob.OpenBucket(nil)
	defer bucket.Close()
	for key, offs := range map[string][]int64{"read": {20, 22}, "pending": {30, 31}} {
		if err := writeOffsets(ctx, bucket, key, offs...); err != nil {
			t.Fatal(err)
		}
	}
	missing := state.Cut{Key: "gone", First: 40, Last: 41, Rows: 2}
	st := &state.Partition{Committed: 10, Written: []state.Cut{
		{Key: "recorded, not there", First: 10, Last: 13, Rows: 3, Runs: [][2]int64{{10, 11}, {13, 13}}},
		{Key: "read", First: 20, Last: 22, Rows: 2},
		// Runs that do not hold the rows are not taken: the file is read.
		{Key: "read", First: 20, Last: 22, Rows: 2, Runs: [][2]int64{{20, 21}, {22, 23}}},
	}, Pending: []state.Cut{
		{Key: "pending", First: 30, Last: 32, Rows: 3, Runs: [][2]int64{{30, 32}}},
		missing,
	}}
	landed, cuts, err := landedOffsets(ctx, bucket, st)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(landed)
	if want := []int64{10, 11, 13, 20, 20, 22, 22, 30, 31}; !slices.Equal(landed, want) {
		t.Errorf("landed %v, want %v", landed, want)
	}
	if len(cuts) != 1 || cuts[0].Key != missing.Key {
		t.Errorf("cuts to repeat %+v, want the missing pending file's", cuts)
	}
}
