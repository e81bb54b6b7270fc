// The bounds over all open files: the memory they hold (their builders,
// frozen rows and spilled runs) and their number. Idle files spill first;
// what still exceeds a bound is written.

package batch

import (
	"cmp"
	"context"
	"slices"
)

// halfOf is the default freeze limit: a file freezes its rows until they
// would take half of what its builders would (see buffer.freezeLimit).
func halfOf(n int64) int64 { return n / 2 }

// account takes buf's footprint into the memory bound. The bound counts
// what the buffer holds, not the input: a Connect schema repeated in every
// message costs nothing here, and an open buffer's builders cost
// something before any row.
func (b *Batcher) account(buf *buffer) {
	mem := buf.footprint()
	b.held.Add(mem - buf.held)
	buf.held = mem
	if d := buf.spilledBytes - buf.heldSpilled; d != 0 {
		b.spilledHeld.Add(d)
		buf.heldSpilled = buf.spilledBytes
	}
}

// unaccount takes buf, no longer open, out of the memory bound.
func (b *Batcher) unaccount(buf *buffer) {
	b.held.Add(-buf.held)
	b.spilledHeld.Add(-buf.heldSpilled)
	buf.heldSpilled = 0
}

// Memory is what the batcher holds against Config.MaxBufferedBytes.
type Memory struct {
	// Buffered is what open files and files being written hold; Spilled
	// the part of it that open files keep as compressed rows.
	Buffered, Spilled int64
	// Bound is Config.MaxBufferedBytes.
	Bound int64
}

// Memory returns what the batcher holds now.
func (b *Batcher) Memory() Memory {
	return Memory{Buffered: b.held.Load() + b.inflight.Load(), Spilled: b.spilledHeld.Load(), Bound: b.bound.Load()}
}

// openBuf is an open buffer of a partition, as enforceBounds sees it.
type openBuf struct {
	p   *partition
	buf *buffer
	// used, held and the flags are read under its partition's lock.
	used, held int64
	// forced: it repeats a recorded cut; spillable: it has builders.
	forced, spillable bool
}

// openBuffers returns every open buffer, in the order of their latest
// rows. The slice is reused by the next call; b.mu is held.
func (b *Batcher) openBuffers() []openBuf {
	out := b.obufs[:0]
	b.parts.Range(func(_, v any) bool {
		p := v.(*partition)
		p.mu.Lock()
		for _, buf := range p.open {
			out = append(out, openBuf{p: p, buf: buf, used: buf.used, held: buf.held,
				forced: buf.forced != nil, spillable: buf.forced == nil && buf.rb != nil})
		}
		p.mu.Unlock()
		return true
	})
	slices.SortFunc(out, func(x, y openBuf) int { return cmp.Compare(x.used, y.used) })
	b.obufs = out
	return out
}

// overBounds reports whether the open files are over a bound, or open
// and in-flight files together over the memory bound.
func (b *Batcher) overBounds() bool {
	bound, held := b.bound.Load(), b.held.Load()
	return held > bound || b.nopen.Load() > int64(b.cfg.MaxOpenFiles) ||
		(b.cfg.Writers > 0 && b.inflight.Load() > 0 && held+b.inflight.Load() > bound)
}

// enforceBounds brings the open files back under the bounds. Over the
// memory bound, buffers give their builders back (spill: the files stay
// open, their rows kept compressed), those idle the longest first, so that
// the tables being written keep theirs, until three quarters of the bound;
// if spilled rows alone still exceed that, the largest files are written.
// Buffers repeating a recorded cut are exempt: they hold no more than they
// held when the cut was made. It holds no partition's lock when called.
func (b *Batcher) enforceBounds(ctx context.Context) error {
	if !b.overBounds() {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	bound := b.bound.Load()
	if b.held.Load() > bound {
		bufs := b.openBuffers()
		defer clear(bufs) // no written buffer stays reachable
		for _, o := range bufs {
			if b.held.Load() <= bound*3/4 {
				break
			}
			if !o.spillable {
				continue
			}
			if err := b.spill(o.p, o.buf); err != nil {
				return err
			}
		}
		// The largest first; among equals, those idle the longest.
		slices.SortStableFunc(bufs, func(x, y openBuf) int { return cmp.Compare(y.held, x.held) })
		for _, o := range bufs {
			if b.held.Load() <= bound*3/4 {
				break
			}
			if o.forced {
				continue
			}
			if err := b.flushOpen(ctx, o.p, o.buf, CauseMemory); err != nil {
				return err
			}
		}
	}
	// Files being written count too: wait for writes to end while open and
	// in-flight files together are above the bound.
	for b.cfg.Writers > 0 && b.inflight.Load() > 0 && b.held.Load()+b.inflight.Load() > bound {
		<-b.wrote
	}
	// Over the open files' bound, the file idle the longest is written: a
	// file still being appended to (a table's metadata dataset, today's
	// file) stays open, one whose table moved on (yesterday's) goes.
	for b.nopen.Load() > int64(b.cfg.MaxOpenFiles) {
		p, idle := b.idlest()
		if idle == nil {
			return nil
		}
		if err := b.flushOpen(ctx, p, idle, CauseOpenFiles); err != nil {
			return err
		}
	}
	return nil
}

// idlest returns the open buffer idle the longest, but those repeating a
// recorded cut, and its partition.
func (b *Batcher) idlest() (*partition, *buffer) {
	var (
		idleP *partition
		idle  *buffer
		used  int64
	)
	b.parts.Range(func(_, v any) bool {
		p := v.(*partition)
		p.mu.Lock()
		for _, buf := range p.open {
			if buf.forced == nil && (idle == nil || buf.used < used) {
				idleP, idle, used = p, buf, buf.used
			}
		}
		p.mu.Unlock()
		return true
	})
	return idleP, idle
}

// spill makes buf, an open buffer of p, give its builders back, unless it
// was written or spilled meanwhile.
func (b *Batcher) spill(p *partition, buf *buffer) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open[buf.key] != buf || buf.rb == nil {
		return nil
	}
	before := buf.held
	if err := buf.spill(); err != nil {
		return err
	}
	b.account(buf)
	b.log.Debug("file spilled", "table", buf.key.table, "dir", buf.dir, "rows", buf.rows,
		"held_before", before, "held", buf.held)
	return nil
}

// flushOpen writes buf, an open buffer of p, unless it was written
// meanwhile.
func (b *Batcher) flushOpen(ctx context.Context, p *partition, buf *buffer, cause Cause) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open[buf.key] != buf {
		return nil
	}
	return b.flush(ctx, p, buf, cause)
}
