package lake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"weak"

	"gocloud.dev/blob"
)

// local writes the objects of a file:// lake durably, where the file
// driver only renames a temporary file into place: a node that loses power
// after such a rename may come back with the name but not the bytes (an
// empty partition state, an empty Parquet file a state counts as written).
// Every object is written to a temporary file of the lake's TempDir and
// synced, then renamed into place (link(2) for a create-once object, which
// no other process can win as well), and its folder is synced after, so an
// object that appears holds its bytes, and a write that returned survives
// a power loss. Reads stay with the file driver: they see the same files.
type local struct {
	root   string // the lake's folder
	prefix string // the URL's prefix, part of every key the driver sees
	tmp    string // the folder of objects being written
	// sync syncs a file or a folder; a test replaces it to see the order.
	sync func(f *os.File) error
}

// locals remembers the folder of each file:// bucket OpenBucket opened, for
// New: a Sink writing into one writes durably.
// The buckets are held weakly: a bucket's entry goes with it.
var locals sync.Map // weak.Pointer[blob.Bucket] → *local

// localFor returns the durable writer of a file:// URL's bucket, nil when
// the URL is another store's or keeps the driver's attribute files.
func localFor(norm string) (*local, error) {
	u, err := url.Parse(norm)
	if err != nil || u.Scheme != "file" || u.Query().Get("metadata") != "skip" {
		return nil, err
	}
	dir := filepath.FromSlash(u.Path)
	l := &local{root: dir, prefix: u.Query().Get("prefix"), tmp: filepath.Join(dir, filepath.FromSlash(TempDir)), sync: (*os.File).Sync}
	if err := os.MkdirAll(l.tmp, 0o755); err != nil {
		return nil, fmt.Errorf("the lake's temporary folder: %w", err)
	}
	return l, nil
}

func remember(b *blob.Bucket, l *local) {
	w := weak.Make(b)
	locals.Store(w, l)
	runtime.AddCleanup(b, func(w weak.Pointer[blob.Bucket]) { locals.Delete(w) }, w)
}

func localOf(b *blob.Bucket) *local {
	if l, ok := locals.Load(weak.Make(b)); ok {
		return l.(*local)
	}
	return nil
}

// fileKey returns the relative path the file driver stores key under, and
// false for a key the driver would escape (control characters, "//", "../",
// a trailing slash): cdclake's keys never are, and such a key is left to
// the driver.
func fileKey(key string) (string, bool) {
	if key == "" || strings.HasSuffix(key, "/") || strings.Contains(key, "//") || strings.Contains(key, "../") ||
		strings.ContainsFunc(key, func(r rune) bool { return r < 32 || r == filepath.Separator && r != '/' }) {
		return "", false
	}
	return filepath.FromSlash(key), true
}

// path returns the file of key, false when the driver must write it.
func (l *local) path(key string) (string, bool) {
	rel, ok := fileKey(l.prefix + key)
	if !ok {
		return "", false
	}
	return filepath.Join(l.root, rel), true
}

// errExists reports that a create-once write found its key taken.
var errExists = errors.New("the object exists")

// put writes the object fill writes under key (only when key holds none,
// with once: errExists otherwise). Errors of the file system are
// storageErrors; fill's are returned as they are.
func (l *local) put(ctx context.Context, path string, once bool, fill func(io.Writer) error) (n int64, err error) {
	f, err := os.CreateTemp(l.tmp, "object-*")
	if err != nil {
		return 0, storageError{err}
	}
	tmp := f.Name()
	defer func() {
		if f != nil {
			f.Close()
		}
		if err != nil || once {
			_ = os.Remove(tmp) // a link left the object in place
		}
	}()
	fw := &fileWriter{f: f}
	cw := &countingWriter{w: fw}
	if err := fill(cw); err != nil {
		return 0, err
	}
	if cw.err == nil {
		cw.err = fw.flush()
	}
	if cw.err != nil {
		return 0, storageError{cw.err}
	}
	if err := l.sync(f); err != nil {
		return 0, storageError{err}
	}
	err = f.Close()
	f = nil
	if err != nil {
		return 0, storageError{err}
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := l.mkdirAll(filepath.Dir(path)); err != nil {
		return 0, storageError{err}
	}
	if once {
		err = os.Link(tmp, path)
		if errors.Is(err, fs.ErrExist) {
			return cw.n, errExists
		}
	} else {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return 0, storageError{err}
	}
	if err := l.syncDir(filepath.Dir(path)); err != nil {
		return 0, storageError{err}
	}
	return cw.n, nil
}

// mkdirAll creates dir and its missing parents, syncing the folder of each
// one it creates so that the new entry survives a power loss too.
func (l *local) mkdirAll(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := l.mkdirAll(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil
		}
		return err
	}
	return l.syncDir(parent)
}

func (l *local) syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return l.sync(d)
}

// fileWriter writes an object's bytes to its temporary file. An encoded
// file comes in blocks of its own (64 KiB, then 1 MiB): a block goes to the
// file as it is, with no copy and no buffer, as does any write of
// directWrite or more, and of an eighth of it into an empty buffer. Smaller writes (a file
// written from its parts: page headers, pages) gather in a buffer that
// grows as they come, up to directWrite, so that a put allocates what its
// object needs and no more: a lake of many tables puts many small objects.
type fileWriter struct {
	f   *os.File
	buf []byte
}

// directWrite is the size from which a write goes to the file at once.
const directWrite = 64 << 10

func (w *fileWriter) Write(p []byte) (int, error) {
	if len(w.buf) == 0 && len(p) >= directWrite/8 || len(p) >= directWrite {
		if err := w.flush(); err != nil {
			return 0, err
		}
		return w.f.Write(p)
	}
	w.buf = append(w.buf, p...)
	if len(w.buf) >= directWrite {
		if err := w.flush(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// flush writes what the buffer holds.
func (w *fileWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	_, err := w.f.Write(w.buf)
	w.buf = w.buf[:0]
	return err
}
