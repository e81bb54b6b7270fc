package parquet

import (
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/cdclake/cdclake/sinks"
)

// ChunkRows is how many rows the Parquet writer is handed at a time. The
// writer cuts data pages only where one of its batches ends, and its
// batches start afresh with every call: handing it the file's rows in
// chunks of the same length, whatever parts and ranges they came in, makes
// a file a function of its rows alone. A multiple of the writer's batch
// length (1,024 values).
const ChunkRows = 1024

// Encoder writes one Parquet file from rows handed to it in order, as
// they come: every ChunkRows rows are encoded at once, the rest when it
// closes. Not safe for concurrent use.
type Encoder struct {
	// fast writes the file when its schema is one it handles (see
	// fileWriter), fw otherwise.
	fast *fileWriter
	fw   *pqarrow.FileWriter
	sch  *arrow.Schema
	mem  memory.Allocator
	// pending are slices of the rows not encoded yet, in order, holding
	// pendingRows rows (fewer than ChunkRows between calls).
	pending     []arrow.RecordBatch
	pendingRows int
	// rowBytes is the Arrow size of a row of the last part written.
	rowBytes float64
	// groupRows are the rows of the open row group, groupBytes the Arrow
	// size they came in. The writer holds them as compressed pages and,
	// uncompressed, each leaf column's open page: at most groupBytes, and
	// at most a data page (pageLimit) per leaf.
	maxGroup   int
	groupRows  int
	groupBytes float64
	pageLimit  float64
	err        error
}

// NewEncoder returns an Encoder writing a file of schema sch to w. It
// does not close w.
func NewEncoder(w io.Writer, sch *arrow.Schema, opts Options, mem memory.Allocator) (*Encoder, error) {
	codec, err := Codec(opts.Compression)
	if err != nil {
		return nil, err
	}
	rg := opts.RowGroupRows
	if rg < 1 {
		return nil, fmt.Errorf("row group rows must be at least 1, got %d", rg)
	}
	if err := CheckLevel(opts.Compression, opts.Level); err != nil {
		return nil, err
	}
	level := opts.Level
	if level == 0 && opts.Compression == "zstd" {
		level = 1
	}
	wprops := []parquet.WriterProperty{
		parquet.WithAllocator(mem),
		parquet.WithCompression(codec),
		parquet.WithMaxRowGroupLength(int64(rg)),
		// Every column is plain (see the package documentation).
		parquet.WithDictionaryDefault(false),
		parquet.WithStats(true),
		parquet.WithCreatedBy("cdclake"),
	}
	if level != 0 {
		wprops = append(wprops, parquet.WithCompressionLevel(level))
	}
	props := parquet.NewWriterProperties(wprops...)
	arrProps := pqarrow.NewArrowWriterProperties(
		pqarrow.WithAllocator(mem),
		pqarrow.WithStoreSchema(),
		pqarrow.WithCoerceTimestamps(arrow.Microsecond),
	)
	if !opts.Pqarrow {
		p, err := planFor(sch, props, arrProps)
		if err != nil {
			return nil, err
		}
		if p != nil {
			maxPage := opts.MaxPage
			if maxPage <= 0 {
				maxPage = DefaultMaxPage
			}
			fw, err := newFileWriter(w, sch, p, codec, level, rg, maxPage)
			if err != nil {
				return nil, err
			}
			return &Encoder{fast: fw, sch: sch}, nil
		}
	}
	// The Parquet writer closes a writer that is an io.Closer, even after a
	// failure; closing (committing) w is the caller's decision.
	fw, err := pqarrow.NewFileWriter(sch, struct{ io.Writer }{w}, props, arrProps)
	if err != nil {
		return nil, fmt.Errorf("parquet writer: %w", err)
	}
	return &Encoder{fw: fw, sch: sch, mem: mem, maxGroup: rg,
		pageLimit: float64(props.DataPageSize()) * float64(leaves(sch.Fields()))}, nil
}

// Write adds the rows of p's ranges after those before. The rows it has
// not encoded yet (fewer than ChunkRows) it keeps as a copy: it holds no
// reference to p's record once it returns, so that the memory of the
// record is freed when its caller releases it. After an error, every
// later call fails.
func (e *Encoder) Write(p sinks.Part) error {
	if e.fast != nil {
		return e.fast.write(p)
	}
	if e.err != nil {
		return e.err
	}
	if !p.Record.Schema().Equal(e.sch) {
		e.err = errors.New("parquet write: parts of different schemas")
		return e.err
	}
	if n := p.Record.NumRows(); n > 0 {
		e.rowBytes = float64(recordSize(p.Record)) / float64(n)
	}
	for _, r := range p.Ranges {
		if r[1] <= r[0] {
			continue
		}
		e.pending = append(e.pending, p.Record.NewSlice(int64(r[0]), int64(r[1])))
		e.pendingRows += r[1] - r[0]
		for e.pendingRows >= ChunkRows && e.err == nil {
			e.err = e.encode(ChunkRows)
		}
	}
	if e.err == nil && e.pendingRows > 0 {
		e.err = e.own()
	}
	return e.err
}

// own replaces the pending rows by a copy of them.
func (e *Encoder) own() error {
	rows, err := concat(e.pending, e.mem)
	if err != nil {
		return fmt.Errorf("parquet write: %w", err)
	}
	e.release()
	e.pending, e.pendingRows = []arrow.RecordBatch{rows}, int(rows.NumRows())
	return nil
}

// encode hands the writer the first n pending rows as one batch.
func (e *Encoder) encode(n int) error {
	var chunk arrow.RecordBatch
	if first := e.pending[0]; int(first.NumRows()) >= n {
		chunk = first.NewSlice(0, int64(n))
		if int(first.NumRows()) == n {
			e.pending = e.pending[1:]
		} else {
			e.pending[0] = first.NewSlice(int64(n), first.NumRows())
		}
		first.Release()
	} else {
		// The chunk spans slices: its rows are copied into one batch.
		var pieces []arrow.RecordBatch
		for need := n; need > 0; {
			s := e.pending[0]
			if k := int(s.NumRows()); k <= need {
				pieces = append(pieces, s)
				e.pending = e.pending[1:]
				need -= k
			} else {
				pieces = append(pieces, s.NewSlice(0, int64(need)))
				e.pending[0] = s.NewSlice(int64(need), s.NumRows())
				s.Release()
				need = 0
			}
		}
		var err error
		chunk, err = concat(pieces, e.mem)
		for _, p := range pieces {
			p.Release()
		}
		if err != nil {
			return fmt.Errorf("parquet write: %w", err)
		}
	}
	e.pendingRows -= n
	e.groupRows += n
	e.groupBytes += float64(n) * e.rowBytes
	for e.groupRows > e.maxGroup { // the writer closed the row group
		e.groupRows -= e.maxGroup
		e.groupBytes = float64(e.groupRows) * e.rowBytes
	}
	err := e.fw.WriteBuffered(chunk)
	chunk.Release()
	if err != nil {
		return fmt.Errorf("parquet write: %w", err)
	}
	return nil
}

// Buffered bounds the memory the encoder holds: the open row group's
// pages, compressed, its open pages (see groupBytes), and the rows not
// encoded yet.
func (e *Encoder) Buffered() int64 {
	if e.fast != nil {
		return e.fast.buffered()
	}
	return e.fw.RowGroupTotalBytesWritten() + int64(min(e.groupBytes, e.pageLimit)) +
		int64(float64(e.pendingRows)*e.rowBytes)
}

// leaves counts the leaf columns of fields.
func leaves(fs []arrow.Field) int {
	n := 0
	for _, f := range fs {
		switch t := f.Type.(type) {
		case *arrow.StructType:
			n += leaves(t.Fields())
		case arrow.ListLikeType:
			n += leaves([]arrow.Field{t.ElemField()})
		default:
			n++
		}
	}
	return n
}

// Close encodes the rows left and writes the file's footer.
func (e *Encoder) Close() error {
	if e.fast != nil {
		return e.fast.close()
	}
	if e.err == nil && e.pendingRows > 0 {
		e.err = e.encode(e.pendingRows)
	}
	e.release()
	if e.err != nil {
		_ = e.fw.Close()
		return e.err
	}
	if err := e.fw.Close(); err != nil {
		e.err = fmt.Errorf("parquet close: %w", err)
		return e.err
	}
	e.err = errors.New("parquet write: the file is closed")
	return nil
}

// Abort drops the rows not encoded yet; the file is not completed.
func (e *Encoder) Abort() {
	if e.fast != nil {
		if e.fast.err == nil {
			e.fast.err = errors.New("parquet write: aborted")
		}
		e.fast.release()
		return
	}
	e.release()
	if e.err == nil {
		e.err = errors.New("parquet write: aborted")
		_ = e.fw.Close()
	}
}

func (e *Encoder) release() {
	for _, p := range e.pending {
		p.Release()
	}
	e.pending, e.pendingRows = nil, 0
}

// concat returns a copy of the rows of batches, in order, as one batch.
func concat(batches []arrow.RecordBatch, mem memory.Allocator) (arrow.RecordBatch, error) {
	ncols := int(batches[0].NumCols())
	cols := make([]arrow.Array, ncols)
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	rows := int64(0)
	for _, b := range batches {
		rows += b.NumRows()
	}
	parts := make([]arrow.Array, len(batches))
	for i := range cols {
		for j, b := range batches {
			parts[j] = b.Column(i)
		}
		c, err := array.Concatenate(parts, mem)
		if err != nil {
			return nil, err
		}
		cols[i] = c
	}
	return array.NewRecordBatch(batches[0].Schema(), cols, rows), nil
}

// recordSize is the size of rec's buffers (of the whole buffers, for a
// slice).
func recordSize(rec arrow.RecordBatch) int64 {
	n := int64(0)
	for _, c := range rec.Columns() {
		n += dataSize(c.Data())
	}
	return n
}

func dataSize(d arrow.ArrayData) int64 {
	n := int64(0)
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		n += dataSize(c)
	}
	return n
}
