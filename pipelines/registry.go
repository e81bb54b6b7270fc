package pipelines

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/cdclake/cdclake/config"
	"github.com/cdclake/cdclake/handlers/avro"
)

// compileRegistry builds the Avro codec of source.schema_registry, nil
// when none is configured. It reads the password and certificates now and
// contacts nothing.
func compileRegistry(r config.SchemaRegistry) (*avro.Codec, error) {
	if r.URL == "" {
		return nil, nil
	}
	wrap := func(err error) error { return fmt.Errorf("source.schema_registry: %w", err) }
	if !strings.HasPrefix(r.URL, "http://") && !strings.HasPrefix(r.URL, "https://") {
		reg, err := avro.OpenFileRegistry(strings.TrimPrefix(r.URL, "file://"))
		if err != nil {
			return nil, wrap(err)
		}
		return avro.NewCodec(reg, r.CacheSize), nil
	}
	cfg := avro.RegistryConfig{URL: r.URL, Username: r.Username, Timeout: time.Duration(r.Timeout)}
	switch {
	case r.PasswordEnv != "":
		v, ok := os.LookupEnv(r.PasswordEnv)
		if !ok {
			return nil, wrap(fmt.Errorf("password_env: %s is not set", r.PasswordEnv))
		}
		cfg.Password = v
	case r.PasswordFile != "":
		b, err := os.ReadFile(r.PasswordFile)
		if err != nil {
			return nil, wrap(fmt.Errorf("password_file: %w", err))
		}
		cfg.Password = strings.TrimRight(string(b), "\r\n")
	}
	if r.CAFile != "" || r.CertFile != "" {
		t := &tls.Config{MinVersion: tls.VersionTLS12}
		if r.CAFile != "" {
			pem, err := os.ReadFile(r.CAFile)
			if err != nil {
				return nil, wrap(fmt.Errorf("ca_file: %w", err))
			}
			t.RootCAs = x509.NewCertPool()
			if !t.RootCAs.AppendCertsFromPEM(pem) {
				return nil, wrap(errors.New("ca_file: no PEM certificate in " + r.CAFile))
			}
		}
		if r.CertFile != "" {
			pair, err := tls.LoadX509KeyPair(r.CertFile, r.KeyFile)
			if err != nil {
				return nil, wrap(fmt.Errorf("cert_file, key_file: %w", err))
			}
			t.Certificates = append(t.Certificates, pair)
		}
		cfg.TLS = t
	}
	reg, err := avro.NewHTTPRegistry(cfg)
	if err != nil {
		return nil, wrap(err)
	}
	return avro.NewCodec(reg, r.CacheSize), nil
}
