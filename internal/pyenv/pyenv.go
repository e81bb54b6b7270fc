// Package pyenv finds, for tests, the Python that `make test` sets up with
// the readers cdclake's output is checked with (DuckDB, pyarrow,
// pyiceberg): CDCLAKE_PYTHON.
package pyenv

import (
	"os"
	"testing"
)

// Python returns the Python of CDCLAKE_PYTHON. Without it the test is
// skipped, saying it is to read what (reading), or fails when
// CDCLAKE_REQUIRE_DUCKDB says the readers must be there, as in CI.
func Python(t testing.TB, reading string) string {
	t.Helper()
	py := os.Getenv("CDCLAKE_PYTHON")
	if py == "" {
		if os.Getenv("CDCLAKE_REQUIRE_DUCKDB") != "" {
			t.Fatal("CDCLAKE_PYTHON is not set but CDCLAKE_REQUIRE_DUCKDB is: run `make test`")
		}
		t.Skip("CDCLAKE_PYTHON not set: run `make test` to " + reading)
	}
	return py
}
