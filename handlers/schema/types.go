// Package schema resolves the columns of each source table version and maps
// them to Apache Arrow types, and converts JSON values into Arrow builders
// without loss.
//
// # Types
//
// A Type says both what a column lands as (its Arrow and Parquet type) and how
// the source encodes its values in JSON (Enc): a Kafka Connect Decimal arrives
// as base64 bytes, a GoldenGate number as a JSON number, a Debezium Date as
// days since the epoch, a GoldenGate date override as text.
package schema

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/extensions"
)

// Kind is the landed type of a column.
type Kind uint8

// Column kinds.
const (
	// Null is a column that has only ever been NULL: its type is not yet known.
	Null Kind = iota
	Bool
	Int8
	Int16
	Int32
	Int64
	Float32
	Float64
	String
	Binary
	// Decimal is DECIMAL(Precision, Scale), Precision ≤ 38.
	Decimal
	// DecimalText is an exact decimal kept as its canonical text: numbers
	// wider than 38 digits, variable-scale decimals, GoldenGate numbers
	// without a declared precision.
	DecimalText
	Date
	Time
	Timestamp
	// JSON is text annotated as JSON.
	JSON
	Struct
	List
	Map
)

var kindNames = [...]string{"null", "boolean", "int8", "int16", "int32", "int64", "float", "double",
	"string", "binary", "decimal", "decimal_text", "date", "time", "timestamp", "json", "struct", "list", "map"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "invalid"
}

// Enc is how a source encodes a column's values in JSON.
type Enc uint8

// Value encodings.
const (
	// EncNative: the natural JSON form (numbers, strings, booleans; text for
	// dates and times in ISO 8601; base64 for binary).
	EncNative Enc = iota
	// EncBase64Decimal: base64 of the big-endian two's-complement unscaled
	// value (Kafka Connect Decimal).
	EncBase64Decimal
	// EncVariableScale: {"scale": s, "value": base64} (Debezium VariableScaleDecimal).
	EncVariableScale
	// EncEpochDays: integer days since 1970-01-01.
	EncEpochDays
	// EncEpochUnit: integer count of Unit since the epoch (timestamps) or
	// since midnight (times).
	EncEpochUnit
	// EncText: any JSON value landed as its JSON text (inferred mixed types).
	EncText
	// EncHex: binary as hexadecimal text.
	EncHex
	// EncZoned: ISO 8601 text with an offset, converted to UTC.
	EncZoned
	// EncDuration: an integer count of Unit (a signed duration, MySQL and
	// MariaDB TIME) landed as text [-]HH:MM:SS.fraction (the text sibling of
	// a time column; see TimeOverflow).
	EncDuration
)

// Unit is a time unit.
type Unit = arrow.TimeUnit

// Time units.
const (
	Millis = arrow.Millisecond
	Micros = arrow.Microsecond
	Nanos  = arrow.Nanosecond
)

// Type describes a column's landed type and source encoding.
type Type struct {
	Kind      Kind
	Enc       Enc
	Precision int32    // Decimal
	Scale     int32    // Decimal
	Unit      Unit     // Time, Timestamp, and the source unit of EncEpochUnit
	UTC       bool     // Timestamp: instant (true) or local date-time (false)
	Fields    []Column // Struct
	Elem      *Type    // List
	Key       *Type    // Map
	Value     *Type    // Map
	// Logical is the source's logical type name, kept for documentation
	// (io.debezium.time.MicroTimestamp, ...).
	Logical string
}

// Column is one column of a table version.
type Column struct {
	Name     string
	Type     Type
	Nullable bool
	Key      bool
}

// String renders t compactly.
func (t Type) String() string {
	var b strings.Builder
	t.write(&b, false)
	return b.String()
}

// key renders t for fingerprints: String plus what it leaves out but the
// converter depends on (the scale of a DecimalText from base64 bytes).
func (t Type) key() string {
	var b strings.Builder
	t.write(&b, true)
	return b.String()
}

func (t Type) write(b *strings.Builder, key bool) {
	b.WriteString(t.Kind.String())
	switch t.Kind {
	case Decimal:
		fmt.Fprintf(b, "(%d,%d)", t.Precision, t.Scale)
	case DecimalText:
		if key && t.Scale != 0 {
			fmt.Fprintf(b, "(%d)", t.Scale)
		}
	case Time, Timestamp:
		b.WriteString("(" + t.Unit.String())
		if t.UTC {
			b.WriteString(",utc")
		}
		b.WriteByte(')')
	case Struct:
		b.WriteByte('<')
		for i, f := range t.Fields {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Quote(f.Name))
			b.WriteByte(':')
			f.Type.write(b, key)
			if !f.Nullable {
				b.WriteString(" not null")
			}
		}
		b.WriteByte('>')
	case List:
		b.WriteByte('<')
		t.Elem.write(b, key)
		b.WriteByte('>')
	case Map:
		b.WriteByte('<')
		t.Key.write(b, key)
		b.WriteByte(',')
		t.Value.write(b, key)
		b.WriteByte('>')
	}
	if t.Enc != EncNative {
		fmt.Fprintf(b, "/e%d", t.Enc)
	}
}

// Arrow returns the Arrow type a column of t lands as.
func (t Type) Arrow() arrow.DataType {
	switch t.Kind {
	case Null:
		return arrow.Null
	case Bool:
		return arrow.FixedWidthTypes.Boolean
	case Int8:
		return arrow.PrimitiveTypes.Int8
	case Int16:
		return arrow.PrimitiveTypes.Int16
	case Int32:
		return arrow.PrimitiveTypes.Int32
	case Int64:
		return arrow.PrimitiveTypes.Int64
	case Float32:
		return arrow.PrimitiveTypes.Float32
	case Float64:
		return arrow.PrimitiveTypes.Float64
	case String, DecimalText:
		return arrow.BinaryTypes.String
	case Binary:
		return arrow.BinaryTypes.Binary
	case Decimal:
		return &arrow.Decimal128Type{Precision: t.Precision, Scale: t.Scale}
	case Date:
		return arrow.FixedWidthTypes.Date32
	case Time:
		if t.Unit == Millis {
			return arrow.FixedWidthTypes.Time32ms
		}
		return &arrow.Time64Type{Unit: t.Unit}
	case Timestamp:
		tz := ""
		if t.UTC {
			tz = "UTC"
		}
		return &arrow.TimestampType{Unit: t.Unit, TimeZone: tz}
	case JSON:
		return jsonType
	case Struct:
		return arrow.StructOf(Fields(t.Fields)...)
	case List:
		return arrow.ListOfField(arrow.Field{Name: "element", Type: t.Elem.Arrow(), Nullable: true})
	case Map:
		return arrow.MapOf(t.Key.Arrow(), t.Value.Arrow())
	}
	panic(fmt.Sprintf("schema: no Arrow type for kind %d", t.Kind))
}

var jsonType = func() arrow.DataType {
	t, err := extensions.NewJSONType(arrow.BinaryTypes.String)
	if err != nil {
		panic(err)
	}
	return t
}()

// PlainJSON returns sch with its JSON columns, nested ones too, as plain
// strings: the Parquet files of a table committed to Iceberg, which has no
// JSON type, carry no JSON annotation (pyarrow reads one as an extension
// type Iceberg readers refuse). The schema's metadata is kept.
func PlainJSON(sch *arrow.Schema) *arrow.Schema {
	fields := make([]arrow.Field, sch.NumFields())
	for i, f := range sch.Fields() {
		f.Type = plainJSON(f.Type)
		fields[i] = f
	}
	md := sch.Metadata()
	return arrow.NewSchema(fields, &md)
}

func plainJSON(t arrow.DataType) arrow.DataType {
	switch x := t.(type) {
	case *extensions.JSONType:
		return x.StorageType()
	case *arrow.StructType:
		fs := make([]arrow.Field, x.NumFields())
		for i, f := range x.Fields() {
			f.Type = plainJSON(f.Type)
			fs[i] = f
		}
		return arrow.StructOf(fs...)
	case *arrow.ListType:
		f := x.ElemField()
		f.Type = plainJSON(f.Type)
		return arrow.ListOfField(f)
	case *arrow.MapType:
		m := arrow.MapOfWithMetadata(plainJSON(x.KeyType()), x.KeyField().Metadata, plainJSON(x.ItemType()), x.ItemField().Metadata)
		m.KeysSorted = x.KeysSorted
		return m
	}
	return t
}

// Fields returns the Arrow fields of columns. Every field is nullable: a
// column absent from a partial image lands as NULL (and is listed in the
// image's absent-columns list).
func Fields(cols []Column) []arrow.Field {
	out := make([]arrow.Field, len(cols))
	for i, c := range cols {
		out[i] = arrow.Field{Name: c.Name, Type: c.Type.Arrow(), Nullable: true}
	}
	return out
}

// ParseType parses a type as written in route configuration overrides:
// string, boolean, int8..int64 (also smallint, int, integer, bigint), float,
// double, binary, json, date, time, time(ms|us|ns), timestamp,
// timestamp(ms|us|ns), timestamptz, timestamptz(ms|us|ns), decimal(p,s),
// decimal_text. Text values are parsed as ISO 8601 for dates and times.
func ParseType(s string) (Type, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	name, args, hasArgs := strings.Cut(s, "(")
	if hasArgs {
		if !strings.HasSuffix(args, ")") {
			return Type{}, fmt.Errorf("type %q: missing )", s)
		}
		args = strings.TrimSuffix(args, ")")
	}
	unit := func(def Unit) (Unit, error) {
		if !hasArgs {
			return def, nil
		}
		switch args {
		case "ms":
			return Millis, nil
		case "us":
			return Micros, nil
		case "ns":
			return Nanos, nil
		}
		return 0, fmt.Errorf("type %q: unit must be ms, us or ns", s)
	}
	simple := map[string]Kind{"string": String, "text": String, "varchar": String, "boolean": Bool, "bool": Bool,
		"int8": Int8, "tinyint": Int8, "int16": Int16, "smallint": Int16, "int32": Int32, "int": Int32, "integer": Int32,
		"int64": Int64, "bigint": Int64, "float": Float32, "float32": Float32, "real": Float32, "double": Float64,
		"float64": Float64, "binary": Binary, "bytes": Binary, "json": JSON, "date": Date, "decimal_text": DecimalText}
	if k, ok := simple[name]; ok && !hasArgs {
		return Type{Kind: k}, nil
	}
	switch name {
	case "time":
		u, err := unit(Micros)
		return Type{Kind: Time, Unit: u}, err
	case "timestamp", "timestamptz":
		u, err := unit(Micros)
		if err == nil && u == Nanos {
			// Spark cannot read Parquet TIMESTAMP(NANOS); nanosecond
			// values land as int64 (see the type table of docs/types.md).
			return Type{}, fmt.Errorf("type %q: nanosecond timestamps land as int64 nanoseconds; declare int64", s)
		}
		return Type{Kind: Timestamp, Unit: u, UTC: name == "timestamptz"}, err
	case "decimal", "numeric":
		if !hasArgs {
			return Type{}, fmt.Errorf("type %q: decimal needs (precision,scale)", s)
		}
		ps, ss, _ := strings.Cut(args, ",")
		p, err1 := strconv.Atoi(strings.TrimSpace(ps))
		sc, err2 := strconv.Atoi(strings.TrimSpace(ss))
		if err1 != nil || err2 != nil || p < 1 || p > 38 || sc < 0 || sc > p {
			return Type{}, fmt.Errorf("type %q: need 1 ≤ precision ≤ 38 and 0 ≤ scale ≤ precision", s)
		}
		return Type{Kind: Decimal, Precision: int32(p), Scale: int32(sc)}, nil
	}
	return Type{}, fmt.Errorf("unknown type %q", s)
}
