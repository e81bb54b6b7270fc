package batch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/cdclake/cdclake/sinks"
)

// gateSink holds each Write until the test opens its gate, so that files
// are in flight while the batcher goes on.
type gateSink struct {
	mu      sync.Mutex
	started chan string // a file's key when its Write begins
	gates   map[string]chan error
	stored  []string
}

func newGateSink() *gateSink {
	return &gateSink{started: make(chan string, 100), gates: map[string]chan error{}}
}

func (s *gateSink) gate(key string) chan error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.gates[key]
	if g == nil {
		g = make(chan error, 1)
		s.gates[key] = g
	}
	return g
}

func (s *gateSink) Write(ctx context.Context, f *sinks.File) (int64, error) {
	s.started <- f.Key
	if err := <-s.gate(f.Key); err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.stored = append(s.stored, f.Key)
	s.mu.Unlock()
	return int64(f.Rows), nil
}

// release lets the Write of key end with err.
func (s *gateSink) release(key string, err error) { s.gate(key) <- err }

func (s *gateSink) next(t *testing.T) string {
	t.Helper()
	select {
	case k := <-s.started:
		return k
	case <-time.After(10 * time.Second):
		t.Fatal("no write began")
		return ""
	}
}

func newWriters(t *testing.T, cfg Config, maxRows int, sink sinks.Sink) *Batcher {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	path, err := ParseTemplate("{table}/date={date}")
	if err != nil {
		t.Fatal(err)
	}
	tc := &TableConfig{Path: path, MaxRows: maxRows, MaxBytes: 1 << 40, Write: sinks.WriteOptions{Compression: "snappy", RowGroupRows: 100}}
	if cfg.MaxOpenFiles == 0 {
		cfg.MaxOpenFiles = 100
	}
	b, err := New(cfg, func(string) *TableConfig { return tc }, sink, mem, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.Close()
		mem.AssertSize(t, 0)
	})
	return b
}

// TestWritersBeside checks files written beside the appends: the same
// files as written in line, the rows of a file in flight not durable until
// it is stored, at most Writers writes at once, and FlushAll returning
// once every file is stored.
func TestWritersBeside(t *testing.T) {
	v1 := table("db.t", 1, schema.LayoutImages, cols("v"))
	ctx := context.Background()
	add := func(b *Batcher, off int64) error {
		return b.Add(ctx, insert(t, "db.t", fmt.Sprintf(`{"id":%d,"v":1}`, off)), v1, at(off), 10)
	}

	// In line, for the expected keys.
	inline := newHarness(t, Config{}, TableConfig{MaxRows: 2})
	for off := range int64(7) {
		inline.add(insert(t, "db.t", fmt.Sprintf(`{"id":%d,"v":1}`, off)), v1, at(off), 10)
	}
	if err := inline.b.FlushAll(ctx); err != nil {
		t.Fatal(err)
	}

	sink := newGateSink()
	b := newWriters(t, Config{MaxBufferedBytes: 1 << 30, Writers: 2}, 2, sink)
	for off := range int64(4) {
		if err := add(b, off); err != nil {
			t.Fatal(err)
		}
	}
	// Writes may begin in either order; the file of offsets 0-1 is key0.
	dir := "db.t/date=2024-01-31"
	key0, key2 := key(dir, 0), key(dir, 2)
	if started := []string{sink.next(t), sink.next(t)}; !slices.Contains(started, key0) || !slices.Contains(started, key2) {
		t.Fatalf("writes began for %v, want %s and %s", started, key0, key2)
	}
	if d, _ := b.Durable("orders", 0); d != 0 {
		t.Errorf("durable %d while the files of offsets 0-3 are in flight, want 0", d)
	}
	// A third file waits for a writer.
	third := make(chan error, 1)
	go func() {
		err := add(b, 4)
		if err == nil {
			err = add(b, 5)
		}
		third <- err
	}()
	select {
	case <-third:
		t.Fatal("a third file was handed over while two were being written")
	case <-time.After(100 * time.Millisecond):
	}
	sink.release(key2, nil)
	if err := <-third; err != nil {
		t.Fatal(err)
	}
	if d, _ := b.Durable("orders", 0); d != 0 {
		t.Errorf("durable %d with the file of offset 0 still in flight, want 0", d)
	}
	sink.release(key0, nil)
	thirdKey := sink.next(t)
	sink.release(thirdKey, nil)
	if err := add(b, 6); err != nil {
		t.Fatal(err)
	}
	flushed := make(chan error, 1)
	go func() { flushed <- b.FlushAll(ctx) }()
	last := sink.next(t)
	select {
	case <-flushed:
		t.Fatal("FlushAll returned before its file was stored")
	case <-time.After(100 * time.Millisecond):
	}
	sink.release(last, nil)
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	if d, _ := b.Durable("orders", 0); d != 7 {
		t.Errorf("durable %d after FlushAll, want 7", d)
	}
	got := slices.Sorted(slices.Values(sink.stored))
	want := slices.Sorted(slices.Values(inline.keys()))
	if !slices.Equal(got, want) {
		t.Errorf("files written beside:\n%v\nin line:\n%v", got, want)
	}
	if st := b.Stats()["db.t"]; st.Rows != 7 || st.Files != 4 {
		t.Errorf("stats %+v, want 7 rows in 4 files", st)
	}
}

// TestWriterFailure checks that a failed write beside the appends fails
// the calls after it and FlushAll.
func TestWriterFailure(t *testing.T) {
	v1 := table("db.t", 1, schema.LayoutImages, cols("v"))
	ctx := context.Background()
	sink := newGateSink()
	b := newWriters(t, Config{MaxBufferedBytes: 1 << 30, Writers: 1}, 1, sink)
	if err := b.Add(ctx, insert(t, "db.t", `{"id":1,"v":1}`), v1, at(0), 10); err != nil {
		t.Fatal(err)
	}
	broken := errors.New("store down")
	sink.release(sink.next(t), broken)
	if err := b.FlushAll(ctx); !errors.Is(err, broken) {
		t.Fatalf("FlushAll after a failed write: %v, want %v", err, broken)
	}
	if err := b.Add(ctx, insert(t, "db.t", `{"id":2,"v":1}`), v1, at(1), 10); !errors.Is(err, broken) {
		t.Fatalf("Add after a failed write: %v, want %v", err, broken)
	}
	if d, _ := b.Durable("orders", 0); d != 0 {
		t.Errorf("durable %d after the only file failed, want 0", d)
	}
}

// TestWritersMemoryBound checks that files in flight count against the
// memory bound: an Add waits while open and in-flight files together
// exceed it.
func TestWritersMemoryBound(t *testing.T) {
	v1 := table("db.t", 1, schema.LayoutImages, cols("v"))
	ctx := context.Background()
	sink := newGateSink()
	b := newWriters(t, Config{MaxBufferedBytes: 1 << 30, Writers: 4}, 1, sink)
	if err := b.Add(ctx, insert(t, "db.t", `{"id":1,"v":1}`), v1, at(0), 60); err != nil {
		t.Fatal(err)
	}
	first := sink.next(t)
	// One file in flight; a second of the same size exceeds the bound.
	one := b.inflight.Load()
	setBound(b, one+one/2)
	done := make(chan error, 1)
	go func() { done <- b.Add(ctx, insert(t, "db.t", `{"id":2,"v":1}`), v1, at(1), 60) }()
	second := sink.next(t)
	select {
	case <-done:
		t.Fatalf("Add returned with %d bytes in flight and a bound of %d", 2*one, one+one/2)
	case <-time.After(100 * time.Millisecond):
	}
	sink.release(first, nil)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	sink.release(second, nil)
	if err := b.FlushAll(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestCommittedFilesHoldTheirOffsets: a written file of a table committed
// to a table format is handed to Config.Commit, and its first offset counts
// as not durable (Durable, TableDurable) until Release; files of other
// tables are not handed over. (The pipeline's tests cover the writer
// pool's path.)
func TestCommittedFilesHoldTheirOffsets(t *testing.T) {
	var handed []*Committing
	h := newHarness(t, Config{Commit: func(c *Committing) { handed = append(handed, c) }}, TableConfig{MaxRows: 10})
	path, err := ParseTemplate("{table}/date={date}")
	must(t, err)
	h.tc["db.lake"] = &TableConfig{MaxRows: 10, MaxBytes: 1 << 40, Path: path, Commit: true}
	lake := table("db.lake", 1, schema.LayoutImages, textCols())
	plain := table("db.plain", 1, schema.LayoutImages, textCols())
	for off := range int64(30) {
		tb := lake
		if off >= 20 {
			tb = plain
		}
		h.add(insert(t, tb.Name, fmt.Sprintf(`{"id":%d,"s":"x"}`, off)), tb, at(off), 10)
	}
	must(t, h.b.FlushAll(context.Background()))
	if len(handed) != 2 || handed[0].Table != "db.lake" || handed[0].First != 0 || handed[1].First != 10 {
		t.Fatalf("handed %+v, want the two files of db.lake", handed)
	}
	if d, _ := h.b.Durable("orders", 0); d != 0 {
		t.Errorf("durable %d with both files held, want 0", d)
	}
	if d, _ := h.b.TableDurable("orders", 0, "db.lake", map[any]bool{handed[0]: true}); d != 10 {
		t.Errorf("db.lake durable without the first file's hold %d, want 10", d)
	}
	if d, _ := h.b.TableDurable("orders", 0, "db.plain", nil); d != 30 {
		t.Errorf("db.plain durable %d, want 30: db.lake's files do not hold it", d)
	}
	h.b.Release("orders", 0, handed[0])
	h.b.Release("orders", 0, handed[1])
	if d, _ := h.b.Durable("orders", 0); d != 30 {
		t.Errorf("durable %d once both are committed, want 30", d)
	}
}
