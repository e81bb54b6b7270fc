// Package unwrap removes transport envelopes from a message: Kafka
// tombstones, CloudEvents 1.0 JSON, and the Kafka Connect JSON converter's
// schema+payload envelope.
//
// # Envelopes
//
//   - Tombstone: an empty value, JSON null, or {"schema":null,"payload":null}.
//   - CloudEvents: an object with "specversion" and "data". The attributes
//     type, source, id, time and subject are kept as extras _ce_type,
//     _ce_source, _ce_id, _ce_time, _ce_subject; their values are never
//     interpreted. "data_base64" payloads are decoded and parsed.
//   - Kafka Connect (schemas.enable=true): an object with exactly the keys
//     "schema" and "payload". The schema is handed on in Change.Schema, with
//     its raw bytes as Change.SchemaKey for caching.
//   - Confluent-framed Avro (first byte 0, see package avro), when the
//     Unwrapper has a Codec: the record becomes the Kafka Connect envelope
//     the JsonConverter would have written for it, and is handed on as
//     one.
package unwrap

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"slices"

	"github.com/cdclake/cdclake/handlers/avro"
	"github.com/cdclake/cdclake/handlers/change"
	"github.com/valyala/fastjson"
)

// ErrNotJSON is returned for a message that is not valid JSON.
var ErrNotJSON = errors.New("not valid JSON")

// Arena holds what one unwrapped message's values live in. The values
// Unwrap returns are valid until the arena is used for another message, so
// a stage that keeps several messages decoded at once gives each its own
// arena. An Arena is not safe for concurrent use.
type Arena struct {
	p     fastjson.Parser
	inner fastjson.Parser
	buf   []byte
	// avro holds a transcoded Avro record's payload.
	avro []byte
}

// Unwrapper unwraps messages and caches the Kafka Connect schemas they
// carry. It is not safe for concurrent use: each pipeline worker has its
// own.
type Unwrapper struct {
	// Avro reads Confluent-framed Avro records; nil refuses them.
	Avro *avro.Codec
	// Connect schemas by their text, each parsed once with its own parser
	// so that it outlives messages. A connector repeats the same schema
	// text in every message of a table.
	schemas schemaIndex
	// lengths are the distinct lengths of the cached schemas' texts, while
	// there are at most maxLengths of them: where a known schema would end.
	lengths []int
	// avroSchemas holds the Connect schemas of Avro writer schemas.
	avroSchemas map[*avro.Schema]*cachedSchema
}

// maxLengths bounds the schema lengths knownEnvelope tries one by one.
const maxLengths = 64

type cachedSchema struct {
	text   []byte
	parser fastjson.Parser
	value  *fastjson.Value
}

// parse parses the schema text for good. The value is frozen: reading
// it never writes to it, so the stages that follow may read it on other
// goroutines while the Unwrapper hands it on with the next messages.
func (cs *cachedSchema) parse() error {
	v, err := cs.parser.ParseBytes(cs.text)
	if err != nil {
		return errors.Join(ErrNotJSON, err)
	}
	freeze(v)
	cs.value = v
	return nil
}

// freeze unescapes the keys of every object in v now: fastjson does it
// lazily, on the first lookup of a key an object lacks, which writes to
// the object.
func freeze(v *fastjson.Value) {
	switch v.Type() {
	case fastjson.TypeObject:
		o, _ := v.Object()
		o.Get(`\`) // a key with a backslash takes the unescaping path
		o.Visit(func(_ []byte, v *fastjson.Value) { freeze(v) })
	case fastjson.TypeArray:
		a, _ := v.Array()
		for _, x := range a {
			freeze(x)
		}
	}
}

// maxSchemas bounds the schema cache; past it the cache starts over.
const maxSchemas = 4096

// Unwrap parses raw into a and removes its envelopes. It returns the inner
// record, or nil with c.Kind set to change.KindTombstone for a tombstone.
// Like the record, c.Schema is valid while a holds this message.
func (u *Unwrapper) Unwrap(a *Arena, raw []byte, c *change.Change) (*fastjson.Value, error) {
	return u.UnwrapContext(context.Background(), a, raw, c)
}

// ErrNoRegistry is returned for a Confluent-framed record when the
// Unwrapper has no Codec.
var ErrNoRegistry = errors.New("a Confluent-framed record (magic byte 0, schema id, Avro) and no source.schema_registry to read it")

// UnwrapContext is Unwrap with a context for the schema registry that
// Avro records need. Its errors for Avro records wrap avro's: only
// avro.ErrUnavailable is not the record's fault.
func (u *Unwrapper) UnwrapContext(ctx context.Context, a *Arena, raw []byte, c *change.Change) (*fastjson.Value, error) {
	if avro.Framed(raw) {
		return u.avro(ctx, a, raw, c)
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		c.Kind = change.KindTombstone
		return nil, nil
	}
	if cs, p, ok := u.knownEnvelope(raw); ok {
		if v, err := u.withSchema(a, cs, p, c); err == nil {
			return v, nil
		}
		// Not one JSON value after all: the general path says what it is.
	}
	if s, p, ok := envelopeSpans(raw); ok && len(s) > 0 && s[0] == '{' {
		return u.connect(a, s, p, c)
	}
	v, err := a.p.ParseBytes(raw)
	if err != nil {
		return nil, errors.Join(ErrNotJSON, err)
	}
	if v.Type() == fastjson.TypeNull {
		c.Kind = change.KindTombstone
		return nil, nil
	}
	o, err := v.Object()
	if err != nil {
		return v, nil
	}
	if o.Get("specversion") != nil && (o.Get("data") != nil || o.Get("data_base64") != nil) {
		for _, a := range [...]struct{ attr, col string }{
			{"type", "_ce_type"}, {"source", "_ce_source"}, {"id", "_ce_id"},
			{"time", "_ce_time"}, {"subject", "_ce_subject"},
		} {
			if s := o.Get(a.attr); s != nil && s.Type() == fastjson.TypeString {
				b, _ := s.StringBytes()
				c.AddString(a.col, b)
			}
		}
		if d := o.Get("data"); d != nil {
			v = d
		} else {
			enc, err := o.Get("data_base64").StringBytes()
			if err != nil {
				return nil, errors.New("cloudevents: data_base64 is not a string")
			}
			a.buf, err = base64.StdEncoding.AppendDecode(a.buf[:0], enc)
			if err != nil {
				return nil, errors.New("cloudevents: data_base64 is not base64")
			}
			if v, err = a.inner.ParseBytes(a.buf); err != nil {
				return nil, errors.Join(ErrNotJSON, err)
			}
		}
		if v.Type() == fastjson.TypeNull {
			c.Kind = change.KindTombstone
			return nil, nil
		}
		if o, err = v.Object(); err != nil {
			return v, nil
		}
	}
	if o.Len() == 2 {
		s, p := o.Get("schema"), o.Get("payload")
		if s != nil && p != nil {
			if p.Type() == fastjson.TypeNull {
				c.Kind = change.KindTombstone
				return nil, nil
			}
			if s.Type() == fastjson.TypeObject {
				c.Schema = s
				c.SchemaKey = s.MarshalTo(nil)
			}
			return p, nil
		}
	}
	return v, nil
}

// knownEnvelope recognises a Kafka Connect envelope whose schema is one
// already cached, without scanning the schema: the JsonConverter writes
// {"schema":S,"payload":P} compactly and repeats a table's S byte for byte,
// so the text between {"schema": and ,"payload": is looked up as it is.
// While the cached schemas have few distinct lengths, only the places
// where one of them would end are tried; else the last ,"payload": is
// searched for (the payload, after S, is the shorter part). When it is a
// cached schema's text, a complete JSON object, the schema value is
// exactly that text (an object ends at its matching brace), and the
// payload is what remains before the closing brace; the payload parser
// checks that it is one JSON value. A payload that holds
// ,"payload": itself (a column named payload) is found from the front.
// Anything else falls back to envelopeSpans.
func (u *Unwrapper) knownEnvelope(raw []byte) (*cachedSchema, []byte, bool) {
	if u.schemas.n == 0 || !bytes.HasPrefix(raw, schemaPrefix) || raw[len(raw)-1] != '}' {
		return nil, nil, false
	}
	rest := raw[len(schemaPrefix) : len(raw)-1]
	if u.lengths != nil {
		// Where a cached schema would end, ,"payload": must follow.
		for _, n := range u.lengths {
			if n < len(rest) && bytes.HasPrefix(rest[n:], payloadKey) {
				if cs := u.schemas.get(rest[:n]); cs != nil {
					return cs, bytes.TrimSpace(rest[n+len(payloadKey):]), true
				}
			}
		}
		return nil, nil, false
	}
	k := bytes.LastIndex(rest, payloadKey)
	if k < 0 {
		return nil, nil, false
	}
	cs := u.schemas.get(rest[:k])
	if cs == nil {
		if k = bytes.Index(rest, payloadKey); k < 0 {
			return nil, nil, false
		}
		if cs = u.schemas.get(rest[:k]); cs == nil {
			return nil, nil, false
		}
	}
	return cs, bytes.TrimSpace(rest[k+len(payloadKey):]), true
}

var (
	schemaPrefix = []byte(`{"schema":`)
	payloadKey   = []byte(`,"payload":`)
)

// connect handles a Kafka Connect envelope found by scanning: a schema is
// parsed the first time its text is seen.
func (u *Unwrapper) connect(a *Arena, schemaText, payload []byte, c *change.Change) (*fastjson.Value, error) {
	cs := u.schemas.get(schemaText)
	if cs == nil {
		cs = &cachedSchema{text: bytes.Clone(schemaText)}
		if err := cs.parse(); err != nil {
			return nil, err
		}
		if u.schemas.m == nil || u.schemas.n >= maxSchemas {
			u.schemas.reset()
			u.lengths = []int{}
		}
		u.schemas.add(cs)
		if u.lengths != nil && !slices.Contains(u.lengths, len(cs.text)) {
			if u.lengths = append(u.lengths, len(cs.text)); len(u.lengths) > maxLengths {
				u.lengths = nil // too many to try: search instead
			}
		}
	}
	return u.withSchema(a, cs, payload, c)
}

// withSchema parses an envelope's payload, its schema being cs.
func (u *Unwrapper) withSchema(a *Arena, cs *cachedSchema, payload []byte, c *change.Change) (*fastjson.Value, error) {
	v, err := a.p.ParseBytes(payload)
	if err != nil {
		return nil, errors.Join(ErrNotJSON, err)
	}
	if v.Type() == fastjson.TypeNull {
		c.Kind = change.KindTombstone
		return nil, nil
	}
	c.Schema = cs.value
	// The cached text is immutable; the capacity limit keeps appends off it.
	c.SchemaKey = cs.text[:len(cs.text):len(cs.text)]
	return v, nil
}

// avro transcodes a Confluent-framed Avro record into its Connect schema
// and payload.
func (u *Unwrapper) avro(ctx context.Context, a *Arena, raw []byte, c *change.Change) (*fastjson.Value, error) {
	if u.Avro == nil {
		return nil, ErrNoRegistry
	}
	s, payload, err := u.Avro.Transcode(ctx, raw, a.avro[:0])
	a.avro = payload
	if err != nil {
		return nil, err
	}
	cs := u.avroSchemas[s]
	if cs == nil {
		cs = u.schemas.get(s.Connect)
		if cs == nil {
			cs = &cachedSchema{text: s.Connect}
			if err := cs.parse(); err != nil {
				return nil, err
			}
		}
		if u.avroSchemas == nil || len(u.avroSchemas) >= maxSchemas {
			u.avroSchemas = map[*avro.Schema]*cachedSchema{}
		}
		u.avroSchemas[s] = cs
	}
	return u.withSchema(a, cs, payload, c)
}

// Header is a message header (Kafka).
type Header struct {
	Key   string
	Value []byte
}

// Headers adds what a message's headers say to c, before Unwrap decodes
// its value:
//
//   - CloudEvents in Kafka binary content mode (ce_specversion present):
//     the attributes ce_type, ce_source, ce_id, ce_time and ce_subject
//     become the extras _ce_type, … as in structured mode; the value is the
//     event's data.
//   - Debezium's __debezium.oldkey and __debezium.newkey (sent with the
//     events of a primary key change) become the JSON extras
//     _debezium_oldkey and _debezium_newkey.
//
// Other headers are ignored.
func Headers(hs []Header, c *change.Change) {
	if len(hs) == 0 {
		return
	}
	ce := false
	for _, h := range hs {
		if h.Key == "ce_specversion" {
			ce = true
		}
	}
	for _, h := range hs {
		switch {
		case ce && (h.Key == "ce_type" || h.Key == "ce_source" || h.Key == "ce_id" || h.Key == "ce_time" || h.Key == "ce_subject"):
			c.AddString("_"+h.Key, h.Value)
		case h.Key == "__debezium.oldkey" || h.Key == "__debezium.newkey":
			name := "_debezium_" + h.Key[len("__debezium."):]
			if fastjson.ValidateBytes(h.Value) == nil {
				start := len(c.ExtraBuf)
				c.ExtraBuf = append(c.ExtraBuf, h.Value...)
				c.Extras = append(c.Extras, change.Extra{Name: name, Kind: change.ExtraJSON, Start: start, End: len(c.ExtraBuf)})
			} else {
				c.AddString(name, h.Value)
			}
		}
	}
}
