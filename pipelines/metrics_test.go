package pipelines_test

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cdclake/cdclake/config"
	"github.com/cdclake/cdclake/pipelines"
	"github.com/cdclake/cdclake/pipelines/source"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// scrape returns every sample of reg as "name{label=value,…}" → value.
func scrape(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			name := f.GetName()
			if len(labels) > 0 {
				name += "{" + strings.Join(labels, ",") + "}"
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[name] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[name] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[name+"_count"] = float64(m.GetHistogram().GetSampleCount())
				out[name+"_sum"] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

// allSamples returns the bundled sample streams, one after the other.
func allSamples(tb testing.TB) []byte {
	tb.Helper()
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "samples", "*.ndjson"))
	var all []byte
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		all = append(all, data...)
	}
	return all
}

// sum adds the samples of a metric whose name is name, over its labels.
func sum(samples map[string]float64, name string) float64 {
	var n float64
	for k, v := range samples {
		if k == name || strings.HasPrefix(k, name+"{") {
			n += v
		}
	}
	return n
}

// TestMetricsFollowTheLanding lands the bundled samples with a bad line
// and checks that the metrics say what the summary says: messages read,
// events by kind, rows and files by table and cause, dead letters by
// class, memory back to zero.
func TestMetricsFollowTheLanding(t *testing.T) {
	dir := t.TempDir()
	all := append(allSamples(t), []byte("this is not JSON\n")...)
	in := filepath.Join(dir, "all.ndjson")
	if err := os.WriteFile(in, all, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Defaults.MaxRows = 2
	cfg.Observability.TableLabels = 3
	src, err := source.OpenFiles(in, 16, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	reg := pipelines.NewRegistry("v-test", "c0ffee")
	_, p := landSource(t, cfg, src, pipelines.WithMetrics(reg))
	m := scrape(t, reg)
	st := p.Stats()
	tables := p.Batcher().Stats()
	var rows, files, bytes int64
	for _, ts := range tables {
		rows, files, bytes = rows+ts.Rows, files+ts.Files, bytes+ts.Bytes
	}
	for _, c := range []struct {
		name string
		got  float64
		want int64
	}{
		{"messages read", m["cdclake_messages_read_total"], st.Messages.Load()},
		{"bytes read", m["cdclake_read_bytes_total"], st.Bytes.Load()},
		{"dml events", m["cdclake_events_total{kind=dml}"], st.Rows.Load()}, // every decoded row landed
		{"rows landed", sum(m, "cdclake_rows_landed_total"), rows},
		{"files by table", sum(m, "cdclake_table_files_written_total"), files},
		{"files by cause", sum(m, "cdclake_files_written_total"), files},
		{"bytes written", sum(m, "cdclake_written_bytes_total"), bytes},
		{"file sizes", m["cdclake_file_size_bytes_count"], files},
		{"dead letters", sum(m, "cdclake_dead_letters_total"), st.DeadLetters.Load()},
		{"not JSON", m["cdclake_dead_letters_total{class=not_json,stage=unwrap}"], 1},
		{"open files", m["cdclake_open_files"], 0},
		{"buffered", m["cdclake_buffered_bytes"], 0},
		{"bound", m["cdclake_max_buffered_bytes"], int64(cfg.Batch.MaxBufferedBytes)},
		{"build info", m["cdclake_build_info{commit=c0ffee,go_version="+goVersion(m)+",version=v-test}"], 1},
	} {
		if int64(c.got) != c.want {
			t.Errorf("%s: metric %v, want %d", c.name, c.got, c.want)
		}
	}
	if m["cdclake_files_written_total{cause=rows}"] == 0 || m["cdclake_files_written_total{cause=shutdown}"] == 0 {
		t.Errorf("files by cause: rows %v, shutdown %v", m["cdclake_files_written_total{cause=rows}"], m["cdclake_files_written_total{cause=shutdown}"])
	}
	labelled := 0
	for k := range m {
		if strings.HasPrefix(k, "cdclake_rows_landed_total{") && !strings.Contains(k, "table=_") {
			labelled++
		}
	}
	if labelled != 3 || m["cdclake_rows_landed_total{table=_other}"] == 0 || m["cdclake_rows_landed_total{table=_ddl}"] == 0 {
		t.Errorf("table labels: %d of their own (want 3), _other %v, _ddl %v", labelled,
			m["cdclake_rows_landed_total{table=_other}"], m["cdclake_rows_landed_total{table=_ddl}"])
	}
	if m["process_cpu_seconds_total"] == 0 && m["go_goroutines"] == 0 {
		t.Error("no Go or process collector")
	}
	if got := pipelines.DeadLetterSummary(p.DeadLetters()); got != "unwrap/not_json 1" {
		t.Errorf("dead letter summary %q", got)
	}
}

func goVersion(m map[string]float64) string {
	for k := range m {
		if i := strings.Index(k, "go_version="); i >= 0 && strings.HasPrefix(k, "cdclake_build_info") {
			return strings.SplitN(k[i+len("go_version="):], ",", 2)[0]
		}
	}
	return ""
}

// unbounded is a source that says it has no end.
type unbounded struct{ source.Source }

func (unbounded) Unbounded() bool { return true }

// TestDeadLetterLimit: past a count of sink.max_dead_letters a run with an
// end lands all of its input and Run says the limit was passed; a run
// that follows its source stops reading and lands what it read.
func TestDeadLetterLimit(t *testing.T) {
	var lines []string
	for i := range 200 {
		if i%10 == 3 {
			lines = append(lines, "not JSON")
			continue
		}
		lines = append(lines, `{"qual_table":"S.T","op_type":"INSERT","op_ts":"2026-07-13T04:01:01Z","xid":"1","pos":"p","after":{"ID":`+
			strings.Repeat("1", 1+i%3)+`}}`)
	}
	for _, follow := range []bool{false, true} {
		cfg, err := config.Load("")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Sink.MaxDeadLetters, _ = config.ParseLimit("2")
		cfg.ProgressInterval = 0
		var src source.Source = source.NewReader("in", strings.NewReader(strings.Join(lines, "\n")+"\n"), 10, 1<<20)
		if follow {
			src = unbounded{src}
		}
		p, _ := newPipeline(t, cfg, src, slog.New(slog.DiscardHandler))
		err = p.Run(t.Context())
		var tooMany *pipelines.DeadLetterLimitError
		if !errors.As(err, &tooMany) || tooMany.Count < 3 {
			t.Fatalf("follow %v: Run: %v, want the limit's error", follow, err)
		}
		read := p.Stats().Messages.Load()
		if follow == (read == 200) {
			t.Errorf("follow %v: read %d of 200 messages", follow, read)
		}
		// Lines are numbered from 1: every line read is below the durable one.
		if durable, _ := p.Batcher().Durable("in", 0); durable != read+1 {
			t.Errorf("follow %v: read %d messages, every line below %d landed", follow, read, durable)
		}
	}
}

// BenchmarkScrape is the cost of one scrape of /metrics: a landed
// pipeline's registry (the Go and process collectors, its own metrics with
// every table labelled) gathered and encoded as Prometheus text.
func BenchmarkScrape(b *testing.B) {
	all := allSamples(b)
	cfg, err := config.Load("")
	if err != nil {
		b.Fatal(err)
	}
	cfg.ProgressInterval = 0
	reg := pipelines.NewRegistry("v", "c")
	p, _ := newPipeline(b, cfg, source.NewReader("in", bytes.NewReader(all), 64, 1<<20), slog.New(slog.DiscardHandler),
		pipelines.WithMetrics(reg))
	if err := p.Run(b.Context()); err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	for b.Loop() {
		families, err := reg.Gather()
		if err != nil {
			b.Fatal(err)
		}
		buf.Reset()
		enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
		for _, f := range families {
			if err := enc.Encode(f); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(buf.Len()), "bytes/scrape")
}
