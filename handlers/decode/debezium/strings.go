package debezium

import "unsafe"

// interner shares the strings of recurring names (tables) so that decoding
// does not allocate one per message. It holds at most maxInterned names.
type interner struct {
	m map[string]string
}

const maxInterned = 4096

func (in *interner) get(b []byte) string {
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

// lastString returns the last string it made when the bytes repeat (the
// events of one transaction share their id; a primary key change's delete
// and create share their position), else a new string from the slab.
type lastString struct {
	s string
}

func (l *lastString) get(b []byte, sl *slab) string {
	if string(b) != l.s {
		l.s = sl.string(b)
	}
	return l.s
}

// slab makes short strings without one allocation each: it copies their
// bytes into a large block and returns strings pointing into it. A block
// is only ever appended to, never reused or modified, so the strings are
// ordinary immutable Go strings; a block is freed once no string points
// into it.
type slab struct {
	buf []byte
}

const (
	slabBlock = 32 << 10
	slabMax   = 256 // longer strings get their own allocation
)

func (s *slab) string(b []byte) string {
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
