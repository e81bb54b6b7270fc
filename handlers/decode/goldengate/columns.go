package goldengate

import (
	"fmt"
	"math"
	"strings"

	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/valyala/fastjson"
)

// ObjectColumns returns the columns of a table, in the order of the columns
// object of its OBJECT_METADATA record meta, refined by the table's JSON
// Schema record jsonSchema when one is given (it may be nil).
//
// From meta, each column's attributes:
//
//   - type: string → schema.String; boolean → schema.Bool; number or
//     integer → numbers (the route's type for GoldenGate numbers, normally
//     DecimalText so that 19-digit integers and 18043674494432.4369 stay
//     exact; the zero Type means DecimalText). Any other type is an error
//     naming the column.
//   - null: Nullable. When absent, the JSON Schema decides ("null" among the
//     column's types), and without one the column is nullable.
//   - key: Key; absent means false.
//
// The JSON Schema refines a type, never contradicts it: the metadata record
// is the definition the DML was encoded with, so a column whose schema type
// disagrees with it keeps the metadata type. The column definitions are
// looked up in the schema of the after image (properties.after, following
// $ref into definitions and anyOf/oneOf branches), else of the before
// image, else in the top-level properties (row model). Refinements:
//
//   - a string with format date-time → Timestamp(µs), a local date-time
//     (UTC false): GoldenGate writes Oracle DATE and TIMESTAMP values without
//     a zone, and landing them as instants would invent one. Values with an
//     offset, or finer than a microsecond, then fail conversion; override
//     such a column's type in the route (timestamptz, timestamp(ns)).
//   - a string with format date → Date.
//   - a number whose schema types include integer but not number → Int64,
//     unless the schema's minimum or maximum lies outside the int64 range.
//
// Other keywords (maxLength, pattern, ...) do not change the landed type.
func ObjectColumns(meta *fastjson.Value, jsonSchema *fastjson.Value, numbers schema.Type) ([]schema.Column, error) {
	if meta == nil {
		return nil, fmt.Errorf("goldengate: no %s record", opObjectMetadata)
	}
	colsV := meta.Get("columns")
	if colsV == nil || colsV.Type() != fastjson.TypeObject {
		return nil, fmt.Errorf("goldengate: %s record: columns is not an object", opObjectMetadata)
	}
	cols, _ := colsV.Object()
	if cols.Len() == 0 {
		return nil, fmt.Errorf("goldengate: %s record: no columns", opObjectMetadata)
	}
	if numbers.Kind == schema.Null {
		numbers = schema.Type{Kind: schema.DecimalText}
	}
	defs := columnDefs(jsonSchema)

	out := make([]schema.Column, 0, cols.Len())
	seen := make(map[string]bool, cols.Len())
	var err error
	cols.Visit(func(k []byte, attrs *fastjson.Value) {
		if err != nil {
			return
		}
		name := string(k)
		if seen[name] {
			err = fmt.Errorf("goldengate: column %q: listed twice", name)
			return
		}
		seen[name] = true
		var col schema.Column
		col, err = objectColumn(name, attrs, defs, numbers)
		out = append(out, col)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func objectColumn(name string, attrs *fastjson.Value, defs *fastjson.Object, numbers schema.Type) (schema.Column, error) {
	col := schema.Column{Name: name}
	if attrs.Type() != fastjson.TypeObject {
		return col, fmt.Errorf("goldengate: column %q: attributes are a JSON %s, want an object", name, attrs.Type())
	}
	typ := attrs.Get("type")
	if typ == nil || typ.Type() != fastjson.TypeString {
		return col, fmt.Errorf("goldengate: column %q: type is missing or not a string", name)
	}
	var def colDef
	if defs != nil {
		def = describe(defs.Get(name))
	}
	switch t, _ := typ.StringBytes(); string(t) {
	case "string":
		col.Type = schema.Type{Kind: schema.String}
		switch def.format {
		case "date-time":
			col.Type = schema.Type{Kind: schema.Timestamp, Unit: schema.Micros}
		case "date":
			col.Type = schema.Type{Kind: schema.Date}
		}
	case "boolean":
		col.Type = schema.Type{Kind: schema.Bool}
	case "number", "integer":
		col.Type = numbers
		if def.types["integer"] && !def.types["number"] && def.fitsInt64 {
			col.Type = schema.Type{Kind: schema.Int64}
		}
	default:
		return col, fmt.Errorf("goldengate: column %q: unknown type %q", name, clip(t))
	}
	var err error
	if col.Nullable, err = boolAttr(attrs, "null", name); err != nil {
		return col, err
	}
	if attrs.Get("null") == nil {
		col.Nullable = !def.found || def.types["null"]
	}
	if col.Key, err = boolAttr(attrs, "key", name); err != nil {
		return col, err
	}
	return col, nil
}

// boolAttr returns the boolean attribute key of a column (false when absent).
func boolAttr(attrs *fastjson.Value, key, col string) (bool, error) {
	v := attrs.Get(key)
	if v == nil {
		return false, nil
	}
	switch v.Type() {
	case fastjson.TypeTrue:
		return true, nil
	case fastjson.TypeFalse:
		return false, nil
	}
	return false, fmt.Errorf("goldengate: column %q: %s is a JSON %s, want a boolean", col, key, v.Type())
}

// colDef is what a column's JSON Schema says about it.
type colDef struct {
	found     bool
	types     map[string]bool
	format    string
	fitsInt64 bool
}

// describe gathers the types and format of a column schema, including those
// of its anyOf/oneOf branches (["number","null"] and anyOf [{type: number},
// {type: null}] say the same).
func describe(v *fastjson.Value) colDef {
	def := colDef{types: map[string]bool{}, fitsInt64: true}
	if v == nil || v.Type() != fastjson.TypeObject {
		return def
	}
	def.found = true
	var walk func(v *fastjson.Value, depth int)
	walk = func(v *fastjson.Value, depth int) {
		if v == nil || v.Type() != fastjson.TypeObject || depth > 4 {
			return
		}
		if t := v.Get("type"); t != nil {
			switch t.Type() {
			case fastjson.TypeString:
				s, _ := t.StringBytes()
				def.types[string(s)] = true
			case fastjson.TypeArray:
				for _, e := range t.GetArray() {
					if s, err := e.StringBytes(); err == nil {
						def.types[string(s)] = true
					}
				}
			}
		}
		if f := v.GetStringBytes("format"); f != nil && def.format == "" {
			def.format = string(f)
		}
		for _, bound := range [...]string{"minimum", "maximum"} {
			b := v.Get(bound)
			if b == nil || b.Type() != fastjson.TypeNumber {
				continue
			}
			if _, err := b.Int64(); err == nil {
				continue
			}
			if f, err := b.Float64(); err != nil || f < math.MinInt64 || f >= math.MaxInt64 {
				def.fitsInt64 = false
			}
		}
		for _, alt := range [...]string{"anyOf", "oneOf", "allOf"} {
			for _, e := range v.GetArray(alt) {
				walk(e, depth+1)
			}
		}
	}
	walk(v, 0)
	return def
}

// columnDefs finds the object holding per-column schemas in a table's JSON
// Schema record: the properties of the after image's schema, else the
// before image's, else the top-level properties.
func columnDefs(root *fastjson.Value) *fastjson.Object {
	if root == nil || root.Type() != fastjson.TypeObject {
		return nil
	}
	props := root.Get("properties")
	if props == nil || props.Type() != fastjson.TypeObject {
		return nil
	}
	for _, img := range [...]string{"after", "before"} {
		if o := rowProperties(root, props.Get(img), 0); o != nil {
			return o
		}
	}
	o, _ := props.Object()
	return o
}

// rowProperties returns the properties of the object schema v, following
// $ref within root and anyOf/oneOf/allOf branches.
func rowProperties(root, v *fastjson.Value, depth int) *fastjson.Object {
	if v == nil || v.Type() != fastjson.TypeObject || depth > 8 {
		return nil
	}
	if p := v.Get("properties"); p != nil && p.Type() == fastjson.TypeObject {
		o, _ := p.Object()
		return o
	}
	if ref := v.GetStringBytes("$ref"); ref != nil {
		if o := rowProperties(root, resolveRef(root, string(ref)), depth+1); o != nil {
			return o
		}
	}
	for _, alt := range [...]string{"anyOf", "oneOf", "allOf"} {
		for _, e := range v.GetArray(alt) {
			if o := rowProperties(root, e, depth+1); o != nil {
				return o
			}
		}
	}
	return nil
}

// resolveRef resolves a local JSON Pointer reference (#/definitions/row).
func resolveRef(root *fastjson.Value, ref string) *fastjson.Value {
	ptr, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil
	}
	if ptr == "" {
		return root
	}
	if ptr[0] != '/' {
		return nil
	}
	keys := strings.Split(ptr[1:], "/")
	for i, k := range keys {
		keys[i] = strings.ReplaceAll(strings.ReplaceAll(k, "~1", "/"), "~0", "~")
	}
	return root.Get(keys...)
}
