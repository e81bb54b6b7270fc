package pipelines

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"

	"github.com/cdclake/cdclake/handlers/avro"
	"github.com/cdclake/cdclake/pipelines/source/kafka"
	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/lake"
	"github.com/cdclake/cdclake/sinks/lakehouse"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// ProbeDir is where CheckConnections writes its probe object.
const ProbeDir = "_cdclake/probe"

// CheckConnections connects to what the setup names, as "cdclake validate
// --check-connections" does: the brokers (the topics exist, or a regular
// expression matches one), the dead letters' topic, the schema registry,
// and the bucket, where it creates a probe object twice to see that the
// store refuses the second create (exactly-once relies on create-once
// writes), then deletes it; and, for routes with a table format, the
// lakehouse catalog, which it opens. It returns every problem, each naming
// what it is about.
func (s *Setup) CheckConnections(ctx context.Context) []error {
	var errs []error
	if k := s.Kafka; k != nil {
		errs = append(errs, prefixed("source", checkTopics(ctx, *k, k.Topics, k.Regex))...)
	}
	if dl := s.Plan.deadLetters; dl != nil {
		errs = append(errs, prefixed("sink.dead_letters", checkTopics(ctx, *dl, dl.Topics, false))...)
	}
	if codec := s.Plan.avro; codec != nil {
		if reg, ok := codec.Registry().(*avro.HTTPRegistry); ok {
			if err := reg.Ping(ctx); err != nil {
				errs = append(errs, fmt.Errorf("source.schema_registry: %w", err))
			}
		}
	}
	if err := probeBucket(ctx, s.Sink); err != nil {
		errs = append(errs, fmt.Errorf("sink: %w", err))
	}
	if ice := s.Plan.iceberg; ice != nil {
		if err := openCatalog(ctx, *ice); err != nil {
			errs = append(errs, fmt.Errorf("sink.iceberg.catalog: %w", err))
		}
	}
	return errs
}

// openCatalog starts the lakehouse committer and opens the catalog, as a
// run does (creating the catalog's tables in its database if they are
// missing), then closes it.
func openCatalog(ctx context.Context, cfg lakehouse.Config) error {
	cat, err := lakehouse.Start(ctx, cfg, slog.Default(), slog.LevelWarn, "text")
	if err != nil {
		return err
	}
	return cat.Close()
}

// checkTopics connects to the brokers of cfg and checks that the topics
// exist (with regex, that each expression matches one).
func checkTopics(ctx context.Context, cfg kafka.Config, topics []string, regex bool) error {
	opts, err := cfg.ClientOptions()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	listed, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		return fmt.Errorf("listing the topics at %v: %w", cfg.Brokers, err)
	}
	names := listed.Names()
	var errs []error
	for _, t := range topics {
		if !regex {
			if !slices.Contains(names, t) {
				errs = append(errs, fmt.Errorf("topic %q does not exist", t))
			}
			continue
		}
		re, err := regexp.Compile("^(?:" + t + ")$")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !slices.ContainsFunc(names, re.MatchString) {
			errs = append(errs, fmt.Errorf("no topic matches %q", t))
		}
	}
	return errors.Join(errs...)
}

// probeBucket opens the bucket and checks that it takes create-once
// writes (probeCreateOnce).
func probeBucket(ctx context.Context, url string) error {
	bucket, err := lake.OpenBucket(ctx, url)
	if err != nil {
		return err
	}
	defer bucket.Close()
	return probeCreateOnce(ctx, bucket, lake.New(bucket, nil), nil)
}

// probeCreateOnce creates a probe object under ProbeDir through store, checks
// that a second create of it is refused, and deletes it: exactly-once
// landing relies on the store refusing a partition state's second create,
// and a store that ignores the condition (If-None-Match) would let two
// owners of a partition write on, one over the other. A probe left behind
// for want of delete permission is logged, if log is set, and harmless.
func probeCreateOnce(ctx context.Context, bucket *blob.Bucket, store *lake.Sink, log *slog.Logger) error {
	var id [8]byte
	_, _ = rand.Read(id[:])
	key := ProbeDir + "/" + hex.EncodeToString(id[:])
	if err := store.CreateObject(ctx, key, []byte("cdclake probe\n"), "text/plain"); err != nil {
		return fmt.Errorf("creating %s: %w", key, err)
	}
	defer func() {
		if err := bucket.Delete(context.WithoutCancel(ctx), key); err != nil && log != nil {
			log.Warn("the probe of create-once writes could not be deleted: it stays, harmless", "key", key, "err", err)
		}
	}()
	err := store.CreateObject(ctx, key, []byte("cdclake probe, again\n"), "text/plain")
	switch {
	case errors.Is(err, sinks.ErrExists):
		return nil
	case err == nil:
		return fmt.Errorf("the store let %s be created twice: it ignores create-once writes (If-None-Match), on which "+
			"exactly-once landing relies", key)
	case gcerrors.Code(err) == gcerrors.Unimplemented:
		return fmt.Errorf("the store does not support create-once writes, on which exactly-once landing relies: %w", err)
	}
	return fmt.Errorf("creating %s a second time: %w", key, err)
}
