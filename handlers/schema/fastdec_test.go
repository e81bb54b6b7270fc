package schema

import (
	"encoding/base64"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/valyala/fastjson"
)

// slowDecimal is the big-integer path fastDecimal must agree with.
func slowDecimal(t Type, v *fastjson.Value) (decimal128.Num, error) {
	var scratch []byte
	if t.Enc == EncBase64Decimal {
		n, err := unscaledFromBase64(v)
		if err != nil {
			return decimal128.Num{}, err
		}
		if !fitsPrecision(n, t.Precision) {
			return decimal128.Num{}, errNotDecimal
		}
		return decimal128.FromBigInt(n), nil
	}
	raw := v.MarshalTo(scratch)
	if v.Type() == fastjson.TypeString {
		raw, _ = v.StringBytes()
	}
	d, err := ParseDecimal(raw)
	if err != nil {
		return decimal128.Num{}, err
	}
	n, err := d.Rescale(t.Scale)
	if err != nil {
		return decimal128.Num{}, err
	}
	if !fitsPrecision(n, t.Precision) {
		return decimal128.Num{}, errNotDecimal
	}
	return decimal128.FromBigInt(n), nil
}

func FuzzFastDecimal(f *testing.F) {
	for _, s := range []string{"0", "-0", "1.50", "-.5", "1.", "007", "123456789012345678", "1234567890123456789",
		"0.000000000000000001", "99.990", "1e3", "-12.3400", `"42.1"`, `"AeJA"`, "12345678.9"} {
		f.Add(s, int8(2), int8(10), false)
	}
	f.Add(`"AeJA"`, int8(2), int8(10), true)
	f.Add("1234578", int8(37), int8(37), false) // scaling past 128 bits once wrapped
	f.Add(`"/wAAAAAAAAAAAAAAAAAAAA=="`, int8(0), int8(38), true)
	f.Fuzz(func(t *testing.T, text string, scale, prec int8, b64 bool) {
		p := int32(prec)%38 + 1
		if p < 1 {
			p = -p + 1
		}
		s := int32(scale) % (p + 1)
		if s < 0 {
			s = -s
		}
		typ := Type{Kind: Decimal, Precision: p, Scale: s}
		if b64 {
			typ.Enc = EncBase64Decimal
			text = `"` + base64.StdEncoding.EncodeToString([]byte(text)) + `"`
		}
		v, err := fastjson.Parse(text)
		if err != nil {
			return
		}
		var scratch []byte
		fast, ok, ferr := fastDecimal(typ, v, &scratch)
		if !ok || ferr != nil {
			return
		}
		slow, serr := slowDecimal(typ, v)
		if serr != nil {
			t.Fatalf("%s as %s: fast path accepted %s, slow path rejected: %v", text, typ, fast.ToString(s), serr)
		}
		if fast != slow {
			t.Fatalf("%s as %s: fast %s, slow %s", text, typ, fast.ToString(s), slow.ToString(s))
		}
	})
}
