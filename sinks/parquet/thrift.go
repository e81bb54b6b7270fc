package parquet

import (
	"encoding/binary"
	"math"
)

// Thrift compact protocol type codes of the fields the footer and the page
// headers use.
const (
	tTrue   = 1
	tFalse  = 2
	tByte   = 3
	tI16    = 4
	tI32    = 5
	tI64    = 6
	tBinary = 8
	tList   = 9
	tStruct = 12
)

// tw writes Thrift structs in the compact protocol, the encoding of
// Parquet's page headers and footer, straight into a byte slice. Field
// ids must rise within a struct (deltas are encoded, as the protocol
// prefers); the caller starts and ends every nested struct.
type tw struct {
	b    []byte
	last int16   // id of the last field written in the open struct
	outs []int16 // last ids of the enclosing structs
}

func (t *tw) uvarint(v uint64) { t.b = binary.AppendUvarint(t.b, v) }

func (t *tw) field(id int16, typ byte) {
	if d := id - t.last; d > 0 && d <= 15 {
		t.b = append(t.b, byte(d)<<4|typ)
	} else {
		t.b = append(t.b, typ)
		t.uvarint(uint64(uint16((id << 1) ^ (id >> 15))))
	}
	t.last = id
}

func (t *tw) i32(id int16, v int32) {
	t.field(id, tI32)
	t.uvarint(uint64(uint32((v << 1) ^ (v >> 31))))
}

func (t *tw) i16(id int16, v int16) {
	t.field(id, tI16)
	t.uvarint(uint64(uint16((v << 1) ^ (v >> 15))))
}

func (t *tw) i64(id int16, v int64) {
	t.field(id, tI64)
	t.uvarint(uint64((v << 1) ^ (v >> 63)))
}

func (t *tw) bool(id int16, v bool) {
	if v {
		t.field(id, tTrue)
	} else {
		t.field(id, tFalse)
	}
}

func (t *tw) byte(id int16, v int8) {
	t.field(id, tByte)
	t.b = append(t.b, byte(v))
}

func (t *tw) binary(id int16, v []byte) {
	t.field(id, tBinary)
	t.uvarint(uint64(len(v)))
	t.b = append(t.b, v...)
}

func (t *tw) string(id int16, v string) {
	t.field(id, tBinary)
	t.uvarint(uint64(len(v)))
	t.b = append(t.b, v...)
}

// begin opens a struct field; end closes it.
func (t *tw) begin(id int16) {
	t.field(id, tStruct)
	t.outs = append(t.outs, t.last)
	t.last = 0
}

func (t *tw) end() {
	t.b = append(t.b, 0)
	t.last = t.outs[len(t.outs)-1]
	t.outs = t.outs[:len(t.outs)-1]
}

// list opens a list field of n elements of type typ. Struct elements are
// written between elem and end; others with the element writers below.
func (t *tw) list(id int16, typ byte, n int) {
	t.field(id, tList)
	if n < 15 {
		t.b = append(t.b, byte(n)<<4|typ)
	} else {
		t.b = append(t.b, 0xf0|typ)
		t.uvarint(uint64(n))
	}
}

// elem opens a struct element of a list.
func (t *tw) elem() {
	t.outs = append(t.outs, t.last)
	t.last = 0
}

func (t *tw) elemI32(v int32) { t.uvarint(uint64(uint32((v << 1) ^ (v >> 31)))) }

func (t *tw) elemString(v string) {
	t.uvarint(uint64(len(v)))
	t.b = append(t.b, v...)
}

// stop ends the top-level struct.
func (t *tw) stop() { t.b = append(t.b, 0) }

func float32Bytes(v float32) []byte {
	return binary.LittleEndian.AppendUint32(nil, math.Float32bits(v))
}
func float64Bytes(v float64) []byte {
	return binary.LittleEndian.AppendUint64(nil, math.Float64bits(v))
}
