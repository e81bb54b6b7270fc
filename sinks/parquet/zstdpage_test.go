package parquet

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// pageInputs are pages of the kinds a column gives: runs, small integers,
// text with repeats, bytes without structure, and the edges of the
// encoder's forms (literal and sequence counts, sizes around 256).
func pageInputs() map[string][]byte {
	rng := rand.New(rand.NewPCG(3, 4))
	in := map[string][]byte{"empty": {}, "one": {7}, "three": {1, 2, 3}, "four same": {9, 9, 9, 9}}
	for _, n := range []int{5, 31, 32, 33, 255, 256, 257, 1000, 1023, 4095, 4096, 4097, pageMaxInput} {
		run := bytes.Repeat([]byte{0xAB}, n)
		in["run "+itoa(n)] = run
		noise := make([]byte, n)
		for i := range noise {
			noise[i] = byte(rng.Uint32())
		}
		in["noise "+itoa(n)] = noise
		var ints []byte
		for len(ints) < n {
			ints = binary.LittleEndian.AppendUint64(ints, uint64(rng.IntN(1000)))
		}
		in["int64s "+itoa(n)] = ints[:n]
		var text []byte
		for len(text) < n {
			w := []string{"SALES", "ORDERS", "2026-07-16", "shipped", "pending", "Zürich", "a"}[rng.IntN(7)]
			text = binary.LittleEndian.AppendUint32(text, uint32(len(w)))
			text = append(text, w...)
		}
		in["strings "+itoa(n)] = text[:n]
		skew := make([]byte, n)
		for i := range skew {
			skew[i] = "aaaabbc0123456789"[rng.IntN(17)]
		}
		in["skewed "+itoa(n)] = skew
	}
	// Many short matches: more than 128 sequences (the two-byte count).
	var many []byte
	for i := 0; len(many) < 2000; i++ {
		many = append(many, byte(i), byte(i>>8), 'x', 'y', 'z', 'w', byte(i*7))
	}
	in["many sequences"] = many
	return in
}

func itoa(n int) string {
	b := []byte{}
	for {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
		if n == 0 {
			return string(b)
		}
	}
}

// TestPageZstdDecodes: every frame decodes, with a zstd decoder, to what
// was coded, and is never larger than the page stored raw in a frame.
func TestPageZstdDecodes(t *testing.T) {
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	var z pageZstd
	for name, src := range pageInputs() {
		frame := z.encode(nil, src)
		got, err := dec.DecodeAll(frame, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(got, src) {
			t.Fatalf("%s: decoded %d bytes, not the %d coded", name, len(got), len(src))
		}
		if max := len(src) + 4 + 3 + 3; len(frame) > max {
			t.Errorf("%s: frame of %d bytes, more than the raw frame's %d", name, len(frame), max)
		}
	}
}

// TestPageZstdCompresses: on pages with repeats the frames are at most a
// little larger than those of the general encoder at the same level with
// its entropy stage left out (whose frames carry a 4-byte checksum too).
func TestPageZstdCompresses(t *testing.T) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
		zstd.WithZeroFrames(true), zstd.WithNoEntropyCompression(true), zstd.WithWindowSize(smallPage))
	if err != nil {
		t.Fatal(err)
	}
	var z pageZstd
	var ours, theirs int
	for name, src := range pageInputs() {
		if len(src) > smallPage || len(src) < 64 || bytes.HasPrefix([]byte(name), []byte("noise")) {
			continue
		}
		ours += len(z.encode(nil, src))
		theirs += len(enc.EncodeAll(src, nil))
	}
	t.Logf("pages with repeats: %d bytes, against %d", ours, theirs)
	if ours > theirs*110/100 {
		t.Errorf("pages with repeats: %d bytes, more than 10%% over the general encoder's %d", ours, theirs)
	}
}

// TestPageZstdReuse: an encoder gives the same frame for a page whatever
// it coded before (its scratch carries nothing over).
func TestPageZstdReuse(t *testing.T) {
	in := pageInputs()
	var fresh pageZstd
	want := fresh.encode(nil, in["strings 1000"])
	var z pageZstd
	for _, src := range in {
		z.encode(nil, src)
	}
	if got := z.encode(nil, in["strings 1000"]); !bytes.Equal(got, want) {
		t.Fatal("a reused encoder coded a page differently")
	}
}

func FuzzPageZstd(f *testing.F) {
	for _, src := range pageInputs() {
		if len(src) <= 4096 {
			f.Add(src)
		}
	}
	dec, err := zstd.NewReader(nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		if len(src) > pageMaxInput {
			src = src[:pageMaxInput]
		}
		var z pageZstd
		got, err := dec.DecodeAll(z.encode(nil, src), nil)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, src) {
			t.Fatalf("decoded %d bytes, not the %d coded", len(got), len(src))
		}
	})
}

func BenchmarkPageZstd(b *testing.B) {
	src := pageInputs()["strings 1000"]
	b.Run("predefined", func(b *testing.B) {
		var z pageZstd
		var dst []byte
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			dst = z.encode(dst[:0], src)
		}
	})
	b.Run("general", func(b *testing.B) {
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
			zstd.WithZeroFrames(true), zstd.WithNoEntropyCompression(true), zstd.WithWindowSize(smallPage),
			zstd.WithLowerEncoderMem(true))
		if err != nil {
			b.Fatal(err)
		}
		var dst []byte
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			dst = enc.EncodeAll(src, dst[:0])
		}
	})
}

// TestLengthCodes: each length's code has the length in its range, for
// every length a page of pageMaxInput bytes can have.
func TestLengthCodes(t *testing.T) {
	for n := uint32(0); n <= pageMaxInput; n++ {
		if c := llCode(n); n < llBase[c] || n-llBase[c] >= 1<<llBits[c] {
			t.Fatalf("literal length %d: code %d covers %d+%d bits", n, c, llBase[c], llBits[c])
		}
		if c := mlCode(n); n < mlBase[c] || n-mlBase[c] >= 1<<mlBits[c] {
			t.Fatalf("match length %d+3: code %d covers %d+%d bits", n, c, mlBase[c], mlBits[c])
		}
	}
}
