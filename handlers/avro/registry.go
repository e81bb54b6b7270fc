package avro

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

// RegistryConfig says how to reach a Confluent-compatible schema registry
// (Confluent Schema Registry, Apicurio Registry's /apis/ccompat/v7,
// Redpanda, Karapace).
type RegistryConfig struct {
	// URL is the API's base URL, e.g. http://registry:8081 or
	// http://apicurio:8080/apis/ccompat/v7.
	URL string
	// Username and Password authenticate with HTTP basic auth when
	// Username is set.
	Username, Password string
	// TLS configures https (nil: the system's roots).
	TLS *tls.Config
	// Timeout bounds one request.
	Timeout time.Duration
}

// HTTPRegistry asks a schema registry over its HTTP API.
type HTTPRegistry struct {
	cl *sr.Client
}

// NewHTTPRegistry returns a Registry for cfg.
func NewHTTPRegistry(cfg RegistryConfig) (*HTTPRegistry, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.TLS != nil {
		tr.TLSClientConfig = cfg.TLS
	}
	opts := []sr.ClientOpt{
		sr.URLs(cfg.URL),
		sr.HTTPClient(&http.Client{Transport: tr, Timeout: cfg.Timeout}),
		sr.UserAgent("cdclake"),
	}
	if cfg.Username != "" {
		opts = append(opts, sr.BasicAuth(cfg.Username, cfg.Password))
	}
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("schema registry %s: %w", cfg.URL, err)
	}
	return &HTTPRegistry{cl: cl}, nil
}

// Schema fetches the schema with the given id.
func (r *HTTPRegistry) Schema(ctx context.Context, id int) (string, error) {
	s, err := r.cl.SchemaByID(ctx, id)
	if err != nil {
		var re *sr.ResponseError
		if errors.As(err, &re) {
			// The status says what is wrong (401: credentials, 503: the
			// registry); the message alone often does not.
			if re.StatusCode == http.StatusNotFound {
				return "", fmt.Errorf("%w: HTTP %d from %s: %s", ErrUnknownSchema, re.StatusCode, re.URL, re.Message)
			}
			return "", fmt.Errorf("%w: HTTP %d from %s: %s", ErrUnavailable, re.StatusCode, re.URL, re.Message)
		}
		return "", fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return checkAvro(s)
}

// Ping reports whether the registry answers with its API: a network
// failure, a server error or refused credentials are errors; any other
// answer, even one that the endpoint does not exist, is not.
func (r *HTTPRegistry) Ping(ctx context.Context) error {
	_, err := r.cl.SupportedTypes(ctx)
	var re *sr.ResponseError
	if errors.As(err, &re) {
		if re.StatusCode >= 500 || re.StatusCode == http.StatusUnauthorized || re.StatusCode == http.StatusForbidden {
			return fmt.Errorf("HTTP %d from %s: %s", re.StatusCode, re.URL, re.Message)
		}
		return nil
	}
	return err
}

func checkAvro(s sr.Schema) (string, error) {
	if s.Type != sr.TypeAvro {
		return "", fmt.Errorf("%w: a %s schema, not Avro", ErrUnknownSchema, s.Type)
	}
	if len(s.References) > 0 {
		return "", fmt.Errorf("%w: the schema references other schemas, which is not supported", ErrUnknownSchema)
	}
	return s.Schema, nil
}

// FileRegistry serves schemas saved from a registry: a JSON object whose
// keys are schema ids and whose values are the registry's answers to GET
// /schemas/ids/{id} ({"schema": text, "schemaType": …}). It replays
// captured topics without the registry they were written with.
type FileRegistry struct {
	byID map[int]sr.Schema
}

// OpenFileRegistry reads a FileRegistry from path.
func OpenFileRegistry(path string) (*FileRegistry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m map[string]sr.Schema
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r := &FileRegistry{byID: make(map[int]sr.Schema, len(m))}
	for k, s := range m {
		id, err := strconv.Atoi(k)
		if err != nil {
			return nil, fmt.Errorf("%s: key %q is not a schema id", path, k)
		}
		r.byID[id] = s
	}
	return r, nil
}

// Schema returns the saved schema with the given id.
func (r *FileRegistry) Schema(_ context.Context, id int) (string, error) {
	s, ok := r.byID[id]
	if !ok {
		return "", fmt.Errorf("%w: no schema with id %d", ErrUnknownSchema, id)
	}
	return checkAvro(s)
}
