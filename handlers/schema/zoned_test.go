package schema

import (
	"testing"

	"github.com/valyala/fastjson"
)

// ZonedFits' fast path must agree with a full parse, except that it does
// not validate the date (an invalid one is then rejected by the converter
// and dead-lettered, as without the fast path).
func TestZonedFitsAgreesWithParse(t *testing.T) {
	for _, s := range []string{
		"2024-01-01T00:00:00Z", "2024-01-01T00:00:00.123456Z", "2024-01-01T00:00:00.1234560+02:00",
		"2019-06-05T12:34:56.1234567+02:00", "2024-01-01T00:00:00.12-05:30", "2024-01-01T00:00:00+05:30",
		"+294276-12-31T23:59:59.999999Z", "+12345-06-07T08:09:10.123456Z", "infinity", "-infinity",
		"2024-13-01T00:00:00Z", "2024-01-01T00:00:00.Z", "2024-01-01T00:00:00",
	} {
		v := fastjson.MustParse(`"` + s + `"`)
		_, err := ParseTimestamp([]byte(s), Micros, true)
		if got, want := ZonedFits(v), err == nil; got != want && !(got && err != nil && s == "2024-13-01T00:00:00Z") {
			t.Errorf("ZonedFits(%q) = %v, full parse says %v (%v)", s, got, want, err)
		}
	}
}

// ZonedOverflow sends to the text sibling only real timestamps the typed
// column cannot hold; anything else is the converter's error.
func TestZonedOverflow(t *testing.T) {
	for in, want := range map[string]bool{
		`"2024-01-31T12:34:56.1234567Z"`:     true,  // SQL Server datetimeoffset(7)
		`"+294276-01-01T00:00:00Z"`:          true,  // PostgreSQL's last year
		`"2024-01-31T12:34:56.123456+05:30"`: false, // fits
		`"2024-01-31T12:34:56.1234560Z"`:     false, // the 7th digit is zero: fits
		`"yesterday"`:                        false, // no timestamp: an error, not text
		`"2024-01-31T12:34:56.1234567"`:      false, // no offset
		`12`:                                 false,
		`null`:                               false,
	} {
		if got := ZonedOverflow(fastjson.MustParse(in)); got != want {
			t.Errorf("ZonedOverflow(%s) = %v, want %v", in, got, want)
		}
	}
}
