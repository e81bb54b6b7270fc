package schema

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/cdclake/cdclake/handlers/change"
)

// Layout is how a table's rows are laid out in Parquet.
type Layout uint8

// Layouts.
const (
	// LayoutImages: one row per change with "before" and "after" STRUCT
	// columns holding the table's columns.
	LayoutImages Layout = iota
	// LayoutFlat: the row image (after, or before for deletes) at top level
	// next to the _cdc_ columns.
	LayoutFlat
	// LayoutEvents: the fixed layout of the _ddl, _transactions and
	// _stream_metadata datasets.
	LayoutEvents
)

// ParseLayout maps a configured layout name.
func ParseLayout(s string) (Layout, bool) {
	switch s {
	case "", "images":
		return LayoutImages, true
	case "flat":
		return LayoutFlat, true
	}
	return 0, false
}

func (l Layout) String() string {
	return [...]string{"images", "flat", "events"}[l]
}

// Metadata column names, in landed order.
const (
	ColOp         = "_cdc_op"
	ColTable      = "_cdc_table"
	ColTS         = "_cdc_ts"
	ColXid        = "_cdc_xid"
	ColPos        = "_cdc_pos"
	ColSource     = "_cdc_source"
	ColPartition  = "_cdc_partition"
	ColOffset     = "_cdc_offset"
	ColIngestedAt = "_cdc_ingested_at"
	ColBefore     = "before"
	ColAfter      = "after"
	// ColBeforeAbsent and ColAfterAbsent list the table's columns that the
	// image did not carry (partial images, unchanged TOAST values): there
	// NULL means "not sent", elsewhere NULL is a SQL NULL. NULL when the
	// image itself is absent.
	ColBeforeAbsent = "_cdc_before_absent"
	ColAfterAbsent  = "_cdc_after_absent"
	// ColAbsent is the flat layout's absent list.
	ColAbsent = "_cdc_absent"
	// Event dataset columns.
	ColKind      = "_cdc_kind"
	ColObject    = "object"
	ColStatement = "statement"
	ColEvent     = "event"
)

// Event dataset names.
const (
	TableDDL            = "_ddl"
	TableTransactions   = "_transactions"
	TableStreamMetadata = "_stream_metadata"
)

var (
	tsUTC      = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	stringList = arrow.ListOfField(arrow.Field{Name: "element", Type: arrow.BinaryTypes.String, Nullable: true})
	metaFields = []arrow.Field{
		{Name: ColOp, Type: arrow.BinaryTypes.String},
		{Name: ColTable, Type: arrow.BinaryTypes.String},
		{Name: ColTS, Type: tsUTC, Nullable: true},
		{Name: ColXid, Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: ColPos, Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: ColSource, Type: arrow.BinaryTypes.String},
		{Name: ColPartition, Type: arrow.PrimitiveTypes.Int32},
		{Name: ColOffset, Type: arrow.PrimitiveTypes.Int64},
		{Name: ColIngestedAt, Type: tsUTC, Nullable: true},
	}
	// NumMeta is the number of leading metadata columns.
	NumMeta = len(metaFields)
)

// OffsetIndex is the index of ColOffset among a table version's columns
// (every layout's metadata columns lead, in one order).
const OffsetIndex = 7

func init() {
	if metaFields[OffsetIndex].Name != ColOffset {
		panic("schema: OffsetIndex does not name " + ColOffset)
	}
}

// ExtraColumn is a format-specific metadata column of a table version.
type ExtraColumn struct {
	Name string
	Kind change.ExtraKind
}

// Table is one version of a table's landed shape. It does not change once
// built and is safe for concurrent use.
type Table struct {
	Name    string
	Version int
	Layout  Layout
	Columns []Column
	Extras  []ExtraColumn
	// Declared is true when the columns come from the source's own schema
	// (Connect schema, GoldenGate metadata) rather than from inference.
	Declared bool
	// Ignore reports whether a source column is excluded by the route (nil:
	// none is); it is safe for concurrent use.
	Ignore func(column string) bool

	Fingerprint uint64
	Arrow       *arrow.Schema

	extraIndex map[string]int
	// set is shared by the versions with these columns.
	set *ColumnSet
}

// ColumnSet is what table versions with the same columns share, of any
// table: the columns, their index, their Arrow struct type. Thousands of
// tables of one shape (a schema per tenant, a table per month) then cost
// their names, not their columns each.
type ColumnSet struct {
	cols  []Column
	index map[string]int
	// sibling[i] is the index of column i's text sibling, or -1;
	// siblings is set when a column has one.
	sibling  []int
	siblings bool
	// names are the columns' names as bytes (the absent columns' lists).
	names [][]byte
	st    *arrow.StructType // nil without columns
}

// columnSets holds every ColumnSet made, by the key of its columns
// (Column.writeKey).
var columnSets sync.Map

// columnSet returns the ColumnSet of cols.
func columnSet(cols []Column) *ColumnSet {
	var b strings.Builder
	for _, c := range cols {
		c.writeKey(&b)
	}
	key := b.String()
	if s, ok := columnSets.Load(key); ok {
		return s.(*ColumnSet)
	}
	// Clipped, so that appending to a version's columns copies them.
	s := &ColumnSet{cols: slices.Clip(slices.Clone(cols)), index: make(map[string]int, len(cols)), sibling: make([]int, len(cols))}
	for i, c := range cols {
		s.index[c.Name] = i
		s.names = append(s.names, []byte(c.Name))
	}
	for i, c := range cols {
		s.sibling[i] = -1
		if HasSibling(c.Type) {
			if j, ok := s.index[TextSibling(c.Name)]; ok {
				s.sibling[i], s.siblings = j, true
			}
		}
	}
	if len(cols) > 0 {
		s.st = arrow.StructOf(Fields(cols)...)
	}
	actual, _ := columnSets.LoadOrStore(key, s)
	return actual.(*ColumnSet)
}

// writeKey writes everything c is made of.
func (c Column) writeKey(b *strings.Builder) {
	b.WriteString(strconv.Quote(c.Name))
	fmt.Fprintf(b, "%t%t", c.Nullable, c.Key)
	c.Type.writeKey(b)
	b.WriteByte(';')
}

func (t Type) writeKey(b *strings.Builder) {
	fmt.Fprintf(b, "{%d %d %d %d %d %t %q", t.Kind, t.Enc, t.Precision, t.Scale, t.Unit, t.UTC, t.Logical)
	for _, f := range t.Fields {
		f.writeKey(b)
	}
	for _, n := range []*Type{t.Elem, t.Key, t.Value} {
		if n == nil {
			b.WriteString("-")
		} else {
			n.writeKey(b)
		}
	}
	b.WriteByte('}')
}

// ColumnSet returns what the version shares with every version of the
// same columns: equal pointers, equal columns.
func (t *Table) ColumnSet() *ColumnSet { return t.set }

// TextSibling names the column that holds, as exact text, the values of a
// typed column that its type cannot hold.
func TextSibling(column string) string { return column + "__text" }

// ColumnNames returns the columns' names as bytes, shared by every
// version of the same columns: read only.
func (t *Table) ColumnNames() [][]byte { return t.set.names }

// Sibling returns the index of column i's text sibling, if it has one.
func (t *Table) Sibling(i int) (int, bool) {
	j := t.set.sibling[i]
	return j, j >= 0
}

// HasSiblings reports whether a column of the version has a text sibling.
func (t *Table) HasSiblings() bool { return t.set.siblings }

// NewTable builds a table version and its Arrow schema.
func NewTable(name string, version int, layout Layout, cols []Column, extras []ExtraColumn, declared bool, ignore func(string) bool) *Table {
	extras = slices.Clone(extras)
	slices.SortFunc(extras, func(a, b ExtraColumn) int { return strings.Compare(a.Name, b.Name) })
	set := columnSet(cols)
	t := &Table{Name: name, Version: version, Layout: layout, Columns: set.cols, Extras: extras,
		Declared: declared, Ignore: ignore, set: set, extraIndex: make(map[string]int, len(extras))}
	fields := slices.Clone(metaFields)
	for i, e := range extras {
		t.extraIndex[e.Name] = i
		fields = append(fields, arrow.Field{Name: e.Name, Type: extraType(e.Kind), Nullable: true})
	}
	switch layout {
	case LayoutImages:
		// A table with no known column yet (a TRUNCATE before any row) has
		// no image columns: Parquet has no empty groups.
		if len(cols) > 0 {
			fields = append(fields,
				arrow.Field{Name: ColBefore, Type: set.st, Nullable: true},
				arrow.Field{Name: ColAfter, Type: set.st, Nullable: true})
		}
		fields = append(fields,
			arrow.Field{Name: ColBeforeAbsent, Type: stringList, Nullable: true},
			arrow.Field{Name: ColAfterAbsent, Type: stringList, Nullable: true})
	case LayoutFlat:
		if set.st != nil {
			fields = append(fields, set.st.Fields()...)
		}
		fields = append(fields, arrow.Field{Name: ColAbsent, Type: stringList, Nullable: true})
	case LayoutEvents:
		fields = append(fields,
			arrow.Field{Name: ColKind, Type: arrow.BinaryTypes.String},
			arrow.Field{Name: ColObject, Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: ColStatement, Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: ColEvent, Type: jsonType, Nullable: true})
	}
	md := arrow.NewMetadata([]string{"cdclake.table", "cdclake.version"}, []string{name, strconv.Itoa(version)})
	t.Arrow = arrow.NewSchema(fields, &md)
	t.Fingerprint = fingerprint(layout, cols, extras)
	return t
}

// Fingerprint is the Fingerprint NewTable gives a table of this shape,
// computed without building it.
func Fingerprint(layout Layout, cols []Column, extras []ExtraColumn) uint64 {
	if !slices.IsSortedFunc(extras, func(a, b ExtraColumn) int { return strings.Compare(a.Name, b.Name) }) {
		extras = slices.Clone(extras)
		slices.SortFunc(extras, func(a, b ExtraColumn) int { return strings.Compare(a.Name, b.Name) })
	}
	return fingerprint(layout, cols, extras)
}

// fingerprint hashes a shape whose extras are sorted by name.
func fingerprint(layout Layout, cols []Column, extras []ExtraColumn) uint64 {
	h := fnv.New64a()
	h.Write([]byte(layout.String()))
	for _, c := range cols {
		h.Write([]byte(c.Name))
		h.Write([]byte{0})
		h.Write([]byte(c.Type.key()))
		h.Write([]byte{0})
	}
	for _, e := range extras {
		h.Write([]byte(e.Name))
		h.Write([]byte{byte(e.Kind)})
	}
	return h.Sum64()
}

func extraType(k change.ExtraKind) arrow.DataType {
	switch k {
	case change.ExtraJSON:
		return jsonType
	case change.ExtraTimestamp:
		return tsUTC
	case change.ExtraBinary:
		return arrow.BinaryTypes.Binary
	}
	return arrow.BinaryTypes.String
}

// ColumnIndex returns the index of the named column.
func (t *Table) ColumnIndex(name []byte) (int, bool) {
	i, ok := t.set.index[string(name)]
	return i, ok
}

// ExtraIndex returns the index of the named extra column.
func (t *Table) ExtraIndex(name string) (int, bool) {
	i, ok := t.extraIndex[name]
	return i, ok
}

// Ignored reports whether a source column is excluded by the route.
func (t *Table) Ignored(column []byte) bool {
	return t.Ignore != nil && t.Ignore(string(column))
}

// SameShape reports whether t and o land identically.
func (t *Table) SameShape(o *Table) bool { return o != nil && t.Fingerprint == o.Fingerprint }
