package batch

import (
	"strings"
	"testing"
	"time"
)

func micros(s string) int64 {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UnixMicro()
}

func TestParseTemplate(t *testing.T) {
	for _, ok := range []string{
		"{table}/date={date}",
		"{table}/{yyyy}/{mm}/{dd}/{hh}",
		"lake/{table}",
		"plain",
		"{table}/",
		"a{table}b{date}c",
	} {
		if _, err := ParseTemplate(ok); err != nil {
			t.Errorf("ParseTemplate(%q): %v", ok, err)
		}
	}
	for _, bad := range []struct{ in, msg string }{
		{"{tabel}", "unknown placeholder {tabel}"},
		{"{table}/{DATE}", "unknown placeholder {DATE}"},
		{"{}", "unknown placeholder {}"},
		{"{table", "unclosed {"},
		{"x/{date}/{hh", "unclosed {"},
		{"/abs/{table}", "relative"},
		{"a/../{table}", "must not contain .."},
		{"..", "must not contain .."},
	} {
		_, err := ParseTemplate(bad.in)
		if err == nil || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("ParseTemplate(%q) error %v, want one saying %q", bad.in, err, bad.msg)
		}
	}
}

func TestTemplateExpand(t *testing.T) {
	tests := []struct {
		tmpl, table, at, want string
	}{
		{"{table}/date={date}", "SALES.ORDERS", "2024-01-31T13:45:00Z", "SALES.ORDERS/date=2024-01-31"},
		{"{table}/{yyyy}/{mm}/{dd}/{hh}", "s.t", "2024-01-31T13:45:00Z", "s.t/2024/01/31/13"},
		{"{table}/", "s.t", "2024-01-31T13:45:00Z", "s.t"},
		{"{table}", `a/b\c:d*e?f"g<h>i|j k`, "2024-01-31T13:45:00Z", "a_b_c_d_e_f_g_h_i_j_k"},
		{"{table}", "tab\x01le", "2024-01-31T13:45:00Z", "tab_le"},
		{"{date}/{hh}", "t", "1969-12-31T23:59:59.999999Z", "1969-12-31/23"},
		{"{date}/{hh}", "t", "1900-02-28T00:00:00Z", "1900-02-28/00"},
		{"fixed", "t", "2024-01-31T13:45:00Z", "fixed"},
		{"a{table}b{date}c/{yyyy}{mm}{dd}", "s.t", "2024-01-31T13:45:00Z", "as.tb2024-01-31c/20240131"},
	}
	for _, tt := range tests {
		tp, err := ParseTemplate(tt.tmpl)
		if err != nil {
			t.Fatal(err)
		}
		if got := tp.Expand(tt.table, micros(tt.at)); got != tt.want {
			t.Errorf("%q.Expand(%q, %s) = %q, want %q", tt.tmpl, tt.table, tt.at, got, tt.want)
		}
	}
}

// TestTemplateExpandCache: the one-entry cache must never return the
// directory of another table or another hour.
func TestTemplateExpandCache(t *testing.T) {
	tp, err := ParseTemplate("{table}/{date}/{hh}")
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		table, at, want string
	}{
		{"a", "2024-01-31T13:00:00Z", "a/2024-01-31/13"},
		{"a", "2024-01-31T13:59:59.999999Z", "a/2024-01-31/13"},
		{"b", "2024-01-31T13:30:00Z", "b/2024-01-31/13"},
		{"b", "2024-01-31T14:00:00Z", "b/2024-01-31/14"},
		{"b", "2024-02-01T14:00:00Z", "b/2024-02-01/14"},
		{"b", "1970-01-01T00:00:00Z", "b/1970-01-01/00"},
		// Truncating division would put the microsecond before the epoch in
		// the cached hour 0.
		{"b", "1969-12-31T23:59:59.999999Z", "b/1969-12-31/23"},
		{"a", "2024-01-31T13:00:00Z", "a/2024-01-31/13"},
	}
	for _, s := range steps {
		if got := tp.Expand(s.table, micros(s.at)); got != s.want {
			t.Errorf("Expand(%s, %s) = %q, want %q", s.table, s.at, got, s.want)
		}
	}
}

// TestTemplateGranularity: the time unit every row of a directory shares.
func TestTemplateGranularity(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{"{table}/date={date}", "day"},
		{"{table}/{yyyy}/{mm}/{dd}", "day"},
		{"{table}/{date}/{hh}", "hour"},
		{"{table}/{yyyy}/{mm}/{dd}/{hh}", "hour"},
		{"{table}/{yyyy}/{mm}", "month"},
		{"{table}/{yyyy}", "year"},
		{"{table}/{mm}/{dd}", ""},
		{"{table}/{hh}", ""},
		{"{table}", ""},
	} {
		p, err := ParseTemplate(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Granularity(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.path, got, tc.want)
		}
	}
}

func TestTemplateRoot(t *testing.T) {
	for _, c := range []struct{ tmpl, root, err string }{
		{"{table}/date={date}", "SALES.ORDERS", ""},
		{"{table}/{yyyy}/{mm}/{dd}/{hh}", "SALES.ORDERS", ""},
		{"lake/{table}", "lake/SALES.ORDERS", ""},
		{"lake/{table}/", "lake/SALES.ORDERS", ""},
		{"raw/t_{table}_v1/x/{date}", "raw/t_SALES.ORDERS_v1", ""},
		{"{date}/{table}", "", "keeps no folder"},
		{"{table}_{date}", "", "keeps no folder"},
		{"a{table}b{date}c", "", "keeps no folder"},
		{"lake/{date}", "", "keeps no folder"},
	} {
		tm, err := ParseTemplate(c.tmpl)
		if err != nil {
			t.Fatal(err)
		}
		root, err := tm.Root("SALES.ORDERS")
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: root %q, err %v; want an error with %q", c.tmpl, root, err, c.err)
			}
			continue
		}
		if err != nil || root != c.root {
			t.Errorf("%s: root %q, err %v; want %q", c.tmpl, root, err, c.root)
		}
	}
}
