package debezium

import (
	"bytes"
	"strings"

	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/decode"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/valyala/fastjson"
)

// Names of the extras the decoder adds to data changes.
const (
	ExtraSource      = "_debezium_source"
	ExtraTS          = "_debezium_ts"
	ExtraTransaction = "_debezium_transaction"
)

// Decoder decodes Debezium payloads. Not safe for concurrent use.
type Decoder struct {
	opts Options
	ph   placeholder

	env envelope
	src sourceFields

	tables decode.Interner
	xid    decode.Recent
	pos    decode.Recent
	stmt   decode.Recent
	slab   decode.Slab

	buf  []byte   // scratch: table and position text
	dels []string // image keys to delete (unavailable values)
}

// Format is the format name of the Decoder.
const Format = "debezium"

var (
	_ decode.Decoder       = (*Decoder)(nil)
	_ decode.Detector      = (*Decoder)(nil)
	_ decode.SchemaColumns = (*Decoder)(nil)
)

// New returns a Decoder, or an error naming the option that is invalid.
func New(opts Options) (*Decoder, error) {
	opts.setDefaults()
	raw, err := placeholderBytes(opts.UnavailableValuePlaceholder)
	if err != nil {
		return nil, err
	}
	return &Decoder{opts: opts, ph: newPlaceholder(raw)}, nil
}

// Format returns Format.
func (d *Decoder) Format() string { return Format }

// Detect reports whether v looks like a Debezium payload; see the package
// function Detect. A Kafka Connect envelope (c.Schema set) relaxes the
// rules.
func (d *Decoder) Detect(v *fastjson.Value, c *change.Change) bool {
	return Detect(v, c.Schema != nil)
}

// Columns maps the row schema the decoder put in Change.Schema to columns;
// see the package function Columns.
func (d *Decoder) Columns(rowSchema *fastjson.Value) ([]schema.Column, error) {
	return Columns(rowSchema)
}

// envelope holds the recognised top-level fields of a payload.
type envelope struct {
	n                               int
	op, before, after, source, tx   *fastjson.Value
	tsMs, tsUs                      *fastjson.Value
	status, id                      *fastjson.Value
	databaseName, ddl, tableChanges *fastjson.Value
	dup                             string
}

func (e *envelope) set(dst **fastjson.Value, k []byte, v *fastjson.Value) {
	if *dst != nil && e.dup == "" {
		e.dup = string(k)
	}
	*dst = v
}

func (e *envelope) visit(k []byte, v *fastjson.Value) {
	e.n++
	switch string(k) {
	case "op":
		e.set(&e.op, k, v)
	case "before":
		e.set(&e.before, k, v)
	case "after":
		e.set(&e.after, k, v)
	case "source":
		e.set(&e.source, k, v)
	case "transaction":
		e.set(&e.tx, k, v)
	case "ts_ms":
		e.set(&e.tsMs, k, v)
	case "ts_us":
		e.set(&e.tsUs, k, v)
	case "status":
		e.set(&e.status, k, v)
	case "id":
		e.set(&e.id, k, v)
	case "databaseName":
		e.set(&e.databaseName, k, v)
	case "ddl":
		e.set(&e.ddl, k, v)
	case "tableChanges":
		e.set(&e.tableChanges, k, v)
	}
}

// Decode classifies one Debezium payload and fills c (see the package
// documentation). It may delete unavailable-value columns from v's images.
func (d *Decoder) Decode(v *fastjson.Value, c *change.Change) error {
	c.Format = Format
	if v == nil || v.Type() != fastjson.TypeObject {
		return decode.Malformed("debezium: payload is not a JSON object")
	}
	o, _ := v.Object()
	d.env = envelope{}
	e := &d.env
	o.Visit(e.visit)
	if e.dup != "" {
		return decode.Malformed("debezium: field %q given twice", e.dup)
	}
	switch {
	case e.op != nil:
		return d.decodeOp(v, c)
	case e.status != nil && e.id != nil:
		return d.decodeTransaction(v, c)
	case e.databaseName != nil && (e.ddl != nil || e.tableChanges != nil):
		return d.decodeSchemaChange(v, c)
	case e.tsMs != nil && (e.n == 1 || isHeartbeatSchema(c.Schema)):
		c.Kind = change.KindHeartbeat
		c.Raw = v
		return d.setTS(c, e.tsMs)
	}
	return decode.Malformed("debezium: not a Debezium event: no op, transaction status, schema change or heartbeat fields")
}

func isHeartbeatSchema(s *fastjson.Value) bool {
	if s == nil {
		return false
	}
	name := s.Get("name")
	if name == nil || name.Type() != fastjson.TypeString {
		return false
	}
	b, _ := name.StringBytes()
	return bytes.HasSuffix(b, []byte("Heartbeat"))
}

// decodeOp decodes a change event (one with an op): a row change, a
// truncate, or a logical decoding message.
func (d *Decoder) decodeOp(v *fastjson.Value, c *change.Change) error {
	e := &d.env
	opb, ok := stringBytes(e.op)
	if !ok || len(opb) != 1 {
		return decode.Malformed("debezium: op %s is not one of c, u, d, r, t, m", clip(e.op.MarshalTo(d.buf[:0])))
	}
	if opb[0] == 'm' {
		c.Kind = change.KindMessage
		c.Raw = v
		if e.source != nil && e.source.Type() == fastjson.TypeObject {
			return d.readSource(c)
		}
		return nil
	}
	if err := setOp(c, opb); err != nil {
		return err
	}
	c.Kind = change.KindDML
	if err := d.readImages(c, opb); err != nil {
		return err
	}
	row, hasTx, err := d.readEnvelope(c)
	if err != nil {
		return err
	}
	if err := d.readSource(c); err != nil {
		return err
	}
	if err := d.nameTable(c); err != nil {
		return err
	}
	// The database's own transaction id (PostgreSQL and Oracle txId) is the
	// same for every event of a transaction; Debezium's transaction.id is
	// not always (PostgreSQL's is txId:lsn of each event). It is the
	// fallback, as for MySQL, where it is the GTID or binlog position.
	if hasTx && c.Xid == "" {
		if id := e.tx.Get("id"); !isNull(id) {
			d.buf = scalarText(d.buf[:0], id)
			c.Xid = d.xid.Get(d.buf, &d.slab)
		}
	}
	if row != nil {
		c.Schema = row
	}
	if !d.opts.KeepUnavailable {
		d.dropUnavailable(c.Before.Obj)
		d.dropUnavailable(c.After.Obj)
	}
	return nil
}

// setOp sets the operation of a row change from its op.
func setOp(c *change.Change, opb []byte) error {
	switch opb[0] {
	case 'c':
		c.Op = change.OpInsert
	case 'u':
		c.Op = change.OpUpdate
	case 'd':
		c.Op = change.OpDelete
	case 'r':
		c.Op = change.OpRead
	case 't':
		c.Op = change.OpTruncate
	default:
		return decode.Malformed("debezium: op %q is not one of c, u, d, r, t, m", opb)
	}
	return nil
}

// readImages reads the before and after images and checks that the op
// has the images it must have.
func (d *Decoder) readImages(c *change.Change, opb []byte) error {
	var err error
	if c.Before, err = image(d.env.before, "before"); err != nil {
		return err
	}
	if c.After, err = image(d.env.after, "after"); err != nil {
		return err
	}
	switch c.Op {
	case change.OpInsert, change.OpUpdate, change.OpRead:
		if !c.After.Present() {
			return decode.Malformed("debezium: op %q without an after image", opb)
		}
	case change.OpDelete:
		if c.After.Present() {
			return decode.Malformed("debezium: op \"d\" with an after image")
		}
	case change.OpTruncate:
		if c.Before.Present() || c.After.Present() {
			return decode.Malformed("debezium: op \"t\" with a row image")
		}
	}
	return nil
}

// readEnvelope checks the envelope's source and transaction blocks and
// its schema, and keeps the source block, the envelope's time and the
// transaction block as extras. It returns the row schema of an event with
// an Envelope schema, and whether the event has a transaction block.
func (d *Decoder) readEnvelope(c *change.Change) (row *fastjson.Value, hasTx bool, err error) {
	e := &d.env
	if e.source == nil || e.source.Type() != fastjson.TypeObject {
		return nil, false, decode.Malformed("debezium: data change without a source object")
	}
	if e.tx != nil && e.tx.Type() != fastjson.TypeNull {
		if e.tx.Type() != fastjson.TypeObject {
			return nil, false, decode.Malformed("debezium: transaction is not an object")
		}
		hasTx = true
	}
	if c.Schema != nil {
		if row = rowSchema(c.Schema); row == nil {
			return nil, false, decode.Malformed("debezium: Envelope schema has no after or before field")
		}
	}
	envTS, hasEnvTS, err := micros(e.tsUs, e.tsMs)
	if err != nil {
		return nil, false, decode.Malformed("debezium: envelope %s", err)
	}
	// Marshal the blocks before reading them: fastjson writes keys and
	// strings it has not yet unescaped verbatim, which is much faster.
	c.AddJSON(ExtraSource, e.source)
	if hasEnvTS {
		c.AddTimestamp(ExtraTS, envTS)
	}
	if hasTx {
		c.AddJSON(ExtraTransaction, e.tx)
	}
	return row, hasTx, nil
}

// nameTable names the change's table where its source block does not: by
// the Envelope schema's name, else by the topic.
func (d *Decoder) nameTable(c *change.Change) error {
	if c.Table == "" && c.Schema != nil {
		// The Oracle connector's documented events name no schema or
		// table in their source block; the Envelope schema is named
		// {topic prefix}.{schema}.{table}.Envelope, like the topic.
		if name, ok := stringBytes(c.Schema.Get("name")); ok {
			if t, found := bytes.CutSuffix(name, []byte(".Envelope")); found && len(t) > 0 {
				c.Table = d.tables.Get(t)
			}
		}
	}
	if c.Table == "" && c.Topic != "" {
		c.Table = c.Topic // the topic, named after the table by Debezium
	}
	if c.Table == "" {
		return decode.Malformed("debezium: source names no table, nor does an Envelope schema name or a topic")
	}
	return nil
}

func image(v *fastjson.Value, field string) (change.Image, error) {
	if v == nil {
		return change.Image{}, nil
	}
	switch v.Type() {
	case fastjson.TypeNull:
		return change.Image{}, nil
	case fastjson.TypeObject:
		o, _ := v.Object()
		return change.Image{Obj: o}, nil
	}
	return change.Image{}, decode.Malformed("debezium: %s is not an object but %s", field, v.Type())
}

// rowSchema returns the schema of the Envelope's after field, else of its
// before field.
func rowSchema(env *fastjson.Value) *fastjson.Value {
	if env.Type() != fastjson.TypeObject {
		return nil
	}
	fields := env.Get("fields")
	if fields == nil || fields.Type() != fastjson.TypeArray {
		return nil
	}
	arr, _ := fields.Array()
	var before *fastjson.Value
	for _, f := range arr {
		name, ok := stringBytes(f.Get("field"))
		if !ok {
			continue
		}
		switch string(name) {
		case "after":
			if f.Type() == fastjson.TypeObject {
				return f
			}
		case "before":
			if before == nil && f.Type() == fastjson.TypeObject {
				before = f
			}
		}
	}
	return before
}

func (d *Decoder) decodeTransaction(v *fastjson.Value, c *change.Change) error {
	e := &d.env
	st, _ := stringBytes(e.status)
	if string(st) != "BEGIN" && string(st) != "END" {
		return decode.Malformed("debezium: transaction status %s is not BEGIN or END", clip(e.status.MarshalTo(d.buf[:0])))
	}
	if e.id.Type() != fastjson.TypeString && e.id.Type() != fastjson.TypeNumber {
		return decode.Malformed("debezium: transaction id is not a string or number but %s", e.id.Type())
	}
	c.Kind = change.KindTransaction
	c.Raw = v
	d.buf = scalarText(d.buf[:0], e.id)
	c.Xid = d.xid.Get(postgresTxID(d.buf), &d.slab)
	return d.setTS(c, e.tsMs)
}

// postgresTxID returns the txId of a PostgreSQL transaction id "txId:lsn"
// (all digits on both sides), so that BEGIN and END rows carry the same
// _cdc_xid as the changes of their transaction; any other id (a MySQL
// GTID, a SQL Server LSN) is returned whole.
func postgresTxID(id []byte) []byte {
	colon := -1
	for i, ch := range id {
		switch {
		case ch == ':' && colon < 0 && i > 0:
			colon = i
		case ch < '0' || ch > '9':
			return id
		}
	}
	if colon < 0 || colon == len(id)-1 {
		return id
	}
	return id[:colon]
}

func (d *Decoder) decodeSchemaChange(v *fastjson.Value, c *change.Change) error {
	e := &d.env
	db, ok := stringBytes(e.databaseName)
	if !ok {
		return decode.Malformed("debezium: schema change databaseName is not a string")
	}
	c.Kind = change.KindSchemaChange
	c.Raw = v
	if st, ok := stringBytes(e.ddl); ok {
		c.Statement = d.stmt.Get(st, &d.slab)
	}
	if e.source != nil && e.source.Type() == fastjson.TypeObject {
		if err := d.readSource(c); err != nil {
			return err
		}
	}
	c.Table = ""
	if e.tableChanges != nil && e.tableChanges.Type() == fastjson.TypeArray {
		arr, _ := e.tableChanges.Array()
		if len(arr) > 0 {
			id, ok := stringBytes(arr[0].Get("id"))
			if !ok {
				return decode.Malformed("debezium: tableChanges[0].id is not a string")
			}
			var err error
			if d.buf, err = unquoteTableID(d.buf[:0], id); err != nil {
				return decode.Malformed("debezium: tableChanges[0].id %s: %v", clip(id), err)
			}
			c.Table = d.tables.Get(d.buf)
		}
	} else if e.tableChanges != nil && e.tableChanges.Type() != fastjson.TypeNull {
		return decode.Malformed("debezium: tableChanges is not an array")
	}
	if c.Table == "" {
		c.Table = d.tables.Get(db)
	}
	return nil
}

// setTS sets c's time from a millisecond field.
func (d *Decoder) setTS(c *change.Change, ms *fastjson.Value) error {
	ts, ok, err := micros(nil, ms)
	if err != nil {
		return decode.Malformed("debezium: %s", err)
	}
	if ok && ts != 0 {
		c.TSMicros, c.HasTS = ts, true
	}
	return nil
}

// unquoteTableID turns a Debezium table id ("db"."schema"."table", parts
// optionally unquoted, "" inside a quoted part for a quote) into its parts
// joined with '.'. For a rename ("<old>,<new>") the last id is used.
func unquoteTableID(dst, id []byte) ([]byte, error) {
	start := len(dst)
	i := 0
	for {
		if i < len(id) && id[i] == '"' {
			i++
			for {
				if i >= len(id) {
					return dst, errUnterminated
				}
				if id[i] == '"' {
					if i+1 < len(id) && id[i+1] == '"' {
						dst = append(dst, '"')
						i += 2
						continue
					}
					i++
					break
				}
				dst = append(dst, id[i])
				i++
			}
		} else {
			for i < len(id) && id[i] != '.' && id[i] != ',' {
				dst = append(dst, id[i])
				i++
			}
		}
		if i >= len(id) {
			return dst, nil
		}
		switch id[i] {
		case '.':
			dst = append(dst, '.')
		case ',':
			dst = dst[:start]
		default:
			return dst, errJunk
		}
		i++
	}
}

type idError string

func (e idError) Error() string { return string(e) }

const (
	errUnterminated = idError("unterminated quoted name")
	errJunk         = idError("text after a quoted name")
)

// clip shortens a value quoted in an error message.
func clip(b []byte) string {
	const max = 64
	if len(b) <= max {
		return string(b)
	}
	return strings.ToValidUTF8(string(b[:max]), "") + "…"
}
