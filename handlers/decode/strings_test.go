package decode

import (
	"strings"
	"testing"
)

func TestSlabStringsStayValid(t *testing.T) {
	var s Slab
	var got []string
	var want []string
	buf := make([]byte, 0, 64)
	for i := 0; i < 5000; i++ {
		buf = append(buf[:0], "pos-"...)
		buf = append(buf, strings.Repeat("x", i%40)...)
		buf = append(buf, byte('a'+i%26))
		got = append(got, s.String(buf))
		want = append(want, string(buf))
		buf[0] = '!' // the caller's buffer changes; the string must not
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("string %d changed: %q, want %q", i, got[i], want[i])
		}
	}
	long := strings.Repeat("y", slabMax+1)
	if s.String([]byte(long)) != long || s.String(nil) != "" {
		t.Fatal("long or empty string")
	}
}

func TestRecentAndInterner(t *testing.T) {
	var sl Slab
	var r Recent
	a := r.Get([]byte("747"), &sl)
	b := r.Get([]byte("747"), &sl)
	if a != "747" || b != "747" || r.Get([]byte("748"), &sl) != "748" {
		t.Fatal("Recent")
	}
	var in Interner
	if in.Get([]byte("S.T")) != "S.T" || in.Get([]byte("S.T")) != "S.T" {
		t.Fatal("Interner")
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = in.Get([]byte("S.T")); _ = r.Get([]byte("748"), &sl) }); allocs != 0 {
		t.Errorf("%v allocations for repeated strings", allocs)
	}
}
