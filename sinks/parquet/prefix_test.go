package parquet

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestPrefixOrdersLikeCompare checks that differing prefixes order byte
// strings as bytes.Compare does, including strings that are prefixes of
// one another and strings with zero bytes, which the padding must not
// confuse.
func TestPrefixOrdersLikeCompare(t *testing.T) {
	alphabet := []byte{0, 1, 'a', 'b', 0x7f, 0x80, 0xff}
	r := rand.New(rand.NewPCG(1, 2))
	gen := func() []byte {
		v := make([]byte, r.IntN(12))
		for i := range v {
			v[i] = alphabet[r.IntN(len(alphabet))]
		}
		return v
	}
	for range 200000 {
		a, b := gen(), gen()
		pa, pb := prefix(a), prefix(b)
		want := bytes.Compare(a, b)
		switch {
		case pa < pb && want >= 0, pa > pb && want <= 0:
			t.Fatalf("prefix(%x)=%x, prefix(%x)=%x, but bytes.Compare = %d", a, pa, b, pb, want)
		}
	}
}

func FuzzPrefix(f *testing.F) {
	f.Add([]byte("ab"), []byte("ab\x00"))
	f.Add([]byte("abcdefgh1"), []byte("abcdefgh"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		pa, pb := prefix(a), prefix(b)
		want := bytes.Compare(a, b)
		if pa < pb && want >= 0 || pa > pb && want <= 0 {
			t.Fatalf("prefix(%x)=%x, prefix(%x)=%x, but bytes.Compare = %d", a, pa, b, pb, want)
		}
	})
}

// TestWordPrefix: the prefix of a short value read as a word, with other
// bytes after it, is its prefix.
func TestWordPrefix(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 100000 {
		var buf [8]byte
		for i := range buf {
			buf[i] = byte(r.Uint32())
		}
		n := r.IntN(9)
		if got, want := wordPrefix(binary.LittleEndian.Uint64(buf[:]), n), prefix(buf[:n]); got != want {
			t.Fatalf("%x, %d bytes: %x, want %x", buf, n, got, want)
		}
	}
}
