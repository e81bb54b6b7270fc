package pipelines

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"

	"github.com/cdclake/cdclake/config"
	"github.com/cdclake/cdclake/handlers/avro"
	"github.com/cdclake/cdclake/handlers/decode"
	"github.com/cdclake/cdclake/handlers/decode/debezium"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/cdclake/cdclake/handlers/unwrap"
	"github.com/cdclake/cdclake/sinks"
)

// The stages a record can fail in, as dead letters name them.
var deadStages = []string{"unwrap", "decode", "classify", "schema", "convert"}

// reasonClass sorts why a record failed into a few classes, the label of
// the dead-letter metric and the key of the summary's counts: the reason
// itself, which names values, has no bound.
func reasonClass(stage string, err error) string {
	switch {
	case errors.Is(err, unwrap.ErrNotJSON):
		return "not_json"
	case errors.Is(err, unwrap.ErrNoRegistry):
		return "no_registry"
	case errors.Is(err, avro.ErrUnknownSchema):
		return "unknown_schema"
	case errors.Is(err, avro.ErrMalformed):
		return "malformed_avro"
	case errors.Is(err, debezium.ErrSchema):
		return "bad_connect_schema"
	case errors.Is(err, decode.ErrMalformed):
		return "malformed"
	}
	var ce *schema.ConvertError
	if errors.As(err, &ce) && ce.Reason == schema.ReasonInvalidUTF8 {
		return "invalid_utf8"
	}
	switch stage {
	case "convert":
		return "type_mismatch" // a value that does not fit its column's type
	case "schema":
		return "schema_conflict"
	case "classify":
		return "unclassified"
	case "decode":
		return "undecodable"
	}
	return "other"
}

// DeadLetterLimitError is what Pipeline.Run returns when the run wrote
// more dead letters than sink.max_dead_letters allows, and landed all it
// read.
type DeadLetterLimitError struct {
	Count, Messages int64
	Limit           config.Limit
}

func (e *DeadLetterLimitError) Error() string {
	if e.Limit.Fraction > 0 {
		return fmt.Sprintf("%d dead letters of %d messages read, over sink.max_dead_letters (%.4g%%)",
			e.Count, e.Messages, 100*e.Limit.Fraction)
	}
	return fmt.Sprintf("%d dead letters, over sink.max_dead_letters (%d)", e.Count, e.Limit.Count)
}

// deadLetters keeps count of a run's dead letters by stage and reason
// class, warns the first time each (table, stage, class) comes up, and
// says when a count limit is passed. Safe for concurrent use.
type deadLetters struct {
	log   *slog.Logger
	limit config.Limit
	// over is called once, when the count passes a count limit: it stops
	// a run that would not end by itself.
	over func()

	mu     sync.Mutex
	seen   map[[3]string]bool // table, stage, class
	counts map[[2]string]int64
	total  int64
	passed bool
	// metric counts in the metrics, when there are some.
	metric func(stage, class string)
}

func newDeadLetters(log *slog.Logger, limit config.Limit, over func()) *deadLetters {
	return &deadLetters{log: log, limit: limit, over: over, seen: map[[3]string]bool{}, counts: map[[2]string]int64{}}
}

// add counts the dead letter of the message at at, of table ("" when not
// known), which failed stage with err.
func (d *deadLetters) add(at sinks.Position, table, stage string, err error) {
	class := reasonClass(stage, err)
	d.mu.Lock()
	d.total++
	d.counts[[2]string{stage, class}]++
	first := !d.seen[[3]string{table, stage, class}]
	d.seen[[3]string{table, stage, class}] = true
	over := !d.passed && d.limit.Set && d.limit.Fraction == 0 && d.total > d.limit.Count
	d.passed = d.passed || over
	total := d.total
	d.mu.Unlock()
	if d.metric != nil {
		d.metric(stage, class)
	}
	if first {
		if table == "" {
			table = "(not known)"
		}
		d.log.Warn("dead letter: the first of its kind in this run; its table's later ones are counted, not logged",
			"table", table, "stage", stage, "class", class, "source", at.Source, "partition", at.Partition,
			"offset", at.Offset, "reason", err)
	}
	if over {
		d.log.Error("dead letters over sink.max_dead_letters: the run ends with status 4 once it has landed what it read "+
			"(a run that follows its source stops reading now; one with an end reads to it)",
			"dead_letters", total, "max_dead_letters", d.limit.Count)
		d.over()
	}
}

// exceeded returns the limit's error when the run's dead letters, of
// messages read, are over it.
func (d *deadLetters) exceeded(messages int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.passed || d.limit.Exceeded(d.total, messages) {
		return &DeadLetterLimitError{Count: d.total, Messages: messages, Limit: d.limit}
	}
	return nil
}

// DeadLetterCount is the number of dead letters of one stage and class.
type DeadLetterCount struct {
	Stage, Class string
	Count        int64
}

// summary returns the counts, the largest first.
func (d *deadLetters) summary() []DeadLetterCount {
	d.mu.Lock()
	out := make([]DeadLetterCount, 0, len(d.counts))
	for k, n := range d.counts {
		out = append(out, DeadLetterCount{Stage: k[0], Class: k[1], Count: n})
	}
	d.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Stage+"/"+out[i].Class < out[j].Stage+"/"+out[j].Class
	})
	return out
}

// DeadLetterSummary writes counts as "decode/malformed 2, convert/type_mismatch 1".
func DeadLetterSummary(counts []DeadLetterCount) string {
	parts := make([]string, len(counts))
	for i, c := range counts {
		parts[i] = fmt.Sprintf("%s/%s %d", c.Stage, c.Class, c.Count)
	}
	return strings.Join(parts, ", ")
}
