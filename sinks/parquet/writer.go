package parquet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/cdclake/cdclake/sinks"
)

// pageSize is the size a data page is cut at (where a block of ChunkRows
// rows ends). Parquet writers default to 1 MiB; at 128 KiB a column's page
// buffer is reused from page to page instead of growing to a megabyte and
// being cleared and copied on the way, which made the landing faster and
// its peak memory smaller (bench/CHANGES.md).
const pageSize = 128 << 10

// fileWriter writes a Parquet file of the landed layouts itself: every
// column plain, data pages v1 with RLE levels, statistics on pages and
// chunks, the Parquet schema and footer keys pqarrow gives the same Arrow
// schema. It does per file what pqarrow does with a writer object per
// column and per page: a file of a few rows costs little more than its
// rows.
//
// Pages end where a row group's ChunkRows-th row does, once they hold
// pageSize bytes, and row groups every maxGroup rows: a file is a function
// of its rows, however they were split into parts.
type fileWriter struct {
	w        io.Writer
	plan     *plan
	sch      *arrow.Schema
	cols     []*column
	codec    compress.Codec // nil: uncompressed
	codecID  compress.Compression
	level    int
	maxGroup int
	maxPage  int // Options.MaxPage

	groupRows int
	rows      int64
	offset    int64
	out       []byte // bytes put, not written yet
	groups    []groupMeta
	err       error
}

type groupMeta struct {
	rows, offset, raw, size int64
	chunks                  []chunkMeta
}

type chunkMeta struct {
	offset, size, raw, values int64
	pages                     int
	stats                     stats
}

func newFileWriter(w io.Writer, sch *arrow.Schema, p *plan, codecID compress.Compression, level, maxGroup, maxPage int) (*fileWriter, error) {
	f := &fileWriter{w: w, plan: p, sch: sch, codecID: codecID, level: level, maxGroup: maxGroup, maxPage: maxPage}
	if codecID != compress.Codecs.Uncompressed {
		c, err := compress.GetCodec(codecID)
		if err != nil {
			return nil, err
		}
		f.codec = c
	}
	f.cols = make([]*column, len(p.leaves))
	for i := range p.leaves {
		f.cols[i] = newColumn(&p.leaves[i])
	}
	return f, nil
}

// write adds the rows of p's ranges.
func (f *fileWriter) write(p sinks.Part) error {
	if f.err != nil {
		return f.err
	}
	if !p.Record.Schema().Equal(f.sch) {
		f.err = errors.New("parquet write: parts of different schemas")
		return f.err
	}
	for _, c := range f.cols {
		c.bind(p.Record)
	}
	defer func() {
		for _, c := range f.cols {
			c.unbind()
		}
	}()
	for _, r := range p.Ranges {
		for lo, hi := r[0], r[1]; lo < hi; {
			n := min(hi-lo, ChunkRows-f.groupRows%ChunkRows, f.maxGroup-f.groupRows)
			for _, c := range f.cols {
				if err := c.writeRows(f, lo, lo+n); err != nil {
					f.err = err
					return err
				}
			}
			lo += n
			f.groupRows += n
			f.rows += int64(n)
			switch {
			case f.groupRows == f.maxGroup:
				if err := f.flushGroup(); err != nil {
					return err
				}
				if err := f.drain(); err != nil {
					return err
				}
			case f.groupRows%ChunkRows == 0:
				for _, c := range f.cols {
					if c.size() >= pageSize {
						if err := c.flushPage(f); err != nil {
							f.err = err
							return err
						}
					}
				}
			}
		}
	}
	return nil
}

// buffered is what the writer holds: the open row group, its open pages
// uncompressed.
func (f *fileWriter) buffered() int64 {
	n := int64(0)
	for _, c := range f.cols {
		n += c.buffered()
	}
	return n
}

// put writes b after the bytes put before. It gathers small writes (a
// file of few rows is mostly small column chunks) into one.
func (f *fileWriter) put(b []byte) error {
	if f.err != nil {
		return f.err
	}
	f.offset += int64(len(b))
	if f.out == nil {
		if b, ok := outs.Get().(*[]byte); ok {
			f.out = (*b)[:0]
		}
	}
	if len(f.out)+len(b) <= outBytes {
		f.out = append(f.out, b...)
		return nil
	}
	if err := f.drain(); err != nil {
		return err
	}
	if len(b) >= outBytes {
		if _, err := f.w.Write(b); err != nil {
			f.err = fmt.Errorf("parquet write: %w", err)
		}
		return f.err
	}
	f.out = append(f.out, b...)
	return nil
}

// outs holds the buffers of put, for the next file.
var outs sync.Pool

// outBytes bounds the bytes put gathers.
const outBytes = 256 << 10

// drain writes the bytes put so far.
func (f *fileWriter) drain() error {
	if f.err != nil || len(f.out) == 0 {
		return f.err
	}
	if _, err := f.w.Write(f.out); err != nil {
		f.err = fmt.Errorf("parquet write: %w", err)
	}
	f.out = f.out[:0]
	return f.err
}

// flushGroup writes the open row group's column chunks.
func (f *fileWriter) flushGroup() error {
	if f.groupRows == 0 {
		return f.err
	}
	if f.offset == 0 {
		if err := f.put([]byte("PAR1")); err != nil {
			return err
		}
	}
	g := groupMeta{rows: int64(f.groupRows), offset: f.offset, chunks: make([]chunkMeta, len(f.cols))}
	for i, c := range f.cols {
		if err := c.flushPage(f); err != nil {
			f.err = err
			return err
		}
		cm := chunkMeta{offset: f.offset, size: int64(len(c.buf)), raw: c.raw, values: c.values, pages: c.pages, stats: c.chunk}
		cm.stats.encode(c, true)
		cm.stats.blo, cm.stats.bhi = nil, nil
		if err := f.put(c.buf); err != nil {
			return err
		}
		g.chunks[i] = cm
		g.raw += cm.raw
		g.size += cm.size
		c.buf, c.raw, c.values, c.pages, c.chunk = c.buf[:0], 0, 0, 0, stats{}
	}
	f.groups = append(f.groups, g)
	f.groupRows = 0
	return f.err
}

// close writes the last row group and the footer.
func (f *fileWriter) close() error {
	defer f.release()
	if err := f.flushGroup(); err != nil {
		return err
	}
	if f.offset == 0 {
		if err := f.put([]byte("PAR1")); err != nil {
			return err
		}
	}
	// The footer goes straight after the bytes not written yet.
	start := len(f.out)
	t := &tw{b: f.out}
	f.footer(t)
	t.b = binary.LittleEndian.AppendUint32(t.b, uint32(len(t.b)-start))
	f.out = append(t.b, "PAR1"...)
	if err := f.drain(); err != nil {
		return err
	}
	if out := f.out[:0]; cap(out) <= 2*outBytes {
		outs.Put(&out)
	}
	f.out = nil
	f.err = errors.New("parquet write: the file is closed")
	return nil
}

// release gives the columns back to the pool; the writer is done.
func (f *fileWriter) release() {
	for _, c := range f.cols {
		c.free()
	}
	f.cols = nil
}

// footer writes the file's FileMetaData to t.
func (f *fileWriter) footer(t *tw) {
	t.i32(1, 2) // format version 2 (pqarrow's default writer version)
	t.field(2, tList)
	t.b = append(t.b, f.plan.schemaList...)
	t.i64(3, f.rows)
	t.list(4, tStruct, len(f.groups))
	for gi, g := range f.groups {
		t.elem()
		t.list(1, tStruct, len(g.chunks))
		for i, cm := range g.chunks {
			lp := &f.plan.leaves[i]
			t.elem()
			t.i64(2, cm.offset)
			t.begin(3)
			t.i32(1, int32(lp.phys))
			t.list(2, tI32, 2)
			t.elemI32(int32(parquet.Encodings.Plain))
			t.elemI32(int32(parquet.Encodings.RLE))
			t.list(3, tBinary, len(lp.path))
			for _, s := range lp.path {
				t.elemString(s)
			}
			t.i32(4, int32(f.codecID))
			t.i64(5, cm.values)
			t.i64(6, cm.raw)
			t.i64(7, cm.size)
			t.i64(9, cm.offset)
			st := cm.stats
			st.write(t, 12, lp.signed)
			t.list(13, tStruct, 1)
			t.elem()
			t.i32(1, 0) // DATA_PAGE
			t.i32(2, int32(parquet.Encodings.Plain))
			t.i32(3, int32(cm.pages))
			t.end()
			t.end()
			t.end()
		}
		t.i64(2, g.raw)
		t.i64(3, g.rows)
		t.i64(5, g.offset)
		t.i64(6, g.size)
		if gi <= math.MaxInt16 {
			t.i16(7, int16(gi))
		}
		t.end()
	}
	t.list(5, tStruct, len(f.plan.kv))
	for _, kv := range f.plan.kv {
		t.elem()
		t.string(1, kv[0])
		t.string(2, kv[1])
		t.end()
	}
	t.string(6, "cdclake")
	t.list(7, tStruct, len(f.plan.leaves))
	for range f.plan.leaves {
		t.elem()
		t.begin(1) // TYPE_ORDER
		t.end()
		t.end()
	}
	t.stop()
}
