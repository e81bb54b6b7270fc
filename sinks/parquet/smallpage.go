package parquet

import (
	"sync"

	"github.com/klauspost/compress/zstd"
)

// smallPage is the page size under which zstd pages are coded without
// zstd's entropy stage (Huffman literals, FSE tables built for the page):
// at the default level by pageZstd, with the predefined FSE tables, at
// other levels by the general encoder without it. Building those tables
// costs a few microseconds a page whatever its size, which is most of the
// cost of a page of a few hundred bytes and saves little of it: with many
// small tables most pages are that small. The page is still a zstd frame
// that any reader decodes. The limit was chosen by measurement (the
// figures: docs/architecture.md, "Small pages, own zstd frames"): larger,
// pages of text lose too much of the Huffman coding of their literals.
const smallPage = 4 << 10

// pageEncoders holds the encoders of small pages at zstd's fastest level
// (level 0 or 1), the default.
var pageEncoders = sync.Pool{New: func() any { return new(pageZstd) }}

// encodeSmallZstd compresses a page of less than smallPage bytes at the
// given zstd level (0 or 1: the fastest) into dst.
func encodeSmallZstd(dst, src []byte, level int) []byte {
	if level <= 1 {
		z := pageEncoders.Get().(*pageZstd)
		defer pageEncoders.Put(z)
		return z.encode(dst[:0], src)
	}
	return encodeWith(encoderKind{zstd.EncoderLevelFromZstd(level), true}, dst, src)
}

// encodeZstd compresses a page at the given zstd level (1 to 22) into dst.
func encodeZstd(dst, src []byte, level int) []byte {
	return encodeWith(encoderKind{zstd.EncoderLevelFromZstd(level), false}, dst, src)
}

// encoderKind is a kind of zstd encoder: its level, and whether it is for
// small pages (without the entropy stage, with a small window) or larger
// ones (arrow-go's codec's settings, whose Huffman coding of literals
// pays there).
type encoderKind struct {
	level zstd.EncoderLevel
	small bool
}

// zstdEncoders holds the encoders of each kind. None writes the frame
// checksum, which is optional in zstd (Parquet pages are checked by their
// lengths) and cost a hash of every page and 4 bytes.
var zstdEncoders sync.Map // encoderKind → *sync.Pool

func encodeWith(k encoderKind, dst, src []byte) []byte {
	v, ok := zstdEncoders.Load(k)
	if !ok {
		v, _ = zstdEncoders.LoadOrStore(k, &sync.Pool{New: func() any {
			opts := []zstd.EOption{zstd.WithEncoderLevel(k.level), zstd.WithEncoderConcurrency(1),
				zstd.WithZeroFrames(true), zstd.WithEncoderCRC(false)}
			if k.small {
				opts = append(opts, zstd.WithNoEntropyCompression(true), zstd.WithWindowSize(smallPage),
					zstd.WithLowerEncoderMem(true))
			} else {
				opts = append(opts, zstd.WithAllLitEntropyCompression(true))
			}
			e, err := zstd.NewWriter(nil, opts...)
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
