package parquet

// Own reports whether e writes its file with the package's own writer.
func Own(e *Encoder) bool { return e.fast != nil }
