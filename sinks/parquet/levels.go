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
// values.
func packLevels(dst []byte, levels []int16, count, width int) []byte {
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
