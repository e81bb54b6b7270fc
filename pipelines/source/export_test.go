package source

// SetMaxLine lowers a file source's line limit for tests.
func SetMaxLine(s *Files, n int) { s.maxLine = n }

// Mapped returns how many files s read through a memory mapping.
func Mapped(s *Files) int { return int(s.mapped.Load()) }
