package sinktest

import (
	"context"
	"errors"
	"io"
	"sync"

	"gocloud.dev/blob"
	"gocloud.dev/blob/driver"
	"gocloud.dev/gcerrors"
)

// ErrInjected is the error a Faulty bucket fails with.
var ErrInjected = errors.New("sinktest: injected storage failure")

// Faults says how a Faulty bucket fails its writes.
type Faults struct {
	// OnOpen fails NewWriter.
	OnOpen bool
	// AfterBytes fails a write once this many bytes were accepted (0: never;
	// use 1 to fail the first write).
	AfterBytes int64
	// OnClose fails Close after every byte was accepted: the object must
	// not appear.
	OnClose bool
	// BeforeClose, when set, is called with the object's key once every
	// byte was accepted and before the object is committed: it may block,
	// as an upload that hangs does.
	BeforeClose func(key string)
	// IgnoreConditions makes create-once writes (IfNotExist) overwrite
	// what is there, as a store that ignores If-None-Match does.
	IgnoreConditions bool
	// LoseReply, when set, is asked of each write about to be committed:
	// if it says so, the object is committed and the write fails all the
	// same, as one whose reply the network lost does.
	LoseReply func(key string) bool
	// DenyDelete refuses every delete (ErrDenied), as a store whose
	// credentials lack the permission does.
	DenyDelete bool
	// OnList fails every listing (ErrInjected), as a store that went away
	// does.
	OnList bool
}

// ErrDenied is the error of a delete a Faulty bucket refuses.
var ErrDenied = errors.New("sinktest: access denied")

// Faulty returns a bucket that stores its objects in base but fails every
// write as f says, the way a store that goes away mid-upload does. Reads
// pass through, and lists and deletes unless OnList and DenyDelete. Change the faults with SetFaults.
func Faulty(base *blob.Bucket, f Faults) (*blob.Bucket, *FaultControl) {
	fb := &faultyBucket{base: base, faults: f}
	return blob.NewBucket(fb), &FaultControl{b: fb}
}

// FaultControl changes a Faulty bucket's faults while it is in use.
type FaultControl struct{ b *faultyBucket }

// SetFaults replaces the faults.
func (c *FaultControl) SetFaults(f Faults) {
	c.b.mu.Lock()
	c.b.faults = f
	c.b.mu.Unlock()
}

type faultyBucket struct {
	base   *blob.Bucket
	mu     sync.Mutex
	faults Faults
}

var _ driver.Bucket = (*faultyBucket)(nil)

func (b *faultyBucket) current() Faults {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.faults
}

func (b *faultyBucket) ErrorCode(err error) gcerrors.ErrorCode {
	if errors.Is(err, ErrInjected) {
		return gcerrors.Internal
	}
	if errors.Is(err, ErrDenied) {
		return gcerrors.PermissionDenied
	}
	return gcerrors.Code(err)
}

func (b *faultyBucket) As(any) bool             { return false }
func (b *faultyBucket) ErrorAs(error, any) bool { return false }

func (b *faultyBucket) Attributes(ctx context.Context, key string) (*driver.Attributes, error) {
	a, err := b.base.Attributes(ctx, key)
	if err != nil {
		return nil, err
	}
	return &driver.Attributes{CacheControl: a.CacheControl, ContentDisposition: a.ContentDisposition,
		ContentEncoding: a.ContentEncoding, ContentLanguage: a.ContentLanguage, ContentType: a.ContentType,
		Metadata: a.Metadata, CreateTime: a.CreateTime, ModTime: a.ModTime, Size: a.Size, MD5: a.MD5, ETag: a.ETag}, nil
}

func (b *faultyBucket) ListPaged(ctx context.Context, opts *driver.ListOptions) (*driver.ListPage, error) {
	if b.current().OnList {
		return nil, ErrInjected
	}
	token := opts.PageToken
	if token == nil {
		token = blob.FirstPageToken // a driver's first page; the portable API's is this
	}
	objs, next, err := b.base.ListPage(ctx, token, max(opts.PageSize, 1000),
		&blob.ListOptions{Prefix: opts.Prefix, Delimiter: opts.Delimiter})
	if err != nil {
		return nil, err
	}
	page := &driver.ListPage{NextPageToken: next}
	for _, o := range objs {
		page.Objects = append(page.Objects, &driver.ListObject{Key: o.Key, ModTime: o.ModTime, Size: o.Size, MD5: o.MD5, IsDir: o.IsDir})
	}
	return page, nil
}

func (b *faultyBucket) NewRangeReader(ctx context.Context, key string, offset, length int64, opts *driver.ReaderOptions) (driver.Reader, error) {
	r, err := b.base.NewRangeReader(ctx, key, offset, length, nil)
	if err != nil {
		return nil, err
	}
	if opts != nil && opts.BeforeRead != nil {
		if err := opts.BeforeRead(func(any) bool { return false }); err != nil {
			r.Close()
			return nil, err
		}
	}
	return &faultyReader{r: r}, nil
}

type faultyReader struct{ r *blob.Reader }

func (r *faultyReader) Read(p []byte) (int, error) { return r.r.Read(p) }
func (r *faultyReader) Close() error               { return r.r.Close() }
func (r *faultyReader) As(any) bool                { return false }
func (r *faultyReader) Attributes() *driver.ReaderAttributes {
	return &driver.ReaderAttributes{ContentType: r.r.ContentType(), ModTime: r.r.ModTime(), Size: r.r.Size()}
}

func (b *faultyBucket) NewTypedWriter(ctx context.Context, key, contentType string, opts *driver.WriterOptions) (driver.Writer, error) {
	f := b.current()
	if f.OnOpen {
		return nil, ErrInjected
	}
	// The base write has a context of its own, so that a failure here can
	// abort it: the object must not appear.
	wctx, cancel := context.WithCancel(ctx)
	w, err := b.base.NewWriter(wctx, key, &blob.WriterOptions{ContentType: contentType, Metadata: opts.Metadata,
		IfNotExist: opts.IfNotExist && !f.IgnoreConditions})
	if err != nil {
		cancel()
		return nil, err
	}
	if opts.BeforeWrite != nil {
		if err := opts.BeforeWrite(func(any) bool { return false }); err != nil {
			cancel()
			_ = w.Close()
			return nil, err
		}
	}
	return &faultyWriter{w: w, key: key, cancel: cancel, faults: f}, nil
}

type faultyWriter struct {
	w       *blob.Writer
	key     string
	cancel  context.CancelFunc
	faults  Faults
	written int64
	failed  bool
}

func (w *faultyWriter) Write(p []byte) (int, error) {
	if w.faults.AfterBytes > 0 && w.written+int64(len(p)) >= w.faults.AfterBytes {
		w.failed = true
		return 0, ErrInjected
	}
	n, err := w.w.Write(p)
	w.written += int64(n)
	return n, err
}

func (w *faultyWriter) Close() error {
	if w.failed || w.faults.OnClose {
		w.cancel()
		_ = w.w.Close()
		return ErrInjected
	}
	defer w.cancel()
	if w.faults.BeforeClose != nil {
		w.faults.BeforeClose(w.key)
	}
	err := w.w.Close()
	if err == nil && w.faults.LoseReply != nil && w.faults.LoseReply(w.key) {
		return ErrInjected
	}
	return err
}

func (b *faultyBucket) Copy(ctx context.Context, dstKey, srcKey string, _ *driver.CopyOptions) error {
	return b.base.Copy(ctx, dstKey, srcKey, nil)
}

func (b *faultyBucket) Delete(ctx context.Context, key string, _ *driver.DeleteOptions) error {
	if b.current().DenyDelete {
		return ErrDenied
	}
	return b.base.Delete(ctx, key)
}

func (b *faultyBucket) SignedURL(context.Context, string, *driver.SignedURLOptions) (string, error) {
	return "", errors.New("sinktest: no signed URLs")
}

func (b *faultyBucket) Close() error { return nil }

var _ io.Closer = (*faultyWriter)(nil)
