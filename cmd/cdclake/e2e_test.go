package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The end-to-end tests build the real binaries, land streams into a file://
// lake and read it back with DuckDB (through Python's duckdb package, found
// via CDCLAKE_PYTHON; `make test` sets it up). Without it they skip, unless
// CDCLAKE_REQUIRE_DUCKDB is set, as in CI.

func python(t *testing.T) string {
	t.Helper()
	py := os.Getenv("CDCLAKE_PYTHON")
	if py == "" {
		if os.Getenv("CDCLAKE_REQUIRE_DUCKDB") != "" {
			t.Fatal("CDCLAKE_PYTHON is not set but CDCLAKE_REQUIRE_DUCKDB is: run `make test`")
		}
		t.Skip("CDCLAKE_PYTHON not set: run `make test` to read the lake back with DuckDB")
	}
	return py
}

func build(t *testing.T, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

func runBin(t *testing.T, bin string, args ...string) (string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(bin), args, err, stdout.String(), stderr.String())
	}
	return stdout.String(), stderr.String()
}

func listFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestEndToEndGenerated lands a generated mixed stream (GoldenGate with
// partial images, DDL mid-stream and CloudEvents; Debezium with and without
// schemas, tombstones, transactions, heartbeats) and checks with DuckDB that
// every change row is there, every column lands with its type, and the
// current state rebuilt from the change rows equals the generator's.
func TestEndToEndGenerated(t *testing.T) {
	py := python(t)
	cdclake := build(t, "github.com/cdclake/cdclake/cmd/cdclake")
	gen := build(t, "github.com/cdclake/cdclake/cmd/cdcgen")
	dir := t.TempDir()
	runBin(t, gen, "--out", dir, "--events", "3000", "--tables", "9", "--seed", "42")
	lakeDir := filepath.Join(dir, "lake")
	cfg := filepath.Join("..", "..", "testdata", "e2e", "config.yaml")
	stream := filepath.Join(dir, "stream.ndjson")
	stdout, _ := runBin(t, cdclake, "run", "--source", "file://"+stream, "--sink", lakeDir, "--config", cfg)
	if !strings.Contains(stdout, "dead letters 0") {
		t.Errorf("summary reports dead letters:\n%s", stdout)
	}
	if m := regexp.MustCompile(`rows (\d+),`).FindStringSubmatch(stdout); m == nil || m[1] != "3000" {
		t.Errorf("summary rows = %v, want 3000:\n%s", m, stdout)
	}
	verify := exec.Command(py, filepath.Join("..", "..", "testdata", "e2e", "verify.py"), lakeDir, filepath.Join(dir, "expected.json"))
	out, err := verify.CombinedOutput()
	t.Logf("verify:\n%s", out)
	if err != nil {
		t.Fatalf("DuckDB verification failed: %v", err)
	}

	// The same stream in the flat layout, hourly partitions, snappy.
	flatLake := filepath.Join(dir, "flat")
	runBin(t, cdclake, "run", "--source", "file://"+stream, "--sink", flatLake, "--config",
		filepath.Join("..", "..", "testdata", "e2e", "flat.yaml"))
	out, err = exec.Command(py, filepath.Join("..", "..", "testdata", "e2e", "verify.py"), flatLake,
		filepath.Join(dir, "expected.json")).CombinedOutput()
	t.Logf("verify flat:\n%s", out)
	if err != nil {
		t.Fatalf("DuckDB verification of the flat layout failed: %v", err)
	}
	if files := listFiles(t, flatLake); !slices.ContainsFunc(files, func(f string) bool {
		return strings.Contains(f, "/day=2026-07-13/hour=04/")
	}) {
		t.Errorf("no hourly partition directories in %v", files[:min(5, len(files))])
	}

	// A replay of the same input rewrites the same objects.
	first := listFiles(t, lakeDir)
	runBin(t, cdclake, "run", "--source", "file://"+stream, "--sink", lakeDir, "--config", cfg)
	if second := listFiles(t, lakeDir); !slices.Equal(first, second) {
		t.Errorf("replay changed the set of files:\nfirst  %v\nsecond %v", first, second)
	}
}

// TestEndToEndSamples lands the bundled samples (every record class of both
// formats, from the format documentation) and checks them with DuckDB.
func TestEndToEndSamples(t *testing.T) {
	py := python(t)
	cdclake := build(t, "github.com/cdclake/cdclake/cmd/cdclake")
	lakeDir := filepath.Join(t.TempDir(), "lake")
	stdout, _ := runBin(t, cdclake, "run", "--source", filepath.Join("..", "..", "testdata", "samples"),
		"--sink", lakeDir, "--config", filepath.Join("..", "..", "config", "example.yaml"))
	if !strings.Contains(stdout, "dead letters 0") {
		t.Errorf("summary reports dead letters:\n%s", stdout)
	}
	check := exec.Command(py, filepath.Join("..", "..", "testdata", "e2e", "samples.py"), lakeDir)
	out, err := check.CombinedOutput()
	t.Logf("samples.py:\n%s", out)
	if err != nil {
		t.Fatalf("DuckDB checks of the samples failed: %v", err)
	}
}

// TestDeadLetters sends malformed input and checks that each line is kept
// with its reason while the valid lines land.
func TestDeadLetters(t *testing.T) {
	cdclake := build(t, "github.com/cdclake/cdclake/cmd/cdclake")
	dir := t.TempDir()
	in := filepath.Join(dir, "in.ndjson")
	lines := []string{
		`{"qual_table":"S.T","op_type":"INSERT","op_ts":"2026-07-13T04:01:01.123456Z","xid":"1","pos":"p1","after":{"ID":1}}`,
		`{"qual_table":"S.T","op_type":"INSERT","op_ts":"2026-07-13T04:01:01Z"`, // truncated JSON
		`{"qual_table":"S.T","op_type":"EXPLODE","op_ts":"2026-07-13T04:01:01Z","after":{"ID":2}}`,
		`{"something":"else"}`,
		`{"qual_table":"S.T","op_type":"INSERT","op_ts":"2026-07-13T04:01:02Z","xid":"2","pos":"p2","after":{"ID":3}}`,
	}
	if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lakeDir := filepath.Join(dir, "lake")
	stdout, _ := runBin(t, cdclake, "run", "--source", in, "--sink", lakeDir)
	if !strings.Contains(stdout, "dead letters 3") || !strings.Contains(stdout, "rows 2,") {
		t.Fatalf("want 2 rows and 3 dead letters:\n%s", stdout)
	}
	// One object per dead letter, named from its position.
	files := listFiles(t, filepath.Join(lakeDir, "_dead_letter"))
	if len(files) != 3 {
		t.Fatalf("dead letter files = %v", files)
	}
	var got []string
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(lakeDir, "_dead_letter", f))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, strings.TrimSpace(string(data)))
	}
	for i, want := range []string{`"offset":2,"stage":"unwrap"`, `"offset":3,"stage":"decode"`, `"offset":4,"stage":"decode"`} {
		if !strings.Contains(got[i], want) || !strings.Contains(got[i], `"value_base64"`) {
			t.Errorf("dead letter %d = %s, want %s", i, got[i], want)
		}
	}
}

// TestSignalAndMaxAge feeds a pipe slowly: an idle table's file is written
// once it reaches max_age while cdclake keeps running, and SIGTERM makes it
// write what it holds, print the summary and exit 0.
func TestSignalAndMaxAge(t *testing.T) {
	cdclake := build(t, "github.com/cdclake/cdclake/cmd/cdclake")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(cfg, []byte("defaults:\n  max_age: 1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lakeDir := filepath.Join(dir, "lake")
	cmd := exec.Command(cdclake, "run", "--source", "-", "--sink", lakeDir, "--config", cfg)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line := func(table string, id int) string {
		return `{"qual_table":"` + table + `","op_type":"INSERT","op_ts":"2026-07-13T04:01:01.123456Z","xid":"1","pos":"p","after":{"ID":` + strconv.Itoa(id) + `}}` + "\n"
	}
	if _, err := io.WriteString(stdin, line("S.AGED", 1)); err != nil {
		t.Fatal(err)
	}
	aged := filepath.Join(lakeDir, "S.AGED", "date=2026-07-13", "stdin-p0-o00000000000000000001.parquet")
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(aged); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("file past max_age not written while running; stderr:\n%s", stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := io.WriteString(stdin, line("S.HELD", 2)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // read, but younger than max_age
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\nstderr:\n%s", err, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(lakeDir, "S.HELD", "date=2026-07-13", "stdin-p0-o00000000000000000002.parquet")); err != nil {
		t.Errorf("held file not written on SIGTERM: %v", err)
	}
	out := stdout.String()
	if !strings.Contains(out, "rows 2,") || !strings.Contains(out, "interrupted") {
		t.Errorf("summary:\n%s", out)
	}
}

// TestInterruptedFileSource: a run of a file source stopped by SIGTERM
// before the end of its input lands what it read, says how far each file
// landed, and exits with status 3, not 0.
func TestInterruptedFileSource(t *testing.T) {
	bin := build(t, "github.com/cdclake/cdclake/cmd/cdclake")
	cmd := exec.Command(bin, "run", "--source", "-", "--sink", t.TempDir())
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The input stays open: the source has not ended when the signal comes.
	for i := range 10 {
		fmt.Fprintf(in, `{"qual_table":"S.T","op_type":"INSERT","op_ts":"2026-07-13T04:01:01Z","after":{"ID":%d}}`+"\n", i)
	}
	time.Sleep(500 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	in.Close()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("exit %v, want status 3:\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "interrupted before the end of the input; landed:") || !strings.Contains(out.String(), "stdin: ") {
		t.Errorf("the summary does not say how far the input landed:\n%s", out.String())
	}
}
