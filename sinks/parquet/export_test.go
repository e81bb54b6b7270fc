package parquet

// UsePqarrow makes the encoders write every file with pqarrow while f runs.
func UsePqarrow(f func()) {
	usePqarrow = true
	defer func() { usePqarrow = false }()
	f()
}

// Own reports whether e writes its file with the package's own writer.
func Own(e *Encoder) bool { return e.fast != nil }

// SetMaxPage sets the bound of a page of long byte arrays while f runs.
func SetMaxPage(n int, f func()) {
	old := maxPage
	maxPage = n
	defer func() { maxPage = old }()
	f()
}
