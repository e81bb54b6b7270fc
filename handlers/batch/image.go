package batch

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/handlers/schema"
)

// imageStruct builds an image's struct column (before or after) of the
// images layout. Its text, JSON and binary columns, most of a CDC
// table's, gather their values in schema.TextColumns; the others in Arrow
// builders of the buffer's allocator. The file makes no Arrow builder for
// the struct's field: newRecord takes the column from here.
type imageStruct struct {
	field int // the column in the table version's schema
	typ   *arrow.StructType
	valid []byte // a bit per row, 0 for an absent image
	n     int
	nulls int
	// Per struct field, one of text and builders is set.
	texts    []*schema.TextColumn
	builders []array.Builder
}

// newImageStruct returns the struct column of field, of type typ, whose
// fields are t's columns, with their appenders compiled by conv and their
// replayers.
func newImageStruct(mem memory.Allocator, conv *schema.Converters, t *schema.Table, field int, typ *arrow.StructType) (*imageStruct, []schema.Appender, []schema.Replayer) {
	s := &imageStruct{field: field, typ: typ, texts: make([]*schema.TextColumn, len(t.Columns)),
		builders: make([]array.Builder, len(t.Columns))}
	app := make([]schema.Appender, len(t.Columns))
	rep := make([]schema.Replayer, len(t.Columns))
	for j, c := range t.Columns {
		ft := typ.Field(j).Type
		if tc := textColumnFor(c.Type, ft); tc != nil {
			s.texts[j] = tc
			app[j] = conv.CompileText(c.Name, c.Type, tc)
			rep[j] = schema.ReplayText(tc)
			continue
		}
		s.builders[j] = array.NewBuilder(mem, ft)
		app[j] = conv.Compile(c.Name, c.Type, s.builders[j])
		rep[j] = schema.Replay(c.Type, s.builders[j], app[j])
	}
	return s, app, rep
}

// textColumnFor returns a TextColumn for a column of type t landing as
// ft, or nil when its values go to an Arrow builder.
func textColumnFor(t schema.Type, ft arrow.DataType) *schema.TextColumn {
	if !schema.IsText(t) || !arrow.TypeEqual(ft, t.Arrow()) {
		return nil
	}
	return schema.NewVarColumn(ft)
}

// appendValid starts a present image: its fields are appended next.
func (s *imageStruct) appendValid() {
	if s.n&7 == 0 {
		s.valid = append(s.valid, 0)
	}
	s.valid[s.n>>3] |= 1 << (s.n & 7)
	s.n++
}

// appendNull appends an absent image: NULL in the struct. Its fields
// take their NULLs from the image builder (imageBuilder.settle).
func (s *imageStruct) appendNull() {
	if s.n&7 == 0 {
		s.valid = append(s.valid, 0)
	}
	s.n++
	s.nulls++
}

// reserve makes room for n more rows.
func (s *imageStruct) reserve(n int) {
	for j, tc := range s.texts {
		if tc != nil {
			tc.Reserve(n)
		} else {
			s.builders[j].Reserve(n)
		}
	}
}

// size is the memory of the struct held outside the buffer's allocator
// (which counts the builders').
func (s *imageStruct) size() int64 {
	n := int64(cap(s.valid))
	for _, tc := range s.texts {
		if tc != nil {
			n += tc.Size()
		}
	}
	return n
}

// newArray returns the rows appended since the last call as a struct
// array in buffers of mem, and empties s; with mem nil, its text columns
// hand their slices to the array (TextColumn.MoveArray).
func (s *imageStruct) newArray(mem memory.Allocator) arrow.Array {
	arrs := make([]arrow.Array, len(s.texts))
	children := make([]arrow.ArrayData, len(s.texts))
	for j, tc := range s.texts {
		if tc != nil && mem == nil {
			arrs[j] = tc.MoveArray()
		} else if tc != nil {
			arrs[j] = tc.NewArray(mem)
		} else {
			arrs[j] = s.builders[j].NewArray()
		}
		children[j] = arrs[j].Data()
	}
	var valid *memory.Buffer
	switch {
	case s.nulls > 0 && mem == nil:
		valid, s.valid = schema.BufferOf(s.valid), nil
	case s.nulls > 0:
		valid = schema.CopyToBuffer(mem, s.valid)
	}
	d := array.NewData(s.typ, s.n, []*memory.Buffer{valid}, children, s.nulls, 0)
	if valid != nil {
		valid.Release()
	}
	for _, a := range arrs {
		a.Release()
	}
	out := array.MakeFromData(d)
	d.Release()
	s.valid, s.n, s.nulls = s.valid[:0], 0, 0
	return out
}

// release frees the Arrow builders.
func (s *imageStruct) release() {
	for _, b := range s.builders {
		if b != nil {
			b.Release()
		}
	}
}
