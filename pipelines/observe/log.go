package observe

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/cdclake/cdclake/config/secrets"
)

// NewLogger returns a logger writing one line per event to w, as text
// (logfmt) or JSON objects (format "json"), from level on. Every string it
// writes, the message and each attribute, is passed through
// secrets.Redact. An error whose text spans several lines (errors.Join) is
// written as a JSON array of its lines, or in text as the lines joined by
// "; ".
func NewLogger(w io.Writer, level slog.Leveler, format string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: replaceAttr(format == "json")}
	var h slog.Handler
	if format == "json" {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(h)
}

func replaceAttr(json bool) func([]string, slog.Attr) slog.Attr {
	return func(_ []string, a slog.Attr) slog.Attr {
		switch a.Value.Kind() {
		case slog.KindString:
			if s := a.Value.String(); needsRedact(s) {
				a.Value = slog.StringValue(secrets.Redact(s))
			}
		case slog.KindAny:
			a.Value = anyValue(a.Value.Any(), json)
		}
		return a
	}
}

// needsRedact is a quick test that spares most attributes the scan.
func needsRedact(s string) bool { return len(s) >= 4 }

func anyValue(v any, json bool) slog.Value {
	switch x := v.(type) {
	case error:
		return textValue(x.Error(), json)
	case []string:
		out := make([]string, len(x))
		for i, s := range x {
			out[i] = secrets.Redact(s)
		}
		return slog.AnyValue(out)
	case fmt.Stringer:
		return textValue(x.String(), json)
	}
	return slog.AnyValue(v)
}

// textValue is text redacted, a multi-line text as its lines.
func textValue(s string, json bool) slog.Value {
	s = secrets.Redact(s)
	if !strings.Contains(s, "\n") {
		return slog.StringValue(s)
	}
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if json {
		return slog.AnyValue(lines)
	}
	return slog.StringValue(strings.Join(lines, "; "))
}

// Lines returns the problems an error holds, one per element: the errors
// errors.Join put together, each redacted, a multi-line one split.
func Lines(err error) []string {
	var out []string
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, c := range j.Unwrap() {
				walk(c)
			}
			return
		}
		out = append(out, strings.Split(strings.TrimRight(secrets.Redact(e.Error()), "\n"), "\n")...)
	}
	if err != nil {
		walk(err)
	}
	return out
}
