package schema

import (
	"math"
	"testing"

	"github.com/valyala/fastjson"
)

func TestAppendDuration(t *testing.T) {
	for _, c := range []struct {
		n    int64
		u    Unit
		want string
	}{
		{0, Micros, "00:00:00.000000"},
		{3020399000000, Micros, "838:59:59.000000"},
		{-3020399000000, Micros, "-838:59:59.000000"},
		{360000500000, Micros, "100:00:00.500000"},
		{-1000001, Micros, "-00:00:01.000001"},
		{86399999, Millis, "23:59:59.999"},
		{-1, Nanos, "-00:00:00.000000001"},
		{math.MinInt64, Micros, "-2562047788:00:54.775808"},
	} {
		if got := string(AppendDuration(nil, c.n, c.u)); got != c.want {
			t.Errorf("AppendDuration(%d, %v) = %q, want %q", c.n, c.u, got, c.want)
		}
	}
}

func TestOverflow(t *testing.T) {
	micro := Type{Kind: Time, Enc: EncEpochUnit, Unit: Micros}
	declared := Type{Kind: Time, Unit: Micros} // a route's declared time: no sibling
	zoned := Type{Kind: Timestamp, Unit: Micros, UTC: true, Enc: EncZoned}
	for _, c := range []struct {
		t    Type
		v    string
		want bool
	}{
		{micro, `0`, false},
		{micro, `86400000000`, false}, // 24:00:00 (PostgreSQL) is a TIME
		{micro, `86400000001`, true},
		{micro, `-1`, true},
		{micro, `3020399000000`, true},
		{micro, `null`, false},
		{micro, `"12:00:00"`, false},
		{declared, `-1`, false},
		{zoned, `"+294276-12-31T23:59:59.999999Z"`, true},
		{zoned, `"2024-01-01T00:00:00Z"`, false},
	} {
		if got := Overflow(c.t, fastjson.MustParse(c.v)); got != c.want {
			t.Errorf("Overflow(%v, %s) = %v, want %v", c.t, c.v, got, c.want)
		}
	}
	if !HasSibling(micro) || HasSibling(declared) || !HasSibling(zoned) {
		t.Error("HasSibling: want MicroTime and ZonedTimestamp columns only")
	}
	if st := SiblingType(micro); st.Kind != String || st.Enc != EncDuration || st.Unit != Micros {
		t.Errorf("SiblingType(MicroTime) = %+v", st)
	}
}
