package schema

import (
	"math"
	"testing"
	"time"
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

// TestDaysFromCivil: the date arithmetic agrees with package time on
// every day of years around the eras' edges, BCE and expanded years
// included, and daysIn rejects exactly the days time.Date normalizes.
func TestDaysFromCivil(t *testing.T) {
	years := []int64{-100001, -401, -400, -101, -100, -5, -4, -1, 0, 1, 3, 4, 99, 100, 1582, 1600, 1699,
		1700, 1899, 1900, 1969, 1970, 1971, 1999, 2000, 2024, 2100, 2400, 9999, 10000, 294246, 999999}
	for _, y := range years {
		for m := int64(1); m <= 12; m++ {
			for d := int64(1); d <= 31; d++ {
				tm := time.Date(int(y), time.Month(m), int(d), 0, 0, 0, 0, time.UTC)
				exists := tm.Day() == int(d)
				if exists != (d <= daysIn(y, m)) {
					t.Fatalf("%d-%02d-%02d: daysIn says %d days", y, m, d, daysIn(y, m))
				}
				if !exists {
					continue
				}
				if got, want := daysFromCivil(y, m, d), floorDiv(tm.Unix(), 86400); got != want {
					t.Fatalf("%d-%02d-%02d: %d days, time says %d", y, m, d, got, want)
				}
			}
		}
	}
}

// FuzzParseTimestamp: where package time also reads a text as RFC 3339,
// both give the same instant.
func FuzzParseTimestamp(f *testing.F) {
	for _, s := range []string{"2026-07-13T04:00:06.731000Z", "1969-12-31T23:59:59.999999Z", "2000-02-29T12:00:00+05:30",
		"1600-03-01T00:00:00-08:00", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999Z", "2024-02-30T00:00:00Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseTimestamp([]byte(s), Micros, true)
		tm, terr := time.Parse(time.RFC3339Nano, s)
		if err != nil || terr != nil || tm.Nanosecond()%1000 != 0 {
			return
		}
		if want := tm.UnixMicro(); got != want {
			t.Fatalf("ParseTimestamp(%q) = %d, time says %d", s, got, want)
		}
	})
}
