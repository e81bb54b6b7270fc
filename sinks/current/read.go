package current

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	pqschema "github.com/apache/arrow-go/v18/parquet/schema"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/cdclake/cdclake/internal/arrowmerge"
	"github.com/cdclake/cdclake/sinks/lake"
	"gocloud.dev/blob"
)

// wholeBelow is the size under which a file is fetched in one request.
const wholeBelow = 64 << 20

// input is a file whose rows give columns their values: a change file's
// after images, or a state file's rows.
type input struct {
	key    string
	fields []arrow.Field // its data columns
	arrays []arrow.Array // their values, one row per file row
}

func (in *input) release() {
	for _, a := range in.arrays {
		a.Release()
	}
	in.arrays = nil
}

// readTable reads a Parquet object of the lake whole, each column as one
// array, under its schema without Parquet field ids.
func readTable(ctx context.Context, bucket *blob.Bucket, key string, mem memory.Allocator) (*arrow.Schema, []arrow.Array, error) {
	r, err := lake.OpenSmall(ctx, bucket, key, wholeBelow)
	if err != nil {
		return nil, nil, fmt.Errorf("opening %s: %w", key, err)
	}
	pf, err := file.NewParquetReader(r)
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", key, err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1 << 16}, mem)
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", key, err)
	}
	tbl, err := fr.ReadTable(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", key, err)
	}
	defer tbl.Release()
	cols := make([]arrow.Array, tbl.NumCols())
	fields := slices.Clone(tbl.Schema().Fields())
	for i := range cols {
		fields[i].Type = withJSON(fr.Manifest.Fields[i], pf.MetaData().Schema)
		chunks := tbl.Column(i).Data().Chunks()
		var a arrow.Array
		switch len(chunks) {
		case 0:
			a = array.MakeArrayOfNull(mem, tbl.Column(i).DataType(), 0)
		case 1:
			a = chunks[0]
			a.Retain()
		default:
			if a, err = array.Concatenate(chunks, mem); err != nil {
				for _, c := range cols[:i] {
					c.Release()
				}
				return nil, nil, fmt.Errorf("reading %s: %w", key, err)
			}
		}
		cols[i] = retype(a, fields[i].Type)
		a.Release()
	}
	md := tbl.Schema().Metadata()
	return arrowmerge.WithoutFieldIDs(arrow.NewSchema(fields, &md)), cols, nil
}

// withJSON returns a field's type with the JSON columns (Parquet's JSON
// annotation, which arrow-go reads as binary) as the JSON extension type
// the lake writes them from.
func withJSON(sf pqarrow.SchemaField, descr *pqschema.Schema) arrow.DataType {
	if sf.IsLeaf() {
		if _, ok := descr.Column(sf.ColIndex).LogicalType().(pqschema.JSONLogicalType); ok && sf.Field.Type.ID() == arrow.BINARY {
			if j, err := extensions.NewJSONType(arrow.BinaryTypes.String); err == nil {
				return j
			}
		}
		return sf.Field.Type
	}
	switch t := sf.Field.Type.(type) {
	case *arrow.StructType:
		fields := slices.Clone(t.Fields())
		for i := range fields {
			fields[i].Type = withJSON(sf.Children[i], descr)
		}
		return arrow.StructOf(fields...)
	case *arrow.ListType:
		ef := t.ElemField()
		ef.Type = withJSON(sf.Children[0], descr)
		return arrow.ListOfField(ef)
	}
	return sf.Field.Type
}

// retype returns arr as an array of type to, which differs from its own at
// most by JSON columns read as binary (withJSON).
func retype(arr arrow.Array, to arrow.DataType) arrow.Array {
	if arrow.TypeEqual(arr.DataType(), to) {
		arr.Retain()
		return arr
	}
	d := arr.Data()
	switch t := to.(type) {
	case *extensions.JSONType:
		sd := array.NewData(arrow.BinaryTypes.String, d.Len(), d.Buffers(), nil, d.NullN(), d.Offset())
		defer sd.Release()
		str := array.MakeFromData(sd)
		defer str.Release()
		return array.NewExtensionArrayWithStorage(t, str)
	case *arrow.StructType:
		src := arr.(*array.Struct)
		kids := make([]arrow.ArrayData, t.NumFields())
		for i := range kids {
			k := retype(src.Field(i), t.Field(i).Type)
			kids[i] = k.Data()
			kids[i].Retain()
			k.Release()
		}
		nd := array.NewData(to, d.Len(), d.Buffers()[:1], kids, d.NullN(), d.Offset())
		for _, k := range kids {
			k.Release()
		}
		defer nd.Release()
		return array.MakeFromData(nd)
	case *arrow.ListType:
		k := retype(arr.(*array.List).ListValues(), t.Elem())
		defer k.Release()
		nd := array.NewData(to, d.Len(), d.Buffers()[:2], []arrow.ArrayData{k.Data()}, d.NullN(), d.Offset())
		defer nd.Release()
		return array.MakeFromData(nd)
	}
	arr.Retain()
	return arr
}

// changeFile is one change file of the dataset, its columns as arrays.
type changeFile struct {
	key  string
	rows int
	cols []arrow.Array
	// The columns folding needs; before and after are nil in a file of
	// a table with no known column (its TRUNCATE rows only).
	op, source, pks, oldKey, newKey arrow.Array
	ts                              *array.Timestamp
	part                            *array.Int32
	off                             *array.Int64
	before, after                   *array.Struct
	beforeAbsent, afterAbsent       *array.List
	beforeFields, afterFields       []arrow.Field
	beforeIndex, afterIndex         map[string]int
}

func (f *changeFile) release() {
	for _, c := range f.cols {
		c.Release()
	}
	f.cols = nil
}

// readChanges reads a change file of the images layout.
func readChanges(ctx context.Context, bucket *blob.Bucket, key string, mem memory.Allocator) (*changeFile, error) {
	sch, cols, err := readTable(ctx, bucket, key, mem)
	if err != nil {
		return nil, err
	}
	f := &changeFile{key: key, cols: cols}
	col := func(name string) arrow.Array {
		if i := sch.FieldIndices(name); len(i) > 0 {
			return cols[i[0]]
		}
		return nil
	}
	if col(schema.ColAfterAbsent) == nil {
		f.release()
		if col(schema.ColAbsent) != nil {
			return nil, fmt.Errorf("%s: a file of the flat layout; current-state tables are built from the images layout (layout: images)", key)
		}
		return nil, fmt.Errorf("%s: not a file of cdclake's images layout (no %s column)", key, schema.ColAfterAbsent)
	}
	var ok [6]bool
	f.op, f.source, f.pks = col(schema.ColOp), col(schema.ColSource), col("_gg_primary_keys")
	f.oldKey, f.newKey = col("_debezium_oldkey"), col("_debezium_newkey")
	f.ts, ok[0] = col(schema.ColTS).(*array.Timestamp)
	f.part, ok[1] = col(schema.ColPartition).(*array.Int32)
	f.off, ok[2] = col(schema.ColOffset).(*array.Int64)
	f.beforeAbsent, ok[3] = col(schema.ColBeforeAbsent).(*array.List)
	f.afterAbsent, ok[4] = col(schema.ColAfterAbsent).(*array.List)
	ok[5] = f.op != nil && f.source != nil
	for i, good := range ok {
		if !good {
			f.release()
			return nil, fmt.Errorf("%s: its %s column is missing or of another type (%s)", key,
				[]string{schema.ColTS, schema.ColPartition, schema.ColOffset, schema.ColBeforeAbsent, schema.ColAfterAbsent, schema.ColOp + "/" + schema.ColSource}[i], sch)
		}
	}
	f.rows = f.off.Len()
	if a, isStruct := col(schema.ColAfter).(*array.Struct); isStruct {
		f.after = a
		f.afterFields = a.DataType().(*arrow.StructType).Fields()
		f.afterIndex = fieldIndex(f.afterFields)
	}
	if b, isStruct := col(schema.ColBefore).(*array.Struct); isStruct {
		f.before = b
		f.beforeFields = b.DataType().(*arrow.StructType).Fields()
		f.beforeIndex = fieldIndex(f.beforeFields)
	}
	return f, nil
}

func fieldIndex(fields []arrow.Field) map[string]int {
	m := make(map[string]int, len(fields))
	for i, f := range fields {
		m[f.Name] = i
	}
	return m
}

// afterInput returns the file's after images as an input.
func (f *changeFile) afterInput() *input {
	in := &input{key: f.key}
	if f.after == nil {
		return in
	}
	in.fields = f.afterFields
	for i := range f.afterFields {
		a := f.after.Field(i)
		a.Retain()
		in.arrays = append(in.arrays, a)
	}
	return in
}

// text returns a string column's value at row, and false for NULL.
func text(a arrow.Array, row int) (string, bool) {
	if a == nil || a.IsNull(row) {
		return "", false
	}
	if s, ok := a.(interface{ Value(int) string }); ok {
		return s.Value(row), true
	}
	return a.ValueStr(row), true
}

// strings returns a list of strings at row (nil for NULL).
func listStrings(l *array.List, row int) []string {
	if l == nil || l.IsNull(row) {
		return nil
	}
	start, end := l.ValueOffsets(row)
	vals := l.ListValues()
	out := make([]string, 0, end-start)
	for j := start; j < end; j++ {
		if v, ok := text(vals, int(j)); ok {
			out = append(out, v)
		}
	}
	return out
}

// keyOf returns the key the image at row gives the key columns: their
// values, each with its length, in order. It fails when the image lacks
// one or holds NULL there.
func keyOf(img *array.Struct, index map[string]int, absent []string, row int, key []string) (string, error) {
	if img == nil || img.IsNull(row) {
		return "", fmt.Errorf("the image is absent")
	}
	return encodeKey(func(name string) arrow.Array {
		if i, ok := index[name]; ok && !containsString(absent, name) {
			return img.Field(i)
		}
		return nil
	}, row, key)
}

// encodeKey encodes the key columns' values at row, col giving each
// column's values (nil: the row does not carry it).
func encodeKey(col func(name string) arrow.Array, row int, key []string) (string, error) {
	var b strings.Builder
	for _, k := range key {
		a := col(k)
		if a == nil {
			return "", fmt.Errorf("it does not carry key column %s", k)
		}
		if a.IsNull(row) {
			return "", fmt.Errorf("key column %s is NULL", k)
		}
		v := a.ValueStr(row)
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte(':')
		b.WriteString(v)
	}
	return b.String(), nil
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// primaryKeys returns the key columns a GoldenGate file names in its
// _gg_primary_keys column (a JSON array), nil when it names none.
func (f *changeFile) primaryKeys() ([]string, error) {
	for row := range f.rows {
		v, ok := text(f.pks, row)
		if !ok {
			continue
		}
		var keys []string
		if err := json.Unmarshal([]byte(v), &keys); err != nil {
			return nil, fmt.Errorf("%s: _gg_primary_keys %q is no JSON array of names: %w", f.key, v, err)
		}
		if len(keys) > 0 {
			return keys, nil
		}
	}
	return nil, nil
}

// jsonKey encodes the key a Debezium key header names (__debezium.oldkey,
// __debezium.newkey: the message key, with or without its Connect
// schema) as keyOf does, and false when it cannot: a key column it lacks,
// or a value that is neither a number nor a string (its typed text is
// not known here).
func jsonKey(raw string, key []string) (string, bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(raw), &obj) != nil {
		return "", false
	}
	if p, ok := obj["payload"]; ok && obj["schema"] != nil {
		obj = nil
		if json.Unmarshal(p, &obj) != nil {
			return "", false
		}
	}
	var b strings.Builder
	for _, k := range key {
		v, ok := obj[k]
		if !ok {
			return "", false
		}
		d := json.NewDecoder(bytes.NewReader(v))
		d.UseNumber()
		var x any
		if d.Decode(&x) != nil {
			return "", false
		}
		var text string
		switch t := x.(type) {
		case json.Number:
			text = t.String()
		case string:
			text = t
		default:
			return "", false
		}
		b.WriteString(strconv.Itoa(len(text)))
		b.WriteByte(':')
		b.WriteString(text)
	}
	return b.String(), true
}
