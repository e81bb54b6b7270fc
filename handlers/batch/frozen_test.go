package batch

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/cdclake/cdclake/sinks"
	"github.com/valyala/fastjson"
)

// recordSink keeps each file's landed rows as one record.
type recordSink struct {
	mem   memory.Allocator
	files map[string]arrow.RecordBatch
	order []string
}

func (s *recordSink) Write(_ context.Context, f *sinks.File) (int64, error) {
	var cols [][]arrow.Array
	var sch *arrow.Schema
	for _, p := range f.Parts {
		sch = p.Record.Schema()
		for _, r := range p.Ranges {
			slice := p.Record.NewSlice(int64(r[0]), int64(r[1]))
			if cols == nil {
				cols = make([][]arrow.Array, slice.NumCols())
			}
			for i := range cols {
				cols[i] = append(cols[i], slice.Column(i))
			}
			defer slice.Release()
		}
	}
	var out []arrow.Array
	for _, parts := range cols {
		c, err := array.Concatenate(parts, s.mem)
		if err != nil {
			return 0, err
		}
		out = append(out, c)
		defer c.Release()
	}
	s.files[f.Key] = array.NewRecordBatch(sch, out, int64(f.Rows))
	s.order = append(s.order, f.Key)
	return int64(f.Rows), nil
}

func (s *recordSink) release() {
	for _, r := range s.files {
		r.Release()
	}
}

// logTables are the table versions of logRows: every layout, extra kinds,
// a zoned timestamp with its text sibling, decimals, JSON, binary and a
// list.
func logTables() []*schema.Table {
	extras := []schema.ExtraColumn{{Name: "csn", Kind: change.ExtraString}, {Name: "tokens", Kind: change.ExtraJSON},
		{Name: "commit_ts", Kind: change.ExtraTimestamp}, {Name: "key", Kind: change.ExtraBinary}}
	cs := []schema.Column{
		{Name: "id", Type: schema.Type{Kind: schema.Int64}, Key: true},
		{Name: "name", Type: schema.Type{Kind: schema.String}, Nullable: true},
		{Name: "price", Type: schema.Type{Kind: schema.Decimal, Precision: 12, Scale: 3}, Nullable: true},
		{Name: "at", Type: schema.Type{Kind: schema.Timestamp, Enc: schema.EncZoned, Unit: schema.Micros, UTC: true}, Nullable: true},
		{Name: "at__text", Type: schema.SiblingType(schema.Type{Kind: schema.Timestamp, Enc: schema.EncZoned}), Nullable: true},
		{Name: "doc", Type: schema.Type{Kind: schema.JSON}, Nullable: true},
		{Name: "raw", Type: schema.Type{Kind: schema.Binary}, Nullable: true},
		{Name: "small", Type: schema.Type{Kind: schema.Int8}, Nullable: true},
		{Name: "tags", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Int16}}, Nullable: true},
	}
	ignore := func(c string) bool { return c == "secret" }
	return []*schema.Table{
		schema.NewTable("db.t", 1, schema.LayoutImages, cs, extras, true, ignore),
		schema.NewTable("db.f", 1, schema.LayoutFlat, cs, extras, false, ignore),
		schema.NewTable(schema.TableDDL, 1, schema.LayoutEvents, nil, extras, true, nil),
	}
}

// logRows returns n changes for the tables of logTables, some of which do
// not convert.
func logRows(t testing.TB, n int) []*change.Change {
	var out []*change.Change
	for i := range n {
		c := &change.Change{Kind: change.KindDML, Op: change.Op(i % 3), Table: []string{"db.t", "db.f"}[i%2],
			TSMicros: day.UnixMicro() + int64(i), HasTS: i%7 != 0, Xid: fmt.Sprint("xid-", i/5), Pos: fmt.Sprint(i)}
		if i%7 == 3 {
			c.Xid, c.Pos = "", ""
		}
		if i%5 != 0 {
			c.RecordMicros = day.UnixMicro() + 1000*int64(i) // else NULL
		}
		after := fmt.Sprintf(`{"id":%d,"name":"n\u00e9 \"%d\"","price":"%d.%03d","at":"2024-01-31T12:00:00.%06d+02:00","doc":{"a":[1,2.50,null]},"raw":"AAEC","small":%d,"tags":[%d,null,7]}`,
			i, i, i*13, i%1000, i, i%100, i%30000)
		switch i % 11 {
		case 1:
			after = fmt.Sprintf(`{"id":%d,"at":"2024-01-31T12:34:56.1234567Z","secret":"s"}`, i) // sibling, ignored column
		case 2:
			after = fmt.Sprintf(`{"id":%d,"small":300}`, i) // does not fit
		case 4:
			after = fmt.Sprintf(`{"id":%d,"nope":1}`, i) // not in the table
		case 5:
			after = fmt.Sprintf(`{"id":%d,"name":null,"price":null,"doc":null,"tags":null}`, i)
		case 6:
			after = fmt.Sprintf(`{"id":%d,"tags":[1,"x"]}`, i) // an element does not fit
		case 7:
			after = fmt.Sprintf(`{"id":%d,"tags":[]}`, i)
		}
		c.After = image(t, after)
		if i%3 == 2 {
			c.Before = image(t, fmt.Sprintf(`{"id":%d,"name":"before"}`, i))
			if i%2 == 0 {
				c.After = change.Image{}
			}
		}
		if i%4 != 1 {
			c.AddString("csn", []byte(fmt.Sprint(1000+i)))
		}
		if i%5 == 0 {
			c.AddJSON("tokens", fastjson.MustParse(fmt.Sprintf(`{"k":"v%d"}`, i)))
		}
		c.AddTimestamp("commit_ts", day.UnixMicro()+int64(i)*1000)
		switch i % 3 {
		case 0:
			c.AddBytes("key", []byte{byte(i), 0, 0xff})
		case 1:
			c.AddBytes("key", nil)
		}
		c.AddString("other", []byte("not a column"))
		out = append(out, c)
		if i%50 == 49 {
			raw := fastjson.MustParse(fmt.Sprintf(`{"ddl":"ALTER TABLE T ADD C%d INT","n":%d}`, i, i))
			ddl := &change.Change{Kind: change.KindDDL, Table: "S.T", Raw: raw, Statement: fmt.Sprintf("ALTER TABLE T ADD C%d INT", i)}
			ddl.AddString("csn", []byte("9"))
			out = append(out, ddl)
		}
	}
	return out
}

// landRecords lands logRows(n) with the given freeze limit and returns the
// files' rows and the rows rejected (by offset, with their errors).
func landRecords(t *testing.T, n int, limit func(int64) int64, bound int64) (*recordSink, map[int64]string) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	sink := &recordSink{mem: mem, files: map[string]arrow.RecordBatch{}}
	t.Cleanup(sink.release)
	path, err := ParseTemplate("{table}")
	if err != nil {
		t.Fatal(err)
	}
	tc := &TableConfig{Path: path, MaxRows: 1 << 30, MaxBytes: 1 << 40}
	b, err := New(Config{MaxBufferedBytes: bound, MaxOpenFiles: 100}, func(string) *TableConfig { return tc }, sink, mem,
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.now = func() time.Time { return day }
	b.freezeLimit = limit
	ts := logTables()
	rejected := map[int64]string{}
	for i, c := range logRows(t, n) {
		tb := ts[0]
		switch {
		case c.Kind == change.KindDDL:
			tb = ts[2]
		case c.Table == "db.f":
			tb = ts[1]
		}
		err := b.Add(context.Background(), c, tb, at(int64(i)), 100)
		if re, ok := err.(*RowError); ok {
			rejected[int64(i)] = re.Error()
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if err := b.FlushAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	return sink, rejected
}

// TestFrozenRowsLandAsBuilt: a file's rows land the same, and the same
// rows are rejected with the same errors, whether they were frozen until
// the file was written, frozen and moved to builders on the way, or
// appended to builders from the first, under a bound that spills or not.
func TestFrozenRowsLandAsBuilt(t *testing.T) {
	const n = 3000
	built, builtRejected := landRecords(t, n, never, 1<<40)
	if len(built.files) != 3 || len(builtRejected) == 0 {
		t.Fatalf("%d files, %d rows rejected: want 3 files and some rejected", len(built.files), len(builtRejected))
	}
	for _, c := range []struct {
		name  string
		limit func(int64) int64
		bound int64
	}{
		{"frozen to the end", func(int64) int64 { return 1 << 40 }, 1 << 40},
		{"frozen, then built", func(int64) int64 { return 4 << 10 }, 1 << 40},
		{"default", halfOf, 1 << 40},
		{"spilling", halfOf, 256 << 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, rejected := landRecords(t, n, c.limit, c.bound)
			if len(rejected) != len(builtRejected) {
				t.Errorf("%d rows rejected, %d when built", len(rejected), len(builtRejected))
			}
			for off, e := range builtRejected {
				if rejected[off] != e {
					t.Errorf("row %d: rejected with %q, %q when built", off, rejected[off], e)
				}
			}
			for table, want := range byTable(t, built) {
				if rows := byTable(t, got)[table]; rows == nil || !array.RecordEqual(rows, want) {
					t.Errorf("%s: rows differ from those built", table)
				}
			}
			if c.bound > 1<<30 && len(got.files) != len(built.files) {
				t.Errorf("%d files, %d when built", len(got.files), len(built.files))
			}
		})
	}
}

// byTable returns each table's rows, in order, over its files.
func byTable(t *testing.T, s *recordSink) map[string]arrow.RecordBatch {
	keys := slices.Clone(s.order)
	slices.Sort(keys) // a table's objects by their first offset
	parts := map[string][]arrow.RecordBatch{}
	for _, k := range keys {
		table, _, _ := strings.Cut(k, "/")
		parts[table] = append(parts[table], s.files[k])
	}
	out := map[string]arrow.RecordBatch{}
	for table, recs := range parts {
		out[table] = concatRecords(t, recs)
	}
	return out
}

// concatRecords returns the rows of recs, in order, as one record.
func concatRecords(t *testing.T, recs []arrow.RecordBatch) arrow.RecordBatch {
	var cols []arrow.Array
	for i := range recs[0].NumCols() {
		var cs []arrow.Array
		for _, r := range recs {
			cs = append(cs, r.Column(int(i)))
		}
		c, err := array.Concatenate(cs, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		cols = append(cols, c)
	}
	return array.NewRecordBatch(recs[0].Schema(), cols, int64(cols[0].Len()))
}

// TestColdFilesKeepNoBuilders: many tables with a few rows each, under a
// bound that holds the builders of a few of them, stay open with their rows
// frozen (no builders, nothing spilled or written early), and each gets
// one file; the hot table's file moves its rows to builders once.
func TestColdFilesKeepNoBuilders(t *testing.T) {
	h := newHarness(t, Config{}, TableConfig{MaxRows: 1 << 20})
	hot := table("db.hot", 1, schema.LayoutImages, textCols())
	var cold []*schema.Table
	for i := range 400 {
		cold = append(cold, table(fmt.Sprintf("db.cold%03d", i), 1, schema.LayoutImages, textCols()))
	}
	off := int64(0)
	add := func(tb *schema.Table) {
		h.add(insert(t, tb.Name, fmt.Sprintf(`{"id":%d,"s":"row %d"}`, off, off)), tb, at(off), 100)
		off++
	}
	builders := newBuffer(h.b.mem, bufKey{}, hot, "", at(0), 0, halfOf).fixed
	setBound(h.b, 16*builders) // the builders of a few files: 4% of the tables
	for range 5 {
		for _, c := range cold {
			add(c)
			add(hot)
		}
	}
	if h.b.held.Load() > h.b.cfg.MaxBufferedBytes {
		t.Errorf("holding %d over the bound %d", h.b.held.Load(), h.b.cfg.MaxBufferedBytes)
	}
	if len(h.sink.files) != 0 {
		t.Errorf("%d files written early", len(h.sink.files))
	}
	for k, buf := range allOpen(h.b) {
		switch {
		case k.table == "db.hot" && buf.builds != 1:
			t.Errorf("the hot table built its builders %d times", buf.builds)
		case k.table != "db.hot" && (buf.builds != 0 || buf.frozen.rows != 5 || len(buf.spilled) != 0):
			t.Errorf("%s: built %d times, %d rows frozen, %d spilled runs", k.table, buf.builds, buf.frozen.rows, len(buf.spilled))
		}
	}
	must(t, h.b.FlushAll(context.Background()))
	if len(h.sink.files) != 401 {
		t.Errorf("%d files for 401 tables", len(h.sink.files))
	}
	for _, f := range h.sink.files {
		if want := map[bool]int{true: 2000, false: 5}[f.Table == "db.hot"]; f.Rows != want {
			t.Errorf("%s: %d rows, want %d", f.Key, f.Rows, want)
		}
	}
}

// TestBufferStates follows one file through its states: freezing until its
// frozen rows reach their limit, building, freezing again after a spill under the memory
// bound, sealed while written, released after; the builders exist exactly
// while it is building (or sealed with rows in them).
func TestBufferStates(t *testing.T) {
	h := newHarness(t, Config{}, TableConfig{MaxRows: 1 << 20})
	tb := table("db.t", 1, schema.LayoutImages, textCols())
	off := int64(0)
	var buf *buffer
	add := func(want bufState) {
		t.Helper()
		h.add(insert(t, tb.Name, fmt.Sprintf(`{"id":%d,"s":"row %d"}`, off, off)), tb, at(off), 100)
		off++
		for _, b := range allOpen(h.b) {
			buf = b
		}
		if buf.state != want || (buf.rb != nil) != (want == building) {
			t.Fatalf("after row %d: %s with builders %v, want %s", off-1, buf.state, buf.rb != nil, want)
		}
	}
	add(freezing)
	for buf.frozen.rows > 0 && off < 10000 {
		add(map[bool]bufState{true: freezing, false: building}[int64(cap(buf.frozen.data)) < buf.freezeLimit])
	}
	if buf.state != building || buf.builds != 1 {
		t.Fatalf("the frozen rows never moved to builders: %s, built %d times", buf.state, buf.builds)
	}
	add(building)
	setBound(h.b, h.b.held.Load()-1) // the next row spills the builders
	add(freezing)
	if len(buf.spilled) == 0 {
		t.Fatal("nothing spilled at the bound")
	}
	setBound(h.b, 1<<40)
	must(t, h.b.FlushAll(context.Background()))
	if buf.state != released || len(h.sink.files) != 1 {
		t.Fatalf("after the flush: %s, %d files", buf.state, len(h.sink.files))
	}
	for _, f := range h.sink.files {
		if int64(f.Rows) != off {
			t.Errorf("%d rows landed of %d", f.Rows, off)
		}
	}
}

// FuzzFrozenRows: whatever a change holds, in every layout, it lands the
// same from a file's frozen rows (converted when frozen, replayed when the file
// is written) as appended to builders from the first, and is refused
// with the same error.
func FuzzFrozenRows(f *testing.F) {
	f.Add(`{"id":1,"name":"x"}`, `{"id":1}`, "csn", []byte{1, 2}, int64(5), true)
	f.Add(`{"a":"\u0000\ud83d\ude00","b":[1e400,-0.0]}`, ``, "", []byte(nil), int64(-1), false)
	f.Add(`{"id":2,"price":"1.5","at":"2024-01-31T12:00:00Z","doc":[1,{"x":null}],"raw":"AAEC","small":-128}`, `{"id":2,"at":"2024-01-31T12:34:56.1234567Z","secret":1}`,
		"", []byte{}, int64(1e15), true)
	f.Add(`{"id":3,"small":1e2,"doc":"{\"a\":1}","name":null}`, `{"id":3,"id":4}`, "x", []byte(nil), int64(0), true)
	ts := logTables()
	f.Fuzz(func(t *testing.T, after, before, csn string, key []byte, micros int64, hasTS bool) {
		c := &change.Change{Kind: change.KindDML, Op: change.OpUpdate, Table: "db.t", TSMicros: micros, HasTS: hasTS, Xid: csn, RecordMicros: micros}
		for _, img := range []struct {
			js  string
			dst *change.Image
		}{{after, &c.After}, {before, &c.Before}} {
			if img.js == "" {
				continue
			}
			v, err := fastjson.Parse(img.js)
			if err != nil {
				return
			}
			o, err := v.Object()
			if err != nil {
				return
			}
			img.dst.Obj = o
		}
		if len(csn)%2 == 1 {
			c.Raw = fastjson.MustParse(`{"n":1}`)
			if v, err := fastjson.Parse(after); err == nil {
				c.Raw = v
			}
		}
		c.AddString("csn", []byte(csn))
		c.AddBytes("key", key)
		c.AddTimestamp("commit_ts", micros)
		for _, tb := range ts {
			frozen, frozenErr := landOnce(t, tb, c, 1<<40)
			built, builtErr := landOnce(t, tb, c, 0)
			if fmt.Sprint(frozenErr) != fmt.Sprint(builtErr) {
				t.Fatalf("%s: frozen with error %v, built with %v", tb.Name, frozenErr, builtErr)
			}
			if (frozen == nil) != (built == nil) || frozen != nil && !array.RecordEqual(frozen, built) {
				t.Fatalf("%s: rows thawed differ from those built:\n%v\n%v", tb.Name, frozen, built)
			}
		}
	})
}

// landOnce lands c twice, at offsets 7 and 8, in a file of table version
// tb whose rows are frozen up to limit bytes, and returns the file's
// valid rows (nil without any) and the first row's error.
func landOnce(t *testing.T, tb *schema.Table, c *change.Change, limit int64) (arrow.RecordBatch, error) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	chk := newChecks(mem)
	buf := newBuffer(mem, bufKey{table: tb.Name}, tb, "d", at(7), 0, func(int64) int64 { return limit })
	defer func() {
		buf.release()
		chk.release()
		mem.AssertSize(t, 0)
	}()
	var first error
	for off := int64(7); off <= 8; off++ {
		rowErr, err := buf.append(c, at(off), 10, chk)
		if err != nil {
			t.Fatal(err)
		}
		if off == 7 {
			first = rowErr
		}
	}
	parts, err := buf.parts()
	if err != nil {
		t.Fatal(err)
	}
	var out []arrow.RecordBatch
	for _, p := range parts {
		for _, r := range p.Ranges {
			out = append(out, p.Record.NewSlice(int64(r[0]), int64(r[1])))
		}
	}
	releaseParts(parts[:len(parts)-min(len(parts), 1)])
	if len(out) == 0 {
		return nil, first
	}
	defer func() {
		for _, r := range out {
			r.Release()
		}
	}()
	return concatRecords(t, out), first
}
