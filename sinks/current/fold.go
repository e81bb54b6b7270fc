package current

import (
	"container/heap"
	"fmt"
	"hash/fnv"
	"slices"
)

// Operations as they land in _cdc_op.
const (
	opInsert   = "INSERT"
	opUpdate   = "UPDATE"
	opUpsert   = "UPSERT"
	opRead     = "READ"
	opDelete   = "DELETE"
	opTruncate = "TRUNCATE"
)

// ref names where a column's value lives: row row of input in. in < 0:
// no change ever carried the column for this row (its value is unknown).
type ref struct{ in, row int32 }

var unknown = ref{in: -1}

// meta is what a state row keeps of the change that made it last.
type meta struct {
	op     string
	ts     int64
	hasTS  bool
	source string
	part   int32
	off    int64
}

// stateRow is one key's current row: a reference per column.
type stateRow struct {
	vals []ref // by column number; short: the rest unknown
	last meta
}

// change is one change row, decoded enough to fold it.
type change struct {
	meta
	in, row int32
	key     string   // the key the change leaves a row under (after, or before for a DELETE)
	oldKey  string   // the key the row had before (a key change), when it differs from key
	movedTo string   // a DELETE's: the key its row moves to (Debezium's key change, in two events)
	absent  []string // columns the after image did not carry
}

// state is a table's current rows by key.
type state struct {
	rows map[string]*stateRow
	// moved holds the rows a key change's DELETE removed, by the key they
	// move to, until the change's other half (a CREATE with the old key)
	// comes.
	moved map[string]*stateRow
	// cols maps an input's columns to column numbers: cols[in][i] is the
	// column number of the input's i-th column, named names[it].
	cols  [][]int
	names []string
}

// apply folds one change into the state.
func (s *state) apply(c *change) error {
	switch c.op {
	case opTruncate:
		clear(s.rows)
		clear(s.moved)
	case opDelete:
		if r, ok := s.rows[c.key]; ok && c.movedTo != "" {
			if s.moved == nil {
				s.moved = map[string]*stateRow{}
			}
			s.moved[c.movedTo] = r
		}
		delete(s.rows, c.key)
	case opInsert, opUpdate, opUpsert, opRead:
		r := s.rows[c.key]
		if c.oldKey != "" {
			// A key change: the row moves, with the values the after
			// image does not carry (unchanged TOAST values, partial
			// images). Its DELETE half may have come first.
			old, ok := s.rows[c.oldKey]
			if ok {
				delete(s.rows, c.oldKey)
			} else if old, ok = s.moved[c.key]; ok {
				delete(s.moved, c.key)
			}
			if r == nil && ok {
				r = old
			}
		}
		if r == nil {
			r = &stateRow{}
		}
		s.rows[c.key] = r
		for _, col := range s.cols[c.in] {
			if containsString(c.absent, s.names[col]) {
				continue
			}
			for len(r.vals) <= col {
				r.vals = append(r.vals, unknown)
			}
			r.vals[col] = ref{c.in, c.row}
		}
		r.last = c.meta
	default:
		return fmt.Errorf("%s partition %d offset %d: operation %q is none of %s, %s, %s, %s, %s, %s",
			c.source, c.part, c.off, c.op, opInsert, opUpdate, opUpsert, opRead, opDelete, opTruncate)
	}
	return nil
}

// bucketOf returns the bucket a key's row lives in.
func bucketOf(key string, buckets int) int {
	h := fnv.New64a()
	h.Write([]byte(key))
	return int(h.Sum64() % uint64(buckets))
}

// stream is one source partition's changes, in offset order.
type stream struct {
	changes []*change
	next    int
}

// merged is a heap of streams by the time of their next change, then
// source and partition: each partition's changes stay in offset order,
// and partitions interleave by source operation time.
type merged []*stream

func (m merged) Len() int { return len(m) }
func (m merged) Less(i, j int) bool {
	a, b := m[i].changes[m[i].next], m[j].changes[m[j].next]
	if a.ts != b.ts {
		return a.ts < b.ts
	}
	if a.source != b.source {
		return a.source < b.source
	}
	return a.part < b.part
}
func (m merged) Swap(i, j int) { m[i], m[j] = m[j], m[i] }
func (m *merged) Push(x any)   { *m = append(*m, x.(*stream)) }
func (m *merged) Pop() any {
	old := *m
	x := old[len(old)-1]
	*m = old[:len(old)-1]
	return x
}

// inOrder returns the changes in the order they fold: by offset within a
// source partition, and partitions merged by operation time.
func inOrder(changes []*change) []*change {
	byPart := map[[2]any]*stream{}
	var m merged
	for _, c := range changes {
		k := [2]any{c.source, c.part}
		s := byPart[k]
		if s == nil {
			s = &stream{}
			byPart[k] = s
			m = append(m, s)
		}
		s.changes = append(s.changes, c)
	}
	for _, s := range m {
		slices.SortStableFunc(s.changes, func(a, b *change) int {
			switch {
			case a.off < b.off:
				return -1
			case a.off > b.off:
				return 1
			}
			return 0
		})
	}
	heap.Init(&m)
	out := make([]*change, 0, len(changes))
	for m.Len() > 0 {
		s := m[0]
		out = append(out, s.changes[s.next])
		s.next++
		if s.next == len(s.changes) {
			heap.Pop(&m)
		} else {
			heap.Fix(&m, 0)
		}
	}
	return out
}
