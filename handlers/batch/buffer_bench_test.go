package batch

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/handlers/schema"
)

// BenchmarkOpenBuffer measures what opening a file and landing its first
// row costs (a 12-column table in the images layout): the buffer, and the
// row checked and logged (no builders). Its allocations are what an open
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
		if rowErr, err := buf.append(c, at(0), 0, 10, chk); rowErr != nil || err != nil {
			b.Fatal(rowErr, err)
		}
		buf.release()
	}
}
