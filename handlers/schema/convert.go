package schema

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/valyala/fastjson"
)

// Appender appends one JSON value (nil or JSON null for NULL) to the builder
// it was compiled for. It returns an error, and appends NULL, when the value
// does not fit the column's type; the caller then discards the whole row.
type Appender func(v *fastjson.Value) error

// ConvertError says why a value does not fit its column.
type ConvertError struct {
	Column string
	Type   Type
	Value  string
	Reason string
}

func (e *ConvertError) Error() string {
	v := e.Value
	if len(v) > 80 {
		v = v[:80] + "…"
	}
	return fmt.Sprintf("column %q (%s): value %s: %s", e.Column, e.Type, v, e.Reason)
}

// ReasonInvalidUTF8 is the Reason of a ConvertError for text that is not
// UTF-8.
const ReasonInvalidUTF8 = "invalid UTF-8"

var errInvalidUTF8 = errors.New(ReasonInvalidUTF8)

func convErr(col string, t Type, v *fastjson.Value, reason string) error {
	return &ConvertError{Column: col, Type: t, Value: string(v.MarshalTo(nil)), Reason: reason}
}

func isNull(v *fastjson.Value) bool { return v == nil || v.Type() == fastjson.TypeNull }

// Converters compiles the Appenders of one record builder's columns and
// owns the scratch builders some of them need (the key check of maps),
// allocated from mem. Release frees those once the Appenders are no longer
// used. Converters and their Appenders are not safe for concurrent use.
type Converters struct {
	mem     memory.Allocator
	scratch []array.Builder
}

// NewConverters returns Converters allocating from mem.
func NewConverters(mem memory.Allocator) *Converters { return &Converters{mem: mem} }

// Release frees the scratch builders.
func (c *Converters) Release() {
	for _, b := range c.scratch {
		b.Release()
	}
	c.scratch = nil
}

// failFunc appends NULL and returns the error for a value that does not
// fit.
type failFunc func(v *fastjson.Value, reason string) error

// Compile returns an Appender writing values of type t into b, which must be
// a builder of t.Arrow(). name is used in error messages.
func (c *Converters) Compile(name string, t Type, b array.Builder) Appender {
	fail := func(v *fastjson.Value, reason string) error {
		b.AppendNull()
		return convErr(name, t, v, reason)
	}
	switch t.Kind {
	case Null:
		return func(v *fastjson.Value) error {
			if isNull(v) {
				b.AppendNull()
				return nil
			}
			return fail(v, "column has no known type")
		}
	case Bool:
		return compileBool(b.(*array.BooleanBuilder), fail)
	case Int8, Int16, Int32, Int64:
		return compileInt(name, t, b, fail)
	case Float32, Float64:
		return compileFloat(t, b, fail)
	case String, DecimalText:
		return compileText(t, b, fail)
	case JSON:
		return compileJSON(b, fail)
	case Binary:
		return compileBinary(t, b, fail)
	case Decimal:
		return compileDecimal(t, b.(*array.Decimal128Builder), fail)
	case Date:
		return compileDate(t, b.(*array.Date32Builder), fail)
	case Time:
		return compileTime(t, b, fail)
	case Timestamp:
		return compileTimestamp(t, b.(*array.TimestampBuilder), fail)
	case Struct:
		return c.compileStruct(name, t, b, fail)
	case List:
		return c.compileList(name, t, b, fail)
	case Map:
		return c.compileMap(name, t, b, fail)
	}
	panic(fmt.Sprintf("schema: cannot compile kind %d", t.Kind))
}

// The targets of the kinds whose values are not text (textTarget): an
// Arrow builder of the kind, or packed values (CompilePacker).
type (
	boolTarget interface {
		Append(bool)
		AppendNull()
	}
	decimalTarget interface {
		Append(decimal128.Num)
		AppendNull()
	}
	dateTarget interface {
		Append(arrow.Date32)
		AppendNull()
	}
	timestampTarget interface {
		Append(arrow.Timestamp)
		AppendNull()
	}
)

func compileBool(bb boolTarget, fail failFunc) Appender {
	return func(v *fastjson.Value) error {
		if isNull(v) {
			bb.AppendNull()
			return nil
		}
		switch v.Type() {
		case fastjson.TypeTrue:
			bb.Append(true)
		case fastjson.TypeFalse:
			bb.Append(false)
		default:
			return fail(v, "not a boolean")
		}
		return nil
	}
}

func compileText(t Type, b array.Builder, fail failFunc) Appender {
	return compileTextTo(t, b.(*array.StringBuilder).BinaryBuilder, fail)
}

// textTarget is where variable-length values go: an Arrow string or
// binary builder, or a TextColumn.
type textTarget interface {
	Append(v []byte)
	AppendNull()
}

func compileTextTo(t Type, sb textTarget, fail failFunc) Appender {
	var scratch, num []byte
	// plain: a string value is the text itself (see textValue).
	plain := t.Kind == String && (t.Enc == EncNative || t.Enc == EncText)
	return func(v *fastjson.Value) error {
		if isNull(v) {
			sb.AppendNull()
			return nil
		}
		if plain && v.Type() == fastjson.TypeString {
			// A JSON string lands as it is: appended from the parsed value,
			// not through scratch.
			s, _ := v.StringBytes()
			if !utf8.Valid(s) {
				return fail(v, "invalid UTF-8")
			}
			sb.Append(s)
			return nil
		}
		var err error
		scratch, err = textValue(scratch[:0], &num, t, v)
		if err != nil {
			return fail(v, err.Error())
		}
		sb.Append(scratch)
		return nil
	}
}

// compileJSON appends JSON values to b, of the JSON extension type or a
// plain string (PlainJSON).
func compileJSON(b array.Builder, fail failFunc) Appender {
	if ext, ok := b.(*array.ExtensionBuilder); ok {
		b = ext.StorageBuilder()
	}
	return compileJSONTo(b.(*array.StringBuilder).BinaryBuilder, fail)
}

func compileJSONTo(sb textTarget, fail failFunc) Appender {
	var scratch []byte
	return func(v *fastjson.Value) error {
		if isNull(v) {
			sb.AppendNull()
			return nil
		}
		// A JSON column holds valid JSON in valid UTF-8 only: engines refuse
		// to read a file with one bad value.
		if v.Type() == fastjson.TypeString {
			s, _ := v.StringBytes()
			if !utf8.Valid(s) {
				return fail(v, "invalid UTF-8")
			}
			if err := fastjson.ValidateBytes(s); err != nil {
				return fail(v, "not valid JSON text")
			}
			sb.Append(s)
			return nil
		}
		scratch = v.MarshalTo(scratch[:0])
		if !utf8.Valid(scratch) {
			return fail(v, "invalid UTF-8")
		}
		sb.Append(scratch)
		return nil
	}
}

func compileBinary(t Type, b array.Builder, fail failFunc) Appender {
	return compileBinaryTo(t, b.(*array.BinaryBuilder), fail)
}

func compileBinaryTo(t Type, bb textTarget, fail failFunc) Appender {
	var scratch []byte
	return func(v *fastjson.Value) error {
		if isNull(v) {
			bb.AppendNull()
			return nil
		}
		s, err := v.StringBytes()
		if err != nil {
			return fail(v, "binary must be a JSON string")
		}
		if t.Enc == EncHex {
			scratch = append(scratch[:0], make([]byte, hex.DecodedLen(len(s)))...)
			n, err := hex.Decode(scratch, s)
			if err != nil {
				return fail(v, "invalid hexadecimal")
			}
			bb.Append(scratch[:n])
			return nil
		}
		scratch = append(scratch[:0], make([]byte, base64.StdEncoding.DecodedLen(len(s)))...)
		n, err := base64.StdEncoding.Decode(scratch, s)
		if err != nil {
			return fail(v, "invalid base64")
		}
		bb.Append(scratch[:n])
		return nil
	}
}

func compileDecimal(t Type, db decimalTarget, fail failFunc) Appender {
	var scratch []byte
	return func(v *fastjson.Value) error {
		if isNull(v) {
			db.AppendNull()
			return nil
		}
		n, err := decimalValue(t, v, &scratch)
		if err != nil {
			return fail(v, err.Error())
		}
		db.Append(n)
		return nil
	}
}

func compileDate(t Type, db dateTarget, fail failFunc) Appender {
	return func(v *fastjson.Value) error {
		if isNull(v) {
			db.AppendNull()
			return nil
		}
		// A declared date (EncNative) also takes Debezium's integer epoch
		// days, as schemaless JSON carries them.
		if t.Enc == EncEpochDays || t.Enc == EncNative && v.Type() == fastjson.TypeNumber {
			d, err := v.Int64()
			if err != nil || d < math.MinInt32 || d > math.MaxInt32 {
				return fail(v, "not an integer day count")
			}
			db.Append(arrow.Date32(d))
			return nil
		}
		s, err := v.StringBytes()
		if err != nil {
			return fail(v, "date must be text")
		}
		d, err := ParseDate(s)
		if err != nil {
			return fail(v, err.Error())
		}
		db.Append(arrow.Date32(d))
		return nil
	}
}

func compileTimestamp(t Type, tb timestampTarget, fail failFunc) Appender {
	return func(v *fastjson.Value) error {
		if isNull(v) {
			tb.AppendNull()
			return nil
		}
		// A declared timestamp also takes an integer count of its unit
		// since the epoch (Debezium's Timestamp, MicroTimestamp).
		if t.Enc == EncEpochUnit || t.Enc == EncNative && v.Type() == fastjson.TypeNumber {
			n, err := v.Int64()
			if err != nil {
				return fail(v, "not an integer timestamp")
			}
			// Timestamps land as microseconds.
			if t.Unit == Millis && (n > math.MaxInt64/1000 || n < math.MinInt64/1000) {
				return fail(v, "timestamp out of range: its microseconds overflow int64")
			}
			tb.Append(arrow.Timestamp(n))
			return nil
		}
		s, err := v.StringBytes()
		if err != nil {
			return fail(v, "timestamp must be text")
		}
		n, err := ParseTimestamp(s, t.Unit, t.UTC || t.Enc == EncZoned)
		if err != nil {
			return fail(v, err.Error())
		}
		tb.Append(arrow.Timestamp(n))
		return nil
	}
}

func (c *Converters) compileStruct(name string, t Type, b array.Builder, fail failFunc) Appender {
	sb := b.(*array.StructBuilder)
	fields := make([]Appender, len(t.Fields))
	for i, f := range t.Fields {
		fields[i] = c.Compile(name+"."+f.Name, f.Type, sb.FieldBuilder(i))
	}
	return func(v *fastjson.Value) error {
		if isNull(v) {
			sb.AppendNull()
			return nil
		}
		o, err := v.Object()
		if err != nil {
			return fail(v, "not an object")
		}
		sb.Append(true)
		var first error
		for i, f := range t.Fields {
			if err := fields[i](o.Get(f.Name)); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
}

func (c *Converters) compileList(name string, t Type, b array.Builder, fail failFunc) Appender {
	lb := b.(*array.ListBuilder)
	elem := c.Compile(name+"[]", *t.Elem, lb.ValueBuilder())
	return func(v *fastjson.Value) error {
		if isNull(v) {
			lb.AppendNull()
			return nil
		}
		arr, err := v.Array()
		if err != nil {
			return fail(v, "not an array")
		}
		lb.Append(true)
		var first error
		for _, e := range arr {
			if err := elem(e); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
}

func (c *Converters) compileMap(name string, t Type, b array.Builder, fail failFunc) Appender {
	mb := b.(*array.MapBuilder)
	key := c.Compile(name+".key", *t.Key, mb.KeyBuilder())
	val := c.Compile(name+".value", *t.Value, mb.ItemBuilder())
	// A map array cannot be built with a NULL key, not even in a row
	// that is discarded, so every key is first tried on a scratch
	// builder and a map with a bad key appends only its NULL.
	probe := array.NewBuilder(c.mem, t.Key.Arrow())
	c.scratch = append(c.scratch, probe)
	tryKey := c.Compile(name+".key", *t.Key, probe)
	checkKey := func(k *fastjson.Value) error {
		if isNull(k) {
			return convErr(name+".key", *t.Key, k, "map key is null")
		}
		err := tryKey(k)
		if probe.Len() >= 1024 {
			probe.NewArray().Release()
		}
		return err
	}
	keyArena := &fastjson.Arena{}
	var keys []*fastjson.Value
	return func(v *fastjson.Value) error {
		if isNull(v) {
			mb.AppendNull()
			return nil
		}
		var first error
		note := func(err error) {
			if err != nil && first == nil {
				first = err
			}
		}
		switch v.Type() {
		case fastjson.TypeObject:
			// Kafka Connect's JSON converter writes maps with string keys
			// as objects.
			keyArena.Reset()
			o, _ := v.Object()
			keys = keys[:0]
			o.Visit(func(k []byte, _ *fastjson.Value) {
				kv := keyArena.NewStringBytes(k)
				keys = append(keys, kv)
				note(checkKey(kv))
			})
			if first != nil {
				b.AppendNull()
				return first
			}
			mb.Append(true)
			i := 0
			o.Visit(func(_ []byte, e *fastjson.Value) {
				note(key(keys[i]))
				note(val(e))
				i++
			})
		case fastjson.TypeArray:
			// ... and other maps as arrays of [key, value] pairs.
			arr, _ := v.Array()
			for _, pair := range arr {
				kv, err := pair.Array()
				if err != nil || len(kv) != 2 {
					return fail(v, "map entry is not a [key, value] pair")
				}
				if err := checkKey(kv[0]); err != nil {
					b.AppendNull()
					return err
				}
			}
			mb.Append(true)
			for _, pair := range arr {
				kv, _ := pair.Array()
				note(key(kv[0]))
				note(val(kv[1]))
			}
		default:
			return fail(v, "not a map")
		}
		return first
	}
}

func compileInt(name string, t Type, b array.Builder, fail failFunc) Appender {
	var app func(int64)
	switch bb := b.(type) {
	case *array.Int8Builder:
		app = func(n int64) { bb.Append(int8(n)) }
	case *array.Int16Builder:
		app = func(n int64) { bb.Append(int16(n)) }
	case *array.Int32Builder:
		app = func(n int64) { bb.Append(int32(n)) }
	case *array.Int64Builder:
		app = bb.Append
	default:
		panic(fmt.Sprintf("schema: column %s: builder %T for %s", name, b, t))
	}
	lo, hi := intRange(t.Kind)
	return compileIntTo(t, lo, hi, app, b.AppendNull, fail)
}

// compileIntTo converts to integers within [lo, hi], which go to app.
func compileIntTo(t Type, lo, hi int64, app func(int64), null func(), fail failFunc) Appender {
	return func(v *fastjson.Value) error {
		if isNull(v) {
			null()
			return nil
		}
		var raw []byte
		switch v.Type() {
		case fastjson.TypeNumber:
			if n, err := v.Int64(); err == nil {
				if n < lo || n > hi {
					return fail(v, fmt.Sprintf("out of %s range", t))
				}
				app(n)
				return nil
			}
			raw = v.MarshalTo(nil)
		case fastjson.TypeString:
			raw, _ = v.StringBytes()
		default:
			return fail(v, "not an integer")
		}
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if errors.Is(err, strconv.ErrRange) {
			return fail(v, fmt.Sprintf("out of %s range", t))
		}
		if err != nil {
			// Accept integral values written with a zero fraction (1.0, 1e3).
			n, err = integralDecimal(raw)
			if err != nil {
				return fail(v, err.Error())
			}
		}
		if n < lo || n > hi {
			return fail(v, fmt.Sprintf("out of %s range", t))
		}
		app(n)
		return nil
	}
}

func integralDecimal(raw []byte) (int64, error) {
	d, err := ParseDecimal(raw)
	if err != nil {
		return 0, errors.New("not an integer")
	}
	num, err := d.Rescale(0)
	if err != nil {
		return 0, errors.New("not an integer")
	}
	if !num.IsInt64() {
		return 0, errors.New("out of int64 range")
	}
	return num.Int64(), nil
}

func compileFloat(t Type, b array.Builder, fail failFunc) Appender {
	bits := 64
	var app func(float64)
	switch bb := b.(type) {
	case *array.Float32Builder:
		bits, app = 32, func(f float64) { bb.Append(float32(f)) }
	case *array.Float64Builder:
		app = bb.Append
	}
	return compileFloatTo(bits, app, b.AppendNull, fail)
}

// compileFloatTo converts to floats of the given bits, which go to app as
// float64 (exact for 32 bits).
func compileFloatTo(bits int, app func(float64), null func(), fail failFunc) Appender {
	var scratch []byte
	return func(v *fastjson.Value) error {
		if isNull(v) {
			null()
			return nil
		}
		var raw []byte
		switch v.Type() {
		case fastjson.TypeNumber:
			scratch = v.MarshalTo(scratch[:0])
			raw = scratch
		case fastjson.TypeString:
			// Kafka Connect writes non-finite values as strings.
			raw, _ = v.StringBytes()
			switch string(raw) {
			case "NaN":
				app(math.NaN())
				return nil
			case "Infinity":
				app(math.Inf(1))
				return nil
			case "-Infinity":
				app(math.Inf(-1))
				return nil
			}
		default:
			return fail(v, "not a number")
		}
		// ParseFloat with bitSize 32 rounds to the nearest float32, which is
		// exact for any value a float32 source printed.
		if len(raw) == 0 {
			return fail(v, "not a number")
		}
		f, err := strconv.ParseFloat(unsafe.String(&raw[0], len(raw)), bits)
		if err != nil {
			return fail(v, "not a number")
		}
		app(f)
		return nil
	}
}

func compileTime(t Type, b array.Builder, fail failFunc) Appender {
	var app func(int64)
	switch bb := b.(type) {
	case *array.Time32Builder:
		app = func(n int64) { bb.Append(arrow.Time32(n)) }
	case *array.Time64Builder:
		app = func(n int64) { bb.Append(arrow.Time64(n)) }
	}
	return compileTimeTo(t, app, b.AppendNull, fail)
}

// compileTimeTo converts to times of day in t's unit, which go to app.
func compileTimeTo(t Type, app func(int64), null func(), fail failFunc) Appender {
	day := int64(86400) * unitsPerSecond(t.Unit)
	return func(v *fastjson.Value) error {
		if isNull(v) {
			null()
			return nil
		}
		// A declared time also takes an integer count of its unit since
		// midnight (Debezium's Time, MicroTime, NanoTime).
		if t.Enc == EncEpochUnit || t.Enc == EncNative && v.Type() == fastjson.TypeNumber {
			n, err := v.Int64()
			if err != nil || n < 0 || n > day {
				return fail(v, "not a time of day")
			}
			app(n)
			return nil
		}
		s, err := v.StringBytes()
		if err != nil {
			return fail(v, "time must be text")
		}
		n, err := ParseTimeOfDay(s, t.Unit)
		if err != nil {
			return fail(v, err.Error())
		}
		app(n)
		return nil
	}
}

// textValue renders v for a String or DecimalText column.
func textValue(dst []byte, num *[]byte, t Type, v *fastjson.Value) ([]byte, error) {
	if t.Enc == EncBase64Decimal && v.Type() == fastjson.TypeNumber {
		t.Enc = EncNative // decimal.format=NUMERIC, see decimalValue
	}
	if t.Kind == DecimalText {
		switch t.Enc {
		case EncVariableScale:
			return variableScaleText(dst, v)
		case EncBase64Decimal:
			return base64DecimalText(dst, v, t.Scale)
		}
		var raw []byte
		switch v.Type() {
		case fastjson.TypeNumber:
			*num = v.MarshalTo((*num)[:0])
			raw = *num
		case fastjson.TypeString:
			raw, _ = v.StringBytes()
		default:
			return dst, errors.New("not a number")
		}
		return AppendDecimalText(dst, raw)
	}
	if t.Enc == EncDuration {
		n, err := v.Int64()
		if err != nil {
			return dst, errors.New("not an integer duration")
		}
		return AppendDuration(dst, n, t.Unit), nil
	}
	if t.Enc == EncText {
		if v.Type() == fastjson.TypeString {
			s, _ := v.StringBytes()
			if !utf8.Valid(s) {
				return dst, errInvalidUTF8
			}
			return append(dst, s...), nil
		}
		n := len(dst)
		dst = v.MarshalTo(dst)
		if !utf8.Valid(dst[n:]) {
			return dst[:n], errInvalidUTF8
		}
		return dst, nil
	}
	s, err := v.StringBytes()
	if err != nil {
		return dst, errors.New("not a string")
	}
	if !utf8.Valid(s) {
		return dst, errInvalidUTF8
	}
	return append(dst, s...), nil
}

func decimalValue(t Type, v *fastjson.Value, scratch *[]byte) (decimal128.Num, error) {
	if t.Enc == EncBase64Decimal && v.Type() == fastjson.TypeNumber {
		// The JsonConverter with decimal.format=NUMERIC writes a Connect
		// Decimal as the number itself: exact from its text, never through
		// a float.
		t.Enc = EncNative
	}
	if n, ok, err := fastDecimal(t, v, scratch); ok || err != nil {
		return n, err
	}
	var d Dec
	switch t.Enc {
	case EncBase64Decimal:
		n, err := unscaledFromBase64(v)
		if err != nil {
			return decimal128.Num{}, err
		}
		d = Dec{Unscaled: n, Scale: t.Scale}
	case EncVariableScale:
		n, scale, err := variableScale(v)
		if err != nil {
			return decimal128.Num{}, err
		}
		d = Dec{Unscaled: n, Scale: scale}
	default:
		var raw []byte
		switch v.Type() {
		case fastjson.TypeNumber:
			raw = v.MarshalTo(nil)
		case fastjson.TypeString:
			raw, _ = v.StringBytes()
		default:
			return decimal128.Num{}, errors.New("not a number")
		}
		var err error
		if d, err = ParseDecimal(raw); err != nil {
			return decimal128.Num{}, err
		}
	}
	n, err := d.Rescale(t.Scale)
	if err != nil {
		return decimal128.Num{}, err
	}
	if !fitsPrecision(n, t.Precision) {
		return decimal128.Num{}, fmt.Errorf("more than %d digits", t.Precision)
	}
	return decimal128.FromBigInt(n), nil
}

func unscaledFromBase64(v *fastjson.Value) (*big.Int, error) {
	raw, err := decimalBytes(v, nil)
	if err != nil {
		return nil, err
	}
	return twosComplement(raw), nil
}

// decimalBytes decodes the base64 text of a Connect Decimal's unscaled
// value into buf when it fits.
func decimalBytes(v *fastjson.Value, buf []byte) ([]byte, error) {
	if v == nil {
		return nil, errors.New("missing decimal bytes")
	}
	s, err := v.StringBytes()
	if err != nil {
		return nil, errors.New("decimal bytes must be base64 text")
	}
	if n := base64.StdEncoding.DecodedLen(len(s)); n > len(buf) {
		buf = make([]byte, n)
	}
	n, err := base64.StdEncoding.Decode(buf, s)
	if err != nil {
		return nil, errors.New("invalid base64")
	}
	return buf[:n], nil
}

// twosComplement reads a big-endian two's-complement integer.
func twosComplement(b []byte) *big.Int {
	n := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(len(b))*8))
	}
	return n
}

func variableScaleText(dst []byte, v *fastjson.Value) ([]byte, error) {
	o, err := v.Object()
	if err != nil {
		return dst, errors.New("not a variable-scale decimal")
	}
	scale, err := variableScaleOf(o)
	if err != nil {
		return dst, err
	}
	return base64DecimalText(dst, o.Get("value"), scale)
}

// base64DecimalText writes the Connect Decimal v (base64 of its unscaled
// value, big-endian two's complement) at scale in plain notation, as
// appendScaled does; an unscaled value of up to 16 bytes without math/big.
func base64DecimalText(dst []byte, v *fastjson.Value, scale int32) ([]byte, error) {
	var buf [24]byte
	raw, err := decimalBytes(v, buf[:])
	if err != nil {
		return dst, err
	}
	n := len(raw)
	if n > 16 {
		return appendScaled(dst, twosComplement(raw), scale), nil
	}
	// The two's complement in 128 bits, sign-extended.
	var hi, lo uint64
	if n > 0 && raw[0]&0x80 != 0 {
		hi, lo = ^uint64(0), ^uint64(0)
	}
	for _, b := range raw[:n] {
		hi = hi<<8 | lo>>56
		lo = lo<<8 | uint64(b)
	}
	return appendScaled128(dst, hi, lo, scale), nil
}

// appendScaled128 is appendScaled for the 128-bit two's complement hi:lo.
func appendScaled128(dst []byte, hi, lo uint64, scale int32) []byte {
	neg := int64(hi) < 0
	if neg {
		var borrow uint64
		lo, borrow = bits.Sub64(0, lo, 0)
		hi, _ = bits.Sub64(0, hi, borrow)
	}
	// The magnitude's digits, from the lowest: 19 at a time while it
	// does not fit 64 bits.
	var buf [40]byte
	i := len(buf)
	for hi != 0 {
		var r uint64
		q := hi / 1e19
		lo, r = bits.Div64(hi%1e19, lo, 1e19)
		hi = q
		for range 19 {
			i--
			buf[i] = byte('0' + r%10)
			r /= 10
		}
	}
	for {
		i--
		buf[i] = byte('0' + lo%10)
		if lo /= 10; lo == 0 {
			break
		}
	}
	digits := buf[i:]
	if neg {
		dst = append(dst, '-')
	}
	if scale <= 0 {
		dst = append(dst, digits...)
		for range -scale {
			dst = append(dst, '0')
		}
		return dst
	}
	if pad := int(scale) + 1 - len(digits); pad > 0 {
		dst = append(dst, '0', '.')
		for range pad - 1 {
			dst = append(dst, '0')
		}
		return append(dst, digits...)
	}
	cut := len(digits) - int(scale)
	dst = append(dst, digits[:cut]...)
	dst = append(dst, '.')
	return append(dst, digits[cut:]...)
}

// variableScale reads {"scale": s, "value": base64} with |s| ≤ 1000.
func variableScale(v *fastjson.Value) (*big.Int, int32, error) {
	o, err := v.Object()
	if err != nil {
		return nil, 0, errors.New("not a variable-scale decimal")
	}
	scale, err := variableScaleOf(o)
	if err != nil {
		return nil, 0, err
	}
	n, err := unscaledFromBase64(o.Get("value"))
	if err != nil {
		return nil, 0, err
	}
	return n, scale, nil
}

func variableScaleOf(o *fastjson.Object) (int32, error) {
	sv := o.Get("scale")
	if sv == nil {
		return 0, errors.New("variable-scale decimal without a valid scale")
	}
	scale, err := sv.Int()
	if err != nil || scale < -1000 || scale > 1000 {
		return 0, errors.New("variable-scale decimal without a valid scale")
	}
	return int32(scale), nil
}

var bigTen = big.NewInt(10)

func fitsPrecision(n *big.Int, p int32) bool {
	lim := new(big.Int).Exp(bigTen, big.NewInt(int64(p)), nil)
	return new(big.Int).Abs(n).Cmp(lim) < 0
}

func unitsPerSecond(u Unit) int64 {
	switch u {
	case arrow.Second:
		return 1
	case Millis:
		return 1e3
	case Micros:
		return 1e6
	}
	return 1e9
}
