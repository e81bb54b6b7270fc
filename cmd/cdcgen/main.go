// Command cdcgen generates mixed CDC streams with a known outcome, for the
// end-to-end test and the benchmark.
//
//	cdcgen --out DIR [--events N] [--tables M] [--seed S] [--format F]
//
// It writes DIR/stream.ndjson and DIR/expected.json (see package gen).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cdclake/cdclake/pipelines/source/gen"
)

func main() {
	out := flag.String("out", "", "output directory")
	events := flag.Int("events", 2000, "number of row changes")
	tables := flag.Int("tables", 6, "number of tables (at least 3)")
	seed := flag.Uint64("seed", 1, "random seed")
	formatName := flag.String("format", "mixed", "mixed, goldengate, debezium or debezium-schemaless: every table in that format")
	flag.Parse()
	format, ok := map[string]int{"mixed": gen.Mixed, "goldengate": gen.GoldenGate, "debezium": gen.Debezium,
		"debezium-schemaless": gen.DebeziumSchemaless}[*formatName]
	if *out == "" || !ok {
		fmt.Fprintln(os.Stderr, "usage: cdcgen --out DIR [--events N] [--tables M≥3] [--seed S] [--format mixed|goldengate|debezium|debezium-schemaless]")
		os.Exit(2)
	}
	if err := run(*out, *events, *tables, *seed, format); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(dir string, events, tables int, seed uint64, format int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "stream.ndjson"))
	if err != nil {
		return err
	}
	exp, err := gen.GenerateFormat(f, events, tables, seed, format)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(exp, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "expected.json"), data, 0o644)
}
