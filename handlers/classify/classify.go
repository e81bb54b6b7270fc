// Package classify is the classify stage: it decides which wire format an
// unwrapped message is in and hands it to that format's decoder, which sets
// the record class (DML, DDL, schema record, metadata, schema change,
// transaction, heartbeat, ...).
//
// # Detection
//
// With Options.Format set, every message is decoded as that format. With
// auto detection, per message and in this order:
//
//  1. Debezium: a message with a Kafka Connect schema, or a payload shaped
//     like a Debezium envelope, schema change, transaction or heartbeat.
//  2. GoldenGate Data Streams or the GoldenGate Big Data JSON formatter, told
//     apart by their fields and operation strings.
package classify

import (
	"fmt"

	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/decode"
	"github.com/cdclake/cdclake/handlers/decode/debezium"
	"github.com/cdclake/cdclake/handlers/decode/goldengate"
	"github.com/valyala/fastjson"
)

// Options configure the decoders.
type Options struct {
	Format     change.Format
	GoldenGate goldengate.Options
	BigData    goldengate.BigDataOptions
	// Debezium is the unavailable-value placeholder ("" for the default).
	Debezium string
}

// Classifier picks a decoder per message. Not safe for concurrent use.
type Classifier struct {
	format   change.Format
	decoders [4]decode.Decoder
}

// New builds the decoders.
func New(o Options) (*Classifier, error) {
	o.GoldenGate.SetDefaults()
	if err := o.GoldenGate.Validate(); err != nil {
		return nil, fmt.Errorf("goldengate options: %w", err)
	}
	o.BigData.SetDefaults()
	if err := o.BigData.Validate(); err != nil {
		return nil, fmt.Errorf("goldengate big data options: %w", err)
	}
	dbz := debezium.Options{UnavailableValuePlaceholder: o.Debezium}
	if err := dbz.Validate(); err != nil {
		return nil, fmt.Errorf("debezium options: %w", err)
	}
	c := &Classifier{format: o.Format}
	c.decoders[change.FormatGoldenGate] = goldengate.NewDataStreams(o.GoldenGate)
	c.decoders[change.FormatGoldenGateBigData] = goldengate.NewBigData(o.BigData)
	c.decoders[change.FormatDebezium] = debezium.New(dbz)
	return c, nil
}

// Detect returns the format of an unwrapped message.
func (c *Classifier) Detect(v *fastjson.Value, ch *change.Change) (change.Format, error) {
	if c.format != change.FormatAuto {
		return c.format, nil
	}
	if v == nil || v.Type() != fastjson.TypeObject {
		return change.FormatAuto, decode.Malformed("message is not a JSON object")
	}
	if ch.Schema != nil || debezium.Detect(v, ch.Schema != nil) {
		return change.FormatDebezium, nil
	}
	if f, ok := goldengate.Detect(v); ok {
		return f, nil
	}
	return change.FormatAuto, decode.Malformed("unrecognised message: not GoldenGate Data Streams, GoldenGate Big Data JSON or Debezium")
}

// Decode detects the format and decodes v into ch.
func (c *Classifier) Decode(v *fastjson.Value, ch *change.Change) error {
	f, err := c.Detect(v, ch)
	if err != nil {
		return err
	}
	ch.Format = f
	if err := c.decoders[f].Decode(v, ch); err != nil {
		return fmt.Errorf("%s: %w", f, err)
	}
	ch.Format = f
	return nil
}
