package schema

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/valyala/fastjson"
)

// Packed values hold the converted values of rows in a compact binary
// form, so that rows can wait without builders (a table's few rows) and
// later reach builders without being converted again: CompilePacker's
// Appenders write it, Replayers read it into builders.
//
// An entry is a header, uvarint(column<<1 | 1 for a value, 0 for NULL),
// then the value, by kind:
//
//	Bool                          one byte, 0 or 1
//	Int8–Int64, Date, Time,
//	Timestamp                     varint (the builder's integer)
//	Float32, Float64              8 bytes, little endian float64 bits
//	Decimal                       16 bytes: low, high (little endian)
//	String, DecimalText, JSON,
//	Binary                        uvarint length, the bytes
//	Struct, List, Map             uvarint length, the value's JSON text
//
// The nested kinds are converted (checked) on a scratch builder when
// logged and converted again from their JSON text when replayed.
type PackWriter struct {
	// Buf is what is written to: entries are appended to it.
	Buf []byte
}

// packCol writes the entries of one column.
type packCol struct {
	w   *PackWriter
	hdr uint64 // column<<1
}

func (l packCol) AppendNull() { l.w.Buf = binary.AppendUvarint(l.w.Buf, l.hdr) }

func (l packCol) value() []byte { return binary.AppendUvarint(l.w.Buf, l.hdr|1) }

func (l packCol) appendInt(n int64) { l.w.Buf = binary.AppendVarint(l.value(), n) }

func (l packCol) appendFloat(f float64) {
	l.w.Buf = binary.LittleEndian.AppendUint64(l.value(), math.Float64bits(f))
}

func (l packCol) appendBytes(v []byte) {
	d := binary.AppendUvarint(l.value(), uint64(len(v)))
	l.w.Buf = append(d, v...)
}

type (
	packBool      struct{ packCol }
	packText      struct{ packCol }
	packDecimal   struct{ packCol }
	packDate      struct{ packCol }
	packTimestamp struct{ packCol }
)

func (l packBool) Append(v bool) {
	b := byte(0)
	if v {
		b = 1
	}
	l.w.Buf = append(l.value(), b)
}

func (l packText) Append(v []byte) { l.appendBytes(v) }

func (l packDecimal) Append(n decimal128.Num) {
	d := binary.LittleEndian.AppendUint64(l.value(), n.LowBits())
	l.w.Buf = binary.LittleEndian.AppendUint64(d, uint64(n.HighBits()))
}

func (l packDate) Append(d arrow.Date32) { l.appendInt(int64(d)) }

func (l packTimestamp) Append(t arrow.Timestamp) { l.appendInt(int64(t)) }

// CompilePacker returns an Appender that converts values of type t as
// Compile's would and writes them to w as the entries of column col. It
// writes nothing more for a value that does not convert: the caller
// drops the row's entries. scratch, a builder of t.Arrow(), is where the
// nested kinds (Struct, List, Map) are checked; it is nil for the others,
// and emptying it is the caller's.
func (c *Converters) CompilePacker(name string, col int, t Type, w *PackWriter, scratch array.Builder) Appender {
	fail := func(v *fastjson.Value, reason string) error { return convErr(name, t, v, reason) }
	l := packCol{w: w, hdr: uint64(col) << 1}
	switch t.Kind {
	case Null:
		return func(v *fastjson.Value) error {
			if isNull(v) {
				l.AppendNull()
				return nil
			}
			return fail(v, "column has no known type")
		}
	case Bool:
		return compileBool(packBool{l}, fail)
	case Int8, Int16, Int32, Int64:
		lo, hi := intRange(t.Kind)
		return compileIntTo(t, lo, hi, l.appendInt, l.AppendNull, fail)
	case Float32:
		return compileFloatTo(32, l.appendFloat, l.AppendNull, fail)
	case Float64:
		return compileFloatTo(64, l.appendFloat, l.AppendNull, fail)
	case String, DecimalText:
		return compileTextTo(t, packText{l}, fail)
	case JSON:
		return compileJSONTo(packText{l}, fail)
	case Binary:
		return compileBinaryTo(t, packText{l}, fail)
	case Decimal:
		return compileDecimal(t, packDecimal{l}, fail)
	case Date:
		return compileDate(t, packDate{l}, fail)
	case Time:
		return compileTimeTo(t, l.appendInt, l.AppendNull, fail)
	case Timestamp:
		return compileTimestamp(t, packTimestamp{l}, fail)
	case Struct, List, Map:
		check := c.Compile(name, t, scratch)
		var text []byte
		return func(v *fastjson.Value) error {
			if isNull(v) {
				l.AppendNull()
				return nil
			}
			if err := check(v); err != nil {
				return err
			}
			text = v.MarshalTo(text[:0])
			l.appendBytes(text)
			return nil
		}
	}
	panic(fmt.Sprintf("schema: cannot compile kind %d", t.Kind))
}

// intRange is the range of the integer kind k.
func intRange(k Kind) (lo, hi int64) {
	switch k {
	case Int8:
		return math.MinInt8, math.MaxInt8
	case Int16:
		return math.MinInt16, math.MaxInt16
	case Int32:
		return math.MinInt32, math.MaxInt32
	}
	return math.MinInt64, math.MaxInt64
}

// A Replayer appends the value at the start of data, an entry's value
// (after its header) of packed values, to the builder it was compiled for,
// and returns the rest of data.
type Replayer func(data []byte) ([]byte, error)

// ErrPackedCorrupt is returned for packed values that do not decode.
var ErrPackedCorrupt = errors.New("packed values are corrupt")

// ReplayText returns the Replayer of a column whose values CompileText
// appends to col.
func ReplayText(col *TextColumn) Replayer {
	return func(data []byte) ([]byte, error) {
		v, rest, err := packedBytes(data)
		if err == nil {
			col.Append(v)
		}
		return rest, err
	}
}

// Replay returns the Replayer of a column of type t whose values app,
// compiled by Compile for b, appends to b: it appends the logged values
// without converting them again, except those of the nested kinds, which
// go through app from their JSON text.
func Replay(t Type, b array.Builder, app Appender) Replayer {
	switch bb := b.(type) {
	case *array.BooleanBuilder:
		return func(data []byte) ([]byte, error) {
			if len(data) < 1 || data[0] > 1 {
				return nil, ErrPackedCorrupt
			}
			bb.Append(data[0] == 1)
			return data[1:], nil
		}
	case *array.Int8Builder:
		return replayInt(func(n int64) { bb.Append(int8(n)) })
	case *array.Int16Builder:
		return replayInt(func(n int64) { bb.Append(int16(n)) })
	case *array.Int32Builder:
		return replayInt(func(n int64) { bb.Append(int32(n)) })
	case *array.Int64Builder:
		return replayInt(bb.Append)
	case *array.Date32Builder:
		return replayInt(func(n int64) { bb.Append(arrow.Date32(n)) })
	case *array.Time32Builder:
		return replayInt(func(n int64) { bb.Append(arrow.Time32(n)) })
	case *array.Time64Builder:
		return replayInt(func(n int64) { bb.Append(arrow.Time64(n)) })
	case *array.TimestampBuilder:
		return replayInt(func(n int64) { bb.Append(arrow.Timestamp(n)) })
	case *array.Float32Builder:
		return replayFloat(func(f float64) { bb.Append(float32(f)) })
	case *array.Float64Builder:
		return replayFloat(bb.Append)
	case *array.Decimal128Builder:
		return func(data []byte) ([]byte, error) {
			if len(data) < 16 {
				return nil, ErrPackedCorrupt
			}
			lo, hi := binary.LittleEndian.Uint64(data), binary.LittleEndian.Uint64(data[8:])
			bb.Append(decimal128.New(int64(hi), lo))
			return data[16:], nil
		}
	}
	switch t.Kind {
	case Null:
		// Logged as NULL only.
		return func([]byte) ([]byte, error) { return nil, ErrPackedCorrupt }
	case String, DecimalText, JSON, Binary:
		var tb textTarget
		switch bb := b.(type) {
		case *array.StringBuilder:
			tb = bb.BinaryBuilder
		case *array.BinaryBuilder:
			tb = bb
		case *array.ExtensionBuilder:
			tb = bb.StorageBuilder().(*array.StringBuilder).BinaryBuilder
		}
		if tb != nil {
			return func(data []byte) ([]byte, error) {
				v, rest, err := packedBytes(data)
				if err == nil {
					tb.Append(v)
				}
				return rest, err
			}
		}
	case Struct, List, Map:
		var p fastjson.Parser
		return func(data []byte) ([]byte, error) {
			text, rest, err := packedBytes(data)
			if err != nil {
				return nil, err
			}
			v, err := p.ParseBytes(text)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrPackedCorrupt, err)
			}
			return rest, app(v)
		}
	}
	panic(fmt.Sprintf("schema: cannot replay %s into %T", t, b))
}

func replayInt(app func(int64)) Replayer {
	return func(data []byte) ([]byte, error) {
		n, k := binary.Varint(data)
		if k <= 0 {
			return nil, ErrPackedCorrupt
		}
		app(n)
		return data[k:], nil
	}
}

func replayFloat(app func(float64)) Replayer {
	return func(data []byte) ([]byte, error) {
		if len(data) < 8 {
			return nil, ErrPackedCorrupt
		}
		app(math.Float64frombits(binary.LittleEndian.Uint64(data)))
		return data[8:], nil
	}
}

// packedBytes reads a length-prefixed value.
func packedBytes(data []byte) (v, rest []byte, err error) {
	n, k := binary.Uvarint(data)
	if k <= 0 || uint64(len(data)-k) < n {
		return nil, nil, ErrPackedCorrupt
	}
	end := k + int(n)
	return data[k:end:end], data[end:], nil
}

// PackedEntry reads the header of the entry at the start of data: its
// column, whether a value follows (false: NULL), and the rest of data.
func PackedEntry(data []byte) (col int, value bool, rest []byte, err error) {
	h, k := binary.Uvarint(data)
	if k <= 0 || h>>1 > math.MaxInt32 {
		return 0, false, nil, ErrPackedCorrupt
	}
	return int(h >> 1), h&1 == 1, data[k:], nil
}
