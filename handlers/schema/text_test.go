package schema

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/valyala/fastjson"
)

// TestTextColumnMatchesStringBuilder: a TextColumn makes the same arrays
// as Arrow's string builder given the same values and NULLs, over
// several arrays (its slices are reused), with every buffer it allocates
// freed once the arrays are released.
func TestTextColumnMatchesStringBuilder(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	r := rand.New(rand.NewPCG(7, 8))
	col := NewTextColumn()
	want := array.NewStringBuilder(mem)
	defer want.Release()
	words := []string{"", "a", "Zürich", "€", "quoted \"x\"", "a longer value of some forty bytes or so.."}
	for round := range 6 {
		n := []int{0, 1, 7, 8, 9, 1000}[round]
		nulls := round%2 == 0
		col.Reserve(n / 2)
		for range n {
			switch {
			case nulls && r.IntN(4) == 0:
				col.AppendNull()
				want.AppendNull()
			case r.IntN(2) == 0:
				w := words[r.IntN(len(words))]
				col.AppendString(w)
				want.Append(w)
			default:
				w := words[r.IntN(len(words))]
				col.Append([]byte(w))
				want.Append(w)
			}
		}
		if col.Len() != n {
			t.Fatalf("round %d: Len %d, want %d", round, col.Len(), n)
		}
		got, exp := col.NewArray(mem), want.NewArray()
		if !array.Equal(got, exp) {
			t.Fatalf("round %d: got %v, want %v", round, got, exp)
		}
		if got.NullN() != exp.NullN() {
			t.Fatalf("round %d: %d NULLs, want %d", round, got.NullN(), exp.NullN())
		}
		got.Release()
		exp.Release()
		if col.Len() != 0 {
			t.Fatalf("round %d: Len %d after NewArray", round, col.Len())
		}
	}
}

// TestVarColumnTypes: binary and JSON columns make arrays of their own
// types, equal to their Arrow builders'; other types have no TextColumn.
func TestVarColumnTypes(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for _, typ := range []Type{{Kind: Binary}, {Kind: Binary, Enc: EncHex}, {Kind: JSON}, {Kind: String}} {
		col := NewVarColumn(typ.Arrow())
		if col == nil {
			t.Fatalf("%s: no TextColumn", typ)
		}
		b := array.NewBuilder(mem, typ.Arrow())
		conv := NewConverters(mem)
		viaCol, viaBuilder := conv.CompileText("c", typ, col), conv.Compile("c", typ, b)
		for _, v := range []string{`"AAEC"`, `null`, `"e30="`, `{"a":[1,2]}`, `"x"`, `"0a0b"`, `"\\u00e9"`} {
			val := fastjson.MustParse(v)
			errCol, errB := viaCol(val), viaBuilder(val)
			if (errCol == nil) != (errB == nil) {
				t.Fatalf("%s %s: errors %v and %v", typ, v, errCol, errB)
			}
		}
		got, want := col.NewArray(mem), b.NewArray()
		if !arrow.TypeEqual(got.DataType(), want.DataType()) || !array.Equal(got, want) {
			t.Fatalf("%s: got %v (%s), want %v (%s)", typ, got, got.DataType(), want, want.DataType())
		}
		got.Release()
		want.Release()
		b.Release()
		conv.Release()
	}
	for _, dt := range []arrow.DataType{arrow.PrimitiveTypes.Int64, arrow.BinaryTypes.LargeString} {
		if NewVarColumn(dt) != nil {
			t.Errorf("%s has a TextColumn", dt)
		}
	}
}

// TestTextColumnReset: after Reset a column holds only what is appended
// next, NULLs and validity bits included.
func TestTextColumnReset(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	c := NewTextColumn()
	for i := range 11 { // a validity byte and a part
		if i%3 == 0 {
			c.AppendNull()
		} else {
			c.AppendString("dropped")
		}
	}
	c.Reset()
	c.AppendString("a")
	c.AppendNull()
	c.AppendString("bc")
	arr := c.NewArray(mem).(*array.String)
	defer arr.Release()
	if arr.Len() != 3 || arr.NullN() != 1 || arr.Value(0) != "a" || !arr.IsNull(1) || arr.Value(2) != "bc" {
		t.Fatalf("after Reset: %v (%d NULLs)", arr, arr.NullN())
	}
}

// TestTextColumnMoveArray: MoveArray gives the array NewArray would, and
// what the column takes after it does not reach that array.
func TestTextColumnMoveArray(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	fill := func(c *TextColumn, s string) {
		for i := range 11 {
			if i%3 == 0 {
				c.AppendNull()
			} else {
				c.AppendString(fmt.Sprint(s, i))
			}
		}
	}
	a, b := NewTextColumn(), NewTextColumn()
	fill(a, "x")
	fill(b, "x")
	copied := a.NewArray(mem)
	defer copied.Release()
	moved := b.MoveArray()
	defer moved.Release()
	fill(b, "y") // into new slices
	again := b.MoveArray()
	defer again.Release()
	if !array.Equal(copied, moved) {
		t.Fatalf("moved %v, copied %v", moved, copied)
	}
	if again.Len() != 11 || again.(*array.String).Value(1) != "y1" {
		t.Fatalf("the next array: %v", again)
	}
	empty := b.MoveArray()
	defer empty.Release()
	if empty.Len() != 0 {
		t.Fatalf("an empty column moved %v", empty)
	}
}

// TestTextColumnAppendNulls: a run of NULLs appended at once makes the
// same arrays as one NULL at a time, from every position within a
// validity byte, over slices reused after values (whose validity bits
// must not show through).
func TestTextColumnAppendNulls(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	runs, one := NewTextColumn(), NewTextColumn()
	for lead := range 17 {
		for k := range 20 {
			// Values first, so that reused slices hold set bits.
			for range 40 {
				runs.AppendString("x")
				one.AppendString("x")
			}
			runs.NewArray(mem).Release()
			one.NewArray(mem).Release()
			for i := range lead {
				v := fmt.Sprint(i)
				runs.AppendString(v)
				one.AppendString(v)
			}
			runs.AppendNulls(k)
			for range k {
				one.AppendNull()
			}
			runs.AppendString("after")
			one.AppendString("after")
			got, want := runs.NewArray(mem), one.NewArray(mem)
			if !array.Equal(got, want) || got.NullN() != want.NullN() || got.NullN() != k {
				t.Fatalf("%d values, %d NULLs: got %v (%d NULLs), want %v (%d NULLs)", lead, k, got, got.NullN(), want, want.NullN())
			}
			got.Release()
			want.Release()
		}
	}
}
