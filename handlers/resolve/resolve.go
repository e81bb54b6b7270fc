// Package resolve is the schema stage: it keeps what the stream said about
// its tables (metadata records, in-band row schemas) and gives every row
// change the table version it lands in.
//
// # Versions
//
// A table's version changes when its landed shape changes: a new in-band
// schema, refreshed metadata, a column that appears, an inferred type that
// must widen, a new metadata extra. A shape seen before keeps the version
// it had, so a source that switches between two schemas does not make a
// version per switch. The batch stage opens a file per version (rotation);
// an older version's open file stays open until its own rules close it.
//
// # Sources of columns, in order
//
//  1. The message's own row schema, when its decoder implements
//     decode.SchemaColumns (Debezium with a Kafka Connect schema).
//  2. The latest metadata records for the table, when the decoder
//     implements decode.MetadataColumns (GoldenGate OBJECT_METADATA refined
//     by the table's JSON Schema record).
//  3. Inference from the row images (no schema available). A column first
//     seen as NULL has no type until a value arrives.
//
// Route overrides replace the type of named columns in all three cases.
//
// # Partitions
//
// What a row lands as depends on its own source partition alone: each
// partition has its own Scope, with the metadata records it carried and
// the versions its tables took. A row therefore resolves the same way
// whichever partitions an instance owns and in whatever order they
// arrive, and a new owner of a partition, given back what the partition's
// catalog recorded below its committed offset (Scope.Restore), resolves
// the rows after it as the previous owner did. Metadata records describe
// the rows of their own partition (sources key them by table, as rows).
//
// # Concurrency
//
// One Resolver serves every pipeline worker and is safe for concurrent
// use; a Scope serialises on its own lock. The tables they return are
// immutable.
package resolve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/decode"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/valyala/fastjson"
)

// TableOptions are the per-table settings of the route a table matched.
// They are shared by every table of the route and must not change.
type TableOptions struct {
	Layout schema.Layout
	// Numbers is the type of columns that metadata calls only "number"
	// (GoldenGate), when no override names them. Kind Null means exact
	// decimal text.
	Numbers schema.Type
	// Overrides replace the type of named columns; OverrideGlobs those of
	// the columns whose names match a glob (path.Match), tried in order
	// after Overrides (see Override).
	Overrides     map[string]schema.Type
	OverrideGlobs []GlobType
	// Ignore reports whether a source column is excluded; nil excludes
	// none. It must be safe for concurrent use.
	Ignore func(column string) bool
	// SourceKey and SourceHeaders land each row's source record key
	// (_cdc_key, binary) and headers (_cdc_headers, JSON).
	SourceKey, SourceHeaders bool
	// PlainJSON lands JSON columns as plain strings (schema.PlainJSON),
	// for tables committed to Iceberg.
	PlainJSON bool
	// TimeAsText lands times of day as text, HH:MM:SS and the fraction
	// of their unit (MySQL's durations beyond a day too), and NullAsText
	// lands an inferred column first seen NULL as text (any later value
	// as its JSON text), rather than as a column of NULLs: for Delta
	// tables, which have no time type, and whose readers cannot read a
	// column of NULLs as the type a later file gives it.
	TimeAsText, NullAsText bool
}

// landed returns the type a column of type t lands as under the options.
func (o *TableOptions) landed(t schema.Type) schema.Type {
	switch {
	case o.TimeAsText && t.Kind == schema.Time:
		return timeText(t)
	case o.NullAsText && t.Kind == schema.Null:
		return schema.Type{Kind: schema.String, Enc: schema.EncText}
	}
	return t
}

// timeText returns the text type of a time of day: a count of its unit
// since midnight as [-]HH:MM:SS.fraction, text values as they are.
func timeText(t schema.Type) schema.Type {
	if t.Enc == schema.EncEpochUnit {
		return schema.Type{Kind: schema.String, Enc: schema.EncDuration, Unit: t.Unit, Logical: t.Logical}
	}
	return schema.Type{Kind: schema.String, Logical: t.Logical}
}

// newTable builds a table version with the route's options.
func (o *TableOptions) newTable(name string, version int, cols []schema.Column, extras []schema.ExtraColumn, declared bool) *schema.Table {
	t := schema.NewTable(name, version, o.Layout, cols, extras, declared, o.Ignore)
	if o.PlainJSON {
		t.Arrow = schema.PlainJSON(t.Arrow)
	}
	return t
}

// GlobType is a type override for the columns a glob matches.
type GlobType struct {
	Glob string
	Type schema.Type
}

// Override returns the type a route declares for a column: by its name,
// else by the first glob that matches it.
func (o *TableOptions) Override(column string) (schema.Type, bool) {
	if t, ok := o.Overrides[column]; ok {
		return t, true
	}
	for _, g := range o.OverrideGlobs {
		if ok, _ := path.Match(g.Glob, column); ok {
			return g.Type, true
		}
	}
	return schema.Type{}, false
}

func (o *TableOptions) ignored(column string) bool {
	return o.Ignore != nil && o.Ignore(column)
}

// Resolver is the schema stage.
type Resolver struct {
	options func(table string) *TableOptions
	log     *slog.Logger

	mu     sync.Mutex
	scopes map[scopeKey]*Scope
	events map[string]map[uint64]*schema.Table // by fingerprint
}

type scopeKey struct {
	source string
	part   int32
}

// Scope is the decoding state of one source partition.
type Scope struct {
	r  *Resolver
	mu sync.Mutex
	// The latest metadata records, by the table they describe: schema
	// records (KindSchemaRecord) and object metadata (KindObjectMetadata),
	// as JSON text.
	schemaRecords map[string][]byte
	objectMeta    map[string][]byte
	tables        map[string]*tableState
	parser        fastjson.Parser
	parser2       fastjson.Parser
}

type tableState struct {
	opts *TableOptions
	cur  *schema.Table
	// versions holds every version of the table by fingerprint, and
	// numbers the number of every version the partition's table took
	// (also those a Restore knows only by fingerprint); version is the
	// highest.
	versions map[uint64]*schema.Table
	numbers  map[uint64]int
	version  int
	// schemaKey is the in-band schema text cur was built from.
	schemaKey []byte
	// metaStale is set when the table's metadata records changed.
	metaStale bool
	// fromMeta is set when cur was built from metadata records.
	fromMeta bool
}

// New returns a Resolver; options gives each table's route settings.
func New(options func(table string) *TableOptions, log *slog.Logger) *Resolver {
	return &Resolver{options: options, log: log,
		scopes: map[scopeKey]*Scope{}, events: map[string]map[uint64]*schema.Table{}}
}

// Partition returns the decoding state of a source partition, made at its
// first use.
func (r *Resolver) Partition(source string, part int32) *Scope {
	k := scopeKey{source, part}
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.scopes[k]
	if !ok {
		s = &Scope{r: r, schemaRecords: map[string][]byte{}, objectMeta: map[string][]byte{},
			tables: map[string]*tableState{}}
		r.scopes[k] = s
	}
	return s
}

// Forget drops the decoding state of a source partition (it moved to
// another instance); the next use starts afresh.
func (r *Resolver) Forget(source string, part int32) {
	r.mu.Lock()
	delete(r.scopes, scopeKey{source, part})
	r.mu.Unlock()
}

// Observe records what a non-row message says about schemas: schema
// records and object metadata are kept by table (a re-sent one replaces
// the old), and a DDL or schema change marks its table's metadata stale.
func (r *Scope) Observe(c *change.Change) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch c.Kind {
	case change.KindSchemaRecord:
		if r.keep(r.schemaRecords, c) {
			r.stale(c.Table)
		}
	case change.KindObjectMetadata:
		if r.keep(r.objectMeta, c) {
			r.stale(c.Table)
		}
	case change.KindDDL, change.KindSchemaChange:
		r.stale(c.Table)
	}
}

// keep stores c's record under its table and reports whether it changed.
func (r *Scope) keep(m map[string][]byte, c *change.Change) bool {
	text := c.Raw.MarshalTo(nil)
	if old, ok := m[c.Table]; ok && bytes.Equal(old, text) {
		return false
	}
	m[c.Table] = text
	return true
}

func (r *Scope) stale(table string) {
	if st, ok := r.tables[table]; ok {
		st.metaStale = true
	}
}

func (r *Scope) state(table string) *tableState {
	st, ok := r.tables[table]
	if !ok {
		st = &tableState{opts: r.r.options(table), versions: map[uint64]*schema.Table{}, numbers: map[uint64]int{}}
		r.tables[table] = st
	}
	return st
}

// Resolve returns the table version a row change decoded by dec lands in,
// and whether it is not the version the partition's previous row of the
// table landed in (see Record).
func (r *Scope) Resolve(c *change.Change, dec decode.Decoder) (*schema.Table, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.state(c.Table)
	cur := st.cur
	sc, hasSC := dec.(decode.SchemaColumns)
	mc, hasMC := dec.(decode.MetadataColumns)
	switch {
	case c.Schema != nil && hasSC:
		if cur == nil || !bytes.Equal(st.schemaKey, c.SchemaKey) {
			cols, err := sc.Columns(c.Schema)
			if err != nil {
				return nil, false, fmt.Errorf("table %s: row schema: %w", c.Table, err)
			}
			t, err := r.build(st, c, cols, true)
			if err != nil {
				return nil, false, err
			}
			st.schemaKey = append(st.schemaKey[:0], c.SchemaKey...)
			cur = t
		}
	case hasMC && r.objectMeta[c.Table] != nil:
		if cur == nil || st.metaStale || !st.fromMeta {
			meta, err := r.parser.ParseBytes(r.objectMeta[c.Table])
			if err != nil {
				return nil, false, err
			}
			var js *fastjson.Value
			if raw := r.schemaRecords[c.Table]; raw != nil {
				if js, err = r.parser2.ParseBytes(raw); err != nil {
					return nil, false, err
				}
			}
			cols, err := mc.MetadataColumns(meta, js, st.opts.Numbers)
			if err != nil {
				return nil, false, fmt.Errorf("table %s: metadata: %w", c.Table, err)
			}
			t, err := r.build(st, c, cols, true)
			if err != nil {
				return nil, false, err
			}
			st.metaStale, st.fromMeta = false, true
			cur = t
		}
	}
	// Columns the declared schema lacks, inferred widening, new extras.
	if t, changed, err := r.evolve(st, cur, c); err != nil {
		return nil, false, err
	} else if changed {
		cur = t
	}
	changed := st.cur == nil || !cur.SameShape(st.cur)
	if changed {
		if st.cur != nil {
			r.r.log.Info("table schema changed", "table", c.Table, "version", cur.Version,
				"columns", len(cur.Columns))
		}
		st.cur = cur
	}
	return st.cur, changed, nil
}

// Event returns the version of an event dataset (_ddl, _transactions,
// _stream_metadata) that holds c: the version whose extra columns are
// exactly c's. The shape depends on the event alone, so which file an
// event lands in does not depend on what other partitions sent before it.
func (r *Resolver) Event(name string, c *change.Change) *schema.Table {
	extras := make([]schema.ExtraColumn, 0, len(c.Extras))
	for _, e := range c.Extras {
		extras = append(extras, schema.ExtraColumn{Name: e.Name, Kind: e.Kind})
	}
	fp := schema.Fingerprint(schema.LayoutEvents, nil, extras)
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.events[name]
	if st == nil {
		st = map[uint64]*schema.Table{}
		r.events[name] = st
	}
	if old, ok := st[fp]; ok {
		return old
	}
	t := schema.NewTable(name, len(st)+1, schema.LayoutEvents, nil, extras, true, nil)
	st[t.Fingerprint] = t
	return t
}

// build makes a new version from declared columns, applying the route's
// overrides and exclusions and keeping the current extras.
func (r *Scope) build(st *tableState, c *change.Change, cols []schema.Column, declared bool) (*schema.Table, error) {
	out := make([]schema.Column, 0, len(cols))
	for _, col := range cols {
		if !utf8.ValidString(col.Name) {
			return nil, fmt.Errorf("table %s: a column name is not valid UTF-8: %q", c.Table, col.Name)
		}
		if st.opts.ignored(col.Name) {
			continue
		}
		if ov, ok := st.opts.Override(col.Name); ok {
			t, err := override(col.Type, ov)
			if err != nil {
				return nil, fmt.Errorf("table %s column %s: %w", c.Table, col.Name, err)
			}
			col.Type = t
		}
		col.Type = st.opts.landed(col.Type)
		out = append(out, col)
	}
	// The version carries the extras it will be used with, so that a first
	// row with metadata does not make a second version at once.
	var extras []schema.ExtraColumn
	if st.cur != nil {
		extras = append(extras, st.cur.Extras...)
	}
	for _, e := range c.Extras {
		if !slices.ContainsFunc(extras, func(x schema.ExtraColumn) bool { return x.Name == e.Name }) {
			extras = append(extras, schema.ExtraColumn{Name: e.Name, Kind: e.Kind})
		}
	}
	return r.newVersion(st, c.Table, out, extras, declared), nil
}

// newVersion returns the version of the given shape: the one the table
// already has, or a new one.
func (r *Scope) newVersion(st *tableState, name string, cols []schema.Column, extras []schema.ExtraColumn, declared bool) *schema.Table {
	fp := schema.Fingerprint(st.opts.Layout, cols, extras)
	if old, ok := st.versions[fp]; ok {
		return old
	}
	n, ok := st.numbers[fp]
	if !ok {
		st.version++
		n = st.version
		st.numbers[fp] = n
	}
	t := st.opts.newTable(name, n, cols, extras, declared)
	st.versions[fp] = t
	return t
}

// override returns the type of a column whose route declares type ov.
func override(src, ov schema.Type) (schema.Type, error) {
	switch src.Enc {
	case schema.EncNative, schema.EncText:
		return ov, nil
	case schema.EncBase64Decimal:
		if ov.Kind == schema.Decimal && ov.Scale == src.Scale {
			ov.Enc = src.Enc
			return ov, nil
		}
		if ov.Kind == schema.DecimalText {
			ov.Enc, ov.Scale = src.Enc, src.Scale
			return ov, nil
		}
	case schema.EncVariableScale:
		if ov.Kind == schema.Decimal || ov.Kind == schema.DecimalText {
			ov.Enc = src.Enc
			return ov, nil
		}
	case schema.EncEpochUnit:
		if src.Kind == schema.Time && ov.Kind == schema.String {
			return timeText(src), nil
		}
	}
	return schema.Type{}, fmt.Errorf("cannot land %s values as %s", src, ov)
}

// evolve checks the change against cur and returns a new version when a
// column is new, an inferred type must widen, or an extra is new.
func (r *Scope) evolve(st *tableState, cur *schema.Table, c *change.Change) (*schema.Table, bool, error) {
	e := evolution{st: st, cur: cur, declared: cur != nil && cur.Declared}
	for _, img := range [2]change.Image{c.Before, c.After} {
		if !img.Present() {
			continue
		}
		e.next = 0 // images name their columns in order, as a rule
		img.Obj.Visit(e.column)
	}
	if e.badName != nil {
		return nil, false, fmt.Errorf("table %s: a column name is not valid UTF-8: %q", c.Table, e.badName)
	}
	extras := newExtras(cur, c)
	if !e.changed && extras == nil && cur != nil {
		return cur, false, nil
	}
	e.ensure()
	if extras == nil && cur != nil {
		extras = cur.Extras
	}
	return r.newVersion(st, c.Table, e.cols, extras, e.declared), true, nil
}

// evolution is evolve's pass over a change's images: the columns of the
// next version, copied from cur on the first change (cols is nil until
// then).
type evolution struct {
	st       *tableState
	cur      *schema.Table
	declared bool
	cols     []schema.Column
	changed  bool
	// next is the index the image's next column has when the image names
	// the columns in cur's order.
	next    int
	badName []byte
}

// ensure copies cur's columns into cols, once.
func (e *evolution) ensure() {
	if e.cols == nil {
		if e.cur != nil {
			e.cols = append([]schema.Column(nil), e.cur.Columns...)
		} else {
			e.cols = []schema.Column{}
		}
	}
}

// index returns the index of the column named key, if there is one.
func (e *evolution) index(key []byte) (int, bool) {
	if e.cols != nil {
		return indexOf(e.cols, key)
	}
	if e.cur == nil {
		return 0, false
	}
	idx, ok := e.next, e.next < len(e.cur.Columns) && e.cur.Columns[e.next].Name == string(key)
	if !ok {
		idx, ok = e.cur.ColumnIndex(key)
	}
	e.next = idx + 1
	return idx, ok
}

// column checks one column of an image: a new one is added with its
// inferred (or overridden) type, a declared one that overflows its type
// gets its text sibling, an inferred one that no longer holds its value
// widens.
func (e *evolution) column(key []byte, v *fastjson.Value) {
	idx, ok := e.index(key)
	if !ok {
		e.add(key, v)
		return
	}
	var t schema.Type
	if e.cols != nil {
		t = e.cols[idx].Type
	} else {
		t = e.cur.Columns[idx].Type
	}
	if e.declared && t.Kind != schema.Null {
		e.sibling(key, t, v)
		return
	}
	if _, has := e.st.opts.Override(string(key)); has {
		return
	}
	if !schema.Accepts(t, v) {
		e.ensure()
		e.cols[idx].Type = schema.Widen(t, v)
		e.changed = true
	}
}

// add adds the new column key, unless the route ignores it; a name that
// is not valid UTF-8 fails the change.
func (e *evolution) add(key []byte, v *fastjson.Value) {
	name := string(key)
	if e.st.opts.ignored(name) {
		return
	}
	if !utf8.Valid(key) {
		e.badName = key
		return
	}
	e.ensure()
	t := schema.Infer(v)
	if ov, has := e.st.opts.Override(name); has {
		t = ov
	}
	e.cols = append(e.cols, schema.Column{Name: name, Type: e.st.opts.landed(t), Nullable: true})
	e.changed = true
}

// sibling adds the text sibling of the declared column key of type t on
// first need. The converter checks declared types: a zoned timestamp no
// TIMESTAMP(µs) can hold (SQL Server datetimeoffset(7) digits,
// PostgreSQL's year 294276) or a time beyond a day (MySQL and MariaDB TIME
// is a signed duration) goes, as exact text, to the sibling; the typed
// column keeps its type.
func (e *evolution) sibling(key []byte, t schema.Type, v *fastjson.Value) {
	if !schema.Overflow(t, v) {
		return
	}
	name := schema.TextSibling(string(key))
	has := false
	if e.cols != nil {
		_, has = indexOf(e.cols, []byte(name))
	} else if e.cur != nil {
		_, has = e.cur.ColumnIndex([]byte(name))
	}
	if !has {
		e.ensure()
		e.cols = append(e.cols, schema.Column{Name: name, Nullable: true, Type: schema.SiblingType(t)})
		e.changed = true
	}
}

// newExtras returns cur's extra columns and the change's new ones, nil
// when the change has none cur lacks.
func newExtras(cur *schema.Table, c *change.Change) []schema.ExtraColumn {
	var extras []schema.ExtraColumn
	for _, e := range c.Extras {
		if cur != nil {
			if _, ok := cur.ExtraIndex(e.Name); ok {
				continue
			}
		}
		if extras == nil && cur != nil {
			extras = append(extras, cur.Extras...)
		}
		extras = append(extras, schema.ExtraColumn{Name: e.Name, Kind: e.Kind})
	}
	return extras
}

func indexOf(cols []schema.Column, key []byte) (int, bool) {
	for i := range cols {
		if cols[i].Name == string(key) {
			return i, true
		}
	}
	return 0, false
}

// versionRecord is a table version as a partition's catalog keeps it: the
// version a partition's rows of the table land in from the offset of the
// record on, until the next.
type versionRecord struct {
	Table       string               `json:"table"`
	Version     int                  `json:"version"`
	Fingerprint uint64               `json:"fingerprint,string"`
	Columns     []schema.Column      `json:"columns"`
	Extras      []schema.ExtraColumn `json:"extras,omitempty"`
	Declared    bool                 `json:"declared,omitempty"`
	FromMeta    bool                 `json:"from_metadata,omitempty"`
	// Numbers are the numbers of the table's earlier versions in the
	// partition, by fingerprint (in decimal): a shape seen again keeps its
	// number.
	Numbers map[string]int `json:"numbers,omitempty"`
}

// Record returns, as JSON, the version the partition's rows of table land
// in now, for Restore: inferred columns and widened types depend on every
// row before, which a new owner of the partition does not read again.
func (r *Scope) Record(table string) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st, ok := r.tables[table]
	if !ok || st.cur == nil {
		return nil, fmt.Errorf("table %s has no version in this partition", table)
	}
	t := st.cur
	v := versionRecord{Table: t.Name, Version: t.Version, Fingerprint: t.Fingerprint,
		Columns: t.Columns, Extras: t.Extras, Declared: t.Declared, FromMeta: st.fromMeta}
	for fp, n := range st.numbers {
		if fp != t.Fingerprint {
			if v.Numbers == nil {
				v.Numbers = map[string]int{}
			}
			v.Numbers[strconv.FormatUint(fp, 10)] = n
		}
	}
	return json.Marshal(v) // maps marshal in key order
}

// ErrRouteChanged is returned by Restore for a version the table's route
// settings (layout, overrides, exclusions) no longer make.
var ErrRouteChanged = errors.New("the table's route settings changed since the version was recorded")

// Restore makes a version Record returned the partition's current one for
// its table. The metadata records observed after it (in offset order)
// still make the next row's version be built again.
func (r *Scope) Restore(data []byte) error {
	var v versionRecord
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("a recorded table version: %w", err)
	}
	if v.Table == "" {
		return errors.New("a recorded table version names no table")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.state(v.Table)
	t := st.opts.newTable(v.Table, v.Version, v.Columns, v.Extras, v.Declared)
	if t.Fingerprint != v.Fingerprint {
		return fmt.Errorf("table %s version %d: %w", v.Table, v.Version, ErrRouteChanged)
	}
	for _, col := range v.Columns {
		ov, has := st.opts.Override(col.Name)
		if st.opts.ignored(col.Name) || has && ov.Kind != col.Type.Kind {
			return fmt.Errorf("table %s version %d, column %s: %w", v.Table, v.Version, col.Name, ErrRouteChanged)
		}
	}
	numbers := map[uint64]int{t.Fingerprint: v.Version}
	for k, n := range v.Numbers {
		fp, err := strconv.ParseUint(k, 10, 64)
		if err != nil {
			return fmt.Errorf("table %s version %d: a version's fingerprint %q: %w", v.Table, v.Version, k, err)
		}
		numbers[fp] = n
	}
	if old, ok := st.versions[t.Fingerprint]; ok {
		t = old
	} else {
		st.versions[t.Fingerprint] = t
	}
	for fp, n := range numbers {
		st.numbers[fp] = n
		st.version = max(st.version, n)
	}
	st.cur, st.fromMeta, st.metaStale, st.schemaKey = t, v.FromMeta, false, st.schemaKey[:0]
	return nil
}
