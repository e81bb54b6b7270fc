// Package lake stores Parquet files and dead letters in object storage
// through gocloud.dev/blob.
//
// # URLs
//
// OpenBucket accepts every gocloud blob URL that is linked in:
//
//   - file:///abs/dir (a plain path or ./dir also works): local folder. The
//     folder is created when missing, and no ".attrs" sidecar files are
//     written (create_dir and metadata=skip are added unless given).
//     Objects appear atomically and durably (written to a temporary file,
//     synced, then renamed; see local).
//   - mem://: in-memory, for tests.
//   - s3://bucket?region=R&endpoint=http://127.0.0.1:9000&use_path_style=true&disable_https=true
//     (S3 and S3-compatible servers; credentials from the AWS environment).
//   - gs://bucket (Google Cloud Storage; application default credentials).
//   - azblob://container (Azure Blob Storage; AZURE_STORAGE_ACCOUNT etc.).
//
// A "prefix" query parameter roots every key under a folder of the bucket.
package lake

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/parquet"
	"github.com/cenkalti/backoff/v5"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // azblob://
	_ "gocloud.dev/blob/fileblob"  // file://
	_ "gocloud.dev/blob/gcsblob"   // gs://
	_ "gocloud.dev/blob/memblob"   // mem://
	_ "gocloud.dev/blob/s3blob"    // s3://
	"gocloud.dev/gcerrors"
)

// NormalizeURL turns a plain path into a file:// URL and adds the fileblob
// defaults.
func NormalizeURL(raw string) (string, error) {
	if !strings.Contains(raw, "://") {
		abs, err := filepath.Abs(raw)
		if err != nil {
			return "", err
		}
		raw = "file://" + filepath.ToSlash(abs)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("sink URL %q: %w", raw, err)
	}
	if u.Scheme != "file" {
		return raw, nil
	}
	q := u.Query()
	if q.Get("create_dir") == "" {
		q.Set("create_dir", "true")
	}
	if q.Get("metadata") == "" {
		q.Set("metadata", "skip")
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// TempDir is the folder of a file:// lake that holds objects being written.
const TempDir = "_cdclake/tmp"

// FileTemp prepares the folder of a file:// lake's objects being written
// and returns it ("" for other lakes, or when the URL asks for no_tmp_dir):
// TempDir under the lake's root, on the lake's file system (an object is
// renamed into place, which cannot cross file systems) and in a folder
// every engine skips. Files left there by a killed writer more than an
// hour ago are removed. The file driver writes into os.TempDir: point
// TMPDIR at the folder.
func FileTemp(raw string) (string, error) {
	norm, err := NormalizeURL(raw)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(norm)
	if err != nil || u.Scheme != "file" || u.Query().Get("no_tmp_dir") != "" {
		return "", err
	}
	dir := filepath.Join(filepath.FromSlash(u.Path), filepath.FromSlash(TempDir))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("the lake's temporary folder: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("the lake's temporary folder: %w", err)
	}
	for _, e := range entries {
		if info, err := e.Info(); err == nil && !e.IsDir() && time.Since(info.ModTime()) > time.Hour {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	return dir, nil
}

// CheckURL checks a sink URL as far as it can without touching the store:
// its syntax, a scheme that is linked in, no credentials in it. The
// parameters of s3://, file:// and mem:// URLs are checked by their
// openers, which connect to nothing (a file:// URL's on the temporary
// folder: CheckURL creates nothing). gs:// and azblob:// need credentials
// to open a bucket at all: their parameters are checked when the run
// opens it.
func CheckURL(ctx context.Context, raw string) error {
	norm, err := NormalizeURL(raw)
	if err != nil {
		return err
	}
	u, err := url.Parse(norm)
	if err != nil {
		return err
	}
	if u.User != nil {
		return errors.New("credentials do not belong in the URL: the store's SDK reads them from its environment (AWS_ACCESS_KEY_ID, …)")
	}
	mux := blob.DefaultURLMux()
	if !mux.ValidBucketScheme(u.Scheme) {
		return fmt.Errorf("scheme %q is not one of %s", u.Scheme, strings.Join(mux.BucketSchemes(), ", "))
	}
	switch u.Scheme {
	case "file":
		q := u.Query()
		q.Del("create_dir")
		u.Path, u.RawQuery = filepath.ToSlash(os.TempDir()), q.Encode()
	case "s3", "mem":
	default:
		return nil
	}
	b, err := mux.OpenBucketURL(ctx, u)
	if err != nil {
		// Without the URL the opener saw: the file:// one is not the user's.
		return errors.New(strings.TrimPrefix(err.Error(), "open bucket "+u.String()+": "))
	}
	return b.Close()
}

// OpenBucket opens the bucket of a sink URL. A Sink writing into a file://
// bucket opened here syncs what it writes (see local).
func OpenBucket(ctx context.Context, raw string) (*blob.Bucket, error) {
	norm, err := NormalizeURL(raw)
	if err != nil {
		return nil, err
	}
	b, err := blob.OpenBucket(ctx, norm)
	if err != nil {
		return nil, fmt.Errorf("opening sink %s: %w", raw, err)
	}
	l, err := localFor(norm)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("opening sink %s: %w", raw, err)
	}
	if l != nil {
		remember(b, l)
	}
	return b, nil
}

// Sink writes files as Parquet objects. It implements sinks.Sink,
// sinks.ObjectWriter and sinks.ObjectCreator.
//
// # Retries
//
// With Retry set, a write the store fails (an outage, a restart, a network
// error) is tried again with exponential backoff, from 100ms up to 10s
// between attempts, each wait drawn at random between half and one and a
// half times its step so that many instances do not retry a recovered
// store in step, up to Retry.For; the outage is logged when it starts and
// when it ends, not at every attempt. Errors in the data (a file that
// cannot be encoded) and ErrExists are not retried, nor is a write whose
// context ends. Stats counts failures, retries and outages.
type Sink struct {
	bucket *blob.Bucket
	local  *local // a file:// lake's durable writer, nil for other stores
	mem    memory.Allocator
	retry  Retry

	mu      sync.Mutex
	failing time.Time // when the current outage began; zero when none
	tries   int

	errs    [numOps]atomic.Int64
	retries atomic.Int64
	// outage is the time spent in outages that ended, in nanoseconds.
	outage atomic.Int64
}

// Retry says how long writes are retried while the store fails.
type Retry struct {
	// For bounds the time one write is retried; 0 disables retries.
	For time.Duration
	// Log receives the outage's start and end.
	Log *slog.Logger
}

// Op is a kind of store write.
type Op int

// The store writes Stats counts failures of.
const (
	OpData   Op = iota // a data file (Write)
	OpCreate           // a create-once object: partition states, claims (CreateObject)
	OpObject           // a small object: dead letters, catalog entries (WriteObject)
	OpRead             // a read or listing the landing waits for (Retried)
	numOps
)

// String names the op in metrics: data, create, object, read.
func (o Op) String() string { return [...]string{"data", "create", "object", "read"}[o] }

// Stats counts what the store did to the sink's writes.
type Stats struct {
	// Errors counts the failed attempts by Op (each retry that fails too).
	Errors [numOps]int64
	// Retries counts the attempts that were retries.
	Retries int64
	// Outage is the time spent in outages, the current one included;
	// Failing is when the current one began (zero: none).
	Outage  time.Duration
	Failing time.Time
}

// New returns a Sink writing into bucket, without retries.
func New(bucket *blob.Bucket, mem memory.Allocator) *Sink {
	return &Sink{bucket: bucket, local: localOf(bucket), mem: mem}
}

// Retrying returns the sink with retries r.
func (s *Sink) Retrying(r Retry) *Sink {
	s.retry = r
	return s
}

// Stats returns the sink's counters.
func (s *Sink) Stats() Stats {
	var st Stats
	for i := range s.errs {
		st.Errors[i] = s.errs[i].Load()
	}
	st.Retries = s.retries.Load()
	st.Outage = time.Duration(s.outage.Load())
	s.mu.Lock()
	st.Failing = s.failing
	s.mu.Unlock()
	if !st.Failing.IsZero() {
		st.Outage += time.Since(st.Failing)
	}
	return st
}

// storageError marks an error of the store, which a retry may cure.
type storageError struct{ error }

func (e storageError) Unwrap() error { return e.error }

// Write stores f. Only a nil error from the blob writer's Close counts: on
// any failure the write is cancelled so no partial object appears.
func (s *Sink) Write(ctx context.Context, f *sinks.File) (int64, error) {
	if f.Encoder != nil {
		return s.writeEncoded(ctx, f)
	}
	var n int64
	tail := &tailWriter{keep: footerTail}
	err := s.do(ctx, OpData, f.Key, checked(ctx, f, func() error {
		var err error
		n, err = s.put(ctx, f.Key, parquetType, f.Once, func(w io.Writer) error {
			tail.buf = tail.buf[:0]
			return parquet.WriteParts(io.MultiWriter(w, tail), f.Parts, parquetOptions(f.Options), s.mem)
		})
		return err
	}))
	if err == nil {
		f.Footer = footer(tail.buf)
	}
	return n, err
}

// footerTail is how much of a file's end Write keeps, for a file written
// from its parts, to find its footer in: a footer larger than that (a
// file of thousands of row groups or columns) is not kept, and a commit
// reads it from the store. An encoded file is in memory whole.
const footerTail = 256 << 10

// footer returns the Parquet footer (serialized FileMetaData) that the
// end of a file, tail, holds; nil when tail does not hold it whole.
func footer(tail []byte) []byte {
	if len(tail) < 8 || string(tail[len(tail)-4:]) != "PAR1" {
		return nil
	}
	n := int(binary.LittleEndian.Uint32(tail[len(tail)-8:]))
	if n <= 0 || n > len(tail)-8 {
		return nil
	}
	return bytes.Clone(tail[len(tail)-8-n : len(tail)-8])
}

// tailWriter keeps the last keep bytes written to it (or a little more).
type tailWriter struct {
	keep int
	buf  []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	if len(p) >= t.keep {
		t.buf = append(t.buf[:0], p[len(p)-t.keep:]...)
		return len(p), nil
	}
	if len(t.buf)+len(p) > 2*t.keep {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-(t.keep-len(p)):]...)
	}
	t.buf = append(t.buf, p...)
	return len(p), nil
}

// checked runs f.Check, when set, before every attempt of write after the
// first; its error ends the retries.
func checked(ctx context.Context, f *sinks.File, write func() error) func() error {
	if f.Check == nil {
		return write
	}
	first := true
	return func() error {
		if !first {
			if err := f.Check(ctx); err != nil {
				return fmt.Errorf("%s: not written after all: %w", f.Key, err)
			}
		}
		first = false
		return write()
	}
}

// put stores the Parquet object that fill writes under key, in one
// attempt: an error of the store is a storageError, one of fill is
// returned as it is. With once, the object is created only where key
// holds none; where it holds one, the same bytes (this write's own, from
// an attempt whose reply was lost) are a success, and other bytes an
// error wrapping sinks.ErrExists.
func (s *Sink) put(ctx context.Context, key, contentType string, once bool, fill func(io.Writer) error) (int64, error) {
	var sum *maphash.Hash
	if once {
		// What was sent, to tell this write's own object from another's.
		sum = &maphash.Hash{}
		sum.SetSeed(hashSeed)
		inner := fill
		fill = func(w io.Writer) error { return inner(io.MultiWriter(w, sum)) }
	}
	n, err := s.putOnce(ctx, key, contentType, once, fill)
	if err != errExists {
		return n, err
	}
	same, rerr := s.holds(ctx, key, n, sum.Sum64())
	switch {
	case rerr != nil:
		return 0, storageError{fmt.Errorf("reading back %s, which a create found: %w", key, rerr)}
	case !same:
		return 0, fmt.Errorf("%s: %w", key, sinks.ErrExists)
	}
	if s.retry.Log != nil {
		s.retry.Log.Info("a create found its own object: an earlier attempt's reply was lost", "key", key)
	}
	return n, nil
}

// parquetType is the content type of Parquet objects.
const parquetType = "application/vnd.apache.parquet"

// hashSeed seeds the hashes that compare a create's bytes with an
// object's, within this process.
var hashSeed = maphash.MakeSeed()

// holds reports whether key holds n bytes of hash sum.
func (s *Sink) holds(ctx context.Context, key string, n int64, sum uint64) (bool, error) {
	r, err := s.bucket.NewReader(ctx, key, nil)
	if err != nil {
		return false, err
	}
	defer r.Close()
	if r.Size() != n {
		return false, nil
	}
	var h maphash.Hash
	h.SetSeed(hashSeed)
	if _, err := io.Copy(&h, r); err != nil {
		return false, err
	}
	return h.Sum64() == sum, nil
}

// putOnce is put without the read-back: with once, an object in the
// way is errExists, and the size returned the bytes fill wrote.
func (s *Sink) putOnce(ctx context.Context, key, contentType string, once bool, fill func(io.Writer) error) (int64, error) {
	if path, ok := s.localPath(key); ok {
		return s.local.put(ctx, path, once, fill)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.bucket.NewWriter(wctx, key, &blob.WriterOptions{ContentType: contentType, IfNotExist: once})
	if err != nil {
		return 0, storageError{err}
	}
	cw := &countingWriter{w: w}
	err = fill(cw)
	if cw.err != nil {
		err = storageError{cw.err}
	}
	if err != nil {
		cancel()
		_ = w.Close()
		return 0, err
	}
	if err := w.Close(); err != nil {
		if once && gcerrors.Code(err) == gcerrors.FailedPrecondition {
			return cw.n, errExists
		}
		return 0, storageError{err}
	}
	return cw.n, nil
}

// CreateObject stores a small object whole unless key already holds one;
// then it returns an error wrapping sinks.ErrExists.
//
// A create may succeed at the store with its reply lost (a timeout, a
// reset connection), and its retry, by this sink or by the store's SDK
// within one attempt, then finds the object there. So an existing object
// is read back: the same bytes are this create's own (callers write
// content no other writer does: partition states name their owner, a
// process of its own), and only other bytes are another writer's,
// ErrExists.
func (s *Sink) CreateObject(ctx context.Context, key string, data []byte, contentType string) error {
	return s.do(ctx, OpCreate, key, func() error {
		_, err := s.put(ctx, key, contentType, true, writeBytes(data))
		return err
	})
}

// WriteObject stores a small object whole (dead letters, catalog entries).
func (s *Sink) WriteObject(ctx context.Context, key string, data []byte, contentType string) error {
	return s.do(ctx, OpObject, key, func() error {
		_, err := s.put(ctx, key, contentType, false, writeBytes(data))
		return err
	})
}

// Retried runs read, a read or listing of the store that the landing
// waits for, and retries its errors as writes are retried: in an outage,
// for up to Retry.For. key names what it reads, for the log.
func (s *Sink) Retried(ctx context.Context, key string, read func() error) error {
	return s.do(ctx, OpRead, key, func() error {
		if err := read(); err != nil {
			return storageError{err}
		}
		return nil
	})
}

// writeBytes returns a fill writing data.
func writeBytes(data []byte) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}
}

// localPath returns the file a file:// lake stores key in, false when the
// sink writes through the bucket.
func (s *Sink) localPath(key string) (string, bool) {
	if s.local == nil {
		return "", false
	}
	return s.local.path(key)
}

// retryBackoff is the schedule of retries: 100ms doubling to 10s, each
// wait drawn between half and one and a half times its step.
func retryBackoff() *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{InitialInterval: 100 * time.Millisecond, RandomizationFactor: 0.5,
		Multiplier: 2, MaxInterval: 10 * time.Second}
}

// do runs a write, retrying storage errors with backoff within s.retry.
func (s *Sink) do(ctx context.Context, op Op, key string, write func() error) error {
	var last error // the store's last error
	attempt := func() (struct{}, error) {
		err := write()
		var se storageError
		switch {
		case err == nil:
			s.recovered()
			return struct{}{}, nil
		case !errors.As(err, &se):
			return struct{}{}, backoff.Permanent(err)
		}
		s.errs[op].Add(1)
		last = se.error
		if s.retry.For <= 0 || ctx.Err() != nil {
			return struct{}{}, backoff.Permanent(se.error)
		}
		s.failed(key, se.error)
		return struct{}{}, se.error
	}
	_, err := backoff.Retry(ctx, attempt, backoff.WithBackOff(retryBackoff()), backoff.WithMaxElapsedTime(s.retry.For),
		backoff.WithNotify(func(error, time.Duration) { s.retries.Add(1) }))
	switch {
	case err == nil || last == nil:
		return err
	case ctx.Err() != nil:
		return last // the write was given up: say why it failed
	case errors.Is(err, last) && s.retry.For > 0:
		return fmt.Errorf("%w (retried for %s)", last, s.retry.For)
	}
	return err
}

func (s *Sink) failed(key string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tries++
	if s.failing.IsZero() {
		s.failing = time.Now()
		if s.retry.Log != nil {
			s.retry.Log.Warn("the store fails; retrying", "key", key, "err", err, "retry_for", s.retry.For)
		}
	}
}

func (s *Sink) recovered() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.failing.IsZero() {
		took := time.Since(s.failing)
		s.outage.Add(int64(took))
		if s.retry.Log != nil {
			s.retry.Log.Info("the store works again", "after", took.Round(time.Millisecond), "retries", s.tries)
		}
		s.failing, s.tries = time.Time{}, 0
	}
}

// countingWriter counts the bytes written. After the first failed write
// it keeps the error and discards the rest, so that the Parquet writer
// finishes its file (and releases what it holds) instead of stopping in
// the middle of a column; the caller then reports the error.
type countingWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return len(p), nil
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	if err != nil {
		c.err = err
	}
	return len(p), nil
}

// Object reads an object by ranges (io.ReaderAt and io.Seeker), so that a
// Parquet reader fetches only the footer and the columns it needs.
type Object struct {
	ctx    context.Context
	bucket *blob.Bucket
	key    string
	size   int64
	pos    int64
}

// OpenSmall returns a reader of key that fetches it whole in one request
// when it holds at most whole bytes (a small file's footer and columns are
// then read from memory), and a ranged one (OpenObject) otherwise.
func OpenSmall(ctx context.Context, bucket *blob.Bucket, key string, whole int64) (ReaderAtSeeker, error) {
	r, err := bucket.NewReader(ctx, key, nil)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if r.Size() > whole {
		return &Object{ctx: ctx, bucket: bucket, key: key, size: r.Size()}, nil
	}
	data := make([]byte, r.Size())
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, fmt.Errorf("reading %s: %w", key, err)
	}
	return bytes.NewReader(data), nil
}

// ReaderAtSeeker reads an object by ranges.
type ReaderAtSeeker interface {
	io.ReaderAt
	io.Seeker
}

// OpenObject returns a ranged reader of key.
func OpenObject(ctx context.Context, bucket *blob.Bucket, key string) (*Object, error) {
	attrs, err := bucket.Attributes(ctx, key)
	if err != nil {
		return nil, err
	}
	return &Object{ctx: ctx, bucket: bucket, key: key, size: attrs.Size}, nil
}

// ReadAt reads len(p) bytes at off.
func (o *Object) ReadAt(p []byte, off int64) (int, error) {
	if off >= o.size {
		return 0, io.EOF
	}
	n := min(int64(len(p)), o.size-off)
	r, err := o.bucket.NewRangeReader(o.ctx, o.key, off, n, nil)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	read, err := io.ReadFull(r, p[:n])
	if err == nil && read < len(p) {
		err = io.EOF
	}
	return read, err
}

// Seek sets the offset of the next Read (io.SeekStart, SeekCurrent,
// SeekEnd); the Parquet reader uses it to learn the size.
func (o *Object) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += o.pos
	case io.SeekEnd:
		offset += o.size
	default:
		return 0, fmt.Errorf("seek: bad whence %d", whence)
	}
	if offset < 0 {
		return 0, fmt.Errorf("seek: negative position %d", offset)
	}
	o.pos = offset
	return offset, nil
}
