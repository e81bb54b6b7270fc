package avro

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"

	hamba "github.com/hamba/avro/v2"
)

// Connect's names for the Avro logical types it maps, and the converters'
// own names.
const (
	connectDecimal   = "org.apache.kafka.connect.data.Decimal"
	connectDate      = "org.apache.kafka.connect.data.Date"
	connectTime      = "org.apache.kafka.connect.data.Time"
	connectTimestamp = "org.apache.kafka.connect.data.Timestamp"
	connectPrecision = "connect.decimal.precision"
	defaultRecord    = "io.confluent.connect.avro.ConnectDefault"
	unionName        = "io.confluent.connect.avro.Union"
	enumParam        = "io.confluent.connect.avro.Enum"
	mapEntry         = "MapEntry"
)

// maxDepth bounds the nesting of a schema.
const maxDepth = 64

// kind is what a program node reads.
type kind uint8

const (
	kNull kind = iota
	kBool
	kInt
	kLong
	kFloat
	kDouble
	kString
	kBytes
	kFixed
	kEnum
	kArray
	kMap
	kPairs // an array of MapEntry records, a Connect map with non-string keys
	kRecord
	kOptional // a union of null and one type
	kUnion    // any other union, a struct of one field per branch
)

// node is one step of a compiled schema.
type node struct {
	kind kind
	// size of a fixed.
	size int
	// symbols of an enum, as JSON strings.
	symbols [][]byte
	// elem: array items, map values, an optional's type.
	elem *node
	// key and val of a MapEntry.
	key, val *node
	// fields of a record, or of a union's struct.
	fields []field
	// null is the index of an optional's null branch.
	null int64
}

type field struct {
	// name is the JSON key with its quotes and colon.
	name []byte
	n    *node
}

// Compile parses the Avro schema text with the given registry id. Its
// errors wrap ErrUnknownSchema.
func Compile(id int, text string) (*Schema, error) {
	s, err := hamba.ParseWithCache(text, "", &hamba.SchemaCache{})
	if err != nil {
		return nil, fmt.Errorf("schema id %d: %w: %w", id, ErrUnknownSchema, err)
	}
	c := compiler{}
	root, js, err := c.compile(s, 0)
	if err != nil {
		return nil, fmt.Errorf("schema id %d: %w: %w", id, ErrUnknownSchema, err)
	}
	if root.kind == kOptional {
		// A nullable top-level value: its Connect schema is optional.
		js.optional = true
	}
	return &Schema{ID: id, Connect: js.marshal(nil, ""), root: root}, nil
}

// connectSchema is a Connect schema as JsonConverter writes it.
type connectSchema struct {
	typ            string
	fields         []*connectSchema
	fieldNames     []string
	items          *connectSchema
	keys, values   *connectSchema
	optional       bool
	name           string
	version        int
	hasVersion     bool
	doc            string
	params         map[string]string
	paramsInSchema bool
}

// marshal appends the schema's JSON: JsonConverter's key order (type, the
// type's own keys, optional, name, version, doc, parameters, then field
// for a struct's field), parameters sorted by key.
func (s *connectSchema) marshal(b []byte, fieldName string) []byte {
	b = append(b, `{"type":`...)
	b = strconv.AppendQuote(b, s.typ)
	switch s.typ {
	case "struct":
		b = append(b, `,"fields":[`...)
		for i, f := range s.fields {
			if i > 0 {
				b = append(b, ',')
			}
			b = f.marshal(b, s.fieldNames[i])
		}
		b = append(b, ']')
	case "array":
		b = append(b, `,"items":`...)
		b = s.items.marshal(b, "")
	case "map":
		b = append(b, `,"keys":`...)
		b = s.keys.marshal(b, "")
		b = append(b, `,"values":`...)
		b = s.values.marshal(b, "")
	}
	b = append(b, `,"optional":`...)
	b = strconv.AppendBool(b, s.optional)
	if s.name != "" {
		b = append(b, `,"name":`...)
		b = appendJSONString(b, s.name)
	}
	if s.hasVersion {
		b = append(b, `,"version":`...)
		b = strconv.AppendInt(b, int64(s.version), 10)
	}
	if s.doc != "" {
		b = append(b, `,"doc":`...)
		b = appendJSONString(b, s.doc)
	}
	if len(s.params) > 0 {
		b = append(b, `,"parameters":{`...)
		keys := make([]string, 0, len(s.params))
		for k := range s.params {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONString(b, s.params[k])
		}
		b = append(b, '}')
	}
	if fieldName != "" {
		b = append(b, `,"field":`...)
		b = appendJSONString(b, fieldName)
	}
	return append(b, '}')
}

func appendJSONString(b []byte, s string) []byte {
	return appendString(b, []byte(s))
}

type compiler struct {
	// open holds the records being compiled, to refuse recursion.
	open []string
}

func (c *compiler) compile(s hamba.Schema, depth int) (*node, *connectSchema, error) {
	if depth > maxDepth {
		return nil, nil, fmt.Errorf("nested deeper than %d", maxDepth)
	}
	if r, ok := s.(*hamba.RefSchema); ok {
		s = r.Schema()
	}
	switch s.Type() {
	case hamba.Union:
		return c.union(s.(*hamba.UnionSchema), depth)
	case hamba.Record, hamba.Error:
		return c.record(s.(*hamba.RecordSchema), depth)
	case hamba.Array:
		return c.array(s.(*hamba.ArraySchema), depth)
	case hamba.Map:
		m := s.(*hamba.MapSchema)
		vn, vs, err := c.compile(m.Values(), depth+1)
		if err != nil {
			return nil, nil, err
		}
		js := &connectSchema{typ: "map", keys: &connectSchema{typ: "string"}, values: vs}
		annotate(js, m)
		return &node{kind: kMap, elem: vn}, js, nil
	case hamba.Enum:
		e := s.(*hamba.EnumSchema)
		n := &node{kind: kEnum}
		js := &connectSchema{typ: "string", params: map[string]string{enumParam: e.FullName()}}
		for _, sym := range e.Symbols() {
			n.symbols = append(n.symbols, appendJSONString(nil, sym))
			js.params[enumParam+"."+sym] = sym
		}
		annotate(js, e)
		return n, js, nil
	case hamba.Fixed:
		f := s.(*hamba.FixedSchema)
		if f.Size() < 1 {
			// A value that takes no bytes could repeat without end.
			return nil, nil, fmt.Errorf("fixed %s has no bytes", f.FullName())
		}
		js := &connectSchema{typ: "bytes"}
		if d, ok := f.Logical().(*hamba.DecimalLogicalSchema); ok {
			decimal(js, d)
		}
		annotate(js, f)
		return &node{kind: kFixed, size: f.Size()}, js, nil
	case hamba.Null:
		return nil, nil, fmt.Errorf("a null type outside a union has no Connect schema")
	}
	p, ok := s.(*hamba.PrimitiveSchema)
	if !ok {
		return nil, nil, fmt.Errorf("unsupported Avro type %s", s.Type())
	}
	js := &connectSchema{}
	var n *node
	switch p.Type() {
	case hamba.Boolean:
		js.typ, n = "boolean", &node{kind: kBool}
	case hamba.Int:
		js.typ, n = "int32", &node{kind: kInt}
		switch p.Prop("connect.type") {
		case "int8":
			js.typ = "int8"
		case "int16":
			js.typ = "int16"
		}
	case hamba.Long:
		js.typ, n = "int64", &node{kind: kLong}
	case hamba.Float:
		js.typ, n = "float", &node{kind: kFloat}
	case hamba.Double:
		js.typ, n = "double", &node{kind: kDouble}
	case hamba.String:
		js.typ, n = "string", &node{kind: kString}
	case hamba.Bytes:
		js.typ, n = "bytes", &node{kind: kBytes}
	default:
		return nil, nil, fmt.Errorf("unsupported Avro type %s", p.Type())
	}
	if l := p.Logical(); l != nil {
		switch l.Type() {
		case hamba.Decimal:
			if d, ok := l.(*hamba.DecimalLogicalSchema); ok && js.typ == "bytes" {
				decimal(js, d)
			}
		case hamba.Date:
			if js.typ == "int32" {
				js.name, js.version, js.hasVersion = connectDate, 1, true
			}
		case hamba.TimeMillis:
			if js.typ == "int32" {
				js.name, js.version, js.hasVersion = connectTime, 1, true
			}
		case hamba.TimestampMillis:
			if js.typ == "int64" {
				js.name, js.version, js.hasVersion = connectTimestamp, 1, true
			}
		}
	}
	annotate(js, p)
	return n, js, nil
}

// decimal makes js Connect's Decimal of d's scale and precision.
func decimal(js *connectSchema, d *hamba.DecimalLogicalSchema) {
	js.name, js.version, js.hasVersion = connectDecimal, 1, true
	js.params = map[string]string{
		"scale":          strconv.Itoa(d.Scale()),
		connectPrecision: strconv.Itoa(d.Precision()),
	}
}

// annotate applies the Connect properties the converters write.
func annotate(js *connectSchema, p hamba.PropertySchema) {
	if v, ok := p.Prop("connect.name").(string); ok && v != "" {
		js.name = v
	}
	if v, ok := number(p.Prop("connect.version")); ok {
		js.version, js.hasVersion = v, true
	}
	if v, ok := p.Prop("connect.doc").(string); ok {
		js.doc = v
	}
	if m, ok := p.Prop("connect.parameters").(map[string]any); ok {
		js.params = make(map[string]string, len(m))
		for k, v := range m {
			switch v := v.(type) {
			case string:
				js.params[k] = v
			default:
				// Parameters are strings; anything else is kept as
				// its JSON text.
				b, _ := json.Marshal(v)
				js.params[k] = string(b)
			}
		}
	}
}

func number(v any) (int, bool) {
	switch v := v.(type) {
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<31 {
			return int(v), true
		}
	case int:
		return v, true
	case int64:
		return int(v), true
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return int(i), true
		}
	}
	return 0, false
}

func (c *compiler) record(r *hamba.RecordSchema, depth int) (*node, *connectSchema, error) {
	full := r.FullName()
	if slices.Contains(c.open, full) {
		return nil, nil, fmt.Errorf("record %s is recursive, which Connect schemas cannot express", full)
	}
	c.open = append(c.open, full)
	defer func() { c.open = c.open[:len(c.open)-1] }()
	if len(r.Fields()) == 0 {
		return nil, nil, fmt.Errorf("record %s has no fields", full)
	}
	n := &node{kind: kRecord}
	js := &connectSchema{typ: "struct"}
	if full != defaultRecord {
		js.name = full
	}
	for _, f := range r.Fields() {
		fn, fs, err := c.compile(f.Type(), depth+1)
		if err != nil {
			return nil, nil, fmt.Errorf("%s.%s: %w", full, f.Name(), err)
		}
		n.fields = append(n.fields, field{name: append(appendJSONString(nil, f.Name()), ':'), n: fn})
		js.fields = append(js.fields, fs)
		js.fieldNames = append(js.fieldNames, f.Name())
	}
	annotate(js, r)
	return n, js, nil
}

func (c *compiler) array(a *hamba.ArraySchema, depth int) (*node, *connectSchema, error) {
	items := a.Items()
	if r, ok := items.(*hamba.RefSchema); ok {
		items = r.Schema()
	}
	if r, ok := items.(*hamba.RecordSchema); ok && isMapEntry(r) {
		kn, ks, err := c.compile(r.Fields()[0].Type(), depth+1)
		if err != nil {
			return nil, nil, err
		}
		vn, vs, err := c.compile(r.Fields()[1].Type(), depth+1)
		if err != nil {
			return nil, nil, err
		}
		js := &connectSchema{typ: "map", keys: ks, values: vs}
		annotate(js, a)
		return &node{kind: kPairs, key: kn, val: vn}, js, nil
	}
	in, is, err := c.compile(items, depth+1)
	if err != nil {
		return nil, nil, err
	}
	js := &connectSchema{typ: "array", items: is}
	annotate(js, a)
	return &node{kind: kArray, elem: in}, js, nil
}

// isMapEntry reports whether r is the converters' MapEntry record, which
// stands for a map whose keys are not strings.
func isMapEntry(r *hamba.RecordSchema) bool {
	fs := r.Fields()
	if len(fs) != 2 || fs[0].Name() != "key" || fs[1].Name() != "value" {
		return false
	}
	return r.Prop("connect.internal.type") == mapEntry || r.Name() == mapEntry
}

func (c *compiler) union(u *hamba.UnionSchema, depth int) (*node, *connectSchema, error) {
	types := u.Types()
	null := -1
	for i, t := range types {
		if t.Type() == hamba.Null {
			null = i
		}
	}
	if null >= 0 && len(types) == 2 {
		en, es, err := c.compile(types[1-null], depth+1)
		if err != nil {
			return nil, nil, err
		}
		es.optional = true
		return &node{kind: kOptional, elem: en, null: int64(null)}, es, nil
	}
	// A general union: a struct with an optional field per branch, named
	// after the branch (a named type's name, else the type).
	n := &node{kind: kUnion, null: -1}
	js := &connectSchema{typ: "struct", name: unionName}
	for i, t := range types {
		if t.Type() == hamba.Null {
			n.null = int64(i)
			n.fields = append(n.fields, field{})
			continue
		}
		name := string(t.Type())
		if r, ok := t.(*hamba.RefSchema); ok {
			t = r.Schema()
		}
		if nt, ok := t.(hamba.NamedSchema); ok {
			name = nt.Name()
		}
		fn, fs, err := c.compile(t, depth+1)
		if err != nil {
			return nil, nil, err
		}
		fs.optional = true
		n.fields = append(n.fields, field{name: append(appendJSONString(nil, name), ':'), n: fn})
		js.fields = append(js.fields, fs)
		js.fieldNames = append(js.fieldNames, name)
	}
	if len(js.fields) == 0 {
		return nil, nil, fmt.Errorf("a union of null only has no Connect schema")
	}
	if null >= 0 {
		js.optional = true
	}
	return n, js, nil
}
