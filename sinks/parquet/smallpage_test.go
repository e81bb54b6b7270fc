package parquet

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/compress"
)

// TestSmallZstdPagesDecode: pages coded without zstd's entropy stage
// decode, with the codec readers use, to what was written, at every level
// a configuration may give.
func TestSmallZstdPagesDecode(t *testing.T) {
	codec, err := compress.GetCodec(compress.Codecs.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, level := range []int{0, 1, 3, 9, 22} {
		for n := 0; n < smallPage; n += 1 + n/8 {
			src := make([]byte, n)
			for i := range src {
				src[i] = "aaaabbc0123456789"[rng.IntN(17)] // skewed, with repeats
			}
			got := codec.Decode(make([]byte, n), encodeSmallZstd(nil, src, level))
			if !bytes.Equal(got, src) {
				t.Fatalf("level %d, %d bytes: decoded %d bytes", level, n, len(got))
			}
		}
	}
}
