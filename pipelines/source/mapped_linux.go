package source

import (
	"os"
	"syscall"
)

var pageSize = os.Getpagesize()

// mapFile maps f, a regular file of size bytes, read-only, or returns nil
// when it cannot. A poisonable mapping is private: poison's writes never
// reach the file.
func mapFile(f *os.File, size int64, poisonable bool) *mapping {
	if size <= 0 || int64(int(size)) != size {
		return nil
	}
	flags := syscall.MAP_SHARED
	if poisonable {
		flags = syscall.MAP_PRIVATE
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, flags)
	if err != nil {
		return nil
	}
	// The file is read from start to end once: read ahead of it.
	_ = syscall.Madvise(data, syscall.MADV_SEQUENTIAL)
	return &mapping{data: data, poisonable: poisonable}
}

// poison overwrites the bytes of m from lo to hi with 0xff. Their pages
// are writable only meanwhile: whatever else writes to a mapped record
// faults, as it does without poisoning.
func (m *mapping) poison(lo, hi int) {
	pages := m.data[lo&^(pageSize-1) : min(len(m.data), (hi+pageSize-1)&^(pageSize-1))]
	if err := syscall.Mprotect(pages, syscall.PROT_READ|syscall.PROT_WRITE); err != nil {
		panic(err)
	}
	b := m.data[lo:hi]
	for i := range b {
		b[i] = 0xff
	}
	if err := syscall.Mprotect(pages, syscall.PROT_READ); err != nil {
		panic(err)
	}
}

// dropPages takes page-aligned b out of the process; the file's pages stay
// in the page cache.
func dropPages(b []byte) {
	if len(b) > 0 {
		_ = syscall.Madvise(b, syscall.MADV_DONTNEED)
	}
}

// unmap ends m; nothing may refer to its bytes any more.
func (m *mapping) unmap() {
	_ = syscall.Munmap(m.data)
	m.data = nil
}
