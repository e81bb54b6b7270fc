package parquet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
)

// maxStatsSize drops a minimum or maximum longer than this from the
// statistics, as arrow-go does by default.
const maxStatsSize = 4096

// column writes one leaf column of a file: the open data page (levels and
// plain values, uncompressed) and the pages of the open row group's
// column chunk (headers and compressed bodies).
type column struct {
	p *leafPlan
	// at are the arrays of the steps, of the part being written.
	at []stepArray
	// The leaf's values, from index 0 of the leaf array.
	i8    []int8
	i16   []int16
	i32   []int32
	i64   []int64
	f32   []float32
	f64   []float64
	dec   []decimal128.Num
	offs  []int32 // byte arrays: value i is data[offs[i]:offs[i+1]]
	data  []byte
	bools *array.Boolean

	// The open page. Its values are vals[levelRoom:]; the room before
	// them takes the page's levels when it is written.
	defs, reps []int16
	vals       []byte
	count      int // values, NULLs included (the page's num_values)
	nbits      int // booleans written to vals
	page       stats

	// The open row group's chunk.
	chunk      stats
	buf        []byte // page headers and bodies
	pages      int
	values     int64 // num_values of the chunk
	raw        int64 // uncompressed size of its pages, headers included
	body, comp []byte
	hdr        tw
}

type stepArray struct {
	valid []byte // nil: no NULL
	off   int
	list  array.ListLike
}

// stats are the statistics of a page or a chunk. A page's byte-array
// minimum and maximum are spans of its values (lo, hi); a chunk's are
// copies (blo, bhi).
type stats struct {
	has              bool
	nulls            int64
	ilo, ihi         int64
	flo, fhi         float64
	dlo, dhi         decimal128.Num
	lo, hi           [2]int
	plo, phi         uint64 // prefix of the values at lo and hi
	blo, bhi         []byte
	loBytes, hiBytes []byte // encoded by encode
}

// columns holds the columns of files written, for their buffers: a file
// of few rows would otherwise allocate most of what it writes.
var columns sync.Pool

func newColumn(p *leafPlan) *column {
	c, _ := columns.Get().(*column)
	if c == nil {
		c = &column{}
	}
	c.p = p
	if cap(c.at) < len(p.steps) {
		c.at = make([]stepArray, len(p.steps))
	}
	c.at = c.at[:len(p.steps)]
	c.vals = slices.Grow(c.vals[:0], levelRoom)[:levelRoom]
	return c
}

// maxKept bounds the buffers a column keeps for the next file.
const maxKept = 256 << 10

// free returns c to the pool, with its buffers unless they are large.
func (c *column) free() {
	c.unbind()
	keep := func(b []byte) []byte {
		if cap(b) > maxKept {
			return nil
		}
		return b[:0]
	}
	c.vals, c.buf, c.body, c.comp, c.hdr.b = keep(c.vals), keep(c.buf), keep(c.body), keep(c.comp), keep(c.hdr.b)
	if cap(c.defs) > maxKept/2 {
		c.defs = nil
	}
	if cap(c.reps) > maxKept/2 {
		c.reps = nil
	}
	c.defs, c.reps, c.hdr.outs = c.defs[:0], c.reps[:0], c.hdr.outs[:0]
	c.page.loBytes, c.page.hiBytes = c.page.loBytes[:0], c.page.hiBytes[:0]
	c.chunk.blo, c.chunk.bhi = c.chunk.blo[:0], c.chunk.bhi[:0]
	c.page = stats{loBytes: c.page.loBytes, hiBytes: c.page.hiBytes}
	c.chunk = stats{blo: c.chunk.blo, bhi: c.chunk.bhi}
	c.p, c.count, c.nbits, c.pages, c.values, c.raw = nil, 0, 0, 0, 0, 0
	c.hdr.last = 0
	columns.Put(c)
}

// bind points the column at its arrays in rec.
func (c *column) bind(rec arrow.RecordBatch) {
	a := rec.Column(c.p.col)
	for k, s := range c.p.steps {
		if k > 0 {
			switch c.p.steps[k-1].kind {
			case stepStruct:
				a = a.(*array.Struct).Field(s.child)
			case stepList:
				a = a.(array.ListLike).ListValues()
			}
		}
		if ext, ok := a.(array.ExtensionArray); ok {
			a = ext.Storage()
		}
		sa := &c.at[k]
		*sa = stepArray{}
		if a.NullN() > 0 {
			sa.valid, sa.off = a.NullBitmapBytes(), a.Data().Offset()
		}
		if s.kind == stepList {
			sa.list = a.(array.ListLike)
		}
	}
	d := a.Data()
	switch c.p.kind {
	case vBool:
		c.bools = a.(*array.Boolean)
	case vInt8:
		c.i8 = arrow.GetValues[int8](d, 1)
	case vInt16:
		c.i16 = arrow.GetValues[int16](d, 1)
	case vInt32:
		c.i32 = arrow.GetValues[int32](d, 1)
	case vInt64, vTsSec, vTsMilli, vTsNano:
		c.i64 = arrow.GetValues[int64](d, 1)
	case vFloat32:
		c.f32 = arrow.GetValues[float32](d, 1)
	case vFloat64:
		c.f64 = arrow.GetValues[float64](d, 1)
	case vDecimal:
		c.dec = arrow.GetValues[decimal128.Num](d, 1)
	case vBytes:
		c.offs, c.data = nil, nil
		if d.Buffers()[1] != nil { // an empty array may have no offsets
			c.offs = arrow.GetOffsets[int32](d, 1)
		}
		if b := d.Buffers()[2]; b != nil {
			c.data = b.Bytes()
		}
	}
}

// unbind drops the references to the part's arrays.
func (c *column) unbind() {
	clear(c.at)
	c.i8, c.i16, c.i32, c.i64, c.f32, c.f64, c.dec, c.offs, c.data, c.bools = nil, nil, nil, nil, nil, nil, nil, nil, nil, nil
}

func (s *stepArray) null(i int) bool {
	return s.valid != nil && s.valid[(s.off+i)>>3]&(1<<((s.off+i)&7)) == 0
}

// writeRows adds the levels and values of rows [lo, hi) to the pages of f.
func (c *column) writeRows(f *fileWriter, lo, hi int) error {
	if c.p.kind != vBytes || c.p.lists {
		return c.write(lo, hi)
	}
	// An upper bound of what the rows add: each its length, its value and
	// its definition level (2 bytes in size). Under it, no row of the range
	// can make the page reach the bound, and writing the rows at once makes
	// the same page as writing them one by one.
	grow := int(c.offs[hi]-c.offs[lo]) + 4*(hi-lo)
	if c.p.maxDef > 0 {
		grow += 2 * (hi - lo)
	}
	if c.size()+grow < f.maxPage {
		return c.write(lo, hi)
	}
	for i := lo; i < hi; i++ {
		if err := c.write(i, i+1); err != nil {
			return err
		}
		if c.size() >= f.maxPage {
			if err := c.flushPage(f); err != nil {
				return err
			}
		}
	}
	return nil
}

// write adds the levels and values of rows [lo, hi).
func (c *column) write(lo, hi int) error {
	if c.p.lists {
		for i := lo; i < hi; i++ {
			if err := c.walk(0, i, 0, 0); err != nil {
				return err
			}
		}
		return nil
	}
	c.count += hi - lo
	max := c.p.maxDef
	if max == 0 {
		return c.put(lo, hi)
	}
	nulls := false
	for k, s := range c.p.steps {
		if s.nullable && c.at[k].valid != nil {
			nulls = true
		}
	}
	if cap(c.defs)-len(c.defs) < hi-lo {
		c.defs = slices.Grow(c.defs, hi-lo+cap(c.defs))
	}
	if !nulls {
		for range hi - lo {
			c.defs = append(c.defs, max)
		}
		return c.put(lo, hi)
	}
	if int(max) <= len(wordMasks{}) {
		return c.writeWords(lo, hi)
	}
	start := -1
	for i := lo; i < hi; i++ {
		d := int16(0)
		for k, s := range c.p.steps {
			if !s.nullable {
				continue
			}
			if c.at[k].null(i) {
				break
			}
			d++
		}
		c.defs = append(c.defs, d)
		if d == max {
			if start < 0 {
				start = i
			}
			continue
		}
		c.page.nulls++
		if start >= 0 {
			if err := c.put(start, i); err != nil {
				return err
			}
			start = -1
		}
	}
	if start >= 0 {
		return c.put(start, hi)
	}
	return nil
}

// wordMasks holds, for 64 rows, which reach each nullable step: bit j of
// mask k is set when row j is valid at the first k+1 nullable steps.
type wordMasks [4]uint64

// writeWords is write for a column without lists and with NULLs, 64 rows
// at a time: a row's definition level is the number of nullable steps it
// is valid at, from the top, read from the steps' validity bits a word at
// a time. Words whose rows are all valid or all NULL at the top (an
// image that is absent) take their levels at once.
func (c *column) writeWords(lo, hi int) error {
	max := c.p.maxDef
	start := -1
	for base := lo; base < hi; base += 64 {
		n := min(64, hi-base)
		full := ^uint64(0) >> (64 - n)
		var m wordMasks
		np, p := 0, full
		for k, s := range c.p.steps {
			if !s.nullable {
				continue
			}
			if a := &c.at[k]; a.valid != nil {
				p &= bitsAt(a.valid, a.off+base, n)
			}
			m[np] = p
			np++
		}
		switch {
		case m[np-1] == full:
			for range n {
				c.defs = append(c.defs, max)
			}
			if start < 0 {
				start = base
			}
			continue
		case m[0] == 0:
			for range n {
				c.defs = append(c.defs, 0)
			}
			c.page.nulls += int64(n)
			if start >= 0 {
				if err := c.put(start, base); err != nil {
					return err
				}
				start = -1
			}
			continue
		}
		for j := range n {
			d := int16(0)
			for k := range np {
				d += int16(m[k] >> j & 1)
			}
			c.defs = append(c.defs, d)
			if d == max {
				if start < 0 {
					start = base + j
				}
				continue
			}
			c.page.nulls++
			if start >= 0 {
				if err := c.put(start, base+j); err != nil {
					return err
				}
				start = -1
			}
		}
	}
	if start >= 0 {
		return c.put(start, hi)
	}
	return nil
}

// bitsAt returns the n bits (1 to 64) of bitmap b from bit pos on, the
// first in the lowest bit.
func bitsAt(b []byte, pos, n int) uint64 {
	i, sh := pos>>3, uint(pos&7)
	end := (pos + n + 7) >> 3 // the bytes that hold them: [i, end)
	var w uint64
	if i+8 <= len(b) {
		w = binary.LittleEndian.Uint64(b[i:])
	} else {
		for k := 0; i+k < end && k < 8; k++ {
			w |= uint64(b[i+k]) << (8 * k)
		}
	}
	w >>= sh
	if sh > 0 && i+8 < end {
		w |= uint64(b[i+8]) << (64 - sh)
	}
	return w & (^uint64(0) >> (64 - n))
}

// walk adds the levels (and value) of element i of step k, reached at
// repetition level rep and definition level def: the record shredding of
// Dremel, for columns under a list.
func (c *column) walk(k, i int, rep, def int16) error {
	for ; k < len(c.p.steps); k++ {
		s, a := &c.p.steps[k], &c.at[k]
		if s.nullable {
			if a.null(i) {
				c.level(rep, def)
				return nil
			}
			def++
		}
		switch s.kind {
		case stepList:
			start, end := a.list.ValueOffsets(i)
			if start == end {
				c.level(rep, def)
				return nil
			}
			if k+2 == len(c.p.steps) && c.p.steps[k+1].kind == stepLeaf && c.at[k+1].valid == nil {
				// A list of values without NULLs (an absent-column list):
				// its elements' levels at once, and their values in one
				// run.
				leaf := def + 1
				if c.p.steps[k+1].nullable {
					leaf++
				}
				c.reps = append(c.reps, rep)
				for range end - start - 1 {
					c.reps = append(c.reps, s.rep)
				}
				for range end - start {
					c.defs = append(c.defs, leaf)
				}
				c.count += int(end - start)
				return c.put(int(start), int(end))
			}
			for j := start; j < end; j++ {
				r := rep
				if j > start {
					r = s.rep
				}
				if err := c.walk(k+1, int(j), r, def+1); err != nil {
					return err
				}
			}
			return nil
		case stepLeaf:
			c.reps = append(c.reps, rep)
			c.defs = append(c.defs, def)
			c.count++
			return c.put(i, i+1)
		}
	}
	return nil
}

// level adds an empty or NULL slot.
func (c *column) level(rep, def int16) {
	if c.p.maxRep > 0 {
		c.reps = append(c.reps, rep)
	}
	c.defs = append(c.defs, def)
	c.count++
	c.page.nulls++
}

// grow returns b with room for n more bytes. A page is written a run of
// rows at a time, so its buffer grows often: at least twice as large each
// time, so that its bytes are copied about once in all (append grows large
// slices by a quarter, copying them about five times over).
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	return slices.Grow(b, max(n, cap(b)))
}

var errSubMicro = errors.New("parquet write: a nanosecond timestamp with digits below the microsecond does not fit the file's microseconds")

// put adds the values of leaf slots [lo, hi), none of them NULL.
func (c *column) put(lo, hi int) error {
	if lo >= hi {
		return nil
	}
	st := &c.page
	// The page's values grow once for the slots, not value by value.
	switch c.p.kind {
	case vInt32, vInt8, vInt16, vFloat32:
		c.vals = grow(c.vals, 4*(hi-lo))
	case vInt64, vTsSec, vTsMilli, vTsNano, vFloat64:
		c.vals = grow(c.vals, 8*(hi-lo))
	case vBool:
		c.vals = grow(c.vals, (hi-lo)/8+1)
	case vBytes:
		c.vals = grow(c.vals, int(c.offs[hi]-c.offs[lo])+4*(hi-lo)+wordSlack)
	case vDecimal:
		c.vals = grow(c.vals, c.p.typeLen*(hi-lo))
	}
	switch c.p.kind {
	case vInt32:
		vs := c.i32[lo:hi]
		c.vals = append(c.vals, arrow.Int32Traits.CastToBytes(vs)...)
		mn, mx := vs[0], vs[0]
		for _, v := range vs[1:] {
			mn, mx = min(mn, v), max(mx, v)
		}
		st.ints(int64(mn), int64(mx))
	case vInt64:
		vs := c.i64[lo:hi]
		c.vals = append(c.vals, arrow.Int64Traits.CastToBytes(vs)...)
		mn, mx := vs[0], vs[0]
		for _, v := range vs[1:] {
			mn, mx = min(mn, v), max(mx, v)
		}
		st.ints(mn, mx)
	case vInt8, vInt16:
		var mn, mx int32 = math.MaxInt32, math.MinInt32
		for i := lo; i < hi; i++ {
			var v int32
			if c.p.kind == vInt8 {
				v = int32(c.i8[i])
			} else {
				v = int32(c.i16[i])
			}
			c.vals = binary.LittleEndian.AppendUint32(c.vals, uint32(v))
			mn, mx = min(mn, v), max(mx, v)
		}
		st.ints(int64(mn), int64(mx))
	case vTsSec, vTsMilli, vTsNano:
		var mn, mx int64 = math.MaxInt64, math.MinInt64
		for _, v := range c.i64[lo:hi] {
			switch c.p.kind {
			case vTsNano:
				if v%1000 != 0 {
					return errSubMicro
				}
				v /= 1000
			case vTsMilli:
				if v > math.MaxInt64/1000 || v < math.MinInt64/1000 {
					return fmt.Errorf("parquet write: timestamp %d ms overflows microseconds", v)
				}
				v *= 1000
			case vTsSec:
				if v > math.MaxInt64/1_000_000 || v < math.MinInt64/1_000_000 {
					return fmt.Errorf("parquet write: timestamp %d s overflows microseconds", v)
				}
				v *= 1_000_000
			}
			c.vals = binary.LittleEndian.AppendUint64(c.vals, uint64(v))
			mn, mx = min(mn, v), max(mx, v)
		}
		st.ints(mn, mx)
	case vFloat32:
		vs := c.f32[lo:hi]
		c.vals = append(c.vals, arrow.Float32Traits.CastToBytes(vs)...)
		for _, v := range vs {
			st.float(float64(v))
		}
	case vFloat64:
		vs := c.f64[lo:hi]
		c.vals = append(c.vals, arrow.Float64Traits.CastToBytes(vs)...)
		for _, v := range vs {
			st.float(v)
		}
	case vBool:
		for i := lo; i < hi; i++ {
			if c.nbits&7 == 0 {
				c.vals = append(c.vals, 0)
			}
			v := c.bools.Value(i)
			if v {
				c.vals[len(c.vals)-1] |= 1 << (c.nbits & 7)
			}
			c.nbits++
			b := int64(0)
			if v {
				b = 1
			}
			st.ints(b, b)
		}
	case vBytes:
		// The page has room for the values (grown above) and, past them,
		// wordSlack bytes: a value of up to eight bytes is copied as one
		// word, whose bytes past it the next value overwrites.
		vals, n, data := c.vals[:cap(c.vals)], len(c.vals), c.data
		for i := lo; i < hi; i++ {
			a, b := int(c.offs[i]), int(c.offs[i+1])
			binary.LittleEndian.PutUint32(vals[n:], uint32(b-a))
			at := n + 4
			var p uint64
			if b-a <= 8 && a+8 <= len(data) {
				w := binary.LittleEndian.Uint64(data[a:])
				binary.LittleEndian.PutUint64(vals[at:], w)
				p = wordPrefix(w, b-a)
			} else {
				copy(vals[at:], data[a:b])
				p = prefix(data[a:b])
			}
			n = at + b - a
			v := vals[at:n]
			span := [2]int{at, n}
			// Prefixes that differ order their values; only equal ones
			// need the values compared.
			switch {
			case !st.has:
				st.has, st.lo, st.hi, st.plo, st.phi = true, span, span, p, p
			case p < st.plo || p == st.plo && bytes.Compare(v, vals[st.lo[0]:st.lo[1]]) < 0:
				st.lo, st.plo = span, p
			case p > st.phi || p == st.phi && bytes.Compare(v, vals[st.hi[0]:st.hi[1]]) > 0:
				st.hi, st.phi = span, p
			}
		}
		c.vals = vals[:n]
	case vDecimal:
		n := c.p.typeLen
		for _, v := range c.dec[lo:hi] {
			var be [16]byte
			binary.BigEndian.PutUint64(be[:8], uint64(v.HighBits()))
			binary.BigEndian.PutUint64(be[8:], v.LowBits())
			c.vals = append(c.vals, be[16-n:]...)
			switch {
			case !st.has:
				st.has, st.dlo, st.dhi = true, v, v
			case v.Less(st.dlo):
				st.dlo = v
			case v.Greater(st.dhi):
				st.dhi = v
			}
		}
	}
	return nil
}

// wordSlack is the room a page keeps past its values for copying a short
// value as a word.
const wordSlack = 8

// wordPrefix is prefix of the first n (at most 8) bytes of w, read little
// endian.
func wordPrefix(w uint64, n int) uint64 {
	return bits.ReverseBytes64(w) &^ (^uint64(0) >> (8 * n))
}

// prefix returns v's first eight bytes as a big-endian number, padded
// with zeros: when the prefixes of two byte strings differ, they order
// the strings as bytes.Compare does.
func prefix(v []byte) uint64 {
	if len(v) >= 8 {
		return binary.BigEndian.Uint64(v)
	}
	var p uint64
	for i, b := range v {
		p |= uint64(b) << (56 - 8*i)
	}
	return p
}

func (s *stats) ints(mn, mx int64) {
	if !s.has {
		s.has, s.ilo, s.ihi = true, mn, mx
		return
	}
	s.ilo, s.ihi = min(s.ilo, mn), max(s.ihi, mx)
}

// float skips NaN, which has no place in the order.
func (s *stats) float(v float64) {
	if v != v {
		return
	}
	if !s.has {
		s.has, s.flo, s.fhi = true, v, v
		return
	}
	if v < s.flo || (v == 0 && s.flo == 0 && math.Signbit(v)) {
		s.flo = v
	}
	if v > s.fhi || (v == 0 && s.fhi == 0 && !math.Signbit(v)) {
		s.fhi = v
	}
}

// levelRoom is the room a page keeps before its values for its encoded
// levels: a page whose levels fit is written from where they start, with
// no copy of its values behind them.
const levelRoom = 256

// size is what the open page holds.
func (c *column) size() int { return len(c.vals) - levelRoom + 2*(len(c.defs)+len(c.reps)) }

// buffered is what the column holds: its open page and the open row
// group's pages.
func (c *column) buffered() int64 { return int64(len(c.buf) + c.size()) }

// flushPage compresses the open page and adds it to the chunk. A page
// whose size does not fit the int32 of its header fails the file.
func (c *column) flushPage(f *fileWriter) error {
	if c.count == 0 {
		return nil
	}
	levels := c.body[:0]
	if c.p.maxRep > 0 {
		levels = appendLevels(levels, c.reps, levelWidth(c.p.maxRep))
	}
	if c.p.maxDef > 0 {
		levels = appendLevels(levels, c.defs, levelWidth(c.p.maxDef))
	}
	var body []byte
	if n := len(levels); n <= levelRoom {
		body = c.vals[levelRoom-n:]
		copy(body, levels)
		c.body = levels
	} else {
		body = append(levels, c.vals[levelRoom:]...)
		c.body = body
	}
	comp := body
	switch {
	case f.codec == nil:
	case f.codecID == compress.Codecs.Zstd && len(body) < smallPage:
		comp = encodeSmallZstd(c.comp[:cap(c.comp)], body, f.level)
		c.comp = comp
	case f.codecID == compress.Codecs.Zstd && f.level != 0:
		comp = encodeZstd(c.comp[:cap(c.comp)], body, f.level)
		c.comp = comp
	case f.level != 0:
		comp = f.codec.EncodeLevel(c.comp[:cap(c.comp)], body, f.level)
		c.comp = comp
	default:
		comp = f.codec.Encode(c.comp[:cap(c.comp)], body)
		c.comp = comp
	}
	if len(body) > math.MaxInt32 || len(comp) > math.MaxInt32 {
		return fmt.Errorf("parquet write: a page of column %s holds %d bytes, more than a page can (2 GiB)",
			strings.Join(c.p.path, "."), max(len(body), len(comp)))
	}
	c.page.encode(c, false)

	t := &c.hdr
	t.b, t.last, t.outs = t.b[:0], 0, t.outs[:0]
	t.i32(1, 0) // DATA_PAGE
	t.i32(2, int32(len(body)))
	t.i32(3, int32(len(comp)))
	t.begin(5)
	t.i32(1, int32(c.count))
	t.i32(2, int32(parquet.Encodings.Plain))
	t.i32(3, int32(parquet.Encodings.RLE))
	t.i32(4, int32(parquet.Encodings.RLE))
	c.page.write(t, 5, c.p.signed)
	t.end()
	t.stop()
	c.buf = append(c.buf, t.b...)
	c.buf = append(c.buf, comp...)
	c.raw += int64(len(t.b) + len(body))
	c.pages++
	c.values += int64(c.count)
	c.chunk.merge(&c.page, c)

	c.defs, c.reps, c.vals = c.defs[:0], c.reps[:0], c.vals[:levelRoom]
	c.count, c.nbits = 0, 0
	c.page = stats{loBytes: c.page.loBytes[:0], hiBytes: c.page.hiBytes[:0]}
	return nil
}

// merge adds page statistics p (of column c's open page) to a chunk's.
func (s *stats) merge(p *stats, c *column) {
	s.nulls += p.nulls
	if !p.has {
		return
	}
	switch c.p.kind {
	case vFloat32, vFloat64:
		if !s.has {
			s.flo, s.fhi = p.flo, p.fhi
		} else {
			s.float(p.flo)
			s.float(p.fhi)
		}
	case vBytes:
		lo, hi := c.vals[p.lo[0]:p.lo[1]], c.vals[p.hi[0]:p.hi[1]]
		if !s.has || bytes.Compare(lo, s.blo) < 0 {
			s.blo = append(s.blo[:0], lo...)
		}
		if !s.has || bytes.Compare(hi, s.bhi) > 0 {
			s.bhi = append(s.bhi[:0], hi...)
		}
	case vDecimal:
		if !s.has || p.dlo.Less(s.dlo) {
			s.dlo = p.dlo
		}
		if !s.has || p.dhi.Greater(s.dhi) {
			s.dhi = p.dhi
		}
	default:
		if !s.has {
			s.ilo, s.ihi = p.ilo, p.ihi
		} else {
			s.ilo, s.ihi = min(s.ilo, p.ilo), max(s.ihi, p.ihi)
		}
	}
	s.has = true
}

// encode sets loBytes and hiBytes to the plain encodings of the minimum
// and the maximum of a page of c, or of its chunk.
func (s *stats) encode(c *column, chunk bool) {
	s.loBytes, s.hiBytes = s.loBytes[:0], s.hiBytes[:0]
	if !s.has {
		s.loBytes, s.hiBytes = nil, nil
		return
	}
	switch c.p.kind {
	case vBool:
		s.loBytes = append(s.loBytes, byte(s.ilo))
		s.hiBytes = append(s.hiBytes, byte(s.ihi))
	case vInt8, vInt16, vInt32:
		s.loBytes = binary.LittleEndian.AppendUint32(s.loBytes, uint32(int32(s.ilo)))
		s.hiBytes = binary.LittleEndian.AppendUint32(s.hiBytes, uint32(int32(s.ihi)))
	case vInt64, vTsSec, vTsMilli, vTsNano:
		s.loBytes = binary.LittleEndian.AppendUint64(s.loBytes, uint64(s.ilo))
		s.hiBytes = binary.LittleEndian.AppendUint64(s.hiBytes, uint64(s.ihi))
	case vFloat32, vFloat64:
		lo, hi := s.flo, s.fhi
		// -0 for a zero minimum, +0 for a zero maximum: readers may not
		// order the zeros.
		if lo == 0 {
			lo = math.Copysign(0, -1)
		}
		if hi == 0 {
			hi = 0
		}
		if c.p.kind == vFloat32 {
			s.loBytes = binary.LittleEndian.AppendUint32(s.loBytes, math.Float32bits(float32(lo)))
			s.hiBytes = binary.LittleEndian.AppendUint32(s.hiBytes, math.Float32bits(float32(hi)))
		} else {
			s.loBytes = binary.LittleEndian.AppendUint64(s.loBytes, math.Float64bits(lo))
			s.hiBytes = binary.LittleEndian.AppendUint64(s.hiBytes, math.Float64bits(hi))
		}
	case vBytes:
		if chunk {
			s.loBytes = append(s.loBytes, s.blo...)
			s.hiBytes = append(s.hiBytes, s.bhi...)
		} else {
			s.loBytes = append(s.loBytes, c.vals[s.lo[0]:s.lo[1]]...)
			s.hiBytes = append(s.hiBytes, c.vals[s.hi[0]:s.hi[1]]...)
		}
	case vDecimal:
		n := c.p.typeLen
		var be [16]byte
		binary.BigEndian.PutUint64(be[:8], uint64(s.dlo.HighBits()))
		binary.BigEndian.PutUint64(be[8:], s.dlo.LowBits())
		s.loBytes = append(s.loBytes, be[16-n:]...)
		binary.BigEndian.PutUint64(be[:8], uint64(s.dhi.HighBits()))
		binary.BigEndian.PutUint64(be[8:], s.dhi.LowBits())
		s.hiBytes = append(s.hiBytes, be[16-n:]...)
	}
}

// write writes the encoded statistics as struct field id of t.
func (s *stats) write(t *tw, id int16, signed bool) {
	t.begin(id)
	lo, hi := s.loBytes, s.hiBytes
	okLo, okHi := s.has && len(lo) <= maxStatsSize, s.has && len(hi) <= maxStatsSize
	if signed && okHi {
		t.binary(1, hi)
	}
	if signed && okLo {
		t.binary(2, lo)
	}
	t.i64(3, s.nulls)
	if okHi {
		t.binary(5, hi)
	}
	if okLo {
		t.binary(6, lo)
	}
	t.end()
}
