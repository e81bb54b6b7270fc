// Command cdclake lands change-data-capture streams in a data lake as
// Parquet.
//
//	cdclake run --source URL --sink URL [--config FILE]
//	cdclake validate --config FILE
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/cdclake/cdclake/config"
	"github.com/cdclake/cdclake/handlers/batch"
	"github.com/cdclake/cdclake/pipelines"
	"github.com/cdclake/cdclake/pipelines/source"
	"github.com/cdclake/cdclake/pipelines/source/kafka"
	"github.com/cdclake/cdclake/sinks/lake"
)

const usage = `usage:
  cdclake run --source URL --sink URL [--config FILE] [--log-level LEVEL] [--until-caught-up]
  cdclake validate --config FILE

source URLs: file:///path/file.ndjson, a directory or glob of NDJSON files, - (stdin),
             kafka://host:9092,host2:9092/topicA,topicB?group=NAME (see the README)
sink URLs:   ./dir, file:///dir, mem://, s3://bucket?endpoint=…&region=…&use_path_style=true, gs://bucket, azblob://container
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "run":
		return runCmd(args[1:], stdout, stderr)
	case "validate":
		return validateCmd(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "unknown command %q\n%s", args[0], usage)
	return 2
}

func validateCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("config", "", "config file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *file == "" {
		fmt.Fprintln(stderr, "validate: --config is required")
		return 2
	}
	cfg, err := config.Load(*file)
	if err == nil {
		_, err = pipelines.Compile(cfg)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: invalid:\n%v\n", *file, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok\n", *file)
	return 0
}

func runCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sourceURL := fs.String("source", "", "source URL (overrides source.url)")
	sink := fs.String("sink", "", "sink URL (overrides sink.url)")
	file := fs.String("config", "", "config file")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile to this file")
	memprofile := fs.String("memprofile", "", "write an allocation profile (every allocation since start) to this file at exit")
	traceFile := fs.String("trace", "", "write an execution trace (go tool trace) to this file")
	untilCaughtUp := fs.Bool("until-caught-up", false, "Kafka: land up to the end offsets seen at start, commit and exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	// The profiles and the trace go to files the flags name; each stops
	// (and its file closes) when the run returns.
	profiles := []struct {
		flag, path string
		start      func(*os.File) error
		stop       func(*os.File) error
	}{
		{"--cpuprofile", *cpuprofile, func(f *os.File) error { return pprof.StartCPUProfile(f) }, func(*os.File) error { pprof.StopCPUProfile(); return nil }},
		{"--memprofile", *memprofile, func(*os.File) error { return nil },
			func(f *os.File) error { return pprof.Lookup("allocs").WriteTo(f, 0) }},
		{"--trace", *traceFile, func(f *os.File) error { return trace.Start(f) }, func(*os.File) error { trace.Stop(); return nil }},
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
			fmt.Fprintf(stderr, "%s: %v\n", pr.flag, err)
			return 2
		}
		defer func() {
			if err := pr.stop(f); err != nil {
				fmt.Fprintf(stderr, "%s: %v\n", pr.flag, err)
			}
			f.Close()
		}()
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(stderr, "--log-level: %v\n", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	cfg, err := config.Load(*file)
	if err != nil {
		fmt.Fprintf(stderr, "config: %v\n", err)
		return 1
	}
	plan, err := pipelines.Compile(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "config: %v\n", err)
		return 1
	}
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
	if *sourceURL != "" {
		cfg.Source.URL = *sourceURL
	}
	if *sink != "" {
		cfg.Sink.URL = *sink
	}
	if cfg.Source.URL == "" || cfg.Sink.URL == "" {
		fmt.Fprintln(stderr, "run: a source and a sink are required (--source, --sink or the config)")
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	src, err := openSource(cfg, *untilCaughtUp, log)
	if err != nil {
		log.Error("opening source", "err", err)
		return 1
	}
	// A file:// lake's objects are written in a folder of its own (see
	// lake.FileTemp), which the file driver finds as os.TempDir.
	if tmp, err := lake.FileTemp(cfg.Sink.URL); err != nil {
		log.Error("opening sink", "err", err)
		return 1
	} else if tmp != "" {
		_ = os.Setenv("TMPDIR", tmp)
	}
	bucket, err := lake.OpenBucket(ctx, cfg.Sink.URL)
	if err != nil {
		log.Error("opening sink", "err", err)
		return 1
	}
	defer bucket.Close()
	p, err := pipelines.New(plan, src, bucket, log)
	if err != nil {
		log.Error("building pipeline", "err", err)
		return 1
	}
	start := time.Now()
	log.Info("landing", "source", cfg.Source.URL, "sink", cfg.Sink.URL)
	runErr := p.Run(ctx)
	printSummary(stdout, p, time.Since(start), ctx.Err() != nil, runErr != nil)
	if runErr != nil {
		log.Error("run failed", "err", runErr)
		return 1
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		log.Info("stopped by signal after flushing")
		if files, ok := src.(*source.Files); ok && !drained(files) {
			// A file source has an end: stopping before it is not success.
			printResume(stdout, files, p.Batcher())
			return exitInterrupted
		}
	}
	return 0
}

// exitInterrupted is the status of a run of a file source stopped by a
// signal before the end of its input (what was read is landed).
const exitInterrupted = 3

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

// openSource opens the source a URL names: kafka://… or files.
func openSource(cfg *config.Config, untilCaughtUp bool, log *slog.Logger) (source.Source, error) {
	if strings.HasPrefix(cfg.Source.URL, "kafka://") {
		kc, err := kafka.ParseURL(cfg.Source.URL)
		if err != nil {
			return nil, err
		}
		kc.BlockRecords, kc.BlockBytes = cfg.Source.BlockLines, int(cfg.Source.BlockBytes)
		kc.UntilCaughtUp = untilCaughtUp
		return kafka.New(kc, log)
	}
	if untilCaughtUp {
		return nil, errors.New("--until-caught-up is for Kafka sources; a file source always ends at the end of its input")
	}
	return source.OpenFiles(cfg.Source.URL, cfg.Source.BlockLines, int(cfg.Source.BlockBytes))
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
	fmt.Fprintf(w, "messages %d (%.1f MiB): rows %d, events %d, tombstones %d, heartbeats %d, skipped %d, schema records %d, filtered %d\n",
		n, float64(st.Bytes.Load())/(1<<20), st.Rows.Load(), st.Events.Load(), st.Tombstones.Load(), st.Heartbeats.Load(),
		st.Skipped.Load(), st.Schemas.Load(), st.Filtered.Load())
	fmt.Fprintf(w, "dead letters %d\n", st.DeadLetters.Load())
	fmt.Fprintf(w, "elapsed %s, %.0f messages/s\n", elapsed.Round(time.Millisecond), rate)
	switch {
	case failed:
		fmt.Fprintln(w, "failed: the table counts the rows in written files only; what was read after them was not landed, and a new run reads it again")
	case interrupted:
		fmt.Fprintln(w, "interrupted: stopped reading, landed everything read")
	}
}
