package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/cdclake/cdclake/config/secrets"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Config configures a Source.
type Config struct {
	// Brokers are the seed brokers, host:port.
	Brokers []string
	// Topics are topic names, or regular expressions when Regex is set.
	Topics []string
	Regex  bool
	// Group is the consumer group.
	Group string
	// Start is where a partition without a committed offset starts:
	// "earliest" (default) or "latest".
	Start string
	// ClientID names the client to the brokers (default "cdclake").
	ClientID string
	// InstanceID makes the member static (KIP-345): a restarted instance
	// with the same id takes its partitions back at once, without a
	// rebalance (a StatefulSet pod's name).
	InstanceID string
	// SessionTimeout is how long the group waits for a silent member
	// before moving its partitions (0: the client's default, 45s).
	SessionTimeout time.Duration
	// MetadataMaxAge is how often the topics are listed again: how soon a
	// new topic matching Regex is read (0: the client's default, 5m).
	MetadataMaxAge time.Duration
	// FetchMaxWait is how long the broker may hold a fetch that found too
	// little data (default 500ms, as Kafka's own consumer). A partition
	// resumed after a pause is fetched only with the next request, so a
	// long wait on caught-up partitions stalls it.
	FetchMaxWait time.Duration
	// FetchMaxBytes and FetchMaxPartitionBytes bound one fetch (0: the
	// client's defaults).
	FetchMaxBytes          int32
	FetchMaxPartitionBytes int32
	// BlockRecords and BlockBytes bound a block.
	BlockRecords int
	BlockBytes   int
	// CommitInterval is how often durable offsets are committed (default
	// 5s).
	CommitInterval time.Duration
	// UntilCaughtUp ends the source once every assigned partition was
	// read up to the end offset it had when the source started.
	UntilCaughtUp bool
	// OnGap says what happens when the offset a partition resumes from is
	// no longer in the log (retention deleted messages that never landed,
	// the topic was recreated): "fail" (default) stops the run with an
	// error naming the partition and the gap; "skip" lands on from the
	// log's first offset and records the gap (Hooks.Gap). The client never
	// resets an offset on its own.
	OnGap string
	// OnClaimError says what happens to a partition whose state in the
	// lake cannot be read when it is assigned (after retries): "wait"
	// (default) pauses it, reports it (Ready, a metric, an ERROR line) and
	// claims it again every CommitInterval while the others land on; a
	// run with UntilCaughtUp then ends with an error, once the others are
	// caught up and a claim again failed too. "fail" stops the run.
	OnClaimError string
	TLS          TLS
	SASL         SASL
	// Keys names the config keys of the settings in errors, by URL
	// parameter (sasl_password_env → source.kafka.sasl.password_env) when
	// they came from elsewhere than a URL; unset, errors name the URL's
	// parameters.
	Keys map[string]string
}

// key returns the name of a setting in errors: its URL parameter or what
// Keys says.
func (c *Config) key(param string) string {
	if k, ok := c.Keys[param]; ok {
		return k
	}
	return param
}

// TLS configures encryption. Files are PEM.
type TLS struct {
	Enabled bool
	// CAFile verifies the brokers (default: the system's roots).
	CAFile string
	// CertFile and KeyFile are a client certificate.
	CertFile, KeyFile string
	// ServerName overrides the name the brokers' certificates are checked
	// against.
	ServerName string
}

// SASL configures authentication. The password is read from an environment
// variable or a file, never from the URL, and never logged (package
// secrets).
type SASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty disables
	// SASL.
	Mechanism    string
	User         string
	PasswordEnv  string
	PasswordFile string
}

// ParseURL reads a source URL:
//
//	kafka://host1:9092,host2:9092/topicA,topicB?group=cdclake&start=earliest
//
// Query parameters:
//
//	group                      consumer group (required)
//	regex=true                 topics are regular expressions
//	start=earliest|latest      start of a partition without a committed offset
//	on_gap=fail|skip           an offset no longer in the log: stop (default), or land on and record the gap
//	on_claim_error=wait|fail   a partition whose state cannot be read: it waits alone (default), or the run stops
//	client_id                  client id (default cdclake)
//	instance_id                static group membership: a restart takes its partitions back at once
//	session_timeout            e.g. 10s: how soon a dead member's partitions move
//	metadata_max_age           e.g. 30s: how soon new topics matching regex are read
//	fetch_max_wait             e.g. 500ms (the default): how long the broker may hold a fetch
//	fetch_max_bytes, fetch_max_partition_bytes
//	commit_interval            e.g. 5s
//	tls=true                   TLS, with tls_ca, tls_cert, tls_key, tls_server_name (files: PEM)
//	sasl=PLAIN|SCRAM-SHA-256|SCRAM-SHA-512
//	sasl_user, sasl_password_env (a variable name) or sasl_password_file
//
// A password in the URL is refused.
func ParseURL(raw string) (Config, error) { return parse(raw, false) }

// ParseTopicURL parses the URL of a topic cdclake writes to (the dead
// letters): kafka://host1:9092,host2:9092/topic with the connection
// parameters of ParseURL (client_id, tls*, sasl*) and no consumer ones.
func ParseTopicURL(raw string) (Config, error) { return parse(raw, true) }

// parse reads a kafka:// URL: a source's, or with producer the URL of a
// topic written to. Its error names every problem found, each on its own.
func parse(raw string, producer bool) (Config, error) {
	what := "kafka source"
	if producer {
		what = "kafka topic"
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf(what+": "+format, args...)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return Config{}, fail("%v", redact(err))
	}
	if u.Scheme != "kafka" {
		return Config{}, fail("scheme %q, want kafka://", u.Scheme)
	}
	if u.User != nil {
		return Config{}, fail("credentials do not belong in the URL: use sasl_user with sasl_password_env or sasl_password_file")
	}
	cfg := Config{ClientID: "cdclake", Start: "earliest", OnGap: "fail", OnClaimError: "wait", CommitInterval: 5 * time.Second, FetchMaxWait: 500 * time.Millisecond}
	if err := cfg.parseLocation(u, raw, producer, fail); err != nil {
		return Config{}, err
	}
	p := &params{q: u.Query(), known: map[string]bool{}}
	if !producer {
		p.group(&cfg)
		p.fetch(&cfg)
	}
	p.conn(&cfg)
	p.unknown()
	errs := p.errs
	if !producer {
		errs = append(errs, cfg.Check())
	} else {
		errs = append(errs, cfg.checkConn())
	}
	if err := problems(what, errs); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// parseLocation reads the brokers, the URL's host, and the topics, its
// path, into c: at least one of each, and only one topic for a topic
// written to. raw is the URL as given, for the error without brokers.
func (c *Config) parseLocation(u *url.URL, raw string, producer bool, fail func(format string, args ...any) error) error {
	for _, b := range strings.Split(u.Host, ",") {
		if b = strings.TrimSpace(b); b != "" {
			c.Brokers = append(c.Brokers, b)
		}
	}
	if len(c.Brokers) == 0 {
		return fail("no brokers in %q", raw)
	}
	for _, t := range strings.Split(strings.Trim(u.Path, "/"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			c.Topics = append(c.Topics, t)
		}
	}
	if len(c.Topics) == 0 {
		return fail("no topics: kafka://brokers/topicA,topicB")
	}
	if producer && len(c.Topics) != 1 {
		return fail("one topic, not %d", len(c.Topics))
	}
	return nil
}

// params reads the query parameters of a kafka:// URL. It remembers the
// keys it was asked about, so that unknown can report the others, and
// collects every value it cannot read in errs.
type params struct {
	q     url.Values
	known map[string]bool
	errs  []error
}

// str sets *dst to the parameter key, if given.
func (p *params) str(key string, dst *string) {
	p.known[key] = true
	if v := p.q.Get(key); v != "" {
		*dst = v
	}
}

// boolean sets *dst to the parameter key, if given: true or false.
func (p *params) boolean(key string, dst *bool) {
	p.known[key] = true
	if v := p.q.Get(key); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			p.errs = append(p.errs, fmt.Errorf("%s: %q is not true or false", key, v))
		}
		*dst = b
	}
}

// int32v sets *dst to the parameter key, if given: a positive number that
// fits in 32 bits.
func (p *params) int32v(key string, dst *int32) {
	p.known[key] = true
	if v := p.q.Get(key); v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 1 {
			p.errs = append(p.errs, fmt.Errorf("%s: %q is not a positive number", key, v))
		}
		*dst = int32(n)
	}
}

// duration sets *dst to the parameter key, if given: a positive duration.
func (p *params) duration(key string, dst *time.Duration) {
	p.known[key] = true
	if v := p.q.Get(key); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			p.errs = append(p.errs, fmt.Errorf("%s: %q is not a positive duration", key, v))
		}
		*dst = d
	}
}

// group reads the consumer group's settings: the group and its
// membership, how topics are named and found, where a partition starts
// and what happens on a gap or a state that cannot be read.
func (p *params) group(cfg *Config) {
	p.str("group", &cfg.Group)
	p.boolean("regex", &cfg.Regex)
	p.str("start", &cfg.Start)
	p.str("on_gap", &cfg.OnGap)
	p.str("on_claim_error", &cfg.OnClaimError)
	p.str("instance_id", &cfg.InstanceID)
	p.duration("session_timeout", &cfg.SessionTimeout)
	p.duration("metadata_max_age", &cfg.MetadataMaxAge)
}

// fetch reads how records are fetched and how often offsets are
// committed.
func (p *params) fetch(cfg *Config) {
	p.duration("fetch_max_wait", &cfg.FetchMaxWait)
	p.int32v("fetch_max_bytes", &cfg.FetchMaxBytes)
	p.int32v("fetch_max_partition_bytes", &cfg.FetchMaxPartitionBytes)
	p.duration("commit_interval", &cfg.CommitInterval)
}

// conn reads the connection settings, which a topic written to shares:
// the client id, TLS and SASL.
func (p *params) conn(cfg *Config) {
	p.str("client_id", &cfg.ClientID)
	p.boolean("tls", &cfg.TLS.Enabled)
	p.str("tls_ca", &cfg.TLS.CAFile)
	p.str("tls_cert", &cfg.TLS.CertFile)
	p.str("tls_key", &cfg.TLS.KeyFile)
	p.str("tls_server_name", &cfg.TLS.ServerName)
	p.str("sasl", &cfg.SASL.Mechanism)
	p.str("sasl_user", &cfg.SASL.User)
	p.str("sasl_password_env", &cfg.SASL.PasswordEnv)
	p.str("sasl_password_file", &cfg.SASL.PasswordFile)
}

// unknown reports each parameter no reader asked about; one that looks
// like a secret is told where secrets go instead.
func (p *params) unknown() {
	for k := range p.q {
		if !p.known[k] {
			if strings.Contains(k, "password") || strings.Contains(k, "secret") {
				p.errs = append(p.errs, fmt.Errorf("%s: a secret does not belong in the URL (sasl_password_env, sasl_password_file)", k))
				continue
			}
			p.errs = append(p.errs, fmt.Errorf("unknown parameter %q", k))
		}
	}
}

// problems joins the problems in errs, joined ones taken apart, each on
// its own with what it is about; nil when there are none.
func problems(what string, errs []error) error {
	var out []error
	for _, err := range errs {
		for _, e := range unjoin(err) {
			out = append(out, fmt.Errorf("%s: %w", what, e))
		}
	}
	if len(out) > 0 {
		return errors.Join(out...)
	}
	return nil
}

// unjoin returns the errors errors.Join put together in err.
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unjoin(e)...)
		}
		return out
	}
	return []error{err}
}

// ClientOptions returns the options connecting a franz-go client as cfg
// says: brokers, client id, TLS and SASL. It reads the TLS files and the
// SASL password; one that is not there is a *secrets.MissingError.
func (c Config) ClientOptions() ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(c.Brokers...), kgo.ClientID(c.ClientID)}
	tlsCfg, tlsErr := c.tlsConfig()
	if tlsCfg != nil {
		opts = append(opts, kgo.DialTLSConfig(tlsCfg))
	}
	mech, saslErr := c.mechanism()
	if mech != nil {
		opts = append(opts, kgo.SASL(mech))
	}
	if err := errors.Join(tlsErr, saslErr); err != nil {
		return nil, err
	}
	return opts, nil
}

// redact removes a URL's user information from an error message.
func redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return errors.New(ue.Err.Error())
	}
	return err
}

// Check checks the settings of a source (not of a topic written to): the
// group, where to start, and the connection.
func (c *Config) Check() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, fmt.Errorf("%s: no brokers", c.key("brokers")))
	}
	if len(c.Topics) == 0 {
		errs = append(errs, fmt.Errorf("%s: no topics", c.key("topics")))
	}
	if c.Group == "" {
		errs = append(errs, fmt.Errorf("%s: required (?group=name)", c.key("group")))
	}
	if c.Start != "earliest" && c.Start != "latest" {
		errs = append(errs, fmt.Errorf("%s: %q, want earliest or latest", c.key("start"), c.Start))
	}
	if c.OnGap != "" && c.OnGap != "fail" && c.OnGap != "skip" {
		errs = append(errs, fmt.Errorf("%s: %q, want fail or skip", c.key("on_gap"), c.OnGap))
	}
	if c.OnClaimError != "" && c.OnClaimError != "wait" && c.OnClaimError != "fail" {
		errs = append(errs, fmt.Errorf("%s: %q, want wait or fail", c.key("on_claim_error"), c.OnClaimError))
	}
	if c.Regex {
		for _, expr := range c.Topics {
			if _, err := regexp.Compile(expr); err != nil {
				errs = append(errs, fmt.Errorf("%s: %q is not a regular expression: %w", c.key("topics"), expr, err))
			}
		}
	}
	return errors.Join(append(errs, c.checkConn())...)
}

// checkConn checks the connection settings.
func (c *Config) checkConn() error {
	var errs []error
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		errs = append(errs, fmt.Errorf("%s: goes with %s", c.key("tls_cert"), c.key("tls_key")))
	}
	switch c.SASL.Mechanism {
	case "":
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		if c.SASL.User == "" {
			errs = append(errs, fmt.Errorf("%s: required with %s", c.key("sasl_user"), c.key("sasl")))
		}
		if (c.SASL.PasswordEnv == "") == (c.SASL.PasswordFile == "") {
			errs = append(errs, fmt.Errorf("%s: give it or %s, not both or neither", c.key("sasl_password_env"), c.key("sasl_password_file")))
		}
	default:
		errs = append(errs, fmt.Errorf("%s: %q, want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", c.key("sasl"), c.SASL.Mechanism))
	}
	return errors.Join(errs...)
}

// tlsConfig builds the TLS configuration, nil when TLS is off.
func (c *Config) tlsConfig() (*tls.Config, error) {
	t := c.TLS
	if !t.Enabled && t.CAFile == "" && t.CertFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	var errs []error
	if t.CAFile != "" {
		pem, err := secrets.ReadFile(c.key("tls_ca"), t.CAFile)
		if err != nil {
			errs = append(errs, err)
		} else if pool := x509.NewCertPool(); !pool.AppendCertsFromPEM(pem) {
			errs = append(errs, fmt.Errorf("%s: %s holds no PEM certificate", c.key("tls_ca"), t.CAFile))
		} else {
			cfg.RootCAs = pool
		}
	}
	if t.CertFile != "" {
		certPEM, err1 := secrets.ReadFile(c.key("tls_cert"), t.CertFile)
		keyPEM, err2 := secrets.ReadFile(c.key("tls_key"), t.KeyFile)
		if err := errors.Join(err1, err2); err != nil {
			errs = append(errs, err)
		} else if cert, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
			errs = append(errs, fmt.Errorf("%s, %s: %w", c.key("tls_cert"), c.key("tls_key"), err))
		} else {
			cfg.Certificates = []tls.Certificate{cert}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return cfg, nil
}

// mechanism builds the SASL mechanism, nil when SASL is off. The password
// is read now, from the environment or a file.
func (c *Config) mechanism() (sasl.Mechanism, error) {
	s := c.SASL
	if s.Mechanism == "" {
		return nil, nil
	}
	pass, err := secrets.Read(c.key("sasl_password_env"), s.PasswordEnv, c.key("sasl_password_file"), s.PasswordFile)
	if err != nil {
		return nil, err
	}
	switch s.Mechanism {
	case "PLAIN":
		return plain.Auth{User: s.User, Pass: pass}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: s.User, Pass: pass}.AsSha256Mechanism(), nil
	default:
		return scram.Auth{User: s.User, Pass: pass}.AsSha512Mechanism(), nil
	}
}
