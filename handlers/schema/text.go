package schema

import (
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/valyala/fastjson"
)

// TextColumn gathers a column of variable-length values (string, binary,
// or an extension type stored as one of them, JSON) in plain slices: a
// value is two appends and a bit, where Arrow's builders take a
// reservation, an offset appended through a function value and a buffer
// check per value. NewArray copies the values into an Arrow array once,
// and the slices stay for the next values. A TextColumn is not safe for
// concurrent use.
type TextColumn struct {
	typ   arrow.DataType // the arrays' type
	valid []byte         // a bit per value, 1 for a value, 0 for NULL
	offs  []int32        // 0, then each value's end in data
	data  []byte
	n     int
	nulls int
}

// NewTextColumn returns an empty string column.
func NewTextColumn() *TextColumn { return &TextColumn{typ: arrow.BinaryTypes.String, offs: []int32{0}} }

// NewVarColumn returns an empty column of type dt, or nil when dt is not
// string, binary or an extension type stored as one of them.
func NewVarColumn(dt arrow.DataType) *TextColumn {
	st := dt
	if ext, ok := dt.(arrow.ExtensionType); ok {
		st = ext.StorageType()
	}
	if !arrow.TypeEqual(st, arrow.BinaryTypes.String) && !arrow.TypeEqual(st, arrow.BinaryTypes.Binary) {
		return nil
	}
	return &TextColumn{typ: dt, offs: []int32{0}}
}

// Append appends v.
func (c *TextColumn) Append(v []byte) {
	if c.n&7 == 0 {
		c.valid = append(c.valid, 0)
	}
	c.valid[c.n>>3] |= 1 << (c.n & 7)
	c.data = append(doubling(c.data, len(v)), v...)
	if len(c.data) > math.MaxInt32 {
		panic(fmt.Sprintf("schema: a text column holds more than %d bytes", math.MaxInt32))
	}
	c.pushOff()
	c.n++
}

// pushOff appends the end of the last value.
func (c *TextColumn) pushOff() {
	c.offs = append(doubling(c.offs, 1), int32(len(c.data)))
}

// doubling returns s with room for n more elements, at least twice as
// large when it grows: append grows large slices by a quarter, copying a
// column's bytes about five times over while it fills.
func doubling[S ~[]E, E any](s S, n int) S {
	if cap(s)-len(s) >= n {
		return s
	}
	return slices.Grow(s, max(n, cap(s)))
}

// AppendString appends v.
func (c *TextColumn) AppendString(v string) {
	c.Append(unsafe.Slice(unsafe.StringData(v), len(v))) // read only
}

// AppendNull appends a NULL.
func (c *TextColumn) AppendNull() {
	if c.n&7 == 0 {
		c.valid = append(c.valid, 0)
	}
	c.pushOff()
	c.n++
	c.nulls++
}

// AppendNulls appends k NULLs.
func (c *TextColumn) AppendNulls(k int) {
	if k <= 0 {
		return
	}
	for len(c.valid) < (c.n+k+7)>>3 {
		c.valid = append(c.valid, 0)
	}
	c.offs = doubling(c.offs, k)
	end := int32(len(c.data))
	for range k {
		c.offs = append(c.offs, end)
	}
	c.n += k
	c.nulls += k
}

// Reset drops the values appended since the last NewArray, keeping the
// slices.
func (c *TextColumn) Reset() {
	c.valid, c.offs, c.data = c.valid[:0], c.offs[:1], c.data[:0]
	c.n, c.nulls = 0, 0
}

// Len is the number of values appended since the last NewArray.
func (c *TextColumn) Len() int { return c.n }

// Reserve makes room for n more values.
func (c *TextColumn) Reserve(n int) {
	if cap(c.offs)-len(c.offs) < n {
		offs := make([]int32, len(c.offs), len(c.offs)+n)
		copy(offs, c.offs)
		c.offs = offs
	}
}

// Size is the memory the column holds.
func (c *TextColumn) Size() int64 {
	return int64(cap(c.valid) + 4*cap(c.offs) + cap(c.data))
}

// NewArray returns the values appended since the last call as an Arrow
// array of the column's type in buffers of mem, and empties c, keeping
// its slices.
func (c *TextColumn) NewArray(mem memory.Allocator) arrow.Array {
	var valid *memory.Buffer
	if c.nulls > 0 {
		valid = CopyToBuffer(mem, c.valid)
	}
	out := c.array(valid, CopyToBuffer(mem, arrow.Int32Traits.CastToBytes(c.offs)), CopyToBuffer(mem, c.data))
	c.valid, c.offs, c.data = c.valid[:0], append(c.offs[:0], 0), c.data[:0]
	c.n, c.nulls = 0, 0
	return out
}

// MoveArray returns the values appended since the last call as an Arrow
// array of the column's type that holds c's slices, not a copy of them,
// and empties c, which starts new slices. It suits a column's last array.
func (c *TextColumn) MoveArray() arrow.Array {
	var valid *memory.Buffer
	if c.nulls > 0 {
		valid = BufferOf(c.valid)
	}
	out := c.array(valid, BufferOf(arrow.Int32Traits.CastToBytes(c.offs)), BufferOf(c.data))
	c.valid, c.offs, c.data = nil, []int32{0}, nil
	c.n, c.nulls = 0, 0
	return out
}

// array returns the column's array with the given buffers, which it
// releases (the array holds its own references).
func (c *TextColumn) array(valid, offs, data *memory.Buffer) arrow.Array {
	ext, isExt := c.typ.(arrow.ExtensionType)
	st := c.typ
	if isExt {
		st = ext.StorageType()
	}
	d := array.NewData(st, c.n, []*memory.Buffer{valid, offs, data}, nil, c.nulls, 0)
	for _, b := range []*memory.Buffer{valid, offs, data} {
		if b != nil {
			b.Release()
		}
	}
	out := array.MakeFromData(d)
	d.Release()
	if isExt {
		storage := out
		out = array.NewExtensionArrayWithStorage(ext, storage)
		storage.Release()
	}
	return out
}

// BufferOf returns a buffer holding b itself, not a copy (nil when b is
// empty): the garbage collector frees it.
func BufferOf(b []byte) *memory.Buffer {
	if len(b) == 0 {
		return nil
	}
	return memory.NewBufferBytes(b)
}

// CopyToBuffer returns a buffer of mem holding a copy of b (nil when b
// is empty).
func CopyToBuffer(mem memory.Allocator, b []byte) *memory.Buffer {
	if len(b) == 0 {
		return nil
	}
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(len(b))
	copy(buf.Bytes(), b)
	return buf
}

// CompileText returns an Appender writing values of t into col, made by
// NewVarColumn(t.Arrow()), as Compile does into a builder of t.Arrow().
// t must be one of the kinds IsText accepts.
func (c *Converters) CompileText(name string, t Type, col *TextColumn) Appender {
	fail := func(v *fastjson.Value, reason string) error {
		col.AppendNull()
		return convErr(name, t, v, reason)
	}
	switch t.Kind {
	case String, DecimalText:
		return compileTextTo(t, col, fail)
	case JSON:
		return compileJSONTo(col, fail)
	case Binary:
		return compileBinaryTo(t, col, fail)
	}
	panic(fmt.Sprintf("schema: CompileText of kind %d", t.Kind))
}

// IsText reports whether t's values land through CompileText: text,
// JSON and binary values.
func IsText(t Type) bool {
	switch t.Kind {
	case String, DecimalText, JSON, Binary:
		return true
	}
	return false
}
