package batch

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/handlers/schema"
)

// nameList builds a column of lists of names: an image's absent columns
// (schema.ColBeforeAbsent, schema.ColAfterAbsent), a NULL list when the
// row has no such image. An update of a wide table names tens of columns
// per row, and Arrow's list builder appends each name's offset through
// an interface call; here a row's names are plain appends to slices that
// the next file of the buffer reuses, copied into the allocator's
// buffers once, when the array is made.
type nameList struct {
	field int // the column in the table version's schema
	typ   arrow.DataType
	// valid has a bit per list; offs has each list's first name, and one
	// more for the end; ends has 0 and each name's end in data (the
	// names' string offsets).
	valid []byte
	offs  []int32
	ends  []int32
	data  []byte
	rows  int
	nulls int
}

func newNameList(field int, typ arrow.DataType) *nameList {
	return &nameList{field: field, typ: typ, offs: []int32{0}, ends: []int32{0}}
}

// appendNull appends a NULL list.
func (l *nameList) appendNull() {
	l.grow()
	l.nulls++
	l.rows++
	l.offs = append(l.offs, int32(len(l.ends)-1))
}

// appendNames appends a list of names.
func (l *nameList) appendNames(names [][]byte) {
	l.grow()
	bitutil.SetBit(l.valid, l.rows)
	l.rows++
	for _, name := range names {
		l.data = append(l.data, name...)
		l.ends = append(l.ends, int32(len(l.data)))
	}
	l.offs = append(l.offs, int32(len(l.ends)-1))
}

// grow makes room in valid for one more list.
func (l *nameList) grow() {
	if l.rows%8 == 0 {
		l.valid = append(l.valid, 0)
	}
}

// reserve makes room for n more lists.
func (l *nameList) reserve(n int) {
	if cap(l.offs)-len(l.offs) < n {
		l.offs = append(make([]int32, 0, len(l.offs)+n), l.offs...)
	}
}

// size is the memory the list holds.
func (l *nameList) size() int64 {
	return int64(cap(l.valid) + 4*cap(l.offs) + 4*cap(l.ends) + cap(l.data))
}

// newArray returns the lists appended since the last call, in buffers of
// mem, and empties l (keeping its slices for the next lists); with mem
// nil, the array holds l's slices themselves and l starts new ones.
func (l *nameList) newArray(mem memory.Allocator) arrow.Array {
	buf := schema.BufferOf
	if mem != nil {
		buf = func(b []byte) *memory.Buffer { return schema.CopyToBuffer(mem, b) }
	}
	var valid *memory.Buffer
	if l.nulls > 0 {
		valid = buf(l.valid)
	}
	names := array.NewData(arrow.BinaryTypes.String, len(l.ends)-1,
		[]*memory.Buffer{nil, buf(arrow.Int32Traits.CastToBytes(l.ends)), buf(l.data)}, nil, 0, 0)
	lists := array.NewData(l.typ, l.rows,
		[]*memory.Buffer{valid, buf(arrow.Int32Traits.CastToBytes(l.offs))}, []arrow.ArrayData{names}, l.nulls, 0)
	releaseBuffers(names)
	releaseBuffers(lists)
	names.Release()
	out := array.MakeFromData(lists)
	lists.Release()
	if mem == nil {
		l.valid, l.offs, l.ends, l.data = nil, []int32{0}, []int32{0}, nil
	} else {
		l.valid, l.offs, l.ends, l.data = l.valid[:0], append(l.offs[:0], 0), append(l.ends[:0], 0), l.data[:0]
	}
	l.rows, l.nulls = 0, 0
	return out
}

// releaseBuffers drops the references copied handed to NewData, which
// took its own.
func releaseBuffers(d *array.Data) {
	for _, b := range d.Buffers() {
		if b != nil {
			b.Release()
		}
	}
}
