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
//     Objects appear atomically (written to a temporary file, then renamed).
//   - mem://: in-memory, for tests.
//   - s3://bucket?region=R&endpoint=http://127.0.0.1:9000&use_path_style=true&disable_https=true
//     (S3 and S3-compatible servers; credentials from the AWS environment).
//   - gs://bucket (Google Cloud Storage; application default credentials).
//   - azblob://container (Azure Blob Storage; AZURE_STORAGE_ACCOUNT etc.).
//
// A "prefix" query parameter roots every key under a folder of the bucket.
package lake

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/parquet"
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

// OpenBucket opens the bucket of a sink URL.
func OpenBucket(ctx context.Context, raw string) (*blob.Bucket, error) {
	norm, err := NormalizeURL(raw)
	if err != nil {
		return nil, err
	}
	b, err := blob.OpenBucket(ctx, norm)
	if err != nil {
		return nil, fmt.Errorf("opening sink %s: %w", raw, err)
	}
	return b, nil
}

// Sink writes files as Parquet objects. It implements sinks.Sink,
// sinks.ObjectWriter and sinks.ObjectCreator.
type Sink struct {
	bucket *blob.Bucket
	mem    memory.Allocator
}

// New returns a Sink writing into bucket.
func New(bucket *blob.Bucket, mem memory.Allocator) *Sink {
	return &Sink{bucket: bucket, mem: mem}
}

// Write stores f. Only a nil error from the blob writer's Close counts: on
// any failure the write is cancelled so no partial object appears.
func (s *Sink) Write(ctx context.Context, f *sinks.File) (int64, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.bucket.NewWriter(wctx, f.Key, &blob.WriterOptions{ContentType: "application/vnd.apache.parquet"})
	if err != nil {
		return 0, err
	}
	cw := &countingWriter{w: w}
	err = parquet.Write(cw, f.Record, f.Ranges, parquet.Options{Compression: f.Options.Compression, RowGroupRows: f.Options.RowGroupRows}, s.mem)
	if cw.err != nil {
		err = cw.err
	}
	if err != nil {
		cancel()
		_ = w.Close()
		return 0, err
	}
	if err := w.Close(); err != nil {
		return 0, err
	}
	return cw.n, nil
}

// CreateObject stores a small object whole unless key already holds one;
// then it returns an error wrapping sinks.ErrExists.
func (s *Sink) CreateObject(ctx context.Context, key string, data []byte, contentType string) error {
	err := s.bucket.WriteAll(ctx, key, data, &blob.WriterOptions{ContentType: contentType, IfNotExist: true})
	if gcerrors.Code(err) == gcerrors.FailedPrecondition {
		return fmt.Errorf("%s: %w", key, sinks.ErrExists)
	}
	return err
}

// WriteObject stores a small object whole (dead letters).
func (s *Sink) WriteObject(ctx context.Context, key string, data []byte, contentType string) error {
	return s.bucket.WriteAll(ctx, key, data, &blob.WriterOptions{ContentType: contentType})
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
