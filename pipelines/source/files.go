package source

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ThreeDotsLabs/watermill/message"
)

// MaxLine bounds one message value (one line) of a file source.
const MaxLine = 256 << 20

// Files is a Source reading NDJSON: one message value per line. A record's
// position is (file name, partition 0, line number); each file is its own
// partition. Files are read one after the other in name order, a block at
// a time: the next block is delivered only after the previous one was
// acked. The subscription channel closes at the end of input.
//
// Its URL (OpenFiles) is file:///path or a plain path — a file, a directory
// whose *.ndjson, *.jsonl and *.b64 files are read, or a glob — or "-" for
// standard input.
//
// A file named *.b64 holds one base64-encoded message per line, for
// binary messages (Confluent-framed Avro) that a line cannot carry as
// they are; an empty line is an empty message (a tombstone).
type Files struct {
	files      []string
	blockLines int
	blockBytes int
	maxLine    int
	total      int64
	read       atomic.Int64
	mapped     atomic.Int32 // files read through a mapping
	stdin      io.Reader
	stdinName  string

	mu      sync.Mutex
	closed  bool
	err     error
	cancel  context.CancelFunc
	done    chan struct{}
	drained chan struct{}
}

var _ Source = (*Files)(nil)

// OpenFiles resolves a source URL into the files to read. A block holds at
// most blockLines lines and, unless a single line is longer, blockBytes
// bytes.
func OpenFiles(raw string, blockLines, blockBytes int) (*Files, error) {
	if blockLines < 1 || blockBytes < 1 {
		return nil, fmt.Errorf("source %q: block bounds must be at least 1", raw)
	}
	s := newFiles(blockLines, blockBytes)
	if raw == "-" {
		s.stdin, s.stdinName = os.Stdin, "stdin"
		return s, nil
	}
	p := raw
	if strings.HasPrefix(raw, "file://") {
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("source %q: %w", raw, err)
		}
		p = u.Path
		if u.Host != "" && u.Host != "localhost" {
			p = u.Host + u.Path // file://relative/path
		}
	} else if strings.Contains(raw, "://") {
		return nil, fmt.Errorf("source %q: unsupported scheme (file:// or -)", raw)
	}
	var files []string
	if st, err := os.Stat(p); err == nil && st.IsDir() {
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if !e.IsDir() && !strings.HasPrefix(e.Name(), ".") &&
				(strings.HasSuffix(e.Name(), ".ndjson") || strings.HasSuffix(e.Name(), ".jsonl") ||
					strings.HasSuffix(e.Name(), base64Suffix)) {
				files = append(files, filepath.Join(p, e.Name()))
			}
		}
	} else if err == nil {
		files = []string{p}
	} else {
		matches, gerr := filepath.Glob(p)
		if gerr != nil || len(matches) == 0 {
			return nil, fmt.Errorf("source %q: no such file, directory or glob match", raw)
		}
		files = matches
	}
	sort.Strings(files)
	if len(files) == 0 {
		return nil, fmt.Errorf("source %q: no files", raw)
	}
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			return nil, err
		}
		s.total += st.Size()
	}
	s.files = files
	return s, nil
}

// base64Suffix names files of base64-encoded messages.
const base64Suffix = ".b64"

// NewReader returns a source reading one stream of NDJSON records named
// name (its positions' source) from r.
func NewReader(name string, r io.Reader, blockLines, blockBytes int) *Files {
	s := newFiles(max(blockLines, 1), max(blockBytes, 1))
	s.stdin, s.stdinName = r, name
	return s
}

func newFiles(blockLines, blockBytes int) *Files {
	return &Files{blockLines: blockLines, blockBytes: blockBytes, maxLine: MaxLine,
		done: make(chan struct{}), drained: make(chan struct{})}
}

// Backlog returns the bytes not yet read, or -1 when unknown (a stream).
func (s *Files) Backlog() int64 {
	if s.stdin != nil {
		return -1
	}
	return s.total - s.read.Load()
}

// Sources returns the names positions give the files (their base names),
// in reading order.
func (s *Files) Sources() []string {
	if s.stdin != nil {
		return []string{s.stdinName}
	}
	out := make([]string, len(s.files))
	for i, f := range s.files {
		out[i] = filepath.Base(f)
	}
	return out
}

// Drained is closed when the input ended and every block was acked, or
// reading failed (see Err).
func (s *Files) Drained() <-chan struct{} { return s.drained }

// Err returns the error that stopped reading, if any.
func (s *Files) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Subscribe starts reading. The topic is ignored. The channel is closed
// when the source is closed or ctx ends.
func (s *Files) Subscribe(ctx context.Context, _ string) (<-chan *message.Message, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errors.New("file source closed")
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.mu.Unlock()
	out := make(chan *message.Message)
	// The reader may block in a read that cannot be interrupted (a pipe);
	// the forwarder owns the subscription channel and closes it as soon as
	// the subscription ends, so the router never waits for a read.
	blocks := make(chan *message.Message)
	go func() {
		err := s.run(ctx, blocks)
		if err != nil && !errors.Is(err, context.Canceled) {
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
		}
		// Every block was acked (or reading failed).
		close(s.drained)
	}()
	go func() {
		defer close(s.done)
		defer close(out)
		for {
			select {
			case msg := <-blocks:
				select {
				case out <- msg:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

func (s *Files) run(ctx context.Context, out chan<- *message.Message) error {
	if s.stdin != nil {
		return s.readOne(ctx, s.stdinName, s.stdin, out)
	}
	for _, f := range s.files {
		fh, err := os.Open(f)
		if err != nil {
			return err
		}
		name := filepath.Base(f)
		var m *mapping
		if st, serr := fh.Stat(); serr == nil && st.Mode().IsRegular() && !strings.HasSuffix(name, base64Suffix) {
			m = mapFile(fh, st.Size(), poisonRecycled.Load())
		}
		if m != nil {
			s.mapped.Add(1)
			err = s.readMapped(ctx, name, m, out)
		} else {
			err = s.readOne(ctx, name, fh, out)
		}
		fh.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// blockBuilder accumulates the lines of one block in one buffer.
type blockBuilder struct {
	buf  []byte
	ends []int
	offs []int64
}

// build returns a block of the lines; the block keeps the builder's
// buffer, and the builder starts a new one.
func (b *blockBuilder) build(name string) *Block {
	data := b.buf
	b.buf = make([]byte, 0, cap(data))
	blk := &Block{Source: name, Records: make([]Record, len(b.ends))}
	start := 0
	for i, end := range b.ends {
		blk.Records[i] = Record{Offset: b.offs[i], Value: data[start:end:end]}
		start = end
	}
	b.ends, b.offs = b.ends[:0], b.offs[:0]
	return blk
}

// delivery hands a reader's blocks to deliver on a goroutine of its own:
// one block waits for delivery while the next is read.
type delivery struct {
	blocks  chan *Block
	stopped chan struct{} // closed when delivery ended
	err     error         // deliver's, once stopped is closed
}

func startDelivery(ctx context.Context, name string, out chan<- *message.Message, acked func(*Block)) *delivery {
	d := &delivery{blocks: make(chan *Block, 1), stopped: make(chan struct{})}
	go func() {
		defer close(d.stopped)
		d.err = deliver(ctx, name, d.blocks, out, acked)
	}()
	return d
}

// send queues blk, or returns why delivery stopped.
func (d *delivery) send(ctx context.Context, blk *Block) error {
	select {
	case d.blocks <- blk:
		return nil
	case <-d.stopped:
		return d.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close ends delivery once every block queued was delivered and acked, or
// delivery stopped, and returns deliver's error: nil when every block was
// acked.
func (d *delivery) close() error {
	close(d.blocks)
	<-d.stopped
	return d.err
}

// deliver sends the blocks it receives in order, each once the one before
// was acked, so that reading the next block goes on beside the handling of
// the last, and calls acked with each block acked. It returns at the first
// block not acked, or when blocks closes (with nil: every block was acked).
func deliver(ctx context.Context, name string, blocks <-chan *Block, out chan<- *message.Message, acked func(*Block)) error {
	for blk := range blocks {
		msg := NewMessage(ctx, blk)
		select {
		case out <- msg:
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case <-msg.Acked():
			acked(blk)
		case <-msg.Nacked():
			if ctx.Err() != nil {
				return ctx.Err() // stopped before the block could be handled
			}
			return fmt.Errorf("%s: block at line %d was not processed", name, blk.Records[0].Offset)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// recycle gives an acked block's buffer to free, if free has room, for a
// later block: an acked block is done with (every row it holds was copied
// where it lands, every dead letter written), and reading into memory
// already in use spares the kernel faulting in fresh pages.
func recycle(blk *Block, free chan<- []byte) {
	if blk.buf == nil {
		return
	}
	buf := blk.buf[:cap(blk.buf)]
	blk.buf = nil
	if poisonRecycled.Load() {
		for i := range buf {
			buf[i] = 0xff
		}
	}
	select {
	case free <- buf[:0]:
	default:
	}
}

// poisonRecycled, set by PoisonRecycled, overwrites a recycled buffer.
var poisonRecycled atomic.Bool

// PoisonRecycled makes the file sources overwrite an acked block's bytes
// before they reuse its buffer (or stop doing so): whatever kept a
// reference into a record past its block's ack then reads 0xff bytes. For
// tests, which land their input with it on and compare.
func PoisonRecycled(on bool) { poisonRecycled.Store(on) }

// readOne reads the messages of one file or stream, name, from r into
// blocks and delivers them to out, each once the one before was acked. It
// returns when every block was acked, or at the first error.
func (s *Files) readOne(ctx context.Context, name string, r io.Reader, out chan<- *message.Message) (err error) {
	// The buffers of acked blocks come back in free.
	free := make(chan []byte, 2)
	d := startDelivery(ctx, name, out, func(blk *Block) { recycle(blk, free) })
	defer func() {
		if derr := d.close(); err == nil {
			err = derr
		}
	}()
	deliverBlock := func(blk *Block) error { return d.send(ctx, blk) }
	if !strings.HasSuffix(name, base64Suffix) {
		lr := &lineReader{s: s, name: name, r: r, send: deliverBlock, free: free, buf: make([]byte, 0, 64<<10)}
		return lr.run()
	}
	br := &base64Reader{s: s, name: name, r: bufio.NewReaderSize(r, 1<<20), send: deliverBlock}
	return br.run()
}

// base64Reader reads the lines of a file of base64-encoded messages into
// blocks, decoding each line into its block's buffer. A block holds at
// most blockLines messages and, unless one message is longer, blockBytes
// bytes; a block goes as soon as no more input is at hand, so that records
// never wait for the next read.
type base64Reader struct {
	s    *Files
	name string
	r    *bufio.Reader
	send func(*Block) error
	bb   blockBuilder
	line int64 // lines read
}

// run reads the file to its end, line by line, assembling a line longer
// than the read buffer, and sends its last block.
func (br *base64Reader) run() error {
	// A leading UTF-8 byte-order mark (some editors and exporters write
	// one) is not part of the first message.
	if bom, err := br.r.Peek(3); err == nil && string(bom) == "\ufeff" {
		_, _ = br.r.Discard(3)
	}
	var long []byte // a line longer than the read buffer, being assembled
	for {
		b, err := br.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long)+len(b) > br.s.maxLine {
				return fmt.Errorf("%s line %d: longer than %d bytes", br.name, br.line+1, br.s.maxLine)
			}
			long = append(long, b...)
			continue
		}
		if long != nil {
			b = append(long, b...)
			long = nil
			if len(bytes.TrimSuffix(b, []byte{'\n'})) > br.s.maxLine {
				return fmt.Errorf("%s line %d: longer than %d bytes", br.name, br.line+1, br.s.maxLine)
			}
		}
		if len(b) > 0 || err == nil {
			if err := br.add(b); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) {
			return br.flush()
		}
		if err != nil {
			return fmt.Errorf("%s line %d: %w", br.name, br.line+1, err)
		}
	}
}

// add decodes the line b (its line end included, if it has one) into the
// block, and sends the block when it is full or no more input is at hand.
func (br *base64Reader) add(b []byte) error {
	br.line++
	br.s.read.Add(int64(len(b)))
	b = bytes.TrimSuffix(b, []byte{'\n'})
	b = bytes.TrimSuffix(b, []byte{'\r'})
	// A block is cut before a line that would take it past its byte
	// bound; a longer line travels alone.
	n := base64.StdEncoding.DecodedLen(len(b))
	if len(br.bb.ends) > 0 && len(br.bb.buf)+n > br.s.blockBytes {
		if err := br.flush(); err != nil {
			return err
		}
	}
	var derr error
	if br.bb.buf, derr = base64.StdEncoding.AppendDecode(br.bb.buf, b); derr != nil {
		return fmt.Errorf("%s line %d: not base64: %w", br.name, br.line, derr)
	}
	br.bb.ends = append(br.bb.ends, len(br.bb.buf))
	br.bb.offs = append(br.bb.offs, br.line)
	// A full block goes now; so does a partial one when no more input is
	// at hand (a pipe or a slow producer), so records never wait for the
	// next ones.
	if len(br.bb.ends) >= br.s.blockLines || br.r.Buffered() == 0 {
		return br.flush()
	}
	return nil
}

// flush sends the block of the lines added, if there are any.
func (br *base64Reader) flush() error {
	if len(br.bb.ends) == 0 {
		return nil
	}
	return br.send(br.bb.build(br.name))
}

// lineReader reads the lines of a file that are messages as they are (not
// base64) into blocks: each block's lines are read into a buffer of its
// own, where its records stay, so that only what a read brought past a
// block's last line is copied, to the next block's buffer. A block holds
// at most blockLines lines and blockBytes bytes, unless one line is
// longer; a block goes as soon as every byte read is in it, so that
// records never wait for the next read.
type lineReader struct {
	s    *Files
	name string
	r    io.Reader
	send func(*Block) error
	// free has the buffers of blocks done with.
	free <-chan []byte
	// buf holds the block's lines and what was read after them: the next
	// line starts at start, and its newline is looked for from scan.
	buf         []byte
	start, scan int
	size        int // the bytes of the block's lines, without line ends
	starts      []int
	ends        []int
	offs        []int64
	line        int64 // lines read
}

// minRead is the least room a read is given in the buffer.
const minRead = 4 << 10

var byteOrderMark = []byte("\ufeff")

func (lr *lineReader) run() error {
	bom := true // the file's start is not read yet
	eof := false
	for {
		for {
			i := bytes.IndexByte(lr.buf[lr.scan:], '\n')
			if i < 0 {
				lr.scan = len(lr.buf)
				break
			}
			if err := lr.add(lr.scan + i + 1); err != nil {
				return err
			}
		}
		if eof {
			if lr.start < len(lr.buf) { // a last line without newline
				if err := lr.add(len(lr.buf)); err != nil {
					return err
				}
			}
			if len(lr.ends) > 0 {
				return lr.cut()
			}
			return nil
		}
		if lr.start == len(lr.buf) && len(lr.ends) > 0 {
			if err := lr.cut(); err != nil {
				return err
			}
		}
		if cap(lr.buf)-len(lr.buf) < minRead {
			// A line longer than the room left: the buffer grows.
			if len(lr.buf)-lr.start > lr.s.maxLine {
				return fmt.Errorf("%s line %d: longer than %d bytes", lr.name, lr.line+1, lr.s.maxLine)
			}
			next := make([]byte, len(lr.buf), 2*cap(lr.buf)+minRead)
			copy(next, lr.buf)
			lr.buf = next
		}
		// A read stops about where the block's last line should end, as
		// far as its lines so far tell: what it brings past that is copied.
		room := cap(lr.buf) - len(lr.buf)
		if n := len(lr.ends); n > 0 {
			room = min(room, max(minRead, (lr.s.blockLines-n)*(lr.start/n)-(len(lr.buf)-lr.start)+minRead))
		}
		n, err := lr.r.Read(lr.buf[len(lr.buf) : len(lr.buf)+room])
		lr.buf = lr.buf[:len(lr.buf)+n]
		if bom && (len(lr.buf) >= len(byteOrderMark) || err != nil || !bytes.HasPrefix(byteOrderMark, lr.buf)) {
			// A leading UTF-8 byte-order mark (some editors and exporters
			// write one) is not part of the first message.
			bom = false
			if bytes.HasPrefix(lr.buf, byteOrderMark) {
				lr.start, lr.scan = len(byteOrderMark), len(byteOrderMark)
			}
		}
		switch {
		case errors.Is(err, io.EOF):
			eof = true
		case err != nil:
			return fmt.Errorf("%s line %d: %w", lr.name, lr.line+1, err)
		}
	}
}

// add takes the line that ends at end (its newline included, if it has
// one) into the block.
func (lr *lineReader) add(end int) error {
	b := lr.buf[lr.start:end]
	lr.line++
	lr.s.read.Add(int64(len(b)))
	n := len(bytes.TrimSuffix(bytes.TrimSuffix(b, []byte{'\n'}), []byte{'\r'}))
	if n > lr.s.maxLine {
		return fmt.Errorf("%s line %d: longer than %d bytes", lr.name, lr.line, lr.s.maxLine)
	}
	// A block is cut before a line that would take it past its byte
	// bound; a longer line travels alone.
	if len(lr.ends) > 0 && lr.size+n > lr.s.blockBytes {
		moved := lr.start
		if err := lr.cut(); err != nil {
			return err
		}
		end -= moved
	}
	lr.starts = append(lr.starts, lr.start)
	lr.ends = append(lr.ends, lr.start+n)
	lr.offs = append(lr.offs, lr.line)
	lr.size += n
	lr.start, lr.scan = end, end
	if len(lr.ends) >= lr.s.blockLines {
		return lr.cut()
	}
	return nil
}

// cut sends the block of the lines taken, and moves what was read after
// them to a new buffer, as large as the block was and an eighth more.
func (lr *lineReader) cut() error {
	blk := &Block{Source: lr.name, Records: make([]Record, len(lr.ends))}
	for i, end := range lr.ends {
		blk.Records[i] = Record{Offset: lr.offs[i], Value: lr.buf[lr.starts[i]:end:end]}
	}
	blk.buf = lr.buf
	rest := lr.buf[lr.start:]
	size := max(lr.start+lr.start/8+minRead, 2*len(rest)+minRead)
	var next []byte
	select {
	case b := <-lr.free:
		if cap(b) >= size {
			next = b[:len(rest)]
		}
	default:
	}
	if next == nil {
		next = make([]byte, len(rest), size)
	}
	copy(next, rest)
	lr.buf, lr.scan, lr.start, lr.size = next, lr.scan-lr.start, 0, 0
	lr.starts, lr.ends, lr.offs = lr.starts[:0], lr.ends[:0], lr.offs[:0]
	return lr.send(blk)
}

// Close stops reading and waits until no block is delivered any more. A
// read blocked on a pipe (standard input) cannot be interrupted; it is
// abandoned, not waited for.
func (s *Files) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	cancel := s.cancel
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		<-s.done
	}
	return nil
}
