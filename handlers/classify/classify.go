// Package classify is the classify stage: it decides which wire format an
// unwrapped message is in and hands it to that format's decoder, which sets
// the record class (DML, DDL, schema record, metadata, schema change,
// transaction, heartbeat, ...).
//
// # Detection
//
// With a format forced (source.format), every message is decoded by that
// format's decoder. With auto detection the decoders that implement
// decode.Detector are asked in their listed order, per message, and the
// first that recognises the message decodes it; a message none recognises
// is malformed.
package classify

import (
	"fmt"
	"strings"

	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/decode"
	"github.com/valyala/fastjson"
)

// Auto is the format name that selects auto detection.
const Auto = "auto"

// Classifier picks a decoder per message. It is not safe for concurrent
// use: every pipeline worker has its own, over its own decoders.
type Classifier struct {
	forced    decode.Decoder
	detectors []detector
	names     string
}

type detector struct {
	decode.Decoder
	decode.Detector
}

// New returns a classifier over decoders, listed in detection order, with
// format either Auto or the Format of one of them.
func New(decoders []decode.Decoder, format string) (*Classifier, error) {
	c := &Classifier{}
	names := make([]string, 0, len(decoders))
	for _, d := range decoders {
		names = append(names, d.Format())
		if d.Format() == format {
			c.forced = d
		}
		if det, ok := d.(decode.Detector); ok {
			c.detectors = append(c.detectors, detector{d, det})
		}
	}
	c.names = strings.Join(names, ", ")
	if format != Auto && c.forced == nil {
		return nil, fmt.Errorf("unknown format %q (%s, %s)", format, Auto, c.names)
	}
	return c, nil
}

// Decode picks the decoder of v, decodes v into ch and returns the decoder
// it used (nil when none recognised v). Errors wrap decode.ErrMalformed.
func (c *Classifier) Decode(v *fastjson.Value, ch *change.Change) (decode.Decoder, error) {
	d := c.forced
	if d == nil {
		if v == nil || v.Type() != fastjson.TypeObject {
			return nil, decode.Malformed("message is not a JSON object")
		}
		for _, det := range c.detectors {
			if det.Detect(v, ch) {
				d = det.Decoder
				break
			}
		}
		if d == nil {
			return nil, decode.Malformed("unrecognised message: not one of the formats %s", c.names)
		}
	}
	if err := d.Decode(v, ch); err != nil {
		return d, fmt.Errorf("%s: %w", d.Format(), err)
	}
	return d, nil
}
