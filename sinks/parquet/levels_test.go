package parquet

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// decodeLevels reads n levels of width bits from the RLE/bit-packed hybrid
// encoding with its 4-byte length prefix, as data page v1 holds them.
func decodeLevels(t *testing.T, b []byte, n, width int) []int16 {
	t.Helper()
	if len(b) < 4 {
		t.Fatal("no length")
	}
	size := int(binary.LittleEndian.Uint32(b))
	b = b[4:]
	if size != len(b) {
		t.Fatalf("length %d, %d bytes follow", size, len(b))
	}
	var out []int16
	for len(out) < n {
		h, k := binary.Uvarint(b)
		if k <= 0 {
			t.Fatalf("bad run header after %d levels", len(out))
		}
		b = b[k:]
		if h&1 == 0 { // RLE run
			count, vb := int(h>>1), (width+7)/8
			if count == 0 || len(b) < vb {
				t.Fatalf("bad RLE run of %d", count)
			}
			v := 0
			for i := range vb {
				v |= int(b[i]) << (8 * i)
			}
			b = b[vb:]
			for range count {
				out = append(out, int16(v))
			}
			continue
		}
		groups := int(h >> 1)
		nbytes := groups * width
		if groups == 0 || len(b) < nbytes {
			t.Fatalf("bad bit-packed run of %d groups", groups)
		}
		for i := range groups * 8 {
			v := 0
			for j := range width {
				bit := i*width + j
				v |= int(b[bit/8]>>(bit%8)&1) << j
			}
			out = append(out, int16(v))
		}
		b = b[nbytes:]
	}
	if len(b) != 0 {
		t.Fatalf("%d bytes after the levels", len(b))
	}
	return out[:n]
}

// FuzzLevels: any run of levels at any width decodes to itself.
func FuzzLevels(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 1, 2}, uint8(2))
	f.Add([]byte{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0}, uint8(1))
	f.Add([]byte{3, 2, 1, 0, 3, 2, 1, 0, 3, 3, 3, 3, 3, 3, 3, 3, 3}, uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, max uint8) {
		m := int16(max%16) + 1
		levels := make([]int16, len(data))
		for i, d := range data {
			levels[i] = int16(d) % (m + 1)
		}
		width := levelWidth(m)
		enc := appendLevels([]byte{0xAA}, levels, width)
		if enc[0] != 0xAA {
			t.Fatal("appendLevels overwrote what was before")
		}
		got := decodeLevels(t, enc[1:], len(levels), width)
		for i := range levels {
			if got[i] != levels[i] {
				t.Fatalf("level %d: %d, want %d (width %d)", i, got[i], levels[i], width)
			}
		}
	})
}

// TestLevelsRoundTrip: levels of every width up to 4 (flat, nested and
// listed columns), with runs, alternations and partial last groups,
// decode to themselves.
func TestLevelsRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for width := 1; width <= 4; width++ {
		m := int16(1)<<width - 1
		for n := range 70 {
			for range 20 {
				levels := make([]int16, n)
				for i := range levels {
					switch r.IntN(3) {
					case 0: // continue a run
						if i > 0 {
							levels[i] = levels[i-1]
							continue
						}
						fallthrough
					default:
						levels[i] = int16(r.IntN(int(m) + 1))
					}
				}
				enc := appendLevels(nil, levels, width)
				got := decodeLevels(t, enc, n, width)
				if !slices.Equal(got, levels) {
					t.Fatalf("width %d: %v decoded as %v", width, levels, got)
				}
			}
		}
	}
}

// BenchmarkAppendLevels encodes a page's definition levels of a column
// that is NULL in about a third of its rows, in short runs (a partial
// image's column), at the widths of a flat and of a nested column.
func BenchmarkAppendLevels(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, width := range []int{1, 2} {
		levels := make([]int16, 8192)
		for i := range levels {
			if r.IntN(3) > 0 {
				levels[i] = int16(1)<<width - 1
			}
		}
		b.Run(fmt.Sprintf("width=%d", width), func(b *testing.B) {
			var dst []byte
			for b.Loop() {
				dst = appendLevels(dst[:0], levels, width)
			}
			b.SetBytes(int64(len(levels)))
		})
	}
}

// TestBitsAt reads words of a bitmap at every offset and length, against
// the bits read one by one, at the bitmap's end too.
func TestBitsAt(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	b := make([]byte, 23)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	for pos := 0; pos < 8*len(b); pos++ {
		for n := 1; n <= 64 && pos+n <= 8*len(b); n++ {
			var want uint64
			for j := range n {
				want |= uint64(b[(pos+j)>>3]>>((pos+j)&7)&1) << j
			}
			// The bitmap cut just after the bits read, as a slice's may be.
			end := (pos + n + 7) >> 3
			if got := bitsAt(b[:end], pos, n); got != want {
				t.Fatalf("pos %d, n %d: %064b, want %064b", pos, n, got, want)
			}
		}
	}
}
