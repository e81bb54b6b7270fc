package pipelines

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cdclake/cdclake/handlers/batch"
	"github.com/cdclake/cdclake/internal/syncbuf"
	"github.com/cdclake/cdclake/sinks/state"
)

// TestCommitterLeavesFencedPartitions: the files waiting for their commit
// of a partition another instance claimed are not committed by this one
// (their new owner commits them), each partition's claim is asked once a
// round, and the partition given up is logged at WARN.
func TestCommitterLeavesFencedPartitions(t *testing.T) {
	var logged syncbuf.Buffer
	c := newCommitter(nil, nil, slog.New(slog.NewTextHandler(&logged, nil)), time.Second, time.Second)
	asked := map[int32]int{}
	c.owns = func(_ context.Context, source string, part int32) error {
		asked[part]++
		if part == 1 {
			return fmt.Errorf("%s partition %d: claimed again: %w", source, part, state.ErrFenced)
		}
		if part == 2 {
			return fmt.Errorf("the store is down") // not known to be fenced: committed
		}
		return nil
	}
	var files []*batch.Committing
	for i, p := range []int32{0, 1, 2, 1, 0} {
		f := &batch.Committing{Key: fmt.Sprintf("t%d/f%d.parquet", i%2, i), Table: fmt.Sprintf("t%d", i%2), Source: "topic", Partition: p}
		c.add(f)
		files = append(files, f)
	}
	c.mu.Lock()
	take := c.take(func(*batch.Committing) bool { return true })
	c.mu.Unlock()
	got := c.owned(context.Background(), take)
	var kept []string
	for _, table := range []string{"t0", "t1"} {
		for _, f := range got[table] {
			kept = append(kept, f.Key)
		}
	}
	if want := "t0/f0.parquet t0/f2.parquet t0/f4.parquet"; strings.Join(kept, " ") != want {
		t.Errorf("committed %v, want %s", kept, want)
	}
	if asked[0] != 1 || asked[1] != 1 || asked[2] != 1 {
		t.Errorf("claims asked %v, want once per partition", asked)
	}
	for _, f := range files {
		if c.held[f] != (f.Partition != 1) {
			t.Errorf("%s of partition %d: held %v", f.Key, f.Partition, c.held[f])
		}
	}
	if log := logged.String(); strings.Count(log, "level=WARN") != 1 || !strings.Contains(log, "partition=1") {
		t.Errorf("logged:\n%s", log)
	}
}
