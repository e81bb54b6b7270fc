// Package decode defines the seam between wire formats and the pipeline: a
// Decoder turns one unwrapped JSON message into a typed change.Change.
//
// Implementations live in sub-packages, one per format (goldengate,
// debezium); the classify stage picks one per message with an explicit
// switch.
package decode

import (
	"errors"
	"fmt"

	"github.com/cdclake/cdclake/handlers/change"
	"github.com/valyala/fastjson"
)

// Decoder decodes one message of its format.
//
// Decode is called by the classify stage, from one goroutine, once per
// message, after envelopes (CloudEvents, Kafka Connect schema+payload) were
// removed: v is the inner record and c already holds what the envelopes
// carried (extras, Connect schema). Decode fills c's class, operation,
// table, time, positions and images. The values c points to belong to the
// caller's parse arena. An error means the message is malformed for this
// format; the caller dead-letters it with the error as reason.
type Decoder interface {
	Decode(v *fastjson.Value, c *change.Change) error
}

// ErrMalformed is wrapped by decoders' errors for messages that do not
// follow their format.
var ErrMalformed = errors.New("malformed message")

// Malformed returns an error wrapping ErrMalformed.
func Malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}
