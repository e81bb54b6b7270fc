package config

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

var update = flag.Bool("update", false, "rewrite docs/configuration.md")

// TestEveryKeyIsDocumented: every key of the Config type has its doc and
// example, and no doc is left for a key that is gone.
func TestEveryKeyIsDocumented(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Keys() {
		seen[k.Path] = true
		if k.Doc == "" {
			t.Errorf("%s: no doc in keyDocs", k.Path)
		}
		if k.Example == "" && k.Path != "routes" {
			t.Errorf("%s: no example in keyDocs", k.Path)
		}
	}
	for path := range keyDocs {
		if !seen[path] {
			t.Errorf("keyDocs documents %s, which is no key", path)
		}
	}
}

// TestExamplesAreValid: each key's example is a value the key accepts.
func TestExamplesAreValid(t *testing.T) {
	t.Setenv("POD_NAME", "cdclake-0")
	for _, k := range Keys() {
		if k.Example == "" {
			continue
		}
		doc := nest(k.Path, k.Example)
		if k.Path == "routes[].match" {
			doc = "routes:\n  - match: " + k.Example
		}
		if strings.HasPrefix(k.Path, "routes[]") && k.Path != "routes[].match" {
			doc = "routes:\n  - match: \"X.*\"\n" + indent(nest(strings.TrimPrefix(k.Path, "routes[]."), k.Example), "    ")
		}
		if strings.HasPrefix(k.Path, "source.kafka.") {
			doc += "\n" + nest("source.kafka.group", "g") + "\n" + nest("source.kafka.brokers", "[b:9092]") + "\n" + nest("source.kafka.topics", "[t]")
			if strings.HasPrefix(k.Path, "source.kafka.sasl.") {
				doc += "\n" + nest("source.kafka.sasl.mechanism", "PLAIN") + "\n" + nest("source.kafka.sasl.username", "u")
				if !strings.HasSuffix(k.Path, "password_env") && !strings.HasSuffix(k.Path, "password_file") {
					doc += "\n" + nest("source.kafka.sasl.password_env", "P")
				}
			}
		}
		if strings.HasPrefix(k.Path, "source.schema_registry.") && k.Path != "source.schema_registry.url" {
			doc += "\n" + nest("source.schema_registry.url", "http://r:8081")
			if strings.HasSuffix(k.Path, "username") {
				doc += "\n" + nest("source.schema_registry.password_env", "P")
			}
			if strings.HasSuffix(k.Path, "password_env") || strings.HasSuffix(k.Path, "password_file") {
				doc += "\n" + nest("source.schema_registry.username", "u")
			}
			if strings.HasSuffix(k.Path, "cert_file") {
				doc += "\n" + nest("source.schema_registry.key_file", "k")
			}
			if strings.HasSuffix(k.Path, "key_file") {
				doc += "\n" + nest("source.schema_registry.cert_file", "c")
			}
		}
		if strings.HasSuffix(k.Path, "table_format") {
			doc += "\n" + nest("sink.iceberg.catalog", "sqlite:///c.db")
		}
		if k.Path == "sink.iceberg.expire_older_than" {
			doc = "sink:\n  iceberg:\n    compact_interval: 1h\n    expire_older_than: " + k.Example
		}
		if k.Path == "source.kafka.tls.cert_file" || k.Path == "source.kafka.tls.key_file" {
			doc += "\n" + nest("source.kafka.tls.cert_file", "c") + "\n" + nest("source.kafka.tls.key_file", "k")
		}
		doc = mergeYAML(t, doc)
		if _, err := load(t, doc); err != nil {
			t.Errorf("%s: example %s: %v\n%s", k.Path, k.Example, err, doc)
		}
	}
}

// nest writes value under a dotted key path as YAML.
func nest(path, value string) string {
	parts := strings.Split(path, ".")
	var b strings.Builder
	for i, p := range parts {
		b.WriteString(strings.Repeat("  ", i) + p + ":")
		if i < len(parts)-1 {
			b.WriteString("\n")
		}
	}
	return b.String() + " " + value
}

func indent(s, by string) string { return by + strings.ReplaceAll(s, "\n", "\n"+by) }

// mergeYAML joins YAML documents whose top-level keys repeat.
func mergeYAML(t *testing.T, doc string) string {
	var merged map[string]any
	for _, part := range strings.Split(doc, "\nsource:") {
		if !strings.HasPrefix(part, "source:") && merged != nil {
			part = "source:" + part
		}
		var m map[string]any
		if err := yaml.Unmarshal([]byte(part), &m); err != nil {
			t.Fatalf("%v\n%s", err, part)
		}
		merged = deepMerge(merged, m)
	}
	out, err := yaml.Marshal(merged)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func deepMerge(a, b map[string]any) map[string]any {
	if a == nil {
		return b
	}
	for k, v := range b {
		if am, ok := a[k].(map[string]any); ok {
			if bm, ok := v.(map[string]any); ok {
				a[k] = deepMerge(am, bm)
				continue
			}
		}
		a[k] = v
	}
	return a
}

// TestConfigurationDoc: docs/configuration.md is what Reference writes
// (go test ./config -run TestConfigurationDoc -update rewrites it).
func TestConfigurationDoc(t *testing.T) {
	path := filepath.Join("..", "docs", "configuration.md")
	want := Reference()
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s differs from config.Keys: run make docs", path)
	}
}
