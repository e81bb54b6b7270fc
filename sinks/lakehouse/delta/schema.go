package delta

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/cdclake/cdclake/sinks/lakehouse"
)

// A dataType is a Delta type: a primitive's name (long, timestamp,
// decimal(12,2), ...) or a struct, array or map. It reads and writes the
// protocol's schema serialization.
type dataType struct {
	prim   string
	fields []field   // struct
	elem   *dataType // array element, map value
	key    *dataType // map key
}

// field is a struct's field. Every field cdclake declares is nullable: a
// reader never enforces it, and a later file may hold a NULL.
type field struct {
	Name     string         `json:"name"`
	Type     dataType       `json:"type"`
	Nullable bool           `json:"nullable"`
	Metadata map[string]any `json:"metadata"`
}

type structJSON struct {
	Type   string  `json:"type"`
	Fields []field `json:"fields"`
}

type arrayJSON struct {
	Type         string   `json:"type"`
	ElementType  dataType `json:"elementType"`
	ContainsNull bool     `json:"containsNull"`
}

type mapJSON struct {
	Type              string   `json:"type"`
	KeyType           dataType `json:"keyType"`
	ValueType         dataType `json:"valueType"`
	ValueContainsNull bool     `json:"valueContainsNull"`
}

func (t dataType) MarshalJSON() ([]byte, error) {
	switch {
	case t.prim != "":
		return json.Marshal(t.prim)
	case t.key != nil:
		return json.Marshal(mapJSON{Type: "map", KeyType: *t.key, ValueType: *t.elem, ValueContainsNull: true})
	case t.elem != nil:
		return json.Marshal(arrayJSON{Type: "array", ElementType: *t.elem, ContainsNull: true})
	}
	fs := t.fields
	if fs == nil {
		fs = []field{}
	}
	return json.Marshal(structJSON{Type: "struct", Fields: fs})
}

func (t *dataType) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &t.prim)
	}
	var kind struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &kind); err != nil {
		return err
	}
	switch kind.Type {
	case "struct":
		var s structJSON
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*t = dataType{fields: s.Fields}
	case "array":
		var a arrayJSON
		if err := json.Unmarshal(b, &a); err != nil {
			return err
		}
		*t = dataType{elem: &a.ElementType}
	case "map":
		var m mapJSON
		if err := json.Unmarshal(b, &m); err != nil {
			return err
		}
		*t = dataType{key: &m.KeyType, elem: &m.ValueType}
	default:
		return fmt.Errorf("unknown delta type %q", kind.Type)
	}
	return nil
}

// schemaString is a table schema's serialization (metaData.schemaString).
func schemaString(t dataType) string {
	b, _ := json.Marshal(t)
	return string(b)
}

// parseSchema reads a metaData.schemaString.
func parseSchema(s string) (dataType, error) {
	var t dataType
	if err := json.Unmarshal([]byte(s), &t); err != nil {
		return dataType{}, fmt.Errorf("the table's schema: %w", err)
	}
	if t.prim != "" || t.elem != nil {
		return dataType{}, fmt.Errorf("the table's schema is no struct")
	}
	return t, nil
}

// tableType returns the Delta type of a file's Arrow schema. Types Delta
// lacks are lakehouse.ErrSchema: a time of day, a timestamp in
// nanoseconds, unsigned integers, and a column of NULLs only, which Spark
// cannot read as any type a later file gives the column.
func tableType(sch *arrow.Schema) (dataType, error) {
	return structOf(sch.Fields(), "")
}

func structOf(fs []arrow.Field, at string) (dataType, error) {
	out := dataType{fields: make([]field, 0, len(fs))}
	for _, f := range fs {
		t, err := typeOf(f.Type, at+f.Name)
		if err != nil {
			return dataType{}, err
		}
		out.fields = append(out.fields, field{Name: f.Name, Type: t, Nullable: true, Metadata: map[string]any{}})
	}
	return out, nil
}

func typeOf(t arrow.DataType, at string) (dataType, error) {
	prim := func(p string) (dataType, error) { return dataType{prim: p}, nil }
	switch t := t.(type) {
	case *arrow.BooleanType:
		return prim("boolean")
	case *arrow.Int8Type:
		return prim("byte")
	case *arrow.Int16Type:
		return prim("short")
	case *arrow.Int32Type:
		return prim("integer")
	case *arrow.Int64Type:
		return prim("long")
	case *arrow.Float32Type:
		return prim("float")
	case *arrow.Float64Type:
		return prim("double")
	case *arrow.StringType, *arrow.LargeStringType, *arrow.StringViewType:
		return prim("string")
	case *arrow.BinaryType, *arrow.LargeBinaryType, *arrow.BinaryViewType, *arrow.FixedSizeBinaryType:
		return prim("binary")
	case *arrow.Date32Type:
		return prim("date")
	case *arrow.Decimal128Type:
		return prim(fmt.Sprintf("decimal(%d,%d)", t.Precision, t.Scale))
	case *arrow.TimestampType:
		if t.Unit == arrow.Nanosecond {
			return dataType{}, fmt.Errorf("%w: %s is a timestamp in nanoseconds, which delta lacks", lakehouse.ErrSchema, at)
		}
		if t.TimeZone == "" {
			return prim("timestamp_ntz")
		}
		return prim("timestamp")
	case *arrow.StructType:
		return structOf(t.Fields(), at+".")
	case *arrow.ListType:
		e, err := typeOf(t.Elem(), at+".element")
		return dataType{elem: &e}, err
	case *arrow.LargeListType:
		e, err := typeOf(t.Elem(), at+".element")
		return dataType{elem: &e}, err
	case *arrow.MapType:
		k, err := typeOf(t.KeyType(), at+".key")
		if err != nil {
			return dataType{}, err
		}
		v, err := typeOf(t.ItemType(), at+".value")
		return dataType{key: &k, elem: &v}, err
	case *arrow.DictionaryType:
		return typeOf(t.ValueType, at)
	case arrow.ExtensionType:
		return typeOf(t.StorageType(), at)
	case *arrow.NullType:
		return dataType{}, fmt.Errorf("%w: %s is NULL in every row so far, and Spark cannot read such a column "+
			"as the type a later file gives it: give it a type (types: {COLUMN: string}, …)", lakehouse.ErrSchema, at)
	case *arrow.Time32Type, *arrow.Time64Type:
		return dataType{}, fmt.Errorf("%w: %s is a time of day, which delta lacks", lakehouse.ErrSchema, at)
	}
	return dataType{}, fmt.Errorf("%w: %s is %s, which delta lacks", lakehouse.ErrSchema, at, t)
}

// merge returns the table type a with the fields of b it lacks added
// (struct fields by name, at every depth; Delta's additive evolution),
// and whether it added any. A field whose type differs is
// lakehouse.ErrSchema: Delta changes no column's type.
func merge(a, b dataType, at string) (dataType, bool, error) {
	switch {
	case a.prim != "" || b.prim != "":
		if a.prim != b.prim {
			return a, false, fmt.Errorf("%w: %s is %s in the table and %s in the file, and delta changes no column's type",
				lakehouse.ErrSchema, strings.TrimSuffix(at, "."), a.describe(), b.describe())
		}
		return a, false, nil
	case a.key != nil || b.key != nil:
		if a.key == nil || b.key == nil {
			return a, false, fmt.Errorf("%w: %s is %s in the table and %s in the file", lakehouse.ErrSchema, at, a.describe(), b.describe())
		}
		k, kc, err := merge(*a.key, *b.key, at+".key")
		if err != nil {
			return a, false, err
		}
		v, vc, err := merge(*a.elem, *b.elem, at+".value")
		return dataType{key: &k, elem: &v}, kc || vc, err
	case a.elem != nil || b.elem != nil:
		if a.elem == nil || b.elem == nil {
			return a, false, fmt.Errorf("%w: %s is %s in the table and %s in the file", lakehouse.ErrSchema, at, a.describe(), b.describe())
		}
		e, c, err := merge(*a.elem, *b.elem, at+".element")
		return dataType{elem: &e}, c, err
	}
	out := dataType{fields: append([]field(nil), a.fields...)}
	changed := false
	for _, bf := range b.fields {
		i := -1
		for j := range out.fields {
			if out.fields[j].Name == bf.Name {
				i = j
				break
			}
		}
		if i < 0 {
			out.fields = append(out.fields, bf)
			changed = true
			continue
		}
		t, c, err := merge(out.fields[i].Type, bf.Type, joinPath(at, bf.Name))
		if err != nil {
			return a, false, err
		}
		if c {
			out.fields[i].Type = t
			changed = true
		}
	}
	return out, changed, nil
}

func joinPath(at, name string) string {
	if at == "" {
		return name
	}
	return at + "." + name
}

// describe names a type in an error.
func (t dataType) describe() string {
	switch {
	case t.prim != "":
		return t.prim
	case t.key != nil:
		return "a map"
	case t.elem != nil:
		return "an array"
	}
	return "a struct"
}
