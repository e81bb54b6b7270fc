package batch

import (
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cdclake/cdclake/sinks"
)

// Template expands a directory template per row. Placeholders: {table}
// (qualified name, '/' replaced), {date} (yyyy-mm-dd), {yyyy}, {mm}, {dd},
// {hh}, all from the row's _cdc_ts in UTC (ingestion time when it has none).
type Template struct {
	text string
	// parts are the template's literal text and placeholders in order.
	parts []part
	// last caches the latest expansion: most consecutive rows share table
	// and hour. Rows of several source partitions expand it at once.
	last atomic.Pointer[expansion]
}

// part is a literal (placeholder "") or a placeholder of a template.
type part struct {
	lit, placeholder string
}

type expansion struct {
	table string
	hour  int64
	dir   string
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
	t := &Template{text: strings.TrimSuffix(s, "/")}
	for rest := t.text; rest != ""; {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			t.parts = append(t.parts, part{lit: rest})
			break
		}
		if i > 0 {
			t.parts = append(t.parts, part{lit: rest[:i]})
		}
		j := strings.IndexByte(rest[i:], '}')
		t.parts = append(t.parts, part{placeholder: rest[i+1 : i+j]})
		rest = rest[i+j+1:]
	}
	return t, nil
}

// Granularity is the finest time unit whose every row of a directory
// shares, from the row's _cdc_ts: hour, day, month, year, or "" when the
// template does not split rows by time.
func (t *Template) Granularity() string {
	has := map[string]bool{}
	for _, p := range t.parts {
		has[p.placeholder] = true
	}
	day := has["date"] || has["yyyy"] && has["mm"] && has["dd"]
	switch {
	case day && has["hh"]:
		return "hour"
	case day:
		return "day"
	case has["yyyy"] && has["mm"]:
		return "month"
	case has["yyyy"]:
		return "year"
	}
	return ""
}

// Expand returns the directory for a row of table at micros.
func (t *Template) Expand(table string, micros int64) string {
	hour := floorDiv(micros, 3600e6)
	if e := t.last.Load(); e != nil && hour == e.hour && table == e.table {
		return e.dir
	}
	ts := time.UnixMicro(micros).UTC()
	b := make([]byte, 0, len(t.text)+len(table)+8)
	for _, p := range t.parts {
		switch p.placeholder {
		case "":
			b = append(b, p.lit...)
		case "table":
			b = append(b, sinks.Sanitize(table)...)
		case "date":
			b = ts.AppendFormat(b, "2006-01-02")
		case "yyyy":
			b = ts.AppendFormat(b, "2006")
		case "mm":
			b = ts.AppendFormat(b, "01")
		case "dd":
			b = ts.AppendFormat(b, "02")
		case "hh":
			b = ts.AppendFormat(b, "15")
		}
	}
	e := &expansion{table: table, hour: hour, dir: string(b)}
	t.last.Store(e)
	return e.dir
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// Root returns the folder that holds every file of table and no other
// table's: the template's expansion up to the folder boundary before its
// first time placeholder, which must hold the whole folder named after the
// table. It fails for templates like {date}/{table} and {table}_{date}.
func (t *Template) Root(table string) (string, error) {
	var b strings.Builder
	end, timed := -1, false // where the table's folder name ends
	for _, p := range t.parts {
		switch p.placeholder {
		case "":
			b.WriteString(p.lit)
		case "table":
			b.WriteString(sinks.Sanitize(table))
			end = b.Len()
		default:
			timed = true
		}
		if timed {
			break
		}
	}
	root := b.String()
	if end >= 0 {
		if j := strings.IndexByte(root[end:], '/'); j >= 0 {
			end += j
		} else if timed {
			end = -1 // a time placeholder shares the table's folder
		} else {
			end = len(root)
		}
	}
	if end < 0 {
		return "", fmt.Errorf("path %q keeps no folder of %s's own: want the table's folder before any time placeholder, as {table}/date={date}", t.text, table)
	}
	return root[:end], nil
}
