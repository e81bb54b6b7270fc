package batch

import (
	"encoding/binary"
	"errors"
	"unicode/utf8"
	"unsafe"

	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/schema"
)

// frozenRows holds the rows of a file that has no builders, frozen: a
// file opens with none, and a file whose builders spilled freezes its next
// rows. Each row is
// kept in a compact binary form, its images converted as they would be
// into builders (schema's packed values, see checks), so that a row that does
// not convert is refused when it comes; the rows move to builders (thaw)
// when they cost about what builders would, or when the file is
// written, and their values are appended there without being converted
// again. A file of a few rows then costs those rows' bytes, not builders
// (tens of KB each): many tables' files fit the memory bound without
// closing early.
//
// A row is: kind, op and flags (one byte each); offset and ingest time
// (varints); the operation time when it has one; table, transaction id,
// position and statement; for each extra column of the table version, a
// tag (absent, NULL, value), the change's kind of it and its value; then
// the images that land, each as packed values after its length (4 bytes,
// little endian): before and after in the images layout, the one that
// lands in the flat layout; in the events layout, the event's JSON text
// after its length. Strings are length-prefixed (uvarint).
type frozenRows struct {
	data []byte
	rows int
}

const (
	frozenHasTS = 1 << iota
	frozenBefore
	frozenAfter
	frozenRaw
)

const (
	frozenExtraAbsent = iota
	frozenExtraNull
	frozenExtraValue
)

// add appends c, at offset, converting its images with k, the checker of
// t, and returns the error appending c to builders would return; a row
// with one is not frozen.
func (l *frozenRows) add(t *schema.Table, c *change.Change, offset int64, k *checker) error {
	k.set.counted()
	d := l.data
	mark := len(d)
	flags := byte(0)
	if c.HasTS {
		flags |= frozenHasTS
	}
	// The images that land: flat lands the after image, or else the
	// before image; events lands the event.
	before, after := c.Before, c.After
	switch t.Layout {
	case schema.LayoutFlat:
		if after.Present() {
			before = change.Image{}
		}
	case schema.LayoutEvents:
		before, after = change.Image{}, change.Image{}
		if c.Raw != nil {
			flags |= frozenRaw
		}
	}
	if before.Present() {
		flags |= frozenBefore
	}
	if after.Present() {
		flags |= frozenAfter
	}
	d = append(d, byte(c.Kind), byte(c.Op), flags)
	d = binary.AppendVarint(d, offset)
	d = binary.AppendVarint(d, c.RecordMicros)
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
			d = append(d, frozenExtraAbsent)
		case c.Extras[i].Null:
			d = append(d, frozenExtraNull, byte(c.Extras[i].Kind))
		case col.Kind == change.ExtraTimestamp:
			d = append(d, frozenExtraValue, byte(c.Extras[i].Kind))
			d = binary.AppendVarint(d, c.Extras[i].Micros)
		default:
			d = append(d, frozenExtraValue, byte(c.Extras[i].Kind))
			d = appendBytes(d, c.ExtraBytes(c.Extras[i]))
		}
	}
	// before and after are the images that land, absent or not in the
	// row as well: each is converted as builders would convert it.
	var errs [3]error
	if before.Present() {
		d, errs[0] = k.image(t, d, before)
	}
	if after.Present() {
		d, errs[1] = k.image(t, d, after)
	}
	if flags&frozenRaw != 0 {
		at := len(d)
		d = appendJSON(d, c.Raw.MarshalTo)
		if !utf8.Valid(d[at+jsonLenBytes:]) {
			errs[2] = errEventText
		}
	}
	if err := errors.Join(checkText(c), errors.Join(errs[0], errs[1]), errs[2]); err != nil {
		l.data = d[:mark]
		return err
	}
	l.data = d
	l.rows++
	return nil
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

// jsonLenBytes is the width of the length prefix of an image's packed values
// and of an event's JSON text: fixed, so that they are written in place,
// after it.
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

// frozenRow holds the landing parts of a frozen row: the images' packed
// values and the event's JSON text, each with whether the row has it.
type frozenRow struct {
	before, after, raw          []byte
	hasBefore, hasAfter, hasRaw bool
}

// each decodes the rows in order into a Change (valid until fn returns),
// without its images and event, which are in r, and calls fn with them and
// the row's offset.
func (l *frozenRows) each(t *schema.Table, fn func(c *change.Change, r *frozenRow, offset int64) error) error {
	r := frozenReader{d: l.data}
	var c change.Change
	var row frozenRow
	for range l.rows {
		c.Reset()
		c.Kind, c.Op = change.Kind(r.byte()), change.Op(r.byte())
		flags := r.byte()
		offset := r.varint()
		c.RecordMicros = r.varint()
		if flags&frozenHasTS != 0 {
			c.HasTS, c.TSMicros = true, r.varint()
		}
		c.Table, c.Xid, c.Pos, c.Statement = r.string(), r.string(), r.string(), r.string()
		for _, col := range t.Extras {
			switch r.byte() {
			case frozenExtraAbsent:
				continue
			case frozenExtraNull:
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
		row = frozenRow{hasBefore: flags&frozenBefore != 0, hasAfter: flags&frozenAfter != 0, hasRaw: flags&frozenRaw != 0}
		if row.hasBefore {
			row.before = r.json()
		}
		if row.hasAfter {
			row.after = r.json()
		}
		if row.hasRaw {
			row.raw = r.json()
		}
		if r.err != nil {
			return r.err
		}
		if err := fn(&c, &row, offset); err != nil {
			return err
		}
	}
	if r.err == nil && len(r.d) > 0 {
		r.err = errFrozenCorrupt
	}
	return r.err
}

var errFrozenCorrupt = errors.New("a file's frozen rows are corrupt")

// frozenReader reads frozenRows; the first error sticks, and reads after it
// return zero values.
type frozenReader struct {
	d   []byte
	err error
}

func (r *frozenReader) byte() byte {
	if len(r.d) < 1 {
		r.err = errFrozenCorrupt
		return 0
	}
	b := r.d[0]
	r.d = r.d[1:]
	return b
}

func (r *frozenReader) varint() int64 {
	v, n := binary.Varint(r.d)
	if n <= 0 {
		r.err = errFrozenCorrupt
		return 0
	}
	r.d = r.d[n:]
	return v
}

func (r *frozenReader) bytes() []byte {
	l, n := binary.Uvarint(r.d)
	if n <= 0 || uint64(len(r.d)-n) < l {
		r.err = errFrozenCorrupt
		return nil
	}
	b := r.d[n : n+int(l)]
	r.d = r.d[n+int(l):]
	return b
}

// string returns the next string, which shares the frozen rows' bytes (the
// builders copy what they append).
func (r *frozenReader) string() string {
	b := r.bytes()
	return unsafe.String(unsafe.SliceData(b), len(b))
}

func (r *frozenReader) json() []byte {
	if len(r.d) < jsonLenBytes {
		r.err = errFrozenCorrupt
		return nil
	}
	l := binary.LittleEndian.Uint32(r.d)
	if uint64(len(r.d)-jsonLenBytes) < uint64(l) {
		r.err = errFrozenCorrupt
		return nil
	}
	b := r.d[jsonLenBytes : jsonLenBytes+int(l)]
	r.d = r.d[jsonLenBytes+int(l):]
	return b
}
