// Package resolve is the schema stage: it keeps what the stream said about
// its tables (GoldenGate JSON Schema records and OBJECT_METADATA, Kafka
// Connect schemas) and gives every row change the table version it lands
// in.
//
// # Versions
//
// A table's version changes when its landed shape changes: a new Connect
// schema, refreshed GoldenGate metadata, a column that appears, an inferred
// type that must widen, a new metadata extra. The batch stage closes the
// open file of the old version (rotation).
//
// # Sources of columns, in order
//
//  1. The message's own Kafka Connect schema (Debezium, schemas.enable=true).
//  2. GoldenGate OBJECT_METADATA for the table, refined by its JSON Schema.
//  3. Inference from the row images (no schema available). A column first
//     seen as NULL has no type until a value arrives.
//
// Route overrides replace the type of named columns in all three cases.
package resolve

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/decode/debezium"
	"github.com/cdclake/cdclake/handlers/decode/goldengate"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/valyala/fastjson"
)

// TableOptions are the per-table settings of the route a table matched.
type TableOptions struct {
	Layout schema.Layout
	// Numbers is the type of GoldenGate "number" columns without an
	// override (default: exact decimal text).
	Numbers schema.Type
	// Overrides replace the type of named columns.
	Overrides map[string]schema.Type
	// Ignore reports whether a source column is excluded.
	Ignore func(column string) bool
}

// Resolver is the schema stage. Not safe for concurrent use.
type Resolver struct {
	options func(table string) *TableOptions
	log     *slog.Logger

	ggSchemas map[string][]byte // JSON Schema records by id
	ggMeta    map[string][]byte // OBJECT_METADATA by qual_table
	tables    map[string]*tableState
	parser    fastjson.Parser
	parser2   fastjson.Parser
}

type tableState struct {
	opts    *TableOptions
	ignore  map[string]bool
	cur     *schema.Table
	version int
	// schemaKey is the Connect schema text cur was built from.
	schemaKey []byte
	// metaStale is set when GoldenGate metadata for the table changed.
	metaStale bool
	// fromMeta is set when cur was built from GoldenGate metadata.
	fromMeta bool
}

// New returns a Resolver; options gives each table's route settings.
func New(options func(table string) *TableOptions, log *slog.Logger) *Resolver {
	return &Resolver{options: options, log: log,
		ggSchemas: map[string][]byte{}, ggMeta: map[string][]byte{}, tables: map[string]*tableState{}}
}

// Observe records what a non-row message says about schemas: JSON Schema
// records and OBJECT_METADATA are cached (a re-sent one replaces the old),
// and a DDL marks its table's metadata stale.
func (r *Resolver) Observe(c *change.Change) {
	switch c.Kind {
	case change.KindSchemaRecord:
		r.ggSchemas[c.Table] = c.Raw.MarshalTo(nil)
		for name, st := range r.tables {
			if strings.Contains(c.Table, name) {
				st.metaStale = true
			}
		}
	case change.KindObjectMetadata:
		text := c.Raw.MarshalTo(nil)
		if old, ok := r.ggMeta[c.Table]; ok && bytes.Equal(old, text) {
			return
		}
		r.ggMeta[c.Table] = text
		if st, ok := r.tables[c.Table]; ok {
			st.metaStale = true
		}
	case change.KindDDL, change.KindSchemaChange:
		if st, ok := r.tables[c.Table]; ok {
			st.metaStale = true
		}
	}
}

// Options returns the route settings of a table.
func (r *Resolver) Options(table string) *TableOptions { return r.state(table).opts }

func (r *Resolver) state(table string) *tableState {
	st, ok := r.tables[table]
	if !ok {
		st = &tableState{opts: r.options(table), ignore: map[string]bool{}}
		r.tables[table] = st
	}
	return st
}

// Resolve returns the table version a row change lands in.
func (r *Resolver) Resolve(c *change.Change) (*schema.Table, error) {
	st := r.state(c.Table)
	cur := st.cur
	switch {
	case c.Schema != nil:
		if cur == nil || !bytes.Equal(st.schemaKey, c.SchemaKey) {
			cols, err := debezium.Columns(c.Schema)
			if err != nil {
				return nil, fmt.Errorf("table %s: connect schema: %w", c.Table, err)
			}
			t, err := r.build(st, c, cols, true)
			if err != nil {
				return nil, err
			}
			st.schemaKey = append(st.schemaKey[:0], c.SchemaKey...)
			cur = t
		}
	case c.Format == change.FormatGoldenGate && r.ggMeta[c.Table] != nil:
		if cur == nil || st.metaStale || !st.fromMeta {
			meta, err := r.parser.ParseBytes(r.ggMeta[c.Table])
			if err != nil {
				return nil, err
			}
			var js *fastjson.Value
			if raw := r.jsonSchemaFor(c.Table); raw != nil {
				js, _ = r.parser2.ParseBytes(raw)
			}
			cols, err := goldengate.ObjectColumns(meta, js, st.opts.Numbers)
			if err != nil {
				return nil, fmt.Errorf("table %s: object metadata: %w", c.Table, err)
			}
			t, err := r.build(st, c, cols, true)
			if err != nil {
				return nil, err
			}
			st.metaStale, st.fromMeta = false, true
			cur = t
		}
	}
	// Columns the declared schema lacks, inferred widening, new extras.
	if t, changed, err := r.evolve(st, cur, c); err != nil {
		return nil, err
	} else if changed {
		cur = t
	}
	if st.cur == nil || !cur.SameShape(st.cur) {
		if st.cur != nil {
			r.log.Info("table schema changed", "table", c.Table, "version", cur.Version,
				"columns", len(cur.Columns))
		}
		st.cur = cur
	}
	return st.cur, nil
}

// jsonSchemaFor finds the GoldenGate JSON Schema record for a table: its id
// names the qualified object.
func (r *Resolver) jsonSchemaFor(table string) []byte {
	if raw, ok := r.ggSchemas[table]; ok {
		return raw
	}
	for id, raw := range r.ggSchemas {
		if strings.HasSuffix(id, table) || strings.HasSuffix(id, table+".json") || strings.Contains(id, "/"+table) {
			return raw
		}
	}
	return nil
}

// build makes a new version from declared columns, applying the route's
// overrides and exclusions and keeping the current extras.
func (r *Resolver) build(st *tableState, c *change.Change, cols []schema.Column, declared bool) (*schema.Table, error) {
	out := make([]schema.Column, 0, len(cols))
	for _, col := range cols {
		if st.opts.Ignore != nil && st.opts.Ignore(col.Name) {
			st.ignore[col.Name] = true
			continue
		}
		if ov, ok := st.opts.Overrides[col.Name]; ok {
			t, err := override(col.Type, ov)
			if err != nil {
				return nil, fmt.Errorf("table %s column %s: %w", c.Table, col.Name, err)
			}
			col.Type = t
		}
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

func (r *Resolver) newVersion(st *tableState, name string, cols []schema.Column, extras []schema.ExtraColumn, declared bool) *schema.Table {
	t := schema.NewTable(name, st.version+1, st.opts.Layout, cols, extras, declared, st.ignore)
	if st.cur != nil && t.SameShape(st.cur) {
		return st.cur
	}
	st.version++
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
	}
	return schema.Type{}, fmt.Errorf("cannot land %s values as %s", src, ov)
}

// evolve checks the change against cur and returns a new version when a
// column is new, an inferred type must widen, or an extra is new.
func (r *Resolver) evolve(st *tableState, cur *schema.Table, c *change.Change) (*schema.Table, bool, error) {
	var cols []schema.Column
	changed := false
	ensure := func() {
		if cols == nil {
			if cur != nil {
				cols = append([]schema.Column(nil), cur.Columns...)
			} else {
				cols = []schema.Column{}
			}
		}
	}
	declared := cur != nil && cur.Declared
	for _, img := range [2]change.Image{c.Before, c.After} {
		if !img.Present() {
			continue
		}
		img.Obj.Visit(func(key []byte, v *fastjson.Value) {
			if st.ignore[string(key)] {
				return
			}
			var idx int
			var ok bool
			if cols != nil {
				idx, ok = indexOf(cols, key)
			} else if cur != nil {
				idx, ok = cur.ColumnIndex(key)
			}
			if !ok {
				name := string(key)
				if st.opts.Ignore != nil && st.opts.Ignore(name) {
					st.ignore[name] = true
					return
				}
				ensure()
				t := schema.Infer(v)
				if ov, has := st.opts.Overrides[name]; has {
					t = ov
				}
				cols = append(cols, schema.Column{Name: name, Type: t, Nullable: true})
				changed = true
				return
			}
			var t schema.Type
			if cols != nil {
				t = cols[idx].Type
			} else {
				t = cur.Columns[idx].Type
			}
			if declared && t.Kind != schema.Null {
				// The converter checks declared types. A zoned timestamp no
				// TIMESTAMP(µs) can hold (SQL Server datetimeoffset(7)
				// digits, PostgreSQL's year 294276) goes, as exact text, to
				// the column's text sibling, added here on first need; the
				// typed column keeps its type.
				if t.Enc == schema.EncZoned && !schema.ZonedFits(v) {
					name := schema.TextSibling(string(key))
					has := false
					if cols != nil {
						_, has = indexOf(cols, []byte(name))
					} else if cur != nil {
						_, has = cur.ColumnIndex([]byte(name))
					}
					if !has {
						ensure()
						cols = append(cols, schema.Column{Name: name, Nullable: true,
							Type: schema.Type{Kind: schema.String, Enc: schema.EncText, Logical: t.Logical}})
						changed = true
					}
				}
				return
			}
			if _, has := st.opts.Overrides[string(key)]; has {
				return
			}
			if !schema.Accepts(t, v) {
				ensure()
				cols[idx].Type = schema.Widen(t, v)
				changed = true
			}
		})
	}
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
		changed = true
	}
	if cur == nil {
		changed = true
	}
	if !changed {
		return cur, false, nil
	}
	ensure()
	if extras == nil && cur != nil {
		extras = cur.Extras
	}
	t := r.newVersion(st, c.Table, cols, extras, declared)
	return t, true, nil
}

func indexOf(cols []schema.Column, key []byte) (int, bool) {
	for i := range cols {
		if cols[i].Name == string(key) {
			return i, true
		}
	}
	return 0, false
}
