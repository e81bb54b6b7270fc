// Command cdclake lands change-data-capture streams in a data lake as
// Parquet. "cdclake help" lists its commands; docs/operations.md says how
// to run it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/cdclake/cdclake/config"
	"github.com/cdclake/cdclake/config/secrets"
	"github.com/cdclake/cdclake/handlers/batch"
	"github.com/cdclake/cdclake/pipelines"
	"github.com/cdclake/cdclake/pipelines/observe"
	"github.com/cdclake/cdclake/pipelines/source"
	"github.com/cdclake/cdclake/pipelines/source/kafka"
	"github.com/cdclake/cdclake/sinks/current"
	"github.com/cdclake/cdclake/sinks/lake"
	"github.com/cdclake/cdclake/sinks/lakehouse"
	"github.com/prometheus/client_golang/prometheus"
	"gocloud.dev/blob"
)

// version and commit are set by the release build (-ldflags "-X
// main.version=… -X main.commit=…"); otherwise they come from the
// binary's build information.
var version, commit string

// Exit statuses.
const (
	exitOK          = 0
	exitFailed      = 1 // a write failed past sink.retry_for, the shutdown timed out, or the config is invalid
	exitUsage       = 2 // a command-line error
	exitInterrupted = 3 // a file source stopped by a signal before its end (what was read landed)
	exitDeadLetters = 4 // more dead letters than sink.max_dead_letters (what was read landed)
)

const exitStatuses = `Exit statuses:
  0  everything read was landed or dead-lettered
  1  a write to storage failed for longer than sink.retry_for (nothing after it
     was acknowledged), the landing after a signal outlasted shutdown_timeout,
     or the config is invalid
  2  a command-line error
  3  a file source was stopped by a signal before the end of its input (what
     was read landed; the summary says, per file, below which line)
  4  the run wrote more dead letters than sink.max_dead_letters (what was read
     landed)
`

type command struct {
	name, purpose, usage, example string
	run                           func(args []string, stdout, stderr io.Writer) int
}

var commands []command

func init() {
	commands = []command{
		{"run", "land a source into a lake until the source ends, a signal, or --until-caught-up",
			"cdclake run [--config FILE] [--source URL] [--sink URL] [flags]",
			"cdclake run --config cdclake.yaml --source 'kafka://broker:9092/shop\\..*?regex=true&group=lake' --until-caught-up",
			runCmd},
		{"validate", "check a config as run would, reporting every problem with its key path",
			"cdclake validate [--config] FILE [--check-connections] [--source URL] [--sink URL]",
			"cdclake validate cdclake.yaml --check-connections", validateCmd},
		{"compact", "rewrite the small files of the Iceberg and Delta tables into larger ones, in one snapshot (version) per table",
			"cdclake compact [--config FILE] [--sink URL] [--table NAME]... [--target-size BYTES] [--min-files N] [--expire-older-than DURATION] [--retain-last N]",
			"cdclake compact --config cdclake.yaml --table inventory.public.orders --target-size 268435456", compactCmd},
		{"snapshot", "build or bring up to date the tables' current-state tables: the latest row per key",
			"cdclake snapshot [--config FILE] [--sink URL] [--table NAME]... [--key COLUMNS] [--into FOLDER] [--buckets N] [--rebuild]",
			"cdclake snapshot --config cdclake.yaml --table inventory.public.orders --key id", snapshotCmd},
		{"probe", "ask a running cdclake's /healthz or /readyz (an exec probe for images without curl)",
			"cdclake probe [--config FILE] [--metrics-addr ADDR] healthz|readyz",
			"cdclake probe --config /etc/cdclake/cdclake.yaml readyz", probeCmd},
		{"version", "print the version, commit and Go version", "cdclake version", "cdclake version", versionCmd},
		{"help", "describe a command", "cdclake help [COMMAND]", "cdclake help run", helpCmd},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, overview())
		return exitUsage
	}
	switch args[0] {
	case "-h", "--help", "-help":
		fmt.Fprint(stdout, overview())
		return exitOK
	case "--version", "-version":
		return versionCmd(nil, stdout, stderr)
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "cdclake: unknown command %q\n\n%s", args[0], overview())
	return exitUsage
}

func overview() string {
	var b strings.Builder
	b.WriteString("cdclake lands change-data-capture streams (GoldenGate, Debezium) in a data lake as Parquet.\n\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-9s %s\n", c.name, c.purpose)
	}
	b.WriteString("\n\"cdclake help COMMAND\" or \"cdclake COMMAND --help\" describes a command; docs/configuration.md every config key.\n")
	return b.String()
}

// flagSet returns the flag set of a command, whose --help prints the
// command's purpose, flags, an example and the exit statuses.
func flagSet(name string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() { printHelp(fs.Output(), name, fs) }
	return fs
}

func printHelp(w io.Writer, name string, fs *flag.FlagSet) {
	for _, c := range commands {
		if c.name != name {
			continue
		}
		fmt.Fprintf(w, "%s: %s\n\nUsage:\n  %s\n", c.name, c.purpose, c.usage)
		if fs != nil {
			fmt.Fprintln(w, "\nFlags:")
			fs.SetOutput(w)
			fs.PrintDefaults()
		}
		fmt.Fprintf(w, "\nExample:\n  %s\n", c.example)
		if name == "run" || name == "validate" {
			fmt.Fprint(w, "\n", exitStatuses)
		}
	}
}

func helpCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stdout, overview())
		return exitOK
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run([]string{"--help"}, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "cdclake help: unknown command %q\n", args[0])
	return exitUsage
}

// parseFlags parses a command's flags: --help is answered on stdout with
// status 0, an error on stderr with the usage error status. It returns -1
// when the command goes on.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) int {
	out := fs.Output()
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(out)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return exitOK
	case err != nil:
		fmt.Fprintf(stderr, "cdclake %s: %v\n(cdclake %s --help lists the flags)\n", fs.Name(), err, fs.Name())
		return exitUsage
	}
	return -1
}

// probeCmd asks the metrics endpoint of the cdclake the config (or
// --metrics-addr) describes for /healthz or /readyz: status 0 when it
// answers 200, 1 otherwise. An address without a host (":9464") is asked
// on 127.0.0.1. The config's ${VAR}s are read from the environment, which
// an exec probe shares with the container: a pod whose port comes from
// its index is asked on its own port.
func probeCmd(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("probe", stdout)
	file := fs.String("config", "", "the config of the cdclake to ask (its observability.listen)")
	addr := fs.String("metrics-addr", "", "the address to ask, overriding the config's")
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for the answer")
	if rc := parseFlags(fs, args, stderr); rc >= 0 {
		return rc
	}
	if fs.NArg() != 1 || (fs.Arg(0) != "healthz" && fs.Arg(0) != "readyz") {
		fmt.Fprintln(stderr, "cdclake probe: which probe? healthz or readyz")
		return exitUsage
	}
	if *addr == "" {
		cfg, err := config.Read(*file)
		if cfg == nil {
			fmt.Fprintf(stderr, "cdclake probe: %v\n", err)
			return exitUsage
		}
		*addr = cfg.Observability.Listen
	}
	host, port, err := net.SplitHostPort(*addr)
	if err != nil || *addr == "off" {
		fmt.Fprintf(stderr, "cdclake probe: no endpoint to ask (%q): give --metrics-addr or observability.listen\n", *addr)
		return exitUsage
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	cl := &http.Client{Timeout: *timeout}
	resp, err := cl.Get("http://" + net.JoinHostPort(host, port) + "/" + fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "cdclake probe: %v\n", err)
		return exitFailed
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	stdout.Write(body)
	if resp.StatusCode != http.StatusOK {
		return exitFailed
	}
	return exitOK
}

func versionCmd(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("version", stdout)
	if rc := parseFlags(fs, args, stderr); rc >= 0 {
		return rc
	}
	v, c := buildVersion()
	fmt.Fprintf(stdout, "cdclake %s (commit %s, %s %s/%s)\n", v, c, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return exitOK
}

// buildVersion returns the version and commit: set at link time, else
// the module version and VCS revision of the build information.
func buildVersion() (string, string) {
	v, c := version, commit
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && c == "" {
				c = s.Value
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	if c == "" {
		c = "unknown"
	}
	return v, c
}

// settings are the flags run and validate share: where the config is and
// what the command line changes in it.
type settings struct {
	config        string
	opts          pipelines.Options
	level, format string
}

func (s *settings) register(fs *flag.FlagSet, forRun bool) {
	fs.StringVar(&s.config, "config", "", "config file (YAML; docs/configuration.md)")
	fs.StringVar(&s.opts.Source, "source", "", "source URL, overriding source.url: a file, directory, glob or - (stdin), or kafka://brokers/topics?group=…")
	fs.StringVar(&s.opts.Sink, "sink", "", "lake URL, overriding sink.url: ./dir, file:///dir, s3://bucket?…, gs://bucket, azblob://container, mem://")
	fs.StringVar(&s.opts.Listen, "metrics-addr", "", "address of /metrics, /healthz and /readyz, overriding observability.listen (default :9464 for Kafka, none for files; off: none)")
	fs.BoolVar(&s.opts.UntilCaughtUp, "until-caught-up", false, "Kafka: land up to the end offsets seen at start, commit and exit (a CronJob)")
	if forRun {
		fs.StringVar(&s.level, "log-level", "", "debug, info, warn or error, overriding log.level")
		fs.StringVar(&s.format, "log-format", "", "text or json, overriding log.format")
	}
}

// prepare reads the config and makes the run's setup: every problem of
// both, or nil. Validate mode turns missing secrets into warnings.
func (s *settings) prepare(ctx context.Context, validate bool) (*config.Config, *pipelines.Setup, []string) {
	cfg, err := config.Read(s.config)
	if cfg == nil {
		return nil, nil, observe.Lines(err)
	}
	problems := observe.Lines(err)
	if s.level != "" {
		cfg.Log.Level = s.level
	}
	if s.format != "" {
		cfg.Log.Format = s.format
	}
	s.opts.Validate = validate
	setup, err := pipelines.Prepare(ctx, cfg, s.opts)
	problems = append(problems, observe.Lines(err)...)
	return cfg, setup, problems
}

func printProblems(w io.Writer, what string, problems []string) {
	fmt.Fprintf(w, "%s: %d problem%s:\n", what, len(problems), plural(len(problems)))
	for _, p := range problems {
		fmt.Fprintf(w, "  %s\n", p)
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func validateCmd(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("validate", stdout)
	var s settings
	s.register(fs, false)
	connect := fs.Bool("check-connections", false, "also connect to the brokers (the topics exist), the schema registry, the bucket (it takes create-once writes) and the Iceberg catalog")
	// The file may come before or after the flags.
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		s.config, args = args[0], args[1:]
	}
	if rc := parseFlags(fs, args, stderr); rc >= 0 {
		return rc
	}
	switch {
	case fs.NArg() == 1 && s.config == "":
		s.config = fs.Arg(0)
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "cdclake validate: one config file, not %q\n", fs.Args())
		return exitUsage
	case s.config == "":
		fmt.Fprintln(stderr, "cdclake validate: which config? cdclake validate FILE")
		return exitUsage
	}
	secrets.FromEnv()
	ctx := context.Background()
	_, setup, problems := s.prepare(ctx, true)
	if setup != nil {
		for _, w := range setup.Warnings {
			fmt.Fprintf(stdout, "%s: warning: %s\n", s.config, secrets.Redact(w.Error()))
		}
	}
	if len(problems) == 0 && *connect {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		problems = append(problems, observe.Lines(errors.Join(setup.CheckConnections(cctx)...))...)
		cancel()
	}
	if len(problems) > 0 {
		printProblems(stderr, s.config, problems)
		return exitFailed
	}
	what := "ok"
	if *connect {
		what = "ok, and every connection works"
	}
	fmt.Fprintf(stdout, "%s: %s\n", s.config, what)
	return exitOK
}

// configLogger returns the logger cfg's log section asks for, writing to w.
func configLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Log.Level)) // checked by prepare
	return observe.NewLogger(w, level, cfg.Log.Format)
}

// tableList is a repeatable --table flag.
type tableList []string

func (l *tableList) String() string     { return strings.Join(*l, ",") }
func (l *tableList) Set(v string) error { *l = append(*l, v); return nil }

// maintenance prepares a command that maintains a lake's tables (compact,
// snapshot): the secrets from the environment, a context a signal ends,
// and the config's lake side (no source needed). ok is false when the
// config has problems, which it printed.
func maintenance(name string, s *settings, stderr io.Writer) (ctx context.Context, stop func(), cfg *config.Config, setup *pipelines.Setup, ok bool) {
	secrets.FromEnv()
	ctx, stop = signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	s.opts.NoSource = true
	cfg, setup, problems := s.prepare(ctx, false)
	if len(problems) > 0 {
		printProblems(stderr, "cdclake "+name+": the config", problems)
		return ctx, stop, nil, nil, false
	}
	return ctx, stop, cfg, setup, true
}

func compactCmd(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("compact", stdout)
	var s settings
	fs.StringVar(&s.config, "config", "", "config file (YAML; docs/configuration.md): its routes with table_format iceberg or delta, sink.iceberg and sink.delta")
	fs.StringVar(&s.opts.Sink, "sink", "", "lake URL, overriding sink.url (the warehouse comes from it unless sink.iceberg.warehouse is set)")
	var tables tableList
	fs.Var(&tables, "table", "a table (dataset name) to compact; repeat for more (default: every table of the catalog)")
	target := fs.Int64("target-size", 128<<20, "the size compacted files aim at, in bytes; smaller files are rewritten together")
	minFiles := fs.Int("min-files", 2, "the fewest small files a compacted file replaces")
	expireAfter := fs.Duration("expire-older-than", 0, "then drop the snapshots older than this (e.g. 168h), and the table's own files only they refer to (Delta: keep every version, delete the compacted files no version to keep names); 0: keep every snapshot and file")
	retain := fs.Int("retain-last", 10, "with --expire-older-than, the newest snapshots (versions) kept whatever their age")
	if rc := parseFlags(fs, args, stderr); rc >= 0 {
		return rc
	}
	if fs.NArg() > 0 || *target <= 0 || *minFiles < 2 || *expireAfter < 0 || *retain < 1 {
		fmt.Fprintln(stderr, "cdclake compact: flags only, --target-size > 0, --min-files >= 2, --expire-older-than >= 0 and --retain-last >= 1 (cdclake compact --help)")
		return exitUsage
	}
	m := pipelines.Maintenance{TargetBytes: *target, MinFiles: *minFiles}
	if *expireAfter > 0 {
		m.Expire = &lakehouse.Expiry{OlderThan: *expireAfter, RetainLast: *retain}
	}
	ctx, stop, cfg, setup, ok := maintenance("compact", &s, stderr)
	defer stop()
	if !ok {
		return exitFailed
	}
	var bucket *blob.Bucket
	if setup.Plan != nil && setup.Plan.Delta() { // Delta tables are in the lake
		b, closeLake, err := openLake(ctx, setup, false)
		if err != nil {
			fmt.Fprintf(stderr, "cdclake compact: %s\n", secrets.Redact(err.Error()))
			return exitFailed
		}
		defer closeLake()
		bucket = b
	}
	done, err := setup.Compact(ctx, bucket, tables, m, configLogger(cfg, stderr))
	for _, d := range done {
		if d.Written == 0 && d.Skipped == 0 {
			fmt.Fprintf(stdout, "%s: nothing to compact", d.Table)
		} else {
			fmt.Fprintf(stdout, "%s: %d files into %d (%d rows, %d bytes)", d.Table, d.Replaced, d.Written, d.Rows, d.Bytes)
		}
		if d.Skipped > 0 {
			fmt.Fprintf(stdout, "; %d groups left: their schemas do not merge", d.Skipped)
		}
		switch {
		case d.Expired.Snapshots > 0:
			fmt.Fprintf(stdout, "; %d snapshots expired, %d of their files deleted", d.Expired.Snapshots, d.Expired.Files)
		case d.Expired.Files > 0: // Delta: no version is dropped
			fmt.Fprintf(stdout, "; %d replaced files deleted", d.Expired.Files)
		}
		fmt.Fprintln(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "cdclake compact: %s\n", secrets.Redact(err.Error()))
		return exitFailed
	}
	return exitOK
}

func snapshotCmd(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("snapshot", stdout)
	var s settings
	fs.StringVar(&s.config, "config", "", "config file (YAML; docs/configuration.md): its routes' path, key and Parquet settings")
	fs.StringVar(&s.opts.Sink, "sink", "", "lake URL, overriding sink.url")
	var tables tableList
	fs.Var(&tables, "table", "a table whose state to build; repeat for more (default: every dataset of the lake, those without a known key skipped)")
	key := fs.String("key", "", "the key columns, comma-separated, overriding the route's key (one --table only)")
	into := fs.String("into", "", "the state table's folder in the lake (one --table only; default _current/DATASET)")
	buckets := fs.Int("buckets", current.DefaultBuckets, "the number of files a new state table is split into by key hash (a build rewrites only those its changes touch)")
	rebuild := fs.Bool("rebuild", false, "build the state again from every change, with --key and --buckets, replacing the table")
	if rc := parseFlags(fs, args, stderr); rc >= 0 {
		return rc
	}
	if fs.NArg() > 0 || *buckets < 1 {
		fmt.Fprintln(stderr, "cdclake snapshot: flags only, and --buckets >= 1 (cdclake snapshot --help)")
		return exitUsage
	}
	o := pipelines.SnapshotOptions{Into: *into, Buckets: *buckets, Rebuild: *rebuild}
	if *key != "" {
		for _, k := range strings.Split(*key, ",") {
			o.Key = append(o.Key, strings.TrimSpace(k))
		}
	}
	ctx, stop, cfg, setup, ok := maintenance("snapshot", &s, stderr)
	defer stop()
	if !ok {
		return exitFailed
	}
	// No lock: a run may land into the lake meanwhile.
	bucket, closeLake, err := openLake(ctx, setup, false)
	if err != nil {
		fmt.Fprintf(stderr, "cdclake snapshot: %s\n", secrets.Redact(err.Error()))
		return exitFailed
	}
	defer closeLake()
	done, err := setup.Snapshot(ctx, bucket, tables, o, configLogger(cfg, stderr))
	for _, d := range done {
		switch {
		case d.Skipped:
			fmt.Fprintf(stdout, "%s: skipped: its key is not known (route key, or --key)\n", d.Table)
		case d.Err != nil:
		default:
			how := "rewritten"
			if d.Merged {
				how = "merged"
			}
			fmt.Fprintf(stdout, "%s: %d rows by %s, %d changes from %d files folded in, %d of %d buckets %s (manifest %d)\n",
				d.Table, d.Rows, strings.Join(d.Key, ","), d.Changes, d.Files, d.Buckets, d.Total, how, d.Version)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "cdclake snapshot: %s\n", secrets.Redact(err.Error()))
		return exitFailed
	}
	return exitOK
}

func runCmd(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("run", stdout)
	var s settings
	s.register(fs, true)
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile to this file (and the Iceberg committer process's to this file + \".cdclake-lakehouse\")")
	memprofile := fs.String("memprofile", "", "write an allocation profile (every allocation since start) to this file at exit")
	traceFile := fs.String("trace", "", "write an execution trace (go tool trace) to this file")
	if rc := parseFlags(fs, args, stderr); rc >= 0 {
		return rc
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "cdclake run: unexpected arguments %q (cdclake run --help)\n", fs.Args())
		return exitUsage
	}
	if err := config.CheckLog(or(s.level, "info"), or(s.format, "text")); err != nil {
		fmt.Fprintf(stderr, "cdclake run: %v\n", strings.NewReplacer("log.level", "--log-level", "log.format", "--log-format").Replace(err.Error()))
		return exitUsage
	}
	stopProfiles, err := startProfiles(*cpuprofile, *memprofile, *traceFile, stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	defer stopProfiles()
	if *cpuprofile != "" {
		// The committer process profiles itself beside it.
		os.Setenv(lakehouse.CPUProfileEnv, *cpuprofile+"."+lakehouse.Binary)
	}
	secrets.FromEnv()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, setup, problems := s.prepare(ctx, false)
	if len(problems) > 0 {
		printProblems(stderr, "cdclake run: the config", problems)
		return exitFailed
	}
	log := configLogger(cfg, stderr)
	tune(cfg)
	return land(ctx, cfg, setup, log, stdout)
}

// land runs the pipeline setup describes until its source ends, it
// fails or ctx is cancelled (a signal), and returns the exit status.
func land(ctx context.Context, cfg *config.Config, setup *pipelines.Setup, log *slog.Logger, stdout io.Writer) int {
	src, err := openSource(setup, log)
	if err != nil {
		log.Error("opening source", "err", err)
		return exitFailed
	}
	bucket, closeLake, err := openLake(ctx, setup, true)
	if err != nil {
		log.Error("opening sink", "err", err)
		return exitFailed
	}
	defer closeLake()
	var opts []pipelines.Option
	var reg *prometheus.Registry
	if setup.Listen != "" {
		reg = pipelines.NewRegistry(buildVersion())
		opts = append(opts, pipelines.WithMetrics(reg))
	}
	p, err := pipelines.New(setup.Plan, src, bucket, log, opts...)
	if err != nil {
		log.Error("building pipeline", "err", err)
		return exitFailed
	}
	if setup.Listen != "" {
		stopServing, err := serve(p, setup.Listen, time.Duration(cfg.Observability.CheckInterval), reg, log)
		if err != nil {
			log.Error("opening the metrics endpoint", "err", err)
			return exitFailed
		}
		defer stopServing()
	}
	start := time.Now()
	log.Info("landing", "source", or(setup.Files, kafkaText(setup.Kafka)), "sink", setup.Sink)
	runErr := p.Run(ctx)
	var tooMany *pipelines.DeadLetterLimitError
	failed := runErr != nil && !errors.As(runErr, &tooMany)
	printSummary(stdout, p, time.Since(start), ctx.Err() != nil, failed)
	switch {
	case failed:
		log.Error("run failed", "err", runErr)
		return exitFailed
	case tooMany != nil:
		log.Error("too many dead letters", "err", runErr)
		fmt.Fprintf(stdout, "%s: exit status %d\n", tooMany, exitDeadLetters)
		return exitDeadLetters
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		log.Info("stopped by signal after flushing")
		if files, ok := src.(*source.Files); ok && !drained(files) {
			// A file source has an end: stopping before it is not success.
			printResume(stdout, files, p.Batcher())
			return exitInterrupted
		}
	}
	return exitOK
}

// openLake opens the lake setup names, and returns what closes it. With
// lock, a run from Kafka into a file:// lake takes the lake's lock.
func openLake(ctx context.Context, setup *pipelines.Setup, lock bool) (*blob.Bucket, func(), error) {
	// A file:// lake's objects are written in a folder of its own (see
	// lake.FileTemp), which the file driver finds as os.TempDir.
	if tmp, err := lake.FileTemp(setup.Sink); err != nil {
		return nil, nil, err
	} else if tmp != "" {
		_ = os.Setenv("TMPDIR", tmp)
	}
	unlock := func() {}
	if lock && setup.Kafka != nil {
		// One process at a time lands into a file:// lake (see lake.Lock).
		var err error
		if unlock, err = lake.Lock(setup.Sink); err != nil {
			return nil, nil, err
		}
	}
	bucket, err := lake.OpenBucket(ctx, setup.Sink)
	if err != nil {
		unlock()
		return nil, nil, err
	}
	return bucket, func() {
		bucket.Close()
		unlock()
	}, nil
}

// serve serves /metrics, /healthz and /readyz on addr while the pipeline
// runs, its health checked every interval, and returns what stops them.
func serve(p *pipelines.Pipeline, addr string, interval time.Duration, reg *prometheus.Registry, log *slog.Logger) (func(), error) {
	health := p.Health(interval)
	srv, err := observe.Listen(addr, reg, health, log)
	if err != nil {
		return nil, err
	}
	hctx, stopHealth := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); health.Run(hctx) }()
	go srv.Serve()
	log.Info("serving /metrics, /healthz and /readyz", "addr", srv.Addr().String())
	return func() {
		srv.Close()
		stopHealth()
		<-done
	}, nil
}

func or(s, def string) string {
	if s != "" {
		return s
	}
	return def
}

// kafkaText describes a Kafka source for the log.
func kafkaText(k *kafka.Config) string {
	if k == nil {
		return ""
	}
	return fmt.Sprintf("kafka://%s/%s (group %s)", strings.Join(k.Brokers, ","), strings.Join(k.Topics, ","), k.Group)
}

// startProfiles starts the profiles and the trace the flags name, each to
// its file; the function returned stops them and closes the files.
func startProfiles(cpu, mem, tr string, stderr io.Writer) (func(), error) {
	profiles := []struct {
		flag, path string
		start      func(*os.File) error
		stop       func(*os.File) error
	}{
		{"--cpuprofile", cpu, func(f *os.File) error { return pprof.StartCPUProfile(f) }, func(*os.File) error { pprof.StopCPUProfile(); return nil }},
		{"--memprofile", mem, func(*os.File) error { return nil },
			func(f *os.File) error { return pprof.Lookup("allocs").WriteTo(f, 0) }},
		{"--trace", tr, func(f *os.File) error { return trace.Start(f) }, func(*os.File) error { trace.Stop(); return nil }},
	}
	var stops []func()
	stopAll := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	for _, pr := range profiles {
		if pr.path == "" {
			continue
		}
		f, err := os.Create(pr.path)
		if err == nil {
			if err = pr.start(f); err != nil {
				f.Close()
			}
		}
		if err != nil {
			stopAll()
			return nil, fmt.Errorf("%s: %w", pr.flag, err)
		}
		stops = append(stops, func() {
			if err := pr.stop(f); err != nil {
				fmt.Fprintf(stderr, "%s: %v\n", pr.flag, err)
			}
			f.Close()
		})
	}
	return stopAll, nil
}

// tune sets the Go runtime's memory limit and collector pace for the
// batcher's bound, unless GOMEMLIMIT and GOGC say otherwise.
func tune(cfg *config.Config) {
	// The batcher bounds what open files hold; the Go runtime would let the
	// heap grow to twice what is live before collecting. A soft limit of
	// one and a half times the bound plus 64 MiB (for decoding, encoding
	// and the rest) keeps the process near it unless GOMEMLIMIT says
	// otherwise.
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(int64(cfg.Batch.MaxBufferedBytes)*3/2 + 64<<20)
	}
	// Under that limit, the collector starts a cycle when the heap has
	// grown by twice what is live, not once, unless GOGC says otherwise:
	// half the cycles, for a heap that stays under the limit anyway (a
	// run of many small files allocates much that dies young).
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(200)
	}
	// A debugging aid: a file source overwrites each block it is done
	// with before reusing its buffer, so that anything still pointing
	// into an earlier message reads garbage (the end-to-end tests run so).
	if os.Getenv("CDCLAKE_POISON_RECYCLED") != "" {
		source.PoisonRecycled(true)
	}
}

func drained(s source.Source) bool {
	select {
	case <-s.Drained():
		return true
	default:
		return false
	}
}

// printResume says how far each file landed: every line below the one
// given is in the lake or a dead letter.
func printResume(w io.Writer, files *source.Files, b *batch.Batcher) {
	fmt.Fprintln(w, "interrupted before the end of the input; landed:")
	for _, name := range files.Sources() {
		if next, ok := b.Durable(name, 0); ok {
			fmt.Fprintf(w, "  %s: every line below %d\n", name, next)
		} else {
			fmt.Fprintf(w, "  %s: nothing\n", name)
		}
	}
}

// openSource opens the source of a setup: Kafka or files.
func openSource(setup *pipelines.Setup, log *slog.Logger) (source.Source, error) {
	if setup.Kafka != nil {
		return kafka.New(*setup.Kafka, log)
	}
	cfg := setup.Plan.Config()
	return source.OpenFiles(setup.Files, cfg.Source.BlockLines, int(cfg.Source.BlockBytes))
}

// printSummary prints what landed (the table: rows in written files only)
// and what was read.
func printSummary(w io.Writer, p *pipelines.Pipeline, elapsed time.Duration, interrupted, failed bool) {
	st := p.Stats()
	tables := p.Batcher().Stats()
	names := make([]string, 0, len(tables))
	for n := range tables {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "== cdclake summary ==")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "table\trows\tfiles\tbytes\tschema versions\t")
	var rows, files, bytes int64
	for _, n := range names {
		t := tables[n]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t\n", n, t.Rows, t.Files, t.Bytes, len(t.Versions))
		rows, files, bytes = rows+t.Rows, files+t.Files, bytes+t.Bytes
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t%d\t\t\n", rows, files, bytes)
	tw.Flush()
	n := st.Messages.Load()
	rate := float64(n) / elapsed.Seconds()
	fmt.Fprintf(w, "messages %d (%.1f MiB): rows %d, events %d, tombstones %d, heartbeats %d, skipped %d, schema records %d, filtered %d",
		n, float64(st.Bytes.Load())/(1<<20), st.Rows.Load(), st.Events.Load(), st.Tombstones.Load(), st.Heartbeats.Load(),
		st.Skipped.Load(), st.Schemas.Load(), st.Filtered.Load())
	if in := st.InTable.Load(); in > 0 {
		fmt.Fprintf(w, ", in their tables already %d", in)
	}
	fmt.Fprintln(w)
	if dl := p.DeadLetters(); len(dl) > 0 {
		fmt.Fprintf(w, "dead letters %d: %s\n", st.DeadLetters.Load(), pipelines.DeadLetterSummary(dl))
	} else {
		fmt.Fprintf(w, "dead letters %d\n", st.DeadLetters.Load())
	}
	fmt.Fprintf(w, "elapsed %s, %.0f messages/s\n", elapsed.Round(time.Millisecond), rate)
	switch {
	case failed:
		fmt.Fprintln(w, "failed: the table counts the rows in written files only; what was read after them was not landed, and a new run reads it again")
	case interrupted:
		fmt.Fprintln(w, "interrupted: stopped reading, landed everything read")
	}
}
