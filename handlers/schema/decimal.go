package schema

import (
	"errors"
	"math/big"
	"strconv"
)

// Dec is an exact decimal: Unscaled × 10^-Scale.
type Dec struct {
	Unscaled *big.Int
	Scale    int32
}

var errNotDecimal = errors.New("not a decimal number")

// ParseDecimal parses JSON number syntax (also used inside strings) exactly:
// -?digits[.digits][e[+-]digits]. Leading '+' and surrounding spaces are
// rejected; nothing is rounded.
func ParseDecimal(raw []byte) (Dec, error) {
	i := 0
	neg := false
	if i < len(raw) && raw[i] == '-' {
		neg = true
		i++
	}
	digits := make([]byte, 0, len(raw))
	start := i
	for i < len(raw) && raw[i] >= '0' && raw[i] <= '9' {
		digits = append(digits, raw[i])
		i++
	}
	intDigits := i - start
	frac := 0
	if i < len(raw) && raw[i] == '.' {
		i++
		fs := i
		for i < len(raw) && raw[i] >= '0' && raw[i] <= '9' {
			digits = append(digits, raw[i])
			i++
		}
		frac = i - fs
		if frac == 0 {
			return Dec{}, errNotDecimal
		}
	}
	if intDigits == 0 {
		return Dec{}, errNotDecimal
	}
	exp := 0
	if i < len(raw) && (raw[i] == 'e' || raw[i] == 'E') {
		i++
		es := i
		if i < len(raw) && (raw[i] == '+' || raw[i] == '-') {
			i++
		}
		for i < len(raw) && raw[i] >= '0' && raw[i] <= '9' {
			i++
		}
		e, err := strconv.Atoi(string(raw[es:i]))
		if err != nil || e > 10000 || e < -10000 {
			return Dec{}, errNotDecimal
		}
		exp = e
	}
	if i != len(raw) {
		return Dec{}, errNotDecimal
	}
	n, ok := new(big.Int).SetString(string(digits), 10)
	if !ok {
		return Dec{}, errNotDecimal
	}
	if neg {
		n.Neg(n)
	}
	scale := int32(frac - exp)
	if scale < 0 {
		n.Mul(n, new(big.Int).Exp(bigTen, big.NewInt(int64(-scale)), nil))
		scale = 0
	}
	return Dec{Unscaled: n, Scale: scale}, nil
}

// Rescale returns the unscaled value at scale s, or an error when that would
// drop non-zero digits.
func (d Dec) Rescale(s int32) (*big.Int, error) {
	switch {
	case s == d.Scale:
		return d.Unscaled, nil
	case s > d.Scale:
		m := new(big.Int).Exp(bigTen, big.NewInt(int64(s-d.Scale)), nil)
		return new(big.Int).Mul(d.Unscaled, m), nil
	}
	m := new(big.Int).Exp(bigTen, big.NewInt(int64(d.Scale-s)), nil)
	q, r := new(big.Int).QuoRem(d.Unscaled, m, new(big.Int))
	if r.Sign() != 0 {
		return nil, errors.New("more fractional digits than scale " + strconv.Itoa(int(s)))
	}
	return q, nil
}

// AppendDecimalText validates raw as a JSON number and appends it in plain
// notation. Text without an exponent is appended as sent (trailing zeros
// kept); an exponent is expanded.
func AppendDecimalText(dst, raw []byte) ([]byte, error) {
	plain := true
	for _, c := range raw {
		if c == 'e' || c == 'E' {
			plain = false
			break
		}
	}
	if plain {
		// Fast path: validate without building a big.Int.
		i := 0
		if i < len(raw) && raw[i] == '-' {
			i++
		}
		ds := i
		for i < len(raw) && raw[i] >= '0' && raw[i] <= '9' {
			i++
		}
		if i == ds {
			return dst, errNotDecimal
		}
		if i < len(raw) && raw[i] == '.' {
			i++
			fs := i
			for i < len(raw) && raw[i] >= '0' && raw[i] <= '9' {
				i++
			}
			if i == fs {
				return dst, errNotDecimal
			}
		}
		if i != len(raw) {
			return dst, errNotDecimal
		}
		return append(dst, raw...), nil
	}
	d, err := ParseDecimal(raw)
	if err != nil {
		return dst, err
	}
	return appendScaled(dst, d.Unscaled, d.Scale), nil
}

// appendScaled writes n × 10^-scale in plain notation.
func appendScaled(dst []byte, n *big.Int, scale int32) []byte {
	if scale <= 0 {
		dst = n.Append(dst, 10)
		for i := int32(0); i < -scale; i++ {
			dst = append(dst, '0')
		}
		return dst
	}
	neg := n.Sign() < 0
	digits := new(big.Int).Abs(n).Text(10)
	for int32(len(digits)) <= scale {
		digits = "0" + digits
	}
	if neg {
		dst = append(dst, '-')
	}
	cut := len(digits) - int(scale)
	dst = append(dst, digits[:cut]...)
	dst = append(dst, '.')
	return append(dst, digits[cut:]...)
}
