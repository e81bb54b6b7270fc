package goldengate

import (
	"bytes"

	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/decode"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/valyala/fastjson"
)

// DataStreams decodes GoldenGate Data Streams records. It is not safe for
// concurrent use.
type DataStreams struct {
	opts   Options
	opList string // the accepted op_type values, for error messages
	stmt   decode.Recent
	frame
}

// FormatDataStreams is the format name of DataStreams.
const FormatDataStreams = "goldengate"

var (
	_ decode.Decoder         = (*DataStreams)(nil)
	_ decode.Detector        = (*DataStreams)(nil)
	_ decode.MetadataColumns = (*DataStreams)(nil)
)

// NewDataStreams returns a decoder for records written with opts. Empty
// fields of opts take their defaults; invalid options are an error naming
// their keys.
func NewDataStreams(opts Options) (*DataStreams, error) {
	opts.SetDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &DataStreams{
		opts:   opts,
		opList: opts.InsertOp + ", " + opts.UpdateOp + ", " + opts.DeleteOp + ", " + opts.UpsertOp + ", " + opDDL + ", " + opStreamMetadata + " or " + opObjectMetadata,
	}, nil
}

// Format returns FormatDataStreams.
func (d *DataStreams) Format() string { return FormatDataStreams }

// Detect reports whether v looks like a Data Streams record with the
// default field names (see Detection in the package
// documentation).
func (d *DataStreams) Detect(v *fastjson.Value, _ *change.Change) bool {
	return detect(v) == FormatDataStreams
}

// MetadataColumns maps an OBJECT_METADATA record and the table's JSON
// Schema record (nil when none was sent) to columns; see ObjectColumns.
func (d *DataStreams) MetadataColumns(meta, jsonSchema *fastjson.Value, numbers schema.Type) ([]schema.Column, error) {
	return ObjectColumns(meta, jsonSchema, numbers)
}

// dsFields holds the recognised top-level fields of one record.
type dsFields struct {
	table, op, ts, xid, pos, csn, tokens, before, after, ddl *fastjson.Value
	dup                                                      string
	// Bit i is set when the record's i-th field (i < 64) is a recognised
	// field other than an image or ddl, an image, or ddl.
	common, images, ddlKey uint64
}

// Decode classifies the Data Streams record v and fills c; see the package
// documentation for the rules. It implements decode.Decoder.
func (d *DataStreams) Decode(v *fastjson.Value, c *change.Change) error {
	o, err := record(v)
	if err != nil {
		return err
	}
	c.Format = FormatDataStreams
	var f dsFields
	d.collect(o, &f)
	if f.dup != "" {
		return decode.Malformed("field %q appears more than once", f.dup)
	}
	if isNull(f.op) {
		return d.schemaRecord(o, v, c)
	}
	op, err := f.op.StringBytes()
	if err != nil {
		return decode.Malformed("%s is a JSON %s, want a string", d.opts.OpType, f.op.Type())
	}
	switch {
	case eq(op, d.opts.InsertOp):
		return d.dml(o, &f, change.OpInsert, c)
	case eq(op, d.opts.UpdateOp):
		return d.dml(o, &f, change.OpUpdate, c)
	case eq(op, d.opts.DeleteOp):
		return d.dml(o, &f, change.OpDelete, c)
	case eq(op, d.opts.UpsertOp):
		return d.dml(o, &f, change.OpUpsert, c)
	case eq(op, opDDL):
		return d.ddl(o, v, &f, c)
	case eq(op, opStreamMetadata):
		c.Kind = change.KindStreamMetadata
		c.Raw = v
		return nil
	case eq(op, opObjectMetadata):
		table, err := d.table(f.table)
		if err != nil {
			return err
		}
		if cols := o.Get("columns"); cols == nil || cols.Type() != fastjson.TypeObject {
			return decode.Malformed("%s record for %s: columns is not an object", opObjectMetadata, table)
		}
		c.Kind = change.KindObjectMetadata
		c.Table = table
		c.Raw = v
		return nil
	}
	return decode.Malformed("unknown %s %q (want %s)", d.opts.OpType, clip(op), d.opList)
}

// collect finds the recognised fields of o in one pass.
func (d *DataStreams) collect(o *fastjson.Object, f *dsFields) {
	set := func(p **fastjson.Value, x *fastjson.Value, name string) {
		if *p != nil {
			f.dup = name
		}
		*p = x
	}
	i := 0
	o.Visit(func(k []byte, x *fastjson.Value) {
		bit := uint64(0)
		if i < 64 {
			bit = 1 << i
		}
		i++
		mask := &f.common
		switch {
		case eq(k, d.opts.QualifiedTable):
			set(&f.table, x, d.opts.QualifiedTable)
		case eq(k, d.opts.OpType):
			set(&f.op, x, d.opts.OpType)
		case eq(k, d.opts.OpTimestamp):
			set(&f.ts, x, d.opts.OpTimestamp)
		case eq(k, d.opts.TransactionID):
			set(&f.xid, x, d.opts.TransactionID)
		case eq(k, d.opts.Position):
			set(&f.pos, x, d.opts.Position)
		case eq(k, d.opts.CSN):
			set(&f.csn, x, d.opts.CSN)
		case eq(k, d.opts.Tokens):
			set(&f.tokens, x, d.opts.Tokens)
		case eq(k, d.opts.BeforeImage):
			set(&f.before, x, d.opts.BeforeImage)
			mask = &f.images
		case eq(k, d.opts.AfterImage):
			set(&f.after, x, d.opts.AfterImage)
			mask = &f.images
		case eq(k, "ddl"):
			set(&f.ddl, x, "ddl")
			mask = &f.ddlKey
		default:
			return
		}
		*mask |= bit
	})
}

// schemaRecord handles a record without op_type: a JSON Schema record or
// nothing this decoder knows.
func (d *DataStreams) schemaRecord(o *fastjson.Object, v *fastjson.Value, c *change.Change) error {
	id := o.Get("id")
	if o.Get("$schema") == nil && (id == nil || o.Get("properties") == nil || o.Get("type") == nil) {
		return decode.Malformed("no %s, and not a JSON Schema record", d.opts.OpType)
	}
	if id == nil || id.Type() != fastjson.TypeString {
		return decode.Malformed("JSON Schema record without a string id")
	}
	s, _ := id.StringBytes()
	if len(SchemaTable(s)) == 0 {
		return decode.Malformed("JSON Schema record with an empty id")
	}
	c.Kind = change.KindSchemaRecord
	c.Table = d.tables.Get(SchemaTable(s))
	c.Raw = v
	return nil
}

// SchemaTable returns the object a JSON Schema record's id names: the id
// without a trailing ".json" and without everything up to its last '/'
// ("SALES.ORDERS", ".../schemas/SALES.ORDERS.json" and
// "ogg:schema/SALES.ORDERS" all name SALES.ORDERS). Ids of schema types
// (ogg:objectMetadata) come back unchanged.
func SchemaTable(id []byte) []byte {
	if t, ok := bytes.CutSuffix(id, []byte(".json")); ok && len(t) > 0 {
		id = t
	}
	if i := bytes.LastIndexByte(id, '/'); i >= 0 && i+1 < len(id) {
		id = id[i+1:]
	}
	return id
}

// table returns the qualified table name in v, which must be a non-empty
// string.
func (d *DataStreams) table(v *fastjson.Value) (string, error) {
	if isNull(v) {
		return "", decode.Malformed("missing %s", d.opts.QualifiedTable)
	}
	s, err := v.StringBytes()
	if err != nil {
		return "", decode.Malformed("%s is a JSON %s, want a string", d.opts.QualifiedTable, v.Type())
	}
	if len(s) == 0 {
		return "", decode.Malformed("empty %s", d.opts.QualifiedTable)
	}
	return d.tables.Get(s), nil
}

// position fills c's time, transaction and position from f.
func (d *DataStreams) position(f *dsFields, c *change.Change) error {
	if err := opTime(f.ts, d.opts.OpTimestamp, c); err != nil {
		return err
	}
	if !isNull(f.xid) {
		b, ok := scalarText(&d.scratch, f.xid)
		if !ok {
			return decode.Malformed("%s is a JSON %s, want a string", d.opts.TransactionID, f.xid.Type())
		}
		c.Xid = d.xid.Get(b, &d.slab)
	}
	if !isNull(f.pos) {
		b, ok := scalarText(&d.scratch, f.pos)
		if !ok {
			return decode.Malformed("%s is a JSON %s, want a string", d.opts.Position, f.pos.Type())
		}
		c.Pos = d.slab.String(b)
	}
	return nil
}

// opTime parses the operation time in v into c, if v is present.
func opTime(v *fastjson.Value, field string, c *change.Change) error {
	if isNull(v) {
		return nil
	}
	s, err := v.StringBytes()
	if err != nil {
		return decode.Malformed("%s is a JSON %s, want a string", field, v.Type())
	}
	ts, err := schema.ParseTimestamp(s, schema.Micros, true)
	if err != nil {
		return decode.Malformed("%s: %v", field, err)
	}
	c.TSMicros, c.HasTS = ts, true
	return nil
}

func (d *DataStreams) dml(o *fastjson.Object, f *dsFields, op change.Op, c *change.Change) error {
	table, err := d.table(f.table)
	if err != nil {
		return err
	}
	c.Kind, c.Op, c.Table = change.KindDML, op, table
	if err := d.position(f, c); err != nil {
		return err
	}
	if c.Before, err = image(f.before, d.opts.BeforeImage); err != nil {
		return err
	}
	if c.After, err = image(f.after, d.opts.AfterImage); err != nil {
		return err
	}
	switch op {
	case change.OpInsert, change.OpUpdate, change.OpUpsert:
		if !c.After.Present() {
			return decode.Malformed("%s on %s without %s image", op, table, d.opts.AfterImage)
		}
	case change.OpDelete:
		if !c.Before.Present() {
			return decode.Malformed("%s on %s without %s image", op, table, d.opts.BeforeImage)
		}
	}
	return d.extras(o, f, false, c)
}

func (d *DataStreams) ddl(o *fastjson.Object, v *fastjson.Value, f *dsFields, c *change.Change) error {
	if f.ddl == nil || f.ddl.Type() != fastjson.TypeObject {
		return decode.Malformed("%s record without a ddl object", opDDL)
	}
	c.Kind = change.KindDDL
	c.Raw = v
	if st := f.ddl.Get("statement"); st != nil && st.Type() == fastjson.TypeString {
		b, _ := st.StringBytes()
		c.Statement = d.stmt.Get(b, &d.slab)
	}
	if err := d.ddlTable(f, c); err != nil {
		return err
	}
	if err := d.position(f, c); err != nil {
		return err
	}
	return d.extras(o, f, true, c)
}

// ddlTable names the DDL's object: catalog, schema and object joined with
// dots, leaving out empty parts; qual_table when there are none.
func (d *DataStreams) ddlTable(f *dsFields, c *change.Change) error {
	obj := f.ddl.Get("object")
	b := d.scratch[:0]
	if !isNull(obj) {
		if obj.Type() != fastjson.TypeObject {
			return decode.Malformed("ddl.object is a JSON %s, want an object", obj.Type())
		}
		for _, part := range [...]string{"catalog", "schema", "object"} {
			p := obj.Get(part)
			if isNull(p) {
				continue
			}
			s, err := p.StringBytes()
			if err != nil {
				return decode.Malformed("ddl.object.%s is a JSON %s, want a string", part, p.Type())
			}
			if len(s) == 0 {
				continue
			}
			if len(b) > 0 {
				b = append(b, '.')
			}
			b = append(b, s...)
		}
	}
	d.scratch = b[:0]
	if len(b) > 0 {
		c.Table = d.tables.Get(b)
		return nil
	}
	if !isNull(f.table) {
		t, err := d.table(f.table)
		if err != nil {
			return err
		}
		c.Table = t
	}
	return nil
}

// extras adds _gg_csn, _gg_tokens and _gg_meta to c.
func (d *DataStreams) extras(o *fastjson.Object, f *dsFields, ddl bool, c *change.Change) error {
	if !isNull(f.csn) {
		b, ok := scalarText(&d.scratch, f.csn)
		if !ok {
			return decode.Malformed("%s is a JSON %s, want a string or number", d.opts.CSN, f.csn.Type())
		}
		c.AddString(ExtraCSN, b)
	}
	if !isNull(f.tokens) {
		if f.tokens.Type() != fastjson.TypeObject {
			return decode.Malformed("%s is a JSON %s, want an object", d.opts.Tokens, f.tokens.Type())
		}
		c.AddJSON(ExtraTokens, f.tokens)
	}
	skip := f.common | f.images
	if ddl {
		skip = f.common | f.ddlKey
	}
	m := &d.meta
	m.reset()
	i := 0
	o.Visit(func(k []byte, x *fastjson.Value) {
		if i < 64 && skip&(1<<i) != 0 || i >= 64 && d.consumed(k, ddl) {
			i++
			return
		}
		i++
		m.add(k, x)
	})
	m.flush(c)
	return nil
}

// consumed reports whether the field k is decoded into the Change rather
// than kept in _gg_meta. A DDL record has no images: fields named like them
// are kept.
func (d *DataStreams) consumed(k []byte, ddl bool) bool {
	if ddl {
		if eq(k, "ddl") {
			return true
		}
	} else if eq(k, d.opts.BeforeImage) || eq(k, d.opts.AfterImage) {
		return true
	}
	return eq(k, d.opts.QualifiedTable) || eq(k, d.opts.OpType) || eq(k, d.opts.OpTimestamp) ||
		eq(k, d.opts.TransactionID) || eq(k, d.opts.Position) || eq(k, d.opts.CSN) || eq(k, d.opts.Tokens)
}
