// Package jsontext writes JSON text by hand, for the stages that build it
// without reflection: GoldenGate's metadata extra (_gg_meta) and the Avro
// transcoder.
package jsontext

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string literal: quotes and backslashes
// escaped, \n, \r and \t as such, other control characters as \u00XX,
// every other byte copied. With replaceInvalid, bytes that are not UTF-8
// become U+FFFD, so that the result is always valid JSON; without, they
// are kept, for a later stage that checks strings and rejects them.
func AppendString(dst, s []byte, replaceInvalid bool) []byte {
	dst = append(dst, '"')
	start := 0
	if !replaceInvalid {
		// The hot path of the Avro transcoder: a byte is looked at once.
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < 0x20 || c == '"' || c == '\\' {
				dst = escape(append(dst, s[start:i]...), c)
				start = i + 1
			}
		}
		return append(append(dst, s[start:]...), '"')
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c < 0x20 || c == '"' || c == '\\':
			dst = escape(append(dst, s[start:i]...), c)
			start = i + 1
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size - 1
				continue
			}
			dst = append(append(dst, s[start:i]...), "\ufffd"...)
			start = i + 1
		}
	}
	return append(append(dst, s[start:]...), '"')
}

// escape appends the escape of c, a quote, a backslash or a control
// character.
func escape(dst []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(dst, '\\', c)
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	return append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}
