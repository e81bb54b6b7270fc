package batch

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cdclake/cdclake/handlers/schema"
)

// TestWrittenTellsEachFileAndItsCause: Config.Written hears of every
// stored file once, with the rule that closed it, and the counts add up
// to the files the sink got.
func TestWrittenTellsEachFileAndItsCause(t *testing.T) {
	var mu sync.Mutex
	var heard []WrittenFile
	cfg := Config{MaxOpenFiles: 3, Written: func(f WrittenFile) {
		mu.Lock()
		heard = append(heard, f)
		mu.Unlock()
	}}
	h := newHarness(t, cfg, TableConfig{MaxRows: 2, MaxAge: time.Minute})
	ctx := context.Background()
	a := table("db.a", 1, schema.LayoutImages, cols("v"))
	off := int64(0)
	add := func(tbl *schema.Table) {
		t.Helper()
		if re := h.add(insert(t, tbl.Name, fmt.Sprintf(`{"id":%d,"v":1}`, off)), tbl, at(off), 10); re != nil {
			t.Fatal(re)
		}
		off++
	}
	add(a)
	add(a) // max_rows: written
	add(a)
	h.now = h.now.Add(2 * time.Minute)
	if err := h.b.FlushExpired(ctx); err != nil { // max_age
		t.Fatal(err)
	}
	add(a)
	if err := h.b.CloseTable(ctx, "db.a", CauseSchema); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"db.b", "db.c", "db.d", "db.e"} { // the fourth open file closes the idlest
		add(table(name, 1, schema.LayoutImages, cols("v")))
	}
	if err := h.b.FlushAll(ctx); err != nil {
		t.Fatal(err)
	}
	var causes []Cause
	rows := 0
	for _, f := range heard {
		causes = append(causes, f.Cause)
		rows += f.Rows
		if f.Bytes != int64(100*f.Rows) || f.Took < 0 {
			t.Errorf("%+v: bytes or time not as stored", f)
		}
	}
	want := []Cause{CauseRows, CauseAge, CauseSchema, CauseOpenFiles, CauseShutdown, CauseShutdown, CauseShutdown}
	if !slices.Equal(causes, want) {
		t.Errorf("causes %v, want %v", causes, want)
	}
	if len(heard) != len(h.sink.files) || int64(len(heard)) != h.b.Written() || rows != int(off) {
		t.Errorf("heard of %d files with %d rows; the sink got %d, Written says %d, %d rows added",
			len(heard), rows, len(h.sink.files), h.b.Written(), off)
	}
	if m := h.b.Memory(); m.Buffered != 0 || m.Spilled != 0 || m.Bound != 1<<40 {
		t.Errorf("memory after FlushAll %+v", m)
	}
}

// TestMemoryCountsSpilledRows: a spill moves a file's rows into the
// spilled part of what the batcher holds, and writing it gives it back.
func TestMemoryCountsSpilledRows(t *testing.T) {
	h := newHarness(t, Config{}, TableConfig{MaxRows: 1 << 20})
	a := table("db.a", 1, schema.LayoutImages, cols("v", "w"))
	for i := range int64(3000) {
		if re := h.add(insert(t, "db.a", fmt.Sprintf(`{"id":%d,"v":1,"w":2}`, i)), a, at(i), 40); re != nil {
			t.Fatal(re)
		}
	}
	before := h.b.Memory()
	if before.Buffered <= 0 || before.Spilled != 0 {
		t.Fatalf("before the spill: %+v", before)
	}
	p := h.b.partition("orders", 0)
	for _, buf := range p.open {
		if err := h.b.spill(p, buf); err != nil {
			t.Fatal(err)
		}
	}
	after := h.b.Memory()
	if after.Spilled <= 0 || after.Spilled > after.Buffered {
		t.Errorf("after the spill: %+v (before %+v)", after, before)
	}
	if err := h.b.FlushAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if m := h.b.Memory(); m.Buffered != 0 || m.Spilled != 0 {
		t.Errorf("after the write: %+v", m)
	}
	if h.b.DurableTotal() != 3000 {
		t.Errorf("DurableTotal %d, want 3000", h.b.DurableTotal())
	}
}
