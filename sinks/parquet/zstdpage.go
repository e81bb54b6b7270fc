package parquet

import (
	"encoding/binary"
	"math/bits"
)

// pageZstd codes a small page as a zstd frame (RFC 8878) of one block
// whose sequences use the format's predefined FSE distributions and whose
// literals are stored raw: no table is built, weighed or described, which
// is most of what a general encoder spends on a page of a few hundred
// bytes. Matches are found greedily through a hash of four bytes. The
// frame carries its content size and no checksum (Parquet pages are
// checked by their lengths, and the checksum is optional).
//
// It keeps its scratch between pages; one goroutine uses it at a time.
type pageZstd struct {
	table [1 << pageHashBits]int32 // position+1 of the last four bytes of each hash
	seqs  []pageSeq
	lits  []byte
	bw    bitWriter
}

// pageSeq is one sequence: lit literals, then a match of length ml at
// distance off.
type pageSeq struct {
	lit, off, ml uint32
}

const (
	pageHashBits = 10
	pageMinMatch = 4
	// pageMaxInput bounds what pageZstd codes: the frame's content size
	// field and the sequence count stay in their short forms.
	pageMaxInput = 1 << 14
)

// encode appends the frame of src (at most pageMaxInput bytes) to dst.
func (z *pageZstd) encode(dst, src []byte) []byte {
	n := len(src)
	if n > pageMaxInput {
		panic("parquet: zstd page too large")
	}
	// Frame header: magic, descriptor (single segment, no checksum, no
	// dictionary), content size in 1 byte (< 256) or 2 (size-256).
	dst = binary.LittleEndian.AppendUint32(dst, 0xFD2FB528)
	if n < 256 {
		dst = append(dst, 0x20, byte(n))
	} else {
		dst = append(dst, 0x60)
		dst = binary.LittleEndian.AppendUint16(dst, uint16(n-256))
	}
	hdr := len(dst)
	dst = append(dst, 0, 0, 0) // block header, set below
	if n > 0 {
		dst = z.block(dst, src)
	}
	size := len(dst) - hdr - 3
	kind := 2 // compressed
	if size >= n {
		dst = append(dst[:hdr+3], src...) // raw: the block would not be smaller
		size, kind = n, 0
	}
	h := 1 | kind<<1 | size<<3 // last block
	dst[hdr], dst[hdr+1], dst[hdr+2] = byte(h), byte(h>>8), byte(h>>16)
	return dst
}

// block appends the content of a compressed block of src: its literals
// section, then its sequences section.
func (z *pageZstd) block(dst, src []byte) []byte {
	z.match(src)
	// Literals, raw.
	nl := len(z.lits)
	switch {
	case nl < 32:
		dst = append(dst, byte(nl<<3))
	case nl < 4096:
		dst = append(dst, byte(1<<2|(nl&15)<<4), byte(nl>>4))
	default:
		dst = append(dst, byte(3<<2|(nl&15)<<4), byte(nl>>4), byte(nl>>12))
	}
	dst = append(dst, z.lits...)
	// Sequences.
	ns := len(z.seqs)
	switch {
	case ns == 0:
		return append(dst, 0)
	case ns < 128:
		dst = append(dst, byte(ns))
	default:
		dst = append(dst, byte(ns>>8)+0x80, byte(ns))
	}
	dst = append(dst, 0) // literal lengths, offsets and match lengths: predefined
	return z.sequences(dst)
}

// match finds the sequences of src and its literals. At each position it
// tries the last match's distance first (a page of fixed-width values
// repeats at the width), then the last position with the same four bytes;
// a match found is extended backwards over the pending literals.
func (z *pageZstd) match(src []byte) {
	// The hash table has about as many entries as the page has bytes, so
	// that a small page does not clear a large table.
	hb := min(max(bits.Len(uint(len(src))), 6), pageHashBits)
	table := z.table[:1<<hb]
	clear(table)
	shift := 32 - hb
	z.seqs, z.lits = z.seqs[:0], z.lits[:0]
	lit, rep := 0, 0 // where the pending literals start; the last distance
	for i := 0; i+pageMinMatch <= len(src); {
		v := binary.LittleEndian.Uint32(src[i:])
		h := v * 2654435761 >> shift
		c := int(table[h]) - 1
		table[h] = int32(i + 1)
		switch {
		case rep > 0 && i-rep >= 0 && binary.LittleEndian.Uint32(src[i-rep:]) == v:
			c = i - rep
		case c < 0 || binary.LittleEndian.Uint32(src[c:]) != v:
			// Bytes without matches are passed over faster the longer they
			// last, as they are unlikely to start one.
			i += 1 + (i-lit)>>5
			continue
		}
		for i > lit && c > 0 && src[i-1] == src[c-1] {
			i, c = i-1, c-1
		}
		ml := pageMinMatch
		for i+ml < len(src) && src[c+ml] == src[i+ml] {
			ml++
		}
		z.lits = append(z.lits, src[lit:i]...)
		z.seqs = append(z.seqs, pageSeq{lit: uint32(i - lit), off: uint32(i - c), ml: uint32(ml)})
		rep = i - c
		i += ml
		lit = i
		if i+2 <= len(src) { // the match's last positions start matches too
			table[binary.LittleEndian.Uint32(src[i-2:])*2654435761>>shift] = int32(i - 2 + 1)
		}
	}
	z.lits = append(z.lits, src[lit:]...)
}

// sequences appends the sequences' bitstream: the last sequence's codes
// start the FSE states, the others are coded from the second last to the
// first, and the states end it, so that a decoder reads them in order.
func (z *pageZstd) sequences(dst []byte) []byte {
	w := &z.bw
	w.reset(dst)
	// A sequence after literals at the distance of the one before codes
	// it as repeat 1; any other distance d is coded as d+3 and becomes
	// repeat 1 (RFC 8878, 3.1.1.5), so that repeat 1 is always the last
	// distance: the sequence before's.
	code := func(i int) (ll, of, ml uint8, offBase uint32) {
		s := z.seqs[i]
		offBase = s.off + 3
		if s.lit > 0 && i > 0 && z.seqs[i-1].off == s.off {
			offBase = 1
		}
		return llCode(s.lit), uint8(bits.Len32(offBase) - 1), mlCode(s.ml - 3), offBase
	}
	last := z.seqs[len(z.seqs)-1]
	ll, of, ml, ob := code(len(z.seqs) - 1)
	sML := predefML.init(ml)
	sOF := predefOF.init(of)
	sLL := predefLL.init(ll)
	w.add(last.lit-llBase[ll], llBits[ll])
	w.add(last.ml-3-mlBase[ml], mlBits[ml])
	w.add(ob, of)
	w.flush()
	for i := len(z.seqs) - 2; i >= 0; i-- {
		s := z.seqs[i]
		ll, of, ml, ob := code(i)
		predefOF.encode(w, &sOF, of)
		predefML.encode(w, &sML, ml)
		predefLL.encode(w, &sLL, ll)
		w.flush()
		w.add(s.lit-llBase[ll], llBits[ll])
		w.add(s.ml-3-mlBase[ml], mlBits[ml])
		w.flush()
		w.add(ob, of)
		w.flush()
	}
	w.add(sML, predefML.log)
	w.add(sOF, predefOF.log)
	w.add(sLL, predefLL.log)
	return w.close()
}

// bitWriter writes a zstd bitstream: bits fill bytes from the lowest up,
// and a closing 1 bit marks where the stream ends.
type bitWriter struct {
	out   []byte
	acc   uint64
	nbits uint
}

func (w *bitWriter) reset(dst []byte) { w.out, w.acc, w.nbits = dst, 0, 0 }

// add adds the low n bits of v; the container holds fewer than 32 bits
// before it, and n is at most 32.
func (w *bitWriter) add(v uint32, n uint8) {
	w.acc |= uint64(v&(1<<n-1)) << w.nbits
	w.nbits += uint(n)
}

// flush writes the container's whole bytes.
func (w *bitWriter) flush() {
	n := w.nbits >> 3
	w.out = binary.LittleEndian.AppendUint64(w.out, w.acc)
	w.out = w.out[:len(w.out)-8+int(n)]
	w.acc >>= n * 8 & 63
	if n == 8 {
		w.acc = 0
	}
	w.nbits -= n * 8
}

func (w *bitWriter) close() []byte {
	w.add(1, 1)
	w.flush()
	if w.nbits > 0 {
		w.out = append(w.out, byte(w.acc))
	}
	return w.out
}

// fseTable is the encoding table of a normalized distribution.
type fseTable struct {
	log    uint8
	states []uint16 // next state, by cumulated position
	syms   []fseSym
}

type fseSym struct {
	deltaFind int32
	deltaBits uint32
}

// newFSETable builds the encoding table of norm (counts summing to
// 1<<log, -1 for a symbol of less than one count), spreading symbols over
// the states as a zstd decoder does.
func newFSETable(norm []int16, log uint8) *fseTable {
	size := 1 << log
	t := &fseTable{log: log, states: make([]uint16, size), syms: make([]fseSym, len(norm))}
	symbolAt := make([]int, size)
	cumul := make([]int, len(norm)+1)
	high := size - 1
	for s, c := range norm {
		if c == -1 {
			cumul[s+1] = cumul[s] + 1
			symbolAt[high] = s
			high--
		} else {
			cumul[s+1] = cumul[s] + int(c)
		}
	}
	step, pos := size>>1+size>>3+3, 0
	for s, c := range norm {
		for range max(int(c), 0) {
			symbolAt[pos] = s
			pos = (pos + step) & (size - 1)
			for pos > high {
				pos = (pos + step) & (size - 1)
			}
		}
	}
	for u := range size {
		s := symbolAt[u]
		t.states[cumul[s]] = uint16(size + u)
		cumul[s]++
	}
	total := int32(0)
	for s, c := range norm {
		switch c {
		case 0:
			t.syms[s].deltaBits = uint32(log+1)<<16 - uint32(size)
		case -1, 1:
			t.syms[s] = fseSym{deltaFind: total - 1, deltaBits: uint32(log)<<16 - uint32(size)}
			total++
		default:
			out := uint32(log) - uint32(bits.Len16(uint16(c-1))-1)
			t.syms[s] = fseSym{deltaFind: total - int32(c), deltaBits: out<<16 - uint32(c)<<out}
			total += int32(c)
		}
	}
	return t
}

// init returns the state that starts a stream with symbol s.
func (t *fseTable) init(s uint8) uint32 {
	sym := t.syms[s]
	n := (sym.deltaBits + 1<<15) >> 16
	v := n<<16 - sym.deltaBits
	return uint32(t.states[int32(v>>n)+sym.deltaFind])
}

// encode writes the bits of state *st that lead a decoder to symbol s and
// moves to s's state.
func (t *fseTable) encode(w *bitWriter, st *uint32, s uint8) {
	sym := t.syms[s]
	n := (*st + sym.deltaBits) >> 16
	w.add(*st, uint8(n))
	*st = uint32(t.states[int32(*st>>n)+sym.deltaFind])
}

// The predefined distributions of RFC 8878 (section 3.1.1.3.2.2) and the
// codes of literal and match lengths (3.1.1.3.2.1.1).
var (
	predefLL = newFSETable([]int16{4, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1,
		2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 2, 1, 1, 1, 1, 1, -1, -1, -1, -1}, 6)
	predefML = newFSETable([]int16{1, 4, 3, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1,
		1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
		1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1}, 6)
	predefOF = newFSETable([]int16{1, 1, 1, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1,
		1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1}, 5)

	llBits = [36]uint8{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		1, 1, 1, 1, 2, 2, 3, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	mlBits = [53]uint8{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		1, 1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	llBase = bases(llBits[:], 16)
	mlBase = bases(mlBits[:], 32) // of the match length less 3
)

// bases returns the first value of each code: the first direct codes
// stand for themselves, each later one follows the range of the one
// before.
func bases(nbits []uint8, direct int) []uint32 {
	b := make([]uint32, len(nbits))
	for i := range b {
		if i < direct {
			b[i] = uint32(i)
		} else {
			b[i] = b[i-1] + 1<<nbits[i-1]
		}
	}
	return b
}

// llCode returns the code of a literal length.
func llCode(n uint32) uint8 { return lengthCode(n, llBase, 16, 64, 19) }

// mlCode returns the code of a match length less 3.
func mlCode(n uint32) uint8 { return lengthCode(n, mlBase, 32, 128, 36) }

// lengthCode returns the code of n: n itself below direct, from wide on
// the position of its highest bit plus delta, and in between the last
// code whose base is not above n.
func lengthCode(n uint32, base []uint32, direct, wide uint32, delta uint8) uint8 {
	switch {
	case n < direct:
		return uint8(n)
	case n >= wide:
		return uint8(bits.Len32(n)-1) + delta
	}
	c := direct
	for base[c+1] <= n {
		c++
	}
	return uint8(c)
}
