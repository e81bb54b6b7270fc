package schema

import (
	"errors"
	"fmt"
	"math"
)

// ParseDate parses YYYY-MM-DD (a trailing midnight time, as Oracle DATE
// values carry, is accepted) into days since 1970-01-01. ISO 8601 expanded
// years (+12345-06-07, -0044-03-15) are accepted too.
func ParseDate(s []byte) (int64, error) {
	days, n, err := parseDateHead(s)
	if err != nil {
		return 0, fmt.Errorf("date %q: %w", s, err)
	}
	if len(s) > n {
		rest := s[n:]
		if rest[0] != ' ' && rest[0] != 'T' {
			return 0, fmt.Errorf("date %q: want YYYY-MM-DD", s)
		}
		ns, err := parseClock(rest[1:])
		if err != nil || ns != 0 {
			return 0, fmt.Errorf("date %q: has a time of day", s)
		}
	}
	return days, nil
}

var errDate = errors.New("want YYYY-MM-DD")

// parseDateHead parses [±]YYYY[Y…]-MM-DD at the start of s and returns the
// days since the epoch and the bytes consumed.
func parseDateHead(s []byte) (int64, int, error) {
	i := 0
	neg := false
	if len(s) > 0 && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		i = 1
	}
	j := i
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	// Four-digit years without a sign; an expanded year has a sign.
	if j-i < 4 || j-i > 9 || (i == 0 && j-i != 4) || len(s) < j+6 || s[j] != '-' || s[j+3] != '-' {
		return 0, 0, errDate
	}
	y, ok1 := digitsN(s[i:j])
	m, ok2 := digitsN(s[j+1 : j+3])
	d, ok3 := digitsN(s[j+4 : j+6])
	if !ok1 || !ok2 || !ok3 || m < 1 || m > 12 || d < 1 || d > 31 {
		return 0, 0, errDate
	}
	if neg {
		y = -y
	}
	if d > daysIn(y, m) {
		return 0, 0, errors.New("no such day")
	}
	return daysFromCivil(y, m, d), j + 6, nil
}

// daysFromCivil returns the days from 1970-01-01 to y-m-d (m 1 to 12) of
// the proleptic Gregorian calendar, counted in 400-year eras of 146,097
// days whose years start in March, so that a leap day ends its year.
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := floorDiv(y, 400)
	yoe := y - era*400                     // 0 to 399
	doy := (153*((m+9)%12)+2)/5 + d - 1    // 0 to 365, from March 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy // 0 to 146,096
	return era*146097 + doe - 719468       // 719,468: 0000-03-01 to 1970-01-01
}

// daysIn returns the number of days of month m of year y.
func daysIn(y, m int64) int64 {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
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
	switch string(s) {
	case "infinity", "+infinity":
		// PostgreSQL's infinities (Debezium sends them as text) land as the
		// extreme values, which DuckDB reads as infinity.
		return math.MaxInt64, nil
	case "-infinity":
		return -math.MaxInt64, nil
	}
	days, n, err := parseDateHead(s)
	if err != nil || len(s) < n+1 || (s[n] != 'T' && s[n] != ' ') {
		return 0, fmt.Errorf("timestamp %q: want YYYY-MM-DDTHH:MM:SS[.f][Z|±HH:MM]", s)
	}
	rest := s[n+1:]
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
	v := secs*per + nanos/div
	if floorDiv(v, per) != secs {
		// Wrapped around: nanoseconds since the epoch reach only 1677..2262.
		return 0, fmt.Errorf("timestamp %q: out of range for %s", s, u)
	}
	if v == math.MaxInt64 || v == -math.MaxInt64 {
		// These values mean ±infinity (DuckDB); a finite date-time must not
		// land as one.
		return 0, fmt.Errorf("timestamp %q: collides with the value of infinity", s)
	}
	return v, nil
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
