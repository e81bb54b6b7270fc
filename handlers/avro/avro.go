// Package avro reads Confluent-framed Avro, the wire format of Kafka
// Connect's Avro converters (Confluent's and Apicurio's with
// as-confluent): a magic byte 0, the writer schema's registry id as a
// 4-byte big-endian integer, then the Avro binary encoding of the value.
//
// A record is turned into exactly what Kafka Connect's JsonConverter
// (schemas.enable=true, decimal.format=BASE64) would have written for the
// same Connect value: the Connect schema as JSON and the payload as JSON.
// The rest of the pipeline then lands Avro and JSON alike, with one
// mapping of Connect and Debezium types to columns.
//
// # Schemas
//
// Writer schemas are fetched by id from a Registry and kept, bounded, by
// id. The Avro schema is parsed with github.com/hamba/avro/v2 and mapped
// to a Connect schema as the converters' AvroData does: records are
// structs (name from connect.name, else the full name), a union of null
// and one type is that type, optional, other unions are structs of one
// optional field per branch (io.confluent.connect.avro.Union), int with
// connect.type int8 or int16 is that type, enum is string, fixed is bytes,
// string-keyed maps are maps and arrays of MapEntry records are maps with
// other keys; connect.name, connect.version, connect.doc and
// connect.parameters become name, version, doc and parameters; the
// logical types decimal, date, time-millis and timestamp-millis without a
// connect.name become Connect's Decimal, Date, Time and Timestamp. Default
// values are not carried: nothing lands them.
//
// # Values
//
// The binary value is transcoded into the payload in one pass, guided by
// a program compiled once per schema: bytes, fixed and decimals as base64,
// float and double NaN and infinities as the strings "NaN", "Infinity" and
// "-Infinity" (as Jackson writes them), every other number exactly,
// strings as sent (a string that is not UTF-8 reaches the stages that
// reject it).
package avro

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Magic is the first byte of a Confluent-framed record.
const Magic = 0

// Errors. Transcode's errors wrap one of them.
var (
	// ErrMalformed: the record is not a Confluent-framed Avro value of its
	// schema. It is a dead letter.
	ErrMalformed = errors.New("malformed Avro record")
	// ErrUnknownSchema: the registry says the schema id does not exist,
	// or its schema cannot be read as a Connect schema. The record is a
	// dead letter.
	ErrUnknownSchema = errors.New("unknown Avro schema")
	// ErrUnavailable: the registry could not be asked (network, server
	// error, authentication). The record is not at fault: it is tried
	// again.
	ErrUnavailable = errors.New("schema registry unavailable")
)

// Registry looks up writer schemas by id.
type Registry interface {
	// Schema returns the Avro schema text with the given id. An error
	// wraps ErrUnknownSchema when the registry has no such id and
	// ErrUnavailable when it could not be asked.
	Schema(ctx context.Context, id int) (string, error)
}

// Schema is one writer schema, ready to transcode its values.
type Schema struct {
	// ID is the registry's id of the schema.
	ID int
	// Connect is the Connect schema as JsonConverter writes it. It is
	// immutable.
	Connect []byte
	root    *node
}

// DefaultCacheSize is how many schemas a Codec keeps by default.
const DefaultCacheSize = 1024

// Codec transcodes Confluent-framed Avro records. It is safe for
// concurrent use: pipeline workers share one, and with it the schema
// cache.
type Codec struct {
	reg  Registry
	size int

	mu sync.Mutex
	// byID holds compiled schemas, and the permanent errors of ids that
	// cannot be used, by id.
	byID map[int]cached

	hits, found, missing, failed atomic.Int64
}

// CodecStats counts a Codec's lookups.
type CodecStats struct {
	// Hits counts the lookups the cache answered.
	Hits int64
	// Found, Missing and Failed count the registry's answers: a schema, no
	// such id (ErrUnknownSchema), and no answer (ErrUnavailable).
	Found, Missing, Failed int64
}

// Stats returns the codec's counters.
func (c *Codec) Stats() CodecStats {
	return CodecStats{Hits: c.hits.Load(), Found: c.found.Load(), Missing: c.missing.Load(), Failed: c.failed.Load()}
}

// Registry returns the registry the codec asks.
func (c *Codec) Registry() Registry { return c.reg }

type cached struct {
	s   *Schema
	err error
}

// NewCodec returns a Codec that asks reg for schemas and keeps at most
// size of them (DefaultCacheSize when size ≤ 0).
func NewCodec(reg Registry, size int) *Codec {
	if size <= 0 {
		size = DefaultCacheSize
	}
	return &Codec{reg: reg, size: size, byID: map[int]cached{}}
}

// Framed reports whether raw starts like a Confluent-framed record. JSON
// text never starts with byte 0.
func Framed(raw []byte) bool { return len(raw) > 0 && raw[0] == Magic }

// Transcode reads the Confluent-framed record raw. It returns the writer
// schema and appends the value's Connect JSON payload to dst.
func (c *Codec) Transcode(ctx context.Context, raw, dst []byte) (*Schema, []byte, error) {
	if len(raw) < 5 || raw[0] != Magic {
		return nil, dst, fmt.Errorf("%w: no Confluent frame (magic byte 0 and a 4-byte schema id)", ErrMalformed)
	}
	id := int(int32(binary.BigEndian.Uint32(raw[1:5])))
	s, err := c.Schema(ctx, id)
	if err != nil {
		return nil, dst, err
	}
	out, err := s.Transcode(raw[5:], dst)
	return s, out, err
}

// Schema returns the compiled schema with the given id, asking the
// registry the first time.
func (c *Codec) Schema(ctx context.Context, id int) (*Schema, error) {
	c.mu.Lock()
	e, ok := c.byID[id]
	c.mu.Unlock()
	if ok {
		c.hits.Add(1)
		return e.s, e.err
	}
	text, err := c.reg.Schema(ctx, id)
	switch {
	case errors.Is(err, ErrUnknownSchema):
		c.missing.Add(1)
		e.err = fmt.Errorf("schema id %d: %w", id, err)
	case err != nil:
		c.failed.Add(1)
		if !errors.Is(err, ErrUnavailable) {
			err = fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return nil, fmt.Errorf("schema id %d: %w", id, err)
	default:
		c.found.Add(1)
		e.s, e.err = Compile(id, text)
	}
	c.mu.Lock()
	if len(c.byID) >= c.size {
		// Any entry goes; one in use is fetched again when next needed.
		for k := range c.byID {
			delete(c.byID, k)
			break
		}
	}
	c.byID[id] = e
	c.mu.Unlock()
	return e.s, e.err
}
