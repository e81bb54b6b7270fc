// When a file closes: its size limits (full), its age (expired), and a
// DDL or schema change of its table (CloseTable).

package batch

import (
	"context"
	"slices"
)

// full reports whether buf reached a size limit of its table, tc, counting
// the rows and bytes a run has planned for it but not appended yet
// (AddRun): the file is written after its latest row. A file repeating a
// recorded cut (a replay) is never full: it closes at the cut's end.
func full(buf *buffer, tc *TableConfig) bool {
	return buf.forced == nil && (buf.rows+buf.planned >= tc.MaxRows || buf.bytes+buf.plannedBytes >= tc.MaxBytes)
}

// expired reports whether buf is older than its table's max age at now
// (unix nanoseconds). A file repeating a recorded cut never expires.
func expired(buf *buffer, now int64) bool {
	return buf.maxAge > 0 && now-buf.born >= buf.maxAge && buf.forced == nil
}

// limitCause is why a file that reached a limit of tc closes.
func limitCause(buf *buffer, tc *TableConfig) Cause {
	if buf.rows >= tc.MaxRows {
		return CauseRows
	}
	return CauseBytes
}

// CloseTable writes every open file of a table (on DDL or schema change,
// the cause), whatever its source partition, but for the files of recorded
// cuts a replay repeats: they close at their recorded last offset, since
// when a DDL of another partition arrives depends on timing alone.
func (b *Batcher) CloseTable(ctx context.Context, table string, cause Cause) error {
	return b.flushWhere(ctx, cause, func(p *partition) []*buffer {
		bufs := slices.DeleteFunc(slices.Clone(p.byTable[table]), func(buf *buffer) bool { return buf.forced != nil })
		sortBuffers(bufs)
		return bufs
	})
}

// flushWhere writes the open files pick returns, a partition after
// another, each partition's oldest first; pick runs under the
// partition's lock.
func (b *Batcher) flushWhere(ctx context.Context, cause Cause, pick func(*partition) []*buffer) error {
	for _, p := range b.partitions() {
		err := func() error {
			p.mu.Lock()
			defer p.mu.Unlock()
			for _, buf := range pick(p) {
				if err := b.flush(ctx, p, buf, cause); err != nil {
					return err
				}
			}
			return nil
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

// FlushExpired writes files older than their table's max age.
func (b *Batcher) FlushExpired(ctx context.Context) error {
	now := b.now().UnixNano()
	return b.flushWhere(ctx, CauseAge, func(p *partition) []*buffer {
		if p.aging == 0 {
			return nil
		}
		return p.sorted(func(buf *buffer) bool { return expired(buf, now) })
	})
}
