// Package deadletter keeps messages that could not be decoded, classified or
// converted, with their original key, value and headers, source position
// and reason, in a Destination: the lake (Lake) or a Kafka topic (package
// topic).
//
// # In the lake
//
// Dead letters are NDJSON objects under _dead_letter/ in the sink, one
// object per message, named like data files by source, partition and
// offset: the name is a function of the message's position alone, so a
// replay rewrites the same objects however its input was cut into blocks.
// Each object holds one line:
//
//	{"source":"orders.ndjson","partition":0,"offset":17,"stage":"decode",
//	 "reason":"…","value":"<original text when valid UTF-8>","value_base64":"…",
//	 "key":"…","key_base64":"…","headers":[{"key":"…","value":"…"}]}
package deadletter

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/cdclake/cdclake/sinks"
)

// Dir is the folder dead letters are written to.
const Dir = "_dead_letter"

// Letter is one message that could not land, and why.
type Letter struct {
	At      sinks.Position
	Stage   string
	Reason  string
	Key     []byte
	Value   []byte
	Headers []Header
}

// Header is a message header (a Kafka record header).
type Header struct {
	Key   string
	Value []byte
}

// Destination keeps dead letters. Write returns nil once every letter is
// durable; after an error it may be called again with the same letters.
type Destination interface {
	Write(ctx context.Context, letters []Letter) error
}

// Queue collects a block's dead letters until Flush writes them. Not safe
// for concurrent use.
type Queue struct {
	dest    Destination
	pending []Letter
	total   int64
}

// New returns a Queue writing to dest.
func New(dest Destination) *Queue { return &Queue{dest: dest} }

// Add records a dead letter: key, value and headers are the original
// message's, copied.
func (q *Queue) Add(at sinks.Position, stage string, reason error, key, value []byte, headers []Header) {
	l := Letter{At: at, Stage: stage, Reason: Bound(reason.Error()), Key: bytes.Clone(key), Value: bytes.Clone(value)}
	for _, h := range headers {
		l.Headers = append(l.Headers, Header{Key: h.Key, Value: bytes.Clone(h.Value)})
	}
	q.pending = append(q.pending, l)
}

// MaxReason bounds the length of a reason, in bytes.
const MaxReason = 1024

// Bound returns reason cut to MaxReason bytes, on a character boundary,
// with an ellipsis when it was longer: the message itself is in the dead
// letter.
func Bound(reason string) string {
	if len(reason) <= MaxReason {
		return reason
	}
	cut := MaxReason - len("…")
	for cut > 0 && !utf8.RuneStart(reason[cut]) {
		cut--
	}
	return reason[:cut] + "…"
}

// Reset drops the pending dead letters (after a failure stopped the run).
func (q *Queue) Reset() { q.pending = q.pending[:0] }

// Pending returns the number of dead letters not yet written.
func (q *Queue) Pending() int { return len(q.pending) }

// Total returns the number of dead letters written.
func (q *Queue) Total() int64 { return q.total }

// Flush writes the pending dead letters; they are durable when it returns
// nil. After an error they stay pending.
func (q *Queue) Flush(ctx context.Context) error {
	if len(q.pending) == 0 {
		return nil
	}
	if err := q.dest.Write(ctx, q.pending); err != nil {
		return err
	}
	q.total += int64(len(q.pending))
	clear(q.pending)
	q.pending = q.pending[:0]
	return nil
}

// Entry is the JSON form of a dead letter in the lake.
type Entry struct {
	Source      string        `json:"source"`
	Partition   int32         `json:"partition"`
	Offset      int64         `json:"offset"`
	Stage       string        `json:"stage"`
	Reason      string        `json:"reason"`
	Value       *string       `json:"value"`
	ValueBase64 string        `json:"value_base64"`
	Key         *string       `json:"key,omitempty"`
	KeyBase64   string        `json:"key_base64,omitempty"`
	Headers     []EntryHeader `json:"headers,omitempty"`
}

// EntryHeader is a header of an Entry: its value as text when it is valid
// UTF-8, always in base64.
type EntryHeader struct {
	Key         string  `json:"key"`
	Value       *string `json:"value"`
	ValueBase64 string  `json:"value_base64"`
}

// text returns b as a string when it is valid UTF-8, else nil.
func text(b []byte) *string {
	if !utf8.Valid(b) {
		return nil
	}
	s := string(b)
	return &s
}

// EntryOf returns the JSON form of l.
func EntryOf(l *Letter) Entry {
	e := Entry{Source: l.At.Source, Partition: l.At.Partition, Offset: l.At.Offset, Stage: l.Stage,
		Reason: l.Reason, Value: text(l.Value), ValueBase64: base64.StdEncoding.EncodeToString(l.Value)}
	if l.Key != nil {
		e.Key, e.KeyBase64 = text(l.Key), base64.StdEncoding.EncodeToString(l.Key)
	}
	for _, h := range l.Headers {
		e.Headers = append(e.Headers, EntryHeader{Key: h.Key, Value: text(h.Value), ValueBase64: base64.StdEncoding.EncodeToString(h.Value)})
	}
	return e
}

// Lake returns the Destination writing one object per dead letter to store.
func Lake(store sinks.ObjectWriter) Destination { return lake{store} }

type lake struct{ store sinks.ObjectWriter }

func (d lake) Write(ctx context.Context, letters []Letter) error {
	for i := range letters {
		line, err := json.Marshal(EntryOf(&letters[i]))
		if err != nil {
			return err
		}
		key := Key(letters[i].At)
		if err := d.store.WriteObject(ctx, key, append(line, '\n'), "application/x-ndjson"); err != nil {
			return fmt.Errorf("writing dead letter %s: %w", key, err)
		}
	}
	return nil
}

// Key is the object key of the dead letter of the message at pos.
func Key(pos sinks.Position) string { return Dir + "/" + sinks.ObjectName(pos, ".ndjson") }
