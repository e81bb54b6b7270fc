// Package config loads and validates cdclake's YAML configuration.
//
// # Layout
//
//	source:      how messages are read and decoded (format, field names)
//	sink:        where the lake is
//	batch:       global memory bounds
//	defaults:    route settings for tables no route matches
//	routes:      per-table settings, first matching glob wins
//	tables:      include/exclude globs over qualified table names
//
// Every key is optional; Load fills defaults, rejects unknown keys and
// reports every invalid value with its key (see Validate). config/example.yaml
// lists every key with its default.
//
// # Plain data
//
// A Config is plain data: this package checks what can be checked without
// knowing the stages (ranges, globs, required keys). Names the stages
// define (formats, layouts, column types, compressions, path templates,
// decoder options) are parsed, with errors naming their keys, when the
// pipeline compiles the config (pipelines.Compile), which both
// "cdclake run" and "cdclake validate" do.
package config

import (
	"errors"
	"fmt"
	"os"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is the whole configuration.
type Config struct {
	Source   Source  `yaml:"source"`
	Sink     Sink    `yaml:"sink"`
	Batch    Batch   `yaml:"batch"`
	Defaults Route   `yaml:"defaults"`
	Routes   []Route `yaml:"routes"`
	Tables   Filter  `yaml:"tables"`
	// ProgressInterval is how often a progress line is logged.
	ProgressInterval Duration `yaml:"progress_interval"`
	// ShutdownTimeout bounds, after a stop signal, the writing of the open
	// files and the final commit.
	ShutdownTimeout Duration `yaml:"shutdown_timeout"`
}

// Source configures decoding.
type Source struct {
	// URL of the source; the --source flag overrides it.
	URL string `yaml:"url"`
	// Format forces one format for every message: auto (default),
	// goldengate, goldengate-bigdata, debezium.
	Format string `yaml:"format"`
	// GoldenGate renames Data Streams fields and operation strings, by
	// their Data Streams property names (qualifiedTable, opType,
	// opTimestamp, transactionId, position, csn, tokens, beforeImageName,
	// afterImageName, insertOp, updateOp, deleteOp, upsertOp).
	GoldenGate map[string]string `yaml:"goldengate"`
	// GoldenGateBigData renames Big Data JSON formatter fields and
	// operation keys (table, opType, …, truncateOpKey).
	GoldenGateBigData map[string]string `yaml:"goldengate_bigdata"`
	// Debezium configures the Debezium decoder
	// (unavailable_value_placeholder).
	Debezium map[string]string `yaml:"debezium"`
	// BlockLines is how many messages travel together through the router.
	BlockLines int `yaml:"block_lines"`
	// BlockBytes bounds a block's bytes (a longer message travels alone).
	BlockBytes Size `yaml:"block_bytes"`
	// SchemaRegistry is where the writer schemas of Confluent-framed Avro
	// records are looked up.
	SchemaRegistry SchemaRegistry `yaml:"schema_registry"`
}

// SchemaRegistry configures a Confluent-compatible schema registry.
type SchemaRegistry struct {
	// URL of the registry's API (http:// or https://), or the path of a
	// JSON file of saved schemas by id (replays); empty: Avro records are
	// dead letters.
	URL string `yaml:"url"`
	// Username enables basic auth; the password is read from the
	// environment variable PasswordEnv or the file PasswordFile.
	Username     string `yaml:"username"`
	PasswordEnv  string `yaml:"password_env"`
	PasswordFile string `yaml:"password_file"`
	// CAFile verifies the registry (PEM; default: the system's roots);
	// CertFile and KeyFile authenticate cdclake with a client certificate.
	CAFile   string `yaml:"ca_file"`
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// Timeout bounds one request.
	Timeout Duration `yaml:"timeout"`
	// CacheSize bounds how many schemas are kept.
	CacheSize int `yaml:"cache_size"`
}

// Sink configures storage.
type Sink struct {
	// URL of the lake; the --sink flag overrides it.
	URL string `yaml:"url"`
	// RetryFor bounds how long a write the store fails is retried.
	RetryFor Duration `yaml:"retry_for"`
	// DeadLetters is where dead letters go: empty for the lake's
	// _dead_letter/ folder, or a Kafka topic, kafka://brokers/topic?… with
	// the source URL's connection parameters.
	DeadLetters string `yaml:"dead_letters"`
}

// Batch bounds memory across all tables.
type Batch struct {
	MaxBufferedBytes Size `yaml:"max_buffered_bytes"`
	MaxOpenFiles     int  `yaml:"max_open_files"`
}

// Filter includes and excludes names by glob (path.Match syntax, '*' also
// matching dots). Empty include means all.
type Filter struct {
	Include []string `yaml:"include"`
	Exclude []string `yaml:"exclude"`
}

// Route holds per-table settings. In routes, unset keys take the defaults'.
type Route struct {
	// Match is a glob over qualified table names (routes only).
	Match string `yaml:"match"`
	// Path is the directory template: {table} {date} {yyyy} {mm} {dd} {hh}.
	Path        string   `yaml:"path"`
	Layout      string   `yaml:"layout"`
	MaxRows     int      `yaml:"max_rows"`
	MaxBytes    Size     `yaml:"max_bytes"`
	MaxAge      Duration `yaml:"max_age"`
	Compression string   `yaml:"compression"`
	// CompressionLevel is the codec's level (zstd 1-22, gzip 1-9); 0 is
	// the default: zstd's fastest (1), gzip's own.
	CompressionLevel int `yaml:"compression_level"`
	RowGroup         int `yaml:"row_group_rows"`
	// Numbers is the type of GoldenGate number columns: decimal_text
	// (default, exact), decimal(p,s), int64 or double.
	Numbers string `yaml:"numbers"`
	// Columns filters source columns.
	Columns Filter `yaml:"columns"`
	// Types overrides column types by name (decimal(12,2), date, …).
	Types map[string]string `yaml:"types"`
	// SourceColumns lands the source record's key and headers with each
	// row: [key], [headers] or [key, headers].
	SourceColumns []string `yaml:"source_columns"`
}

// Default holds every default value; nothing else in cdclake has its own.
var Default = Config{
	Source: Source{Format: "auto", BlockLines: 4096, BlockBytes: 16 << 20,
		SchemaRegistry: SchemaRegistry{Timeout: Duration(10 * time.Second), CacheSize: 1024}},
	Sink:  Sink{RetryFor: Duration(10 * time.Minute)},
	Batch: Batch{MaxBufferedBytes: 256 << 20, MaxOpenFiles: 8192},
	Defaults: Route{Path: "{table}/date={date}", Layout: "images", MaxRows: 1_000_000, MaxBytes: 128 << 20,
		MaxAge: Duration(5 * time.Minute), Compression: "zstd", RowGroup: 128 * 1024, Numbers: "decimal_text"},
	ProgressInterval: Duration(5 * time.Second),
	ShutdownTimeout:  Duration(25 * time.Second),
}

// Load reads a YAML file (empty name: defaults only), fills defaults and
// validates.
func Load(file string) (*Config, error) {
	c := Default
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(data, &doc); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		// Every unknown key and every bad value, each with its key path; a
		// value that cannot be decoded stops here, the others are reported
		// with what Validate finds.
		unknown := unknownKeys(&doc, reflect.TypeOf(Config{}), "")
		if slices.ContainsFunc(unknown, func(err error) bool { _, ok := err.(valueError); return ok }) {
			return nil, fmt.Errorf("%s: %w", file, errors.Join(unknown...))
		}
		var raw Config
		if len(doc.Content) > 0 {
			if err := doc.Decode(&raw); err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
		}
		c = merge(c, raw)
		if err := errors.Join(append(unknown, c.Validate())...); err != nil {
			return nil, err
		}
		return &c, nil
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

func merge(def, c Config) Config {
	out := c
	if out.Source.Format == "" {
		out.Source.Format = def.Source.Format
	}
	if out.Source.BlockLines == 0 {
		out.Source.BlockLines = def.Source.BlockLines
	}
	if out.Source.BlockBytes == 0 {
		out.Source.BlockBytes = def.Source.BlockBytes
	}
	if out.Source.SchemaRegistry.Timeout == 0 {
		out.Source.SchemaRegistry.Timeout = def.Source.SchemaRegistry.Timeout
	}
	if out.Source.SchemaRegistry.CacheSize == 0 {
		out.Source.SchemaRegistry.CacheSize = def.Source.SchemaRegistry.CacheSize
	}
	if out.Sink.RetryFor == 0 {
		out.Sink.RetryFor = def.Sink.RetryFor
	}
	if out.Batch.MaxBufferedBytes == 0 {
		out.Batch.MaxBufferedBytes = def.Batch.MaxBufferedBytes
	}
	if out.Batch.MaxOpenFiles == 0 {
		out.Batch.MaxOpenFiles = def.Batch.MaxOpenFiles
	}
	if out.ProgressInterval == 0 {
		out.ProgressInterval = def.ProgressInterval
	}
	if out.ShutdownTimeout == 0 {
		out.ShutdownTimeout = def.ShutdownTimeout
	}
	out.Defaults = fillRoute(c.Defaults, def.Defaults)
	for i := range out.Routes {
		out.Routes[i] = fillRoute(out.Routes[i], out.Defaults)
	}
	return out
}

func fillRoute(r, def Route) Route {
	if r.Path == "" {
		r.Path = def.Path
	}
	if r.Layout == "" {
		r.Layout = def.Layout
	}
	if r.MaxRows == 0 {
		r.MaxRows = def.MaxRows
	}
	if r.MaxBytes == 0 {
		r.MaxBytes = def.MaxBytes
	}
	if r.MaxAge == 0 {
		r.MaxAge = def.MaxAge
	}
	if r.Compression == "" {
		r.Compression = def.Compression
	}
	if r.RowGroup == 0 {
		r.RowGroup = def.RowGroup
	}
	if r.Numbers == "" {
		r.Numbers = def.Numbers
	}
	if r.Columns.Include == nil && r.Columns.Exclude == nil {
		r.Columns = def.Columns
	}
	if r.Types == nil {
		r.Types = def.Types
	}
	if r.SourceColumns == nil {
		r.SourceColumns = def.SourceColumns
	}
	return r
}

// Validate reports every invalid value it can judge without the stages
// (see Plain data), each with its key. It does not change c.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if c.Source.BlockLines < 1 {
		bad("source.block_lines", "must be ≥ 1")
	}
	if c.Source.BlockBytes < 1 {
		bad("source.block_bytes", "must be ≥ 1")
	}
	if r := c.Source.SchemaRegistry; r.URL != "" || r.Username != "" {
		if r.URL == "" {
			bad("source.schema_registry.url", "is required with the other schema_registry keys")
		}
		if r.Username != "" && (r.PasswordEnv == "") == (r.PasswordFile == "") {
			bad("source.schema_registry", "give exactly one of password_env and password_file with username")
		}
		if (r.CertFile == "") != (r.KeyFile == "") {
			bad("source.schema_registry", "cert_file and key_file go together")
		}
		if strings.Contains(r.URL, "@") && strings.Contains(r.URL, "://") {
			bad("source.schema_registry.url", "credentials do not belong in the URL: use username with password_env or password_file")
		}
	}
	if c.Source.SchemaRegistry.Timeout <= 0 {
		bad("source.schema_registry.timeout", "must be positive")
	}
	if c.Source.SchemaRegistry.CacheSize < 1 {
		bad("source.schema_registry.cache_size", "must be ≥ 1")
	}
	if c.Batch.MaxBufferedBytes < 1<<20 {
		bad("batch.max_buffered_bytes", "must be at least 1MiB")
	}
	if c.Batch.MaxOpenFiles < 1 {
		bad("batch.max_open_files", "must be ≥ 1")
	}
	if c.ProgressInterval < 0 {
		bad("progress_interval", "must not be negative")
	}
	if c.ShutdownTimeout < 0 {
		bad("shutdown_timeout", "must not be negative")
	}
	if c.Sink.RetryFor < 0 {
		bad("sink.retry_for", "must not be negative")
	}
	checkGlobs := func(key string, globs []string) {
		for i, g := range globs {
			if _, err := path.Match(g, ""); err != nil {
				bad(fmt.Sprintf("%s[%d]", key, i), "bad glob %q", g)
			}
		}
	}
	checkGlobs("tables.include", c.Tables.Include)
	checkGlobs("tables.exclude", c.Tables.Exclude)
	c.Defaults.validate("defaults", false, bad, checkGlobs)
	seen := map[string]int{}
	for i := range c.Routes {
		key := fmt.Sprintf("routes[%d]", i)
		c.Routes[i].validate(key, true, bad, checkGlobs)
		if j, dup := seen[c.Routes[i].Match]; dup && c.Routes[i].Match != "" {
			bad(key+".match", "%q is already the match of routes[%d], which always wins", c.Routes[i].Match, j)
		} else {
			seen[c.Routes[i].Match] = i
		}
	}
	return errors.Join(errs...)
}

func (r *Route) validate(key string, isRoute bool, bad func(string, string, ...any), globs func(string, []string)) {
	if isRoute {
		if r.Match == "" {
			bad(key+".match", "required")
		} else if _, err := path.Match(r.Match, ""); err != nil {
			bad(key+".match", "bad glob %q", r.Match)
		}
	} else if r.Match != "" {
		bad(key+".match", "only routes have match")
	}
	if r.MaxRows < 1 {
		bad(key+".max_rows", "must be ≥ 1")
	}
	if r.MaxBytes < 1 {
		bad(key+".max_bytes", "must be ≥ 1")
	}
	if r.MaxAge < 0 {
		bad(key+".max_age", "must not be negative")
	}
	if r.RowGroup < 1 {
		bad(key+".row_group_rows", "must be ≥ 1")
	}
	globs(key+".columns.include", r.Columns.Include)
	globs(key+".columns.exclude", r.Columns.Exclude)
	for _, c := range r.SourceColumns {
		if c != "key" && c != "headers" {
			bad(key+".source_columns", "%q, want key or headers", c)
		}
	}
}

// Match reports whether name matches glob. '*' matches any run of
// characters, dots included.
func Match(glob, name string) bool {
	ok, _ := path.Match(strings.ReplaceAll(glob, "/", "\x00"), strings.ReplaceAll(name, "/", "\x00"))
	return ok
}

// Allowed applies a filter to a name.
func (f Filter) Allowed(name string) bool {
	in := len(f.Include) == 0
	for _, g := range f.Include {
		if Match(g, name) {
			in = true
			break
		}
	}
	if !in {
		return false
	}
	for _, g := range f.Exclude {
		if Match(g, name) {
			return false
		}
	}
	return true
}

// RouteFor returns the route a table uses: the first matching route, else
// the defaults.
func (c *Config) RouteFor(table string) *Route {
	for i := range c.Routes {
		if Match(c.Routes[i].Match, table) {
			return &c.Routes[i]
		}
	}
	return &c.Defaults
}

// Size is a byte count: an integer or a string like 128MiB, 64MB, 1GiB.
type Size int64

// UnmarshalYAML parses sizes.
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*s = Size(v)
	return nil
}

// ParseSize parses a byte count with an optional unit.
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad size %q (e.g. 134217728, 128MiB, 1GB)", s)
	}
	return n * mult, nil
}

// Duration is a time.Duration written like 30s or 5m.
type Duration time.Duration

// UnmarshalYAML parses durations.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: bad duration %q (e.g. 30s, 5m)", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}
