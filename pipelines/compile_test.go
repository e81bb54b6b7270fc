package pipelines

import (
	"strings"
	"testing"

	"github.com/cdclake/cdclake/config"
)

func TestCompileDeadLetters(t *testing.T) {
	for url, want := range map[string]string{
		"":                   "",
		"kafka://h:9092/dlq": "",
		"kafka://h:9092/dlq?sasl=PLAIN&sasl_user=u&sasl_password_env=P": "",
		"s3://bucket/dlq":             `scheme "s3"`,
		"kafka://h:9092/a,b":          "one topic",
		"kafka://h:9092/dlq?group=g":  `unknown parameter "group"`,
		"kafka://h:9092/dlq?sasl=XYZ": `sasl: "XYZ"`,
	} {
		cfg, err := config.Load("")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Sink.DeadLetters = url
		_, err = Compile(cfg)
		switch {
		case want == "" && err != nil:
			t.Errorf("%q: %v", url, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), "sink.dead_letters") || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: error %v, want sink.dead_letters and %q", url, err, want)
		}
	}
}

func TestCompileCompressionLevel(t *testing.T) {
	for _, c := range []struct {
		codec string
		level int
		want  string
	}{
		{"zstd", 0, ""}, {"zstd", 19, ""}, {"gzip", 9, ""},
		{"zstd", 23, "zstd levels are 1 to 22"}, {"gzip", 10, "gzip levels are 1 to 9"}, {"snappy", 3, "snappy has no levels"},
	} {
		cfg, err := config.Load("")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Defaults.Compression, cfg.Defaults.CompressionLevel = c.codec, c.level
		_, err = Compile(cfg)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s level %d: %v", c.codec, c.level, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), "compression_level") || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s level %d: error %v, want compression_level and %q", c.codec, c.level, err, c.want)
		}
	}
}

// TestCompileDeltaPaths: a Delta table is the folder of its files, so a
// route committed to Delta must have a path that begins with {table}/.
func TestCompileDeltaPaths(t *testing.T) {
	for path, ok := range map[string]bool{
		"{table}/date={date}": true, "{table}": true, "{table}/{yyyy}/{mm}": true,
		"{date}/{table}": false, "{table}_{date}": false, "lake/{table}/{date}": false,
	} {
		cfg, err := config.Load("")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Defaults.Path, cfg.Defaults.TableFormat = path, "delta"
		_, err = Compile(cfg)
		switch {
		case ok && err != nil:
			t.Errorf("%q: %v", path, err)
		case !ok && (err == nil || !strings.Contains(err.Error(), "must begin with {table}/")):
			t.Errorf("%q: error %v, want the path refused", path, err)
		}
	}
}
