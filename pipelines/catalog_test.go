package pipelines

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/lake"
	"gocloud.dev/blob/memblob"
)

// TestCatalogEntriesCreatedOnce: a catalog entry is created once. The same
// bytes again (a replay) are a success; a metadata record of other bytes
// at its offset is an error, but a table version recorded otherwise
// before (a route changed between the runs) is kept, and the run goes on.
func TestCatalogEntriesCreatedOnce(t *testing.T) {
	ctx := context.Background()
	bucket := memblob.OpenBucket(nil)
	defer bucket.Close()
	sink := lake.New(bucket, memory.DefaultAllocator)
	log := slog.New(slog.DiscardHandler)
	first := []catalogEntry{{key: "meta", data: []byte(`{"a":1}`)}, {key: "version", data: []byte(`{"v":1}`), version: true}}
	for range 2 {
		if err := writeCatalog(ctx, sink, first, log); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeCatalog(ctx, sink, []catalogEntry{{key: "version", data: []byte(`{"v":2}`), version: true}}, log); err != nil {
		t.Errorf("a table version recorded otherwise before: %v, want it kept", err)
	}
	if got, _ := bucket.ReadAll(ctx, "version"); string(got) != `{"v":1}` {
		t.Errorf("the version entry holds %s, want the first", got)
	}
	if err := writeCatalog(ctx, sink, []catalogEntry{{key: "meta", data: []byte(`{"a":2}`)}}, log); !errors.Is(err, sinks.ErrExists) {
		t.Errorf("a metadata record of other bytes: %v, want ErrExists", err)
	}
}
