package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/valyala/fastjson"
)

// rowLog holds the rows of a file that has no builders: a file opens with
// one, and a file whose builders spilled logs its next rows. Each row is
// kept as it came, in a compact binary form with its images and event as
// JSON text, once a checker found that it converts; the rows move to
// builders (thaw) when the log costs about what builders would, or when
// the file is written. A file of a few rows then costs those rows' bytes,
// not builders (tens of KB each): many tables' files fit the memory bound
// without closing early.
//
// A row is: kind, op and flags (one byte each); offset and ingest time
// (varints); the operation time when it has one; table, transaction id,
// position and statement; for each extra column of the table version, a
// tag (absent, NULL, value), the change's kind of it and its value; then
// the before image, after image and event that are present. Strings are
// length-prefixed (uvarint).
type rowLog struct {
	data []byte
	rows int
}

const (
	logHasTS = 1 << iota
	logBefore
	logAfter
	logRaw
)

const (
	logExtraAbsent = iota
	logExtraNull
	logExtraValue
)

// add appends c, at offset, and returns its event's JSON text (nil
// without one), which stays valid until the next add; drop takes it out
// again.
func (l *rowLog) add(t *schema.Table, c *change.Change, offset, ingested int64) (mark int, raw []byte) {
	mark = len(l.data)
	d := l.data
	flags := byte(0)
	if c.HasTS {
		flags |= logHasTS
	}
	if c.Before.Present() {
		flags |= logBefore
	}
	if c.After.Present() {
		flags |= logAfter
	}
	if c.Raw != nil {
		flags |= logRaw
	}
	d = append(d, byte(c.Kind), byte(c.Op), flags)
	d = binary.AppendVarint(d, offset)
	d = binary.AppendVarint(d, ingested)
	if c.HasTS {
		d = binary.AppendVarint(d, c.TSMicros)
	}
	d = appendString(d, c.Table)
	d = appendString(d, c.Xid)
	d = appendString(d, c.Pos)
	d = appendString(d, c.Statement)
	for _, col := range t.Extras {
		i := extraOf(c, col.Name)
		switch {
		case i < 0:
			d = append(d, logExtraAbsent)
		case c.Extras[i].Null:
			d = append(d, logExtraNull, byte(c.Extras[i].Kind))
		case col.Kind == change.ExtraTimestamp:
			d = append(d, logExtraValue, byte(c.Extras[i].Kind))
			d = binary.AppendVarint(d, c.Extras[i].Micros)
		default:
			d = append(d, logExtraValue, byte(c.Extras[i].Kind))
			d = appendBytes(d, c.ExtraBytes(c.Extras[i]))
		}
	}
	if c.Before.Present() {
		d = appendJSON(d, c.Before.Obj.MarshalTo)
	}
	if c.After.Present() {
		d = appendJSON(d, c.After.Obj.MarshalTo)
	}
	if c.Raw != nil {
		at := len(d)
		d = appendJSON(d, c.Raw.MarshalTo)
		raw = d[at+jsonLenBytes:]
	}
	l.data = d
	l.rows++
	return mark, raw
}

// drop takes the row added at mark out again.
func (l *rowLog) drop(mark int) {
	l.data = l.data[:mark]
	l.rows--
}

// extraOf returns the index of c's first extra named name, or -1 (the
// builders land the first of a name).
func extraOf(c *change.Change, name string) int {
	for i, e := range c.Extras {
		if e.Name == name {
			return i
		}
	}
	return -1
}

func appendString(d []byte, s string) []byte {
	d = binary.AppendUvarint(d, uint64(len(s)))
	return append(d, s...)
}

func appendBytes(d []byte, b []byte) []byte {
	d = binary.AppendUvarint(d, uint64(len(b)))
	return append(d, b...)
}

// jsonLenBytes is the width of a JSON text's length prefix: fixed, so
// that the text is marshalled in place, after it.
const jsonLenBytes = 4

// appendJSON appends the JSON text marshal writes, after its length (4
// bytes, little endian).
func appendJSON(d []byte, marshal func([]byte) []byte) []byte {
	at := len(d)
	d = append(d, 0, 0, 0, 0)
	d = marshal(d)
	binary.LittleEndian.PutUint32(d[at:], uint32(len(d)-at-jsonLenBytes))
	return d
}

// each decodes the rows in order into a Change (valid until fn returns)
// and calls fn with it, its offset and its ingest time.
func (l *rowLog) each(t *schema.Table, fn func(c *change.Change, offset, ingested int64) error) error {
	ps := [3]*fastjson.Parser{parsers.Get(), parsers.Get(), parsers.Get()}
	defer func() {
		for _, p := range ps {
			parsers.Put(p)
		}
	}()
	r := logReader{d: l.data}
	var c change.Change
	for range l.rows {
		c.Reset()
		c.Kind, c.Op = change.Kind(r.byte()), change.Op(r.byte())
		flags := r.byte()
		offset, ingested := r.varint(), r.varint()
		if flags&logHasTS != 0 {
			c.HasTS, c.TSMicros = true, r.varint()
		}
		c.Table, c.Xid, c.Pos, c.Statement = r.string(), r.string(), r.string(), r.string()
		for _, col := range t.Extras {
			switch r.byte() {
			case logExtraAbsent:
				continue
			case logExtraNull:
				c.Extras = append(c.Extras, change.Extra{Name: col.Name, Kind: change.ExtraKind(r.byte()), Null: true})
			default:
				e := change.Extra{Name: col.Name, Kind: change.ExtraKind(r.byte())}
				if col.Kind == change.ExtraTimestamp {
					e.Micros = r.varint()
				} else {
					v := r.bytes()
					e.Start = len(c.ExtraBuf)
					c.ExtraBuf = append(c.ExtraBuf, v...)
					e.End = len(c.ExtraBuf)
				}
				c.Extras = append(c.Extras, e)
			}
		}
		for i, img := range [2]struct {
			flag byte
			dst  *change.Image
		}{{logBefore, &c.Before}, {logAfter, &c.After}} {
			if flags&img.flag == 0 {
				continue
			}
			v, err := ps[i].ParseBytes(r.json())
			if err == nil {
				img.dst.Obj, err = v.Object()
			}
			if err != nil {
				return fmt.Errorf("a logged row's image does not parse: %w", err)
			}
		}
		if flags&logRaw != 0 {
			v, err := ps[2].ParseBytes(r.json())
			if err != nil {
				return fmt.Errorf("a logged row's event does not parse: %w", err)
			}
			c.Raw = v
		}
		if r.err != nil {
			return r.err
		}
		if err := fn(&c, offset, ingested); err != nil {
			return err
		}
	}
	if r.err == nil && len(r.d) > 0 {
		r.err = errLogCorrupt
	}
	return r.err
}

var parsers fastjson.ParserPool

var errLogCorrupt = errors.New("a file's logged rows are corrupt")

// logReader reads a rowLog; the first error sticks, and reads after it
// return zero values.
type logReader struct {
	d   []byte
	err error
}

func (r *logReader) byte() byte {
	if len(r.d) < 1 {
		r.err = errLogCorrupt
		return 0
	}
	b := r.d[0]
	r.d = r.d[1:]
	return b
}

func (r *logReader) varint() int64 {
	v, n := binary.Varint(r.d)
	if n <= 0 {
		r.err = errLogCorrupt
		return 0
	}
	r.d = r.d[n:]
	return v
}

func (r *logReader) bytes() []byte {
	l, n := binary.Uvarint(r.d)
	if n <= 0 || uint64(len(r.d)-n) < l {
		r.err = errLogCorrupt
		return nil
	}
	b := r.d[n : n+int(l)]
	r.d = r.d[n+int(l):]
	return b
}

// string returns the next string, which shares the log's bytes (the
// builders copy what they append).
func (r *logReader) string() string {
	b := r.bytes()
	return unsafe.String(unsafe.SliceData(b), len(b))
}

func (r *logReader) json() []byte {
	if len(r.d) < jsonLenBytes {
		r.err = errLogCorrupt
		return nil
	}
	l := binary.LittleEndian.Uint32(r.d)
	if uint64(len(r.d)-jsonLenBytes) < uint64(l) {
		r.err = errLogCorrupt
		return nil
	}
	b := r.d[jsonLenBytes : jsonLenBytes+int(l)]
	r.d = r.d[jsonLenBytes+int(l):]
	return b
}
