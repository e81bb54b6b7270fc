package schema

import (
	"encoding/base64"
	"errors"
	"math"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/valyala/fastjson"
)

// missing stands for a value the image did not carry (a nil *fastjson.Value).
const missing = "<missing>"

// convert appends every input (JSON text, or missing) through Compile into a
// real builder of typ.Arrow() and returns the built array and the error of
// each append. It checks that every append adds exactly one slot, that a
// failed value is a *ConvertError naming the column and lands as NULL, and
// that nothing leaks.
func convert(t *testing.T, typ Type, inputs ...string) (arrow.Array, []error) {
	t.Helper()
	const col = "col"
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	b := array.NewBuilder(mem, typ.Arrow())
	defer b.Release()
	conv := NewConverters(mem)
	defer conv.Release()
	app := conv.Compile(col, typ, b)
	errs := make([]error, len(inputs))
	for i, in := range inputs {
		var v *fastjson.Value
		if in != missing {
			var err error
			if v, err = fastjson.Parse(in); err != nil {
				t.Fatalf("test input %q: %v", in, err)
			}
		}
		errs[i] = app(v)
		if b.Len() != i+1 {
			t.Fatalf("after value %d (%s): builder holds %d slots, want %d", i, in, b.Len(), i+1)
		}
		if errs[i] != nil {
			var ce *ConvertError
			if !errors.As(errs[i], &ce) {
				t.Fatalf("value %s: error %T %v is not a *ConvertError", in, errs[i], errs[i])
			}
			if ce.Column != col && !strings.HasPrefix(ce.Column, col+".") && !strings.HasPrefix(ce.Column, col+"[") {
				t.Fatalf("value %s: error names column %q, want %q", in, ce.Column, col)
			}
			if !strings.Contains(errs[i].Error(), `"`+ce.Column+`"`) {
				t.Fatalf("error text %q does not name column %q", errs[i], ce.Column)
			}
		}
	}
	arr := b.NewArray()
	t.Cleanup(arr.Release)
	replayed := replayLogged(t, typ, inputs, errs)
	for i, err := range errs {
		// A value that failed is never written: only the others compare.
		j := int64(i)
		if err == nil && !array.SliceEqual(arr, j, j+1, replayed, j, j+1) &&
			!array.SliceApproxEqual(arr, j, j+1, replayed, j, j+1, array.WithNaNsEqual(true), array.WithAbsTolerance(0)) {
			t.Fatalf("value %s replayed from packed values as %v, built as %v", inputs[i], replayed, arr)
		}
	}
	for i, err := range errs {
		var ce *ConvertError
		// A Null-typed array has no validity bitmap: every slot is NULL.
		if errors.As(err, &ce) && ce.Column == col && arr.DataType().ID() != arrow.NULL && !arr.IsNull(i) {
			t.Fatalf("value %s failed (%v) but did not land as NULL", inputs[i], err)
		}
	}
	return arr, errs
}

// replayLogged converts inputs as convert does, into packed values
// (CompilePacker) instead, checks that each fails as it did there (errs),
// replays the log into a builder of typ.Arrow() and returns its array,
// with NULL for the values that failed.
func replayLogged(t *testing.T, typ Type, inputs []string, errs []error) arrow.Array {
	t.Helper()
	const col = 3
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	conv := NewConverters(mem)
	defer conv.Release()
	scratch := array.NewBuilder(mem, typ.Arrow())
	defer scratch.Release()
	var w PackWriter
	logged := conv.CompilePacker("col", col, typ, &w, scratch)
	b := array.NewBuilder(mem, typ.Arrow())
	defer b.Release()
	app := conv.Compile("col", typ, b)
	replay := Replay(typ, b, app)
	for i, in := range inputs {
		var v *fastjson.Value
		if in != missing {
			v = fastjson.MustParse(in)
		}
		w.Buf = w.Buf[:0]
		err := logged(v)
		if (err == nil) != (errs[i] == nil) || err != nil && err.Error() != errs[i].Error() {
			t.Fatalf("value %s: logged with error %v, built with %v", in, err, errs[i])
		}
		if err != nil {
			b.AppendNull()
			continue
		}
		c, value, rest, err := PackedEntry(w.Buf)
		if err != nil || c != col {
			t.Fatalf("value %s: entry of column %d (%v), want %d", in, c, err, col)
		}
		if !value {
			_ = app(nil)
		} else if rest, err = replay(rest); err != nil {
			t.Fatalf("value %s: replay: %v", in, err)
		}
		if len(rest) != 0 {
			t.Fatalf("value %s: %d bytes left after its entry", in, len(rest))
		}
	}
	arr := b.NewArray()
	t.Cleanup(arr.Release)
	return arr
}

// convertOne converts a single value.
func convertOne(t *testing.T, typ Type, in string) (arrow.Array, error) {
	t.Helper()
	arr, errs := convert(t, typ, in)
	return arr, errs[0]
}

// b64Decimal encodes n as Kafka Connect does: base64 of the minimal
// big-endian two's complement.
func b64Decimal(n *big.Int) string {
	if n.Sign() >= 0 {
		b := n.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
		return base64.StdEncoding.EncodeToString(b)
	}
	for size := 1; ; size++ {
		mod := new(big.Int).Lsh(big.NewInt(1), uint(size*8))
		u := new(big.Int).Add(mod, n)
		if u.Sign() >= 0 && u.BitLen() == size*8 { // top bit set: negative
			b := u.FillBytes(make([]byte, size))
			return base64.StdEncoding.EncodeToString(b)
		}
	}
}

func bigInt(t *testing.T, s string) *big.Int {
	n, ok := new(big.Int).SetString(s, 10)
	if !ok {
		t.Fatalf("bad test integer %q", s)
	}
	return n
}

func jsonStr(s string) string {
	return `"` + s + `"`
}

func TestB64DecimalHelper(t *testing.T) {
	// Cross-check the helper against hand-computed encodings.
	for _, tt := range []struct {
		n    int64
		want []byte
	}{
		{123456, []byte{0x01, 0xE2, 0x40}},
		{-123456, []byte{0xFE, 0x1D, 0xC0}},
		{128, []byte{0x00, 0x80}},
		{-128, []byte{0x80}},
		{-1, []byte{0xFF}},
		{0, []byte{0x00}},
	} {
		if got := b64Decimal(big.NewInt(tt.n)); got != base64.StdEncoding.EncodeToString(tt.want) {
			t.Errorf("b64Decimal(%d) = %s, want %x", tt.n, got, tt.want)
		}
	}
}

func TestDecimal(t *testing.T) {
	d384 := Type{Kind: Decimal, Precision: 38, Scale: 4}
	d52 := Type{Kind: Decimal, Precision: 5, Scale: 2}
	d380 := Type{Kind: Decimal, Precision: 38, Scale: 0}
	b64 := func(p, s int32) Type { return Type{Kind: Decimal, Enc: EncBase64Decimal, Precision: p, Scale: s} }
	vs := func(p, s int32) Type { return Type{Kind: Decimal, Enc: EncVariableScale, Precision: p, Scale: s} }
	n123456 := b64Decimal(big.NewInt(123456))
	tests := []struct {
		name string
		typ  Type
		in   string
		want string // Decimal128 text at the column's scale; "" = error
	}{
		{"goldengate number exact", d384, `18043674494432.4369`, "18043674494432.4369"},
		{"number as string", d384, `"18043674494432.4369"`, "18043674494432.4369"},
		{"fewer fraction digits", d384, `1.5`, "1.5000"},
		{"integer", d384, `42`, "42.0000"},
		{"negative", d384, `-0.0001`, "-0.0001"},
		{"negative integer string", d384, `"-17"`, "-17.0000"},
		{"zero", d384, `0`, "0.0000"},
		{"trailing zeros past scale are exact", d384, `1.00010`, "1.0001"},
		{"too many fraction digits never rounds", d384, `1.00005`, ""},
		{"too many fraction digits tiny", d384, `0.00001`, ""},
		{"exponent", d384, `1e3`, "1000.0000"},
		{"exponent upper and plus", d384, `-2.5E+2`, "-250.0000"},
		{"negative exponent", d384, `1.5e-3`, "0.0015"},
		{"negative exponent too small", d384, `1e-5`, ""},
		{"exponent in string", d384, `"12345e-4"`, "1.2345"},
		{"precision ok", d52, `999.99`, "999.99"},
		{"precision ok negative", d52, `-999.99`, "-999.99"},
		{"precision overflow", d52, `1000`, ""},
		{"precision overflow negative", d52, `-1000.00`, ""},
		{"precision overflow by exponent", d52, `1e3`, ""},
		{"38 digits", d380, `99999999999999999999999999999999999999`, "99999999999999999999999999999999999999"},
		{"39 digits", d380, `999999999999999999999999999999999999999`, ""},
		{"-38 digits", d380, `-99999999999999999999999999999999999999`, "-99999999999999999999999999999999999999"},
		{"not a number", d384, `"abc"`, ""},
		{"boolean", d384, `true`, ""},
		{"object", d384, `{}`, ""},
		{"dot without fraction", d384, `"1."`, ""},
		{"no integer part", d384, `".5"`, ""},
		{"leading plus", d384, `"+1"`, ""},
		{"spaces", d384, `" 1"`, ""},
		{"bare exponent", d384, `"1e"`, ""},
		{"huge exponent", d384, `"1e100000"`, ""},

		// Kafka Connect Decimal: base64 of the unscaled two's complement.
		{"base64 123456 scale 2", b64(10, 2), jsonStr(n123456), "1234.56"},
		{"base64 literal", b64(10, 2), `"AeJA"`, "1234.56"},
		{"base64 negative", b64(10, 2), jsonStr(b64Decimal(big.NewInt(-123456))), "-1234.56"},
		{"base64 negative 0xFF sign-extended", b64(10, 2), `"//4dwA=="`, "-1234.56"},
		{"base64 minus one", b64(10, 2), jsonStr(b64Decimal(big.NewInt(-1))), "-0.01"},
		{"base64 precision overflow", b64(5, 2), jsonStr(n123456), ""},
		{"base64 38 digits", b64(38, 10), jsonStr(b64Decimal(bigInt(t, "-99999999999999999999999999999999999999"))), "-9999999999999999999999999999.9999999999"},
		{"base64 invalid", b64(10, 2), `"!!!"`, ""},
		{"base64 not text", b64(10, 2), `true`, ""},
		// decimal.format=NUMERIC: the value as a JSON number.
		{"numeric format", b64(10, 2), `1234.56`, "1234.56"},
		{"numeric format integer", b64(10, 2), `123456`, "123456.00"},
		{"numeric format never rounds", b64(10, 2), `0.125`, ""},
		{"numeric format 38 digits", b64(38, 0), `-99999999999999999999999999999999999999`, "-99999999999999999999999999999999999999"},

		// Debezium VariableScaleDecimal landed in a fixed decimal.
		{"variable scale", vs(10, 4), `{"scale":2,"value":"` + n123456 + `"}`, "1234.5600"},
		{"variable scale too fine", vs(10, 1), `{"scale":2,"value":"` + n123456 + `"}`, ""},
		{"variable scale missing scale", vs(10, 4), `{"value":"` + n123456 + `"}`, ""},
		{"variable scale absurd scale", vs(10, 4), `{"scale":-2000000000,"value":"` + n123456 + `"}`, ""},
		{"variable scale missing value", vs(10, 4), `{"scale":2}`, ""},
		{"variable scale not object", vs(10, 4), `"1.5"`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			arr, err := convertOne(t, tt.typ, tt.in)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("%s into %s: got %s, want an error", tt.in, tt.typ, arr.ValueStr(0))
				}
				return
			}
			if err != nil {
				t.Fatalf("%s into %s: %v", tt.in, tt.typ, err)
			}
			got := arr.(*array.Decimal128).Value(0).ToString(tt.typ.Scale)
			if got != tt.want {
				t.Errorf("%s into %s = %s, want %s", tt.in, tt.typ, got, tt.want)
			}
		})
	}
}

func TestDecimalText(t *testing.T) {
	native := Type{Kind: DecimalText}
	b64 := func(s int32) Type { return Type{Kind: DecimalText, Enc: EncBase64Decimal, Scale: s} }
	vs := Type{Kind: DecimalText, Enc: EncVariableScale}
	digits45 := "123456789012345678901234567890123456789012345"
	n123456 := b64Decimal(big.NewInt(123456))
	tests := []struct {
		name string
		typ  Type
		in   string
		want string // "" = error
	}{
		{"trailing zeros kept", native, `125.50`, "125.50"},
		{"19-digit integer exact", native, `9999999999999999999`, "9999999999999999999"},
		{"goldengate number", native, `18043674494432.4369`, "18043674494432.4369"},
		{"negative", native, `-0.001`, "-0.001"},
		{"exponent expanded", native, `1.5e3`, "1500"},
		{"negative exponent expanded", native, `1.5E-3`, "0.0015"},
		{"negative number exponent", native, `-1e2`, "-100"},
		{"string kept", native, `"125.50"`, "125.50"},
		{"string exponent", native, `"25e-1"`, "2.5"},
		{"not a number", native, `"abc"`, ""},
		{"boolean", native, `false`, ""},
		{"array", native, `[1]`, ""},
		{"lone minus", native, `"-"`, ""},
		{"dot without fraction", native, `"1."`, ""},
		{"trailing garbage", native, `"1.5x"`, ""},

		{"base64 >38 digits", b64(5), jsonStr(b64Decimal(bigInt(t, digits45))), "1234567890123456789012345678901234567890.12345"},
		{"base64 >38 digits negative", b64(5), jsonStr(b64Decimal(bigInt(t, "-"+digits45))), "-1234567890123456789012345678901234567890.12345"},
		{"base64 scale 0", b64(0), jsonStr(n123456), "123456"},
		{"base64 negative scale", b64(-2), jsonStr(n123456), "12345600"},
		{"base64 small value large scale", b64(8), jsonStr(n123456), "0.00123456"},
		{"base64 invalid", b64(2), `"%%"`, ""},
		{"numeric format, >38 digits", b64(5), digits45[:40] + ".12345", "1234567890123456789012345678901234567890.12345"},

		{"variable scale", vs, `{"scale":3,"value":"` + n123456 + `"}`, "123.456"},
		{"variable scale zero", vs, `{"scale":0,"value":"` + n123456 + `"}`, "123456"},
		{"variable scale negative value", vs, `{"scale":3,"value":"` + b64Decimal(big.NewInt(-5)) + `"}`, "-0.005"},
		{"variable scale 45 digits", vs, `{"scale":10,"value":"` + b64Decimal(bigInt(t, digits45)) + `"}`, "12345678901234567890123456789012345.6789012345"},
		{"variable scale missing scale", vs, `{"value":"` + n123456 + `"}`, ""},
		{"variable scale bad scale", vs, `{"scale":"x","value":"` + n123456 + `"}`, ""},
		{"variable scale huge scale", vs, `{"scale":100000,"value":"` + n123456 + `"}`, ""},
		{"variable scale missing value", vs, `{"scale":3}`, ""},
		{"variable scale not object", vs, `12`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			arr, err := convertOne(t, tt.typ, tt.in)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("%s: got %q, want an error", tt.in, arr.(*array.String).Value(0))
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", tt.in, err)
			}
			if got := arr.(*array.String).Value(0); got != tt.want {
				t.Errorf("%s = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestInts(t *testing.T) {
	tests := []struct {
		kind Kind
		in   string
		want int64
		ok   bool
	}{
		{Int8, `127`, 127, true},
		{Int8, `-128`, -128, true},
		{Int8, `128`, 0, false},
		{Int8, `-129`, 0, false},
		{Int16, `32767`, 32767, true},
		{Int16, `-32768`, -32768, true},
		{Int16, `32768`, 0, false},
		{Int16, `-32769`, 0, false},
		{Int32, `2147483647`, math.MaxInt32, true},
		{Int32, `-2147483648`, math.MinInt32, true},
		{Int32, `2147483648`, 0, false},
		{Int32, `-2147483649`, 0, false},
		{Int64, `9223372036854775807`, math.MaxInt64, true},
		{Int64, `-9223372036854775808`, math.MinInt64, true},
		{Int64, `9223372036854775808`, 0, false},
		{Int64, `-9223372036854775809`, 0, false},
		{Int32, `1.0`, 1, true},
		{Int32, `-3.000`, -3, true},
		{Int32, `1e3`, 1000, true},
		{Int32, `1.5e1`, 15, true},
		{Int32, `1.5`, 0, false},
		{Int32, `1e-1`, 0, false},
		{Int8, `1.28e2`, 0, false},
		{Int64, `"42"`, 42, true},
		{Int64, `"-7"`, -7, true},
		{Int64, `"x"`, 0, false},
		{Int64, `"1.5"`, 0, false},
		{Int64, `true`, 0, false},
		{Int64, `[1]`, 0, false},
		{Int64, `1e400`, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.kind.String()+"/"+tt.in, func(t *testing.T) {
			arr, err := convertOne(t, Type{Kind: tt.kind}, tt.in)
			if !tt.ok {
				if err == nil {
					t.Fatalf("%s into %s: got %s, want an error", tt.in, tt.kind, arr.ValueStr(0))
				}
				return
			}
			if err != nil {
				t.Fatalf("%s into %s: %v", tt.in, tt.kind, err)
			}
			var got int64
			switch a := arr.(type) {
			case *array.Int8:
				got = int64(a.Value(0))
			case *array.Int16:
				got = int64(a.Value(0))
			case *array.Int32:
				got = int64(a.Value(0))
			case *array.Int64:
				got = a.Value(0)
			default:
				t.Fatalf("array %T", arr)
			}
			if got != tt.want {
				t.Errorf("%s into %s = %d, want %d", tt.in, tt.kind, got, tt.want)
			}
		})
	}
}

func TestFloats(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		kind Kind
		in   string
		want float64 // compared as float32 for Float32
		ok   bool
	}{
		{Float32, `3.14`, float64(float32(3.14)), true},
		{Float32, `0.1`, float64(float32(0.1)), true},
		{Float32, `-1.17549435e-38`, float64(float32(-1.17549435e-38)), true},
		{Float32, `16777217`, float64(float32(16777217)), true},
		// Rounding to float64 first and then to float32 gives 1.0000002
		// here; the nearest float32 is 1.0000001.
		{Float32, `1.00000017881393432617187499`, float64(float32(1.00000017881393432617187499)), true},
		{Float32, `"3.14"`, float64(float32(3.14)), true},
		{Float32, `3.5e38`, 0, false},
		{Float32, `"NaN"`, nan, true},
		{Float32, `"Infinity"`, math.Inf(1), true},
		{Float32, `"-Infinity"`, math.Inf(-1), true},
		{Float64, `3.14`, 3.14, true},
		{Float64, `1e308`, 1e308, true},
		{Float64, `-0.0`, math.Copysign(0, -1), true},
		{Float64, `1e400`, 0, false},
		{Float64, `"NaN"`, nan, true},
		{Float64, `"Infinity"`, math.Inf(1), true},
		{Float64, `"-Infinity"`, math.Inf(-1), true},
		{Float64, `"abc"`, 0, false},
		{Float64, `true`, 0, false},
		{Float64, `{}`, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.kind.String()+"/"+tt.in, func(t *testing.T) {
			arr, err := convertOne(t, Type{Kind: tt.kind}, tt.in)
			if !tt.ok {
				if err == nil {
					t.Fatalf("%s: got %s, want an error", tt.in, arr.ValueStr(0))
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", tt.in, err)
			}
			switch a := arr.(type) {
			case *array.Float32:
				got, want := a.Value(0), float32(tt.want)
				if math.IsNaN(tt.want) {
					if !math.IsNaN(float64(got)) {
						t.Errorf("%s = %v, want NaN", tt.in, got)
					}
				} else if math.Float32bits(got) != math.Float32bits(want) {
					t.Errorf("%s = %v (%08x), want %v (%08x)", tt.in, got, math.Float32bits(got), want, math.Float32bits(want))
				}
			case *array.Float64:
				got := a.Value(0)
				if math.IsNaN(tt.want) {
					if !math.IsNaN(got) {
						t.Errorf("%s = %v, want NaN", tt.in, got)
					}
				} else if math.Float64bits(got) != math.Float64bits(tt.want) {
					t.Errorf("%s = %v, want %v", tt.in, got, tt.want)
				}
			default:
				t.Fatalf("array %T", arr)
			}
		})
	}
}

func TestBool(t *testing.T) {
	arr, errs := convert(t, Type{Kind: Bool}, `true`, `false`, `null`, missing, `1`, `"true"`)
	b := arr.(*array.Boolean)
	if errs[0] != nil || errs[1] != nil || !b.Value(0) || b.Value(1) {
		t.Errorf("true/false: %v %v, %v %v", b.Value(0), b.Value(1), errs[0], errs[1])
	}
	if errs[2] != nil || errs[3] != nil || !b.IsNull(2) || !b.IsNull(3) {
		t.Errorf("null and missing must land as NULL without error: %v %v", errs[2], errs[3])
	}
	if errs[4] == nil || errs[5] == nil {
		t.Errorf("1 and \"true\" are not booleans: %v %v", errs[4], errs[5])
	}
}

func TestNullKind(t *testing.T) {
	_, errs := convert(t, Type{Kind: Null}, `null`, missing, `1`)
	if errs[0] != nil || errs[1] != nil || errs[2] == nil {
		t.Errorf("Null column: errors %v", errs)
	}
}

func TestStrings(t *testing.T) {
	invalid := "\"a\xffb\""
	tests := []struct {
		name string
		typ  Type
		in   string
		want string
		ok   bool
	}{
		{"ascii", Type{Kind: String}, `"hello"`, "hello", true},
		{"unicode", Type{Kind: String}, `"héllo €"`, "héllo €", true},
		{"escapes", Type{Kind: String}, `"a\"b\\c\n\u00e9"`, "a\"b\\c\n\u00e9", true},
		{"empty", Type{Kind: String}, `""`, "", true},
		{"invalid utf8", Type{Kind: String}, invalid, "", false},
		{"number is not a string", Type{Kind: String}, `12`, "", false},
		{"object is not a string", Type{Kind: String}, `{"a":1}`, "", false},

		{"text: string kept", Type{Kind: String, Enc: EncText}, `"x y"`, "x y", true},
		{"text: number as text", Type{Kind: String, Enc: EncText}, `12.50`, "12.50", true},
		{"text: boolean as text", Type{Kind: String, Enc: EncText}, `true`, "true", true},
		{"text: object as JSON", Type{Kind: String, Enc: EncText}, `{"a": [1, 2], "b": "c"}`, `{"a":[1,2],"b":"c"}`, true},
		{"text: invalid utf8", Type{Kind: String, Enc: EncText}, invalid, "", false},

		{"json: object rendered", Type{Kind: JSON}, `{ "a" : 1, "b" : [true, null] }`, `{"a":1,"b":[true,null]}`, true},
		{"json: array rendered", Type{Kind: JSON}, `[1, "x"]`, `[1,"x"]`, true},
		{"json: string kept as sent", Type{Kind: JSON}, `"{\"a\": 1}"`, `{"a": 1}`, true},
		{"json: number", Type{Kind: JSON}, `5`, `5`, true},
		{"json: invalid utf8 string", Type{Kind: JSON}, invalid, "", false},
		{"json: string that is not JSON text", Type{Kind: JSON}, `"{\"a\": "`, "", false},
		{"json: object holding invalid utf8", Type{Kind: JSON}, "{\"a\":\"\xff\"}", "", false},
		{"text: object holding invalid utf8", Type{Kind: String, Enc: EncText}, "{\"a\":\"\xff\"}", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			arr, err := convertOne(t, tt.typ, tt.in)
			if !tt.ok {
				if err == nil {
					t.Fatalf("%s: want an error", tt.in)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", tt.in, err)
			}
			var got string
			switch a := arr.(type) {
			case *array.String:
				got = a.Value(0)
			case *extensions.JSONArray:
				if _, ok := a.DataType().(*extensions.JSONType); !ok {
					t.Fatalf("JSON column type %s", a.DataType())
				}
				got = a.Storage().(*array.String).Value(0)
			default:
				t.Fatalf("array %T", arr)
			}
			if got != tt.want {
				t.Errorf("%s = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestJSONNull(t *testing.T) {
	arr, errs := convert(t, Type{Kind: JSON}, `null`, missing, `{}`)
	if errs[0] != nil || errs[1] != nil || errs[2] != nil {
		t.Fatalf("errors %v", errs)
	}
	if !arr.IsNull(0) || !arr.IsNull(1) || arr.IsNull(2) {
		t.Errorf("nulls: %v %v %v", arr.IsNull(0), arr.IsNull(1), arr.IsNull(2))
	}
}

func TestBinary(t *testing.T) {
	b64 := Type{Kind: Binary}
	hx := Type{Kind: Binary, Enc: EncHex}
	tests := []struct {
		name string
		typ  Type
		in   string
		want []byte // nil = error
	}{
		{"base64", b64, `"AQID"`, []byte{1, 2, 3}},
		{"base64 padded", b64, `"/w=="`, []byte{0xff}},
		{"base64 empty", b64, `""`, []byte{}},
		{"base64 invalid", b64, `"!!"`, nil},
		{"base64 unpadded", b64, `"/w"`, nil},
		{"hex", hx, `"0a0B"`, []byte{0x0a, 0x0b}},
		{"hex empty", hx, `""`, []byte{}},
		{"hex odd", hx, `"abc"`, nil},
		{"hex invalid", hx, `"zz"`, nil},
		{"not text", b64, `12`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			arr, err := convertOne(t, tt.typ, tt.in)
			if tt.want == nil {
				if err == nil {
					t.Fatalf("%s: want an error", tt.in)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", tt.in, err)
			}
			if arr.IsNull(0) {
				t.Fatalf("%s landed as NULL", tt.in)
			}
			if got := arr.(*array.Binary).Value(0); string(got) != string(tt.want) {
				t.Errorf("%s = %x, want %x", tt.in, got, tt.want)
			}
		})
	}
}

func days(y int, m time.Month, d int) int64 {
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400
}

func TestDate(t *testing.T) {
	epoch := Type{Kind: Date, Enc: EncEpochDays}
	text := Type{Kind: Date}
	tests := []struct {
		typ  Type
		in   string
		want int64
		ok   bool
	}{
		{epoch, `0`, 0, true},
		{epoch, `19753`, 19753, true},
		{epoch, `-1`, -1, true},
		{epoch, `-719162`, -719162, true},
		{epoch, `1.5`, 0, false},
		{epoch, `2147483648`, 0, false},
		{epoch, `"2024-01-31"`, 0, false},
		{text, `"2024-01-31"`, days(2024, 1, 31), true},
		{text, `"2024-01-31 00:00:00"`, days(2024, 1, 31), true},
		{text, `"2024-01-31T00:00:00"`, days(2024, 1, 31), true},
		{text, `"2024-01-31 00:00:00.000"`, days(2024, 1, 31), true},
		{text, `"2024-02-29"`, days(2024, 2, 29), true},
		{text, `"1969-12-31"`, -1, true},
		{text, `"1900-03-01"`, days(1900, 3, 1), true},
		{text, `"0001-01-01"`, days(1, 1, 1), true},
		{text, `"9999-12-31"`, days(9999, 12, 31), true},
		{text, `"2024-02-30"`, 0, false},
		{text, `"2023-02-29"`, 0, false},
		{text, `"2024-13-01"`, 0, false},
		{text, `"2024-00-10"`, 0, false},
		{text, `"2024-01-32"`, 0, false},
		{text, `"2024-1-31"`, 0, false},
		{text, `"2024/01/31"`, 0, false},
		{text, `"2024-01-31 00:00:01"`, 0, false},
		{text, `"2024-01-31 12:00"`, 0, false},
		{text, `"2024-01-31X"`, 0, false},
		{text, `"2024-01-31 "`, 0, false},
		// A declared date takes Debezium's integer epoch days too.
		{text, `19753`, days(2024, 1, 31), true},
		{text, `-1`, -1, true},
		{text, `2147483648`, 0, false},
		{text, `19753.5`, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			arr, err := convertOne(t, tt.typ, tt.in)
			if !tt.ok {
				if err == nil {
					t.Fatalf("%s: got %s, want an error", tt.in, arr.ValueStr(0))
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", tt.in, err)
			}
			if got := int64(arr.(*array.Date32).Value(0)); got != tt.want {
				t.Errorf("%s = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestTime(t *testing.T) {
	epoch := func(u Unit) Type { return Type{Kind: Time, Enc: EncEpochUnit, Unit: u} }
	text := func(u Unit) Type { return Type{Kind: Time, Unit: u} }
	const clock = 12*3600 + 34*60 + 56 // 12:34:56 in seconds
	tests := []struct {
		typ  Type
		in   string
		want int64
		ok   bool
	}{
		{epoch(Millis), `45296123`, 45296123, true},
		{epoch(Micros), `45296123456`, 45296123456, true},
		{epoch(Nanos), `45296123456789`, 45296123456789, true},
		{epoch(Micros), `0`, 0, true},
		{epoch(Micros), `-1`, 0, false},
		{epoch(Millis), `86400001`, 0, false},
		{epoch(Micros), `1.5`, 0, false},
		{epoch(Micros), `"12:00:00"`, 0, false},
		{text(Micros), `"12:34:56.123456"`, clock*1e6 + 123456, true},
		{text(Nanos), `"12:34:56.123456"`, clock*1e9 + 123456000, true},
		{text(Nanos), `"12:34:56.123456789"`, clock*1e9 + 123456789, true},
		{text(Millis), `"12:34:56.123"`, clock*1e3 + 123, true},
		{text(Millis), `"12:34:56.123000"`, clock*1e3 + 123, true},
		{text(Millis), `"12:34:56.5"`, clock*1e3 + 500, true},
		{text(Micros), `"12:34:56"`, clock * 1e6, true},
		{text(Micros), `"12:34"`, (12*3600 + 34*60) * 1e6, true},
		{text(Micros), `"00:00:00"`, 0, true},
		{text(Micros), `"23:59:59.999999"`, 86399999999, true},
		{text(Millis), `"12:34:56.123456"`, 0, false},
		{text(Micros), `"12:34:56.123456789"`, 0, false},
		{text(Micros), `"12:34:56.123456000"`, clock*1e6 + 123456, true},
		{text(Micros), `"12:34:56.1234567890"`, 0, false},
		{text(Micros), `"12:34:56."`, 0, false},
		{text(Micros), `"25:00:00"`, 0, false},
		{text(Micros), `"12:60:00"`, 0, false},
		{text(Micros), `"12:34:61"`, 0, false},
		{text(Micros), `"1:02:03"`, 0, false},
		{text(Micros), `"12-34-56"`, 0, false},
		// A declared time takes an integer count of its unit since
		// midnight too (Debezium's MicroTime for time(us)).
		{text(Micros), `45296123456`, clock*1e6 + 123456, true},
		{text(Millis), `45296123`, clock*1e3 + 123, true},
		{text(Micros), `86400000001`, 0, false},
		{text(Micros), `-1`, 0, false},
		{text(Micros), `45296.5`, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.typ.String()+"/"+tt.in, func(t *testing.T) {
			arr, err := convertOne(t, tt.typ, tt.in)
			if !tt.ok {
				if err == nil {
					t.Fatalf("%s: got %s, want an error", tt.in, arr.ValueStr(0))
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", tt.in, err)
			}
			var got int64
			switch a := arr.(type) {
			case *array.Time32:
				if tt.typ.Unit != Millis {
					t.Fatalf("Time32 for unit %s", tt.typ.Unit)
				}
				got = int64(a.Value(0))
			case *array.Time64:
				if u := a.DataType().(*arrow.Time64Type).Unit; u != tt.typ.Unit {
					t.Fatalf("Time64 unit %s, want %s", u, tt.typ.Unit)
				}
				got = int64(a.Value(0))
			default:
				t.Fatalf("array %T", arr)
			}
			if got != tt.want {
				t.Errorf("%s = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestTimestamp(t *testing.T) {
	utc := func(u Unit) Type { return Type{Kind: Timestamp, Unit: u, UTC: true} }
	local := func(u Unit) Type { return Type{Kind: Timestamp, Unit: u} }
	zoned := Type{Kind: Timestamp, Unit: Micros, UTC: true, Enc: EncZoned}
	epoch := func(u Unit) Type { return Type{Kind: Timestamp, Unit: u, Enc: EncEpochUnit} }
	at := func(y int, mo time.Month, d, h, mi, s, ns int) time.Time {
		return time.Date(y, mo, d, h, mi, s, ns, time.UTC)
	}
	us := func(tm time.Time) int64 { return tm.UnixMicro() }
	tests := []struct {
		typ  Type
		in   string
		want int64
		ok   bool
	}{
		{epoch(Micros), `1700000000123456`, 1700000000123456, true},
		{epoch(Millis), `1700000000123`, 1700000000123, true},
		// Landed as microseconds, which must fit int64.
		{epoch(Millis), `9223372036854775`, 9223372036854775, true},
		{epoch(Millis), `9223372036854776`, 0, false},
		{epoch(Millis), `-9223372036854776`, 0, false},
		{epoch(Nanos), `1700000000123456789`, 1700000000123456789, true},
		{epoch(Micros), `-1`, -1, true},
		{epoch(Micros), `1.5`, 0, false},
		{epoch(Micros), `"2024-01-31T00:00:00Z"`, 0, false},

		{utc(Micros), `"2024-01-31T12:34:56Z"`, us(at(2024, 1, 31, 12, 34, 56, 0)), true},
		{utc(Micros), `"2024-01-31T12:34:56z"`, us(at(2024, 1, 31, 12, 34, 56, 0)), true},
		{utc(Micros), `"2024-01-31T12:34:56+02:00"`, us(at(2024, 1, 31, 10, 34, 56, 0)), true},
		{utc(Micros), `"2024-01-31T12:34:56-05:30"`, us(at(2024, 1, 31, 18, 4, 56, 0)), true},
		{utc(Micros), `"2024-01-31T12:34:56.123456-05:30"`, us(at(2024, 1, 31, 18, 4, 56, 123456000)), true},
		{utc(Micros), `"2024-01-31T12:34:56+0530"`, us(at(2024, 1, 31, 7, 4, 56, 0)), true},
		{utc(Micros), `"2024-01-31T12:34:56+05"`, us(at(2024, 1, 31, 7, 34, 56, 0)), true},
		{utc(Micros), `"2024-01-01T00:30:00+02:00"`, us(at(2023, 12, 31, 22, 30, 0, 0)), true},
		{utc(Micros), `"2023-12-31T23:30:00-01:00"`, us(at(2024, 1, 1, 0, 30, 0, 0)), true},
		{utc(Micros), `"2024-01-31T12:34:56"`, us(at(2024, 1, 31, 12, 34, 56, 0)), true},
		{utc(Micros), `"2024-01-31T12:34:56+25:00"`, 0, false},
		{utc(Micros), `"2024-01-31T12:34:56+02:60"`, 0, false},
		{utc(Micros), `"2024-01-31T12:34:56+2:00"`, 0, false},
		{utc(Micros), `"2024-01-31T12:34:56Zulu"`, 0, false},
		{zoned, `"2024-01-31T12:34:56.5+02:00"`, us(at(2024, 1, 31, 10, 34, 56, 500000000)), true},

		{local(Micros), `"2015-11-05 18:45:36.000000"`, us(at(2015, 11, 5, 18, 45, 36, 0)), true},
		{local(Micros), `"2015-11-05T18:45:36.123456"`, us(at(2015, 11, 5, 18, 45, 36, 123456000)), true},
		{local(Micros), `"2015-11-05 18:45"`, us(at(2015, 11, 5, 18, 45, 0, 0)), true},
		{local(Micros), `"2024-01-31T12:34:56Z"`, 0, false},
		{local(Micros), `"2024-01-31T12:34:56+02:00"`, 0, false},
		{local(Micros), `"2024-01-31T12:34:56-05:30"`, 0, false},

		{local(Micros), `"2024-01-31T12:34:56.123456000"`, us(at(2024, 1, 31, 12, 34, 56, 123456000)), true},
		{local(Micros), `"2024-01-31T12:34:56.123456789"`, 0, false},
		{local(Micros), `"2024-01-31T12:34:56.1234567"`, 0, false},
		{local(Nanos), `"2024-01-31T12:34:56.123456789"`, at(2024, 1, 31, 12, 34, 56, 123456789).UnixNano(), true},
		{local(Millis), `"2024-01-31T12:34:56.123"`, at(2024, 1, 31, 12, 34, 56, 123000000).UnixMilli(), true},
		{local(Millis), `"2024-01-31T12:34:56.1234"`, 0, false},

		{local(Micros), `"1969-12-31T23:59:59.999999"`, -1, true},
		{utc(Micros), `"1969-12-31T23:59:59.5-00:30"`, us(at(1970, 1, 1, 0, 29, 59, 500000000)), true},
		{local(Micros), `"1900-01-01 00:00:00"`, us(at(1900, 1, 1, 0, 0, 0, 0)), true},
		{local(Micros), `"0001-01-01T00:00:00"`, us(at(1, 1, 1, 0, 0, 0, 0)), true},
		{local(Micros), `"9999-12-31T23:59:59.999999"`, us(at(9999, 12, 31, 23, 59, 59, 999999000)), true},
		{local(Nanos), `"2262-04-11T23:47:16.854775806"`, math.MaxInt64 - 1, true}, // …807 would be infinity
		{local(Nanos), `"1677-09-21T00:12:43.145224192"`, math.MinInt64, true},
		// Out of the range of nanoseconds since the epoch: an error, not a
		// wrapped-around value.
		{local(Nanos), `"9999-12-31T00:00:00"`, 0, false},
		{local(Nanos), `"2262-04-11T23:47:16.854775808"`, 0, false},
		{local(Nanos), `"0001-01-01T00:00:00"`, 0, false},

		{local(Micros), `"2024-02-30T00:00:00"`, 0, false},
		{local(Micros), `"2024-01-31"`, 0, false},
		{local(Micros), `"2024-01-31T"`, 0, false},
		{local(Micros), `"2024-01-31X12:00:00"`, 0, false},
		{local(Micros), `"2024-01-31T12:34:56 "`, 0, false},
		{local(Micros), `"2024"`, 0, false},
		// A declared timestamp takes an integer count of its unit since
		// the epoch too (Debezium's Timestamp for timestamp(ms),
		// MicroTimestamp for timestamp(us)).
		{local(Micros), `1700000000123456`, 1700000000123456, true},
		{local(Millis), `1700000000123`, 1700000000123, true},
		{utc(Micros), `-1`, -1, true},
		{local(Micros), `1700000000.5`, 0, false},
		{local(Micros), `17000000001234567890`, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.typ.String()+"/"+tt.in, func(t *testing.T) {
			arr, err := convertOne(t, tt.typ, tt.in)
			if !tt.ok {
				if err == nil {
					t.Fatalf("%s: got %d, want an error", tt.in, arr.(*array.Timestamp).Value(0))
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", tt.in, err)
			}
			tsType := arr.DataType().(*arrow.TimestampType)
			if tsType.Unit != tt.typ.Unit || (tsType.TimeZone == "UTC") != tt.typ.UTC {
				t.Fatalf("array type %s for %s", tsType, tt.typ)
			}
			if got := int64(arr.(*array.Timestamp).Value(0)); got != tt.want {
				t.Errorf("%s = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestStruct(t *testing.T) {
	typ := Type{Kind: Struct, Fields: []Column{
		{Name: "a", Type: Type{Kind: Int32}, Nullable: true},
		{Name: "b", Type: Type{Kind: String}, Nullable: true},
		{Name: "d", Type: Type{Kind: Decimal, Precision: 10, Scale: 2}, Nullable: true},
	}}
	arr, errs := convert(t, typ,
		`{"a":1,"b":"x","d":"12.5"}`,
		`{"a":null,"b":"y"}`,
		`{}`,
		`null`,
		missing,
		`{"a":2,"b":"z","unknown":true}`,
		`{"a":"bad","b":"w"}`,
		`5`,
	)
	for i, wantErr := range []bool{false, false, false, false, false, false, true, true} {
		if (errs[i] != nil) != wantErr {
			t.Errorf("row %d: error %v, want error %v", i, errs[i], wantErr)
		}
	}
	var ce *ConvertError
	if !errors.As(errs[6], &ce) || ce.Column != "col.a" {
		t.Errorf("nested error names %v, want col.a", errs[6])
	}
	st := arr.(*array.Struct)
	a := st.Field(0).(*array.Int32)
	b := st.Field(1).(*array.String)
	d := st.Field(2).(*array.Decimal128)
	if st.Len() != 8 || a.Len() != 8 || b.Len() != 8 || d.Len() != 8 {
		t.Fatalf("lengths %d %d %d %d", st.Len(), a.Len(), b.Len(), d.Len())
	}
	if a.Value(0) != 1 || b.Value(0) != "x" || d.Value(0).ToString(2) != "12.50" {
		t.Errorf("row 0 = %d %q %s", a.Value(0), b.Value(0), d.Value(0).ToString(2))
	}
	// Explicit NULL and a missing field both land as NULL inside a valid struct.
	if st.IsNull(1) || !a.IsNull(1) || b.Value(1) != "y" || !d.IsNull(1) {
		t.Errorf("row 1: struct null %v, a null %v, b %q, d null %v", st.IsNull(1), a.IsNull(1), b.Value(1), d.IsNull(1))
	}
	if st.IsNull(2) || !a.IsNull(2) || !b.IsNull(2) {
		t.Errorf("row 2 ({}): struct must be valid with NULL fields")
	}
	if !st.IsNull(3) || !st.IsNull(4) {
		t.Errorf("rows 3, 4 (null, missing): struct must be NULL")
	}
	if a.Value(5) != 2 || b.Value(5) != "z" {
		t.Errorf("row 5 = %d %q", a.Value(5), b.Value(5))
	}
	if !st.IsNull(7) {
		t.Errorf("row 7 (not an object) must be NULL")
	}
}

func TestList(t *testing.T) {
	typ := Type{Kind: List, Elem: &Type{Kind: Int64}}
	arr, errs := convert(t, typ, `[1,2,3]`, `[]`, `null`, `[4,null]`, `"x"`, `[5,"y"]`, `{}`)
	for i, wantErr := range []bool{false, false, false, false, true, true, true} {
		if (errs[i] != nil) != wantErr {
			t.Errorf("row %d: error %v, want error %v", i, errs[i], wantErr)
		}
	}
	var ce *ConvertError
	if !errors.As(errs[5], &ce) || ce.Column != "col[]" {
		t.Errorf("element error names %v, want col[]", errs[5])
	}
	l := arr.(*array.List)
	vals := l.ListValues().(*array.Int64)
	row := func(i int) []string {
		if l.IsNull(i) {
			return nil
		}
		s, e := l.ValueOffsets(i)
		out := []string{}
		for j := s; j < e; j++ {
			out = append(out, vals.ValueStr(int(j)))
		}
		return out
	}
	if got := strings.Join(row(0), ","); got != "1,2,3" {
		t.Errorf("row 0 = %s", got)
	}
	if got := row(1); got == nil || len(got) != 0 {
		t.Errorf("row 1 = %v, want an empty (not NULL) list", got)
	}
	if row(2) != nil {
		t.Errorf("row 2 must be NULL")
	}
	if got := strings.Join(row(3), ","); got != "4,"+array.NullValueStr {
		t.Errorf("row 3 = %s", got)
	}
	if !l.IsNull(4) || !l.IsNull(6) {
		t.Errorf("non-arrays must land as NULL")
	}
}

func TestMap(t *testing.T) {
	typ := Type{Kind: Map, Key: &Type{Kind: String}, Value: &Type{Kind: Int64}}
	arr, errs := convert(t, typ,
		`{"a":1,"b":2}`,
		`[["c",3],["d",4]]`,
		`{}`,
		`[]`,
		`null`,
		`{"e":null}`,
		`"x"`,
		`[["f"]]`,
		`[["g",5],"bad"]`,
		`[[null,6]]`,
		`{"h":"nan"}`,
		`[["i",7]]`,
	)
	for i, wantErr := range []bool{false, false, false, false, false, false, true, true, true, true, true, false} {
		if (errs[i] != nil) != wantErr {
			t.Errorf("row %d: error %v, want error %v", i, errs[i], wantErr)
		}
	}
	m := arr.(*array.Map)
	keys := m.Keys().(*array.String)
	items := m.Items().(*array.Int64)
	row := func(i int) string {
		if m.IsNull(i) {
			return "NULL"
		}
		s, e := m.ValueOffsets(i)
		var parts []string
		for j := s; j < e; j++ {
			parts = append(parts, keys.Value(int(j))+"="+items.ValueStr(int(j)))
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	want := []string{"{a=1,b=2}", "{c=3,d=4}", "{}", "{}", "NULL", "{e=" + array.NullValueStr + "}",
		"NULL", "NULL", "NULL", "NULL", "", "{i=7}"}
	for i, w := range want {
		if w == "" {
			continue // row 10 failed inside a valid map: discarded by the caller
		}
		if got := row(i); got != w {
			t.Errorf("row %d = %s, want %s", i, got, w)
		}
	}
}

func TestMapIntKeys(t *testing.T) {
	typ := Type{Kind: Map, Key: &Type{Kind: Int32}, Value: &Type{Kind: String}}
	arr, errs := convert(t, typ, `[[1,"x"],[2,"y"]]`, `{"3":"z"}`, `{"k":"z"}`)
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("errors %v", errs)
	}
	var ce *ConvertError
	if !errors.As(errs[2], &ce) || ce.Column != "col.key" {
		t.Errorf("bad key error %v, want one naming col.key", errs[2])
	}
	m := arr.(*array.Map)
	k := m.Keys().(*array.Int32)
	if k.Value(0) != 1 || k.Value(1) != 2 || k.Value(2) != 3 {
		t.Errorf("keys %v", k)
	}
}

func TestConvertErrorText(t *testing.T) {
	_, err := convertOne(t, Type{Kind: Int8}, `"`+strings.Repeat("9", 200)+`"`)
	var ce *ConvertError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, `column "col" (int8)`) || !strings.Contains(msg, "…") || len(msg) > 160 {
		t.Errorf("message %q: want the column, the type and a value cut at 80 bytes", msg)
	}
}

// The reason says what was wrong with a number an integer column cannot
// hold.
func TestIntegerReasons(t *testing.T) {
	for _, tt := range []struct {
		typ  Type
		in   string
		want string
	}{
		{Type{Kind: Int64}, `9223372036854775808`, "out of int64 range"},
		{Type{Kind: Int64}, `"-9223372036854775809"`, "out of int64 range"},
		{Type{Kind: Int64}, `1e19`, "out of int64 range"},
		{Type{Kind: Int8}, `300`, "out of int8 range"},
		{Type{Kind: Int32}, `"3000000000"`, "out of int32 range"},
		{Type{Kind: Int64}, `1.5`, "not an integer"},
		{Type{Kind: Int64}, `"x"`, "not an integer"},
	} {
		_, err := convertOne(t, tt.typ, tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s into %s: %v, want %q", tt.in, tt.typ, err, tt.want)
		}
	}
}

// fuzzTypes are the column types FuzzPackedValues converts to: every kind and
// encoding family.
var fuzzTypes = []Type{
	{Kind: Null}, {Kind: Bool}, {Kind: Int8}, {Kind: Int16}, {Kind: Int32}, {Kind: Int64},
	{Kind: Float32}, {Kind: Float64}, {Kind: String}, {Kind: DecimalText},
	{Kind: JSON}, {Kind: Binary}, {Kind: Binary, Enc: EncHex},
	{Kind: Decimal, Precision: 10, Scale: 3}, {Kind: Decimal, Precision: 38, Scale: 0, Enc: EncBase64Decimal},
	{Kind: Decimal, Precision: 20, Scale: 4, Enc: EncVariableScale},
	{Kind: Date}, {Kind: Date, Enc: EncEpochDays},
	{Kind: Time, Unit: Millis}, {Kind: Time, Unit: Micros, Enc: EncEpochUnit},
	{Kind: Timestamp, Unit: Micros}, {Kind: Timestamp, Unit: Micros, UTC: true, Enc: EncZoned},
	{Kind: Timestamp, Unit: Millis, Enc: EncEpochUnit},
	{Kind: List, Elem: &Type{Kind: Int16}},
	{Kind: Struct, Fields: []Column{{Name: "a", Type: Type{Kind: String}, Nullable: true}, {Name: "b", Type: Type{Kind: Float64}, Nullable: true}}},
	{Kind: Map, Key: &Type{Kind: String}, Value: &Type{Kind: Int64}},
}

// FuzzPackedValues: any JSON value converts into packed values with the error
// Compile's Appender gives it, and one that converts replays into the
// value Compile's Appender appends (convert checks both).
func FuzzPackedValues(f *testing.F) {
	for _, s := range []string{`null`, `true`, `-128`, `1e2`, `"12.5"`, `"AAEC"`, `"0a0b"`, `"2024-01-31"`, `19000`,
		`"12:34:56.789"`, `"2024-01-31T12:34:56.123456+02:00"`, `[1,null,"2"]`, `{"a":"x","b":1.5}`, `{"k":1}`, `[["k",2]]`,
		`{"scale":2,"value":"AQ=="}`, `"NaN"`, `-0.0`, `"\u00e9"`} {
		for i := range fuzzTypes {
			f.Add(s, uint8(i))
		}
	}
	f.Fuzz(func(t *testing.T, in string, kind uint8) {
		if fastjson.Validate(in) != nil {
			return
		}
		convert(t, fuzzTypes[int(kind)%len(fuzzTypes)], in)
	})
}
