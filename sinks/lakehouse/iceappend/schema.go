package iceappend

import (
	"encoding/json"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
)

// field is a field of an Iceberg schema (its JSON form).
type field struct {
	ID       int     `json:"id"`
	Name     string  `json:"name"`
	Required bool    `json:"required"`
	Type     iceType `json:"type"`
	Doc      string  `json:"doc,omitempty"`
}

// iceType is an Iceberg type: a primitive (Prim: "string", "long",
// "decimal(9,2)", ...) or a struct, list or map.
type iceType struct {
	Prim            string
	Kind            string // struct, list, map; "" for a primitive
	Fields          []field
	ElementID       int
	ElementRequired bool
	Element         *iceType
	KeyID           int
	Key             *iceType
	ValueID         int
	ValueRequired   bool
	Value           *iceType
}

type iceTypeJSON struct {
	Type            string   `json:"type"`
	Fields          []field  `json:"fields,omitempty"`
	ElementID       int      `json:"element-id,omitempty"`
	ElementRequired *bool    `json:"element-required,omitempty"`
	Element         *iceType `json:"element,omitempty"`
	KeyID           int      `json:"key-id,omitempty"`
	Key             *iceType `json:"key,omitempty"`
	ValueID         int      `json:"value-id,omitempty"`
	ValueRequired   *bool    `json:"value-required,omitempty"`
	Value           *iceType `json:"value,omitempty"`
}

func (t iceType) MarshalJSON() ([]byte, error) {
	switch t.Kind {
	case "":
		return json.Marshal(t.Prim)
	case "struct":
		fs := t.Fields
		if fs == nil {
			fs = []field{}
		}
		return json.Marshal(iceTypeJSON{Type: "struct", Fields: fs})
	case "list":
		return json.Marshal(iceTypeJSON{Type: "list", ElementID: t.ElementID, ElementRequired: &t.ElementRequired, Element: t.Element})
	case "map":
		return json.Marshal(iceTypeJSON{Type: "map", KeyID: t.KeyID, Key: t.Key, ValueID: t.ValueID,
			ValueRequired: &t.ValueRequired, Value: t.Value})
	}
	return nil, fmt.Errorf("iceberg type of kind %q", t.Kind)
}

func (t *iceType) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		*t = iceType{}
		return json.Unmarshal(b, &t.Prim)
	}
	var j iceTypeJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*t = iceType{Kind: j.Type, Fields: j.Fields, ElementID: j.ElementID, Element: j.Element, KeyID: j.KeyID, Key: j.Key,
		ValueID: j.ValueID, Value: j.Value}
	if j.ElementRequired != nil {
		t.ElementRequired = *j.ElementRequired
	}
	if j.ValueRequired != nil {
		t.ValueRequired = *j.ValueRequired
	}
	switch j.Type {
	case "struct":
	case "list":
		if t.Element == nil {
			return fmt.Errorf("an iceberg list without its element")
		}
	case "map":
		if t.Key == nil || t.Value == nil {
			return fmt.Errorf("an iceberg map without its key or value")
		}
	default:
		return fmt.Errorf("an iceberg type %q", j.Type)
	}
	return nil
}

// schemaJSON is an Iceberg schema as table metadata holds it.
type schemaJSON struct {
	Type               string  `json:"type"`
	Fields             []field `json:"fields"`
	SchemaID           int     `json:"schema-id"`
	IdentifierFieldIDs []int   `json:"identifier-field-ids"`
}

// errUnsupported marks what this package leaves to the full committer: a
// type it does not convert, a change of schema, a table it does not
// write as it is.
type errUnsupported struct{ why string }

func (e errUnsupported) Error() string { return e.why }

func unsupported(format string, args ...any) error {
	return errUnsupported{fmt.Sprintf(format, args...)}
}

// fromArrow returns the Iceberg fields of an Arrow schema's, ids given in
// pre-order from next (a struct's, list's or map's own id before those of
// its children), as iceberg-go gives fresh ids; next is advanced past
// them.
func fromArrow(fs []arrow.Field, next *int) ([]field, error) {
	out := make([]field, 0, len(fs))
	for _, f := range fs {
		*next++
		id := *next
		t, err := typeOf(f.Type, next)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name, err)
		}
		// A column of NULLs only (unknown) is optional whatever its field
		// says.
		required := !f.Nullable && !(t.Kind == "" && t.Prim == "unknown")
		out = append(out, field{ID: id, Name: f.Name, Required: required, Type: t})
	}
	return out, nil
}

var utc = map[string]bool{"UTC": true, "Etc/UTC": true, "+00:00": true, "Z": true, "utc": true, "GMT": true, "Etc/GMT": true,
	"+0000": true, "-00:00": true, "-0000": true, "z": true}

// typeOf returns the Iceberg type of an Arrow type, the ids of its
// children taken from next.
func typeOf(dt arrow.DataType, next *int) (iceType, error) {
	prim := func(p string) (iceType, error) { return iceType{Prim: p}, nil }
	switch dt := dt.(type) {
	case *arrow.BooleanType:
		return prim("boolean")
	case *arrow.NullType:
		return prim("unknown")
	case *arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type, *arrow.Uint8Type, *arrow.Uint16Type:
		return prim("int")
	case *arrow.Int64Type:
		return prim("long")
	case *arrow.Float32Type:
		return prim("float")
	case *arrow.Float64Type:
		return prim("double")
	case *arrow.Decimal128Type:
		return prim(fmt.Sprintf("decimal(%d, %d)", dt.Precision, dt.Scale))
	case *arrow.StringType, *arrow.LargeStringType:
		return prim("string")
	case *arrow.BinaryType, *arrow.LargeBinaryType:
		return prim("binary")
	case *arrow.Date32Type:
		return prim("date")
	case *arrow.Time64Type:
		if dt.Unit == arrow.Microsecond {
			return prim("time")
		}
	case *arrow.TimestampType:
		suffix := ""
		switch dt.Unit {
		case arrow.Microsecond:
		case arrow.Nanosecond:
			suffix = "_ns"
		default:
			return iceType{}, unsupported("a timestamp in %s", dt.Unit)
		}
		switch {
		case dt.TimeZone == "":
			return prim("timestamp" + suffix)
		case utc[dt.TimeZone]:
			return prim("timestamptz" + suffix)
		}
	case *arrow.FixedSizeBinaryType:
		return prim(fmt.Sprintf("fixed[%d]", dt.ByteWidth))
	case *arrow.StructType:
		fs, err := fromArrow(dt.Fields(), next)
		return iceType{Kind: "struct", Fields: fs}, err
	case *arrow.ListType:
		return listOf(dt.ElemField(), next)
	case *arrow.LargeListType:
		return listOf(dt.ElemField(), next)
	case *arrow.MapType:
		*next++
		kid := *next
		*next++
		vid := *next
		k, err := typeOf(dt.KeyType(), next)
		if err != nil {
			return iceType{}, err
		}
		v, err := typeOf(dt.ItemField().Type, next)
		if err != nil {
			return iceType{}, err
		}
		return iceType{Kind: "map", KeyID: kid, Key: &k, ValueID: vid, Value: &v, ValueRequired: !dt.ItemField().Nullable}, nil
	}
	return iceType{}, unsupported("the arrow type %s", dt)
}

func listOf(elem arrow.Field, next *int) (iceType, error) {
	*next++
	id := *next
	e, err := typeOf(elem.Type, next)
	if err != nil {
		return iceType{}, err
	}
	return iceType{Kind: "list", ElementID: id, Element: &e, ElementRequired: !elem.Nullable}, nil
}

// covers reports whether a table's fields (have) hold a file's (file, ids
// aside) as they are: each of file's fields is in have by name, with the
// same type, and not required in have where it is optional in file. A
// column of NULLs only (unknown) in the file reads as NULLs of the
// table's type.
func covers(have, file []field) bool {
	for _, f := range file {
		h := find(have, f.Name)
		if h == nil {
			return false
		}
		if f.Type.Kind == "" && f.Type.Prim == "unknown" {
			continue
		}
		if h.Required && !f.Required || !sameType(h.Type, f.Type) {
			return false
		}
	}
	return true
}

func find(fs []field, name string) *field {
	for i := range fs {
		if fs[i].Name == name {
			return &fs[i]
		}
	}
	return nil
}

// sameType reports whether a table's type holds a file's as it is.
func sameType(have, file iceType) bool {
	if have.Kind != file.Kind {
		return false
	}
	switch have.Kind {
	case "":
		return have.Prim == file.Prim
	case "struct":
		return covers(have.Fields, file.Fields)
	case "list":
		return !(have.ElementRequired && !file.ElementRequired) && sameOrUnknown(*have.Element, *file.Element)
	case "map":
		return sameType(*have.Key, *file.Key) && !(have.ValueRequired && !file.ValueRequired) && sameOrUnknown(*have.Value, *file.Value)
	}
	return false
}

func sameOrUnknown(have, file iceType) bool {
	return file.Kind == "" && file.Prim == "unknown" || sameType(have, file)
}

// mappingField is an entry of a name mapping (schema.name-mapping.default).
type mappingField struct {
	Names   []string       `json:"names"`
	FieldID int            `json:"field-id"`
	Fields  []mappingField `json:"fields,omitempty"`
}

// nameMapping returns the name mapping of fields, as iceberg-go writes it.
func nameMapping(fs []field) string {
	b, _ := json.Marshal(mappingOf(fs))
	return string(b)
}

func mappingOf(fs []field) []mappingField {
	out := make([]mappingField, 0, len(fs))
	for _, f := range fs {
		out = append(out, mappingField{Names: []string{f.Name}, FieldID: f.ID, Fields: typeMapping(f.Type)})
	}
	return out
}

func typeMapping(t iceType) []mappingField {
	switch t.Kind {
	case "struct":
		return mappingOf(t.Fields)
	case "list":
		return []mappingField{{Names: []string{"element"}, FieldID: t.ElementID, Fields: typeMapping(*t.Element)}}
	case "map":
		return []mappingField{{Names: []string{"key"}, FieldID: t.KeyID, Fields: typeMapping(*t.Key)},
			{Names: []string{"value"}, FieldID: t.ValueID, Fields: typeMapping(*t.Value)}}
	}
	return nil
}

// leafIDs returns, by Parquet column path (its names joined by sep), the field id of each
// leaf of fields and whether it is reached through structs only (bounds
// are kept for those alone), with its type. A list's leaf is at
// name.list.element, a map's at name.key_value.key and .value.
type leaf struct {
	id      int
	typ     iceType
	bounded bool
}

func leaves(fs []field) map[string]leaf {
	out := map[string]leaf{}
	var walk func(prefix string, t iceType, id int, bounded bool)
	walk = func(prefix string, t iceType, id int, bounded bool) {
		switch t.Kind {
		case "":
			out[prefix] = leaf{id: id, typ: t, bounded: bounded}
		case "struct":
			for _, f := range t.Fields {
				walk(prefix+sep+f.Name, f.Type, f.ID, bounded)
			}
		case "list":
			walk(prefix+sep+"list"+sep+"element", *t.Element, t.ElementID, false)
		case "map":
			walk(prefix+sep+"key_value"+sep+"key", *t.Key, t.KeyID, false)
			walk(prefix+sep+"key_value"+sep+"value", *t.Value, t.ValueID, false)
		}
	}
	for _, f := range fs {
		walk(f.Name, f.Type, f.ID, true)
	}
	return out
}

// sep joins the names of a Parquet column path.
const sep = "\x00"

// evolve returns have with the fields of file it lacks added (at every
// struct depth), their ids fresh from next, and whether any was. Only
// additions are made here, and the promotion of a column of NULLs only
// (unknown) that gets values of a primitive type: a new column must be
// optional, and a column the table has must hold the file's as it is
// (covers); any other change (of a type) is unsupported.
func evolve(have, file []field, next *int) ([]field, bool, error) {
	out := append([]field(nil), have...)
	changed := false
	for _, f := range file {
		i := -1
		for j := range out {
			if out[j].Name == f.Name {
				i = j
				break
			}
		}
		if i < 0 {
			if f.Required {
				return nil, false, unsupported("a required column %s to add", f.Name)
			}
			*next++
			f.ID = *next
			renumber(&f.Type, next)
			out = append(out, f)
			changed = true
			continue
		}
		h := out[i]
		if f.Type.Kind == "" && f.Type.Prim == "unknown" {
			continue
		}
		if h.Required && !f.Required {
			return nil, false, unsupported("%s: a required column gets NULLs", f.Name)
		}
		if h.Type.Kind == "" && h.Type.Prim == "unknown" && f.Type.Kind == "" {
			// A column of NULLs only that gets values: Iceberg's unknown
			// type is promoted to any, the field keeping its id.
			h.Type = f.Type
			out[i] = h
			changed = true
			continue
		}
		if h.Type.Kind == "struct" && f.Type.Kind == "struct" {
			fs, ch, err := evolve(h.Type.Fields, f.Type.Fields, next)
			if err != nil {
				return nil, false, err
			}
			if ch {
				h.Type = iceType{Kind: "struct", Fields: fs}
				out[i] = h
				changed = true
			}
			continue
		}
		if !sameType(h.Type, f.Type) {
			return nil, false, unsupported("%s: a type change", f.Name)
		}
	}
	return out, changed, nil
}

// renumber gives the children of t fresh ids from next, in pre-order.
func renumber(t *iceType, next *int) {
	switch t.Kind {
	case "struct":
		fs := append([]field(nil), t.Fields...)
		for i := range fs {
			*next++
			fs[i].ID = *next
			renumber(&fs[i].Type, next)
		}
		t.Fields = fs
	case "list":
		*next++
		t.ElementID = *next
		e := *t.Element
		renumber(&e, next)
		t.Element = &e
	case "map":
		*next++
		t.KeyID = *next
		*next++
		t.ValueID = *next
		k, v := *t.Key, *t.Value
		renumber(&k, next)
		renumber(&v, next)
		t.Key, t.Value = &k, &v
	}
}
