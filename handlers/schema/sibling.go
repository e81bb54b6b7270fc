package schema

import (
	"strconv"

	"github.com/valyala/fastjson"
)

// A typed column's text sibling (TextSibling) holds, as exact text, the
// values of the column that its type cannot hold; the typed column is NULL
// in those rows. Only columns whose source type admits such values have one,
// added to the table on first need.

// Overflow reports whether v is a value of a column of type t that the
// type cannot hold but its text sibling can: a zoned timestamp beyond
// TIMESTAMP(µs, UTC) (ZonedOverflow) or a time beyond a day (TimeOverflow).
func Overflow(t Type, v *fastjson.Value) bool {
	switch {
	case t.Enc == EncZoned:
		return ZonedOverflow(v)
	case t.Kind == Time && t.Enc == EncEpochUnit:
		return TimeOverflow(t, v)
	}
	return false
}

// HasSibling reports whether a column of type t gets a text sibling for
// the values Overflow reports.
func HasSibling(t Type) bool {
	return t.Enc == EncZoned || t.Kind == Time && t.Enc == EncEpochUnit
}

// SiblingType is the type of the text sibling of a column of type t.
func SiblingType(t Type) Type {
	if t.Kind == Time {
		return Type{Kind: String, Enc: EncDuration, Unit: t.Unit, Logical: t.Logical}
	}
	return Type{Kind: String, Enc: EncText, Logical: t.Logical}
}

// TimeOverflow reports whether v, an integer count of t.Unit (Debezium's
// Time, MicroTime, NanoTime), is outside a day: MySQL and MariaDB TIME is a
// signed duration from -838:59:59 to 838:59:59, which TIME cannot hold.
// Such a value lands in the column's text sibling as [-]HH:MM:SS.fraction.
// 24:00:00 itself (PostgreSQL) fits.
func TimeOverflow(t Type, v *fastjson.Value) bool {
	if v.Type() != fastjson.TypeNumber {
		return false
	}
	n, err := v.Int64()
	return err == nil && (n < 0 || n > 86400*unitsPerSecond(t.Unit))
}

// AppendDuration renders n units as [-]HH:MM:SS.fraction (hours may
// have more digits), the fraction with
// the unit's digits (3, 6 or 9), as MySQL and MariaDB print a TIME.
func AppendDuration(dst []byte, n int64, u Unit) []byte {
	per := unitsPerSecond(u)
	digits := 0
	switch per {
	case 1000:
		digits = 3
	case 1000000:
		digits = 6
	case 1000000000:
		digits = 9
	}
	// In uint64, so that the most negative int64 has a magnitude.
	m := uint64(n)
	if n < 0 {
		dst = append(dst, '-')
		m = -m
	}
	secs, frac := m/uint64(per), m%uint64(per)
	if secs < 36000 {
		dst = append(dst, '0') // at least two hour digits
	}
	dst = strconv.AppendUint(dst, secs/3600, 10)
	dst = append(dst, ':', byte('0'+secs/60%60/10), byte('0'+secs/60%10), ':', byte('0'+secs%60/10), byte('0'+secs%10))
	if digits > 0 {
		dst = append(dst, '.')
		f := strconv.AppendUint(nil, frac, 10)
		for range digits - len(f) {
			dst = append(dst, '0')
		}
		dst = append(dst, f...)
	}
	return dst
}
