// Writing a file: recording its cut, encoding and storing it in line or
// on the writer pool beside the appends, and counting it.

package batch

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/state"
)

// writeAll writes bufs of p, in order; p's lock is held.
func (b *Batcher) writeAll(ctx context.Context, p *partition, bufs []*buffer, cause Cause) error {
	b.finishEncoders(bufs)
	for i, buf := range bufs {
		bufs[i] = nil // written: its memory is free to go
		if err := b.flush(ctx, p, buf, cause); err != nil {
			return err
		}
	}
	return nil
}

// finishEncoders encodes bufs, files about to be written, to their end
// (starting an encoder for those that have none) on a goroutine per core,
// and returns when they are done: the files written in line after it (a
// journaled partition's, in order) then only store what was encoded. A
// failure is the file's write's.
func (b *Batcher) finishEncoders(bufs []*buffer) {
	if b.encoding == nil {
		return
	}
	slots := make(chan struct{}, runtime.GOMAXPROCS(0))
	var done sync.WaitGroup
	for _, buf := range bufs {
		// Files with spilled or frozen rows are left to their writes,
		// which decode those one file at a time.
		if len(buf.spilled) > 0 || buf.frozen.rows > 0 || (buf.enc == nil && !buf.live()) || b.startEncoding(buf) != nil {
			continue
		}
		parts, err := buf.parts()
		if err != nil {
			continue
		}
		buf.seal()
		slots <- struct{}{}
		done.Add(1)
		go func() {
			defer done.Done()
			if enc, err := buf.enc.finish(); err == nil {
				_ = enc.Finish(parts)
			}
			<-slots
		}()
	}
	done.Wait()
}

// waitWrites waits, holding no partition's lock, until every file being
// written is stored, and returns the first write failure.
func (b *Batcher) waitWrites() error {
	b.writes.Wait()
	return b.failure()
}

// flush writes buf, a buffer of p closed for cause, and forgets it; p's
// lock is held. On failure buf is kept open (its rows are not durable) and
// the error returned.
//
// A file of a partition handed over between instances (journaled) is
// recorded before it is written (Journal.Intend), created once, and
// recorded as written after (Journal.Done); any other file is written
// in line or, with Config.Writers, on the writer pool.
func (b *Batcher) flush(ctx context.Context, p *partition, buf *buffer, cause Cause) error {
	if err := b.failure(); err != nil {
		return err
	}
	if p.open[buf.key] != buf {
		return nil // dropped: its partition was fenced
	}
	// The built record stays with the buffer until it is written, so a
	// failed write can be retried with the same rows; spilled rows are
	// decoded for this write and released after it.
	parts, err := buf.parts()
	if err != nil {
		return err
	}
	buf.seal()
	spilled := parts[:len(buf.spilled)]
	owned := true
	defer func() {
		if owned {
			releaseParts(spilled)
		}
	}()
	f := b.fileOf(buf, parts)
	journaled := f.Rows > 0 && b.journal != nil && b.journal.Owns(buf.src.Source, buf.src.Partition)
	if f.Rows > 0 && b.journal != nil && !journaled {
		// Every file of a partition handed over between instances must be
		// recorded; one that is not could be rewritten with other rows.
		b.log.Warn("writing a file of a partition this instance has not claimed",
			"key", f.Key, "partition", buf.src.Partition)
	}
	cut := state.Cut{Key: f.Key, Table: buf.table.Name, Fingerprint: buf.table.Fingerprint,
		First: buf.src.Offset, Last: buf.last, Rows: f.Rows}
	buf.offsets.record(&cut)
	if journaled {
		if err := b.journal.Intend(ctx, buf.src.Source, buf.src.Partition, cut); err != nil {
			if errors.Is(err, state.ErrFenced) {
				b.fence(p, buf.src, f.Key, err)
				return nil
			}
			return fmt.Errorf("recording the cut of %s: %w", f.Key, err)
		}
	}
	if f.Rows > 0 && !journaled && b.cfg.Writers > 0 {
		p.detach(buf)
		b.nopen.Add(-1)
		owned = false
		b.writeBeside(ctx, p, buf, f, spilled, cause)
		return nil
	}
	var n int64
	var took time.Duration
	if f.Rows > 0 {
		start := time.Now()
		var fenced bool
		if n, fenced, err = b.writeInLine(ctx, p, buf, f, &cut, journaled); fenced || err != nil {
			return err
		}
		took = time.Since(start)
	}
	return b.wroteInLine(ctx, p, buf, f, cut, journaled, n, cause, took)
}

// fileOf returns the file of buf's rows, parts (the spilled runs and the
// builders' rows), after those its encoder holds: its key, named after its
// first row that lands, and its valid rows. A row that failed conversion
// goes to the dead letters, and a replay must not name a new file after it
// when the rows that followed it are in a written file of that name
// already.
func (b *Batcher) fileOf(buf *buffer, parts []sinks.Part) *sinks.File {
	valid := buf.encodedRows
	first := buf.src
	named := buf.named
	if named {
		first.Offset = buf.first
	}
	for _, p := range parts {
		for _, r := range p.Ranges {
			valid += r[1] - r[0]
		}
		if !named && len(p.Ranges) > 0 {
			first.Offset = p.Record.Column(schema.OffsetIndex).(*array.Int64).Value(p.Ranges[0][0])
			named = true
		}
	}
	return &sinks.File{Key: buf.dir + "/" + sinks.ObjectName(first, ".parquet"),
		Table: buf.table.Name, Version: buf.table.Version, Parts: parts, Rows: valid,
		First: first, LastOffset: buf.last, Options: b.tables(buf.key.table).Write}
}

// writeInLine writes f, buf's file, on the caller's goroutine. A journaled
// file is created once (nothing replaces a file a state names, whoever
// wrote it) after checking that the partition is still this instance's.
// It reports fenced when the partition went to another instance meanwhile,
// which then writes the file.
func (b *Batcher) writeInLine(ctx context.Context, p *partition, buf *buffer, f *sinks.File, cut *state.Cut,
	journaled bool) (n int64, fenced bool, err error) {
	f.Once = journaled
	if journaled {
		src, part := buf.src.Source, buf.src.Partition
		f.Check = func(ctx context.Context) error { return b.journal.Check(ctx, src, part) }
	}
	n, err = b.write(ctx, buf, f)
	if errors.Is(err, state.ErrFenced) {
		// The partition went to another instance while the store failed:
		// the new owner writes the file.
		b.fence(p, buf.src, f.Key, err)
		return 0, true, nil
	}
	if errors.Is(err, sinks.ErrExists) && buf.forced != nil && buf.last == buf.forced.Last && f.Rows == buf.forced.Rows {
		// The previous owner, which recorded this cut, wrote it meanwhile
		// (it lost the partition during its upload): the same rows are
		// there.
		b.log.Info("a file repeating a recorded cut was written by the instance that recorded it", "key", f.Key)
		err = nil
		cut.Runs, cut.Bits = nil, "" // what the file holds is that instance's: a claim reads it
	}
	if errors.Is(err, sinks.ErrExists) {
		return 0, false, fmt.Errorf("writing %s (%d rows): another instance, which lost the partition, wrote other rows under its name; "+
			"the file is left as it is and the run stops: %w", f.Key, f.Rows, err)
	}
	if err != nil {
		return 0, false, fmt.Errorf("writing %s (%d rows): %w", f.Key, f.Rows, err)
	}
	return n, false, nil
}

// wroteInLine forgets buf, whose file f was written in line (or had no valid
// row), records a journaled file as written with the partition's durable
// offset, and counts it.
func (b *Batcher) wroteInLine(ctx context.Context, p *partition, buf *buffer, f *sinks.File, cut state.Cut, journaled bool,
	n int64, cause Cause, took time.Duration) error {
	p.detach(buf)
	b.nopen.Add(-1)
	b.unaccount(buf)
	b.handOver(p, buf, f, n)
	p.tracker.close(buf)
	buf.release()
	if journaled {
		durable, _ := p.tracker.durable()
		b.log.Debug("file recorded", "key", f.Key, "first", cut.First, "last", cut.Last, "durable", durable)
		if err := b.journal.Done(ctx, buf.src.Source, buf.src.Partition, cut, durable); err != nil {
			if errors.Is(err, state.ErrFenced) {
				// The file holds the rows the new owner's replay puts in
				// it: that replay repeats this file's recorded cut.
				b.fence(p, buf.src, f.Key, err)
				return nil
			}
			return fmt.Errorf("recording %s as written: %w", f.Key, err)
		}
	}
	b.count(buf, f, n, cause, took)
	return nil
}

// write stores f, the file of buf, after the rows buf's encoder holds,
// if it has one.
func (b *Batcher) write(ctx context.Context, buf *buffer, f *sinks.File) (int64, error) {
	if buf.enc != nil {
		enc, err := buf.enc.finish()
		if err != nil {
			return 0, err
		}
		f.Encoder = enc
	}
	return b.sink.Write(ctx, f)
}

// writeBeside writes the detached buf of p as f on a goroutine of its own,
// at most Config.Writers at once, and releases the decoded spilled parts.
// Its rows stay pending in p's tracker, and its bytes in the memory bound,
// until f is stored.
func (b *Batcher) writeBeside(ctx context.Context, p *partition, buf *buffer, f *sinks.File, spilled []sinks.Part, cause Cause) {
	b.unaccount(buf)
	b.inflight.Add(buf.held)
	b.slots <- struct{}{} // a writer's token is returned before it takes p's lock
	b.writes.Add(1)
	go func() {
		defer b.writes.Done()
		start := time.Now()
		n, err := b.write(ctx, buf, f)
		took := time.Since(start)
		releaseParts(spilled)
		// The detached buffer is this goroutine's: its memory goes
		// before the partition's lock is taken, which FlushAll holds
		// while it writes the partition's other files.
		buf.release()
		<-b.slots
		b.inflight.Add(-buf.held)
		select {
		case b.wrote <- struct{}{}:
		default:
		}
		if err != nil {
			b.fail(fmt.Errorf("writing %s (%d rows): %w", f.Key, f.Rows, err))
			return
		}
		// Told before the rows count as durable: whoever reads the
		// counters after an offset commit sees the file.
		b.count(buf, f, n, cause, took)
		p.mu.Lock()
		b.handOver(p, buf, f, n)
		p.tracker.close(buf)
		p.mu.Unlock()
	}()
}

// handOver hands f, the written file of buf (n bytes), to Config.Commit
// when its table is committed to a table format, holding its first offset
// from counting as durable until the commit releases it; p's lock is held.
func (b *Batcher) handOver(p *partition, buf *buffer, f *sinks.File, n int64) {
	if f.Rows == 0 || b.cfg.Commit == nil || !b.tables(buf.key.table).Commit {
		return
	}
	c := &Committing{Key: f.Key, Table: buf.table.Name, Schema: buf.table.Arrow,
		Source: buf.src.Source, Partition: buf.src.Partition, First: buf.src.Offset, Bytes: n, Footer: f.Footer}
	p.tracker.open(c.First, c)
	b.cfg.Commit(c)
}

// count adds a written file to its table's counters and tells
// Config.Written.
func (b *Batcher) count(buf *buffer, f *sinks.File, n int64, cause Cause, took time.Duration) {
	if f.Rows > 0 {
		b.written.Add(1)
		if b.cfg.Written != nil {
			b.cfg.Written(WrittenFile{Table: buf.key.table, Cause: cause, Rows: f.Rows, Bytes: n, Took: took})
		}
	}
	b.statsMu.Lock()
	defer b.statsMu.Unlock()
	st := b.stats[buf.key.table]
	if st == nil {
		st = &TableStats{Versions: map[uint64]bool{}}
		b.stats[buf.key.table] = st
	}
	st.Versions[buf.table.Fingerprint] = true
	if f.Rows > 0 {
		st.Rows += int64(f.Rows)
		st.Files++
		st.Bytes += n
		b.log.Debug("file written", "key", f.Key, "rows", f.Rows, "bytes", n)
	}
}
