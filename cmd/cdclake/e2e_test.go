package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
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

	"github.com/cdclake/cdclake/internal/pyenv"
)

// The end-to-end tests build the real binaries, land streams into a file://
// lake and read it back with DuckDB (through Python's duckdb package, found
// via CDCLAKE_PYTHON; `make test` sets it up). Without it they skip, unless
// CDCLAKE_REQUIRE_DUCKDB is set, as in CI.

func python(t *testing.T) string {
	t.Helper()
	return pyenv.Python(t, "read the lake back with DuckDB")
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
// current state rebuilt from the change rows, and the current-state
// tables the run built, equal the generator's.
func TestEndToEndGenerated(t *testing.T) {
	py, cdclake, dir := generated(t, 42)
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
	// The config's keys and sink.current: the run builds every table's
	// current-state table, which must hold the generator's final state.
	verify := exec.Command(py, filepath.Join("..", "..", "testdata", "e2e", "verify.py"), lakeDir, filepath.Join(dir, "expected.json"),
		"--current")
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

// TestOlderFilesStayReadable puts a file of an earlier release, whose
// _cdc_ingested_at was a required column holding the landing time, beside
// the files this release lands for the same table (where the column is
// optional, NULL for files): DuckDB reads the table as one dataset.
func TestOlderFilesStayReadable(t *testing.T) {
	py := python(t)
	cdclake := build(t, "github.com/cdclake/cdclake/cmd/cdclake")
	lakeDir := filepath.Join(t.TempDir(), "lake")
	runBin(t, cdclake, "run", "--source", filepath.Join("..", "..", "testdata", "samples"),
		"--sink", lakeDir, "--config", filepath.Join("..", "..", "config", "example.yaml"))
	older, err := os.ReadFile(filepath.Join("..", "..", "testdata", "e2e", "older", "SALES.ORDERS-required-ingested-at.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	table := filepath.Join(lakeDir, "SALES.ORDERS")
	if err := os.WriteFile(filepath.Join(table, "date=2026-07-13", "older.parquet"), older, 0o644); err != nil {
		t.Fatal(err)
	}
	script := `import sys, duckdb
rows = duckdb.sql("SELECT count(*), count(_cdc_ingested_at), count(DISTINCT _cdc_offset) " +
                  "FROM read_parquet('" + sys.argv[1] + "/**/*.parquet')").fetchall()
print(*rows[0])`
	out, err := exec.Command(py, "-c", script, table).CombinedOutput()
	if err != nil {
		t.Fatalf("DuckDB cannot read the table with an older file: %v\n%s", err, out)
	}
	// The samples' 7 rows, and the older file's 3 again, with their
	// landing times.
	if got := strings.TrimSpace(string(out)); got != "10 3 7" {
		t.Errorf("rows, ingestion times, offsets = %s, want 10 3 7", got)
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
// write what it holds, print the summary and exit 3 (the input had not
// ended).
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
	// The input did not end: status 3, and how far it landed.
	var exit *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("exit after SIGTERM: %v, want status 3\nstderr:\n%s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "stdin: every line below 3") {
		t.Errorf("the summary does not say that lines 1 and 2 landed:\n%s", stdout.String())
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

// TestMalformedCorpus lands messages with a bad byte or a bad value in
// every field that becomes a string, JSON or time: each goes to the dead
// letters, every dataset that lands is read in full by DuckDB, and every
// message is accounted for in the summary.
func TestMalformedCorpus(t *testing.T) {
	py := python(t)
	cdclake := build(t, "github.com/cdclake/cdclake/cmd/cdclake")
	gg := func(table, xid, pos, ts, after string) string {
		return `{"qual_table":"` + table + `","op_type":"INSERT","op_ts":"` + ts + `","xid":"` + xid + `","pos":"` + pos + `","after":` + after + `}`
	}
	const ts = "2026-07-13T04:01:01Z"
	dbz := func(doc, db, id string) string {
		return `{"schema":{"type":"struct","fields":[{"type":"struct","optional":true,"field":"after","fields":[` +
			`{"type":"int32","optional":false,"field":"id"},{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1,"field":"doc"}]},` +
			`{"type":"struct","optional":false,"field":"source","fields":[{"type":"string","optional":false,"field":"db"},` +
			`{"type":"string","optional":false,"field":"table"},{"type":"int64","optional":false,"field":"ts_ms"}]},` +
			`{"type":"string","optional":false,"field":"op"},{"type":"int64","optional":true,"field":"ts_ms"}],"name":"shop.inv.docs.Envelope"},` +
			`"payload":{"after":{"id":` + id + `,"doc":` + doc + `},"source":{"db":"` + db + `","table":"docs","ts_ms":1752379261000},"op":"c","ts_ms":1752379261000}}`
	}
	cases := []struct {
		line string
		dead bool
	}{
		{"\ufeff" + gg("S.T", "1", "p1", ts, `{"ID":1,"NAME":"ok"}`), false}, // a byte-order mark, stripped
		{gg("S.T", "\xff", "p2", ts, `{"ID":2}`), true},                      // transaction id
		{gg("S.T", "3", "p\xff", ts, `{"ID":3}`), true},                      // position
		{gg("S.\xffT", "4", "p4", ts, `{"ID":4}`), true},                     // table name
		{gg("S.T", "5", "p5", ts, "{\"ID\":5,\"N\xffAME\":\"x\"}"), true},    // column name
		{gg("S.T", "6", "p6", ts, "{\"ID\":6,\"NAME\":\"\xff\"}"), true},     // value
		{gg("S.T", "7", "p7", "yesterday", `{"ID":7}`), true},                // time
		{`{"qual_table":"S.T","op_type":"INSERT","op_ts":"` + ts + `","xid":"8","pos":"p8","tokens":{"k":"` + "\xff" + `"},"after":{"ID":8}}`, true},
		{`{"specversion":"1.0","id":"e9","source":"/s","type":"t` + "\xff" + `","datacontenttype":"application/json","data":` +
			gg("S.T", "9", "p9", ts, `{"ID":9}`) + `}`, true}, // CloudEvents attribute
		{gg("S.T", "10", "p10", ts, `{"ID":10,"NAME":"fine"}`), false},
		{dbz(`"{\"a\": 1}"`, "shop", "11"), false},
		{dbz(`"{\"a\": "`, "shop", "12"), true},       // Json column, not JSON
		{dbz(`"{\"a\": 1}"`, "sh\xffop", "13"), true}, // source block
		{`{"status":"BEGIN","id":"tx` + "\xff" + `","event_count":null,"data_collections":null,"ts_ms":1752379261000}`, true},
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "in.ndjson")
	var text []string
	dead := 0
	for _, c := range cases {
		text = append(text, c.line)
		if c.dead {
			dead++
		}
	}
	if err := os.WriteFile(in, []byte(strings.Join(text, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lakeDir := filepath.Join(dir, "lake")
	stdout, _ := runBin(t, cdclake, "run", "--source", in, "--sink", lakeDir)
	if want := fmt.Sprintf("dead letters %d: ", dead); !strings.Contains(stdout, want) ||
		!strings.Contains(stdout, fmt.Sprintf("messages %d ", len(cases))) || !strings.Contains(stdout, "rows 3,") {
		t.Errorf("want %d messages, 3 rows and %d dead letters:\n%s", len(cases), dead, stdout)
	}
	for i, c := range cases {
		_, err := os.Stat(filepath.Join(lakeDir, "_dead_letter", fmt.Sprintf("in.ndjson-p0-o%020d.ndjson", i+1)))
		if (err == nil) != c.dead {
			t.Errorf("line %d: dead letter %v, want %v: %q", i+1, err == nil, c.dead, c.line)
		}
	}
	out, err := exec.Command(py, filepath.Join("..", "..", "testdata", "e2e", "readall.py"), lakeDir).CombinedOutput()
	t.Logf("DuckDB:\n%s", out)
	if err != nil {
		t.Errorf("DuckDB cannot read every dataset: %v", err)
	}
}

// TestReplaysAreDeterministic lands the same input (a generated stream
// with bad lines among it) twice, with different block sizes: the same
// objects, byte for byte.
func TestReplaysAreDeterministic(t *testing.T) {
	py, cdclake, dir := generated(t, 7)
	stream := filepath.Join(dir, "stream.ndjson")
	data, err := os.ReadFile(stream)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	for i := 100; i < len(lines); i += 500 {
		lines[i] = `{"qual_table":"S.T","op_type":"INSERT"` + "\n" // truncated: a dead letter
	}
	if err := os.WriteFile(stream, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := "progress_interval: 0s\nbatch:\n  max_open_files: 10\ndefaults:\n  max_rows: 1000\n" +
		"routes:\n  - match: \"SALES.*\"\n    types:\n      CREATED: timestamp\n"
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	runBin(t, cdclake, "run", "--source", stream, "--sink", a, "--config", cfg("a.yaml", base+"source:\n  block_lines: 1024\n"))
	runBin(t, cdclake, "run", "--source", stream, "--sink", b, "--config", cfg("b.yaml", base+"source:\n  block_lines: 7\n  block_bytes: 4096\n"))
	out, err := exec.Command(py, filepath.Join("..", "..", "testdata", "e2e", "same.py"), a, b).CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Errorf("two landings of the same input differ: %v", err)
	}
}

// TestSpilledFilesAreTheSame lands a stream of three tables under a memory
// bound so small that open files give their builders back (spill) again
// and again, and without a bound: the same objects, byte for byte.
func TestSpilledFilesAreTheSame(t *testing.T) {
	py := python(t)
	cdclake := build(t, "github.com/cdclake/cdclake/cmd/cdclake")
	gen := build(t, "github.com/cdclake/cdclake/cmd/cdcgen")
	dir := t.TempDir()
	runBin(t, gen, "--out", dir, "--events", "6000", "--tables", "3", "--seed", "7")
	stream := filepath.Join(dir, "stream.ndjson")
	land := func(name, config string) string {
		cfg := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(cfg, []byte("progress_interval: 0s\ndefaults:\n  max_rows: 1000\n"+config), 0o644); err != nil {
			t.Fatal(err)
		}
		_, stderr := runBin(t, cdclake, "run", "--source", stream, "--sink", filepath.Join(dir, name), "--config", cfg, "--log-level", "debug")
		return stderr
	}
	land("roomy", "")
	if logs := land("tight", "batch:\n  max_buffered_bytes: 1MiB\n"); strings.Count(logs, "file spilled") < 10 {
		t.Fatalf("the tight bound spilled %d times", strings.Count(logs, "file spilled"))
	}
	out, err := exec.Command(py, filepath.Join("..", "..", "testdata", "e2e", "same.py"),
		filepath.Join(dir, "roomy"), filepath.Join(dir, "tight")).CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Errorf("spilled files differ: %v", err)
	}
}

// generated builds cdclake and writes a generated stream of 3000 changes
// over 9 tables (stream.ndjson, expected.json) into a new folder; it
// returns DuckDB's Python, the binary and the folder.
func generated(t *testing.T, seed int) (py, cdclake, dir string) {
	t.Helper()
	py = python(t)
	cdclake = build(t, "github.com/cdclake/cdclake/cmd/cdclake")
	gen := build(t, "github.com/cdclake/cdclake/cmd/cdcgen")
	dir = t.TempDir()
	runBin(t, gen, "--out", dir, "--events", "3000", "--tables", "9", "--seed", strconv.Itoa(seed))
	return py, cdclake, dir
}

// TestRealCapture lands the committed capture of real Debezium connectors
// (testdata/debezium-real: PostgreSQL with and without schemas, the latter
// also with its catalog, in Avro with the registry's saved schemas, and
// MariaDB) and verifies each lake with DuckDB against the capture and the
// databases' saved final states (infra/verify_real.py,
// infra/verify_mariadb.py), the Avro lake against the JSON one
// (infra/verify_avro.py); make e2e adds Spark and the live services.
func TestRealCapture(t *testing.T) {
	py := python(t)
	cdclake := build(t, "github.com/cdclake/cdclake/cmd/cdclake")
	root := filepath.Join("..", "..")
	capture := filepath.Join(root, "testdata", "debezium-real")
	dir := t.TempDir()
	land := func(glob, lake string, extra ...string) {
		stdout, _ := runBin(t, cdclake, append([]string{"run", "--source", filepath.Join(capture, glob),
			"--sink", filepath.Join(dir, lake)}, extra...)...)
		t.Logf("%s:\n%s", lake, stdout)
	}
	land("shop.*.ndjson", "shop")
	land("*shopraw*.ndjson", "shopraw")
	land("*shopraw*.ndjson", "catalog", "--config", filepath.Join(root, "testdata", "e2e", "shopraw-catalog.yaml"))
	land("maria*.ndjson", "maria")
	// The Avro connector's topics, with the registry's schemas the capture
	// saved.
	abs, err := filepath.Abs(filepath.Join(capture, "_schemas.json"))
	if err != nil {
		t.Fatal(err)
	}
	avroConfig := filepath.Join(dir, "avro.yaml")
	if err := os.WriteFile(avroConfig, []byte("source:\n  schema_registry:\n    url: "+abs+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	land("shopavro.*.b64", "avro", "--config", avroConfig)
	// The current-state tables of PostgreSQL's and MariaDB's tables, by
	// the keys of their saved final states, which the verifiers compare
	// them with (--current).
	snapshot(t, cdclake, filepath.Join(dir, "shop"), filepath.Join(capture, "_postgres.json"), "shop.public.")
	snapshot(t, cdclake, filepath.Join(dir, "maria"), filepath.Join(capture, "_mariadb.json"), "shop.")
	for _, args := range [][]string{
		{filepath.Join(root, "infra", "verify_real.py"), "--capture", capture, "--no-spark", "--current",
			"--pg-dump", filepath.Join(capture, "_postgres.json"),
			"--lake", "shop=" + filepath.Join(dir, "shop"), "--lake", "shopraw=" + filepath.Join(dir, "shopraw"),
			"--lake", "shopraw+catalog=" + filepath.Join(dir, "catalog")},
		{filepath.Join(root, "infra", "verify_mariadb.py"), "--capture", capture, "--no-spark", "--current",
			"--dump", filepath.Join(capture, "_mariadb.json"), "--lake", filepath.Join(dir, "maria")},
		{filepath.Join(root, "infra", "verify_avro.py"), "--no-spark",
			"--avro", filepath.Join(dir, "avro"), "--json", filepath.Join(dir, "shop")},
	} {
		cmd := exec.Command(py, args...)
		cmd.Env = append(os.Environ(), "TZ=UTC")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", filepath.Base(args[0]), err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		t.Logf("%s: %s", filepath.Base(args[0]), lines[len(lines)-1])
	}
}

// snapshot builds the state table of every table a database's saved
// final state (infra/verify_real.py --dump-pg, verify_mariadb.py --save)
// holds, keyed as it says, in the lake at dir, twice: the second build
// finds nothing new.
func snapshot(t *testing.T, cdclake, dir, saved, prefix string) {
	t.Helper()
	data, err := os.ReadFile(saved)
	if err != nil {
		t.Fatal(err)
	}
	var db struct {
		Tables map[string]struct {
			Key  []string `json:"key"`
			Keys []string `json:"keys"`
		} `json:"tables"`
	}
	if err := json.Unmarshal(data, &db); err != nil {
		t.Fatal(err)
	}
	if db.Tables == nil { // verify_real.py's: the tables at top level
		if err := json.Unmarshal(data, &db.Tables); err != nil {
			t.Fatal(err)
		}
	}
	if len(db.Tables) == 0 {
		t.Fatalf("%s: no tables", saved)
	}
	for name, tb := range db.Tables {
		key := strings.Join(append(tb.Key, tb.Keys...), ",")
		args := []string{"snapshot", "--sink", dir, "--table", prefix + name, "--key", key}
		out, _ := runBin(t, cdclake, args...)
		t.Logf("%s", strings.TrimSpace(out))
		if again, _ := runBin(t, cdclake, args...); !strings.Contains(again, " 0 changes from 0 files folded in, 0 of ") {
			t.Errorf("%s: a second build found something new: %s", name, again)
		}
	}
}

// TestIcebergTables lands the samples and the real capture with their
// tables committed to Iceberg (a SQLite catalog beside a file:// lake, or
// the catalog at $CDCLAKE_TEST_ICEBERG_CATALOG, REST or PostgreSQL; with
// CDCLAKE_TEST_ICEBERG_S3 set too, the lake and the tables are on the S3
// server of $CDCLAKE_TEST_S3_URL, whose bucket is the folder
// $CDCLAKE_TEST_S3_DIR) and checks with pyiceberg (testdata/e2e/iceberg.py) that every table reads
// exactly the rows of its Parquet files, records its partitions' offsets,
// and that every snapshot reads as its files; then lands the same input
// again: nothing is added twice and no snapshot is made.
func TestIcebergTables(t *testing.T) {
	py := python(t)
	cdclake := build(t, "github.com/cdclake/cdclake/cmd/cdclake")
	// The committer's binary, which cdclake starts (lakehouse.Start).
	t.Setenv("CDCLAKE_LAKEHOUSE", build(t, "github.com/cdclake/cdclake/cmd/cdclake-lakehouse"))
	root := filepath.Join("..", "..")
	for _, tc := range []struct{ name, source, extra, plain string }{
		// SQL Server's time(7) (nanoseconds) has no Iceberg type: its table
		// stays plain.
		{"samples", filepath.Join(root, "testdata", "samples"), "routes:\n  - match: testDB.dbo.orders\n    table_format: none\n",
			"testDB.dbo.orders"},
		{"postgres", filepath.Join(root, "testdata", "debezium-real", "shop.*.ndjson"), "", ""},
		{"mariadb", filepath.Join(root, "testdata", "debezium-real", "maria*.ndjson"), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			lakeDir, catalog := filepath.Join(dir, "lake"), filepath.Join(dir, "catalog.db")
			cfg := filepath.Join(dir, "iceberg.yaml")
			lakeURL := lakeDir
			sink, reader := "    catalog: sqlite://"+catalog+"\n", []string{catalog, lakeDir}
			if other := os.Getenv("CDCLAKE_TEST_ICEBERG_CATALOG"); other != "" {
				// A REST catalog (infra/start.sh iceberg-rest) or a
				// PostgreSQL database, the tables under a namespace of
				// the run's own.
				ns := fmt.Sprintf("e2e_%s_%d", tc.name, time.Now().UnixNano())
				var s3 []string
				if u, d := os.Getenv("CDCLAKE_TEST_S3_URL"), os.Getenv("CDCLAKE_TEST_S3_DIR"); os.Getenv("CDCLAKE_TEST_ICEBERG_S3") != "" && u != "" && d != "" {
					// The lake, and the tables' metadata, on the S3
					// server (the bucket's folder d is read back).
					lakeURL, lakeDir = u+"&prefix="+ns+"/", filepath.Join(d, ns)
					s3 = []string{"--warehouse", "s3://" + bucketOf(t, u) + "/" + ns, "--s3-endpoint", endpointOf(t, u)}
				}
				sink, reader = "    catalog: "+other+"\n    namespace: "+ns+"\n", append([]string{other, lakeDir, "--namespace", ns}, s3...)
			}
			if err := os.WriteFile(cfg, []byte("defaults:\n  table_format: iceberg\nsink:\n  iceberg:\n"+sink+tc.extra), 0o644); err != nil {
				t.Fatal(err)
			}
			check := func() string {
				args := append([]string{filepath.Join(root, "testdata", "e2e", "iceberg.py")}, append(slices.Clone(reader), "--snapshots", "4")...)
				if tc.plain != "" {
					args = append(args, "--plain", tc.plain)
				}
				out, err := exec.Command(py, args...).CombinedOutput()
				if err != nil {
					t.Fatalf("iceberg.py: %v\n%s", err, out)
				}
				return strings.TrimSpace(string(out))
			}
			_, stderr := runBin(t, cdclake, "run", "--source", tc.source, "--sink", lakeURL, "--config", cfg)
			for _, l := range strings.Split(stderr, "\n") {
				if strings.Contains(l, "full committer") {
					t.Log(l)
				}
			}
			first := check()
			t.Log(first)
			// Landed again with every commit in the committer process,
			// profiled, the committer included.
			prof := filepath.Join(dir, "cpu.prof")
			committer := filepath.Join(dir, "committer.yaml")
			if err := os.WriteFile(committer, []byte("defaults:\n  table_format: iceberg\nsink:\n  iceberg:\n    appends: committer\n"+sink+tc.extra), 0o644); err != nil {
				t.Fatal(err)
			}
			runBin(t, cdclake, "run", "--source", tc.source, "--sink", lakeURL, "--config", committer, "--cpuprofile", prof)
			if again := check(); again != first {
				t.Errorf("landed again: %s, first %s", again, first)
			}
			for _, p := range []string{prof, prof + ".cdclake-lakehouse"} {
				if data, err := os.ReadFile(p); err != nil || len(data) < 2 || data[0] != 0x1f || data[1] != 0x8b {
					t.Errorf("the CPU profile %s: %v, %d bytes, want a gzipped profile", filepath.Base(p), err, len(data))
				}
			}
			// Compacted, every table reads the same rows, in one more
			// snapshot at most.
			out, _ := runBin(t, cdclake, "compact", "--config", cfg, "--sink", lakeURL, "--target-size", "1073741824")
			t.Log(strings.TrimSpace(out))
			if !regexp.MustCompile(`: [2-9]\d* files into 1 `).MatchString(out) {
				t.Errorf("no table was compacted:\n%s", out)
			}
			same := func(when string) {
				t.Helper()
				cmd := exec.Command(py, append([]string{filepath.Join(root, "testdata", "e2e", "iceberg.py")}, append(slices.Clone(reader), "--snapshots", "5")...)...)
				if tc.plain != "" {
					cmd.Args = append(cmd.Args, "--plain", tc.plain)
				}
				if got, err := cmd.CombinedOutput(); err != nil || !strings.HasPrefix(string(got), strings.SplitAfter(first, " rows")[0]) {
					t.Errorf("%s: %v\n%s\nbefore: %s", when, err, got, first)
				}
			}
			same("after compaction")
			// Every snapshot but the newest expires; the lake's files stay.
			out, _ = runBin(t, cdclake, "compact", "--config", cfg, "--sink", lakeURL, "--expire-older-than", "1ns", "--retain-last", "1")
			if !strings.Contains(out, "snapshots expired") {
				t.Errorf("no snapshot expired:\n%s", out)
			}
			same("after the expiry")
		})
	}
}

// TestSnapshotIncremental lands the first half of each PostgreSQL topic
// of the real capture, builds the state tables, lands the whole capture
// and builds them again: the second build folds in only the new changes,
// and the state tables must equal PostgreSQL's final state
// (infra/verify_real.py --current), as a build from nothing does.
func TestSnapshotIncremental(t *testing.T) {
	py := python(t)
	cdclake := build(t, "github.com/cdclake/cdclake/cmd/cdclake")
	root := filepath.Join("..", "..")
	capture := filepath.Join(root, "testdata", "debezium-real")
	dir := t.TempDir()
	in, lakeDir := filepath.Join(dir, "in"), filepath.Join(dir, "lake")
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	topics, err := filepath.Glob(filepath.Join(capture, "shop.*.ndjson"))
	if err != nil || len(topics) == 0 {
		t.Fatalf("no capture: %v", err)
	}
	copyLines := func(half bool) {
		for _, f := range topics {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if half {
				lines := strings.SplitAfter(string(data), "\n")
				data = []byte(strings.Join(lines[:len(lines)/2], ""))
			}
			if err := os.WriteFile(filepath.Join(in, filepath.Base(f)), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	copyLines(true)
	runBin(t, cdclake, "run", "--source", in, "--sink", lakeDir)
	snapshot(t, cdclake, lakeDir, filepath.Join(capture, "_postgres.json"), "shop.public.")
	copyLines(false)
	runBin(t, cdclake, "run", "--source", in, "--sink", lakeDir)
	snapshot(t, cdclake, lakeDir, filepath.Join(capture, "_postgres.json"), "shop.public.")
	verifyCurrent(t, py, capture, lakeDir)
}

// verifyCurrent checks the lake landed from the PostgreSQL capture, and
// its state tables, against PostgreSQL's saved final state
// (infra/verify_real.py --current).
func verifyCurrent(t *testing.T, py, capture, lakeDir string, extra ...string) {
	t.Helper()
	cmd := exec.Command(py, append([]string{filepath.Join("..", "..", "infra", "verify_real.py"), "--capture", capture, "--no-spark",
		"--current", "--pg-dump", filepath.Join(capture, "_postgres.json"), "--lake", "shop=" + lakeDir}, extra...)...)
	cmd.Env = append(os.Environ(), "TZ=UTC")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("verify_real.py: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	t.Logf("verify_real.py: %s", lines[len(lines)-1])
}

// pgKeys returns the key columns of each table of PostgreSQL's saved final
// state (the capture's _postgres.json).
func pgKeys(t *testing.T, capture string) map[string][]string {
	t.Helper()
	var db map[string]struct {
		Key []string `json:"key"`
	}
	data, err := os.ReadFile(filepath.Join(capture, "_postgres.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &db); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for name, tb := range db {
		out[name] = tb.Key
	}
	return out
}

// keyRoutes returns config routes giving each shop.public table its key.
func keyRoutes(keys map[string][]string) string {
	out := "routes:\n"
	for _, name := range slices.Sorted(maps.Keys(keys)) {
		out += fmt.Sprintf("  - match: shop.public.%s\n    key: [%s]\n", name, strings.Join(keys[name], ", "))
	}
	return out
}

// TestRunBuildsStateTables lands the real PostgreSQL capture with
// sink.current.interval set and the tables' keys in routes: the run
// builds their state tables at its end, equal to PostgreSQL's final state
// (infra/verify_real.py --current); and the GoldenGate samples, whose
// records name their keys, without any.
func TestRunBuildsStateTables(t *testing.T) {
	py := python(t)
	cdclake := build(t, "github.com/cdclake/cdclake/cmd/cdclake")
	root := filepath.Join("..", "..")
	capture := filepath.Join(root, "testdata", "debezium-real")
	dir := t.TempDir()
	db := pgKeys(t, capture)
	cfg := "sink:\n  current:\n    interval: 1h\n    buckets: 4\n" + keyRoutes(db)
	cfgFile := filepath.Join(dir, "current.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	lakeDir := filepath.Join(dir, "lake")
	runBin(t, cdclake, "run", "--config", cfgFile, "--source", filepath.Join(capture, "shop.*.ndjson"), "--sink", lakeDir)
	verifyCurrent(t, py, capture, lakeDir)
	for name := range db {
		if n := len(listFiles(t, filepath.Join(lakeDir, "_current", "shop.public."+name, "_manifest"))); n != 1 {
			t.Errorf("%s: %d manifests, want the one build at the end", name, n)
		}
	}

	// A run that lands none of a table's changes still builds its state
	// at its end: one that died before its last build left it behind.
	behind := filepath.Join(dir, "behind")
	runBin(t, cdclake, "run", "--source", filepath.Join(capture, "shop.*.ndjson"), "--sink", behind)
	runBin(t, cdclake, "run", "--config", cfgFile, "--source", filepath.Join(capture, "shop.message.ndjson"), "--sink", behind)
	verifyCurrent(t, py, capture, behind)

	// GoldenGate names its keys: a partial update keeps the columns it
	// does not carry, a key change moves the row with them, a delete
	// removes it.
	gg := filepath.Join(dir, "gg.ndjson")
	rec := func(op, ts string, before, after string) string {
		return fmt.Sprintf(`{"table":"SALES.ORDERS","op_type":%q,"op_ts":"2026-01-02 03:04:%s.000000","pos":"0000000000000000%s00",`+
			`"primary_keys":["ID"],"before":%s,"after":%s}`, op, ts, ts, before, after) + "\n"
	}
	input := rec("I", "01", "null", `{"ID":1,"STATUS":"NEW","AMOUNT":10.50}`) +
		rec("I", "02", "null", `{"ID":2,"STATUS":"NEW","AMOUNT":3.00}`) +
		rec("U", "03", `{"ID":1}`, `{"ID":1,"STATUS":"SHIPPED"}`) +
		rec("U", "04", `{"ID":2}`, `{"ID":20,"STATUS":"MOVED"}`) +
		rec("D", "05", `{"ID":1}`, "null") +
		rec("I", "06", "null", `{"ID":3,"STATUS":"NEW","AMOUNT":7}`) +
		rec("U", "07", `{"ID":3}`, `{"ID":3,"STATUS":"PAID"}`)
	if err := os.WriteFile(gg, []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	ggLake := filepath.Join(dir, "gg")
	runBin(t, cdclake, "run", "--config", cfgFile, "--source", gg, "--sink", ggLake)
	q := fmt.Sprintf("SELECT ID, STATUS, AMOUNT, _cdc_op, _cdc_absent FROM read_parquet('%s') ORDER BY 1",
		filepath.Join(ggLake, "_current", "SALES.ORDERS", "*.parquet"))
	got, err := exec.Command(py, "-c", "import duckdb, sys; print(duckdb.sql(sys.argv[1]).fetchall())", q).CombinedOutput()
	if err != nil {
		t.Fatalf("reading the GoldenGate state table: %v\n%s", err, got)
	}
	if want := "[(3, 'PAID', '7', 'UPDATE', []), (20, 'MOVED', '3.00', 'UPDATE', [])]"; strings.TrimSpace(string(got)) != want {
		t.Errorf("GoldenGate state table:\n%s\nwant\n%s", got, want)
	}

	// A DELETE whose before image lacks key columns cannot be folded:
	// the run lands everything, then fails, naming it.
	out, err := exec.Command(cdclake, "run", "--config", cfgFile, "--sink", filepath.Join(dir, "samples"),
		"--source", filepath.Join(root, "testdata", "samples", "goldengate-bigdata.ndjson")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "offset 5: DELETE without its key: it does not carry key column PRODUCT_CODE") {
		t.Errorf("landing a keyless DELETE with state tables: %v, want a failure naming it:\n%s", err, out)
	}
}

// readFile returns a file's content.
func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// writeFile writes data to path and returns path.
func writeFile(t *testing.T, path, data string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestIcebergStateTables lands the first half of each PostgreSQL topic of
// the real capture into Iceberg tables with sink.current.interval and the
// tables' keys, then the whole capture: each run builds the tables'
// current-state tables and commits them to Iceberg as <table>__current,
// copy-on-write, and merge-on-read (the second run's builds merge, with
// deletion vectors).
// pyiceberg must read each as the files of its newest manifest, every
// snapshot as its version's files (testdata/e2e/current_iceberg.py), and
// the state must equal PostgreSQL's (infra/verify_real.py --current).
func TestIcebergStateTables(t *testing.T) {
	for _, tc := range []struct{ name, mode, lost string }{
		{"copy-on-write", "copy-on-write", ""},
		{"merge-on-read", "merge-on-read", "kept"},
		{"merge-on-read, lost builds not kept", "merge-on-read", "gone"},
	} {
		t.Run(tc.name, func(t *testing.T) { icebergStateTables(t, tc.mode, tc.lost) })
	}
}

// icebergStateTables is TestIcebergStateTables in a mode. lost "kept": a
// build between the two runs is committed to another catalog (a lost
// commit), the second run commits it first; "gone": two such builds, one
// merging into the other, whose manifest is then deleted: the second run
// writes every bucket whole instead.
func icebergStateTables(t *testing.T, mode, lost string) {
	py := python(t)
	cdclake := build(t, "github.com/cdclake/cdclake/cmd/cdclake")
	t.Setenv("CDCLAKE_LAKEHOUSE", build(t, "github.com/cdclake/cdclake/cmd/cdclake-lakehouse"))
	root := filepath.Join("..", "..")
	capture := filepath.Join(root, "testdata", "debezium-real")
	dir := t.TempDir()
	db := pgKeys(t, capture)
	lakeDir, catalog := filepath.Join(dir, "lake"), filepath.Join(dir, "catalog.db")
	cfg := "defaults:\n  table_format: iceberg\nsink:\n  iceberg:\n    catalog: sqlite://" + catalog +
		"\n  current:\n    interval: 1h\n    buckets: 4\n    mode: " + mode + "\n" + keyRoutes(db)
	cfgFile := filepath.Join(dir, "iceberg.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "in")
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	topics, err := filepath.Glob(filepath.Join(capture, "shop.*.ndjson"))
	if err != nil || len(topics) == 0 {
		t.Fatalf("no capture: %v", err)
	}
	check := func(when string) string {
		t.Helper()
		out, err := exec.Command(py, filepath.Join(root, "testdata", "e2e", "current_iceberg.py"), catalog, lakeDir,
			"--tables", strconv.Itoa(len(db))).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: current_iceberg.py: %v\n%s", when, err, out)
		}
		t.Logf("%s: %s", when, strings.TrimSpace(string(out)))
		return string(out)
	}
	// Each topic's second half lands from files of their own (a file
	// source that lands a grown file again rewrites the files it wrote).
	for i, part := range []string{"first half", "second half"} {
		writeHalf(t, topics, in, i)
		_, logged := runBin(t, cdclake, "run", "--config", cfgFile, "--source", filepath.Join(in, fmt.Sprintf("*.%d.ndjson", i)), "--sink", lakeDir)
		out := check(part)
		if merged := !strings.Contains(out, " 0 merged buckets"); i == 1 && lost != "gone" && merged != (lost == "kept") {
			t.Errorf("%s, %s: %s", mode, part, out)
		}
		if want := map[string]string{"kept": "committing the builds between first", "gone": "writing every bucket whole"}[lost]; i == 1 &&
			want != "" && !strings.Contains(logged, want) {
			t.Errorf("the second run did not say %q:\n%s", want, logged)
		}
		if i == 1 && lost == "kept" {
			sparkReads(t, catalog, lakeDir, 4)
		}
		if i == 0 && lost != "" {
			// A build whose commit is lost: rebuilt into 2 buckets, and
			// committed to another catalog. The next builds merge into
			// its files, which one snapshot cannot do from the table's
			// files: the run commits the lost build first.
			other := writeFile(t, filepath.Join(dir, "other.yaml"), strings.Replace(cfg, catalog, filepath.Join(dir, "other.db"), 1))
			runBin(t, cdclake, "snapshot", "--config", other, "--sink", lakeDir, "--rebuild", "--buckets", "2")
			if lost == "gone" {
				// The second half landed and merged into the lost build by
				// another lost build (both committed to the other catalog
				// only), and the first lost build's manifest gone (as when
				// more builds than the manifests kept lost their commits):
				// the run lands the same files again, and has no build to
				// commit first.
				writeHalf(t, topics, in, 1)
				runBin(t, cdclake, "run", "--config", other, "--source", filepath.Join(in, "*.1.ndjson"), "--sink", lakeDir)
				manifests, err := filepath.Glob(filepath.Join(lakeDir, "_current", "*", "_manifest", "*0002.json"))
				if err != nil || len(manifests) != len(db) {
					t.Fatalf("%d manifests of build 2, want %d: %v", len(manifests), len(db), err)
				}
				for _, m := range manifests {
					if err := os.Remove(m); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	// The same state built at once from the whole capture, in a plain
	// lake, equals PostgreSQL's; the Iceberg state built in two runs holds
	// its rows.
	plainDir := filepath.Join(dir, "plain")
	runBin(t, cdclake, "run", "--source", filepath.Join(capture, "shop.*.ndjson"), "--sink", plainDir,
		"--config", writeFile(t, filepath.Join(dir, "plain.yaml"), strings.Replace(cfg, "  table_format: iceberg\n", "  table_format: none\n", 1)))
	verifyCurrent(t, py, capture, plainDir)
	out, err := exec.Command(py, filepath.Join(root, "testdata", "e2e", "current_iceberg.py"), catalog, lakeDir,
		"--same-as", plainDir).CombinedOutput()
	if err != nil {
		t.Fatalf("current_iceberg.py --same-as: %v\n%s", err, out)
	}
	if lost == "kept" {
		// Written whole again: the files with deletion vectors go, and
		// their deletion vectors with them. (The rebuild folds the two
		// halves' changes by time, as two source partitions, not one after
		// the other: its rows need not be the plain lake's.)
		runBin(t, cdclake, "snapshot", "--config", cfgFile, "--sink", lakeDir, "--rebuild", "--buckets", "4")
		if out := check("rebuilt"); !strings.Contains(out, " 0 merged buckets") {
			t.Errorf("rebuilt: %s", out)
		}
	}
	// Maintaining every table of the catalog leaves the state tables be
	// (they are no datasets).
	compacted, _ := runBin(t, cdclake, "compact", "--config", cfgFile, "--sink", lakeDir, "--target-size", "1073741824")
	if strings.Contains(compacted, "__current") {
		t.Errorf("cdclake compact maintained a current-state table:\n%s", compacted)
	}
	check("after cdclake compact")
	// Expired to their newest snapshot, the state tables keep the files
	// of their newest manifests only.
	// Aged past the grace of files no snapshot names, those of the lost
	// build (merge-on-read) go too.
	state, err := filepath.Glob(filepath.Join(lakeDir, "_current", "*", "*.*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range state {
		if err := os.Chtimes(f, time.Now().Add(-2*time.Hour), time.Now().Add(-2*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	expired, _ := runBin(t, cdclake, "compact", "--config", cfgFile, "--sink", lakeDir, "--expire-older-than", "1ns", "--retain-last", "1")
	t.Log(strings.TrimSpace(expired))
	check("after the expiry")
	onDisk, err := filepath.Glob(filepath.Join(lakeDir, "_current", "*", "bucket-*.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	puffins, err := filepath.Glob(filepath.Join(lakeDir, "_current", "*", "deletes-*.puffin"))
	if err != nil {
		t.Fatal(err)
	}
	manifests, err := filepath.Glob(filepath.Join(lakeDir, "_current", "*", "_manifest", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	newest := map[string]string{}
	for _, m := range manifests {
		newest[filepath.Dir(m)] = max(newest[filepath.Dir(m)], m)
	}
	named, namedPuffins := 0, map[string]bool{}
	for _, m := range newest {
		var man struct {
			Files []string
			Merge []*struct {
				Files   []string
				Deletes []struct{ Puffin string }
			}
		}
		if err := json.Unmarshal([]byte(readFile(t, m)), &man); err != nil {
			t.Fatal(err)
		}
		for _, f := range man.Files {
			if f != "" {
				named++
			}
		}
		for _, mg := range man.Merge {
			if mg != nil {
				named += len(mg.Files)
				for _, d := range mg.Deletes {
					namedPuffins[d.Puffin] = true
				}
			}
		}
	}
	if len(onDisk) != named || len(puffins) != len(namedPuffins) {
		t.Errorf("after the expiry, %d state files and %d deletion vector files in the lake, the newest manifests name %d and %d",
			len(onDisk), len(puffins), named, len(namedPuffins))
	}
	// The landed tables themselves are as they were.
	if out, err := exec.Command(py, filepath.Join(root, "testdata", "e2e", "iceberg.py"), catalog, lakeDir).CombinedOutput(); err != nil {
		t.Fatalf("iceberg.py: %v\n%s", err, out)
	}
}

// sparkReads has Spark with Iceberg's runtime read the Iceberg tables of
// catalog over lakeDir (testdata/e2e/iceberg_spark.py: every table, every
// snapshot as of its offsets, state tables as their manifests count, the
// deletion vectors applied), timeTables of them having a time column
// Spark refuses. It needs CDCLAKE_TEST_SPARK_PYTHON (a Python with
// pyspark) and CDCLAKE_TEST_SPARK_JARS (Iceberg's Spark runtime and
// sqlite-jdbc), which the e2e sets (infra/e2e-real.sh); without them it
// says so and returns.
func sparkReads(t *testing.T, catalog, lakeDir string, timeTables int) {
	t.Helper()
	spark, jars := os.Getenv("CDCLAKE_TEST_SPARK_PYTHON"), os.Getenv("CDCLAKE_TEST_SPARK_JARS")
	if spark == "" || jars == "" {
		t.Log("Spark not read back: CDCLAKE_TEST_SPARK_PYTHON and CDCLAKE_TEST_SPARK_JARS are not set (make e2e sets them)")
		return
	}
	cmd := exec.Command(spark, filepath.Join("..", "..", "testdata", "e2e", "iceberg_spark.py"), catalog, lakeDir,
		"--jars", jars, "--time-tables", strconv.Itoa(timeTables))
	cmd.Env = append(os.Environ(), "TZ=UTC")
	out, err := cmd.CombinedOutput()
	var kept []string
	for _, l := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(l, "WARNING") && !strings.Contains(l, "WARN ") && !strings.HasPrefix(l, "Using Spark") &&
			!strings.HasPrefix(l, "Setting default log level") && !strings.HasPrefix(l, "To adjust logging") && l != "" {
			kept = append(kept, l)
		}
	}
	if err != nil {
		t.Fatalf("iceberg_spark.py: %v\n%s", err, strings.Join(kept, "\n"))
	}
	t.Log(strings.Join(kept, "\n"))
}

// TestDeltaTables lands the samples and the real PostgreSQL and MariaDB
// captures into Delta tables: delta-rs reads each table as exactly the
// rows of its files, with the offsets it records (testdata/e2e/delta.py);
// a second run adds nothing. PostgreSQL's tables get their keys, and the
// run builds their current-state tables, which delta-rs reads as their
// newest manifests' files. Time columns land as text (Delta has no time
// type), and the samples' columns of NULLs only as text too.
func TestDeltaTables(t *testing.T) {
	py := python(t)
	cdclake := build(t, "github.com/cdclake/cdclake/cmd/cdclake")
	root := filepath.Join("..", "..")
	capture := filepath.Join(root, "testdata", "debezium-real")
	keys := pgKeys(t, capture)
	for _, tc := range []struct {
		name, source, extra string
		current             int
	}{
		{"samples", filepath.Join(root, "testdata", "samples"), "", -1},
		{"postgres", filepath.Join(capture, "shop.*.ndjson"), "sink:\n  current:\n    interval: 1h\n    buckets: 4\n" + keyRoutes(keys), len(keys)},
		{"mariadb", filepath.Join(capture, "maria*.ndjson"), "", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			lakeDir, cfg := filepath.Join(dir, "lake"), filepath.Join(dir, "delta.yaml")
			if err := os.WriteFile(cfg, []byte("defaults:\n  table_format: delta\n"+tc.extra), 0o644); err != nil {
				t.Fatal(err)
			}
			check := func(versions int) string {
				t.Helper()
				args := []string{filepath.Join(root, "testdata", "e2e", "delta.py"), lakeDir, "--versions", strconv.Itoa(versions)}
				if tc.current >= 0 {
					args = append(args, "--current", strconv.Itoa(tc.current))
				}
				out, err := exec.Command(py, args...).CombinedOutput()
				if err != nil {
					t.Fatalf("delta.py: %v\n%s", err, out)
				}
				return strings.TrimSpace(string(out))
			}
			runBin(t, cdclake, "run", "--source", tc.source, "--sink", lakeDir, "--config", cfg)
			first := check(1)
			t.Log(first)
			runBin(t, cdclake, "run", "--source", tc.source, "--sink", lakeDir, "--config", cfg)
			if again := check(1); again != first {
				t.Errorf("landed again: %s, first %s", again, first)
			}
			// Compacted into small files, then those into one a folder,
			// the replaced compacted files expired: the same rows, each
			// compaction reading as its parent (delta.py).
			small, _ := runBin(t, cdclake, "compact", "--config", cfg, "--sink", lakeDir, "--target-size", "12288")
			large, _ := runBin(t, cdclake, "compact", "--config", cfg, "--sink", lakeDir, "--target-size", "1073741824",
				"--expire-older-than", "1ns", "--retain-last", "1")
			t.Logf("compact --target-size 12288:\n%scompact --target-size 1GiB --expire-older-than 1ns:\n%s", small, large)
			if !strings.Contains(small, " files into ") || !strings.Contains(large, "replaced files deleted") {
				t.Errorf("the compactions compacted or expired nothing:\n%s%s", small, large)
			}
			compacted := check(3)
			t.Log(compacted)
			if rows := func(s string) string { return strings.Join(strings.Fields(s)[:5], " ") }; rows(compacted) != rows(first) {
				t.Errorf("compacted: %s, landed: %s", compacted, first)
			}
		})
	}
}

// writeHalf writes the first (i 0) or second (i 1) half of the lines of
// each topic's capture file into folder in, as <topic>.<i>.ndjson: a file
// of its own, since a file source that lands a grown file again rewrites
// the files it wrote.
func writeHalf(t *testing.T, topics []string, in string, i int) {
	t.Helper()
	for _, f := range topics {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.SplitAfter(string(data), "\n")
		half := lines[:len(lines)/2]
		if i == 1 {
			half = lines[len(lines)/2:]
		}
		writeFile(t, filepath.Join(in, strings.TrimSuffix(filepath.Base(f), ".ndjson")+fmt.Sprintf(".%d.ndjson", i)), strings.Join(half, ""))
	}
}

// TestDeltaStateTablesExpire lands the real PostgreSQL capture into Delta
// tables in two halves, each run building the tables' current-state
// tables, which keep their newest version only (sink.delta.retain_last 1,
// expire_older_than 0s): after the second build the state tables'
// folders hold exactly the files their Delta tables name, which delta-rs
// reads as their newest manifests' files (delta.py --current).
func TestDeltaStateTablesExpire(t *testing.T) {
	py := python(t)
	cdclake := build(t, "github.com/cdclake/cdclake/cmd/cdclake")
	root := filepath.Join("..", "..")
	capture := filepath.Join(root, "testdata", "debezium-real")
	dir := t.TempDir()
	keys := pgKeys(t, capture)
	lakeDir, in := filepath.Join(dir, "lake"), filepath.Join(dir, "in")
	cfg := writeFile(t, filepath.Join(dir, "delta.yaml"), "defaults:\n  table_format: delta\nsink:\n  delta:\n    expire_older_than: 0s\n"+
		"    retain_last: 1\n  current:\n    interval: 1h\n    buckets: 4\n"+keyRoutes(keys))
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	topics, err := filepath.Glob(filepath.Join(capture, "shop.*.ndjson"))
	if err != nil || len(topics) == 0 {
		t.Fatalf("no capture: %v", err)
	}
	for i := range 2 {
		writeHalf(t, topics, in, i)
		runBin(t, cdclake, "run", "--config", cfg, "--source", filepath.Join(in, fmt.Sprintf("*.%d.ndjson", i)), "--sink", lakeDir)
	}
	out, err := exec.Command(py, filepath.Join(root, "testdata", "e2e", "delta.py"), lakeDir, "--current", strconv.Itoa(len(keys))).CombinedOutput()
	if err != nil {
		t.Fatalf("delta.py: %v\n%s", err, out)
	}
	t.Log(strings.TrimSpace(string(out)))
	replaced := 0
	for name := range keys {
		stateDir := filepath.Join(lakeDir, "_current", "shop.public."+name)
		onDisk, _ := filepath.Glob(filepath.Join(stateDir, "bucket-*.parquet"))
		var named []string
		logs, _ := filepath.Glob(filepath.Join(stateDir, "_delta_log", "*.json"))
		live := map[string]bool{}
		for _, l := range logs {
			data, _ := os.ReadFile(l)
			for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
				var a struct {
					Add    *struct{ Path string } `json:"add"`
					Remove *struct{ Path string } `json:"remove"`
				}
				_ = json.Unmarshal([]byte(line), &a)
				switch {
				case a.Add != nil:
					live[a.Add.Path] = true
				case a.Remove != nil:
					delete(live, a.Remove.Path)
					replaced++
				}
			}
		}
		for p := range live {
			named = append(named, filepath.Join(stateDir, p))
		}
		slices.Sort(named)
		if !slices.Equal(onDisk, named) {
			t.Errorf("%s: %d files on disk, the table names %d", stateDir, len(onDisk), len(named))
		}
	}
	if replaced == 0 {
		t.Error("no state table replaced a file: the expiry is untested")
	}
	t.Logf("%d replaced state files deleted", replaced)
}

// TestLakehouseGrownInput: an input file landed into a lakehouse table
// (Iceberg, Delta), landed again unchanged, then landed again after it
// grew. The file source reads it from its start each time; the rows the
// table holds (below the offset it records) are not landed again, so the
// replay changes no object, and the grown input's rows past it land in
// files of their own, never over the files the table holds. The table
// then reads as the whole input landed at once, every row once.
func TestLakehouseGrownInput(t *testing.T) {
	py := python(t)
	cdclake := build(t, "github.com/cdclake/cdclake/cmd/cdclake")
	t.Setenv("CDCLAKE_LAKEHOUSE", build(t, "github.com/cdclake/cdclake/cmd/cdclake-lakehouse"))
	root := filepath.Join("..", "..")
	whole, err := os.ReadFile(filepath.Join(root, "testdata", "debezium-real", "shop.public.events.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(whole, []byte("\n"))
	for _, format := range []string{"iceberg", "delta"} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			// land lands input into the lake in folder name and returns
			// the run's summary and what the table format's reader says
			// of the lake.
			land := func(name, input string) (summary, read string) {
				t.Helper()
				lakeDir, catalog := filepath.Join(dir, name), filepath.Join(dir, name+".db")
				cfg := "defaults:\n  table_format: " + format + "\n"
				if format == "iceberg" {
					cfg += "sink:\n  iceberg:\n    catalog: sqlite://" + catalog + "\n"
				}
				stdout, stderr := runBin(t, cdclake, "run", "--source", input, "--sink", lakeDir, "--config", writeFile(t, filepath.Join(dir, name+".yaml"), cfg))
				all := stdout + stderr
				args := []string{filepath.Join(root, "testdata", "e2e", "delta.py"), lakeDir}
				if format == "iceberg" {
					args = []string{filepath.Join(root, "testdata", "e2e", "iceberg.py"), catalog, lakeDir}
				}
				out, err := exec.Command(py, args...).CombinedOutput()
				if err != nil {
					t.Fatalf("%s: %v\n%s", filepath.Base(args[0]), err, out)
				}
				i := strings.Index(all, "\nmessages ")
				if i < 0 {
					t.Fatalf("no summary:\n%s", all)
				}
				return all[i+1:], strings.Join(strings.Fields(string(out))[:5], " ")
			}
			input := writeFile(t, filepath.Join(dir, "shop.public.events.ndjson"), string(bytes.Join(lines[:150], nil)))
			_, first := land("lake", input)
			before := listFiles(t, filepath.Join(dir, "lake"))
			summary, again := land("lake", input)
			if after := listFiles(t, filepath.Join(dir, "lake")); !slices.Equal(after, before) || again != first {
				t.Errorf("the replay: %d objects, %s; before it %d, %s", len(after), again, len(before), first)
			}
			if !strings.Contains(summary, "rows 0,") || !strings.Contains(summary, "in their tables already ") {
				t.Errorf("the replay landed rows, or did not say it passed them over:\n%s", summary)
			}
			writeFile(t, input, string(whole))
			summary, grown := land("lake", input)
			for _, f := range before {
				if strings.HasSuffix(f, ".parquet") {
					if _, err := os.Stat(filepath.Join(dir, "lake", f)); err != nil {
						t.Errorf("a file the table held: %v", err)
					}
				}
			}
			_, once := land("once", filepath.Join(root, "testdata", "debezium-real", "shop.public.events.ndjson"))
			t.Logf("first %s; grown %s; the whole input at once %s\n%s", first, grown, once, summary)
			if grown != once || grown == first {
				t.Errorf("the grown input landed: %s, the whole input landed at once: %s (the first part: %s)", grown, once, first)
			}
		})
	}
}
