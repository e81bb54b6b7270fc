package batch

import (
	"fmt"
	"strings"
	"time"

	"github.com/cdclake/cdclake/handlers/change"
)

// Tracker knows, per source partition, the offset below which every message
// is durable: landed in a written file, dead-lettered, or needing no landing.
type Tracker struct {
	parts map[partKey]*partState
}

type partKey struct {
	source string
	part   int32
}

type partState struct {
	next int64 // highest offset seen + 1
	// pending maps what still holds messages (open buffers, unwritten
	// dead letters) to the first offset it holds.
	pending map[any]int64
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker { return &Tracker{parts: map[partKey]*partState{}} }

func (t *Tracker) state(source string, part int32) *partState {
	k := partKey{source, part}
	s := t.parts[k]
	if s == nil {
		s = &partState{next: -1, pending: map[any]int64{}}
		t.parts[k] = s
	}
	return s
}

func (t *Tracker) seen(at change.Position) {
	s := t.state(at.Source, at.Partition)
	if at.Offset+1 > s.next {
		s.next = at.Offset + 1
	}
}

func (t *Tracker) open(at change.Position, holder any) {
	s := t.state(at.Source, at.Partition)
	if _, ok := s.pending[holder]; !ok {
		s.pending[holder] = at.Offset
	}
}

func (t *Tracker) close(source string, part int32, holder any) {
	delete(t.state(source, part).pending, holder)
}

// Durable returns the offset below which every message of a source
// partition is durable, and false when nothing was seen there.
func (t *Tracker) Durable(source string, part int32) (int64, bool) {
	s, ok := t.parts[partKey{source, part}]
	if !ok || s.next < 0 {
		return 0, false
	}
	low := s.next
	for _, first := range s.pending {
		if first < low {
			low = first
		}
	}
	return low, true
}

// Template expands a directory template per row. Placeholders: {table}
// (qualified name, '/' replaced), {date} (yyyy-mm-dd), {yyyy}, {mm}, {dd},
// {hh}, all from the row's _cdc_ts in UTC (ingestion time when it has none).
type Template struct {
	text string
	// one-entry cache: most consecutive rows share table and hour
	lastTable string
	lastHour  int64
	lastDir   string
}

// ParseTemplate validates a directory template.
func ParseTemplate(s string) (*Template, error) {
	rest := s
	for {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			break
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return nil, fmt.Errorf("unclosed { in %q", s)
		}
		switch rest[i+1 : i+j] {
		case "table", "date", "yyyy", "mm", "dd", "hh":
		default:
			return nil, fmt.Errorf("unknown placeholder %s in %q (known: {table} {date} {yyyy} {mm} {dd} {hh})", rest[i:i+j+1], s)
		}
		rest = rest[i+j+1:]
	}
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("path must not be empty")
	}
	if strings.HasPrefix(s, "/") || strings.Contains(s, "..") {
		return nil, fmt.Errorf("path %q must be relative and must not contain ..", s)
	}
	return &Template{text: strings.TrimSuffix(s, "/"), lastHour: -1 << 62}, nil
}

// Expand returns the directory for a row of table at micros.
func (t *Template) Expand(table string, micros int64) string {
	hour := floorDiv(micros, 3600e6)
	if hour == t.lastHour && table == t.lastTable {
		return t.lastDir
	}
	ts := time.UnixMicro(micros).UTC()
	r := strings.NewReplacer(
		"{table}", Sanitize(table),
		"{date}", ts.Format("2006-01-02"),
		"{yyyy}", ts.Format("2006"),
		"{mm}", ts.Format("01"),
		"{dd}", ts.Format("02"),
		"{hh}", ts.Format("15"))
	t.lastTable, t.lastHour, t.lastDir = table, hour, r.Replace(t.text)
	return t.lastDir
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// Sanitize makes a name safe as one path segment.
func Sanitize(s string) string {
	if s == "." || s == ".." || s == "" {
		return strings.Repeat("_", max(len(s), 1))
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '/', '\\', ':', '*', '?', '"', '<', '>', '|', ' ':
			return '_'
		}
		if r < 32 {
			return '_'
		}
		return r
	}, s)
}
