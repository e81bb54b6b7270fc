// The handover of partitions between instances: the journal of every
// file's cut points, the replay of a claimed partition (the offsets its
// written files hold, its recorded cuts repeated or their names taken, the
// files of those cuts settled) and fencing.

package batch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/state"
)

// Journal records files' cut points around their writes (package state):
// Intend before a file of an owned partition is written, Done after. The
// Batcher calls both under its lock.
type Journal interface {
	Owns(source string, part int32) bool
	Intend(ctx context.Context, source string, part int32, cut state.Cut) error
	Done(ctx context.Context, source string, part int32, cut state.Cut, durable int64) error
	// Advance records that every message below durable landed, when
	// that is past the partition's state (Checkpoint).
	Advance(ctx context.Context, source string, part int32, durable int64) error
	// Check returns an error wrapping state.ErrFenced once it knows that
	// another instance claimed the partition (asked before each retry of
	// a file's write).
	Check(ctx context.Context, source string, part int32) error
}

// replay is what a restored partition's state says of the messages a
// replay reads again: the offsets whose rows are in written files, and the
// cuts of files that were about to be written and are not there (yet).
type replay struct {
	landed []int64 // sorted
	// cuts are repeated exactly: the buffer that opens at a cut's first
	// offset, for its table version and directory, is written after the
	// cut's last offset and not before, whatever else would close it. An
	// instance that lost the partition while uploading that file may
	// still complete its upload: it then holds the same rows.
	cuts []state.Cut // by First
	// forced are the open buffers of cuts.
	forced []*buffer
}

// covered reports whether the row of the message at offset is in a written
// file (a message lands one row at most).
func (r *replay) covered(offset int64) bool {
	_, found := slices.BinarySearch(r.landed, offset)
	return found
}

// Restore prepares a claimed partition for the replay of its messages
// from its committed offset: the messages at the landed offsets (read from
// the files written above that offset) are not landed again, and the files
// of cuts (recorded as about to be written, and not found) are cut again
// at the same offsets.
func (b *Batcher) Restore(source string, part int32, landed []int64, cuts []state.Cut) {
	p := b.partition(source, part)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fenced = false
	if len(landed) == 0 && len(cuts) == 0 {
		p.replay = nil
		return
	}
	landed = slices.Clone(landed)
	slices.Sort(landed)
	cuts = slices.Clone(cuts)
	slices.SortFunc(cuts, func(a, c state.Cut) int { return cmp.Compare(a.First, c.First) })
	p.replay = &replay{landed: landed, cuts: cuts}
}

// passCuts deals with every recorded cut that begins at or before at and
// that no buffer repeats: one whose first message has passed, or that
// begins at at but that the row c of table version t (nil for a message
// that is no row now) does not open a buffer for. Such a cut's key is
// taken (takeKey), unless the replay's own file takes it: c opens a file
// in the cut's directory, named after the same first offset. p's lock is
// held; the caller returns when p.replay changed (the partition was
// fenced).
func (b *Batcher) passCuts(ctx context.Context, p *partition, at sinks.Position, c *change.Change, t *schema.Table) error {
	rp := p.replay
	for i := 0; i < len(rp.cuts) && rp.cuts[i].First <= at.Offset; {
		cut := rp.cuts[i]
		if cut.First == at.Offset && c != nil {
			key := b.bufferKey(b.tables(t.Name), c, t, at)
			if _, open := p.open[key]; !open && cut.Dir() == key.dir {
				if cut.Table == t.Name && cut.Fingerprint == t.Fingerprint {
					i++ // repeated: the buffer opened for c takes it (forcedCut)
					continue
				}
				rp.cuts = slices.Delete(rp.cuts, i, i+1)
				b.log.Warn("a recorded cut is not repeated on replay: its first row lands as another table version, in a file of the same name",
					"key", cut.Key, "first", cut.First, "last", cut.Last, "version", t.Version)
				continue
			}
		}
		rp.cuts = slices.Delete(rp.cuts, i, i+1)
		if err := b.takeKey(ctx, p, cut, t, at); err != nil || p.replay != rp {
			return err
		}
	}
	return nil
}

// takeKey deals with a recorded cut the replay does not repeat: the
// decoding state, or the route's settings, differ from those the previous
// owner cut it with, and its rows land in files of other names. The
// previous owner may still be uploading the cut's file (it lost the
// partition during the upload): an empty file now takes the name, created
// once, so that its upload fails and the rows do not land twice. A file
// already there is that upload's: its rows landed, and are passed over
// here. t, when of the cut's table, gives the empty file its columns, so
// that it reads as one more file of the table. p's lock is held.
func (b *Batcher) takeKey(ctx context.Context, p *partition, cut state.Cut, t *schema.Table, at sinks.Position) error {
	b.log.Warn("a recorded cut is not repeated on replay: its rows land in files of other names, and an empty file takes its name",
		"key", cut.Key, "first", cut.First, "last", cut.Last, "rows", cut.Rows)
	if t == nil || t.Name != cut.Table {
		t = schema.NewTable(cut.Table, 0, schema.LayoutImages, nil, nil, false, nil)
	}
	rb := array.NewRecordBuilder(b.mem, t.Arrow)
	rec := rb.NewRecordBatch()
	rb.Release()
	defer rec.Release()
	tc := b.tables(cut.Table)
	src, part := at.Source, at.Partition
	f := &sinks.File{Key: cut.Key, Table: cut.Table, Version: t.Version, Parts: []sinks.Part{{Record: rec}},
		First: sinks.Position{Source: src, Partition: part, Offset: cut.First}, LastOffset: cut.Last,
		Options: tc.Write, Once: true}
	if b.journal != nil {
		f.Check = func(ctx context.Context) error { return b.journal.Check(ctx, src, part) }
	}
	_, err := b.sink.Write(ctx, f)
	switch {
	case errors.Is(err, state.ErrFenced):
		b.fence(p, at, cut.Key, err)
		return nil
	case errors.Is(err, sinks.ErrExists):
		if b.cfg.Landed == nil {
			return fmt.Errorf("%s, a recorded cut not repeated on replay, was written meanwhile by the instance that recorded it, "+
				"and its rows cannot be read here: %w", cut.Key, err)
		}
		offs, err := b.cfg.Landed(ctx, cut.Key)
		if err != nil {
			return fmt.Errorf("reading the offsets of %s, written meanwhile by the instance that recorded its cut: %w", cut.Key, err)
		}
		b.log.Info("the file of a recorded cut not repeated was written by the instance that recorded it: its rows are not landed again",
			"key", cut.Key, "rows", len(offs))
		rp := p.replay
		rp.landed = append(rp.landed, offs...)
		slices.Sort(rp.landed)
		rp.landed = slices.Compact(rp.landed)
		return nil
	case err != nil:
		return fmt.Errorf("taking the name of %s, a recorded cut not repeated on replay: %w", cut.Key, err)
	}
	return nil
}

// forcedCut returns, and forgets, the recorded cut of a buffer opening at
// offset for table version t in dir.
func (r *replay) forcedCut(t *schema.Table, dir string, offset int64) *state.Cut {
	for i, c := range r.cuts {
		if c.First == offset && c.Table == t.Name && c.Fingerprint == t.Fingerprint && c.Dir() == dir {
			r.cuts = slices.Delete(r.cuts, i, i+1)
			return &c
		}
	}
	return nil
}

// settle deals with the recorded cuts that begin at or before offset and
// are not repeated (passCuts), and writes the files of the repeated ones
// that end at or before it: their last message was handed over. One that
// did not receive that message as its last row was cut differently than
// recorded (the decoding state differs); it is written as it is, and a
// warning says so. p's lock is held.
func (b *Batcher) settle(ctx context.Context, p *partition, at sinks.Position) error {
	rp := p.replay
	if rp == nil {
		return nil
	}
	if err := b.passCuts(ctx, p, at, nil, nil); err != nil || p.replay != rp {
		return err
	}
	for i := 0; i < len(rp.forced); {
		buf := rp.forced[i]
		if buf.forced.Last > at.Offset {
			i++
			continue
		}
		if buf.last != buf.forced.Last {
			b.log.Warn("a recorded cut ended differently on replay", "key", buf.forced.Key, "last", buf.forced.Last, "replayed_last", buf.last)
		}
		if err := b.flush(ctx, p, buf, CauseReplay); err != nil {
			return err
		}
		if p.replay != rp {
			return nil // fenced meanwhile
		}
	}
	return nil
}

// FlushPartition writes every open file of a source partition (before the
// partition moves to another consumer).
func (b *Batcher) FlushPartition(ctx context.Context, source string, part int32) error {
	p := b.partition(source, part)
	err := func() error {
		p.mu.Lock()
		defer p.mu.Unlock()
		var bufs []*buffer
		for _, buf := range p.sorted(nil) {
			if p.complete(buf) {
				bufs = append(bufs, buf)
			}
		}
		return b.writeAll(ctx, p, bufs, CauseHandover)
	}()
	return cmp.Or(err, b.waitWrites())
}

// Checkpoint records, in the state of every journaled partition that only
// selects (nil: all), its durable offset where that moved past its state:
// files held until their lakehouse commit count only once committed, so a
// file's state records less than the partition's offsets landed when its
// table's commit came later. Called after the commits at a handover and at
// the end of a run, it lets the next reader start where this one ended.
// A partition another instance took over meanwhile is left to it.
func (b *Batcher) Checkpoint(ctx context.Context, only func(source string, part int32) bool) error {
	if b.journal == nil {
		return nil
	}
	var errs []error
	for _, p := range b.partitions() {
		src, part := p.key.source, p.key.part
		if only != nil && !only(src, part) || !b.journal.Owns(src, part) {
			continue
		}
		p.mu.Lock()
		durable, ok := p.tracker.durable()
		var err error
		if ok {
			err = b.journal.Advance(ctx, src, part, durable)
		}
		p.mu.Unlock()
		if err != nil && !errors.Is(err, state.ErrFenced) {
			errs = append(errs, fmt.Errorf("%s partition %d: recording its offset %d in its state: %w", src, part, durable, err))
		}
	}
	return errors.Join(errs...)
}

// complete reports whether buf may be written before its rows reached a
// limit: always, unless it repeats a recorded cut whose last offset was not
// handed over yet. Such a buffer is left unwritten when its partition is
// handed over or the run ends; its next reader repeats the cut.
func (p *partition) complete(buf *buffer) bool {
	return buf.forced == nil || p.tracker.next > buf.forced.Last
}

// DropPartition forgets a source partition without writing its open files
// (the partition was lost to another consumer, which will read those
// messages again): its buffers are released and its positions reset.
func (b *Batcher) DropPartition(source string, part int32) {
	p := b.partition(source, part)
	p.mu.Lock()
	defer p.mu.Unlock()
	b.drop(p)
}

// drop releases p's buffers and forgets its positions; p's lock is held.
func (b *Batcher) drop(p *partition) {
	for k, buf := range p.open {
		b.unaccount(buf)
		b.nopen.Add(-1)
		buf.release()
		delete(p.open, k)
	}
	clear(p.byTable)
	p.aging = 0
	p.tracker = newTracker()
	p.replay = nil
}

// fence gives up a partition another instance took over: its open files
// are dropped unwritten, and its messages ignored until it is restored.
func (b *Batcher) fence(p *partition, at sinks.Position, key string, err error) {
	b.log.Warn("another instance took the partition over; its files here are dropped for it to write",
		"source", at.Source, "partition", at.Partition, "key", key, "err", err)
	b.drop(p)
	p.fenced = true
	b.fenced.Add(1)
	if b.cfg.Fenced != nil {
		b.cfg.Fenced(at.Source, at.Partition, key)
	}
}
