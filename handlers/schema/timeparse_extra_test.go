package schema

import (
	"math"
	"testing"
)

func TestTimestampEdges(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		err  bool
	}{
		{"infinity", math.MaxInt64, false},
		{"-infinity", -math.MaxInt64, false},
		{"+12345-06-07T08:09:10.123456Z", 327416976550123456, false},
		{"-0044-03-15T12:00:00Z", -63549316800000000, false},
		{"+2024-01-31T00:00:00Z", 1706659200000000, false},
		{"12345-06-07T08:09:10Z", 0, true}, // expanded years need a sign
		{"+123-06-07T08:09:10Z", 0, true},
		{"+999999999-01-01T00:00:00Z", 0, true}, // beyond int64 microseconds
		{"Infinity", 0, true},
		{"+294247-01-10T04:00:54.775807Z", 0, true}, // exactly int64 max µs: would read as infinity
	} {
		got, err := ParseTimestamp([]byte(tt.in), Micros, true)
		if (err != nil) != tt.err || (!tt.err && got != tt.want) {
			t.Errorf("ParseTimestamp(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
	if d, err := ParseDate([]byte("+10000-01-01")); err != nil || d != 2932897 {
		t.Errorf("ParseDate(+10000-01-01) = %d, %v", d, err)
	}
}
