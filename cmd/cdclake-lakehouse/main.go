// Command cdclake-lakehouse commits the files cdclake lands to Iceberg
// tables. cdclake starts it for a run with tables to commit
// (table_format: iceberg) and talks to it over its standard input and
// output (lakehouse.Serve); it is not run by hand. It is a binary of its
// own because iceberg-go costs every process that links it about 90 ms
// and 32 MB at start.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"

	"github.com/cdclake/cdclake/sinks/lakehouse"
	"github.com/cdclake/cdclake/sinks/lakehouse/icebergsql"
)

func main() {
	os.Exit(run())
}

func run() int {
	if path := os.Getenv(lakehouse.CPUProfileEnv); path != "" {
		f, err := os.Create(path)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "cdclake-lakehouse: the CPU profile:", err)
			return 1
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	open := func(ctx context.Context, cfg lakehouse.Config, log *slog.Logger) (lakehouse.Catalog, error) {
		return icebergsql.Open(ctx, cfg, log)
	}
	if err := lakehouse.Serve(os.Stdin, os.Stdout, os.Stderr, open); err != nil {
		fmt.Fprintln(os.Stderr, "cdclake-lakehouse:", err)
		return 1
	}
	return 0
}
