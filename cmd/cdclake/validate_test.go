package main

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// problems returns the problem lines of a report ("  …" after "N
// problems:").
func problems(report string) []string {
	var out []string
	in := false
	for _, line := range strings.Split(report, "\n") {
		switch {
		case strings.Contains(line, " problem") && strings.HasSuffix(line, ":"):
			in = true
		case in && strings.HasPrefix(line, "  "):
			out = append(out, strings.TrimPrefix(line, "  "))
		default:
			in = false
		}
	}
	return out
}

// command runs cdclake in this process and returns its status, stdout and
// stderr.
func inProcess(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	rc := run(args, &stdout, &stderr)
	return rc, stdout.String(), stderr.String()
}

// TestValidateRejectsWhatRunRejects feeds validate and run the same broken
// configs: both refuse each one, with the same problems, all of them in one
// report, each naming its key.
func TestValidateRejectsWhatRunRejects(t *testing.T) {
	t.Setenv("TMPDIR", os.Getenv("TMPDIR")) // run points it into a file:// lake
	dir := t.TempDir()
	good := filepath.Join(dir, "in.ndjson")
	if err := os.WriteFile(good, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pem := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(pem, []byte("no certificate here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := "source:\n  url: " + good + "\n"
	sink := "sink:\n  url: " + filepath.Join(dir, "lake") + "\n"
	both := src + sink
	cases := []struct {
		name, yaml string
		args       []string
		want       []string // each in the report
	}{
		{"kafka URL with a typo and a password", "source:\n  url: kafka://u:pw@broker:9092/t?grup=g\n" + sink,
			nil, []string{"credentials do not belong in the URL"}},
		{"kafka URL with a typo", "source:\n  url: kafka://broker:9092/t?grup=g\n" + sink,
			nil, []string{`source.url: kafka source: unknown parameter "grup"`, "source.url: kafka source: group: required"}},
		{"sink scheme not linked in", src + "sink:\n  url: s4://bucket\n", nil, []string{`sink.url: scheme "s4" is not one of`}},
		{"no sink", src, nil, []string{"sink.url: required"}},
		{"no source", sink, nil, []string{"source: required"}},
		{"nothing at all", "{}\n", nil, []string{"source: required", "sink.url: required"}},
		{"kafka start", "source:\n  url: kafka://b:9092/t?group=g&start=middle\n" + sink, nil, []string{`start: "middle"`}},
		{"kafka sasl mechanism", "source:\n  url: kafka://b:9092/t?group=g&sasl=GSSAPI\n" + sink, nil, []string{`sasl: "GSSAPI"`}},
		{"kafka sasl without user", "source:\n  url: kafka://b:9092/t?group=g&sasl=PLAIN&sasl_password_env=P\n" + sink, nil,
			[]string{"sasl_user: required with sasl"}},
		{"kafka password in the URL", "source:\n  url: kafka://b:9092/t?group=g&sasl_password=hunter2\n" + sink, nil,
			[]string{"a secret does not belong in the URL"}},
		{"kafka cert without key", "source:\n  url: kafka://b:9092/t?group=g&tls_cert=c.pem\n" + sink, nil,
			[]string{"tls_cert: goes with tls_key"}},
		{"kafka fetch size", "source:\n  url: kafka://b:9092/t?group=g&fetch_max_bytes=0\n" + sink, nil, []string{"fetch_max_bytes"}},
		{"kafka regex", "source:\n  url: kafka://b:9092/(shop?group=g&regex=true\n" + sink, nil, []string{"is not a regular expression"}},
		{"kafka section without group", "source:\n  kafka:\n    brokers: [b:9092]\n    topics: [t]\n    sasl:\n      mechanism: XYZ\n" + sink, nil,
			[]string{"source.kafka.group: required", `source.kafka.sasl.mechanism: "XYZ"`}},
		{"kafka section and url", "source:\n  url: kafka://b:9092/t?group=g\n  kafka:\n    group: g\n" + sink, nil,
			[]string{"source: url and kafka both say where to read"}},
		{"kafka section start and cert", "source:\n  kafka:\n    brokers: [b:9092]\n    topics: [t]\n    group: g\n    start: never\n" +
			"    tls:\n      cert_file: c.pem\n" + sink, nil,
			[]string{`source.kafka.start: "never"`, "source.kafka.tls.cert_file: goes with source.kafka.tls.key_file"}},
		{"kafka CA without a certificate", "source:\n  url: kafka://b:9092/t?group=g&tls_ca=" + pem + "\n" + sink, nil,
			[]string{"source.url: tls_ca: " + pem + " holds no PEM certificate"}},
		{"source scheme", "source:\n  url: ftp://host/changes.ndjson\n" + sink, nil, []string{`source.url: scheme "ftp"`}},
		{"s3 parameter", src + "sink:\n  url: s3://b?region=x&colour=blue\n", nil, []string{`sink.url: unknown query parameter "colour"`}},
		{"file parameter", src + "sink:\n  url: file://" + dir + "/lake?bogus=1\n", nil, []string{`sink.url: invalid query parameter "bogus"`}},
		{"credentials in the sink", src + "sink:\n  url: s3://key:secret@bucket\n", nil, []string{"sink.url: credentials do not belong in the URL"}},
		{"dead letters in S3", both + "  dead_letters: s3://b/dlq\n", nil, []string{`sink.dead_letters: kafka topic: scheme "s3"`}},
		{"dead letters to two topics", both + "  dead_letters: kafka://b:9092/a,b\n", nil, []string{"sink.dead_letters: kafka topic: one topic"}},
		{"max dead letters", both + "  max_dead_letters: many\n", nil, []string{`sink.max_dead_letters: line`, `bad limit "many"`}},
		{"compression and layout", both + "defaults:\n  compression: brotli\n  layout: wide\n", nil,
			[]string{"defaults.compression:", `defaults.layout: unknown layout "wide"`}},
		{"route without match", both + "routes:\n  - layout: flat\n", nil, []string{"routes[0].match: required"}},
		{"duplicate route", both + "routes:\n  - match: A.*\n  - match: A.*\n", nil, []string{`routes[1].match: "A.*" is already the match of routes[0]`}},
		{"bad type", both + "routes:\n  - match: A.*\n    types:\n      X: nonsense\n", nil, []string{"routes[0].types.X:"}},
		{"bad path", both + "defaults:\n  path: \"{nope}/x\"\n", nil, []string{"defaults.path:"}},
		{"bad format", "source:\n  url: " + good + "\n  format: avro\n" + sink, nil, []string{"source.format:"}},
		{"unknown key and a small bound", both + "defaults:\n  compresion: zstd\nbatch:\n  max_buffered_bytes: 12\n", nil,
			[]string{"defaults.compresion: unknown key (line", "batch.max_buffered_bytes: must be at least 1MiB"}},
		{"log and listen", both + "log:\n  format: xml\nobservability:\n  listen: nonsense\n", nil,
			[]string{`log.format: "xml"`, `observability.listen: "nonsense" is not host:port or off`}},
		{"unset variable", src + "sink:\n  url: ${CDCLAKE_TEST_SURELY_UNSET}\n", nil,
			[]string{"sink.url: ${CDCLAKE_TEST_SURELY_UNSET}: the environment variable CDCLAKE_TEST_SURELY_UNSET is not set"}},
		{"registry with credentials in its URL", "source:\n  url: " + good + "\n  schema_registry:\n    url: https://u:p@registry:8081\n" + sink, nil,
			[]string{"source.schema_registry.url: credentials do not belong in the URL"}},
		{"registry username without password", "source:\n  url: " + good + "\n  schema_registry:\n    url: http://registry:8081\n    username: u\n" + sink, nil,
			[]string{"source.schema_registry: give exactly one of password_env and password_file"}},
		{"registry file missing", "source:\n  url: " + good + "\n  schema_registry:\n    url: " + dir + "/schemas.json\n" + sink, nil,
			[]string{"source.schema_registry:"}},
		{"until-caught-up on files", both, []string{"--until-caught-up"}, []string{"--until-caught-up: is for Kafka sources"}},
		{"metrics address flag", both, []string{"--metrics-addr", "9464"}, []string{`--metrics-addr: "9464" is not host:port or off`}},
		{"not YAML", "source: [unclosed\n", nil, []string{"yaml:"}},
		{"every phase at once", "source:\n  url: kafka://b:9092/t?grup=g\nsink:\n  url: s4://b\n  max_dead_letters: -1\ndefaults:\n  max_rows: lots\n  compression: brotli\n", nil,
			[]string{`unknown parameter "grup"`, `scheme "s4"`, "sink.max_dead_letters:", `defaults.max_rows: "lots" is not an integer`, "defaults.compression:"}},
	}
	if len(cases) < 30 {
		t.Fatalf("%d cases, want 30 or more", len(cases))
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(dir, "c"+string(rune('a'+i%26))+strings.Repeat("x", i/26)+".yaml")
			if err := os.WriteFile(file, []byte(c.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			vrc, vout, verr := inProcess(append([]string{"validate", file}, c.args...)...)
			rrc, _, rerr := inProcess(append([]string{"run", "--config", file, "--metrics-addr", "off"}, c.args...)...)
			if c.name == "metrics address flag" {
				rrc, _, rerr = inProcess(append([]string{"run", "--config", file}, c.args...)...)
			}
			if vrc != exitFailed || rrc != exitFailed {
				t.Fatalf("validate exited %d, run %d; want %d from both\nvalidate: %s%s\nrun: %s", vrc, rrc, exitFailed, vout, verr, rerr)
			}
			vp, rp := problems(verr), problems(rerr)
			if len(vp) == 0 || !slices.Equal(vp, rp) {
				t.Errorf("validate and run report different problems:\nvalidate:\n%s\nrun:\n%s", verr, rerr)
			}
			for _, w := range c.want {
				if !strings.Contains(verr, w) {
					t.Errorf("missing %q in:\n%s", w, verr)
				}
			}
			for _, p := range vp {
				if !regexp.MustCompile(`^(--)?[a-z_]+[a-z_.\[\]0-9A-Z${}-]*:|^/.*\.yaml: yaml:`).MatchString(p) {
					t.Errorf("problem %q does not start with its key", p)
				}
			}
		})
	}
}

// TestMissingSecretsWarnInValidate: a secret that is not there (an unset
// variable, a certificate not mounted here) is a warning naming its key in
// validate, and an error in run.
func TestMissingSecretsWarnInValidate(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ yaml, key string }{
		{"source:\n  url: kafka://b:9092/t?group=g&sasl=SCRAM-SHA-512&sasl_user=u&sasl_password_env=CDCLAKE_TEST_UNSET_PW\n",
			"source.url: sasl_password_env: the environment variable CDCLAKE_TEST_UNSET_PW is not set"},
		{"source:\n  kafka:\n    brokers: [b:9092]\n    topics: [t]\n    group: g\n    tls:\n      ca_file: /no/such/ca.pem\n",
			"source.kafka.tls.ca_file: /no/such/ca.pem does not exist"},
		{"source:\n  url: in.ndjson\n  schema_registry:\n    url: http://registry:8081\n    username: u\n    password_env: CDCLAKE_TEST_UNSET_PW\n",
			"source.schema_registry.password_env: the environment variable CDCLAKE_TEST_UNSET_PW is not set"},
		{"source:\n  url: in.ndjson\nsink:\n  dead_letters: kafka://b:9092/dlq?sasl=PLAIN&sasl_user=u&sasl_password_file=/no/pw\n",
			"sink.dead_letters: sasl_password_file: /no/pw does not exist"},
	} {
		file := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(file, []byte(c.yaml+"sink:\n  url: mem://\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(c.yaml, "dead_letters") {
			if err := os.WriteFile(file, []byte(strings.Replace(c.yaml, "sink:\n", "sink:\n  url: mem://\n", 1)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		vrc, vout, verr := inProcess("validate", file)
		if vrc != exitOK || !strings.Contains(vout, "warning: "+c.key+" (needed at run time)") || !strings.Contains(vout, ": ok") {
			t.Errorf("validate: %d\n%s%s\nwant ok and the warning %q", vrc, vout, verr, c.key)
		}
		rrc, _, rerr := inProcess("run", "--config", file, "--metrics-addr", "off")
		if rrc != exitFailed || !slices.Contains(problems(rerr), c.key) {
			t.Errorf("run: %d\n%s\nwant the problem %q", rrc, rerr, c.key)
		}
	}
}

// TestValidateAcceptsWhatRunRuns: configs that run lands with, validate
// calls ok; the file may come as an argument or with --config.
func TestValidateAcceptsWhatRunRuns(t *testing.T) {
	t.Setenv("TMPDIR", os.Getenv("TMPDIR"))
	t.Setenv("CDCLAKE_TEST_LAKE", filepath.Join(t.TempDir(), "lake"))
	samples := filepath.Join("..", "..", "testdata", "samples")
	for _, yaml := range []string{
		"source:\n  url: " + samples + "\nsink:\n  url: ${CDCLAKE_TEST_LAKE}\n",
		"source:\n  url: " + samples + "\nsink:\n  url: ${CDCLAKE_TEST_LAKE}/${SUB:-b}\n  max_dead_letters: 1%\nlog:\n  format: json\n",
	} {
		file := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"validate", file}, {"validate", "--config", file}} {
			if rc, out, errs := inProcess(args...); rc != exitOK || !strings.Contains(out, file+": ok") {
				t.Errorf("%v: %d\n%s%s", args, rc, out, errs)
			}
		}
		if rc, out, errs := inProcess("run", "--config", file); rc != exitOK || !strings.Contains(out, "== cdclake summary ==") {
			t.Errorf("run: %d\n%s%s", rc, out, errs)
		}
	}
}

// TestDocumentedConfigsAreValid: every YAML example of the README and the
// docs, and every config under config/ and testdata/e2e/, passes validate
// without the secrets it names; an example that is a fragment (no source
// or sink) gets them from the command line.
func TestDocumentedConfigsAreValid(t *testing.T) {
	root := filepath.Join("..", "..")
	var examples []struct{ name, text string }
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	for _, doc := range append([]string{filepath.Join(root, "README.md")}, docs...) {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(data), -1) {
			examples = append(examples, struct{ name, text string }{filepath.Base(doc) + "#" + string(rune('0'+i)), m[1]})
		}
	}
	files, _ := filepath.Glob(filepath.Join(root, "config", "*.yaml"))
	more, _ := filepath.Glob(filepath.Join(root, "testdata", "e2e", "*.yaml"))
	// The configs of the Kubernetes manifests, with what their pods'
	// environment gives them.
	pods, _ := filepath.Glob(filepath.Join(root, "deploy", "kubernetes", "*", "cdclake.yaml"))
	if len(pods) < 2 {
		t.Fatalf("found %d configs under deploy/kubernetes", len(pods))
	}
	t.Setenv("E2E_TOPIC", "t")
	t.Setenv("E2E_GROUP", "g")
	t.Setenv("E2E_SINK", "mem://")
	for _, f := range append(append(files, more...), pods...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		examples = append(examples, struct{ name, text string }{f, string(data)})
	}
	if len(examples) < 5 {
		t.Fatalf("found %d examples", len(examples))
	}
	dir := t.TempDir()
	for i, ex := range examples {
		file := filepath.Join(dir, "ex"+string(rune('a'+i))+".yaml")
		if err := os.WriteFile(file, []byte(ex.text), 0o644); err != nil {
			t.Fatal(err)
		}
		args := []string{"validate", file}
		if !regexp.MustCompile(`(?m)^source:\n(  .*\n)*  (url|kafka):`).MatchString(ex.text) {
			args = append(args, "--source", filepath.Join(root, "testdata", "samples"))
		}
		if !regexp.MustCompile(`(?m)^sink:\n(  .*\n)*  url:`).MatchString(ex.text) {
			args = append(args, "--sink", "mem://")
		}
		if rc, out, errs := inProcess(args...); rc != exitOK {
			t.Errorf("%s: validate exited %d:\n%s%s\n%s", ex.name, rc, out, errs, ex.text)
		}
	}
}

// TestProbe: cdclake probe asks a running instance's endpoint, found in
// its config (with the environment's ${VAR}s), and exits 0 only on 200.
func TestProbe(t *testing.T) {
	ready := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" && !ready {
			http.Error(w, "sink: failed: down", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok "+r.URL.Path)
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	t.Setenv("PROBE_PORT", port)
	file := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(file, []byte("observability:\n  listen: \":${PROBE_PORT}\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if rc, out, errs := inProcess("probe", "--config", file, "readyz"); rc != exitOK || out != "ok /readyz\n" {
		t.Errorf("ready: %d %q %q", rc, out, errs)
	}
	ready = false
	if rc, out, _ := inProcess("probe", "--config", file, "readyz"); rc != exitFailed || !strings.Contains(out, "sink: failed") {
		t.Errorf("not ready: %d %q", rc, out)
	}
	if rc, _, _ := inProcess("probe", "--metrics-addr", "127.0.0.1:"+port, "healthz"); rc != exitOK {
		t.Errorf("healthz by address: %d", rc)
	}
	if rc, _, _ := inProcess("probe", "--metrics-addr", "127.0.0.1:1", "healthz"); rc != exitFailed {
		t.Errorf("nothing listening: %d", rc)
	}
	if rc, _, _ := inProcess("probe", "livez"); rc != exitUsage {
		t.Errorf("an unknown probe: %d", rc)
	}
}

// TestValidateOpensTheCatalog: validate --check-connections starts the
// lakehouse committer and opens the Iceberg catalog of a config with
// committed tables; a catalog it cannot open is a problem under its key.
func TestValidateOpensTheCatalog(t *testing.T) {
	t.Setenv("CDCLAKE_LAKEHOUSE", build(t, "github.com/cdclake/cdclake/cmd/cdclake-lakehouse"))
	dir := t.TempDir()
	config := func(name, catalog string) string {
		f := filepath.Join(dir, name)
		yaml := fmt.Sprintf("source:\n  url: %s\nsink:\n  url: file://%s\n  iceberg:\n    catalog: %s\ndefaults:\n  table_format: iceberg\n",
			filepath.Join(dir, "in.ndjson"), filepath.Join(dir, "lake"), catalog)
		if err := os.WriteFile(f, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	catalog := filepath.Join(dir, "catalog.db")
	good := config("good.yaml", "sqlite://"+catalog)
	if rc, out, errs := inProcess("validate", good, "--check-connections"); rc != exitOK || !strings.Contains(out, "every connection works") {
		t.Errorf("validate --check-connections: %d\n%s%s", rc, out, errs)
	}
	if _, err := os.Stat(catalog); err != nil {
		t.Errorf("the catalog's database was not opened: %v", err)
	}
	bad := config("bad.yaml", "sqlite://"+filepath.Join(dir, "no-such-dir", "catalog.db"))
	rc, out, errs := inProcess("validate", bad, "--check-connections")
	if rc != exitFailed {
		t.Fatalf("validate --check-connections of a catalog that cannot open: %d\n%s%s", rc, out, errs)
	}
	if p := problems(errs); !slices.ContainsFunc(p, func(s string) bool { return strings.HasPrefix(s, "sink.iceberg.catalog: ") }) {
		t.Errorf("no problem under sink.iceberg.catalog in:\n%s", errs)
	}
}
