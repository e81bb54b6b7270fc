package pipelines

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/cdclake/cdclake/config"
	"github.com/cdclake/cdclake/handlers/avro"
	"github.com/cdclake/cdclake/handlers/decode"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/cdclake/cdclake/handlers/unwrap"
	"github.com/cdclake/cdclake/sinks"
)

func TestReasonClass(t *testing.T) {
	for _, c := range []struct {
		stage string
		err   error
		want  string
	}{
		{"unwrap", fmt.Errorf("line 3: %w", unwrap.ErrNotJSON), "not_json"},
		{"unwrap", unwrap.ErrNoRegistry, "no_registry"},
		{"unwrap", fmt.Errorf("schema id 7: %w", avro.ErrUnknownSchema), "unknown_schema"},
		{"unwrap", fmt.Errorf("%w: truncated", avro.ErrMalformed), "malformed_avro"},
		{"decode", fmt.Errorf("op_ts: %w", decode.ErrMalformed), "malformed"},
		{"decode", errors.New("no such format"), "undecodable"},
		{"convert", &schema.ConvertError{Column: "N", Reason: schema.ReasonInvalidUTF8}, "invalid_utf8"},
		{"convert", &schema.ConvertError{Column: "N", Reason: "out of range"}, "type_mismatch"},
		{"schema", errors.New("conflict"), "schema_conflict"},
		{"classify", errors.New("?"), "unclassified"},
		{"elsewhere", errors.New("?"), "other"},
	} {
		if got := reasonClass(c.stage, c.err); got != c.want {
			t.Errorf("reasonClass(%s, %v) = %s, want %s", c.stage, c.err, got, c.want)
		}
	}
}

// TestDeadLettersWarnOncePerKind: the first dead letter of each (table,
// stage, class) is a WARN line, the rest are counted; a count limit stops
// the run once, when it is passed, and a fraction is judged at the end.
func TestDeadLettersWarnOncePerKind(t *testing.T) {
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	limit, _ := config.ParseLimit("3")
	stops := 0
	d := newDeadLetters(log, limit, func() { stops++ })
	at := sinks.Position{Source: "orders", Partition: 2, Offset: 40}
	bad := &schema.ConvertError{Column: "AMOUNT", Reason: "out of range"}
	for range 3 {
		d.add(at, "SALES.ORDERS", "convert", bad)
	}
	d.add(at, "SALES.ITEMS", "convert", bad)
	d.add(at, "", "unwrap", unwrap.ErrNotJSON)
	if n := strings.Count(logs.String(), "level=WARN"); n != 3 {
		t.Errorf("%d warnings, want 3 (one per table, stage and class):\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), `table="(not known)"`) || !strings.Contains(logs.String(), "offset=40") {
		t.Errorf("the warning does not say where:\n%s", logs.String())
	}
	if stops != 1 || !strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("passing the limit of 3 stopped the run %d times:\n%s", stops, logs.String())
	}
	var tooMany *DeadLetterLimitError
	if err := d.exceeded(1000); !errors.As(err, &tooMany) || tooMany.Count != 5 {
		t.Errorf("exceeded: %v", err)
	}
	if got := DeadLetterSummary(d.summary()); got != "convert/type_mismatch 4, unwrap/not_json 1" {
		t.Errorf("summary %q", got)
	}

	frac, _ := config.ParseLimit("1%")
	f := newDeadLetters(slog.New(slog.DiscardHandler), frac, func() { t.Error("a fraction stopped the run") })
	f.add(at, "T", "convert", bad)
	if err := f.exceeded(100); err != nil {
		t.Errorf("1 of 100 is not over 1%%: %v", err)
	}
	f.add(at, "T", "convert", bad)
	if err := f.exceeded(100); err == nil || !strings.Contains(err.Error(), "2 dead letters of 100 messages read") {
		t.Errorf("2 of 100 is over 1%%: %v", err)
	}
	none := newDeadLetters(slog.New(slog.DiscardHandler), config.Limit{}, func() { t.Error("no limit stopped the run") })
	none.add(at, "T", "convert", bad)
	if err := none.exceeded(1); err != nil {
		t.Errorf("no limit: %v", err)
	}
}
