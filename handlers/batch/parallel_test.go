package batch

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/state"
)

// lockedSink records the offsets of every file's rows, from any goroutine.
type lockedSink struct {
	mu   sync.Mutex
	rows map[partKey][]int64
	errs []string
}

func (s *lockedSink) Write(_ context.Context, f *sinks.File) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	k := partKey{f.First.Source, f.First.Partition}
	for _, p := range f.Parts {
		offsets := p.Record.Column(p.Record.Schema().FieldIndices(schema.ColOffset)[0]).(*array.Int64)
		for _, r := range p.Ranges {
			for i := r[0]; i < r[1]; i++ {
				s.rows[k] = append(s.rows[k], offsets.Value(i))
			}
			n += r[1] - r[0]
		}
	}
	if n != f.Rows {
		s.errs = append(s.errs, fmt.Sprintf("%s: Rows %d but ranges hold %d", f.Key, f.Rows, n))
	}
	return int64(n), nil
}

// orderJournal owns some partitions and fails the test when two calls for
// one partition overlap or a Done is not for the cut last intended.
type orderJournal struct {
	t     *testing.T
	owned func(part int32) bool
	busy  sync.Map // partKey → *atomic.Bool
	mu    sync.Mutex
	open  map[partKey]string
	dones atomic.Int64
}

func (j *orderJournal) Owns(_ string, part int32) bool                      { return j.owned(part) }
func (j *orderJournal) Check(context.Context, string, int32) error          { return nil }
func (j *orderJournal) Advance(context.Context, string, int32, int64) error { return nil }

func (j *orderJournal) enter(source string, part int32) func() {
	v, _ := j.busy.LoadOrStore(partKey{source, part}, new(atomic.Bool))
	b := v.(*atomic.Bool)
	if !b.CompareAndSwap(false, true) {
		j.t.Errorf("%s partition %d: journal calls overlap", source, part)
	}
	time.Sleep(10 * time.Microsecond) // widens the window an overlap needs
	return func() { b.Store(false) }
}

func (j *orderJournal) Intend(_ context.Context, source string, part int32, cut state.Cut) error {
	defer j.enter(source, part)()
	j.mu.Lock()
	defer j.mu.Unlock()
	if prev := j.open[partKey{source, part}]; prev != "" {
		j.t.Errorf("%s partition %d: %s intended while %s is not done", source, part, cut.Key, prev)
	}
	j.open[partKey{source, part}] = cut.Key
	return nil
}

func (j *orderJournal) Done(_ context.Context, source string, part int32, cut state.Cut, _ int64) error {
	defer j.enter(source, part)()
	j.mu.Lock()
	defer j.mu.Unlock()
	if got := j.open[partKey{source, part}]; got != cut.Key {
		j.t.Errorf("%s partition %d: %s done, but %q was intended", source, part, cut.Key, got)
	}
	delete(j.open, partKey{source, part})
	j.dones.Add(1)
	return nil
}

// TestBatcherPartitionsInParallel lands six source partitions at once,
// four of them journaled (written in line) and two written beside the
// appends, under a memory bound and an open files' bound small enough to
// spill and write other partitions' files, while one partition closes a
// table's files now and then and another writes expired ones. Every row
// lands once, every partition's durable offset reaches its end, and no two
// journal calls of a partition overlap. Run it under -race.
func TestBatcherPartitionsInParallel(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	path, err := ParseTemplate("{table}/date={date}")
	if err != nil {
		t.Fatal(err)
	}
	tc := &TableConfig{Path: path, MaxRows: 150, MaxBytes: 1 << 40, MaxAge: time.Hour}
	sink := &lockedSink{rows: map[partKey][]int64{}}
	b, err := New(Config{MaxBufferedBytes: 96 << 10, MaxOpenFiles: 8, Writers: 2},
		func(string) *TableConfig { return tc }, sink, mem, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	j := &orderJournal{t: t, owned: func(part int32) bool { return part < 4 }, open: map[partKey]string{}}
	b.SetJournal(j)
	const parts, rows = 6, 1200
	tables := make([]*schema.Table, 5)
	for i := range tables {
		tables[i] = table(fmt.Sprintf("db.t%d", i), 1, schema.LayoutImages, cols("v", "w"))
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for part := range int32(parts) {
		wg.Go(func() {
			for off := range int64(rows) {
				at := sinks.Position{Source: "k", Partition: part, Offset: off}
				if off%7 == 3 {
					if err := b.Skip(ctx, at); err != nil {
						t.Errorf("Skip: %v", err)
						return
					}
					continue
				}
				tb := tables[(off+int64(part))%int64(len(tables))]
				c := insert(t, tb.Name, fmt.Sprintf(`{"id":%d,"v":%d,"w":%d}`, off, part, off%100))
				if err := b.Add(ctx, c, tb, at, 40); err != nil {
					t.Errorf("Add: %v", err)
					return
				}
				switch {
				case part == 0 && off%97 == 0:
					if err := b.CloseTable(ctx, tables[off%5].Name, CauseDDL); err != nil {
						t.Errorf("CloseTable: %v", err)
						return
					}
				case part == 1 && off%89 == 0:
					if err := b.FlushExpired(ctx); err != nil {
						t.Errorf("FlushExpired: %v", err)
						return
					}
				case part == 2 && off%61 == 0:
					_ = b.OpenFiles()
					_ = b.Stats()
				}
			}
		})
	}
	wg.Wait()
	checkIndex(t, b)
	if err := b.FlushAll(ctx); err != nil {
		t.Fatal(err)
	}
	checkIndex(t, b)
	for part := range int32(parts) {
		got := map[int64]int{}
		for _, off := range sink.rows[partKey{"k", part}] {
			got[off]++
		}
		for off := range int64(rows) {
			want := 1
			if off%7 == 3 {
				want = 0
			}
			if got[off] != want {
				t.Errorf("partition %d offset %d landed %d times, want %d", part, off, got[off], want)
			}
		}
		if d, ok := b.Durable("k", part); !ok || d != rows {
			t.Errorf("partition %d durable %d, %v; want %d", part, d, ok, rows)
		}
	}
	if j.dones.Load() == 0 {
		t.Error("no journaled file was written")
	}
	if n := b.OpenFiles(); n != 0 {
		t.Errorf("%d files open after FlushAll", n)
	}
	for _, e := range sink.errs {
		t.Error(e)
	}
	b.Close()
	mem.AssertSize(t, 0)
}

// stallSink holds the writes of partition 0 until release is closed.
type stallSink struct {
	lockedSink
	stalled chan struct{} // closed when a write of partition 0 waits
	release chan struct{}
	once    sync.Once
}

func (s *stallSink) Write(ctx context.Context, f *sinks.File) (int64, error) {
	if f.First.Partition == 0 {
		s.once.Do(func() { close(s.stalled) })
		<-s.release
	}
	return s.lockedSink.Write(ctx, f)
}

// TestBatcherSlowStoreStallsOnePartition: a journaled partition's file is
// written in line, holding its partition; while the store takes its time
// with it, other partitions append and write their files.
func TestBatcherSlowStoreStallsOnePartition(t *testing.T) {
	path, err := ParseTemplate("{table}")
	if err != nil {
		t.Fatal(err)
	}
	tc := &TableConfig{Path: path, MaxRows: 1, MaxBytes: 1 << 40}
	sink := &stallSink{lockedSink: lockedSink{rows: map[partKey][]int64{}},
		stalled: make(chan struct{}), release: make(chan struct{})}
	b, err := New(Config{MaxBufferedBytes: 1 << 30, MaxOpenFiles: 100, Writers: 2},
		func(string) *TableConfig { return tc }, sink, memory.NewGoAllocator(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	j := &orderJournal{t: t, owned: func(int32) bool { return true }, open: map[partKey]string{}}
	b.SetJournal(j)
	tb := table("db.t", 1, schema.LayoutImages, cols("v"))
	ctx := context.Background()
	first := make(chan error, 1)
	go func() {
		first <- b.Add(ctx, insert(t, "db.t", `{"id":1}`), tb, sinks.Position{Source: "k", Partition: 0}, 10)
	}()
	<-sink.stalled
	done := make(chan error, 1)
	go func() {
		for off := range int64(5) {
			if err := b.Add(ctx, insert(t, "db.t", `{"id":2}`), tb, sinks.Position{Source: "k", Partition: 1, Offset: off}, 10); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		close(sink.release)
		t.Fatal("partition 1 waited for partition 0's write")
	}
	if d, _ := b.Durable("k", 1); d != 5 {
		t.Errorf("partition 1 durable %d, want 5", d)
	}
	close(sink.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if d, _ := b.Durable("k", 0); d != 1 {
		t.Errorf("partition 0 durable %d, want 1", d)
	}
}
