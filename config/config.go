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
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
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
	// Observability configures the metrics and probes endpoint.
	Observability Observability `yaml:"observability"`
	// Log configures the log lines (the --log-level and --log-format flags
	// override it).
	Log Log `yaml:"log"`
	// ProgressInterval is how often a progress line is logged.
	ProgressInterval Duration `yaml:"progress_interval"`
	// ShutdownTimeout bounds, after a stop signal, the writing of the open
	// files and the final commit.
	ShutdownTimeout Duration `yaml:"shutdown_timeout"`
}

// Source configures decoding.
type Source struct {
	// URL of the source; the --source flag overrides it. A Kafka source
	// can be given as the kafka section instead.
	URL string `yaml:"url"`
	// Kafka reads Kafka topics as a consumer group member: the long form
	// of a kafka:// source URL.
	Kafka Kafka `yaml:"kafka"`
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

// Kafka is a Kafka source: the same settings as the parameters of a
// kafka:// URL, which stays a shorthand for it.
type Kafka struct {
	Brokers                []string  `yaml:"brokers"`
	Topics                 []string  `yaml:"topics"`
	Regex                  bool      `yaml:"regex"`
	Group                  string    `yaml:"group"`
	InstanceID             string    `yaml:"instance_id"`
	ClientID               string    `yaml:"client_id"`
	Start                  string    `yaml:"start"`
	OnGap                  string    `yaml:"on_gap"`
	OnClaimError           string    `yaml:"on_claim_error"`
	SessionTimeout         Duration  `yaml:"session_timeout"`
	MetadataMaxAge         Duration  `yaml:"metadata_max_age"`
	FetchMaxWait           Duration  `yaml:"fetch_max_wait"`
	FetchMaxBytes          Size      `yaml:"fetch_max_bytes"`
	FetchMaxPartitionBytes Size      `yaml:"fetch_max_partition_bytes"`
	CommitInterval         Duration  `yaml:"commit_interval"`
	TLS                    KafkaTLS  `yaml:"tls"`
	SASL                   KafkaSASL `yaml:"sasl"`
}

// Set reports whether the section names a source: brokers, topics or a
// group.
func (k *Kafka) Set() bool { return len(k.Brokers) > 0 || len(k.Topics) > 0 || k.Group != "" }

// KafkaTLS encrypts the connection to the brokers. Files are PEM.
type KafkaTLS struct {
	Enabled    bool   `yaml:"enabled"`
	CAFile     string `yaml:"ca_file"`
	CertFile   string `yaml:"cert_file"`
	KeyFile    string `yaml:"key_file"`
	ServerName string `yaml:"server_name"`
}

// KafkaSASL authenticates to the brokers; the password is read from an
// environment variable or a file, never from the config.
type KafkaSASL struct {
	Mechanism    string `yaml:"mechanism"`
	Username     string `yaml:"username"`
	PasswordEnv  string `yaml:"password_env"`
	PasswordFile string `yaml:"password_file"`
}

// Observability configures the HTTP endpoint of metrics (/metrics) and
// probes (/healthz, /readyz).
type Observability struct {
	// Listen is the endpoint's address (host:port). Empty: :9464 for a
	// Kafka source, none for files; "off": none.
	Listen string `yaml:"listen"`
	// TableLabels bounds how many tables get a label of their own in the
	// per-table metrics, beside the tables a route matches; the others
	// share the label "_other".
	TableLabels int `yaml:"table_labels"`
	// CheckInterval is how often the readiness checks that connect (the
	// store, the registry, the brokers) run.
	CheckInterval Duration `yaml:"check_interval"`
	// StuckAfter is how many flush intervals (the longest max_age) may pass
	// without durable progress while data is pending before /readyz says
	// the run is stuck.
	StuckAfter int `yaml:"stuck_after"`
}

// Log configures logging.
type Log struct {
	// Level is debug, info, warn or error.
	Level string `yaml:"level"`
	// Format is text or json (one JSON object per line).
	Format string `yaml:"format"`
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
	// MaxDeadLetters is how many dead letters a run may write before it
	// fails with its own exit status: a count (0: none) or a fraction of
	// the messages read (0.01 or 1%). Unset: no limit.
	MaxDeadLetters Limit `yaml:"max_dead_letters"`
	// Iceberg is the catalog the tables of routes with table_format
	// iceberg are committed to.
	Iceberg Iceberg `yaml:"iceberg"`
	// Delta configures the Delta tables of routes with table_format delta.
	Delta Delta `yaml:"delta"`
	// Current is the current-state tables a run builds.
	Current Current `yaml:"current"`
}

// Current configures the current-state tables (cdclake snapshot) a run
// builds.
type Current struct {
	// Interval is how often a run brings the state tables of the tables
	// it lands up to date, and it does once more at its end; 0: never.
	Interval Duration `yaml:"interval"`
	// Buckets is the number of buckets of a new state table.
	Buckets int `yaml:"buckets"`
	// Mode is how a build writes the buckets it touches, for the state
	// tables that are Iceberg tables: copy-on-write (whole) or
	// merge-on-read (the rows it touched, and deletion vectors).
	Mode string `yaml:"mode"`
}

// Where Iceberg appends are committed (Iceberg.Appends): in cdclake's
// own process where the catalog and the table allow, or always in the
// full committer process.
const (
	AppendsInProcess = "in_process"
	AppendsCommitter = "committer"
)

// The current-state tables' modes (Current.Mode).
const (
	CopyOnWrite = "copy-on-write"
	MergeOnRead = "merge-on-read"
)

// Iceberg configures the Iceberg catalog.
type Iceberg struct {
	// Catalog is the SQL catalog's database: sqlite:///path.db or
	// postgres://… .
	Catalog string `yaml:"catalog"`
	// Namespace is the namespace the tables go under (dotted); empty:
	// each table's own dotted name makes its namespaces.
	Namespace string `yaml:"namespace"`
	// Warehouse is the lake's root as Iceberg addresses it; empty: from
	// the sink URL, for file:// and s3:// lakes.
	Warehouse string `yaml:"warehouse"`
	// CommitInterval is how often written files are committed.
	CommitInterval Duration `yaml:"commit_interval"`
	// Appends says where commits that append files are written:
	// AppendsInProcess (empty too) or AppendsCommitter.
	Appends string `yaml:"appends"`
	// CompactInterval is how often a run compacts the tables it commits
	// to (cdclake compact); 0: never.
	CompactInterval Duration `yaml:"compact_interval"`
	// CompactTargetSize is the size compacted files aim at.
	CompactTargetSize Size `yaml:"compact_target_size"`
	// ExpireOlderThan, when positive, makes each compaction of a run also
	// expire the table's snapshots older than it (cdclake compact
	// --expire-older-than), but the newest RetainLast.
	ExpireOlderThan Duration `yaml:"expire_older_than"`
	RetainLast      int      `yaml:"retain_last"`
	// Properties are the catalog's file IO properties (s3.endpoint, …).
	Properties map[string]string `yaml:"properties"`
}

// Delta configures the Delta tables: their logs are in the lake, beside
// their files, so no catalog is needed.
type Delta struct {
	// CommitInterval is how often written files are committed.
	CommitInterval Duration `yaml:"commit_interval"`
	// CheckpointInterval is the number of versions between a table's
	// checkpoints.
	CheckpointInterval int `yaml:"checkpoint_interval"`
	// CompactInterval is how often a run compacts the tables it commits
	// to (cdclake compact); 0: never.
	CompactInterval Duration `yaml:"compact_interval"`
	// CompactTargetSize is the size compacted files aim at.
	CompactTargetSize Size `yaml:"compact_target_size"`
	// ExpireOlderThan and RetainLast say when the files cdclake wrote for
	// a table and its versions replaced (a current-state table's, a
	// compaction's) are deleted: once the newest RetainLast versions do
	// not name them and they were replaced longer ago than
	// ExpireOlderThan (0: at once).
	ExpireOlderThan Duration `yaml:"expire_older_than"`
	RetainLast      int      `yaml:"retain_last"`
	// LogRetention is how long a table's log keeps the versions before a
	// checkpoint older than it; 0: forever.
	LogRetention Duration `yaml:"log_retention"`
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
	// TableFormat commits the files of the tables to a lakehouse table
	// format: none (empty), iceberg or delta.
	TableFormat string `yaml:"table_format"`
	// Key names the table's key columns, which its current-state table
	// (cdclake snapshot) keeps one row per; empty: the ones GoldenGate
	// records name.
	Key []string `yaml:"key"`
}

// Default holds every default value; nothing else in cdclake has its own.
var Default = Config{
	Source: Source{Format: "auto", BlockLines: 4096, BlockBytes: 16 << 20,
		Kafka: Kafka{ClientID: "cdclake", Start: "earliest", OnGap: "fail", OnClaimError: "wait", CommitInterval: Duration(5 * time.Second),
			FetchMaxWait: Duration(500 * time.Millisecond)},
		SchemaRegistry: SchemaRegistry{Timeout: Duration(10 * time.Second), CacheSize: 1024}},
	Sink: Sink{RetryFor: Duration(10 * time.Minute), Iceberg: Iceberg{CommitInterval: Duration(10 * time.Second), CompactTargetSize: 128 << 20, RetainLast: 10},
		Delta: Delta{CommitInterval: Duration(10 * time.Second), CheckpointInterval: 10, CompactTargetSize: 128 << 20, ExpireOlderThan: Duration(time.Hour), RetainLast: 10,
			LogRetention: Duration(30 * 24 * time.Hour)},
		Current: Current{Buckets: 16, Mode: CopyOnWrite}},
	Batch: Batch{MaxBufferedBytes: 256 << 20, MaxOpenFiles: 8192},
	Defaults: Route{Path: "{table}/date={date}", Layout: "images", MaxRows: 1_000_000, MaxBytes: 128 << 20,
		MaxAge: Duration(5 * time.Minute), Compression: "zstd", RowGroup: 128 * 1024, Numbers: "decimal_text"},
	Observability:    Observability{TableLabels: 100, CheckInterval: Duration(5 * time.Second), StuckAfter: 3},
	Log:              Log{Level: "info", Format: "text"},
	ProgressInterval: Duration(5 * time.Second),
	ShutdownTimeout:  Duration(25 * time.Second),
}

// Load reads a YAML file (empty name: defaults only), fills defaults and
// validates: Read, then Validate, with every error of both.
func Load(file string) (*Config, error) {
	c, err := Read(file)
	if c == nil {
		return nil, err
	}
	if err := errors.Join(err, c.Validate()); err != nil {
		return nil, err
	}
	return c, nil
}

// Read reads a YAML file (empty name: defaults only) and fills defaults,
// without Validate. Its error lists every key it could not read: unknown
// keys, values of the wrong type and unset ${VAR}s, each with its key path.
// Unless the file could not be read or is not YAML, the Config is returned
// even then, with those keys at their defaults, so that a caller reports
// in one go what Read, Validate and later checks find.
func Read(file string) (*Config, error) {
	c := Default
	if file == "" {
		return &c, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	errs := interpolate(&doc, "", os.LookupEnv)
	errs = append(errs, unknownKeys(&doc, reflect.TypeOf(Config{}), "")...)
	var raw Config
	if len(doc.Content) > 0 {
		if err := doc.Decode(&raw); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
	}
	c = merge(c, raw)
	return &c, errors.Join(errs...)
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
	k, dk := &out.Source.Kafka, def.Source.Kafka
	k.ClientID = cmp.Or(k.ClientID, dk.ClientID)
	k.Start = cmp.Or(k.Start, dk.Start)
	k.OnGap = cmp.Or(k.OnGap, dk.OnGap)
	k.OnClaimError = cmp.Or(k.OnClaimError, dk.OnClaimError)
	k.CommitInterval = cmp.Or(k.CommitInterval, dk.CommitInterval)
	k.FetchMaxWait = cmp.Or(k.FetchMaxWait, dk.FetchMaxWait)
	out.Sink.Iceberg.CommitInterval = cmp.Or(out.Sink.Iceberg.CommitInterval, def.Sink.Iceberg.CommitInterval)
	out.Sink.Iceberg.CompactTargetSize = cmp.Or(out.Sink.Iceberg.CompactTargetSize, def.Sink.Iceberg.CompactTargetSize)
	out.Sink.Iceberg.RetainLast = cmp.Or(out.Sink.Iceberg.RetainLast, def.Sink.Iceberg.RetainLast)
	out.Sink.Delta.CommitInterval = cmp.Or(out.Sink.Delta.CommitInterval, def.Sink.Delta.CommitInterval)
	out.Sink.Delta.CheckpointInterval = cmp.Or(out.Sink.Delta.CheckpointInterval, def.Sink.Delta.CheckpointInterval)
	out.Sink.Delta.RetainLast = cmp.Or(out.Sink.Delta.RetainLast, def.Sink.Delta.RetainLast)
	out.Sink.Delta.CompactTargetSize = cmp.Or(out.Sink.Delta.CompactTargetSize, def.Sink.Delta.CompactTargetSize)
	out.Sink.Current.Buckets = cmp.Or(out.Sink.Current.Buckets, def.Sink.Current.Buckets)
	out.Sink.Current.Mode = cmp.Or(out.Sink.Current.Mode, def.Sink.Current.Mode)
	o, do := &out.Observability, def.Observability
	o.TableLabels = cmp.Or(o.TableLabels, do.TableLabels)
	o.CheckInterval = cmp.Or(o.CheckInterval, do.CheckInterval)
	o.StuckAfter = cmp.Or(o.StuckAfter, do.StuckAfter)
	out.Log.Level = cmp.Or(out.Log.Level, def.Log.Level)
	out.Log.Format = cmp.Or(out.Log.Format, def.Log.Format)
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
	if r.TableFormat == "" {
		r.TableFormat = def.TableFormat
	}
	if r.SourceColumns == nil {
		r.SourceColumns = def.SourceColumns
	}
	if r.Key == nil {
		r.Key = def.Key
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
	c.Source.SchemaRegistry.validate(bad)
	c.validateBounds(bad)
	c.Source.Kafka.validate(c.Source.URL, bad)
	c.Observability.validate(bad)
	if err := CheckListen("observability.listen", c.Observability.Listen); err != nil {
		errs = append(errs, err)
	}
	if err := CheckLog(c.Log.Level, c.Log.Format); err != nil {
		errs = append(errs, err)
	}
	c.validateTables(bad)
	c.validateIceberg(bad)
	if c.Sink.Delta.CommitInterval <= 0 {
		bad("sink.delta.commit_interval", "must be positive")
	}
	if c.Sink.Delta.CheckpointInterval < 1 {
		bad("sink.delta.checkpoint_interval", "must be ≥ 1")
	}
	if c.Sink.Delta.CompactInterval < 0 {
		bad("sink.delta.compact_interval", "must not be negative")
	}
	if c.Sink.Delta.CompactTargetSize <= 0 {
		bad("sink.delta.compact_target_size", "must be positive")
	}
	if c.Sink.Delta.ExpireOlderThan < 0 {
		bad("sink.delta.expire_older_than", "must not be negative")
	}
	if c.Sink.Delta.RetainLast < 1 {
		bad("sink.delta.retain_last", "must be ≥ 1")
	}
	if c.Sink.Delta.LogRetention < 0 {
		bad("sink.delta.log_retention", "must not be negative")
	}
	c.validateCurrent(bad)
	return errors.Join(errs...)
}

// validate checks the schema_registry section: the keys that only make
// sense together, no credentials in the URL, and a positive timeout and
// cache size.
func (r *SchemaRegistry) validate(bad func(string, string, ...any)) {
	if r.URL != "" || r.Username != "" {
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
	if r.Timeout <= 0 {
		bad("source.schema_registry.timeout", "must be positive")
	}
	if r.CacheSize < 1 {
		bad("source.schema_registry.cache_size", "must be ≥ 1")
	}
}

// validateBounds checks the bounds of a run: the batch's memory and open
// files, and the progress interval, shutdown timeout and sink retry time.
func (c *Config) validateBounds(bad func(string, string, ...any)) {
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
}

// validate checks the kafka section when it names a source: that the
// source's url does not name another one, that no duration is negative
// and that the fetch sizes fit Kafka's 32-bit fields.
func (k *Kafka) validate(sourceURL string, bad func(string, string, ...any)) {
	if !k.Set() {
		return
	}
	if sourceURL != "" {
		bad("source", "url and kafka both say where to read: keep one")
	}
	for _, d := range []struct {
		key string
		v   Duration
	}{{"session_timeout", k.SessionTimeout}, {"metadata_max_age", k.MetadataMaxAge}, {"fetch_max_wait", k.FetchMaxWait},
		{"commit_interval", k.CommitInterval}} {
		if d.v < 0 {
			bad("source.kafka."+d.key, "must not be negative")
		}
	}
	for _, s := range []struct {
		key string
		v   Size
	}{{"fetch_max_bytes", k.FetchMaxBytes}, {"fetch_max_partition_bytes", k.FetchMaxPartitionBytes}} {
		if s.v > math.MaxInt32 {
			bad("source.kafka."+s.key, "must be below 2GiB")
		}
	}
}

// validate checks the observability section's numbers; its listen address
// is CheckListen's.
func (o *Observability) validate(bad func(string, string, ...any)) {
	if o.TableLabels < 0 {
		bad("observability.table_labels", "must not be negative")
	}
	if o.CheckInterval <= 0 {
		bad("observability.check_interval", "must be positive")
	}
	if o.StuckAfter < 1 {
		bad("observability.stuck_after", "must be ≥ 1")
	}
}

// validateTables checks the globs of the tables filter, then the defaults
// and each route, and that no two routes share a match: the first one
// would always win.
func (c *Config) validateTables(bad func(string, string, ...any)) {
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
}

// validateCurrent checks the settings of the current-state tables.
func (c *Config) validateCurrent(bad func(string, string, ...any)) {
	if c.Sink.Current.Interval < 0 {
		bad("sink.current.interval", "must not be negative")
	}
	if c.Sink.Current.Buckets < 1 {
		bad("sink.current.buckets", "must be ≥ 1")
	}
	if m := c.Sink.Current.Mode; m != CopyOnWrite && m != MergeOnRead {
		bad("sink.current.mode", "is %q: must be %s or %s", m, CopyOnWrite, MergeOnRead)
	}
}

// validateIceberg checks that tables committed to Iceberg have a catalog,
// and the catalog's settings.
func (c *Config) validateIceberg(bad func(string, string, ...any)) {
	uses := c.Defaults.TableFormat == "iceberg"
	for _, r := range c.Routes {
		uses = uses || r.TableFormat == "iceberg"
	}
	ice := c.Sink.Iceberg
	if uses && ice.Catalog == "" {
		bad("sink.iceberg.catalog", "is required for the tables with table_format iceberg")
	}
	if ice.Catalog != "" && !strings.HasPrefix(ice.Catalog, "sqlite://") && !strings.HasPrefix(ice.Catalog, "postgres://") &&
		!strings.HasPrefix(ice.Catalog, "postgresql://") && !strings.HasPrefix(ice.Catalog, "http://") && !strings.HasPrefix(ice.Catalog, "https://") {
		bad("sink.iceberg.catalog", "%q: want sqlite:///path.db, postgres://… or a REST catalog's http(s)://…", ice.Catalog)
	}
	if ice.CommitInterval <= 0 {
		bad("sink.iceberg.commit_interval", "must be positive")
	}
	if ice.CompactInterval < 0 {
		bad("sink.iceberg.compact_interval", "must not be negative")
	}
	if a := ice.Appends; a != "" && a != AppendsInProcess && a != AppendsCommitter {
		bad("sink.iceberg.appends", "is %q: must be %s or %s", a, AppendsInProcess, AppendsCommitter)
	}
	if ice.ExpireOlderThan < 0 {
		bad("sink.iceberg.expire_older_than", "must not be negative")
	}
	if ice.ExpireOlderThan > 0 && ice.CompactInterval == 0 {
		bad("sink.iceberg.expire_older_than", "needs sink.iceberg.compact_interval: a run expires snapshots when it compacts")
	}
	if ice.RetainLast < 1 {
		bad("sink.iceberg.retain_last", "must be ≥ 1")
	}
	if ice.CompactTargetSize <= 0 {
		bad("sink.iceberg.compact_target_size", "must be positive")
	}
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
	for i, k := range r.Key {
		if strings.TrimSpace(k) == "" || slices.Contains(r.Key[:i], k) {
			bad(key+".key", "%q: want the names of distinct columns", k)
		}
	}
	if r.TableFormat != "" && r.TableFormat != "iceberg" && r.TableFormat != "delta" && r.TableFormat != "none" {
		bad(key+".table_format", "%q, want none, iceberg or delta", r.TableFormat)
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

// CheckListen checks the address of the metrics endpoint: host:port, "" or
// "off".
func CheckListen(key, addr string) error {
	if addr == "" || addr == "off" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s: %q is not host:port or off", key, addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%s: %q: bad port", key, addr)
	}
	return nil
}

// CheckLog checks a log level and format, with errors naming log.level and
// log.format.
func CheckLog(level, format string) error {
	var errs []error
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		errs = append(errs, fmt.Errorf("log.level: %q, want debug, info, warn or error", level))
	}
	if format != "text" && format != "json" {
		errs = append(errs, fmt.Errorf("log.format: %q, want text or json", format))
	}
	return errors.Join(errs...)
}

// Limit is a bound on a count, given as a count ("100") or as a fraction of
// a total ("0.01", "1%"). The zero Limit is no bound.
type Limit struct {
	// Set is false for no bound.
	Set bool
	// Count is the bound when Fraction is 0.
	Count int64
	// Fraction, in (0, 1), bounds the count relative to a total.
	Fraction float64
}

// UnmarshalYAML parses a limit.
func (l *Limit) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseLimit(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*l = v
	return nil
}

// ParseLimit parses a count (an integer ≥ 0) or a fraction (a number
// between 0 and 1 exclusive, or a percentage below 100%); "" is no limit.
func ParseLimit(s string) (Limit, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Limit{}, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return Limit{}, fmt.Errorf("bad limit %q: a count must not be negative", s)
		}
		return Limit{Set: true, Count: n}, nil
	}
	num, scale := s, 1.0
	if strings.HasSuffix(s, "%") {
		num, scale = strings.TrimSpace(strings.TrimSuffix(s, "%")), 100
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || f/scale <= 0 || f/scale >= 1 {
		return Limit{}, fmt.Errorf("bad limit %q (a count such as 100, or a fraction such as 0.01 or 1%%)", s)
	}
	return Limit{Set: true, Fraction: f / scale}, nil
}

// Exceeded reports whether n of total exceeds the limit.
func (l Limit) Exceeded(n, total int64) bool {
	switch {
	case !l.Set:
		return false
	case l.Fraction > 0:
		return total > 0 && float64(n) > l.Fraction*float64(total)
	}
	return n > l.Count
}

// String returns the limit as it is written in the config.
func (l Limit) String() string {
	switch {
	case !l.Set:
		return ""
	case l.Fraction > 0:
		return strconv.FormatFloat(l.Fraction, 'g', -1, 64)
	}
	return strconv.FormatInt(l.Count, 10)
}
