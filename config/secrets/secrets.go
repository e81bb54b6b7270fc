// Package secrets reads the credentials a config names (an environment
// variable or a file, never the config itself) and keeps every value it
// read, so that logs, errors and metrics can be scrubbed of them (Redact).
//
// A credential that is not there is a *MissingError: "cdclake validate"
// reports it as a warning naming the key that needs it at run time, and
// "cdclake run" refuses to start.
package secrets

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// MissingError is a credential, or a file of credentials, that is not
// there yet: an unset environment variable or a file that does not exist.
type MissingError struct {
	// Key is the config key that names it.
	Key string
	Err error
}

func (e *MissingError) Error() string { return e.Key + ": " + e.Err.Error() }
func (e *MissingError) Unwrap() error { return e.Err }

// Read returns the secret in the environment variable env or, when env is
// empty, in file (its trailing newline removed), and remembers it for
// Redact. envKey and fileKey are the config keys naming them.
func Read(envKey, env, fileKey, file string) (string, error) {
	var v string
	switch {
	case env != "":
		s, ok := os.LookupEnv(env)
		if !ok {
			return "", &MissingError{Key: envKey, Err: fmt.Errorf("the environment variable %s is not set", env)}
		}
		v = s
	case file != "":
		b, err := ReadFile(fileKey, file)
		if err != nil {
			return "", err
		}
		v = strings.TrimRight(string(b), "\r\n")
	default:
		return "", nil
	}
	Remember(v)
	return v, nil
}

// ReadFile reads a file of credentials or certificates; a file that does
// not exist is a *MissingError for key.
func ReadFile(key, file string) ([]byte, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &MissingError{Key: key, Err: fmt.Errorf("%s does not exist", file)}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return b, nil
}

var (
	mu    sync.RWMutex
	known []string
)

// Remember adds values to those Redact removes. Values shorter than 4
// bytes are left alone: replacing them would garble every line.
func Remember(values ...string) {
	mu.Lock()
	defer mu.Unlock()
	for _, v := range values {
		if len(v) >= 4 && !slices.Contains(known, v) {
			known = append(known, v)
		}
	}
	// The longest first, so that a secret containing another is replaced
	// whole.
	slices.SortFunc(known, func(a, b string) int { return len(b) - len(a) })
}

// FromEnv remembers the values of the environment variables that hold
// credentials for the object stores' SDKs, which read them themselves.
func FromEnv() {
	for _, name := range []string{"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AZURE_STORAGE_KEY",
		"AZURE_STORAGE_SAS_TOKEN", "AZURE_CLIENT_SECRET", "AZURE_STORAGE_CONNECTION_STRING"} {
		if v := os.Getenv(name); v != "" {
			Remember(v)
		}
	}
}

// Placeholder replaces what Redact removes.
const Placeholder = "[REDACTED]"

// userinfo matches the user information of a URL in text; secretParam a
// query parameter whose name says it holds a credential.
var (
	userinfo    = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://)[^/?#@\s]*@`)
	secretParam = regexp.MustCompile(`(?i)([?&][a-z0-9_.-]*(?:password|passwd|secret|token|signature|credential|sig)[a-z0-9_.-]*=)[^&\s"']*`)
)

// Redact removes from s every secret read or remembered, the user
// information of URLs and the values of query parameters named like
// credentials (password, secret, token, signature).
func Redact(s string) string {
	mu.RLock()
	for _, v := range known {
		if strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, Placeholder)
		}
	}
	mu.RUnlock()
	if strings.Contains(s, "@") {
		s = userinfo.ReplaceAllString(s, "${1}"+Placeholder+"@")
	}
	if strings.ContainsAny(s, "?&") {
		s = secretParam.ReplaceAllStringFunc(s, func(m string) string {
			i := strings.IndexByte(m, '=')
			if strings.HasSuffix(strings.ToLower(m[:i]), "_env") || strings.HasSuffix(strings.ToLower(m[:i]), "_file") {
				return m // names a variable or a file, not a secret
			}
			return m[:i+1] + Placeholder
		})
	}
	return s
}
