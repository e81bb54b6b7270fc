package source

// SetMaxLine lowers a file source's line limit for tests.
func SetMaxLine(s *Files, n int) { s.maxLine = n }
