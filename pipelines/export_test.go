package pipelines

import "github.com/cdclake/cdclake/sinks/lakehouse"

// WithBatchFault runs f before the batch stage takes each window, for
// tests that make the batch stage panic.
func WithBatchFault(f func()) Option {
	return WithStageFault(func(stage string) {
		if stage == "batch" {
			f()
		}
	})
}

// WithStageFault runs f before each stage takes a window, with the
// stage's name, for tests that make a stage panic.
func WithStageFault(f func(stage string)) Option { return func(o *options) { o.stageFault = f } }

// WithCommitFault runs f before each lakehouse table commit, whose error
// fails the commit, for tests of commits that fail.
func WithCommitFault(f func(table string) error) Option {
	return func(o *options) { o.commitFault = f }
}

// WithReplyFault runs f after each table commit that went in; its error
// fails the commit, as a lost reply does.
func WithReplyFault(f func(table string) error) Option {
	return func(o *options) { o.replyFault = f }
}

// WithoutAppends makes every Iceberg commit in the full committer, none
// in process (package iceappend).
func WithoutAppends() Option {
	return func(o *options) { o.noAppends = true }
}

// WithCatalog opens the lakehouse catalog with open, in the test's
// process, instead of starting cdclake-lakehouse.
func WithCatalog(open lakehouse.Opener) Option { return func(o *options) { o.catalog = open } }
