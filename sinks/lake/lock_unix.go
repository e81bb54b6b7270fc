//go:build unix

package lake

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
)

// LockName is the lock file of a file:// lake, under its root (and
// prefix).
const LockName = "_cdclake/lock"

// Lock takes the lock of a file:// lake for this process, and returns the
// function that releases it; other lakes need none (their stores refuse a
// partition state's second create, which fences owners out). Two
// processes landing into one folder (a rolling update on a shared volume)
// are not a supported layout: the second process is refused. The lock is an flock(2) on the lake's lock file, released by
// the kernel when the process ends, however it ends. (The Sink links
// create-once objects into place, which no two processes can both do: the
// lock makes a second process fail at its start rather than at its first
// claim.)
func Lock(raw string) (func(), error) {
	norm, err := NormalizeURL(raw)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(norm)
	if err != nil || u.Scheme != "file" {
		return func() {}, err
	}
	path := filepath.Join(filepath.FromSlash(u.Path), filepath.FromSlash(u.Query().Get("prefix")), filepath.FromSlash(LockName))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("the lake's lock: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("the lake's lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another process lands into %s (it holds %s): a file:// lake takes one process at a time", u.Path, path)
		}
		return nil, fmt.Errorf("the lake's lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
