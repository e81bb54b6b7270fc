package pipelines

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cdclake/cdclake/handlers/batch"
	"github.com/prometheus/client_golang/prometheus"
)

// TestEveryMetricIsDocumented: docs/operations.md lists every metric the
// pipeline registers, and no other cdclake_ metric.
func TestEveryMetricIsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := newMetrics(reg, newTableLabels(1, func(string) bool { return false }))
	m.fileWritten(batch.WrittenFile{Table: "t", Cause: batch.CauseRows}) // a series in every vector
	m.deadLetters.WithLabelValues("convert", "type_mismatch").Inc()
	reg.MustRegister(BuildInfo("v", "c"))
	names := map[string]bool{}
	descs := make(chan *prometheus.Desc, 100)
	collector{}.Describe(descs)
	close(descs)
	fq := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	for d := range descs {
		names[fq.FindStringSubmatch(d.String())[1]] = true
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		names[f.GetName()] = true
	}
	for name := range names {
		if !strings.Contains(string(doc), "| `"+name+"` |") {
			t.Errorf("docs/operations.md does not list %s", name)
		}
	}
	for _, m := range regexp.MustCompile("(?m)^\\| `(cdclake_[a-z_]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
		if !names[m[1]] {
			t.Errorf("docs/operations.md lists %s, which is not registered", m[1])
		}
	}
}
