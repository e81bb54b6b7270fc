package iceappend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// restCatalog is a REST catalog's service (the Iceberg REST catalog
// protocol): it keeps each table's metadata and writes its metadata files
// itself, from a commit's requirements and updates.
type restCatalog struct {
	base    string // the URI with /v1 and the prefix the service's config gives
	sep     string // the namespace separator in a path, encoded
	headers map[string]string
	http    *http.Client

	// token authenticates requests: the configured bearer token, or one
	// the credential gets from the OAuth2 token endpoint (again after a
	// 401).
	tokenMu    sync.Mutex
	token      string
	credential string
	tokenURL   string
	scope      string
}

// restTimeout bounds each request to the service.
const restTimeout = 60 * time.Second

// A request the service answers 429 (too many requests) or 503 (not
// available now) was not processed: it is sent again, up to busyRetries
// times, after the answer's Retry-After (at most busyWaitMax), or else
// after 1, 2, 4… s with a tenth of jitter. A commit sent again is safe:
// its requirements fail (409) if the first one went in after all.
const (
	busyRetries = 5
	busyWaitMax = time.Minute
)

// openREST opens the REST catalog at uri (http or https), with the
// catalog properties props (warehouse, token, credential, scope,
// oauth2-server-uri, header.<name>); ok is false for another URL.
func openREST(ctx context.Context, uri string, props map[string]string) (r *restCatalog, ok bool, err error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, false, nil
	}
	root := strings.TrimSuffix(uri, "/")
	r = &restCatalog{base: root + "/v1", sep: "%1F", headers: map[string]string{}, http: &http.Client{Timeout: restTimeout},
		token: props["token"], credential: props["credential"], scope: props["scope"], tokenURL: props["oauth2-server-uri"]}
	for k, v := range props {
		if name, ok := strings.CutPrefix(k, "header."); ok && name != "" {
			r.headers[name] = v
		}
	}
	if r.tokenURL == "" {
		r.tokenURL = root + "/v1/oauth/tokens"
	}
	if r.scope == "" {
		r.scope = "catalog"
	}
	if r.token == "" && r.credential != "" {
		if err := r.authenticate(ctx); err != nil {
			return nil, true, err
		}
	}
	cfgURL := r.base + "/config"
	if wh := props["warehouse"]; wh != "" {
		cfgURL += "?warehouse=" + url.QueryEscape(wh)
	}
	var cfg struct {
		Defaults  map[string]string `json:"defaults"`
		Overrides map[string]string `json:"overrides"`
	}
	if err := r.do(ctx, http.MethodGet, cfgURL, nil, &cfg); err != nil {
		return nil, true, fmt.Errorf("the REST catalog's config: %w", err)
	}
	// The service's defaults, then the configuration's own, then the
	// service's overrides.
	merged := maps.Clone(cfg.Defaults)
	if merged == nil {
		merged = map[string]string{}
	}
	maps.Copy(merged, props)
	maps.Copy(merged, cfg.Overrides)
	if p := strings.Trim(merged["prefix"], "/"); p != "" {
		r.base += "/" + p
	}
	if s := merged["namespace-separator"]; s != "" {
		// Given encoded (%2E), as it goes between the levels in a path.
		if _, err := url.PathUnescape(s); err != nil {
			return nil, true, fmt.Errorf("the REST catalog's namespace-separator %q: %w", s, err)
		}
		r.sep = s
	}
	return r, true, nil
}

// authenticate gets a token for the credential (client_id:client_secret,
// or a secret alone) from the OAuth2 token endpoint.
func (r *restCatalog) authenticate(ctx context.Context) error {
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {r.scope}}
	id, secret, ok := strings.Cut(r.credential, ":")
	if !ok {
		id, secret = "", r.credential
	}
	if id != "" {
		form.Set("client_id", id)
	}
	form.Set("client_secret", secret)
	ctx, cancel := context.WithTimeout(ctx, restTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.tokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := r.http.Do(req)
	if err != nil {
		return fmt.Errorf("the REST catalog's token: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &tok) != nil || tok.AccessToken == "" {
		return fmt.Errorf("the REST catalog's token endpoint %s: %s: %s", r.tokenURL, resp.Status, strings.TrimSpace(string(body)))
	}
	r.tokenMu.Lock()
	r.token = tok.AccessToken
	r.tokenMu.Unlock()
	return nil
}

// restError is a response of the service other than a success.
type restError struct {
	status  int
	message string
	// retryAfter is the answer's Retry-After (0: none, or not positive).
	retryAfter time.Duration
}

func (e *restError) Error() string {
	return fmt.Sprintf("the REST catalog answered %d: %s", e.status, e.message)
}

// statusOf returns the HTTP status of a restError in err; 0 for another
// error (the request did not get an answer).
func statusOf(err error) int {
	var re *restError
	if errors.As(err, &re) {
		return re.status
	}
	return 0
}

// refused reports whether err is the service's refusal of a request as
// written (400, 422, 501), which the full committer may write otherwise.
func refused(err error) bool {
	st := statusOf(err)
	return st == http.StatusBadRequest || st == http.StatusUnprocessableEntity || st == http.StatusNotImplemented
}

// do sends a request with the JSON of in (nil: no body) and decodes the
// answer into out (nil: ignored).
func (r *restCatalog) do(ctx context.Context, method, u string, in, out any) error {
	_, err := r.send(ctx, method, u, in, out, "")
	return err
}

// errNotModified is the answer to a load of a table whose ETag is still
// the one sent (304).
var errNotModified = errors.New("not modified")

// send is do with the ETag of the version the caller holds (If-None-Match;
// "": none): it returns the answer's ETag, and errNotModified when the
// service has no other version.
func (r *restCatalog) send(ctx context.Context, method, u string, in, out any, etag string) (string, error) {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return "", err
		}
	}
	reauthenticated := false
	for busy := 0; ; {
		tag, err := r.once(ctx, method, u, body, out, etag)
		switch st := statusOf(err); {
		case (st == http.StatusTooManyRequests || st == http.StatusServiceUnavailable) && busy < busyRetries:
			var re *restError
			errors.As(err, &re)
			busy++
			t := time.NewTimer(busyWait(re.retryAfter, busy))
			select {
			case <-ctx.Done():
				t.Stop()
				return "", errors.Join(err, ctx.Err())
			case <-t.C:
			}
		// 419: the spec's "authentication timeout", a token that expired.
		case (st == http.StatusUnauthorized || st == 419) && !reauthenticated && r.credential != "":
			// An expired token: another, once.
			reauthenticated = true
			if aerr := r.authenticate(ctx); aerr != nil {
				return "", errors.Join(err, aerr)
			}
		default:
			return tag, err
		}
	}
}

// busyWait is how long to wait before sending a request again after its
// n-th answer 429 or 503 that said to retry after retryAfter (0: nothing).
func busyWait(retryAfter time.Duration, n int) time.Duration {
	if retryAfter > 0 {
		return min(retryAfter, busyWaitMax)
	}
	d := time.Second << min(n-1, 6)
	return min(d+rand.N(d/10+1), busyWaitMax)
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(h), 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(min(n, int64(busyWaitMax/time.Second))) * time.Second
	}
	if at, err := http.ParseTime(h); err == nil && at.After(now) {
		return at.Sub(now)
	}
	return 0
}

func (r *restCatalog) once(ctx context.Context, method, u string, body []byte, out any, etag string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, restTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return "", err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	req.Header.Set("Accept", "application/json")
	for k, v := range r.headers {
		req.Header.Set(k, v)
	}
	r.tokenMu.Lock()
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	r.tokenMu.Unlock()
	resp, err := r.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	tag := resp.Header.Get("ETag")
	if resp.StatusCode == http.StatusNotModified {
		return tag, errNotModified
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var e struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
			} `json:"error"`
		}
		msg := strings.TrimSpace(string(data))
		if json.Unmarshal(data, &e) == nil && e.Error.Message != "" {
			msg = e.Error.Type + ": " + e.Error.Message
		}
		if len(msg) > 2000 {
			msg = msg[:2000] + "…"
		}
		return "", &restError{status: resp.StatusCode, message: msg, retryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
	}
	if out == nil || resp.StatusCode == http.StatusNoContent || len(data) == 0 {
		return tag, nil
	}
	return tag, json.Unmarshal(data, out)
}

// namespaceURL returns the URL of a namespace: its levels, each escaped,
// between encoded separators.
func (r *restCatalog) namespaceURL(ns []string) string {
	levels := make([]string, len(ns))
	for i, l := range ns {
		levels[i] = url.PathEscape(l)
	}
	return r.base + "/namespaces/" + strings.Join(levels, r.sep)
}

func (r *restCatalog) tableURL(ns []string, name string) string {
	return r.namespaceURL(ns) + "/tables/" + url.PathEscape(name)
}

// loaded is the service's answer to a load, a create or a commit.
type loaded struct {
	MetadataLocation string          `json:"metadata-location"`
	Metadata         json.RawMessage `json:"metadata"`
}

// load returns a table's metadata location, metadata and ETag; "" when
// the catalog has no such table. Given the ETag of the version the caller
// holds (etag), it answers errNotModified while the table has no other:
// a table's metadata grows with its snapshots, and is loaded before
// every commit.
func (r *restCatalog) load(ctx context.Context, ns []string, name, etag string) (string, []byte, string, error) {
	var out loaded
	tag, err := r.send(ctx, http.MethodGet, r.tableURL(ns, name), nil, &out, etag)
	if statusOf(err) == http.StatusNotFound {
		return "", nil, "", nil
	}
	if err != nil {
		return "", nil, "", err
	}
	if out.MetadataLocation == "" || len(out.Metadata) == 0 {
		return "", nil, "", unsupported("%s.%s: the REST catalog's answer has no metadata", strings.Join(ns, "."), name)
	}
	return out.MetadataLocation, out.Metadata, tag, nil
}

// create makes a table: the service assigns its uuid and its columns'
// ids. Its namespaces are made (each level) only when the service has no
// such namespace: a principal may make tables where it may not make
// namespaces. ok is false when the catalog has a table of that name
// already.
func (r *restCatalog) create(ctx context.Context, ns []string, name string, req any) (loc string, body []byte, etag string, ok bool, err error) {
	var out loaded
	for attempt := 0; ; attempt++ {
		etag, err = r.send(ctx, http.MethodPost, r.namespaceURL(ns)+"/tables", req, &out, "")
		if statusOf(err) != http.StatusNotFound || attempt > 0 {
			break
		}
		for i := 1; i <= len(ns); i++ {
			err := r.do(ctx, http.MethodPost, r.base+"/namespaces", map[string]any{"namespace": ns[:i], "properties": map[string]string{}}, nil)
			if err != nil && statusOf(err) != http.StatusConflict {
				return "", nil, "", false, fmt.Errorf("creating the iceberg namespace %s: %w", strings.Join(ns[:i], "."), err)
			}
		}
	}
	if statusOf(err) == http.StatusConflict {
		return "", nil, "", false, nil
	}
	if err != nil {
		return "", nil, "", false, err
	}
	return out.MetadataLocation, out.Metadata, etag, true, nil
}

// commit sends a table's commit: its requirements and updates. ok is
// false when a requirement failed (another commit moved the table first).
// An error without a status (no answer) or a 5xx leaves the commit's fate
// unknown: the table is read again before the next one.
func (r *restCatalog) commit(ctx context.Context, ns []string, name string, requirements, updates []any) (loc string, body []byte, etag string, ok bool, err error) {
	req := map[string]any{"identifier": map[string]any{"namespace": ns, "name": name},
		"requirements": requirements, "updates": updates}
	var out loaded
	etag, err = r.send(ctx, http.MethodPost, r.tableURL(ns, name), req, &out, "")
	if statusOf(err) == http.StatusConflict {
		return "", nil, "", false, nil
	}
	if refused(err) {
		// A commit this service does not take as written here: the
		// full committer makes it.
		return "", nil, "", false, unsupported("%v", err)
	}
	if err != nil {
		return "", nil, "", false, err
	}
	return out.MetadataLocation, out.Metadata, etag, true, nil
}

// createREST makes the table of meta (a new table's, newTable) with the
// REST catalog: its location, schema, partition spec and format version;
// the service assigns its uuid and the columns' ids, so the name mapping
// comes with the first snapshot. s is held.
func (c *Catalog) createREST(ctx context.Context, s *tableState, dataset string, meta *tableMetadata) (*tableMetadata, error) {
	ns, name, err := c.ident(dataset)
	if err != nil {
		return nil, err
	}
	sch, err := meta.schema()
	if err != nil {
		return nil, err
	}
	spec, err := meta.spec()
	if err != nil {
		return nil, err
	}
	req := map[string]any{"name": name, "location": meta.Location, "schema": sch, "partition-spec": spec,
		"write-order": map[string]any{"order-id": 0, "fields": []any{}}, "stage-create": false,
		"properties": map[string]string{"format-version": "3", "commit.retry.num-retries": "0"}}
	loc, body, etag, ok, err := c.rest.create(ctx, ns, name, req)
	if refused(err) {
		return nil, unsupported("%s: the REST catalog does not make the table: %v", dataset, err)
	}
	if err != nil {
		return nil, fmt.Errorf("creating the iceberg table of %s: %w", dataset, err)
	}
	if !ok {
		// Made meanwhile, by another instance: planned again on it.
		return nil, fmt.Errorf("%s: %w", dataset, errConflict)
	}
	made, err := c.accept(dataset, loc, body)
	if err != nil {
		return nil, err
	}
	c.log.Info("iceberg table created", "table", strings.Join(append(slices.Clone(ns), name), "."), "location", meta.Location)
	s.loc, s.meta, s.etag = loc, made, etag
	return made, nil
}

// commitREST sends u as a commit to the REST catalog; s is held.
func (c *Catalog) commitREST(ctx context.Context, s *tableState, dataset string, u *update) error {
	ns, name, err := c.ident(dataset)
	if err != nil {
		return err
	}
	loc, body, etag, ok, err := c.rest.commit(ctx, ns, name, u.requirements, u.updates)
	if handOver(err) {
		return err
	}
	if err != nil {
		return fmt.Errorf("committing to the iceberg table of %s: %w", dataset, err)
	}
	if !ok {
		return fmt.Errorf("%s: %w", dataset, errConflict)
	}
	// Committed: whatever the answer holds, the commit is never made
	// again (by the full committer either). An answer without metadata
	// this package takes leaves the view from before the commit, so the
	// next read learns the commit's files as another writer's would be.
	if meta, err := c.accept(dataset, loc, body); err == nil {
		s.loc, s.meta, s.etag = loc, meta, etag
	}
	return nil
}
