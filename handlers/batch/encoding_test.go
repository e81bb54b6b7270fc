package batch

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/lake"
)

// plainSink hides the lake sink's Encoding: files are encoded when they
// are written.
type plainSink struct{ sinks.Sink }

// TestEncodedWhileOpen lands the same changes into the lake sink with
// files encoded while they are open (a run of rows every encodeEvery)
// and encoded when written: the same objects, byte for byte, with
// rejected rows (the first one too), files written in line or beside,
// and under a memory bound that spills.
func TestEncodedWhileOpen(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"in line", Config{}},
		{"beside", Config{Writers: 2}},
		{"spilling", Config{Writers: 2, MaxBufferedBytes: 2 << 20}},
	} {
		t.Run(c.name, func(t *testing.T) {
			encoded := landLake(t, c.cfg, true)
			plain := landLake(t, c.cfg, false)
			if !slices.Equal(sortedKeys(encoded), sortedKeys(plain)) {
				t.Fatalf("objects differ:\nencoded %v\nplain   %v", sortedKeys(encoded), sortedKeys(plain))
			}
			for k, v := range plain {
				if !bytes.Equal(encoded[k], v) {
					t.Errorf("%s: %d bytes encoded while open, %d when written", k, len(encoded[k]), len(v))
				}
			}
			if len(plain) != 3 {
				t.Errorf("%d objects, want 3: %v", len(plain), sortedKeys(plain))
			}
		})
	}
}

// landLake lands 3 tables' rows (one of them 20,000, some rejected) into
// a mem:// lake and returns its objects.
func landLake(t *testing.T, cfg Config, encode bool) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	bucket, err := lake.OpenBucket(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var sink sinks.Sink = lake.New(bucket, mem)
	if !encode {
		sink = plainSink{sink}
	}
	path, err := ParseTemplate("{table}")
	if err != nil {
		t.Fatal(err)
	}
	tc := &TableConfig{Path: path, MaxRows: 1 << 30, MaxBytes: 1 << 40,
		Write: sinks.WriteOptions{Compression: "zstd", RowGroupRows: 12000}}
	if cfg.MaxBufferedBytes == 0 {
		cfg.MaxBufferedBytes = 1 << 40
	}
	cfg.MaxOpenFiles = 100
	b, err := New(cfg, func(string) *TableConfig { return tc }, sink, mem, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	b.now = func() time.Time { return day }
	defer b.Close()
	big := table("db.big", 1, schema.LayoutImages, textCols())
	small := []*schema.Table{table("db.a", 1, schema.LayoutImages, cols("v")), table("db.b", 1, schema.LayoutImages, cols("v"))}
	for i := range 20000 {
		after := fmt.Sprintf(`{"id":%d,"s":"order %d of customer %d"}`, i, i*7919%100003, i%97)
		if i == 0 || i%4999 == 0 {
			after = `{"id":"not a number"}`
		}
		_ = b.Add(ctx, insert(t, big.Name, after), big, at(int64(2*i)), 64)
		if i%10 == 0 {
			s := small[(i/10)%2]
			_ = b.Add(ctx, insert(t, s.Name, fmt.Sprintf(`{"id":%d,"v":%d}`, i, i%100)), s, at(int64(2*i+1)), 24)
		}
	}
	if err := b.FlushAll(ctx); err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	it := bucket.List(nil)
	for {
		obj, err := it.Next(ctx)
		if err != nil {
			break
		}
		data, err := bucket.ReadAll(ctx, obj.Key)
		if err != nil {
			t.Fatal(err)
		}
		out[obj.Key] = data
	}
	return out
}

func sortedKeys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
