package parquet

import (
	"encoding/binary"
	"math/bits"
)

// levelWidth is the bit width of levels up to max.
func levelWidth(max int16) int { return bits.Len16(uint16(max)) }

// appendLevels appends levels in Parquet's RLE/bit-packed hybrid encoding
// at width bits per level, prefixed by its length (4 bytes, little endian)
// as data page v1 has it. A run of at least eight equal levels is one RLE
// run; anything else is bit-packed eight levels at a time, the last group
// padded with zeros (a reader stops at the page's value count).
func appendLevels(dst []byte, levels []int16, width int) []byte {
	at := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	n := len(levels)
	for i := 0; i < n; {
		if r := run(levels, i); r >= 8 {
			dst = binary.AppendUvarint(dst, uint64(r)<<1)
			v := uint16(levels[i])
			for b := 0; b < (width+7)/8; b++ {
				dst = append(dst, byte(v>>(8*b)))
			}
			i += r
			continue
		}
		// Bit-packed groups until a group starts a run of eight.
		start := i
		for i += 8; i < n && run(levels, i) < 8; i += 8 {
		}
		groups := (min(i, n) - start + 7) / 8
		dst = binary.AppendUvarint(dst, uint64(groups)<<1|1)
		dst = packLevels(dst, levels[start:min(i, n)], groups*8, width)
		i = min(i, n)
	}
	binary.LittleEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	return dst
}

// run is the length of the run of equal levels at i, counted up to 8.
func run(levels []int16, i int) int {
	v, j := levels[i], i+1
	for j < len(levels) && levels[j] == v && j-i < 8 {
		j++
	}
	if j-i < 8 {
		return j - i
	}
	for j < len(levels) && levels[j] == v {
		j++
	}
	return j - i
}

// packLevels bit-packs levels, LSB first, padded with zeros to count
// values (a multiple of eight).
func packLevels(dst []byte, levels []int16, count, width int) []byte {
	if width <= 2 {
		// Eight levels make one or two bytes: pack them a group at a
		// time (the levels of a flat or once-nested column).
		full := len(levels) &^ 7
		for k := 0; k < full; k += 8 {
			dst = packGroup(dst, (*[8]int16)(levels[k:k+8]), width)
		}
		if full < count {
			var last [8]int16
			copy(last[:], levels[full:])
			dst = packGroup(dst, &last, width)
		}
		return dst
	}
	var acc uint64
	nacc := 0
	for k := range count {
		var v uint64
		if k < len(levels) {
			v = uint64(levels[k])
		}
		acc |= v << nacc
		nacc += width
		for nacc >= 8 {
			dst = append(dst, byte(acc))
			acc >>= 8
			nacc -= 8
		}
	}
	if nacc > 0 {
		dst = append(dst, byte(acc))
	}
	return dst
}

// packGroup appends eight levels of width 1 or 2, LSB first.
func packGroup(dst []byte, g *[8]int16, width int) []byte {
	if width == 1 {
		return append(dst, byte(g[0])|byte(g[1])<<1|byte(g[2])<<2|byte(g[3])<<3|
			byte(g[4])<<4|byte(g[5])<<5|byte(g[6])<<6|byte(g[7])<<7)
	}
	return append(dst, byte(g[0])|byte(g[1])<<2|byte(g[2])<<4|byte(g[3])<<6,
		byte(g[4])|byte(g[5])<<2|byte(g[6])<<4|byte(g[7])<<6)
}
