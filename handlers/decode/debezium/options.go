package debezium

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"
)

// DefaultUnavailableValuePlaceholder is Debezium's default
// unavailable.value.placeholder.
const DefaultUnavailableValuePlaceholder = "__debezium_unavailable_value"

// Options configure a Decoder. The zero value is valid: every field has a
// default.
type Options struct {
	// UnavailableValuePlaceholder is the connector's
	// unavailable.value.placeholder: the value Debezium sends for a column
	// it could not read (unchanged PostgreSQL TOAST, Oracle LOB). As in
	// Debezium, a value starting with "hex:" gives the placeholder's octets
	// in hexadecimal. Empty means DefaultUnavailableValuePlaceholder.
	UnavailableValuePlaceholder string

	// KeepUnavailable leaves placeholder values in the images instead of
	// removing their columns. Only for sources known to send none: it saves
	// the scan of every image.
	KeepUnavailable bool
}

func (o *Options) setDefaults() {
	if o.UnavailableValuePlaceholder == "" {
		o.UnavailableValuePlaceholder = DefaultUnavailableValuePlaceholder
	}
}

// Validate reports whether the options can be used, after defaults are
// applied: a hex: placeholder must be non-empty hexadecimal.
func (o Options) Validate() error {
	o.setDefaults()
	if _, err := placeholderBytes(o.UnavailableValuePlaceholder); err != nil {
		return err
	}
	return nil
}

// Set sets the option whose configuration key is key:
// unavailable_value_placeholder.
func (o *Options) Set(key, value string) error {
	switch key {
	case "unavailable_value_placeholder":
		o.UnavailableValuePlaceholder = value
		return nil
	}
	return fmt.Errorf("unknown key %q (known: unavailable_value_placeholder)", key)
}

func placeholderBytes(s string) ([]byte, error) {
	h, ok := strings.CutPrefix(s, "hex:")
	if !ok {
		return []byte(s), nil
	}
	b, err := hex.DecodeString(h)
	if err != nil {
		return nil, fmt.Errorf("debezium: UnavailableValuePlaceholder %q: invalid hexadecimal after hex:", s)
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("debezium: UnavailableValuePlaceholder %q: no octets after hex:", s)
	}
	return b, nil
}

// placeholder holds every form in which Debezium writes the unavailable
// value placeholder into a JSON event.
type placeholder struct {
	str    string  // the placeholder as text (Java's new String(bytes))
	b64    string  // base64 of its bytes (bytes columns)
	uuid   string  // UUID.nameUUIDFromBytes(bytes) (uuid[] columns)
	hstore string  // {"str":"str"} (hstore json mode)
	ints   []int64 // its bytes as signed numbers (int[] columns)
}

func newPlaceholder(raw []byte) placeholder {
	// Java decodes the bytes as UTF-8, replacing each malformed sequence.
	var sb strings.Builder
	for i := 0; i < len(raw); {
		r, n := utf8.DecodeRune(raw[i:])
		sb.WriteRune(r)
		i += n
	}
	p := placeholder{str: sb.String(), b64: base64.StdEncoding.EncodeToString(raw)}
	sum := md5.Sum(raw)
	sum[6] = sum[6]&0x0f | 0x30
	sum[8] = sum[8]&0x3f | 0x80
	h := hex.EncodeToString(sum[:])
	p.uuid = h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
	q := jsonQuote(p.str)
	p.hstore = "{" + q + ":" + q + "}"
	for _, c := range raw {
		p.ints = append(p.ints, int64(int8(c)))
	}
	return p
}

// jsonQuote writes s as a JSON string the way Jackson does: quotes,
// backslashes and control characters escaped, nothing else.
func jsonQuote(s string) string {
	var b bytes.Buffer
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
