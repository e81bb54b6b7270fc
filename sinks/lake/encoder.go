package lake

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/parquet"
)

var _ sinks.Encoding = (*Sink)(nil)

// NewEncoder returns an encoder of a Parquet file of schema sch, held in
// memory until the file is written.
func (s *Sink) NewEncoder(sch *arrow.Schema, opts sinks.WriteOptions) (sinks.Encoder, error) {
	e := &encoder{}
	enc, err := parquet.NewEncoder(&e.body, sch, parquetOptions(opts), s.mem)
	if err != nil {
		return nil, err
	}
	e.enc = enc
	return e, nil
}

func parquetOptions(o sinks.WriteOptions) parquet.Options {
	return parquet.Options{Compression: o.Compression, Level: o.CompressionLevel, RowGroupRows: o.RowGroupRows}
}

// encoder is the Sink's sinks.Encoder: a Parquet file being encoded into
// memory, in blocks so that growing it copies nothing.
type encoder struct {
	enc      *parquet.Encoder
	body     blocks
	finished bool
	err      error
}

func (e *encoder) Write(p sinks.Part) error {
	if e.finished {
		return errors.New("parquet write: the file is finished")
	}
	return e.enc.Write(p)
}

// Size counts the encoded bytes and what the Parquet encoder holds.
func (e *encoder) Size() int64 {
	if e.finished {
		return e.body.n
	}
	return e.body.n + e.enc.Buffered()
}

func (e *encoder) Abort() {
	if !e.finished {
		e.finished, e.err = true, errors.New("parquet write: aborted")
		e.enc.Abort()
		e.body = blocks{}
	}
}

// Finish writes the parts and closes the file, once: a retried write
// stores the same bytes.
func (e *encoder) Finish(parts []sinks.Part) error {
	if e.finished {
		return e.err
	}
	e.finished = true
	for _, p := range parts {
		if e.err = e.enc.Write(p); e.err != nil {
			e.enc.Abort()
			return e.err
		}
	}
	e.err = e.enc.Close()
	return e.err
}

// writeEncoded stores a file whose rows f.Encoder holds.
func (s *Sink) writeEncoded(ctx context.Context, f *sinks.File) (int64, error) {
	e, ok := f.Encoder.(*encoder)
	if !ok {
		return 0, fmt.Errorf("%s: an encoder of another sink (%T)", f.Key, f.Encoder)
	}
	if err := e.Finish(f.Parts); err != nil {
		return 0, err
	}
	var n int64
	err := s.do(ctx, OpData, f.Key, checked(ctx, f, func() error {
		var err error
		n, err = s.put(ctx, f.Key, parquetType, f.Once, func(w io.Writer) error {
			_, err := io.Copy(w, e.body.reader())
			return err
		})
		return err
	}))
	if err == nil {
		f.Footer = e.body.footer()
	}
	return n, err
}

// footer returns the Parquet footer of the file b holds; nil when it has
// none.
func (b *blocks) footer() []byte {
	end := b.tail(8)
	if len(end) < 8 || string(end[4:]) != "PAR1" {
		return nil
	}
	n := int64(binary.LittleEndian.Uint32(end))
	if n <= 0 || n > b.n-8 {
		return nil
	}
	return b.tail(int(n) + 8)[:n]
}

// tail returns a copy of the last n bytes (all, if fewer).
func (b *blocks) tail(n int) []byte {
	n = int(min(int64(n), b.n))
	out := make([]byte, n)
	at := n
	for i := len(b.list) - 1; i >= 0 && at > 0; i-- {
		blk := b.list[i]
		k := min(len(blk), at)
		copy(out[at-k:at], blk[len(blk)-k:])
		at -= k
	}
	return out
}

// blocks is an in-memory file in blocks of up to blockSize bytes.
type blocks struct {
	list [][]byte
	n    int64
}

const blockSize = 1 << 20

func (b *blocks) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if len(b.list) == 0 || len(b.list[len(b.list)-1]) == cap(b.list[len(b.list)-1]) {
			size := blockSize
			if len(b.list) == 0 {
				size = 64 << 10 // most files of a short input are small
			}
			b.list = append(b.list, make([]byte, 0, max(size, min(len(p), blockSize))))
		}
		last := &b.list[len(b.list)-1]
		k := min(len(p), cap(*last)-len(*last))
		*last = append(*last, p[:k]...)
		p = p[k:]
	}
	b.n += int64(n)
	return n, nil
}

func (b *blocks) reader() io.Reader {
	rs := make([]io.Reader, len(b.list))
	for i, blk := range b.list {
		rs[i] = bytes.NewReader(blk)
	}
	return io.MultiReader(rs...)
}
