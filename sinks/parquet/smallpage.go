package parquet

import (
	"sync"

	"github.com/klauspost/compress/zstd"
)

// smallPage is the page size under which zstd pages are coded without
// zstd's entropy stage (Huffman literals, FSE sequence tables). Building
// those tables costs a few microseconds a page whatever its size, which is
// most of the cost of a page of a few hundred bytes and saves little of it:
// with many small tables most pages are that small. The page is still a
// zstd frame that any reader decodes.
const smallPage = 1 << 10

// pageEncoders holds the encoders of small pages at zstd's fastest level
// (level 0 or 1), the default.
var pageEncoders = sync.Pool{New: func() any { return new(pageZstd) }}

// smallEncoders holds, per zstd level, encoders without the entropy stage.
var smallEncoders sync.Map // zstd.EncoderLevel → *sync.Pool

// encodeSmallZstd compresses a page of less than smallPage bytes at the
// given zstd level (0: the codec's default) into dst.
func encodeSmallZstd(dst, src []byte, level int) []byte {
	if level <= 1 {
		z := pageEncoders.Get().(*pageZstd)
		defer pageEncoders.Put(z)
		return z.encode(dst[:0], src)
	}
	l := zstd.SpeedDefault
	if level != 0 {
		l = zstd.EncoderLevelFromZstd(level)
	}
	v, ok := smallEncoders.Load(l)
	if !ok {
		v, _ = smallEncoders.LoadOrStore(l, &sync.Pool{New: func() any {
			e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(l), zstd.WithEncoderConcurrency(1),
				zstd.WithZeroFrames(true), zstd.WithNoEntropyCompression(true),
				zstd.WithWindowSize(smallPage), zstd.WithLowerEncoderMem(true))
			if err != nil {
				panic(err) // only invalid options fail
			}
			return e
		}})
	}
	pool := v.(*sync.Pool)
	e := pool.Get().(*zstd.Encoder)
	defer pool.Put(e)
	return e.EncodeAll(src, dst[:0])
}
