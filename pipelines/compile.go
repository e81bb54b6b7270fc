package pipelines

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cdclake/cdclake/pipelines/source/kafka"

	"github.com/cdclake/cdclake/config"
	"github.com/cdclake/cdclake/config/secrets"
	"github.com/cdclake/cdclake/handlers/avro"
	"github.com/cdclake/cdclake/handlers/batch"
	"github.com/cdclake/cdclake/handlers/classify"
	"github.com/cdclake/cdclake/handlers/resolve"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/lakehouse"
	"github.com/cdclake/cdclake/sinks/parquet"
)

// Plan is a config compiled into the typed settings the stages take: the
// decoders' options (checked by building the decoders once), the format,
// and per table the settings of its route. Compile is where config values
// are parsed; "cdclake run" and "cdclake validate" both call it, so
// validate rejects everything run would.
//
// A Plan is safe for concurrent use.
type Plan struct {
	cfg *config.Config
	// deadLetters is the Kafka topic dead letters go to; nil: the lake.
	deadLetters *kafka.Config
	// avro reads Confluent-framed Avro records; nil without a registry.
	avro   *avro.Codec
	routes []*route // cfg.Routes in order, then the defaults
	// iceberg is set when a route commits its tables to Iceberg: the
	// catalog and how it reaches the lake.
	iceberg *lakehouse.Config
	// icebergInLake says the Iceberg warehouse is the lake's root, as the
	// lake's bucket addresses it: commits can be written in process.
	icebergInLake bool
	// icebergAppends says appends may be committed in process
	// (sink.iceberg.appends).
	icebergAppends bool
	// delta is set when a route commits its tables to Delta.
	delta  bool
	tables sync.Map // table name → *tableRoute
	allow  sync.Map // table name → bool
}

type route struct {
	match   string
	resolve *resolve.TableOptions
	batch   batch.TableConfig // Path is per table, see tableRoute
	path    string
	key     []string
	format  string // table_format: iceberg, delta, "" (none)
}

type tableRoute struct {
	resolve *resolve.TableOptions
	batch   *batch.TableConfig
	key     []string
	format  string
}

// Compile checks cfg (config.Validate) and parses every value the stages
// define. The error lists every problem, each with its key.
func Compile(cfg *config.Config) (*Plan, error) {
	errs := []error{cfg.Validate()}
	if _, err := newDecoders(&cfg.Source); err != nil {
		errs = append(errs, err)
	}
	if decs, err := newDecoders(&config.Default.Source); err == nil {
		if _, err := classify.New(decs, cfg.Source.Format); err != nil {
			errs = append(errs, fmt.Errorf("source.format: %w", err))
		}
	}
	p := &Plan{cfg: cfg}
	if u := cfg.Sink.DeadLetters; u != "" {
		dl, err := kafka.ParseTopicURL(u)
		errs = append(errs, prefixed("sink.dead_letters", err)...)
		p.deadLetters = &dl
	}
	codec, err := compileRegistry(cfg.Source.SchemaRegistry)
	errs = append(errs, err)
	p.avro = codec
	for i := range cfg.Routes {
		r, err := compileRoute(fmt.Sprintf("routes[%d]", i), &cfg.Routes[i])
		errs = append(errs, err)
		p.routes = append(p.routes, r)
	}
	def, err := compileRoute("defaults", &cfg.Defaults)
	errs = append(errs, err)
	p.routes = append(p.routes, def)
	for i, r := range p.routes {
		if r.format == "delta" {
			p.delta = true
			key := "defaults"
			if i < len(cfg.Routes) {
				key = fmt.Sprintf("routes[%d]", i)
			}
			tmpl, err := batch.ParseTemplate(r.path)
			if root, rerr := tmpl.Root("t"); err == nil && (rerr != nil || root != "t") {
				errs = append(errs, fmt.Errorf("%s.path: %q: a delta table is the folder of its files, so the path must begin with {table}/",
					key, r.path))
			}
		}
		if r.format == "iceberg" && p.iceberg == nil {
			ice := cfg.Sink.Iceberg
			p.iceberg = &lakehouse.Config{Catalog: ice.Catalog, Warehouse: ice.Warehouse, Properties: maps.Clone(ice.Properties)}
			p.icebergAppends = ice.Appends != config.AppendsCommitter
			for k, v := range ice.Properties {
				// A REST catalog's credential or token, a store's
				// secret key: never in a log line or an error.
				if lk := strings.ToLower(k); strings.Contains(lk, "secret") || strings.Contains(lk, "token") ||
					strings.Contains(lk, "credential") || strings.Contains(lk, "password") {
					secrets.Remember(v)
				}
			}
			if ice.Namespace != "" {
				p.iceberg.Namespace = strings.Split(ice.Namespace, ".")
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

func compileRoute(key string, r *config.Route) (*route, error) {
	var errs []error
	bad := func(k string, err error) { errs = append(errs, fmt.Errorf("%s.%s: %w", key, k, err)) }
	out := &route{match: r.Match, path: r.Path, key: r.Key, resolve: &resolve.TableOptions{Overrides: map[string]schema.Type{}},
		batch: batch.TableConfig{MaxRows: r.MaxRows, MaxBytes: int64(r.MaxBytes), MaxAge: time.Duration(r.MaxAge),
			Write: sinks.WriteOptions{Compression: r.Compression, CompressionLevel: r.CompressionLevel, RowGroupRows: r.RowGroup}}}
	if _, err := batch.ParseTemplate(r.Path); err != nil {
		bad("path", err)
	}
	layout, ok := schema.ParseLayout(r.Layout)
	if !ok {
		bad("layout", fmt.Errorf("unknown layout %q (images, flat)", r.Layout))
	}
	out.resolve.Layout = layout
	out.resolve.SourceKey = slices.Contains(r.SourceColumns, "key")
	out.resolve.SourceHeaders = slices.Contains(r.SourceColumns, "headers")
	if r.TableFormat == "iceberg" || r.TableFormat == "delta" {
		out.resolve.PlainJSON, out.batch.Commit = true, true
		out.format = r.TableFormat
		if r.TableFormat == "delta" {
			out.resolve.TimeAsText, out.resolve.NullAsText = true, true
		}
	}
	if _, err := parquet.Codec(r.Compression); err != nil {
		bad("compression", err)
	} else if err := parquet.CheckLevel(r.Compression, r.CompressionLevel); err != nil {
		bad("compression_level", err)
	}
	if t, err := schema.ParseType(r.Numbers); err != nil {
		bad("numbers", err)
	} else if !numeric(t.Kind) {
		bad("numbers", fmt.Errorf("must be a numeric type, got %q", r.Numbers))
	} else {
		out.resolve.Numbers = t
	}
	cols := make([]string, 0, len(r.Types))
	for col := range r.Types {
		cols = append(cols, col)
	}
	sort.Strings(cols)
	for _, col := range cols {
		t, err := schema.ParseType(r.Types[col])
		if err != nil {
			bad("types."+col, err)
			continue
		}
		if strings.ContainsAny(col, "*?[") {
			if _, err := path.Match(col, ""); err != nil {
				bad("types."+col, fmt.Errorf("bad glob: %w", err))
				continue
			}
			out.resolve.OverrideGlobs = append(out.resolve.OverrideGlobs, resolve.GlobType{Glob: col, Type: t})
			continue
		}
		out.resolve.Overrides[col] = t
	}
	if len(r.Columns.Include) > 0 || len(r.Columns.Exclude) > 0 {
		out.resolve.Ignore = newColumnFilter(r.Columns).ignored
	}
	return out, errors.Join(errs...)
}

func numeric(k schema.Kind) bool {
	switch k {
	case schema.DecimalText, schema.Decimal, schema.Int64, schema.Int32, schema.Float64, schema.Float32:
		return true
	}
	return false
}

// Config returns the config the plan was compiled from.
func (p *Plan) Config() *config.Config { return p.cfg }

// newClassifier returns a classifier over new decoders, for one worker.
func (p *Plan) newClassifier() (*classify.Classifier, error) {
	decs, err := newDecoders(&p.cfg.Source)
	if err != nil {
		return nil, err
	}
	return classify.New(decs, p.cfg.Source.Format)
}

// route returns a table's settings: those of the first route whose match
// it matches, else the defaults.
func (p *Plan) route(table string) *tableRoute {
	if v, ok := p.tables.Load(table); ok {
		return v.(*tableRoute)
	}
	r := p.routes[len(p.routes)-1]
	for _, c := range p.routes[:len(p.routes)-1] {
		if config.Match(c.match, table) {
			r = c
			break
		}
	}
	// Each table gets its own template: it caches the last directory.
	tmpl, _ := batch.ParseTemplate(r.path) // checked by Compile
	bc := r.batch
	bc.Path = tmpl
	if strings.HasPrefix(table, "_") {
		// cdclake's own datasets (_ddl, _transactions, …) stay plain
		// Parquet.
		bc.Commit = false
	}
	format := r.format
	if !bc.Commit {
		format = ""
	}
	v, _ := p.tables.LoadOrStore(table, &tableRoute{resolve: r.resolve, batch: &bc, key: r.key, format: format})
	return v.(*tableRoute)
}

// TableFormat returns the lakehouse table format a table's files are
// committed to: iceberg, delta, or "" (none).
func (p *Plan) TableFormat(table string) string { return p.route(table).format }

// Commits reports whether a route commits its tables to a lakehouse table
// format.
func (p *Plan) Commits() bool { return p.iceberg != nil || p.delta }

// Delta reports whether a route's tables are Delta tables, whose logs are
// in the lake itself.
func (p *Plan) Delta() bool { return p.delta }

// Key returns the key columns a table's route names (route key).
func (p *Plan) Key(table string) []string { return p.route(table).key }

// FlushInterval is the longest max_age of the routes and the defaults:
// an open file is written at least that often.
func (p *Plan) FlushInterval() time.Duration {
	var d time.Duration
	for _, r := range p.routes {
		d = max(d, r.batch.MaxAge)
	}
	return d
}

// Routed reports whether a route (not the defaults) matches table.
func (p *Plan) Routed(table string) bool {
	return p.route(table).resolve != p.routes[len(p.routes)-1].resolve
}

// TableOptions returns the resolve settings of a table's route.
func (p *Plan) TableOptions(table string) *resolve.TableOptions { return p.route(table).resolve }

// BatchConfig returns the batch settings of a table's route.
func (p *Plan) BatchConfig(table string) *batch.TableConfig { return p.route(table).batch }

// Allowed applies tables.include and tables.exclude to a table name.
func (p *Plan) Allowed(table string) bool {
	if v, ok := p.allow.Load(table); ok {
		return v.(bool)
	}
	ok := p.cfg.Tables.Allowed(table)
	p.allow.Store(table, ok)
	return ok
}

// columnFilter remembers a route's column filter's answer per name: the
// same columns recur in every row.
type columnFilter struct {
	f    config.Filter
	memo sync.Map
}

func newColumnFilter(f config.Filter) *columnFilter { return &columnFilter{f: f} }

func (c *columnFilter) ignored(col string) bool {
	if v, ok := c.memo.Load(col); ok {
		return v.(bool)
	}
	ignored := !c.f.Allowed(col)
	c.memo.Store(col, ignored)
	return ignored
}
