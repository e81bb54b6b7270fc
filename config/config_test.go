package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func load(t *testing.T, yaml string) (*Config, error) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(f, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return Load(f)
}

func TestDefaults(t *testing.T) {
	c, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	r := c.RouteFor("ANY.TABLE")
	if r.Path != "{table}/date={date}" || r.Layout != "images" || r.Compression != "zstd" ||
		r.MaxRows != 1_000_000 || time.Duration(r.MaxAge) != 5*time.Minute || r.Numbers != "decimal_text" {
		t.Errorf("defaults = %+v", r)
	}
	if c.Source.Format != "auto" || c.Source.BlockLines != 4096 || c.Batch.MaxOpenFiles != 8192 ||
		c.Batch.MaxBufferedBytes != 256<<20 || time.Duration(c.ProgressInterval) != 5*time.Second {
		t.Errorf("defaults = %+v", c)
	}
}

func TestExampleIsValid(t *testing.T) {
	c, err := Load("example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if r := c.RouteFor("HR.EMPLOYEES"); r.Layout != "flat" || r.Types["SALARY"] != "decimal(12,2)" || r.Compression != "zstd" {
		t.Errorf("HR route = %+v", r)
	}
	if r := c.RouteFor("shop.inventory.users"); !strings.Contains(strings.Join(r.Columns.Exclude, ","), "password_hash") {
		t.Errorf("inventory route = %+v", r)
	}
	if r := c.RouteFor("OTHER.T"); r.Match != "" {
		t.Errorf("unmatched table got route %+v", r)
	}
}

func TestRoutesInheritAndMatchInOrder(t *testing.T) {
	c, err := load(t, `
defaults:
  compression: snappy
  max_rows: 10
routes:
  - match: "SALES.ORD*"
    layout: flat
  - match: "SALES.*"
    max_rows: 5
`)
	if err != nil {
		t.Fatal(err)
	}
	if r := c.RouteFor("SALES.ORDERS"); r.Layout != "flat" || r.MaxRows != 10 || r.Compression != "snappy" {
		t.Errorf("SALES.ORDERS = %+v", r)
	}
	if r := c.RouteFor("SALES.ITEMS"); r.Layout != "images" || r.MaxRows != 5 {
		t.Errorf("SALES.ITEMS = %+v", r)
	}
}

func TestErrorsNameTheirKeys(t *testing.T) {
	_, err := load(t, `
source:
  format: avro
  goldengate:
    qual: x
    insertOp: UPDATE
batch:
  max_buffered_bytes: 12
sink:
  current:
    mode: merge-on-write
defaults:
  compresion: zstd
  layout: wide
  max_age: -1s
routes:
  - path: /abs
    types:
      X: decimal(40,2)
  - match: "A*"
    numbers: string
    columns:
      include: ["[bad"]
tables:
  exclude: ["[x"]
`)
	if err == nil {
		t.Fatal("no error")
	}
	// Names the stages define (format, layout, path, types, numbers,
	// decoder options) are checked by pipelines.Compile.
	for _, want := range []string{
		"defaults.compresion: unknown key (line 13)",
		`sink.current.mode: is "merge-on-write": must be copy-on-write or merge-on-read`,
		"batch.max_buffered_bytes: must be at least 1MiB",
		"defaults.max_age: must not be negative",
		"routes[0].match: required",
		"routes[1].columns.include[0]: bad glob",
		"tables.exclude[0]: bad glob",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

func TestValidateDoesNotChangeTheConfig(t *testing.T) {
	c, err := load(t, "routes:\n  - match: \"A.*\"\n")
	if err != nil {
		t.Fatal(err)
	}
	before := fmt.Sprintf("%+v", *c)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if after := fmt.Sprintf("%+v", *c); after != before {
		t.Errorf("Validate changed the config:\n%s\n%s", before, after)
	}
}

func TestDuplicateRouteMatch(t *testing.T) {
	_, err := load(t, "routes:\n  - match: \"A.*\"\n    layout: flat\n  - match: \"A.*\"\n    max_rows: 5\n")
	if err == nil || !strings.Contains(err.Error(), `routes[1].match: "A.*" is already the match of routes[0]`) {
		t.Errorf("duplicate match: %v", err)
	}
}

func TestSizesAndDurations(t *testing.T) {
	for in, want := range map[string]int64{"1024": 1024, "128MiB": 128 << 20, "1GB": 1e9, "64 KiB": 64 << 10, "7B": 7} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "-5", "1.5GB", "12XB"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
	if _, err := load(t, "defaults:\n  max_age: soon\n"); err == nil || !strings.Contains(err.Error(), "bad duration") {
		t.Errorf("bad duration: %v", err)
	}
}

func TestFilter(t *testing.T) {
	f := Filter{Include: []string{"SALES.*", "HR.EMP*"}, Exclude: []string{"SALES.TMP_*"}}
	for name, want := range map[string]bool{"SALES.ORDERS": true, "SALES.TMP_X": false, "HR.EMPLOYEES": true, "HR.DEPT": false} {
		if got := f.Allowed(name); got != want {
			t.Errorf("Allowed(%q) = %v, want %v", name, got, want)
		}
	}
	if !(Filter{}).Allowed("anything") {
		t.Error("empty filter must allow everything")
	}
	if !Match("*", "db.schema.table") {
		t.Error("* must match across dots")
	}
}

// TestEveryBadValue: values that cannot be decoded are all reported, each
// with its key path, and a number with a fraction is not an integer.
func TestEveryBadValue(t *testing.T) {
	_, err := load(t, `
batch:
  max_buffered_bytes: lots
  max_open_files: "many"
defaults:
  max_rows: 1.5
  max_age: soon
routes:
  - match: "A.*"
    row_group_rows: 2e3
    types: [a, b]
`)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`batch.max_buffered_bytes: line 3: bad size "lots"`,
		`batch.max_open_files: "many" is not an integer (line 4)`,
		`defaults.max_rows: "1.5" is not an integer (line 6)`,
		`defaults.max_age: line 7: bad duration "soon"`,
		`routes[0].row_group_rows: "2e3" is not an integer (line 10)`,
		`routes[0].types: `,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

func TestInterpolation(t *testing.T) {
	t.Setenv("LAKE_BUCKET", "s3://lake?region=eu-west-1")
	t.Setenv("ROWS", "500")
	t.Setenv("EMPTY", "")
	c, err := load(t, `
sink:
  url: ${LAKE_BUCKET}&prefix=${PREFIX:-cdc/}
defaults:
  max_rows: ${ROWS}
  path: "{table}/${EMPTY:-x}/$${literal}"
routes:
  - match: "${MATCH:-A.*}"
`)
	if err != nil {
		t.Fatal(err)
	}
	if c.Sink.URL != "s3://lake?region=eu-west-1&prefix=cdc/" || c.Defaults.MaxRows != 500 ||
		c.Defaults.Path != "{table}/x/${literal}" || c.Routes[0].Match != "A.*" {
		t.Errorf("interpolated: sink %q, max_rows %d, path %q, match %q", c.Sink.URL, c.Defaults.MaxRows, c.Defaults.Path, c.Routes[0].Match)
	}
	_, err = load(t, "sink:\n  url: ${NOT_SET_ANYWHERE}\ndefaults:\n  max_rows: \"${ROWS}\"\n  path: ${bad name}\n")
	for _, want := range []string{
		"sink.url: ${NOT_SET_ANYWHERE}: the environment variable NOT_SET_ANYWHERE is not set",
		`defaults.max_rows: "500" is not an integer`, // quoted: stays text
		"defaults.path: ${bad name}: not a variable name",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

func TestLimit(t *testing.T) {
	for in, want := range map[string]Limit{
		"": {}, "0": {Set: true}, "100": {Set: true, Count: 100},
		"0.01": {Set: true, Fraction: 0.01}, "2.5%": {Set: true, Fraction: 0.025},
	} {
		if got, err := ParseLimit(in); err != nil || got != want {
			t.Errorf("ParseLimit(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"-1", "1.5", "100%", "0%", "x", "NaN"} {
		if _, err := ParseLimit(in); err == nil {
			t.Errorf("ParseLimit(%q) accepted", in)
		}
	}
	for _, c := range []struct {
		l        string
		n, total int64
		want     bool
	}{{"", 1 << 40, 1, false}, {"0", 1, 10, true}, {"0", 0, 10, false}, {"5", 5, 10, false}, {"5", 6, 10, true},
		{"10%", 10, 100, false}, {"10%", 11, 100, true}, {"0.5", 0, 0, false}} {
		l, _ := ParseLimit(c.l)
		if got := l.Exceeded(c.n, c.total); got != c.want {
			t.Errorf("limit %q: Exceeded(%d, %d) = %v", c.l, c.n, c.total, got)
		}
	}
}

// TestReadReportsEveryPhase: a bad value is cleared and the rest of the
// file still read, so Validate's findings come in the same report.
func TestReadReportsEveryPhase(t *testing.T) {
	_, err := load(t, "sink:\n  max_dead_letters: many\ndefaults:\n  max_rows: lots\n  max_age: -1s\nlog:\n  format: xml\n")
	for _, want := range []string{
		`sink.max_dead_letters: line 2: bad limit "many"`,
		`defaults.max_rows: "lots" is not an integer (line 4)`,
		"defaults.max_age: must not be negative",
		`log.format: "xml", want text or json`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

func TestKafkaSection(t *testing.T) {
	c, err := load(t, "source:\n  kafka:\n    brokers: [a:9092]\n    topics: [t]\n    group: g\n")
	if err != nil {
		t.Fatal(err)
	}
	if k := c.Source.Kafka; !k.Set() || k.ClientID != "cdclake" || k.Start != "earliest" || time.Duration(k.CommitInterval) != 5*time.Second {
		t.Errorf("kafka section = %+v", k)
	}
	_, err = load(t, "source:\n  url: kafka://a:9092/t?group=g\n  kafka:\n    topics: [t]\n    fetch_max_bytes: 3GiB\n")
	for _, want := range []string{"source: url and kafka both say where to read", "source.kafka.fetch_max_bytes: must be below 2GiB"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

func TestExpiryNeedsCompaction(t *testing.T) {
	c, err := Read("")
	if err != nil {
		t.Fatal(err)
	}
	c.Sink.Iceberg.ExpireOlderThan = Duration(time.Hour)
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "sink.iceberg.expire_older_than: needs sink.iceberg.compact_interval") {
		t.Errorf("expiry without compaction: %v", err)
	}
	c.Sink.Iceberg.CompactInterval = Duration(time.Hour)
	c.Sink.Iceberg.RetainLast = 0
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "sink.iceberg.retain_last") {
		t.Errorf("retain_last 0: %v", err)
	}
}
