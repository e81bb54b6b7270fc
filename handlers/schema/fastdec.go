package schema

import (
	"encoding/base64"
	"encoding/binary"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/valyala/fastjson"
)

// pow10 holds 10^0 … 10^38 as decimal128 values.
var pow10 = func() [39]decimal128.Num {
	var p [39]decimal128.Num
	p[0] = decimal128.FromI64(1)
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1].Mul(decimal128.FromI64(10))
	}
	return p
}()

// fastDecimal converts the common cases without big integers: Kafka Connect
// bytes of at most 16 bytes, and plain text with at most 18 significant
// digits. ok is false when the slow path must decide.
func fastDecimal(t Type, v *fastjson.Value, scratch *[]byte) (n decimal128.Num, ok bool, err error) {
	switch t.Enc {
	case EncBase64Decimal:
		s, serr := v.StringBytes()
		if serr != nil || base64.StdEncoding.DecodedLen(len(s)) > 24 {
			return n, false, nil
		}
		var buf [24]byte
		m, derr := base64.StdEncoding.Decode(buf[:], s)
		if derr != nil || m > 16 || m == 0 {
			return n, false, nil
		}
		// Sign-extend the big-endian two's complement to 16 bytes.
		var be [16]byte
		if buf[0]&0x80 != 0 {
			for i := range be {
				be[i] = 0xff
			}
		}
		copy(be[16-m:], buf[:m])
		n = decimal128.New(int64(binary.BigEndian.Uint64(be[:8])), binary.BigEndian.Uint64(be[8:]))
	case EncNative:
		var raw []byte
		switch v.Type() {
		case fastjson.TypeNumber:
			*scratch = v.MarshalTo((*scratch)[:0])
			raw = *scratch
		case fastjson.TypeString:
			raw, _ = v.StringBytes()
		default:
			return n, false, nil
		}
		var unscaled int64
		var frac, digits int
		neg, dot, intDigit := false, false, false
		for i, c := range raw {
			switch {
			case c == '-' && i == 0:
				neg = true
			case c == '.' && !dot && i > 0:
				dot = true
			case c >= '0' && c <= '9':
				if digits == 18 {
					return n, false, nil
				}
				if unscaled != 0 || c != '0' {
					digits++
				}
				unscaled = unscaled*10 + int64(c-'0')
				if dot {
					frac++
				} else {
					intDigit = true
				}
			default:
				return n, false, nil // exponents, signs, junk: the slow path decides
			}
		}
		if !intDigit || (dot && frac == 0) {
			return n, false, nil
		}
		// Drop trailing fractional zeros beyond the scale; other digits
		// beyond it would be lost.
		for frac > int(t.Scale) && unscaled%10 == 0 {
			unscaled /= 10
			frac--
		}
		if frac > int(t.Scale) {
			return n, false, nil
		}
		if neg {
			unscaled = -unscaled
		}
		n = decimal128.FromI64(unscaled)
		if d := int(t.Scale) - frac; d > 0 {
			// |unscaled| < 10^digits, so the product stays below 10^38
			// (inside 128 bits) when digits+d ≤ 38; beyond, the slow path.
			if digits+d > 38 {
				return n, false, nil
			}
			n = n.Mul(pow10[d])
		}
	default:
		return n, false, nil
	}
	if !n.FitsInPrecision(t.Precision) {
		return n, false, nil // the slow path reports the error
	}
	return n, true, nil
}
