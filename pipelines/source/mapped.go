package source

import (
	"bytes"
	"context"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
)

// A regular file is read through a read-only memory mapping of it rather
// than read(2) into blocks' buffers: its records are slices of the mapping,
// so no input byte is copied before it is parsed (the copy was about a
// tenth of the time of a file of large messages, such as Debezium
// envelopes with their schemas). Blocks are acked in order, and an acked
// block is done with (see recycle), so once a block is acked the pages
// before its end are dropped from the process (madvise MADV_DONTNEED):
// what the process has of the file stays about the blocks in flight.
//
// A file truncated while it is mapped faults the process (SIGBUS) when a
// page past its new end is touched: the files given to a run must not
// shrink while it reads them. A file the source cannot map (empty,
// special, or on a system without the calls) is read as a stream.

// mapping is a file mapped into memory.
type mapping struct {
	data []byte
	// released is the offset before which the pages were dropped.
	released int
	// poisonable: the mapping is private, so that an acked block's bytes
	// can be overwritten (PoisonRecycled).
	poisonable bool
}

// readMapped reads the lines of m (a file named name) into blocks, with
// the same blocks, offsets and errors as lineReader on the same bytes.
func (s *Files) readMapped(ctx context.Context, name string, m *mapping, out chan<- *message.Message) (err error) {
	d := startDelivery(ctx, name, out, m.release)
	defer func() {
		derr := d.close()
		if err == nil {
			err = derr
		}
		if derr == nil {
			// Every block sent was acked: nothing refers to the mapping.
			// Otherwise a block may still be in the pipeline's hands, and
			// the mapping stays for the rest of the process.
			m.unmap()
		}
	}()
	data := m.data
	start := 0
	if bytes.HasPrefix(data, byteOrderMark) {
		start = len(byteOrderMark)
	}
	var (
		recs    []Record
		size    int   // the block's bytes, without line ends
		first   int   // where the block's first line starts
		line    int64 // lines read
		counted int   // the bytes counted as read (Backlog), once a block
	)
	send := func(end int) error {
		s.read.Add(int64(end - counted))
		counted = end
		if len(recs) == 0 {
			return nil
		}
		blk := &Block{Source: name, Records: recs, span: [2]int{first, end}}
		recs, size, first = make([]Record, 0, len(recs)), 0, end
		return d.send(ctx, blk)
	}
	for start < len(data) {
		end, next := len(data), len(data) // a last line without newline
		if i := bytes.IndexByte(data[start:], '\n'); i >= 0 {
			end, next = start+i, start+i+1
		}
		line++
		if end > start && data[end-1] == '\r' {
			end--
		}
		n := end - start
		if n > s.maxLine {
			return fmt.Errorf("%s line %d: longer than %d bytes", name, line, s.maxLine)
		}
		// A block is cut before a line that would take it past its byte
		// bound; a longer line travels alone.
		if len(recs) > 0 && size+n > s.blockBytes {
			if err := send(start); err != nil {
				return err
			}
		}
		recs = append(recs, Record{Offset: line, Value: data[start:end:end]})
		size += n
		start = next
		if len(recs) >= s.blockLines {
			if err := send(start); err != nil {
				return err
			}
		}
	}
	return send(len(data))
}

// release is called with each block once it is acked, in order: the pages
// that hold nothing past the block's end are dropped (with PoisonRecycled,
// the block's bytes are overwritten instead).
func (m *mapping) release(blk *Block) {
	if m.poisonable {
		m.poison(blk.span[0], blk.span[1])
		return
	}
	end := blk.span[1] &^ (pageSize - 1)
	if end > m.released {
		dropPages(m.data[m.released:end])
		m.released = end
	}
}
