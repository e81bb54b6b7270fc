package batch

import (
	"context"
	"fmt"
	"sync"

	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/cdclake/cdclake/sinks"
)

// Item is a message of a run handed to AddRun: a row change C that
// resolved to table version T or, with C nil, a message that needs no
// landing (as for Skip). Size is the size of the source message.
type Item struct {
	C    *change.Change
	T    *schema.Table
	At   sinks.Position
	Size int
	// Err is set by AddRun to a *RowError for a row that does not
	// convert; the caller dead-letters it.
	Err error
}

// boundsEvery is the length of the groups of offsets a run enforces the
// bounds at: before its first message of each group.
const boundsEvery = 64

// runScratch is what AddRun reuses from segment to segment.
type runScratch struct {
	bufs    []*buffer // per message: its file, nil when it needs no landing
	touched []*buffer // the files of the segment, by their first message
	lists   [][]int   // per appender: its messages
	load    []int     // per appender: how many messages it has
	errs    []error   // per appender: its internal failure
}

// AddRun lands a run of consecutive messages of one source partition, in
// order, as Add and Skip would one at a time, but for two things:
//
//   - the rows of different files are converted on up to
//     Config.Appenders goroutines at once, each taking whole files, so
//     that one source partition keeps more than one core busy;
//   - the bounds are enforced before the first message of each group of
//     boundsEvery offsets, not after every row: where files spill or close
//     early depends on the offsets alone, never on how the input was cut
//     into runs, and the bounds may be exceeded by what the rows of one
//     group add.
//
// Rows that do not convert get their Err set and are held for holder (as
// Hold would) before any file is written; the caller dead-letters them
// and ends the hold with Release. The error is a storage failure.
func (b *Batcher) AddRun(ctx context.Context, items []Item, holder any) error {
	if len(items) == 0 {
		return nil
	}
	p := b.partition(items[0].At.Source, items[0].At.Partition)
	for len(items) > 0 {
		if err := b.failure(); err != nil {
			return err
		}
		p.mu.Lock()
		g := items[0].At.Offset / boundsEvery
		due := g != p.bounded
		p.bounded = g
		p.mu.Unlock()
		if due {
			if err := b.enforceBounds(ctx); err != nil {
				return err
			}
		}
		n, err := func() (int, error) {
			p.mu.Lock()
			defer p.mu.Unlock() // also when segment panics, for Close
			return b.segment(ctx, p, items, holder)
		}()
		if err != nil {
			return err
		}
		items = items[n:]
	}
	return nil
}

// segment lands the first messages of items, up to the end of their group
// of offsets or the first row that fills its file (which it writes), and
// returns how many; p's lock is held.
func (b *Batcher) segment(ctx context.Context, p *partition, items []Item, holder any) (int, error) {
	if p.replay != nil || p.fenced {
		return 1, b.single(ctx, p, &items[0], holder)
	}
	rs := &p.run
	defer rs.reset()
	// Which file each row goes to, in order: the buffers and the counters
	// that say when a file is full are the batcher's, as for Add.
	end, fill := len(items), -1
	for i := range items {
		it := &items[i]
		it.Err = nil
		if i > 0 && it.At.Offset/boundsEvery != p.bounded {
			end = i
			break
		}
		p.tracker.seen(it.At.Offset)
		if it.C == nil {
			rs.bufs = append(rs.bufs, nil)
			continue
		}
		tc := b.tables(it.T.Name)
		buf, _ := b.openBuffer(p, tc, it.C, it.T, it.At)
		buf.used = b.appends.Add(1)
		if buf.planned == 0 {
			rs.touched = append(rs.touched, buf)
		}
		buf.planned++
		buf.plannedBytes += int64(it.Size)
		rs.bufs = append(rs.bufs, buf)
		if full(buf, tc) {
			end, fill = i+1, i
			break
		}
	}
	err := b.appendSegment(p, items[:end])
	for _, buf := range rs.touched {
		buf.planned, buf.plannedBytes = 0, 0
		b.account(buf)
	}
	if err != nil {
		return end, err
	}
	for i := range items[:end] {
		if items[i].Err != nil {
			p.tracker.open(items[i].At.Offset, holder)
		}
	}
	if fill >= 0 {
		if err := b.flush(ctx, p, rs.bufs[fill], limitCause(rs.bufs[fill], b.tables(rs.bufs[fill].key.table))); err != nil {
			return end, err
		}
	}
	return end, nil
}

// appendSegment appends the rows of items to their files (p.run.bufs), on
// up to Config.Appenders goroutines, each taking whole files and their
// rows in order; p's lock is held.
func (b *Batcher) appendSegment(p *partition, items []Item) error {
	rs := &p.run
	h := min(b.cfg.Appenders, len(rs.touched))
	if h <= 1 {
		for i := range items {
			if buf := rs.bufs[i]; buf != nil {
				if err := b.appendItem(p.checks[0], buf, &items[i]); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for len(p.checks) < h {
		p.checks = append(p.checks, newChecks(b.mem))
	}
	for len(rs.lists) < h {
		rs.lists, rs.load, rs.errs = append(rs.lists, nil), append(rs.load, 0), append(rs.errs, nil)
	}
	// Files go to the appender with the fewest rows so far, in the order
	// of their first rows.
	for _, buf := range rs.touched {
		k := 0
		for j := 1; j < h; j++ {
			if rs.load[j] < rs.load[k] {
				k = j
			}
		}
		buf.appender = k
		rs.load[k] += buf.planned
	}
	for i := range items {
		if buf := rs.bufs[i]; buf != nil {
			rs.lists[buf.appender] = append(rs.lists[buf.appender], i)
		}
	}
	var wg sync.WaitGroup
	run := func(k int) {
		for _, i := range rs.lists[k] {
			if err := b.appendItem(p.checks[k], rs.bufs[i], &items[i]); err != nil {
				rs.errs[k] = err
				return
			}
		}
	}
	for k := 1; k < h; k++ {
		wg.Go(func() { run(k) })
	}
	run(0)
	wg.Wait()
	for k := range h {
		if err := rs.errs[k]; err != nil {
			return err
		}
	}
	return nil
}

// appendItem appends the row of it to buf, and hands full runs of rows
// to the file's encoder.
func (b *Batcher) appendItem(chk *checks, buf *buffer, it *Item) error {
	rowErr, err := buf.append(it.C, it.At, it.Size, chk)
	if err != nil {
		return err
	}
	if err := b.encodeRows(buf); err != nil {
		return fmt.Errorf("encoding a file of %s: %w", buf.table.Name, err)
	}
	if rowErr != nil {
		it.Err = &RowError{Err: rowErr}
	}
	return nil
}

// single lands one message of a run the way Add or Skip does, for a
// partition replaying recorded cuts or fenced; p's lock is held.
func (b *Batcher) single(ctx context.Context, p *partition, it *Item, holder any) error {
	it.Err = nil
	if p.fenced {
		return nil
	}
	if it.C == nil {
		p.tracker.seen(it.At.Offset)
		return b.settle(ctx, p, it.At)
	}
	err := b.add(ctx, p, it.C, it.T, it.At, it.Size, holder)
	if rowErr, ok := err.(*RowError); ok {
		it.Err = rowErr
		return nil
	}
	return err
}

func (rs *runScratch) reset() {
	clear(rs.bufs)
	clear(rs.touched)
	rs.bufs, rs.touched = rs.bufs[:0], rs.touched[:0]
	for k := range rs.lists {
		rs.lists[k], rs.load[k], rs.errs[k] = rs.lists[k][:0], 0, nil
	}
}

// dirMicros is the time a change's partition directory comes from: the
// change's, else its record's, else the epoch; the input's alone, so that
// a replay at another time writes the same objects.
func dirMicros(c *change.Change) int64 {
	if c.HasTS {
		return c.TSMicros
	}
	return c.RecordMicros
}
