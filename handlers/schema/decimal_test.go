package schema

import (
	"encoding/base64"
	"math/big"
	"testing"

	"github.com/valyala/fastjson"
)

func TestParseDecimal(t *testing.T) {
	tests := []struct {
		in       string
		unscaled string
		scale    int32
	}{
		{"0", "0", 0},
		{"-0", "0", 0},
		{"12.50", "1250", 2},
		{"-12.50", "-1250", 2},
		{"18043674494432.4369", "180436744944324369", 4},
		{"1e3", "1000", 0},
		{"1.5e3", "1500", 0},
		{"1.5E+3", "1500", 0},
		{"1.5e-3", "15", 4},
		{"-2e-2", "-2", 2},
		{"123456789012345678901234567890123456789012345", "123456789012345678901234567890123456789012345", 0},
	}
	for _, tt := range tests {
		d, err := ParseDecimal([]byte(tt.in))
		if err != nil {
			t.Errorf("ParseDecimal(%q): %v", tt.in, err)
			continue
		}
		if d.Unscaled.String() != tt.unscaled || d.Scale != tt.scale {
			t.Errorf("ParseDecimal(%q) = %s×10^-%d, want %s×10^-%d", tt.in, d.Unscaled, d.Scale, tt.unscaled, tt.scale)
		}
	}
	for _, in := range []string{"", "-", "+1", " 1", "1 ", ".5", "1.", "1.e3", "e3", "1e", "1e+", "1e-", "1ee3",
		"1.2.3", "0x10", "NaN", "Infinity", "1_000", "1,5", "1e10001", "1e-10001"} {
		if d, err := ParseDecimal([]byte(in)); err == nil {
			t.Errorf("ParseDecimal(%q) = %s×10^-%d, want an error", in, d.Unscaled, d.Scale)
		}
	}
}

func TestRescale(t *testing.T) {
	d := Dec{Unscaled: big.NewInt(-12345), Scale: 2} // -123.45
	for _, tt := range []struct {
		scale int32
		want  string
	}{{2, "-12345"}, {4, "-1234500"}, {1, ""}, {0, ""}} {
		got, err := d.Rescale(tt.scale)
		switch {
		case tt.want == "" && err == nil:
			t.Errorf("Rescale(%d) = %s, want an error (never round)", tt.scale, got)
		case tt.want != "" && (err != nil || got.String() != tt.want):
			t.Errorf("Rescale(%d) = %v, %v, want %s", tt.scale, got, err, tt.want)
		}
	}
	exact := Dec{Unscaled: big.NewInt(1200), Scale: 2}
	if got, err := exact.Rescale(0); err != nil || got.Int64() != 12 {
		t.Errorf("Rescale(0) of 12.00 = %v, %v", got, err)
	}
}

func TestAppendDecimalText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"125.50", "125.50"},
		{"-0.10", "-0.10"},
		{"9999999999999999999", "9999999999999999999"},
		{"1e3", "1000"},
		{"1.50e1", "15.0"},
		{"-1.5e-3", "-0.0015"},
		{"5E-1", "0.5"},
	}
	for _, tt := range tests {
		got, err := AppendDecimalText([]byte("x="), []byte(tt.in))
		if err != nil || string(got) != "x="+tt.want {
			t.Errorf("AppendDecimalText(%q) = %q, %v, want %q", tt.in, got, err, "x="+tt.want)
		}
	}
	for _, in := range []string{"", "-", "1.", ".1", "1x", "abc", "1e", "--1", "1.5.5"} {
		if got, err := AppendDecimalText([]byte("x="), []byte(in)); err == nil || string(got) != "x=" {
			t.Errorf("AppendDecimalText(%q) = %q, %v, want an error and dst unchanged", in, got, err)
		}
	}
}

// FuzzDecimalText checks that the text AppendDecimalText lands is a plain
// decimal that parses back to the same value ParseDecimal read.
func FuzzDecimalText(f *testing.F) {
	for _, s := range []string{"0", "-12.50", "1e3", "1.5e-3", "18043674494432.4369", "-0.0", "1E+2", "7.", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDecimal([]byte(s))
		text, terr := AppendDecimalText(nil, []byte(s))
		if (err == nil) != (terr == nil) {
			t.Fatalf("%q: ParseDecimal error %v, AppendDecimalText error %v", s, err, terr)
		}
		if err != nil {
			return
		}
		for _, c := range text {
			if c == 'e' || c == 'E' {
				t.Fatalf("%q: landed %q with an exponent", s, text)
			}
		}
		back, err := ParseDecimal(text)
		if err != nil {
			t.Fatalf("%q: landed %q does not parse: %v", s, text, err)
		}
		// Compare a×10^-as with b×10^-bs exactly.
		a, b := d.Unscaled, back.Unscaled
		if d.Scale < back.Scale {
			a = new(big.Int).Mul(a, new(big.Int).Exp(bigTen, big.NewInt(int64(back.Scale-d.Scale)), nil))
		} else {
			b = new(big.Int).Mul(b, new(big.Int).Exp(bigTen, big.NewInt(int64(d.Scale-back.Scale)), nil))
		}
		if a.Cmp(b) != 0 {
			t.Fatalf("%q landed as %q: a different value", s, text)
		}
	})
}

func TestParseDateTimeDirect(t *testing.T) {
	if d, err := ParseDate([]byte("1970-01-02")); err != nil || d != 1 {
		t.Errorf("ParseDate(1970-01-02) = %d, %v", d, err)
	}
	if _, err := ParseDate([]byte("2024-02-30")); err == nil {
		t.Errorf("ParseDate(2024-02-30): want an error")
	}
	if n, err := ParseTimeOfDay([]byte("00:00:01.5"), Millis); err != nil || n != 1500 {
		t.Errorf("ParseTimeOfDay = %d, %v", n, err)
	}
	if n, err := ParseTimestamp([]byte("1970-01-01T00:00:01.000001Z"), Micros, true); err != nil || n != 1000001 {
		t.Errorf("ParseTimestamp = %d, %v", n, err)
	}
	if _, err := ParseTimestamp([]byte("1970-01-01T00:00:01Z"), Micros, false); err == nil {
		t.Errorf("ParseTimestamp with an offset into a local column: want an error")
	}
}

// TestBase64DecimalText lands Connect Decimals of every byte length and
// sign at several scales: the text must be the math/big path's
// (appendScaled of the decoded two's complement), byte for byte.
func TestBase64DecimalText(t *testing.T) {
	values := [][]byte{{}, {0}, {1}, {0xff}, {0x80}, {0x7f}, {0x01, 0x00}, {0xff, 0x38},
		{0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, {0x80, 0, 0, 0, 0, 0, 0, 0},
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, {0, 0x80, 0, 0, 0, 0, 0, 0, 0},
		{0xfe, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x11}}
	for _, raw := range values {
		for _, scale := range []int32{-3, -1, 0, 1, 2, 5, 18, 19, 20, 25} {
			checkBase64DecimalText(t, raw, scale)
		}
	}
	for _, bad := range []string{`"@@@@"`, `12`, `"QQ"`} {
		if _, err := base64DecimalText(nil, fastjson.MustParse(bad), 2); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func checkBase64DecimalText(t *testing.T, raw []byte, scale int32) {
	t.Helper()
	v := fastjson.MustParse(`"` + base64.StdEncoding.EncodeToString(raw) + `"`)
	got, err := base64DecimalText([]byte("x"), v, scale)
	if err != nil {
		t.Fatalf("%x scale %d: %v", raw, scale, err)
	}
	if want := appendScaled([]byte("x"), twosComplement(raw), scale); string(got) != string(want) {
		t.Fatalf("%x scale %d: %q, want %q", raw, scale, got, want)
	}
}

func FuzzBase64DecimalText(f *testing.F) {
	f.Add([]byte{0x80, 0, 0, 0, 0, 0, 0, 0}, int32(3))
	f.Add([]byte{0xff, 0x38}, int32(0))
	f.Add([]byte{0x01}, int32(-2))
	f.Fuzz(func(t *testing.T, raw []byte, scale int32) {
		if len(raw) > 40 || scale < -1000 || scale > 1000 {
			return
		}
		checkBase64DecimalText(t, raw, scale)
	})
}

func BenchmarkBase64DecimalText(b *testing.B) {
	v := fastjson.MustParse(`"` + base64.StdEncoding.EncodeToString([]byte{0x01, 0xe2, 0x40, 0x12}) + `"`)
	var dst []byte
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			dst, _ = base64DecimalText(dst[:0], v, 2)
		}
	})
	b.Run("big", func(b *testing.B) {
		for b.Loop() {
			n, _ := unscaledFromBase64(v)
			dst = appendScaled(dst[:0], n, 2)
		}
	})
}
