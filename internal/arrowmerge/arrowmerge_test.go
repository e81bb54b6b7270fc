package arrowmerge_test

import (
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/internal/arrowmerge"
)

func TestSchemas(t *testing.T) {
	i64, str := arrow.PrimitiveTypes.Int64, arrow.BinaryTypes.String
	a := arrow.NewSchema([]arrow.Field{{Name: "id", Type: i64}, {Name: "n", Type: arrow.Null, Nullable: true},
		{Name: "img", Type: arrow.StructOf(arrow.Field{Name: "x", Type: i64})}}, nil)
	b := arrow.NewSchema([]arrow.Field{{Name: "img", Type: arrow.StructOf(arrow.Field{Name: "y", Type: str})},
		{Name: "n", Type: str, Nullable: true}, {Name: "id", Type: i64}, {Name: "new", Type: str}}, nil)
	got, ok := arrowmerge.Schemas(a, b)
	if !ok {
		t.Fatal("want a merge")
	}
	want := arrow.NewSchema([]arrow.Field{{Name: "id", Type: i64}, {Name: "n", Type: str, Nullable: true},
		{Name: "img", Type: arrow.StructOf(arrow.Field{Name: "x", Type: i64, Nullable: true}, arrow.Field{Name: "y", Type: str, Nullable: true})},
		{Name: "new", Type: str, Nullable: true}}, nil)
	if !got.Equal(want) {
		t.Errorf("merged\n%s\nwant\n%s", got, want)
	}
	if _, ok := arrowmerge.Schemas(a, arrow.NewSchema([]arrow.Field{{Name: "id", Type: str}}, nil)); ok {
		t.Error("int64 and string merged")
	}
}

func TestArray(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	b := array.NewStructBuilder(mem, arrow.StructOf(arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int64, Nullable: true}))
	b.Append(true)
	b.FieldBuilder(0).(*array.Int64Builder).Append(7)
	b.AppendNull()
	arr := b.NewArray()
	b.Release()
	defer arr.Release()
	to := arrow.StructOf(arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "y", Type: arrow.BinaryTypes.String, Nullable: true})
	got, err := arrowmerge.Array(arr, to, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	s := got.(*array.Struct)
	if s.Len() != 2 || !s.IsValid(0) || s.IsValid(1) || s.Field(0).(*array.Int64).Value(0) != 7 || s.Field(1).NullN() != 2 {
		t.Errorf("conformed %v", got)
	}
	if _, err := arrowmerge.Array(arr, arrow.BinaryTypes.String, mem); !errors.Is(err, arrowmerge.ErrNoMerge) {
		t.Errorf("struct to string: %v, want ErrNoMerge", err)
	}
}
