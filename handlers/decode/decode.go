// Package decode defines the seam between wire formats and the pipeline: a
// Decoder turns one unwrapped JSON message into a typed change.Change.
//
// Implementations live in sub-packages, one per format (goldengate,
// debezium); the pipeline lists them, in auto-detection order, in one place
// (pipelines/formats.go) and the classify stage picks one per message.
//
// # Capabilities
//
// A decoder declares what else it can do by implementing small optional
// interfaces, found by type assertion (the database/sql/driver pattern):
//
//   - Detector: it recognises its format, for auto detection;
//   - SchemaColumns: its messages can carry their row schema in band (a
//     Kafka Connect schema), and it maps that schema to columns;
//   - MetadataColumns: its stream describes tables in metadata records sent
//     ahead of the rows (GoldenGate OBJECT_METADATA and JSON Schema
//     records), and it maps those records to columns.
//
// A format that implements none of them is decoded when configured
// explicitly, and its columns are inferred from the row images.
package decode

import (
	"errors"
	"fmt"

	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/valyala/fastjson"
)

// Decoder decodes one message of its format.
//
// Decode is called by the classify stage of one pipeline worker, never
// concurrently, once per message, after envelopes (CloudEvents, Kafka
// Connect schema+payload) were removed: v is the inner record and c already
// holds what the envelopes carried (extras, Connect schema). Decode sets
// c.Format to Format() and fills c's class, operation, table, time,
// positions, images and, for DDL and schema changes, the statement. The
// values c points to belong to the caller's parse arena; strings Decode
// puts in c stay valid after later calls. An error means the message is
// malformed for this format and wraps ErrMalformed; the caller
// dead-letters it with the error as reason.
type Decoder interface {
	// Format names the format: the value of source.format that selects
	// it, and of Change.Format.
	Format() string
	Decode(v *fastjson.Value, c *change.Change) error
}

// Detector is implemented by decoders that recognise their format.
//
// Detect reports, cheaply and without allocating, whether v looks like a
// message of the decoder's format; c holds what the envelopes carried
// (c.Schema is set for a Kafka Connect envelope). It says nothing about
// whether Decode will accept v. The classify stage asks the decoders in
// their listed order and the first that says yes decodes the message.
type Detector interface {
	Detect(v *fastjson.Value, c *change.Change) bool
}

// SchemaColumns is implemented by decoders whose messages carry their row
// schema in band, in Change.Schema.
//
// Columns maps such a schema to the table's columns, in order. The resolve
// stage calls it once per distinct schema text (Change.SchemaKey), on
// another goroutine than the one decoding, so it must not touch the
// decoder's state. An error means the schema cannot be landed; the
// messages that carry it are dead-lettered.
type SchemaColumns interface {
	Columns(rowSchema *fastjson.Value) ([]schema.Column, error)
}

// MetadataColumns is implemented by decoders whose stream describes each
// table in metadata records sent ahead of its rows: a record of kind
// change.KindObjectMetadata (Table = the table it describes) and, refining
// it, a record of kind change.KindSchemaRecord whose Table is the same
// table.
//
// MetadataColumns maps the two records' Raw values (jsonSchema may be nil)
// to columns; numbers is the type of columns the metadata calls only
// "number". The resolve stage keeps the latest records per table and calls
// it when the table's rows first need them and again after they change;
// like Columns, on another goroutine than the one decoding.
type MetadataColumns interface {
	MetadataColumns(meta, jsonSchema *fastjson.Value, numbers schema.Type) ([]schema.Column, error)
}

// ErrMalformed is wrapped by decoders' errors for messages that do not
// follow their format.
var ErrMalformed = errors.New("malformed message")

// Malformed returns an error wrapping ErrMalformed.
func Malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}
