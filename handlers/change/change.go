// Package change defines the typed change that every format decoder
// produces and every later stage consumes.
//
// # Lifetime
//
// A Change borrows from the decoder that produced it: the JSON values it
// points to (images, metadata) live in the decoder's parse arena and are valid
// only until that decoder decodes the next message. Stages that need a value
// for longer copy it.
package change

import (
	"github.com/valyala/fastjson"
)

// Kind classifies a source message.
type Kind uint8

// The classes of message the pipeline knows.
const (
	KindUnknown Kind = iota
	// KindDML is a row change (insert, update, delete, upsert, read, truncate).
	KindDML
	// KindDDL is a GoldenGate DDL record.
	KindDDL
	// KindSchemaRecord is a GoldenGate JSON Schema record: cached, never landed.
	KindSchemaRecord
	// KindStreamMetadata is a GoldenGate STREAM_METADATA record.
	KindStreamMetadata
	// KindObjectMetadata is a GoldenGate OBJECT_METADATA record.
	KindObjectMetadata
	// KindSchemaChange is a Debezium schema change event.
	KindSchemaChange
	// KindTransaction is a Debezium transaction BEGIN/END event.
	KindTransaction
	// KindHeartbeat is a Debezium heartbeat.
	KindHeartbeat
	// KindTombstone is a Kafka tombstone (null or empty value).
	KindTombstone
	// KindMessage is a Debezium logical decoding message (op "m"), skipped.
	KindMessage
)

// NumKinds is the number of kinds: every Kind is below it.
const NumKinds = int(KindMessage) + 1

var kindNames = [...]string{"unknown", "dml", "ddl", "schema_record", "stream_metadata",
	"object_metadata", "schema_change", "transaction", "heartbeat", "tombstone", "message"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "invalid"
}

// Op is the operation of a DML change.
type Op uint8

// Operations, as landed in the _cdc_op column.
const (
	OpNone Op = iota
	OpInsert
	OpUpdate
	OpDelete
	OpUpsert
	OpRead
	OpTruncate
)

var opNames = [...]string{"", "INSERT", "UPDATE", "DELETE", "UPSERT", "READ", "TRUNCATE"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "INVALID"
}

// Image is a row image (before or after) as sent by the source: a JSON object
// whose keys are column names. A nil Obj means the image is absent.
type Image struct {
	Obj *fastjson.Object
}

// Present reports whether the image was sent.
func (i Image) Present() bool { return i.Obj != nil }

// Change is one classified, decoded source message.
type Change struct {
	Kind Kind
	// Format names the decoder's format (decode.Decoder.Format).
	Format string
	Op     Op
	// Table is the qualified source table name (e.g. SALES.ORDERS or
	// server.public.customers).
	Table string
	// TSMicros is the source operation time in microseconds since the epoch
	// (UTC); HasTS is false when the message carries none.
	TSMicros int64
	HasTS    bool
	// Topic is the Kafka topic the message came from, empty for other
	// sources; a decoder names the table after it when nothing else does.
	Topic string
	// RecordMicros is the source record's own timestamp (Kafka's record
	// timestamp), 0 when it has none. It places a change without TSMicros
	// in a partition directory; it is not landed.
	RecordMicros int64
	Xid          string
	// Pos is the source's own opaque position (GoldenGate pos, Debezium LSN
	// or binlog coordinates), stored exactly.
	Pos string

	Before, After Image

	// Statement is the DDL statement of a DDL record or schema change
	// event, when it carries one.
	Statement string

	// Extras are format-specific metadata columns (csn, tokens, CloudEvents
	// attributes, the Debezium source block), in the order they were added,
	// by landed column name: strings and JSON texts in ExtraBuf, timestamps
	// in microseconds (see Extra).
	Extras   []Extra
	ExtraBuf []byte

	// Schema is the in-band row schema when the message carries one (a Kafka
	// Connect schema for the before/after struct); nil otherwise.
	Schema *fastjson.Value
	// SchemaKey holds Schema's JSON text, to cache what was resolved from it
	// (empty when there is no Schema). It may be shared: never append to it.
	SchemaKey []byte

	// Raw is the message body after unwrapping, for records landed whole
	// (DDL, schema changes, transactions, metadata).
	Raw *fastjson.Value
}

// ExtraKind is the landed type of an extra metadata column.
type ExtraKind uint8

// Extra column kinds.
const (
	// ExtraString lands as a string column.
	ExtraString ExtraKind = iota
	// ExtraJSON lands as a string column annotated as JSON.
	ExtraJSON
	// ExtraTimestamp lands as TIMESTAMP(µs, UTC); the value is Micros.
	ExtraTimestamp
	// ExtraBinary lands as a binary column.
	ExtraBinary
)

// Extra is a format-specific metadata value. String and JSON values live in
// the owning Change's ExtraBuf between Start and End.
type Extra struct {
	Name       string
	Kind       ExtraKind
	Start, End int
	Micros     int64
	// Null is set for a NULL value (a record without a key), which is not
	// an empty one.
	Null bool
}

// Reset clears c for reuse, keeping its buffers.
func (c *Change) Reset() {
	extras, buf := c.Extras[:0], c.ExtraBuf[:0]
	*c = Change{Extras: extras, ExtraBuf: buf}
}

// AddString appends a string extra.
func (c *Change) AddString(name string, v []byte) {
	start := len(c.ExtraBuf)
	c.ExtraBuf = append(c.ExtraBuf, v...)
	c.Extras = append(c.Extras, Extra{Name: name, Kind: ExtraString, Start: start, End: len(c.ExtraBuf)})
}

// AddJSON appends an extra holding v's JSON text.
func (c *Change) AddJSON(name string, v *fastjson.Value) {
	start := len(c.ExtraBuf)
	c.ExtraBuf = v.MarshalTo(c.ExtraBuf)
	c.Extras = append(c.Extras, Extra{Name: name, Kind: ExtraJSON, Start: start, End: len(c.ExtraBuf)})
}

// AddBytes appends a binary extra; nil v is NULL.
func (c *Change) AddBytes(name string, v []byte) {
	start := len(c.ExtraBuf)
	c.ExtraBuf = append(c.ExtraBuf, v...)
	c.Extras = append(c.Extras, Extra{Name: name, Kind: ExtraBinary, Start: start, End: len(c.ExtraBuf), Null: v == nil})
}

// AddJSONText appends a JSON extra given as text.
func (c *Change) AddJSONText(name string, text []byte) {
	start := len(c.ExtraBuf)
	c.ExtraBuf = append(c.ExtraBuf, text...)
	c.Extras = append(c.Extras, Extra{Name: name, Kind: ExtraJSON, Start: start, End: len(c.ExtraBuf)})
}

// AddTimestamp appends a timestamp extra in microseconds since the epoch.
func (c *Change) AddTimestamp(name string, micros int64) {
	c.Extras = append(c.Extras, Extra{Name: name, Kind: ExtraTimestamp, Micros: micros})
}

// ExtraBytes returns the text of a string or JSON extra.
func (c *Change) ExtraBytes(e Extra) []byte { return c.ExtraBuf[e.Start:e.End] }
