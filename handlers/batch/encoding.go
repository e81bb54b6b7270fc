package batch

import (
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/cdclake/cdclake/sinks"
)

// encodeEvery is how many rows a file's builders gather before they are
// handed to its encoder, when the sink encodes files while they are open
// (sinks.Encoding): the lake sink's Parquet chunk length
// (parquet.ChunkRows), so that its encoder copies nothing, and small
// enough that files of a few thousand rows are mostly encoded before
// they close.
const encodeEvery = 1024

// encoding runs a file's sinks.Encoder beside the appends: rows handed to
// it are encoded in order, on a goroutine that lives while it has rows to
// encode (an idle file costs none), while the batcher goes on. At most one
// run of rows waits for the encoder; handing it another waits until it
// took the last.
type encoding struct {
	enc     sinks.Encoder
	mu      sync.Mutex
	took    sync.Cond // signalled when the goroutine takes a run or ends
	queue   []sinks.Part
	running bool
	runs    sync.WaitGroup
	err     error // the encoder's first error; read after runs.Wait
	// size is what the encoder holds, after each run it encoded.
	size atomic.Int64
}

func startEncoding(enc sinks.Encoder) *encoding {
	e := &encoding{enc: enc}
	e.took.L = &e.mu
	return e
}

// add hands the encoder a run of rows; it takes the record over.
func (e *encoding) add(p sinks.Part) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for len(e.queue) > 0 {
		e.took.Wait()
	}
	e.queue = append(e.queue, p)
	if !e.running {
		e.running = true
		e.runs.Add(1)
		go e.run()
	}
}

func (e *encoding) run() {
	defer e.runs.Done()
	e.mu.Lock()
	for len(e.queue) > 0 {
		p := e.queue[0]
		e.queue = e.queue[1:]
		e.took.Broadcast()
		e.mu.Unlock()
		if e.err == nil {
			e.err = e.enc.Write(p)
			e.size.Store(e.enc.Size())
		}
		p.Record.Release()
		e.mu.Lock()
	}
	e.running = false
	e.took.Broadcast()
	e.mu.Unlock()
}

// finish waits until every run handed over is encoded and returns the
// encoder, for the file's write; no run is handed over after it. It may
// be called again.
func (e *encoding) finish() (sinks.Encoder, error) {
	e.runs.Wait()
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
	if b.encoding == nil || buf.rb == nil || buf.built != nil || buf.sealed || len(buf.spilled) > 0 || buf.rows-buf.base < encodeEvery {
		return nil
	}
	if buf.enc == nil {
		enc, err := b.encoding.NewEncoder(buf.table.Arrow, b.tables(buf.key.table).Write)
		if err != nil {
			return err
		}
		buf.enc = startEncoding(enc)
	}
	buf.toEncoder()
	return nil
}

// toEncoder hands the builders' rows to the file's encoder.
func (buf *buffer) toEncoder() {
	rec := buf.rb.NewRecordBatch()
	ranges := buf.validRanges()
	for _, r := range ranges {
		buf.encodedRows += r[1] - r[0]
	}
	if !buf.named && len(ranges) > 0 {
		buf.first, buf.named = rec.Column(7).(*array.Int64).Value(ranges[0][0]), true
	}
	buf.invalid, buf.base = buf.invalid[:0], buf.rows
	buf.enc.add(sinks.Part{Record: rec, Ranges: ranges})
}
