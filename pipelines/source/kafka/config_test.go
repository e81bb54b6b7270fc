package kafka

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseURL(t *testing.T) {
	cfg, err := ParseURL("kafka://h1:9092,h2:9093/orders,shop\\..*?group=lake&regex=true&start=latest&client_id=c1" +
		"&fetch_max_bytes=1048576&commit_interval=2s&tls=true&tls_ca=/ca.pem&sasl=SCRAM-SHA-512&sasl_user=u&sasl_password_env=KPASS" +
		"&session_timeout=10s&metadata_max_age=30s&instance_id=pod-1&fetch_max_wait=250ms&on_gap=skip")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Brokers, []string{"h1:9092", "h2:9093"}) || !slices.Equal(cfg.Topics, []string{"orders", `shop\..*`}) ||
		!cfg.Regex || cfg.Group != "lake" || cfg.Start != "latest" || cfg.ClientID != "c1" || cfg.FetchMaxBytes != 1<<20 ||
		cfg.CommitInterval != 2*time.Second || cfg.SessionTimeout != 10*time.Second || cfg.MetadataMaxAge != 30*time.Second ||
		cfg.InstanceID != "pod-1" || cfg.FetchMaxWait != 250*time.Millisecond || !cfg.TLS.Enabled || cfg.TLS.CAFile != "/ca.pem" ||
		cfg.OnGap != "skip" ||
		cfg.SASL != (SASL{Mechanism: "SCRAM-SHA-512", User: "u", PasswordEnv: "KPASS"}) {
		t.Errorf("parsed %+v", cfg)
	}
	def, err := ParseURL("kafka://localhost:9092/t?group=g")
	if err != nil || def.Start != "earliest" || def.OnGap != "fail" || def.ClientID != "cdclake" || def.CommitInterval != 5*time.Second || def.Regex ||
		def.FetchMaxWait != 500*time.Millisecond {
		t.Errorf("defaults %+v, %v", def, err)
	}
	for url, want := range map[string]string{
		"kafka://h:1/t":                           "group: required",
		"kafka:///t?group=g":                      "no brokers",
		"kafka://h:1/?group=g":                    "no topics",
		"kafka://u:secret@h:1/t?group=g":          "credentials do not belong in the URL",
		"kafka://h:1/t?group=g&sasl_password=x":   "a secret does not belong in the URL",
		"kafka://h:1/t?group=g&start=middle":      `start: "middle"`,
		"kafka://h:1/t?group=g&on_gap=ignore":     `on_gap: "ignore", want fail or skip`,
		"kafka://h:1/t?group=g&sasl=GSSAPI":       `sasl: "GSSAPI"`,
		"kafka://h:1/t?group=g&sasl=PLAIN":        "sasl_user: required",
		"kafka://h:1/t?group=g&tls_cert=c.pem":    "tls_cert: goes with tls_key",
		"kafka://h:1/t?group=g&fetch_max_bytes=0": "fetch_max_bytes",
		"kafka://h:1/t?group=g&colour=blue":       `unknown parameter "colour"`,
		"file:///x":                               "want kafka://",
	} {
		_, err := ParseURL(url)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", url, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "secret@") {
			t.Errorf("%s: the error repeats the credentials: %v", url, err)
		}
	}
}

func TestSASLPasswordSources(t *testing.T) {
	t.Setenv("CDCLAKE_TEST_KPASS", "from-env")
	if m, err := (&Config{SASL: SASL{Mechanism: "PLAIN", User: "u", PasswordEnv: "CDCLAKE_TEST_KPASS"}}).mechanism(); err != nil || m.Name() != "PLAIN" {
		t.Errorf("env: %v %v", m, err)
	}
	if _, err := (&Config{SASL: SASL{Mechanism: "PLAIN", User: "u", PasswordEnv: "CDCLAKE_TEST_UNSET_VAR"}}).mechanism(); err == nil ||
		!strings.Contains(err.Error(), "CDCLAKE_TEST_UNSET_VAR is not set") {
		t.Errorf("unset variable: %v", err)
	}
	f := filepath.Join(t.TempDir(), "pass")
	if err := os.WriteFile(f, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if m, err := (&Config{SASL: SASL{Mechanism: "SCRAM-SHA-256", User: "u", PasswordFile: f}}).mechanism(); err != nil || m.Name() != "SCRAM-SHA-256" {
		t.Errorf("file: %v %v", m, err)
	}
	if cfg, err := (&Config{TLS: TLS{Enabled: true, CAFile: f}}).tlsConfig(); err == nil {
		t.Errorf("a CA file without a certificate was accepted: %v", cfg)
	}
}
