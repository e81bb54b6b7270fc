package decode

import "unsafe"

// Strings for decoders that must not allocate per message: table names
// recur (Interner), transaction ids and positions repeat across the events of
// a transaction (Recent), and the rest are short (Slab).

// Interner shares the strings of recurring names (tables) so that decoding
// does not allocate one per message. It holds at most maxInterned names.
type Interner struct {
	m map[string]string
}

const maxInterned = 4096

// Get returns the shared string equal to b.
func (in *Interner) Get(b []byte) string {
	if s, ok := in.m[string(b)]; ok {
		return s
	}
	if in.m == nil || len(in.m) >= maxInterned {
		in.m = make(map[string]string)
	}
	s := string(b)
	in.m[s] = s
	return s
}

// Recent returns the last string it made when the bytes repeat (the events
// of one transaction share their id; a primary key change's delete and
// create share their position), else a new string from the slab.
type Recent struct {
	s string
}

// Get returns a string equal to b.
func (r *Recent) Get(b []byte, sl *Slab) string {
	if string(b) != r.s {
		r.s = sl.String(b)
	}
	return r.s
}

// Slab makes short strings without one allocation each: it copies their
// bytes into a large block and returns strings pointing into it. A block is
// only ever appended to, never reused or modified, so the strings are
// ordinary immutable Go strings; a block is freed once no string points
// into it.
type Slab struct {
	buf []byte
}

const (
	slabBlock = 32 << 10
	slabMax   = 256 // longer strings get their own allocation
)

// String returns a string equal to b.
func (s *Slab) String(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > slabMax {
		return string(b)
	}
	if cap(s.buf)-len(s.buf) < len(b) {
		s.buf = make([]byte, 0, slabBlock)
	}
	start := len(s.buf)
	s.buf = append(s.buf, b...)
	return unsafe.String(&s.buf[start], len(b))
}
