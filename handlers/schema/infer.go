package schema

import (
	"regexp"

	"github.com/valyala/fastjson"
)

// Infer returns the type a column takes from its first non-null JSON value,
// for sources that send no schema (Debezium with schemas disabled, the
// GoldenGate Big Data formatter, GoldenGate rows without metadata). Nothing
// is ever inferred as floating point: fractional numbers land as exact
// decimal text.
func Infer(v *fastjson.Value) Type {
	if v == nil {
		return Type{Kind: Null}
	}
	switch v.Type() {
	case fastjson.TypeTrue, fastjson.TypeFalse:
		return Type{Kind: Bool}
	case fastjson.TypeNumber:
		if isInt64(v) {
			return Type{Kind: Int64}
		}
		return Type{Kind: DecimalText}
	case fastjson.TypeString:
		return Type{Kind: String}
	case fastjson.TypeObject, fastjson.TypeArray:
		return Type{Kind: JSON}
	}
	return Type{Kind: Null}
}

// Accepts reports whether a value of v's JSON type can land in t as inferred
// (it does not check ranges or syntax; the converter does).
func Accepts(t Type, v *fastjson.Value) bool {
	if v == nil {
		return true
	}
	jt := v.Type()
	if jt == fastjson.TypeNull {
		return true
	}
	if t.Enc == EncText {
		return true
	}
	switch t.Kind {
	case Null:
		return false
	case Bool:
		return jt == fastjson.TypeTrue || jt == fastjson.TypeFalse
	case Int64:
		return jt == fastjson.TypeNumber && isInt64(v)
	case DecimalText:
		return jt == fastjson.TypeNumber
	case String:
		return jt == fastjson.TypeString
	case JSON:
		return jt == fastjson.TypeObject || jt == fastjson.TypeArray
	}
	return true
}

// Widen returns the narrowest inferred type holding both t's values and v.
func Widen(t Type, v *fastjson.Value) Type {
	if Accepts(t, v) {
		return t
	}
	if t.Kind == Null {
		return Infer(v)
	}
	if t.Kind == Int64 && v.Type() == fastjson.TypeNumber {
		return Type{Kind: DecimalText}
	}
	return Type{Kind: String, Enc: EncText}
}

// isInt64 reports whether a JSON number is an integer that fits int64
// (written without fraction or exponent).
func isInt64(v *fastjson.Value) bool {
	_, err := v.Int64()
	return err == nil
}

// ZonedFits reports whether a zoned timestamp value (Debezium
// ZonedTimestamp text) can land as TIMESTAMP(µs, UTC): NULL, or text that
// ParseTimestamp accepts at microseconds. SQL Server datetimeoffset(7)
// digits and PostgreSQL's year 294276 cannot.
func ZonedFits(v *fastjson.Value) bool {
	if v == nil || v.Type() != fastjson.TypeString {
		return true
	}
	s, _ := v.StringBytes()
	// Fast path for the common shape, YYYY-MM-DDTHH:MM:SS[.ffffff]±zone: a
	// four-digit year always fits, so only the fraction can fail. Anything
	// else (expanded years, infinities, other shapes) is parsed in full.
	if len(s) >= 20 && s[4] == '-' && s[10] == 'T' && digits4(s) {
		fits, ok := fractionFits(s[19:])
		if ok {
			return fits
		}
	}
	_, err := ParseTimestamp(s, Micros, true)
	return err == nil
}

// zonedText is the shape of an ISO 8601 date-time with an offset, with any
// number of fraction digits and a year of any length.
var zonedText = regexp.MustCompile(`^[+-]?[0-9]{4,}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}(:?[0-9]{2})?)$`)

// ZonedOverflow reports whether v is a zoned timestamp (Debezium
// ZonedTimestamp text) that TIMESTAMP(µs, UTC) cannot hold: a non-zero
// seventh fraction digit, a year beyond its range. Such a value lands as
// exact text in the column's text sibling; a value that is no timestamp
// at all is an error, not text.
func ZonedOverflow(v *fastjson.Value) bool {
	if ZonedFits(v) {
		return false
	}
	s, _ := v.StringBytes()
	return zonedText.Match(s)
}

func digits4(s []byte) bool {
	for _, c := range s[:4] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// fractionFits looks at what follows HH:MM:SS: an optional fraction then a
// zone. It reports whether no non-zero digit lies beyond the sixth, and
// false for ok when the text is not of that shape.
func fractionFits(rest []byte) (fits, ok bool) {
	if len(rest) == 0 || rest[0] != '.' {
		return true, len(rest) > 0 && (rest[0] == 'Z' || rest[0] == '+' || rest[0] == '-')
	}
	for i, c := range rest[1:] {
		if c < '0' || c > '9' {
			return true, i > 0 && (c == 'Z' || c == '+' || c == '-')
		}
		if i >= 6 && c != '0' {
			return false, true
		}
	}
	return true, false
}
