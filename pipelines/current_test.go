package pipelines_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/sinks/current"
	"github.com/cdclake/cdclake/sinks/lake"
	"gocloud.dev/blob"
)

// TestStateTableInSteps lands real PostgreSQL changes (a TRUNCATE, an
// ADD COLUMN, unchanged TOAST values among them), then builds each
// table's state three times as the landing state's offset moves past a
// third, two thirds and all of them, and once from nothing with no
// landing state: the bucket files must be the same bytes, and the
// manifest must not list the files it folded in whole.
func TestStateTableInSteps(t *testing.T) {
	var input strings.Builder
	tables := []string{"customers", "events", "orders", "audit_log"}
	for _, name := range tables {
		data, err := os.ReadFile(filepath.Join("..", "testdata", "debezium-real", "shop.public."+name+".ndjson"))
		if err != nil {
			t.Fatal(err)
		}
		input.Write(data)
	}
	lines := int64(strings.Count(input.String(), "\n"))
	bucket, _ := land(t, "defaults:\n  max_rows: 20\n", input.String())
	ctx := context.Background()
	w := lake.New(bucket, memory.DefaultAllocator)
	for _, name := range tables {
		dataset := "shop.public." + name
		for _, below := range []int64{lines / 3, 2 * lines / 3, lines + 1} {
			res, err := current.Build(ctx, bucket, w, current.Options{Dataset: dataset, Into: "steps/" + name, Key: []string{"id"},
				Buckets: 4, Committed: func(context.Context, string, int32) (int64, bool, error) { return below, true, nil }})
			if err != nil {
				t.Fatalf("%s below %d: %v", name, below, err)
			}
			t.Logf("%s below %d: %d changes from %d files, %d rows, %d buckets rewritten", name, below, res.Changes, res.Files, res.Rows, res.Buckets)
		}
		if _, err := current.Build(ctx, bucket, w, current.Options{Dataset: dataset, Into: "once/" + name, Key: []string{"id"}, Buckets: 4}); err != nil {
			t.Fatal(err)
		}
		steps, once := objects(t, bucket, "steps/"+name+"/"), objects(t, bucket, "once/"+name+"/")
		var buckets int
		for k, data := range once {
			if strings.Contains(k, "_manifest/") {
				continue
			}
			buckets++
			if !bytes.Equal(steps[k], data) {
				t.Errorf("%s: %s differs when built in steps", name, k)
			}
		}
		if buckets == 0 {
			t.Errorf("%s: no bucket files", name)
		}
		var m struct {
			Consumed []json.RawMessage `json:"consumed"`
			Partial  []string          `json:"partial"`
		}
		for k, data := range steps {
			if strings.HasSuffix(k, "00000000000000000003.json") {
				if err := json.Unmarshal(data, &m); err != nil {
					t.Fatal(err)
				}
			}
		}
		if len(m.Consumed) != 0 || len(m.Partial) != 0 {
			t.Errorf("%s: the last manifest lists %d consumed and %d partial files, want none (the offsets say it)",
				name, len(m.Consumed), len(m.Partial))
		}
	}
}

// objects reads the objects under prefix, by name relative to it.
func objects(t *testing.T, bucket *blob.Bucket, prefix string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, k := range keys(t, bucket) {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		data, err := bucket.ReadAll(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(k, prefix)] = data
	}
	return out
}
