// Package deadletter keeps messages that could not be decoded, classified or
// converted, with their original bytes, source position and reason.
//
// # Format
//
// Dead letters are NDJSON objects under _dead_letter/ in the sink, one
// object per message, named like data files by source, partition and
// offset: the name is a function of the message's position alone, so a
// replay rewrites the same objects however its input was cut into blocks.
// Each object holds one line:
//
//	{"source":"orders.ndjson","partition":0,"offset":17,"stage":"decode",
//	 "reason":"…","value":"<original text when valid UTF-8>","value_base64":"…"}
package deadletter

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/cdclake/cdclake/sinks"
)

// Dir is the folder dead letters are written to.
const Dir = "_dead_letter"

// Entry is one dead letter.
type Entry struct {
	Source      string  `json:"source"`
	Partition   int32   `json:"partition"`
	Offset      int64   `json:"offset"`
	Stage       string  `json:"stage"`
	Reason      string  `json:"reason"`
	Value       *string `json:"value"`
	ValueBase64 string  `json:"value_base64"`
}

// Queue collects a block's dead letters until Flush writes them. Not safe
// for concurrent use.
type Queue struct {
	store   sinks.ObjectWriter
	pending []pending
	total   int64
}

type pending struct {
	at   sinks.Position
	line []byte
}

// New returns a Queue writing to store.
func New(store sinks.ObjectWriter) *Queue { return &Queue{store: store} }

// Add records a dead letter: raw is the original message.
func (q *Queue) Add(at sinks.Position, stage string, reason error, raw []byte) {
	e := Entry{Source: at.Source, Partition: at.Partition, Offset: at.Offset, Stage: stage,
		Reason: reason.Error(), ValueBase64: base64.StdEncoding.EncodeToString(raw)}
	if utf8.Valid(raw) {
		s := string(raw)
		e.Value = &s
	}
	line, _ := json.Marshal(e)
	q.pending = append(q.pending, pending{at: at, line: append(line, '\n')})
}

// Reset drops the pending dead letters (after a failure stopped the run).
func (q *Queue) Reset() { q.pending = q.pending[:0] }

// Pending returns the number of dead letters not yet written.
func (q *Queue) Pending() int { return len(q.pending) }

// Total returns the number of dead letters written.
func (q *Queue) Total() int64 { return q.total }

// Flush writes the pending dead letters; they are durable when it returns
// nil. After an error the ones not yet written stay pending.
func (q *Queue) Flush(ctx context.Context) error {
	for len(q.pending) > 0 {
		p := q.pending[0]
		key := Key(p.at)
		if err := q.store.WriteObject(ctx, key, p.line, "application/x-ndjson"); err != nil {
			return fmt.Errorf("writing dead letter %s: %w", key, err)
		}
		q.total++
		q.pending = q.pending[1:]
	}
	q.pending = q.pending[:0]
	return nil
}

// Key is the object key of the dead letter of the message at pos.
func Key(pos sinks.Position) string { return Dir + "/" + sinks.ObjectName(pos, ".ndjson") }
