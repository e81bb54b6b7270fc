package avro

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"github.com/cdclake/cdclake/handlers/jsontext"
)

// Transcode appends to dst the Connect JSON payload of the Avro binary
// value b, which must hold exactly one value of s.
func (s *Schema) Transcode(b, dst []byte) ([]byte, error) {
	t := transcoder{b: b, out: dst}
	t.value(s.root)
	if t.err == nil && t.i != len(t.b) {
		t.fail("%d bytes after the value", len(t.b)-t.i)
	}
	if t.err != nil {
		return dst, fmt.Errorf("%w: schema id %d: %w", ErrMalformed, s.ID, t.err)
	}
	return t.out, nil
}

type transcoder struct {
	b   []byte
	i   int
	out []byte
	err error
}

func (t *transcoder) fail(format string, args ...any) {
	if t.err == nil {
		t.err = fmt.Errorf("at byte %d: %s", t.i, fmt.Sprintf(format, args...))
	}
}

// long reads a zig-zag varint.
func (t *transcoder) long() int64 {
	var u uint64
	for shift := uint(0); ; shift += 7 {
		if t.i >= len(t.b) {
			t.fail("value ends early")
			return 0
		}
		c := t.b[t.i]
		t.i++
		if shift == 63 && c > 1 {
			t.fail("varint longer than 64 bits")
			return 0
		}
		u |= uint64(c&0x7f) << shift
		if c < 0x80 {
			break
		}
	}
	return int64(u>>1) ^ -int64(u&1)
}

func (t *transcoder) int() int64 {
	v := t.long()
	if v < math.MinInt32 || v > math.MaxInt32 {
		t.fail("int %d out of 32-bit range", v)
		return 0
	}
	return v
}

// bytes reads a length-prefixed run, as a slice of the input.
func (t *transcoder) bytes() []byte {
	n := t.long()
	if t.err != nil {
		return nil
	}
	if n < 0 || n > int64(len(t.b)-t.i) {
		t.fail("length %d beyond the value's %d remaining bytes", n, len(t.b)-t.i)
		return nil
	}
	v := t.b[t.i : t.i+int(n)]
	t.i += int(n)
	return v
}

func (t *transcoder) fixed(n int) []byte {
	if n > len(t.b)-t.i {
		t.fail("fixed of %d bytes beyond the value's %d remaining bytes", n, len(t.b)-t.i)
		return nil
	}
	v := t.b[t.i : t.i+n]
	t.i += n
	return v
}

// count reads an array or map block header: the number of items, 0 at
// the end.
func (t *transcoder) count() int64 {
	n := t.long()
	if n < 0 {
		if n == math.MinInt64 {
			t.fail("invalid block count")
			return 0
		}
		n = -n
		if size := t.long(); size < 0 || size > int64(len(t.b)-t.i) {
			t.fail("block size %d beyond the value", size)
			return 0
		}
	}
	return n
}

// value transcodes one value of n. Every value the compiler accepts takes
// at least one byte, so the input's length bounds the work.
func (t *transcoder) value(n *node) {
	if t.err != nil {
		return
	}
	switch n.kind {
	case kNull:
		t.out = append(t.out, "null"...)
	case kBool:
		if t.i >= len(t.b) {
			t.fail("value ends early")
			return
		}
		switch t.b[t.i] {
		case 0:
			t.out = append(t.out, "false"...)
		case 1:
			t.out = append(t.out, "true"...)
		default:
			t.fail("boolean byte %d", t.b[t.i])
		}
		t.i++
	case kInt:
		t.out = strconv.AppendInt(t.out, t.int(), 10)
	case kLong:
		t.out = strconv.AppendInt(t.out, t.long(), 10)
	case kFloat:
		v := t.fixed(4)
		if v != nil {
			// The float's exact value: reading it back as a double and
			// narrowing gives the same float.
			t.out = appendFloat(t.out, float64(math.Float32frombits(binary.LittleEndian.Uint32(v))))
		}
	case kDouble:
		v := t.fixed(8)
		if v != nil {
			t.out = appendFloat(t.out, math.Float64frombits(binary.LittleEndian.Uint64(v)))
		}
	case kString:
		t.out = appendString(t.out, t.bytes())
	case kBytes:
		t.out = appendBase64(t.out, t.bytes())
	case kFixed:
		t.out = appendBase64(t.out, t.fixed(n.size))
	case kEnum:
		i := t.int()
		if t.err == nil && (i < 0 || i >= int64(len(n.symbols))) {
			t.fail("enum index %d of %d symbols", i, len(n.symbols))
			return
		}
		if t.err == nil {
			t.out = append(t.out, n.symbols[i]...)
		}
	case kArray:
		t.out = append(t.out, '[')
		t.items(func() { t.value(n.elem) })
		t.out = append(t.out, ']')
	case kMap:
		t.out = append(t.out, '{')
		t.items(func() {
			t.out = appendString(t.out, t.bytes())
			t.out = append(t.out, ':')
			t.value(n.elem)
		})
		t.out = append(t.out, '}')
	case kPairs:
		// JsonConverter writes a map with non-string keys as an array of
		// [key, value] pairs.
		t.out = append(t.out, '[')
		t.items(func() {
			t.out = append(t.out, '[')
			t.value(n.key)
			t.out = append(t.out, ',')
			t.value(n.val)
			t.out = append(t.out, ']')
		})
		t.out = append(t.out, ']')
	case kRecord:
		t.out = append(t.out, '{')
		for i, f := range n.fields {
			if i > 0 {
				t.out = append(t.out, ',')
			}
			t.out = append(t.out, f.name...)
			t.value(f.n)
		}
		t.out = append(t.out, '}')
	case kOptional:
		switch b := t.long(); {
		case t.err != nil:
		case b == n.null:
			t.out = append(t.out, "null"...)
		case b == 1-n.null:
			t.value(n.elem)
		default:
			t.fail("union branch %d of 2", b)
		}
	case kUnion:
		b := t.long()
		if t.err != nil {
			return
		}
		if b < 0 || b >= int64(len(n.fields)) {
			t.fail("union branch %d of %d", b, len(n.fields))
			return
		}
		if b == n.null {
			t.out = append(t.out, "null"...)
			return
		}
		t.out = append(t.out, '{')
		first := true
		for i, f := range n.fields {
			if f.n == nil {
				continue
			}
			if !first {
				t.out = append(t.out, ',')
			}
			first = false
			t.out = append(t.out, f.name...)
			if int64(i) == b {
				t.value(f.n)
			} else {
				t.out = append(t.out, "null"...)
			}
		}
		t.out = append(t.out, '}')
	}
}

// items reads the blocks of an array or map, calling item for each item
// after writing the comma between items.
func (t *transcoder) items(item func()) {
	first := true
	for k := t.count(); k > 0 && t.err == nil; k = t.count() {
		for ; k > 0 && t.err == nil; k-- {
			if !first {
				t.out = append(t.out, ',')
			}
			first = false
			item()
		}
	}
}

func appendFloat(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Infinity"`...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

func appendBase64(b []byte, v []byte) []byte {
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, v)
	return append(b, '"')
}

// appendString appends v as a JSON string. Bytes that are not UTF-8 are
// kept as they are, for the stages that check strings to reject.
func appendString(b []byte, v []byte) []byte { return jsontext.AppendString(b, v, false) }
