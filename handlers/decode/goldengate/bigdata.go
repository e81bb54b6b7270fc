package goldengate

import (
	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/decode"
	"github.com/valyala/fastjson"
)

// BigData decodes messages of the GoldenGate for Big Data JSON formatter in
// operation mode. It is not safe for concurrent use.
type BigData struct {
	opts   BigDataOptions
	opList string
	frame
}

// FormatBigData is the format name of BigData.
const FormatBigData = "goldengate-bigdata"

var (
	_ decode.Decoder  = (*BigData)(nil)
	_ decode.Detector = (*BigData)(nil)
)

// NewBigData returns a decoder for messages written with opts. Empty fields
// of opts take their defaults; invalid options are an error naming their
// keys.
func NewBigData(opts BigDataOptions) (*BigData, error) {
	opts.SetDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &BigData{
		opts:   opts,
		opList: opts.InsertOp + ", " + opts.UpdateOp + ", " + opts.DeleteOp + ", " + opts.TruncateOp + ", INSERT, UPDATE, DELETE or TRUNCATE",
	}, nil
}

// Format returns FormatBigData.
func (d *BigData) Format() string { return FormatBigData }

// Detect reports whether v looks like a Big Data JSON formatter message
// with the default field names (see Detection in the package
// documentation).
func (d *BigData) Detect(v *fastjson.Value, _ *change.Change) bool {
	return detect(v) == FormatBigData
}

type bdFields struct {
	table, op, ts, currentTS, pos, xid, csn, pks, tokens, before, after *fastjson.Value
	dup                                                                 string
}

// Decode decodes the JSON formatter message v into c; see the package
// documentation for the fields. It implements decode.Decoder.
func (d *BigData) Decode(v *fastjson.Value, c *change.Change) error {
	o, err := record(v)
	if err != nil {
		return err
	}
	c.Format = FormatBigData
	var f bdFields
	d.collect(o, &f)
	if f.dup != "" {
		return decode.Malformed("field %q appears more than once", f.dup)
	}
	if isNull(f.op) {
		return decode.Malformed("missing %s", d.opts.OpType)
	}
	opText, err := f.op.StringBytes()
	if err != nil {
		return decode.Malformed("%s is a JSON %s, want a string", d.opts.OpType, f.op.Type())
	}
	op := d.op(opText)
	if op == change.OpNone {
		return decode.Malformed("unknown %s %q (want %s)", d.opts.OpType, clip(opText), d.opList)
	}
	if isNull(f.table) {
		return decode.Malformed("missing %s", d.opts.Table)
	}
	table, err := f.table.StringBytes()
	if err != nil {
		return decode.Malformed("%s is a JSON %s, want a string", d.opts.Table, f.table.Type())
	}
	if len(table) == 0 {
		return decode.Malformed("empty %s", d.opts.Table)
	}
	c.Kind, c.Op, c.Table = change.KindDML, op, d.tables.Get(table)

	if err := opTime(f.ts, d.opts.OpTimestamp, c); err != nil {
		return err
	}
	if !isNull(f.pos) {
		b, ok := scalarText(&d.scratch, f.pos)
		if !ok {
			return decode.Malformed("%s is a JSON %s, want a string", d.opts.Position, f.pos.Type())
		}
		c.Pos = d.slab.String(b)
	}
	if !isNull(f.xid) {
		b, ok := scalarText(&d.scratch, f.xid)
		if !ok {
			return decode.Malformed("%s is a JSON %s, want a string", d.opts.TransactionID, f.xid.Type())
		}
		c.Xid = d.xid.Get(b, &d.slab)
	}
	if c.Before, err = image(f.before, d.opts.BeforeImage); err != nil {
		return err
	}
	if c.After, err = image(f.after, d.opts.AfterImage); err != nil {
		return err
	}
	switch op {
	case change.OpInsert, change.OpUpdate:
		if !c.After.Present() {
			return decode.Malformed("%s on %s without %s image", op, c.Table, d.opts.AfterImage)
		}
	case change.OpDelete:
		if !c.Before.Present() {
			return decode.Malformed("%s on %s without %s image", op, c.Table, d.opts.BeforeImage)
		}
	case change.OpTruncate:
		if c.Before.Present() || c.After.Present() {
			return decode.Malformed("%s on %s with a row image", op, c.Table)
		}
	}
	return d.extras(o, &f, c)
}

// op maps an operation string: configured keys first, then long forms.
func (d *BigData) op(s []byte) change.Op {
	switch {
	case eq(s, d.opts.InsertOp):
		return change.OpInsert
	case eq(s, d.opts.UpdateOp):
		return change.OpUpdate
	case eq(s, d.opts.DeleteOp):
		return change.OpDelete
	case eq(s, d.opts.TruncateOp):
		return change.OpTruncate
	case eq(s, "INSERT"):
		return change.OpInsert
	case eq(s, "UPDATE"):
		return change.OpUpdate
	case eq(s, "DELETE"):
		return change.OpDelete
	case eq(s, "TRUNCATE"):
		return change.OpTruncate
	}
	return change.OpNone
}

func (d *BigData) collect(o *fastjson.Object, f *bdFields) {
	set := func(p **fastjson.Value, x *fastjson.Value, name string) {
		if *p != nil {
			f.dup = name
		}
		*p = x
	}
	o.Visit(func(k []byte, x *fastjson.Value) {
		switch {
		case eq(k, d.opts.Table):
			set(&f.table, x, d.opts.Table)
		case eq(k, d.opts.OpType):
			set(&f.op, x, d.opts.OpType)
		case eq(k, d.opts.OpTimestamp):
			set(&f.ts, x, d.opts.OpTimestamp)
		case eq(k, d.opts.CurrentTimestamp):
			set(&f.currentTS, x, d.opts.CurrentTimestamp)
		case eq(k, d.opts.Position):
			set(&f.pos, x, d.opts.Position)
		case eq(k, d.opts.TransactionID):
			set(&f.xid, x, d.opts.TransactionID)
		case eq(k, d.opts.CSN):
			set(&f.csn, x, d.opts.CSN)
		case eq(k, d.opts.PrimaryKeys):
			set(&f.pks, x, d.opts.PrimaryKeys)
		case eq(k, d.opts.Tokens):
			set(&f.tokens, x, d.opts.Tokens)
		case eq(k, d.opts.BeforeImage):
			set(&f.before, x, d.opts.BeforeImage)
		case eq(k, d.opts.AfterImage):
			set(&f.after, x, d.opts.AfterImage)
		}
	})
}

// extras adds _gg_current_ts, _gg_csn, _gg_primary_keys, _gg_tokens and
// _gg_meta.
func (d *BigData) extras(o *fastjson.Object, f *bdFields, c *change.Change) error {
	if !isNull(f.currentTS) {
		s, err := f.currentTS.StringBytes()
		if err != nil {
			return decode.Malformed("%s is a JSON %s, want a string", d.opts.CurrentTimestamp, f.currentTS.Type())
		}
		c.AddString(ExtraCurrentTS, s)
	}
	if !isNull(f.csn) {
		b, ok := scalarText(&d.scratch, f.csn)
		if !ok {
			return decode.Malformed("%s is a JSON %s, want a string or number", d.opts.CSN, f.csn.Type())
		}
		c.AddString(ExtraCSN, b)
	}
	if !isNull(f.pks) {
		if f.pks.Type() != fastjson.TypeArray {
			return decode.Malformed("%s is a JSON %s, want an array", d.opts.PrimaryKeys, f.pks.Type())
		}
		c.AddJSON(ExtraPrimaryKeys, f.pks)
	}
	if !isNull(f.tokens) {
		if f.tokens.Type() != fastjson.TypeObject {
			return decode.Malformed("%s is a JSON %s, want an object", d.opts.Tokens, f.tokens.Type())
		}
		c.AddJSON(ExtraTokens, f.tokens)
	}
	m := &d.meta
	m.reset()
	o.Visit(func(k []byte, x *fastjson.Value) {
		if d.consumed(k) {
			return
		}
		m.add(k, x)
	})
	m.flush(c)
	return nil
}

func (d *BigData) consumed(k []byte) bool {
	return eq(k, d.opts.Table) || eq(k, d.opts.OpType) || eq(k, d.opts.OpTimestamp) ||
		eq(k, d.opts.CurrentTimestamp) || eq(k, d.opts.Position) || eq(k, d.opts.TransactionID) ||
		eq(k, d.opts.CSN) || eq(k, d.opts.PrimaryKeys) ||
		eq(k, d.opts.Tokens) || eq(k, d.opts.BeforeImage) || eq(k, d.opts.AfterImage)
}
