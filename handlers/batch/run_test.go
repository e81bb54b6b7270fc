package batch

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/schema"
)

// runInput is a partition's messages over several tables and versions:
// rows, rows that do not convert (an int8 column given 1000) and messages
// that need no landing (nil changes).
func runInput(t *testing.T, n int) []Item {
	t.Helper()
	var tables []*schema.Table
	for i := range 7 {
		tables = append(tables, table(fmt.Sprintf("db.t%d", i), 1, schema.LayoutImages, cols("v", "w")))
		tables = append(tables, table(fmt.Sprintf("db.t%d", i), 2, schema.LayoutImages, cols("v")))
	}
	r := rand.New(rand.NewPCG(1, 2))
	items := make([]Item, n)
	for i := range items {
		items[i].At = at(int64(i))
		if r.IntN(11) == 0 {
			continue
		}
		tb := tables[r.IntN(len(tables))]
		v := r.IntN(100)
		if r.IntN(37) == 0 {
			v = 1000
		}
		row := fmt.Sprintf(`{"id":%d,"v":%d}`, i, v)
		if r.IntN(3) == 0 {
			row = fmt.Sprintf(`{"id":%d}`, i) // v absent
		}
		items[i].C, items[i].T, items[i].Size = insert(t, tb.Name, row), tb, 40+r.IntN(40)
	}
	return items
}

// landOneByOne lands items with Add and Skip, and returns the offsets of
// the rows that did not convert.
func landOneByOne(t *testing.T, h *harness, items []Item) []int64 {
	t.Helper()
	var bad []int64
	for _, it := range items {
		if it.C == nil {
			if err := h.b.Skip(context.Background(), it.At); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if re := h.add(it.C, it.T, it.At, it.Size); re != nil {
			bad = append(bad, it.At.Offset)
		}
	}
	return bad
}

// landInRuns lands items with AddRun in runs of the given lengths (the
// last one repeated), and returns the offsets of the rows that did not
// convert, released once landed.
func landInRuns(t *testing.T, h *harness, items []Item, lens ...int) []int64 {
	t.Helper()
	var bad []int64
	items = slices.Clone(items)
	for k := 0; len(items) > 0; k++ {
		n := min(lens[min(k, len(lens)-1)], len(items))
		holder := new(int)
		if err := h.b.AddRun(context.Background(), items[:n], holder); err != nil {
			t.Fatal(err)
		}
		for _, it := range items[:n] {
			var re *RowError
			if it.Err != nil && !errors.As(it.Err, &re) {
				t.Fatalf("offset %d: %v", it.At.Offset, it.Err)
			}
			if it.Err != nil {
				bad = append(bad, it.At.Offset)
			}
		}
		h.b.Release("orders", 0, holder)
		items = items[n:]
	}
	return bad
}

// landedFiles returns the files of h, by key.
func landedFiles(t *testing.T, h *harness) []written {
	t.Helper()
	if err := h.b.FlushAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	files := slices.Clone(h.sink.files)
	for i := range files {
		files[i].Durable = 0 // when each file was written differs
	}
	slices.SortFunc(files, func(a, b written) int { return strings.Compare(a.Key, b.Key) })
	return files
}

// TestAddRunMatchesAdd checks that runs land what Add and Skip land one
// message at a time, whatever the runs' lengths and however many
// goroutines convert them: the same files with the same rows, and the
// same rows rejected.
func TestAddRunMatchesAdd(t *testing.T) {
	items := runInput(t, 900)
	tc := TableConfig{MaxRows: 23}
	ref := newHarness(t, Config{}, tc)
	refBad := landOneByOne(t, ref, items)
	refFiles := landedFiles(t, ref)
	if len(refBad) == 0 || len(refFiles) < 30 {
		t.Fatalf("the input should reject rows and fill files: %d rejected, %d files", len(refBad), len(refFiles))
	}
	for _, appenders := range []int{0, 1, 3} {
		for _, lens := range [][]int{{1}, {64}, {5, 200, 17}, {1000}} {
			t.Run(fmt.Sprintf("appenders=%d/runs=%v", appenders, lens), func(t *testing.T) {
				h := newHarness(t, Config{Appenders: appenders}, tc)
				bad := landInRuns(t, h, items, lens...)
				if !slices.Equal(bad, refBad) {
					t.Errorf("rejected %v, want %v", bad, refBad)
				}
				checkFiles(t, landedFiles(t, h), refFiles)
				if d := h.durable(); d != int64(len(items)) {
					t.Errorf("durable %d, want %d", d, len(items))
				}
			})
		}
	}
}

// TestAddRunBoundsByOffsets checks that under a memory bound small enough
// to spill and close files early, what lands does not depend on how the
// input is cut into runs, nor on the number of goroutines.
func TestAddRunBoundsByOffsets(t *testing.T) {
	items := runInput(t, 1500)
	cfg := Config{MaxBufferedBytes: 24 << 10, MaxOpenFiles: 9}
	var ref []written
	for _, appenders := range []int{1, 4} {
		for _, lens := range [][]int{{1}, {64}, {7, 300, 64}, {2000}} {
			cfg.Appenders = appenders
			h := newHarness(t, cfg, TableConfig{})
			h.b.freezeLimit = never // every file has builders, which spill
			landInRuns(t, h, items, lens...)
			files := landedFiles(t, h)
			if ref == nil {
				ref = files
				if len(ref) < 20 {
					t.Fatalf("the bounds should close files early: %d files", len(ref))
				}
				continue
			}
			t.Run(fmt.Sprintf("appenders=%d/runs=%v", appenders, lens), func(t *testing.T) { checkFiles(t, files, ref) })
		}
	}
}

// TestAddRunHoldsRejectedRows checks that a row that does not convert is
// held before the file it fills is written: the durable offset stays
// below it until its holder lets go (its dead letter is written).
func TestAddRunHoldsRejectedRows(t *testing.T) {
	h := newHarness(t, Config{Appenders: 2}, TableConfig{MaxRows: 2})
	v1 := table("db.t", 1, schema.LayoutImages, cols("v"))
	items := []Item{
		{C: insert(t, "db.t", `{"id":0,"v":1}`), T: v1, At: at(0), Size: 10},
		{C: insert(t, "db.t", `{"id":1,"v":1000}`), T: v1, At: at(1), Size: 10},
		{At: at(2)},
	}
	holder := new(int)
	if err := h.b.AddRun(context.Background(), items, holder); err != nil {
		t.Fatal(err)
	}
	if items[0].Err != nil || items[1].Err == nil || items[2].Err != nil {
		t.Fatalf("errors %v, %v, %v: want only the second row's", items[0].Err, items[1].Err, items[2].Err)
	}
	if len(h.sink.files) != 1 || h.sink.files[0].Rows != 1 {
		t.Fatalf("files %+v, want one of the row that converted", h.sink.files)
	}
	if d := h.durable(); d != 1 {
		t.Errorf("durable %d while the rejected row is held, want 1", d)
	}
	h.b.Release("orders", 0, holder)
	if d := h.durable(); d != 3 {
		t.Errorf("durable %d once released, want 3", d)
	}
}

// TestAddRunEvents checks a run of event rows (a table of the events
// layout) beside row changes.
func TestAddRunEvents(t *testing.T) {
	h := newHarness(t, Config{Appenders: 2}, TableConfig{})
	ddl := schema.NewTable(schema.TableDDL, 1, schema.LayoutEvents, nil, nil, true, nil)
	v1 := table("db.t", 1, schema.LayoutImages, cols("v"))
	ev := &change.Change{Kind: change.KindDDL, Table: "db.t", Statement: "ALTER TABLE t ADD c INT",
		TSMicros: day.UnixMicro(), HasTS: true}
	items := []Item{
		{C: insert(t, "db.t", `{"id":0,"v":1}`), T: v1, At: at(0), Size: 10},
		{C: ev, T: ddl, At: at(1), Size: 10},
		{C: insert(t, "db.t", `{"id":2,"v":2}`), T: v1, At: at(2), Size: 10},
	}
	if err := h.b.AddRun(context.Background(), items, new(int)); err != nil {
		t.Fatal(err)
	}
	files := landedFiles(t, h)
	if len(files) != 2 {
		t.Fatalf("%d files, want the table's and the DDL dataset's", len(files))
	}
	got := map[string][]int64{}
	for _, f := range files {
		got[f.Table] = f.Offsets
	}
	if !slices.Equal(got["db.t"], []int64{0, 2}) || !slices.Equal(got[schema.TableDDL], []int64{1}) {
		t.Errorf("offsets by table %v", got)
	}
}
