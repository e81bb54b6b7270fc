package pipelines

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
)

// Metadata keys of source messages. A source message carries a block of
// consecutive records of one source partition, one record per line.
const (
	MetaSource    = "cdclake_source"
	MetaPartition = "cdclake_partition"
	MetaOffset    = "cdclake_offset" // offset of the first record
)

// maxLine bounds one message value.
const maxLine = 256 << 20

// FileSource is a watermill Subscriber reading NDJSON files: one message
// value per line. Its URL is file:///path (a file, a directory whose
// *.ndjson and *.jsonl files are read in name order, or a glob), or "-" for
// standard input. A record's
// position is (file name, 0, line number). It delivers the next block only
// after the previous one was acked, so records are handled in order, and it
// closes its channel at the end of input.
type FileSource struct {
	files      []string
	blockLines int
	total      int64
	read       atomic.Int64
	stdin      io.Reader
	stdinName  string

	mu      sync.Mutex
	closed  bool
	err     error
	cancel  context.CancelFunc
	done    chan struct{}
	drained chan struct{}
}

// OpenFileSource resolves a source URL into the files to read.
func OpenFileSource(raw string, blockLines int) (*FileSource, error) {
	s := &FileSource{blockLines: blockLines, done: make(chan struct{}), drained: make(chan struct{})}
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
				(strings.HasSuffix(e.Name(), ".ndjson") || strings.HasSuffix(e.Name(), ".jsonl")) {
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

// NewReaderSource returns a source reading one stream of NDJSON records
// named name (its position's source) from r.
func NewReaderSource(name string, r io.Reader, blockLines int) *FileSource {
	return &FileSource{blockLines: blockLines, done: make(chan struct{}), drained: make(chan struct{}),
		stdin: r, stdinName: name}
}

// Backlog returns the bytes not yet read, or -1 when unknown (stdin).
func (s *FileSource) Backlog() int64 {
	if s.stdin != nil {
		return -1
	}
	return s.total - s.read.Load()
}

// Drained is closed when the input ended and every block was acked, or
// reading failed (see Err).
func (s *FileSource) Drained() <-chan struct{} { return s.drained }

// Err returns the error that stopped reading, if any.
func (s *FileSource) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Subscribe starts reading. The topic is ignored.
func (s *FileSource) Subscribe(ctx context.Context, _ string) (<-chan *message.Message, error) {
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

func (s *FileSource) run(ctx context.Context, out chan<- *message.Message) error {
	if s.stdin != nil {
		return s.readOne(ctx, s.stdinName, s.stdin, out)
	}
	for _, f := range s.files {
		fh, err := os.Open(f)
		if err != nil {
			return err
		}
		err = s.readOne(ctx, filepath.Base(f), fh, out)
		fh.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *FileSource) readOne(ctx context.Context, name string, r io.Reader, out chan<- *message.Message) error {
	br := bufio.NewReaderSize(r, 1<<20)
	line := int64(0)
	var block bytes.Buffer
	n, first := 0, int64(1)
	send := func() error {
		if n == 0 {
			return nil
		}
		payload := bytes.Clone(block.Bytes())
		msg := message.NewMessage(watermill.NewShortUUID(), payload)
		msg.Metadata.Set(MetaSource, name)
		msg.Metadata.Set(MetaPartition, "0")
		msg.Metadata.Set(MetaOffset, strconv.FormatInt(first, 10))
		for {
			select {
			case out <- msg:
			case <-ctx.Done():
				return ctx.Err()
			}
			select {
			case <-msg.Acked():
				block.Reset()
				n = 0
				return nil
			case <-msg.Nacked():
				return fmt.Errorf("%s: block at line %d was not processed", name, first)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	for {
		b, err := br.ReadSlice('\n')
		for errors.Is(err, bufio.ErrBufferFull) {
			if block.Len() > maxLine {
				return fmt.Errorf("%s line %d: longer than %d bytes", name, line+1, maxLine)
			}
			block.Write(b)
			b, err = br.ReadSlice('\n')
		}
		if len(b) > 0 || err == nil {
			line++
			s.read.Add(int64(len(b)))
			if n == 0 {
				first = line
			}
			b = bytes.TrimSuffix(b, []byte{'\n'})
			b = bytes.TrimSuffix(b, []byte{'\r'})
			block.Write(b)
			block.WriteByte('\n')
			n++
			// A full block goes now; so does a partial one when no more
			// input is at hand (a pipe or a slow producer), so records
			// never wait for the next ones.
			if n >= s.blockLines || br.Buffered() == 0 {
				if err := send(); err != nil {
					return err
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return send()
		}
		if err != nil {
			return fmt.Errorf("%s line %d: %w", name, line+1, err)
		}
	}
}

// Close stops reading and waits for the reader to finish.
func (s *FileSource) Close() error {
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
		// No block is delivered after the cancel. A read blocked on a pipe
		// (stdin) cannot be interrupted; it is abandoned, not waited for.
		<-s.done
	}
	return nil
}
