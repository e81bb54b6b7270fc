package pipelines

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cdclake/cdclake/config"
	"github.com/cdclake/cdclake/config/secrets"
	"github.com/cdclake/cdclake/pipelines/source/kafka"
	"github.com/cdclake/cdclake/sinks/lake"
	"github.com/cdclake/cdclake/sinks/lakehouse"
)

// Setup is what a run builds from its config before it connects to
// anything: the compiled plan, the source's settings, the sink's URL and
// the metrics endpoint. "cdclake run" and "cdclake validate" both make it
// with Prepare, so that validate rejects exactly what run would.
type Setup struct {
	Plan *Plan
	// Kafka is the Kafka source's settings; nil for a file source.
	Kafka *kafka.Config
	// Files is the file source's URL: a file, directory or glob, or "-".
	Files string
	// Sink is the lake's URL.
	Sink string
	// Listen is the address of the metrics and probes endpoint; "" for
	// none.
	Listen string
	// Warnings are what Prepare would refuse but for Options.Validate:
	// run-time material (a secret, a certificate file) that is not there.
	Warnings []error
}

// Options are what the command line adds to a config.
type Options struct {
	// Source, Sink and Listen override source.url, sink.url and
	// observability.listen when not empty.
	Source, Sink, Listen string
	// UntilCaughtUp is --until-caught-up (Kafka only).
	UntilCaughtUp bool
	// Validate makes run-time material that is not there (an unset
	// password variable, a certificate file not mounted here) a warning
	// instead of an error.
	Validate bool
	// NoSource prepares the lake's side only (cdclake compact): a missing
	// source is no problem.
	NoSource bool
}

// DefaultListen is the metrics endpoint of a Kafka source when the config
// names none.
const DefaultListen = ":9464"

// Prepare checks cfg with the command line's options and builds every
// setting a run needs, reading its secrets; it connects to nothing. The
// error lists every problem, each with its key.
func Prepare(ctx context.Context, cfg *config.Config, o Options) (*Setup, error) {
	s := &Setup{}
	var errs []error
	plan, err := Compile(cfg)
	errs = append(errs, err)
	s.Plan = plan
	if plan != nil && plan.deadLetters != nil {
		_, err := plan.deadLetters.ClientOptions()
		errs = append(errs, prefixed("sink.dead_letters", err)...)
	}

	srcKey, srcURL := "source.url", cfg.Source.URL
	if o.Source != "" {
		srcKey, srcURL = "--source", o.Source
	}
	switch {
	case o.Source == "" && cfg.Source.Kafka.Set():
		// --source replaces the section; source.url beside it is an error
		// config.Validate reports.
		if srcURL == "" {
			kc := kafkaSection(cfg.Source.Kafka)
			s.Kafka = &kc
			errs = append(errs, kc.Check())
		}
	case strings.HasPrefix(srcURL, "kafka://"):
		kc, err := kafka.ParseURL(srcURL)
		if err != nil {
			errs = append(errs, prefixed(srcKey, err)...)
		} else {
			s.Kafka = &kc
		}
	case srcURL == "" && o.NoSource:
	case srcURL == "":
		errs = append(errs, errors.New("source: required: source.url, source.kafka or --source"))
	case strings.Contains(srcURL, "://") && !strings.HasPrefix(srcURL, "file://"):
		scheme, _, _ := strings.Cut(srcURL, "://")
		errs = append(errs, fmt.Errorf("%s: scheme %q, want file:// (or a path) or kafka://", srcKey, scheme))
	default:
		s.Files = srcURL
	}
	if k := s.Kafka; k != nil {
		k.BlockRecords, k.BlockBytes = cfg.Source.BlockLines, int(cfg.Source.BlockBytes)
		k.UntilCaughtUp = o.UntilCaughtUp
		if k.Check() == nil { // else its files and secrets are not known to be the ones meant
			_, err := k.ClientOptions()
			errs = append(errs, prefixed(srcKeyOf(k, srcKey), err)...)
		}
	} else if o.UntilCaughtUp && s.Files != "" {
		errs = append(errs, errors.New("--until-caught-up: is for Kafka sources; a file source always ends at the end of its input"))
	}

	sinkKey, sinkURL := "sink.url", cfg.Sink.URL
	if o.Sink != "" {
		sinkKey, sinkURL = "--sink", o.Sink
	}
	if sinkURL == "" {
		errs = append(errs, errors.New("sink.url: required (or --sink)"))
	} else if err := lake.CheckURL(ctx, sinkURL); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", sinkKey, err))
	}
	s.Sink = sinkURL
	if plan != nil && sinkURL != "" {
		if err := plan.UseLake(sinkURL); err != nil {
			errs = append(errs, err)
		}
	}

	listenKey, listen := "observability.listen", cfg.Observability.Listen
	if o.Listen != "" {
		listenKey, listen = "--metrics-addr", o.Listen
		errs = append(errs, config.CheckListen(listenKey, listen))
	}
	switch {
	case listen == "off":
		listen = ""
	case listen == "" && s.Kafka != nil:
		listen = DefaultListen
	}
	s.Listen = listen

	hard, missing := splitMissing(errs)
	if o.Validate {
		for _, m := range missing {
			s.Warnings = append(s.Warnings, fmt.Errorf("%w (needed at run time)", m))
		}
	} else {
		hard = append(hard, missing...)
	}
	if len(hard) > 0 {
		return s, errors.Join(hard...)
	}
	return s, nil
}

// srcKeyOf is the key errors of a Kafka source's connection settings
// name: the URL's key, or none for the section, whose keys its errors
// name.
func srcKeyOf(k *kafka.Config, urlKey string) string {
	if k.Keys != nil {
		return ""
	}
	return urlKey
}

// prefixed returns err's errors, each prefixed with key unless it is "".
func prefixed(key string, err error) []error {
	var out []error
	for _, e := range flatten(err) {
		if key != "" {
			var m *secrets.MissingError
			if errors.As(e, &m) {
				e = &secrets.MissingError{Key: key + ": " + m.Key, Err: m.Err}
			} else {
				e = fmt.Errorf("%s: %w", key, e)
			}
		}
		out = append(out, e)
	}
	return out
}

// flatten returns the errors errors.Join put together, one by one.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// Errors returns the errors err holds, one per problem.
func Errors(err error) []error { return flatten(err) }

// splitMissing sorts errors into those that stand and those that say
// run-time material is not there (*secrets.MissingError).
func splitMissing(errs []error) (hard, missing []error) {
	for _, e := range flatten(errors.Join(errs...)) {
		var m *secrets.MissingError
		if errors.As(e, &m) {
			missing = append(missing, e)
		} else {
			hard = append(hard, e)
		}
	}
	return hard, missing
}

// kafkaSection returns the Kafka source that source.kafka describes.
func kafkaSection(k config.Kafka) kafka.Config {
	return kafka.Config{Brokers: k.Brokers, Topics: k.Topics, Regex: k.Regex, Group: k.Group, Start: k.Start, OnGap: k.OnGap, OnClaimError: k.OnClaimError,
		ClientID: k.ClientID, InstanceID: k.InstanceID, SessionTimeout: time.Duration(k.SessionTimeout),
		MetadataMaxAge: time.Duration(k.MetadataMaxAge), FetchMaxWait: time.Duration(k.FetchMaxWait),
		FetchMaxBytes: int32(k.FetchMaxBytes), FetchMaxPartitionBytes: int32(k.FetchMaxPartitionBytes),
		CommitInterval: time.Duration(k.CommitInterval),
		TLS: kafka.TLS{Enabled: k.TLS.Enabled, CAFile: k.TLS.CAFile, CertFile: k.TLS.CertFile, KeyFile: k.TLS.KeyFile,
			ServerName: k.TLS.ServerName},
		SASL: kafka.SASL{Mechanism: k.SASL.Mechanism, User: k.SASL.Username, PasswordEnv: k.SASL.PasswordEnv,
			PasswordFile: k.SASL.PasswordFile},
		Keys: kafkaSectionKeys,
	}
}

// kafkaSectionKeys names source.kafka's keys by the URL parameters they
// stand for.
var kafkaSectionKeys = map[string]string{
	"brokers": "source.kafka.brokers", "topics": "source.kafka.topics", "group": "source.kafka.group",
	"start": "source.kafka.start", "on_gap": "source.kafka.on_gap", "on_claim_error": "source.kafka.on_claim_error", "tls_ca": "source.kafka.tls.ca_file", "tls_cert": "source.kafka.tls.cert_file",
	"tls_key": "source.kafka.tls.key_file", "sasl": "source.kafka.sasl.mechanism", "sasl_user": "source.kafka.sasl.username",
	"sasl_password_env": "source.kafka.sasl.password_env", "sasl_password_file": "source.kafka.sasl.password_file",
}

// UseLake says where the lake is (the sink URL) to a plan whose routes
// commit to Iceberg: without a sink.iceberg.warehouse, Iceberg finds the
// files where the lake is, the lake's settings saying how (properties set
// in the config win). When the warehouse is the lake's root, commits that
// append are written in process (package iceappend).
func (p *Plan) UseLake(sinkURL string) error {
	if p.iceberg == nil {
		return nil
	}
	norm, _ := lake.NormalizeURL(sinkURL)
	wh, props, err := lakehouse.WarehouseOf(norm)
	if p.iceberg.Warehouse != "" {
		p.icebergInLake = err == nil && strings.TrimSuffix(wh, "/") == strings.TrimSuffix(p.iceberg.Warehouse, "/")
		return nil
	}
	if err != nil {
		return fmt.Errorf("sink.iceberg.warehouse: %w", err)
	}
	p.iceberg.Warehouse, p.icebergInLake = wh, true
	for k, v := range props {
		if _, set := p.iceberg.Properties[k]; !set {
			if p.iceberg.Properties == nil {
				p.iceberg.Properties = map[string]string{}
			}
			p.iceberg.Properties[k] = v
		}
	}
	return nil
}
