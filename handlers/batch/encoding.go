package batch

import (
	"sync"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/cdclake/cdclake/sinks"
)

// encodeEvery is how many rows a file's builders gather before they are
// handed to its encoder, when the sink encodes files while they are open
// (sinks.Encoding): the lake sink's Parquet chunk length
// (parquet.ChunkRows), so that its encoder copies nothing, and small
// enough that files of a few thousand rows are mostly encoded before
// they close.
const encodeEvery = 1024

// encoding runs a file's sinks.Encoder beside the appends: each run of
// rows handed to it is encoded on a goroutine of its own while the
// batcher goes on (an idle file costs no goroutine), which releases the
// run's record when it is encoded. Handing it a run waits for the one
// before, so at most one is encoded at a time.
//
// What the memory bound sees of it changes on the batcher's goroutine
// only, where runs are handed over (see buffer.handed): the encoder's
// size is taken when the next run is handed over or the file is written,
// so that which files spill or close early depends on the rows alone,
// never on how fast the encoder went.
type encoding struct {
	enc sinks.Encoder
	run sync.WaitGroup // the run being encoded
	err error          // the encoder's first error; read after run.Wait
	// size is what the encoder held after the runs before the last.
	size int64
}

// add hands the encoder a run of rows; it takes the record over.
func (e *encoding) add(p sinks.Part) {
	e.wait()
	e.run.Add(1)
	go func() {
		defer e.run.Done()
		if e.err == nil {
			e.err = e.enc.Write(p)
		}
		p.Record.Release()
	}()
}

// wait waits until the run being encoded is done and takes the encoder's
// size.
func (e *encoding) wait() {
	e.run.Wait()
	if e.err == nil {
		e.size = e.enc.Size()
	}
}

// finish waits until every run handed over is encoded and returns the
// encoder, for the file's write; no run is handed over after it. It may
// be called again.
func (e *encoding) finish() (sinks.Encoder, error) {
	e.wait()
	return e.enc, e.err
}

// abort drops the file, unless it was written.
func (e *encoding) abort() {
	_, _ = e.finish()
	e.enc.Abort()
}

// encodeRows hands the builders' rows to the file's encoder, which the
// first call starts, once they are encodeEvery. The rows stay the file's:
// only their form changes. A buffer whose rows were spilled keeps them for
// the write (the spilled runs come before the builders' rows), as does one
// being written or whose write failed (sealed).
func (b *Batcher) encodeRows(buf *buffer) error {
	if b.encoding == nil || buf.rb == nil || buf.built != nil || buf.state == sealed || len(buf.spilled) > 0 || buf.rows-buf.base < encodeEvery {
		return nil
	}
	if err := b.startEncoding(buf); err != nil {
		return err
	}
	buf.toEncoder()
	return nil
}

// startEncoding gives buf an encoder of the sink's, unless it has one.
func (b *Batcher) startEncoding(buf *buffer) error {
	if buf.enc != nil {
		return nil
	}
	enc, err := b.encoding.NewEncoder(buf.table.Arrow, b.tables(buf.key.table).Write)
	if err != nil {
		return err
	}
	buf.enc = &encoding{enc: enc}
	return nil
}

// toEncoder hands the builders' rows to the file's encoder.
func (buf *buffer) toEncoder() {
	rec := buf.newRecord(false)
	ranges := buf.validRanges()
	for _, r := range ranges {
		buf.encodedRows += r[1] - r[0]
	}
	if !buf.named && len(ranges) > 0 {
		buf.first, buf.named = rec.Column(schema.OffsetIndex).(*array.Int64).Value(ranges[0][0]), true
	}
	buf.invalid, buf.base = buf.invalid[:0], buf.rows
	buf.handed = buf.alloc.hand(rec)
	buf.enc.add(sinks.Part{Record: rec, Ranges: ranges})
}
