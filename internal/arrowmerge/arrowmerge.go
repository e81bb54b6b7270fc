// Package arrowmerge merges the Arrow schemas of files that hold the same
// table at different versions, and conforms their records to the merge:
// columns are matched by name, a column of NULLs only (Arrow's null type)
// takes the other's type, structs merge field by field, and any other type
// must be the same.
package arrowmerge

import (
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// ErrNoMerge is returned for files whose schemas do not merge into one.
var ErrNoMerge = errors.New("the files' schemas do not merge")

// WithoutFieldIDs returns sch without the Parquet field ids a reader gives
// its fields (-1: the lake's files carry none): an Iceberg reader finds the
// columns of a file without ids by the table's name mapping, and would
// take ids, even -1, for the columns' own.
func WithoutFieldIDs(sch *arrow.Schema) *arrow.Schema {
	md := sch.Metadata()
	return arrow.NewSchema(stripFields(sch.Fields()), &md)
}

func stripFields(fields []arrow.Field) []arrow.Field {
	out := make([]arrow.Field, len(fields))
	for i, f := range fields {
		if i := f.Metadata.FindKey("PARQUET:field_id"); i >= 0 {
			keys, vals := slices.Delete(slices.Clone(f.Metadata.Keys()), i, i+1), slices.Delete(slices.Clone(f.Metadata.Values()), i, i+1)
			f.Metadata = arrow.NewMetadata(keys, vals)
		}
		switch t := f.Type.(type) {
		case *arrow.StructType:
			f.Type = arrow.StructOf(stripFields(t.Fields())...)
		case *arrow.ListType:
			ef := stripFields([]arrow.Field{t.ElemField()})[0]
			f.Type = arrow.ListOfField(ef)
		case *arrow.LargeListType:
			ef := stripFields([]arrow.Field{t.ElemField()})[0]
			f.Type = arrow.LargeListOfField(ef)
		case *arrow.MapType:
			kv := stripFields([]arrow.Field{t.KeyField(), t.ItemField()})
			m := arrow.MapOfFields(kv[0], kv[1])
			m.KeysSorted = t.KeysSorted
			f.Type = m
		}
		out[i] = f
	}
	return out
}

// Schemas returns the schema of a's and b's fields by name, in the
// order they first come: a field of NULLs only (arrow's null type) takes
// the other's type, structs merge field by field; other types must be the
// same. The metadata is b's (the later file's).
func Schemas(a, b *arrow.Schema) (*arrow.Schema, bool) {
	fields, ok := Fields(a.Fields(), b.Fields())
	if !ok {
		return nil, false
	}
	md := b.Metadata()
	return arrow.NewSchema(fields, &md), true
}

// Fields merges two field lists by name, as Schemas does.
func Fields(a, b []arrow.Field) ([]arrow.Field, bool) {
	out := slices.Clone(a)
	for _, fb := range b {
		i := slices.IndexFunc(out, func(f arrow.Field) bool { return f.Name == fb.Name })
		if i < 0 {
			fb.Nullable = true // the files before lack it
			out = append(out, fb)
			continue
		}
		t, ok := Types(out[i].Type, fb.Type)
		if !ok {
			return nil, false
		}
		out[i].Type = t
		out[i].Nullable = out[i].Nullable || fb.Nullable
	}
	for i := range out {
		if slices.IndexFunc(b, func(f arrow.Field) bool { return f.Name == out[i].Name }) < 0 {
			out[i].Nullable = true // the later file lacks it
		}
	}
	return out, true
}

// Types merges two column types, as Schemas does.
func Types(a, b arrow.DataType) (arrow.DataType, bool) {
	switch {
	case a.ID() == arrow.NULL:
		return b, true
	case b.ID() == arrow.NULL, arrow.TypeEqual(a, b):
		return a, true
	}
	sa, ok1 := a.(*arrow.StructType)
	sb, ok2 := b.(*arrow.StructType)
	if !ok1 || !ok2 {
		return nil, false
	}
	fields, ok := Fields(sa.Fields(), sb.Fields())
	if !ok {
		return nil, false
	}
	return arrow.StructOf(fields...), true
}

// Record returns rec under sch, whose fields are a merge of its own
// (Schemas): a column it lacks, or of NULLs only, is NULLs.
func Record(rec arrow.RecordBatch, sch *arrow.Schema, mem memory.Allocator) (arrow.RecordBatch, error) {
	n := int(rec.NumRows())
	cols := make([]arrow.Array, sch.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, f := range sch.Fields() {
		idx := rec.Schema().FieldIndices(f.Name)
		if len(idx) == 0 {
			cols[i] = array.MakeArrayOfNull(mem, f.Type, n)
			continue
		}
		c, err := Array(rec.Column(idx[0]), f.Type, mem)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", f.Name, err)
		}
		cols[i] = c
	}
	return array.NewRecordBatch(sch, cols, int64(n)), nil
}

// conform returns arr as an array of type to, a merge of its own type.
func Array(arr arrow.Array, to arrow.DataType, mem memory.Allocator) (arrow.Array, error) {
	if arrow.TypeEqual(arr.DataType(), to) {
		arr.Retain()
		return arr, nil
	}
	if arr.DataType().ID() == arrow.NULL {
		return array.MakeArrayOfNull(mem, to, arr.Len()), nil
	}
	st, ok1 := to.(*arrow.StructType)
	src, ok2 := arr.(*array.Struct)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("%w: %s to %s", ErrNoMerge, arr.DataType(), to)
	}
	n := arr.Len()
	kids := make([]arrow.ArrayData, st.NumFields())
	defer func() {
		for _, k := range kids {
			if k != nil {
				k.Release()
			}
		}
	}()
	srcType := src.DataType().(*arrow.StructType)
	for i, f := range st.Fields() {
		var kid arrow.Array
		if j, ok := srcType.FieldIdx(f.Name); ok {
			var err error
			if kid, err = Array(src.Field(j), f.Type, mem); err != nil {
				return nil, err
			}
		} else {
			kid = array.MakeArrayOfNull(mem, f.Type, n)
		}
		kids[i] = kid.Data()
		kids[i].Retain()
		kid.Release()
	}
	valid := memory.NewResizableBuffer(mem)
	valid.Resize(int(bitutil.BytesForBits(int64(n))))
	defer valid.Release()
	for i := range n {
		bitutil.SetBitTo(valid.Bytes(), i, src.IsValid(i))
	}
	data := array.NewData(to, n, []*memory.Buffer{valid}, kids, src.NullN(), 0)
	defer data.Release()
	return array.MakeFromData(data), nil
}
