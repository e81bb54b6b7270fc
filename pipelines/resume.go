// Resuming an input landed again past what its lakehouse tables hold.

package pipelines

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"

	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/lakehouse"
)

// resumer tells, for a source without partition states in the lake (files),
// the rows a table committed to a lakehouse format holds already: those
// below the offset the table records for their source partition. A file
// source reads its inputs from their start; an input that grew since it
// was landed would otherwise be landed again whole, under the names of
// the files the table holds, the first ones with more rows than their
// entries say. Its rows below the offsets are not landed again; the rest
// lands in files of their own, as if the input had been read on from
// there.
//
// The offsets are read once per table, at its first row: the run's own
// commits move them only past what it read.
type resumer struct {
	c *committer
	// retried runs a read the landing waits for (lake.Sink.Retried).
	retried func(ctx context.Context, key string, read func() error) error
	log     *slog.Logger

	mu     sync.Mutex
	tables map[string]*floors
}

// floors are a table's offsets as the run found them, and the partitions
// whose rows below them were passed over, said once.
type floors struct {
	once     sync.Once
	err      error
	recorded map[lakehouse.Partition]int64
	told     map[lakehouse.Partition]bool
}

func newResumer(c *committer, retried func(context.Context, string, func() error) error, log *slog.Logger) *resumer {
	return &resumer{c: c, retried: retried, log: log, tables: map[string]*floors{}}
}

// holds reports whether table holds the row at at already.
func (r *resumer) holds(ctx context.Context, table string, at sinks.Position) (bool, error) {
	r.mu.Lock()
	f := r.tables[table]
	if f == nil {
		f = &floors{told: map[lakehouse.Partition]bool{}}
		r.tables[table] = f
	}
	r.mu.Unlock()
	f.once.Do(func() { f.recorded, f.err = r.offsets(ctx, table) })
	if f.err != nil {
		return false, f.err
	}
	p := lakehouse.Partition{Source: sinks.Sanitize(at.Source), Partition: at.Partition}
	below, ok := f.recorded[p]
	if !ok || at.Offset >= below {
		return false, nil
	}
	r.mu.Lock()
	tell := !f.told[p]
	f.told[p] = true
	r.mu.Unlock()
	if tell {
		r.log.Info("the table holds this input's rows below its recorded offset: they are not landed again, and landing resumes past it",
			"table", table, "source", at.Source, "partition", at.Partition, "offset", below)
	}
	return true, nil
}

// offsets reads the offsets table records, retried through an outage as
// the landing's reads are: without them, where its rows resume is unknown.
func (r *resumer) offsets(ctx context.Context, table string) (map[lakehouse.Partition]int64, error) {
	var recorded map[lakehouse.Partition]int64
	err := r.retried(ctx, table, func() error {
		v, err := r.c.view(ctx, table, nil)
		if err != nil {
			return err
		}
		r.c.mu.Lock()
		recorded = maps.Clone(v.recorded)
		r.c.mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the offsets the table %s records, past which an input landed again resumes: %w", table, err)
	}
	return recorded, nil
}
