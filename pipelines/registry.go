package pipelines

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cdclake/cdclake/config"
	"github.com/cdclake/cdclake/config/secrets"
	"github.com/cdclake/cdclake/handlers/avro"
)

// compileRegistry builds the Avro codec of source.schema_registry, nil
// when none is configured. It reads the password and certificates now
// (one that is not there is a *secrets.MissingError) and contacts
// nothing.
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
	const key = "source.schema_registry."
	var errs []error
	pass, err := secrets.Read(key+"password_env", r.PasswordEnv, key+"password_file", r.PasswordFile)
	errs = append(errs, err)
	cfg.Password = pass
	if r.CAFile != "" || r.CertFile != "" {
		t := &tls.Config{MinVersion: tls.VersionTLS12}
		if r.CAFile != "" {
			pem, err := secrets.ReadFile(key+"ca_file", r.CAFile)
			t.RootCAs = x509.NewCertPool()
			if err == nil && !t.RootCAs.AppendCertsFromPEM(pem) {
				err = wrap(errors.New("ca_file: no PEM certificate in " + r.CAFile))
			}
			errs = append(errs, err)
		}
		if r.CertFile != "" {
			certPEM, err1 := secrets.ReadFile(key+"cert_file", r.CertFile)
			keyPEM, err2 := secrets.ReadFile(key+"key_file", r.KeyFile)
			errs = append(errs, err1, err2)
			if err1 == nil && err2 == nil {
				pair, err := tls.X509KeyPair(certPEM, keyPEM)
				if err != nil {
					errs = append(errs, wrap(fmt.Errorf("cert_file, key_file: %w", err)))
				}
				t.Certificates = append(t.Certificates, pair)
			}
		}
		cfg.TLS = t
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	reg, err := avro.NewHTTPRegistry(cfg)
	if err != nil {
		return nil, wrap(err)
	}
	return avro.NewCodec(reg, r.CacheSize), nil
}
