// Package goldengate decodes Oracle GoldenGate JSON records into typed
// changes: records of GoldenGate Data Streams (DataStreams) and messages of
// the GoldenGate for Big Data JSON formatter (BigData), and maps a Data
// Streams table definition to columns (ObjectColumns).
//
// Both decoders implement decode.Decoder and decode.Detector, DataStreams
// also decode.MetadataColumns. They are called once per message from one
// goroutine and keep reusable buffers, so one decoder must not be shared
// between goroutines. A decoded Change points into the caller's parse arena
// (images, Raw); see package change for its lifetime.
//
// # Detection
//
// Detection looks only at the default field names; streams with renamed
// fields or custom operation strings are not recognised and need their
// format configured. A record is
//
//   - Data Streams when it has a qual_table field; else
//   - Big Data when op_type is I, U, D, T, INSERT, UPDATE, DELETE or
//     TRUNCATE and it has a table field; else
//   - Data Streams when op_type is INSERT, UPDATE, DELETE, UPSERT, DDL,
//     STREAM_METADATA or OBJECT_METADATA, or when it has no op_type but
//     $schema or all of id, properties and type (a JSON Schema record).
//
// # Data Streams records
//
// A Data Streams record is classified as follows (field names shown are the
// defaults; Options renames them):
//
//   - no op_type (or a null one), and either $schema or all of id,
//     properties and type: a JSON Schema record. Kind KindSchemaRecord,
//     Table = the object its id names (SchemaTable), Raw = record.
//   - op_type STREAM_METADATA: Kind KindStreamMetadata, Raw = record.
//   - op_type OBJECT_METADATA: Kind KindObjectMetadata, Table = qual_table,
//     Raw = record; columns must be an object.
//   - op_type INSERT, UPDATE, DELETE or UPSERT (or the configured operation
//     strings): Kind KindDML.
//   - op_type DDL with a ddl object: Kind KindDDL, Raw = record,
//     Statement = ddl.statement when it is a string.
//
// Anything else is malformed (decode.ErrMalformed), as is a record that
// repeats a recognised field.
//
// The fields of DML and DDL records:
//
//   - qual_table: qualified table name; required for DML. For DDL the table
//     is ddl.object's catalog, schema and object joined with dots (empty
//     parts left out), or qual_table when ddl.object names nothing.
//   - op_type: the operation.
//   - op_ts: operation time, ISO 8601 (2026-07-13T04:01:01.123456Z). An
//     offset is applied; a time without one is taken as UTC. A time finer
//     than a microsecond is malformed (nanosecond digits must be zero).
//     Optional: without it HasTS is false.
//   - xid: transaction identifier (string, or a number's literal text).
//   - pos: recovery position, kept exactly (string, or a number's literal).
//   - before, after: row images, objects. Null or absent means no image.
//     INSERT, UPDATE and UPSERT need an after image, DELETE a before image;
//     the other image is optional, and either may be partial.
//   - ddl: the DDL object (DDL records only; a DDL record has no images, so
//     fields named before and after go to _gg_meta).
//   - csn: extra _gg_csn (string; a number's literal text).
//   - tokens: extra _gg_tokens (JSON object).
//   - any other top-level field: collected, with its JSON text as sent, into
//     one extra _gg_meta JSON object, in record order.
//
// # Big Data JSON formatter messages
//
// Messages of the Big Data JSON formatter (operation mode, one operation
// per message) are DML changes. Fields (defaults; BigDataOptions renames
// them):
//
//   - table: qualified table name; required.
//   - op_type: I, U, D or T (or the configured insertOpKey, updateOpKey,
//     deleteOpKey, truncateOpKey); the long forms INSERT, UPDATE, DELETE and
//     TRUNCATE are accepted as well.
//   - op_ts: operation time, 2015-11-05 18:45:36.000000 or ISO 8601. The
//     formatter writes it in UTC, so a time without offset is taken as UTC.
//   - current_ts: extra _gg_current_ts, its text as sent.
//   - pos: position, kept exactly.
//   - xid, csn: when the formatter is configured to add them
//     (metaColumnsTemplate), the transaction identifier and extra _gg_csn,
//     as for Data Streams.
//   - primary_keys: extra _gg_primary_keys (JSON array).
//   - tokens: extra _gg_tokens (JSON object).
//   - before, after: row images as for Data Streams; I and U need after, D
//     needs before, T must carry neither. Images are passed on as sent,
//     including the <column>_isMissing flags the formatter can add.
//   - any other top-level field: extra _gg_meta as for Data Streams.
//
// # Extras
//
// Extras are appended to the Change after any the envelope stage added, in
// a fixed order: _gg_csn, _gg_tokens, _gg_meta for Data Streams;
// _gg_current_ts, _gg_csn, _gg_primary_keys, _gg_tokens, _gg_meta for Big
// Data. An
// extra whose field is absent or null is left out.
package goldengate

import (
	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/decode"
	"github.com/cdclake/cdclake/handlers/jsontext"
	"github.com/valyala/fastjson"
)

// Operation strings Data Streams uses for its non-DML records.
const (
	opDDL            = "DDL"
	opStreamMetadata = "STREAM_METADATA"
	opObjectMetadata = "OBJECT_METADATA"
)

// Names of the extras the decoders add.
const (
	ExtraCSN         = "_gg_csn"
	ExtraTokens      = "_gg_tokens"
	ExtraMeta        = "_gg_meta"
	ExtraCurrentTS   = "_gg_current_ts"
	ExtraPrimaryKeys = "_gg_primary_keys"
)

// detect returns the format v looks like (see Detection in the package
// documentation), or "".
func detect(v *fastjson.Value) string {
	if v == nil || v.Type() != fastjson.TypeObject {
		return ""
	}
	o, _ := v.Object()
	var op, qual, table, dollarSchema, id, props, typ *fastjson.Value
	o.Visit(func(k []byte, x *fastjson.Value) {
		switch {
		case eq(k, "op_type"):
			op = x
		case eq(k, "qual_table"):
			qual = x
		case eq(k, "table"):
			table = x
		case eq(k, "$schema"):
			dollarSchema = x
		case eq(k, "id"):
			id = x
		case eq(k, "properties"):
			props = x
		case eq(k, "type"):
			typ = x
		}
	})
	if qual != nil {
		return FormatDataStreams
	}
	if op == nil {
		if dollarSchema != nil || (id != nil && props != nil && typ != nil) {
			return FormatDataStreams
		}
		return ""
	}
	s, err := op.StringBytes()
	if err != nil {
		return ""
	}
	if table != nil {
		switch string(s) {
		case "I", "U", "D", "T", "INSERT", "UPDATE", "DELETE", "TRUNCATE":
			return FormatBigData
		}
	}
	switch string(s) {
	case "INSERT", "UPDATE", "DELETE", "UPSERT", opDDL, opStreamMetadata, opObjectMetadata:
		return FormatDataStreams
	}
	return ""
}

// eq reports whether k spells s; it does not allocate.
func eq(k []byte, s string) bool { return string(k) == s }

// record returns v's object, or a malformed-message error.
func record(v *fastjson.Value) (*fastjson.Object, error) {
	if v == nil {
		return nil, decode.Malformed("no record")
	}
	if v.Type() != fastjson.TypeObject {
		return nil, decode.Malformed("record is a JSON %s, want an object", v.Type())
	}
	o, _ := v.Object()
	return o, nil
}

// isNull reports whether a field is absent or JSON null.
func isNull(v *fastjson.Value) bool { return v == nil || v.Type() == fastjson.TypeNull }

// image returns the row image in v (absent when v is absent or null).
func image(v *fastjson.Value, field string) (change.Image, error) {
	if isNull(v) {
		return change.Image{}, nil
	}
	o, err := v.Object()
	if err != nil {
		return change.Image{}, decode.Malformed("%s is a JSON %s, want an object or null", field, v.Type())
	}
	return change.Image{Obj: o}, nil
}

// scalarText returns a string's content or a number's literal text (kept
// in *scratch, which grows as needed); ok is false for other types.
func scalarText(scratch *[]byte, v *fastjson.Value) (b []byte, ok bool) {
	switch v.Type() {
	case fastjson.TypeString:
		s, _ := v.StringBytes()
		return s, true
	case fastjson.TypeNumber:
		*scratch = v.MarshalTo((*scratch)[:0])
		return *scratch, true
	}
	return nil, false
}

// addRawJSON appends an ExtraJSON extra holding the JSON text b.
func addRawJSON(c *change.Change, name string, b []byte) {
	start := len(c.ExtraBuf)
	c.ExtraBuf = append(c.ExtraBuf, b...)
	c.Extras = append(c.Extras, change.Extra{Name: name, Kind: change.ExtraJSON, Start: start, End: len(c.ExtraBuf)})
}

// frame is what both decoders keep from one message to the next, so that
// decoding does not allocate per message: table names, transaction ids
// and other strings, scratch space, and the _gg_meta builder.
type frame struct {
	tables  decode.Interner
	xid     decode.Recent
	slab    decode.Slab
	scratch []byte
	meta    metaBuilder
}

// metaBuilder collects unrecognised top-level fields into one JSON object.
type metaBuilder struct {
	buf []byte
	n   int
}

func (m *metaBuilder) reset() {
	m.buf = append(m.buf[:0], '{')
	m.n = 0
}

// add appends a member: the key re-escaped (fastjson hands keys over
// unescaped), the value as its JSON text.
func (m *metaBuilder) add(k []byte, v *fastjson.Value) {
	if m.n > 0 {
		m.buf = append(m.buf, ',')
	}
	m.n++
	m.buf = jsontext.AppendString(m.buf, k, true)
	m.buf = append(m.buf, ':')
	m.buf = v.MarshalTo(m.buf)
}

// flush adds the object to c as the _gg_meta extra when it has members.
func (m *metaBuilder) flush(c *change.Change) {
	if m.n == 0 {
		return
	}
	m.buf = append(m.buf, '}')
	addRawJSON(c, ExtraMeta, m.buf)
}

// clip shortens a value quoted in an error message.
func clip(b []byte) string {
	const max = 64
	if len(b) <= max {
		return string(b)
	}
	return string(b[:max]) + "…"
}
