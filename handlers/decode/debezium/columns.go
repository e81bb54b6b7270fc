package debezium

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/valyala/fastjson"
)

// Kafka Connect and Debezium logical type names (the schema "name").
const (
	connectDecimal   = "org.apache.kafka.connect.data.Decimal"
	connectDate      = "org.apache.kafka.connect.data.Date"
	connectTime      = "org.apache.kafka.connect.data.Time"
	connectTimestamp = "org.apache.kafka.connect.data.Timestamp"

	dbzVariableScale  = "io.debezium.data.VariableScaleDecimal"
	dbzDate           = "io.debezium.time.Date"
	dbzTime           = "io.debezium.time.Time"
	dbzMicroTime      = "io.debezium.time.MicroTime"
	dbzNanoTime       = "io.debezium.time.NanoTime"
	dbzTimestamp      = "io.debezium.time.Timestamp"
	dbzMicroTimestamp = "io.debezium.time.MicroTimestamp"
	dbzNanoTimestamp  = "io.debezium.time.NanoTimestamp"
	dbzZonedTimestamp = "io.debezium.time.ZonedTimestamp"
	dbzZonedTime      = "io.debezium.time.ZonedTime"
	dbzMicroDuration  = "io.debezium.time.MicroDuration"
	dbzInterval       = "io.debezium.time.Interval"
	dbzJSON           = "io.debezium.data.Json"
	dbzUUID           = "io.debezium.data.Uuid"
	dbzEnum           = "io.debezium.data.Enum"
	dbzEnumSet        = "io.debezium.data.EnumSet"
	dbzXML            = "io.debezium.data.Xml"
	dbzBits           = "io.debezium.data.Bits"

	paramScale           = "scale"
	paramPrecision       = "connect.decimal.precision"
	paramSourceScale     = "__debezium.source.column.scale"
	maxDecimalPrecision  = 38
	maxSchemaNestingDeep = 64
)

// ErrSchema is wrapped by Columns' errors.
var ErrSchema = errors.New("debezium: unusable Kafka Connect schema")

func schemaErr(path, format string, args ...any) error {
	if path == "" {
		return fmt.Errorf("%w: %s", ErrSchema, fmt.Sprintf(format, args...))
	}
	return fmt.Errorf("%w: field %s: %s", ErrSchema, path, fmt.Sprintf(format, args...))
}

// Columns maps the Kafka Connect schema of a row (a struct schema, as
// Decode leaves in Change.Schema) to columns, in field order, without loss:
//
//   - int8, int16, int32, int64, float32, float64, boolean, string: the
//     same kinds; bytes: Binary (base64 in JSON); struct: Struct; array:
//     List; map: Map.
//   - org.apache.kafka.connect.data.Decimal (bytes, base64 of the unscaled
//     big-endian two's complement): Decimal(p, s) with EncBase64Decimal
//     when the connect.decimal.precision parameter gives 1 ≤ p ≤ 38 and
//     0 ≤ s ≤ p; otherwise (no precision, p > 38, negative scale or scale
//     > p) DecimalText with EncBase64Decimal and the scale. The scale
//     parameter is required.
//   - io.debezium.data.VariableScaleDecimal (struct of scale and value):
//     DecimalText with EncVariableScale.
//   - io.debezium.time.Date and Connect Date (int32 days): Date,
//     EncEpochDays.
//   - Connect Time and io.debezium.time.Time (int32 ms), MicroTime,
//     NanoTime (int64): Time in ms, µs, ns, EncEpochUnit.
//   - Connect Timestamp and io.debezium.time.Timestamp (int64 ms),
//     MicroTimestamp: Timestamp in ms, µs, local (UTC false), EncEpochUnit.
//   - io.debezium.time.NanoTimestamp: Int64, nanoseconds since the epoch
//     (Spark cannot read Parquet TIMESTAMP(NANOS)).
//   - io.debezium.time.ZonedTimestamp (ISO 8601 text with offset):
//     Timestamp(µs, UTC) with EncZoned, the instant kept whatever the
//     offset. When the source column's scale is known to exceed 6
//     (parameter __debezium.source.column.scale, sent with
//     column.propagate.source.type), String instead, as microseconds would
//     lose digits.
//   - io.debezium.time.ZonedTime, Interval, io.debezium.data.Uuid, Enum,
//     EnumSet, Xml: String. io.debezium.data.Json: JSON.
//     io.debezium.data.Bits: Binary (the bytes as sent, little-endian).
//     io.debezium.time.MicroDuration: Int64.
//   - any other name, or a known name on an unexpected base type: the base
//     type.
//
// Every column and nested field of a named schema has Logical set to the
// name. Nullable comes from optional (absent means required). Key is left
// false: a value schema does not say which columns form the key.
//
// Errors (wrapping ErrSchema) are returned for a schema that is not a
// struct, fields without a name or given twice, unknown types, structs
// without fields, arrays without items, maps without keys or values,
// nesting deeper than 64, and Decimals without a valid scale.
func Columns(rowSchema *fastjson.Value) ([]schema.Column, error) {
	if rowSchema == nil || rowSchema.Type() != fastjson.TypeObject {
		return nil, schemaErr("", "row schema is not a JSON object")
	}
	if t, _ := stringBytes(rowSchema.Get("type")); string(t) != "struct" {
		return nil, schemaErr("", "row schema is of type %q, not struct", t)
	}
	return structFields(rowSchema, "", 1)
}

func structFields(s *fastjson.Value, path string, depth int) ([]schema.Column, error) {
	fv := s.Get("fields")
	if fv == nil || fv.Type() != fastjson.TypeArray {
		return nil, schemaErr(path, "struct has no fields array")
	}
	arr, _ := fv.Array()
	if len(arr) == 0 {
		return nil, schemaErr(path, "struct has no fields")
	}
	cols := make([]schema.Column, 0, len(arr))
	seen := make(map[string]struct{}, len(arr))
	for i, f := range arr {
		if f.Type() != fastjson.TypeObject {
			return nil, schemaErr(path, "fields[%d] is not an object", i)
		}
		nb, ok := stringBytes(f.Get("field"))
		if !ok || len(nb) == 0 {
			return nil, schemaErr(path, "fields[%d] has no field name", i)
		}
		name := string(nb)
		if _, dup := seen[name]; dup {
			return nil, schemaErr(path, "field %q given twice", name)
		}
		seen[name] = struct{}{}
		p := name
		if path != "" {
			p = path + "." + name
		}
		t, err := typeOf(f, p, depth)
		if err != nil {
			return nil, err
		}
		cols = append(cols, schema.Column{Name: name, Type: t, Nullable: optional(f)})
	}
	return cols, nil
}

func optional(s *fastjson.Value) bool {
	v := s.Get("optional")
	return v != nil && v.Type() == fastjson.TypeTrue
}

// typeOf maps one Connect schema.
func typeOf(s *fastjson.Value, path string, depth int) (schema.Type, error) {
	if depth > maxSchemaNestingDeep {
		return schema.Type{}, schemaErr(path, "nested deeper than %d", maxSchemaNestingDeep)
	}
	if s == nil || s.Type() != fastjson.TypeObject {
		return schema.Type{}, schemaErr(path, "schema is not a JSON object")
	}
	tb, ok := stringBytes(s.Get("type"))
	if !ok {
		return schema.Type{}, schemaErr(path, "schema has no type")
	}
	base := string(tb)
	name := ""
	if nb, ok := stringBytes(s.Get("name")); ok {
		name = string(nb)
	}
	t, handled, err := logicalType(s, base, name, path)
	if err != nil {
		return schema.Type{}, err
	}
	if !handled {
		if t, err = baseType(s, base, path, depth); err != nil {
			return schema.Type{}, err
		}
	}
	t.Logical = name
	return t, nil
}

func baseType(s *fastjson.Value, base, path string, depth int) (schema.Type, error) {
	switch base {
	case "int8":
		return schema.Type{Kind: schema.Int8}, nil
	case "int16":
		return schema.Type{Kind: schema.Int16}, nil
	case "int32":
		return schema.Type{Kind: schema.Int32}, nil
	case "int64":
		return schema.Type{Kind: schema.Int64}, nil
	case "float", "float32":
		// Kafka Connect's JsonConverter writes FLOAT32 as "float" and
		// FLOAT64 as "double"; the Schema.Type names are accepted too.
		return schema.Type{Kind: schema.Float32}, nil
	case "double", "float64":
		return schema.Type{Kind: schema.Float64}, nil
	case "boolean":
		return schema.Type{Kind: schema.Bool}, nil
	case "string":
		return schema.Type{Kind: schema.String}, nil
	case "bytes":
		return schema.Type{Kind: schema.Binary}, nil
	case "struct":
		fields, err := structFields(s, path, depth+1)
		if err != nil {
			return schema.Type{}, err
		}
		return schema.Type{Kind: schema.Struct, Fields: fields}, nil
	case "array":
		items := s.Get("items")
		if items == nil {
			return schema.Type{}, schemaErr(path, "array has no items schema")
		}
		elem, err := typeOf(items, path+"[]", depth+1)
		if err != nil {
			return schema.Type{}, err
		}
		return schema.Type{Kind: schema.List, Elem: &elem}, nil
	case "map":
		ks, vs := s.Get("keys"), s.Get("values")
		if ks == nil || vs == nil {
			return schema.Type{}, schemaErr(path, "map needs keys and values schemas")
		}
		k, err := typeOf(ks, path+".key", depth+1)
		if err != nil {
			return schema.Type{}, err
		}
		v, err := typeOf(vs, path+".value", depth+1)
		if err != nil {
			return schema.Type{}, err
		}
		return schema.Type{Kind: schema.Map, Key: &k, Value: &v}, nil
	}
	return schema.Type{}, schemaErr(path, "unknown type %q", base)
}

// logicalType maps a named schema. handled is false for names it does not
// know and for known names on another base type than theirs.
func logicalType(s *fastjson.Value, base, name, path string) (t schema.Type, handled bool, err error) {
	want := func(b string) bool { return base == b }
	switch name {
	case "":
		return t, false, nil
	case connectDecimal:
		if !want("bytes") {
			return t, false, nil
		}
		t, err = decimalType(s, path)
		return t, err == nil, err
	case dbzVariableScale:
		if !want("struct") {
			return t, false, nil
		}
		return schema.Type{Kind: schema.DecimalText, Enc: schema.EncVariableScale}, true, nil
	case dbzDate, connectDate:
		if !want("int32") {
			return t, false, nil
		}
		return schema.Type{Kind: schema.Date, Enc: schema.EncEpochDays}, true, nil
	case connectTime, dbzTime:
		if !want("int32") {
			return t, false, nil
		}
		return epoch(schema.Time, schema.Millis), true, nil
	case dbzMicroTime:
		if !want("int64") {
			return t, false, nil
		}
		return epoch(schema.Time, schema.Micros), true, nil
	case dbzNanoTime:
		if !want("int64") {
			return t, false, nil
		}
		return epoch(schema.Time, schema.Nanos), true, nil
	case connectTimestamp, dbzTimestamp:
		if !want("int64") {
			return t, false, nil
		}
		return epoch(schema.Timestamp, schema.Millis), true, nil
	case dbzMicroTimestamp:
		if !want("int64") {
			return t, false, nil
		}
		return epoch(schema.Timestamp, schema.Micros), true, nil
	case dbzNanoTimestamp, dbzMicroDuration:
		if !want("int64") {
			return t, false, nil
		}
		return schema.Type{Kind: schema.Int64}, true, nil
	case dbzZonedTimestamp:
		if !want("string") {
			return t, false, nil
		}
		if sc, ok := intParam(s, paramSourceScale); ok && sc > 6 {
			return schema.Type{Kind: schema.String}, true, nil
		}
		return schema.Type{Kind: schema.Timestamp, Enc: schema.EncZoned, Unit: schema.Micros, UTC: true}, true, nil
	case dbzZonedTime, dbzInterval, dbzUUID, dbzEnum, dbzEnumSet, dbzXML:
		if !want("string") {
			return t, false, nil
		}
		return schema.Type{Kind: schema.String}, true, nil
	case dbzJSON:
		if !want("string") {
			return t, false, nil
		}
		return schema.Type{Kind: schema.JSON}, true, nil
	case dbzBits:
		if !want("bytes") {
			return t, false, nil
		}
		return schema.Type{Kind: schema.Binary}, true, nil
	}
	return t, false, nil
}

func epoch(k schema.Kind, u schema.Unit) schema.Type {
	return schema.Type{Kind: k, Enc: schema.EncEpochUnit, Unit: u}
}

func decimalType(s *fastjson.Value, path string) (schema.Type, error) {
	scale, ok := intParam(s, paramScale)
	if !ok {
		return schema.Type{}, schemaErr(path, "Decimal without an integer scale parameter")
	}
	if scale < -1000 || scale > 1000 {
		return schema.Type{}, schemaErr(path, "Decimal scale %d out of range", scale)
	}
	text := schema.Type{Kind: schema.DecimalText, Enc: schema.EncBase64Decimal, Scale: int32(scale)}
	p, ok := intParam(s, paramPrecision)
	if !ok {
		if params(s).Get(paramPrecision) != nil {
			return schema.Type{}, schemaErr(path, "Decimal precision parameter is not an integer")
		}
		return text, nil
	}
	if p < 1 {
		return schema.Type{}, schemaErr(path, "Decimal precision %d is not positive", p)
	}
	if p > maxDecimalPrecision || scale < 0 || scale > p {
		return text, nil
	}
	return schema.Type{Kind: schema.Decimal, Enc: schema.EncBase64Decimal, Precision: int32(p), Scale: int32(scale)}, nil
}

func params(s *fastjson.Value) *fastjson.Value {
	p := s.Get("parameters")
	if p == nil || p.Type() != fastjson.TypeObject {
		return nil
	}
	return p
}

// intParam reads an integer schema parameter; Connect writes parameters as
// strings, numbers are accepted too.
func intParam(s *fastjson.Value, key string) (int64, bool) {
	p := params(s)
	if p == nil {
		return 0, false
	}
	v := p.Get(key)
	if v == nil {
		return 0, false
	}
	var n int64
	var err error
	switch v.Type() {
	case fastjson.TypeString:
		b, _ := v.StringBytes()
		n, err = strconv.ParseInt(string(b), 10, 64)
	case fastjson.TypeNumber:
		n, err = integer(v)
	default:
		return 0, false
	}
	return n, err == nil
}
