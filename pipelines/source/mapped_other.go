//go:build !linux

package source

import "os"

const pageSize = 4096

// mapFile maps nothing here: files are read as streams.
func mapFile(*os.File, int64, bool) *mapping { return nil }

func dropPages([]byte) {}

func (m *mapping) unmap() {}

func (m *mapping) poison(int, int) {}
