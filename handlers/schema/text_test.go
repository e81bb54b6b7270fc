package schema

import (
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
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
