package batch

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/schema"
)

// BenchmarkOpenBuffer measures what opening a file and landing its first
// row costs (a 12-column table in the images layout): the buffer, and the
// row checked and frozen (no builders). Its allocations are what an open
// file holds beyond its rows.
func BenchmarkOpenBuffer(b *testing.B) {
	var cs []schema.Column
	cs = append(cs, schema.Column{Name: "id", Type: schema.Type{Kind: schema.Int64}})
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"} {
		cs = append(cs, schema.Column{Name: n, Type: schema.Type{Kind: schema.String}, Nullable: true})
	}
	t := table("db.t", 1, schema.LayoutImages, cs)
	c := insert(b, "db.t", `{"id":1,"a":"x","b":"y"}`)
	mem := memory.NewGoAllocator()
	chk := newChecks(mem)
	b.ReportAllocs()
	for b.Loop() {
		buf := newBuffer(mem, bufKey{table: "db.t"}, t, "d", at(0), 0, halfOf)
		if rowErr, err := buf.append(c, at(0), 10, chk); rowErr != nil || err != nil {
			b.Fatal(rowErr, err)
		}
		buf.release()
	}
}

// BenchmarkFileRows measures landing the rows of a file of 64 rows (a
// 12-column table in the images layout, GoldenGate-like partial after
// images) up to its record: appended to builders from the first row, or
// frozen as they come (converted into packed values) and replayed into
// builders when the file is written, as a file of a few rows is.
func BenchmarkFileRows(b *testing.B) {
	cs := []schema.Column{{Name: "id", Type: schema.Type{Kind: schema.Int64}}}
	for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
		cs = append(cs, schema.Column{Name: n, Type: schema.Type{Kind: schema.String}, Nullable: true})
	}
	cs = append(cs,
		schema.Column{Name: "amount", Type: schema.Type{Kind: schema.Decimal, Precision: 12, Scale: 2}, Nullable: true},
		schema.Column{Name: "at", Type: schema.Type{Kind: schema.Timestamp, Unit: schema.Micros}, Nullable: true},
		schema.Column{Name: "qty", Type: schema.Type{Kind: schema.Int32}, Nullable: true},
		schema.Column{Name: "ok", Type: schema.Type{Kind: schema.Bool}, Nullable: true},
		schema.Column{Name: "note", Type: schema.Type{Kind: schema.String}, Nullable: true})
	t := table("db.t", 1, schema.LayoutImages, cs)
	var rows []*change.Change
	for i := range 64 {
		rows = append(rows, insert(b, "db.t", fmt.Sprintf(
			`{"id":%d,"a":"alpha %d","c":"gamma","amount":"%d.25","at":"2024-01-31 12:00:%02d.123456","qty":%d,"note":"n\u00e9"}`,
			i, i, i*7, i%60, i)))
	}
	for _, c := range []struct {
		name  string
		limit func(int64) int64
	}{{"built", func(int64) int64 { return 0 }}, {"frozen", func(int64) int64 { return 1 << 40 }}} {
		b.Run(c.name, func(b *testing.B) {
			mem := memory.NewGoAllocator()
			chk := newChecks(mem)
			defer chk.release()
			b.ReportAllocs()
			for b.Loop() {
				buf := newBuffer(mem, bufKey{table: "db.t"}, t, "d", at(0), 0, c.limit)
				for i, r := range rows {
					if rowErr, err := buf.append(r, at(int64(i)), 100, chk); rowErr != nil || err != nil {
						b.Fatal(rowErr, err)
					}
				}
				parts, err := buf.parts()
				if err != nil || len(parts) != 1 || parts[0].Record.NumRows() != 64 {
					b.Fatal(err, parts)
				}
				buf.release()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/64, "ns/row")
		})
	}
}
