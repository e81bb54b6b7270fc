package pipelines

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/sinks/lake"
	"github.com/cdclake/cdclake/sinks/sinktest"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"
)

// TestProbeCreateOnce: a store that refuses a second create passes, and
// leaves no probe; one that ignores the condition is refused.
func TestProbeCreateOnce(t *testing.T) {
	ctx := context.Background()
	good := memblob.OpenBucket(nil)
	defer good.Close()
	if err := probeCreateOnce(ctx, good, lake.New(good, memory.NewGoAllocator()), nil); err != nil {
		t.Errorf("a store that refuses a second create: %v", err)
	}
	if keys := keysOf(t, good); len(keys) != 0 {
		t.Errorf("probes left: %v", keys)
	}
	base := memblob.OpenBucket(nil)
	defer base.Close()
	careless, _ := sinktest.Faulty(base, sinktest.Faults{IgnoreConditions: true})
	defer careless.Close()
	err := probeCreateOnce(ctx, careless, lake.New(careless, memory.NewGoAllocator()), nil)
	if err == nil || !strings.Contains(err.Error(), "ignores create-once writes") {
		t.Errorf("a store that ignores If-None-Match: %v", err)
	}
}

func keysOf(t *testing.T, b *blob.Bucket) []string {
	t.Helper()
	var keys []string
	it := b.List(nil)
	for {
		obj, err := it.Next(context.Background())
		if err == io.EOF {
			return keys
		}
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, obj.Key)
	}
}
