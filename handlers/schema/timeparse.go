package schema

import (
	"errors"
	"fmt"
	"time"
)

// ParseDate parses YYYY-MM-DD (a trailing midnight time, as Oracle DATE
// values carry, is accepted) into days since 1970-01-01.
func ParseDate(s []byte) (int64, error) {
	if len(s) < 10 {
		return 0, fmt.Errorf("date %q: want YYYY-MM-DD", s)
	}
	y, ok1 := digitsN(s[0:4])
	m, ok2 := digitsN(s[5:7])
	d, ok3 := digitsN(s[8:10])
	if !ok1 || !ok2 || !ok3 || s[4] != '-' || s[7] != '-' || m < 1 || m > 12 || d < 1 || d > 31 {
		return 0, fmt.Errorf("date %q: want YYYY-MM-DD", s)
	}
	t := time.Date(int(y), time.Month(m), int(d), 0, 0, 0, 0, time.UTC)
	if t.Day() != int(d) {
		return 0, fmt.Errorf("date %q: no such day", s)
	}
	if len(s) > 10 {
		rest := s[10:]
		if rest[0] != ' ' && rest[0] != 'T' {
			return 0, fmt.Errorf("date %q: want YYYY-MM-DD", s)
		}
		ns, err := parseClock(rest[1:])
		if err != nil || ns != 0 {
			return 0, fmt.Errorf("date %q: has a time of day", s)
		}
	}
	return t.Unix() / 86400, nil
}

// ParseTimeOfDay parses HH:MM:SS[.fraction] into units since midnight. Digits
// finer than the unit must be zero.
func ParseTimeOfDay(s []byte, u Unit) (int64, error) {
	ns, err := parseClock(s)
	if err != nil {
		return 0, fmt.Errorf("time %q: %w", s, err)
	}
	return toUnit(ns, u, s)
}

// ParseTimestamp parses an ISO 8601 date-time (T or space separated, up to
// nine fractional digits, optional Z or ±HH:MM offset) into units since the
// epoch. With an offset the instant is converted to UTC. Without one the
// wall-clock value is kept as is, whether the column is an instant (utc) or
// a local date-time. Digits finer than the unit must be zero.
func ParseTimestamp(s []byte, u Unit, utc bool) (int64, error) {
	days, err := ParseDate(s[:min(len(s), 10)])
	if err != nil || len(s) < 11 || (s[10] != 'T' && s[10] != ' ') {
		return 0, fmt.Errorf("timestamp %q: want YYYY-MM-DDTHH:MM:SS[.f][Z|±HH:MM]", s)
	}
	rest := s[11:]
	clockEnd := len(rest)
	offset := int64(0)
	for i, c := range rest {
		if c == 'Z' || c == 'z' || c == '+' || (c == '-' && i >= 8) {
			clockEnd = i
			break
		}
	}
	if clockEnd < len(rest) {
		z := rest[clockEnd:]
		switch {
		case len(z) == 1 && (z[0] == 'Z' || z[0] == 'z'):
		case len(z) == 6 && z[3] == ':' || len(z) == 5 || len(z) == 3:
			hh, ok1 := digitsN(z[1:3])
			mm := int64(0)
			ok2 := true
			switch len(z) {
			case 6:
				mm, ok2 = digitsN(z[4:6])
			case 5:
				mm, ok2 = digitsN(z[3:5])
			}
			if !ok1 || !ok2 || hh > 18 || mm > 59 {
				return 0, fmt.Errorf("timestamp %q: bad offset", s)
			}
			offset = (hh*3600 + mm*60) * 1e9
			if z[0] == '-' {
				offset = -offset
			}
		default:
			return 0, fmt.Errorf("timestamp %q: bad offset", s)
		}
		if !utc {
			return 0, fmt.Errorf("timestamp %q: has an offset but the column is a local date-time", s)
		}
	}
	ns, err := parseClock(rest[:clockEnd])
	if err != nil {
		return 0, fmt.Errorf("timestamp %q: %w", s, err)
	}
	secs := days * 86400
	// Split to avoid overflow: seconds and nanoseconds separately.
	total := ns - offset
	secs += floorDiv(total, 1e9)
	nanos := total - floorDiv(total, 1e9)*1e9
	per := unitsPerSecond(u)
	div := int64(1e9) / per
	if nanos%div != 0 {
		return 0, fmt.Errorf("timestamp %q: finer than %s", s, u)
	}
	n := secs*per + nanos/div
	if floorDiv(n, per) != secs {
		// Wrapped around: nanoseconds since the epoch reach only 1677..2262.
		return 0, fmt.Errorf("timestamp %q: out of range for %s", s, u)
	}
	return n, nil
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

var errClock = errors.New("want HH:MM:SS[.fraction]")

// parseClock parses HH:MM[:SS[.fraction]] into nanoseconds since midnight.
func parseClock(s []byte) (int64, error) {
	if len(s) < 5 || s[2] != ':' {
		return 0, errClock
	}
	hh, ok1 := digitsN(s[0:2])
	mm, ok2 := digitsN(s[3:5])
	if !ok1 || !ok2 || hh > 24 || mm > 59 {
		return 0, errClock
	}
	ss := int64(0)
	frac := int64(0)
	if len(s) > 5 {
		if len(s) < 8 || s[5] != ':' {
			return 0, errClock
		}
		var ok bool
		if ss, ok = digitsN(s[6:8]); !ok || ss > 60 {
			return 0, errClock
		}
		if len(s) > 8 {
			if s[8] != '.' || len(s) == 9 || len(s) > 18 {
				return 0, errClock
			}
			f := s[9:]
			n, ok := digitsN(f)
			if !ok {
				return 0, errClock
			}
			for i := len(f); i < 9; i++ {
				n *= 10
			}
			frac = n
		}
	}
	ns := ((hh*60+mm)*60+ss)*1e9 + frac
	if ns > 86400*1e9 {
		return 0, errClock
	}
	return ns, nil
}

func toUnit(ns int64, u Unit, s []byte) (int64, error) {
	div := int64(1e9) / unitsPerSecond(u)
	if ns%div != 0 {
		return 0, fmt.Errorf("%q: finer than %s", s, u)
	}
	return ns / div, nil
}

func digitsN(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}
