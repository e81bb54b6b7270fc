package batch

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestNameListMatchesListBuilder: the lists a nameList makes are those
// Arrow's list builder makes of the same appends, array after array (the
// slices are reused), and every buffer goes back to the allocator.
func TestNameListMatchesListBuilder(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	typ := arrow.ListOf(arrow.BinaryTypes.String)
	names := [][]byte{[]byte("ID"), []byte("NAME"), []byte(""), []byte("AMOUNT_WITH_A_LONG_NAME"), []byte("é")}
	rng := rand.New(rand.NewPCG(1, 2))
	l := newNameList(3, typ)
	for _, rows := range []int{0, 1, 7, 8, 9, 64, 1000, 3} {
		t.Run(fmt.Sprint(rows), func(t *testing.T) {
			want := array.NewListBuilder(mem, arrow.BinaryTypes.String)
			defer want.Release()
			wv := want.ValueBuilder().(*array.StringBuilder)
			if rows == 1000 {
				l.reserve(rows)
			}
			for range rows {
				if rng.IntN(4) == 0 {
					l.appendNull()
					want.AppendNull()
					continue
				}
				var row [][]byte
				for range rng.IntN(len(names) + 1) {
					row = append(row, names[rng.IntN(len(names))])
				}
				l.appendNames(row)
				want.Append(true)
				for _, n := range row {
					wv.Append(string(n))
				}
			}
			got := l.newArray(mem)
			defer got.Release()
			w := want.NewArray()
			defer w.Release()
			if !arrow.TypeEqual(got.DataType(), typ) || !array.Equal(got, w) {
				t.Fatalf("got %v, want %v", got, w)
			}
			if err := got.(*array.List).ListValues().(*array.String).ValidateFull(); err != nil {
				t.Fatal(err)
			}
			if l.rows != 0 || l.nulls != 0 || len(l.offs) != 1 {
				t.Errorf("the list is not empty after newArray: %d rows", l.rows)
			}
		})
	}
}
