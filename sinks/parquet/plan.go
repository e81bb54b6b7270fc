package parquet

import (
	"encoding/base64"
	"fmt"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	pqschema "github.com/apache/arrow-go/v18/parquet/schema"
)

// A plan is what the writer needs to know of a schema, worked out once
// for every file of it: the Parquet schema pqarrow maps the Arrow schema
// to (so that the files are the ones pqarrow would write, read back the
// same by any reader), serialized, and how each leaf column's levels and
// values come out of the Arrow arrays.
type plan struct {
	*shape
	kv [][2]string
}

// shape is the part of a plan that comes from the schema's fields alone:
// the tables of one shape (a schema per tenant, a table per month) share
// it, and a table's versions that differ only in their metadata.
type shape struct {
	// schemaList is the footer's schema field after its header: the list
	// of schema elements, Thrift-encoded.
	schemaList []byte
	leaves     []leafPlan
}

// A step is one node on the way from a top-level column to a leaf.
type step struct {
	kind     stepKind
	nullable bool  // an OPTIONAL node: adds a definition level
	child    int   // the field of the struct above this step
	rep      int16 // a list's repetition level: the lists down to it
}

type stepKind uint8

const (
	stepStruct stepKind = iota
	stepList            // a list or a map (a list of key-value structs)
	stepLeaf
)

// valueKind is how a leaf's Arrow values become plain Parquet values.
type valueKind uint8

const (
	vBool valueKind = iota
	vInt8
	vInt16
	vInt32 // int32, date32, time32
	vInt64 // int64, time64, timestamp[us]
	vTsSec
	vTsMilli
	vTsNano // must be whole microseconds
	vFloat32
	vFloat64
	vBytes // string, binary, JSON
	vDecimal
)

type leafPlan struct {
	col            int // top-level column
	steps          []step
	path           []string
	phys           parquet.Type
	typeLen        int
	maxDef, maxRep int16
	kind           valueKind
	// signed: the statistics of the type sort signed (the deprecated
	// min/max are written too).
	signed bool
	lists  bool // a list on the way: levels come from the general walk
}

// plans caches the plans of the schemas written lately, by schema (a
// table version's files share one), and their shapes, by the fingerprint
// of the schema's fields. Each map is cleared when full.
var plans = struct {
	sync.Mutex
	m      map[*arrow.Schema]*plan
	shapes map[string]*shape
}{m: map[*arrow.Schema]*plan{}, shapes: map[string]*shape{}}

const (
	maxPlans  = 1024
	maxShapes = 256
)

// planFor returns the plan of sch, or nil when the writer does not handle
// one of its types (the file is then written by pqarrow).
func planFor(sch *arrow.Schema, props *parquet.WriterProperties, arrProps pqarrow.ArrowWriterProperties) (*plan, error) {
	plans.Lock()
	p, ok := plans.m[sch]
	plans.Unlock()
	if ok {
		return p, nil
	}
	key := shapeKey(sch)
	plans.Lock()
	sh, ok := plans.shapes[key]
	plans.Unlock()
	if !ok || key == "" {
		var err error
		if sh, err = newShape(sch, props, arrProps); err != nil {
			return nil, err
		}
	}
	p = nil
	if sh != nil {
		p = newPlan(sch, sh)
	}
	plans.Lock()
	if len(plans.m) >= maxPlans {
		clear(plans.m)
	}
	plans.m[sch] = p
	if key != "" {
		if len(plans.shapes) >= maxShapes {
			clear(plans.shapes)
		}
		plans.shapes[key] = sh
	}
	plans.Unlock()
	return p, nil
}

// shapeKey is what the shape of sch is cached by: the fingerprint of its
// fields, or "" when that does not tell it (a field with metadata, which
// the fingerprint leaves out and pqarrow reads, or a type without one).
func shapeKey(sch *arrow.Schema) string {
	for _, f := range sch.Fields() {
		if withMetadata(f) {
			return ""
		}
	}
	return sch.Fingerprint()
}

func withMetadata(f arrow.Field) bool {
	if f.HasMetadata() {
		return true
	}
	switch t := f.Type.(type) {
	case *arrow.StructType:
		return slices.ContainsFunc(t.Fields(), withMetadata)
	case *arrow.MapType:
		return withMetadata(t.KeyField()) || withMetadata(t.ItemField())
	case arrow.ListLikeType:
		return withMetadata(t.ElemField())
	}
	return false
}

// newShape returns the shape of sch, or nil when the writer does not
// handle one of its types.
func newShape(sch *arrow.Schema, props *parquet.WriterProperties, arrProps pqarrow.ArrowWriterProperties) (*shape, error) {
	pq, err := pqarrow.ToParquet(sch, props, arrProps)
	if err != nil {
		return nil, fmt.Errorf("parquet schema: %w", err)
	}
	var leaves []leafPlan
	for i, f := range sch.Fields() {
		if !walkType(f.Type, f.Nullable, i, 0, nil, &leaves) {
			return nil, nil
		}
	}
	if len(leaves) != pq.NumColumns() {
		return nil, nil
	}
	for i := range leaves {
		if !leaves[i].bind(pq.Column(i)) {
			return nil, nil
		}
	}
	var t tw
	if !schemaElements(&t, pq.Root()) {
		return nil, nil
	}
	return &shape{schemaList: t.b, leaves: leaves}, nil
}

// newPlan returns the plan of sch, of shape sh: the footer's key-value
// metadata is the schema's, and the Arrow schema pqarrow stores.
func newPlan(sch *arrow.Schema, sh *shape) *plan {
	p := &plan{shape: sh}
	md := sch.Metadata()
	for i, k := range md.Keys() {
		p.kv = append(p.kv, [2]string{k, md.Values()[i]})
	}
	ipc := flight.SerializeSchema(stored(sch), memory.DefaultAllocator)
	p.kv = append(p.kv, [2]string{"ARROW:schema", base64.StdEncoding.EncodeToString(ipc)})
	return p
}

// stored is the Arrow schema stored in the footer: sch with every list
// element named "element", as pqarrow stores it, the name of the Parquet
// group of a list's element (readers that match the stored schema's names
// to column paths find the columns).
func stored(sch *arrow.Schema) *arrow.Schema {
	fields := sch.Fields()
	changed := false
	for i, f := range fields {
		if g, ok := elementNamed(f); ok {
			fields[i], changed = g, true
		}
	}
	if !changed {
		return sch
	}
	md := sch.Metadata()
	return arrow.NewSchema(fields, &md)
}

// elementNamed returns f with its lists' elements named "element", and
// whether that changed it.
func elementNamed(f arrow.Field) (arrow.Field, bool) {
	switch t := f.Type.(type) {
	case *arrow.ListType:
		e, changed := elementNamed(t.ElemField())
		if !changed && e.Name == "element" {
			return f, false
		}
		e.Name = "element"
		f.Type = arrow.ListOfField(e)
		return f, true
	case *arrow.StructType:
		fs := t.Fields()
		changed := false
		for i := range fs {
			if g, ok := elementNamed(fs[i]); ok {
				fs[i], changed = g, true
			}
		}
		if changed {
			f.Type = arrow.StructOf(fs...)
		}
		return f, changed
	case *arrow.MapType:
		k, kc := elementNamed(t.KeyField())
		v, vc := elementNamed(t.ItemField())
		if kc || vc {
			f.Type = arrow.MapOfFields(k, v)
		}
		return f, kc || vc
	}
	return f, false
}

// walkType appends the leaves of a node of type t (nullable, field child
// of the struct above, in top-level column col) reached through steps. It
// reports false for a type the writer does not handle.
func walkType(t arrow.DataType, nullable bool, col, child int, steps []step, leaves *[]leafPlan) bool {
	steps = steps[:len(steps):len(steps)]
	switch t := t.(type) {
	case *arrow.StructType:
		if t.NumFields() == 0 {
			return false
		}
		steps = append(steps, step{kind: stepStruct, nullable: nullable, child: child})
		for j, f := range t.Fields() {
			if !walkType(f.Type, f.Nullable, col, j, steps, leaves) {
				return false
			}
		}
		return true
	case *arrow.ListType:
		steps = append(steps, step{kind: stepList, nullable: nullable, child: child, rep: lists(steps) + 1})
		return walkType(t.Elem(), t.ElemField().Nullable, col, 0, steps, leaves)
	case *arrow.MapType:
		if t.KeysSorted {
			return false
		}
		steps = append(steps, step{kind: stepList, nullable: nullable, child: child, rep: lists(steps) + 1})
		return walkType(t.Elem(), false, col, 0, steps, leaves)
	}
	k, ok := leafKind(t)
	if !ok {
		return false
	}
	steps = append(steps, step{kind: stepLeaf, nullable: nullable, child: child})
	lp := leafPlan{col: col, steps: steps, kind: k}
	for _, s := range steps {
		if s.nullable {
			lp.maxDef++
		}
		if s.kind == stepList {
			lp.maxDef++
			lp.maxRep++
			lp.lists = true
		}
	}
	*leaves = append(*leaves, lp)
	return true
}

// lists counts the lists among steps.
func lists(steps []step) int16 {
	n := int16(0)
	for _, s := range steps {
		if s.kind == stepList {
			n++
		}
	}
	return n
}

func leafKind(t arrow.DataType) (valueKind, bool) {
	switch t := t.(type) {
	case *arrow.BooleanType:
		return vBool, true
	case *arrow.Int8Type:
		return vInt8, true
	case *arrow.Int16Type:
		return vInt16, true
	case *arrow.Int32Type, *arrow.Date32Type:
		return vInt32, true
	case *arrow.Time32Type:
		return vInt32, t.Unit == arrow.Millisecond
	case *arrow.Int64Type, *arrow.Time64Type:
		return vInt64, true
	case *arrow.TimestampType:
		switch t.Unit {
		case arrow.Second:
			return vTsSec, true
		case arrow.Millisecond:
			return vTsMilli, true
		case arrow.Microsecond:
			return vInt64, true
		case arrow.Nanosecond:
			return vTsNano, true
		}
	case *arrow.Float32Type:
		return vFloat32, true
	case *arrow.Float64Type:
		return vFloat64, true
	case *arrow.StringType, *arrow.BinaryType:
		return vBytes, true
	case *arrow.Decimal128Type:
		return vDecimal, true
	case *extensions.JSONType:
		_, ok := t.StorageType().(*arrow.StringType)
		return vBytes, ok
	}
	return 0, false
}

// physical is the Parquet type of the values of each kind.
var physical = [...]parquet.Type{
	vBool: parquet.Types.Boolean, vInt8: parquet.Types.Int32, vInt16: parquet.Types.Int32,
	vInt32: parquet.Types.Int32, vInt64: parquet.Types.Int64, vTsSec: parquet.Types.Int64,
	vTsMilli: parquet.Types.Int64, vTsNano: parquet.Types.Int64, vFloat32: parquet.Types.Float,
	vFloat64: parquet.Types.Double, vBytes: parquet.Types.ByteArray, vDecimal: parquet.Types.FixedLenByteArray,
}

// bind checks the leaf against the column pqarrow maps it to and takes
// its physical type and path.
func (lp *leafPlan) bind(c *pqschema.Column) bool {
	if c.MaxDefinitionLevel() != lp.maxDef || c.MaxRepetitionLevel() != lp.maxRep {
		return false
	}
	lp.phys, lp.typeLen, lp.path = c.PhysicalType(), c.TypeLength(), c.ColumnPath()
	want := physical[lp.kind]
	if lp.phys != want {
		return false
	}
	switch lt := c.LogicalType().(type) {
	case pqschema.TimestampLogicalType:
		// Timestamps are coerced to microseconds.
		if lt.TimeUnit() != pqschema.TimeUnitMicros {
			return false
		}
	case pqschema.IntLogicalType:
		if !lt.IsSigned() {
			return false
		}
	case pqschema.DecimalLogicalType:
		if lp.typeLen < 1 || lp.typeLen > 16 {
			return false
		}
	}
	if lp.kind == vInt64 {
		if tl, ok := c.LogicalType().(pqschema.TimeLogicalType); ok && tl.TimeUnit() == pqschema.TimeUnitMillis {
			return false
		}
	}
	switch c.SortOrder() {
	case pqschema.SortSIGNED:
		lp.signed = true
	case pqschema.SortUNSIGNED:
	default:
		return false
	}
	if lp.phys == parquet.Types.FixedLenByteArray && !lp.signed {
		return false
	}
	return true
}

// schemaElements writes the list of schema elements of the tree under
// root, depth first, as the footer holds them.
func schemaElements(t *tw, root *pqschema.GroupNode) bool {
	var n int
	var count func(pqschema.Node)
	count = func(nd pqschema.Node) {
		n++
		if g, ok := nd.(*pqschema.GroupNode); ok {
			for i := range g.NumFields() {
				count(g.Field(i))
			}
		}
	}
	count(root)
	// The list header: the field header is the footer's.
	if n < 15 {
		t.b = append(t.b, byte(n)<<4|tStruct)
	} else {
		t.b = append(t.b, 0xf0|tStruct)
		t.uvarint(uint64(n))
	}
	var elem func(nd pqschema.Node, top bool) bool
	elem = func(nd pqschema.Node, top bool) bool {
		t.elem()
		var prim *pqschema.PrimitiveNode
		if p, ok := nd.(*pqschema.PrimitiveNode); ok {
			prim = p
			t.i32(1, int32(p.PhysicalType()))
			if p.PhysicalType() == parquet.Types.FixedLenByteArray {
				t.i32(2, int32(p.TypeLength()))
			}
		}
		if !top {
			t.i32(3, int32(nd.RepetitionType()))
		}
		t.string(4, nd.Name())
		g, group := nd.(*pqschema.GroupNode)
		if group {
			t.i32(5, int32(g.NumFields()))
		}
		if ct := nd.ConvertedType(); ct != pqschema.ConvertedTypes.None {
			t.i32(6, int32(ct))
		}
		if prim != nil && prim.DecimalMetadata().IsSet {
			t.i32(7, prim.DecimalMetadata().Scale)
			t.i32(8, prim.DecimalMetadata().Precision)
		}
		if id := nd.FieldID(); id >= 0 {
			t.i32(9, id)
		}
		if lt := nd.LogicalType(); lt != nil && lt.IsSerialized() {
			if !logicalType(t, lt) {
				return false
			}
		}
		t.end()
		if group {
			for i := range g.NumFields() {
				if !elem(g.Field(i), false) {
					return false
				}
			}
		}
		return true
	}
	return elem(root, true)
}

// logicalType writes field 10 of a schema element, the LogicalType union.
func logicalType(t *tw, lt pqschema.LogicalType) bool {
	empty := func(id int16) {
		t.begin(id)
		t.end()
	}
	unit := func(u pqschema.TimeUnitType) bool {
		// TimeUnit's fields: MILLIS 1, MICROS 2, NANOS 3.
		if u != pqschema.TimeUnitMillis && u != pqschema.TimeUnitMicros && u != pqschema.TimeUnitNanos {
			return false
		}
		t.begin(2)
		empty(int16(u-pqschema.TimeUnitMillis) + 1)
		t.end()
		return true
	}
	t.begin(10)
	switch lt := lt.(type) {
	case pqschema.StringLogicalType:
		empty(1)
	case pqschema.MapLogicalType:
		empty(2)
	case pqschema.ListLogicalType:
		empty(3)
	case pqschema.DecimalLogicalType:
		t.begin(5)
		t.i32(1, lt.Scale())
		t.i32(2, lt.Precision())
		t.end()
	case pqschema.DateLogicalType:
		empty(6)
	case pqschema.TimeLogicalType:
		t.begin(7)
		t.bool(1, lt.IsAdjustedToUTC())
		if !unit(lt.TimeUnit()) {
			return false
		}
		t.end()
	case pqschema.TimestampLogicalType:
		t.begin(8)
		t.bool(1, lt.IsAdjustedToUTC())
		if !unit(lt.TimeUnit()) {
			return false
		}
		t.end()
	case pqschema.IntLogicalType:
		t.begin(10)
		t.byte(1, lt.BitWidth())
		t.bool(2, lt.IsSigned())
		t.end()
	case pqschema.JSONLogicalType:
		empty(12)
	default:
		return false
	}
	t.end()
	return true
}
