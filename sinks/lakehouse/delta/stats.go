package delta

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
)

// fileStats is an add action's stats: the row count, and per column its
// NULLs and bounds, which readers use to skip files.
type fileStats struct {
	NumRecords int64          `json:"numRecords"`
	MinValues  map[string]any `json:"minValues,omitempty"`
	MaxValues  map[string]any `json:"maxValues,omitempty"`
	NullCount  map[string]any `json:"nullCount,omitempty"`
}

// statsOf reads a landed file's stats from its Parquet footer. Columns
// reached through structs only count (not lists' or maps'). Bounds are
// given for the types whose Parquet bounds are exact and whose Delta form
// is plain: integers, dates and UTC timestamps (the minimum floored and
// the maximum raised to the millisecond, the precision readers parse);
// a column without them is never skipped, which is always correct.
func statsOf(r parquet.ReaderAtSeeker, sch *arrow.Schema) (string, int64, error) {
	rdr, err := file.NewParquetReader(r)
	if err != nil {
		return "", 0, err
	}
	defer rdr.Close()
	return statsOfMeta(rdr.MetaData(), sch)
}

// footerStats is statsOf from a file's footer (its serialized
// FileMetaData).
func footerStats(footer []byte, sch *arrow.Schema) (string, error) {
	md, err := metadata.NewFileMetaData(footer, nil)
	if err != nil {
		return "", err
	}
	stats, _, err := statsOfMeta(md, sch)
	return stats, err
}

// statsOfMeta is statsOf from a file's metadata.
func statsOfMeta(md *metadata.FileMetaData, sch *arrow.Schema) (string, int64, error) {
	st := fileStats{NumRecords: md.NumRows, MinValues: map[string]any{}, MaxValues: map[string]any{}, NullCount: map[string]any{}}
	for c := 0; c < md.Schema.NumColumns(); c++ {
		path := md.Schema.Column(c).ColumnPath()
		typ, ok := leafType(sch, path)
		if !ok {
			continue
		}
		var nulls int64
		nullsKnown, bounded := true, bounds(typ)
		var lo, hi int64
		seen := false // a row group with values was read
		for g := 0; g < md.NumRowGroups(); g++ {
			cc, err := md.RowGroup(g).ColumnChunk(c)
			if err != nil {
				return "", 0, err
			}
			set, err := cc.StatsSet()
			if err != nil || !set {
				nullsKnown, bounded = false, false
				break
			}
			s, err := cc.Statistics()
			if err != nil {
				return "", 0, err
			}
			if !s.HasNullCount() {
				nullsKnown = false
			}
			nulls += s.NullCount()
			if !bounded {
				continue
			}
			if cc.NumValues() == s.NullCount() {
				continue // every value is NULL: no bounds, nothing to widen
			}
			if !s.HasMinMax() {
				bounded = false
				continue
			}
			min, max, ok := intBounds(s)
			if !ok {
				bounded = false
				continue
			}
			if !seen || min < lo {
				lo = min
			}
			if !seen || max > hi {
				hi = max
			}
			seen = true
		}
		if nullsKnown {
			put(st.NullCount, path, nulls)
		}
		if bounded && seen {
			if lo, hi, ok := bound(typ, lo, hi); ok {
				put(st.MinValues, path, lo)
				put(st.MaxValues, path, hi)
			}
		}
	}
	b, err := json.Marshal(st)
	return string(b), md.NumRows, err
}

// leafType returns the Arrow type of the column at path, when every step
// on the way is a struct.
func leafType(sch *arrow.Schema, path []string) (arrow.DataType, bool) {
	fs := sch.Fields()
	for i, name := range path {
		var f *arrow.Field
		for j := range fs {
			if fs[j].Name == name {
				f = &fs[j]
				break
			}
		}
		if f == nil {
			return nil, false
		}
		if i == len(path)-1 {
			return f.Type, true
		}
		st, ok := f.Type.(*arrow.StructType)
		if !ok {
			return nil, false
		}
		fs = st.Fields()
	}
	return nil, false
}

// bounds reports whether a column of type t gets bounds.
func bounds(t arrow.DataType) bool {
	switch t := t.(type) {
	case *arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type, *arrow.Int64Type, *arrow.Date32Type:
		return true
	case *arrow.TimestampType:
		return t.TimeZone != "" && t.Unit != arrow.Nanosecond
	}
	return false
}

// intBounds returns the bounds of an INT32 or INT64 column chunk.
func intBounds(s metadata.TypedStatistics) (int64, int64, bool) {
	switch s := s.(type) {
	case *metadata.Int32Statistics:
		return int64(s.Min()), int64(s.Max()), true
	case *metadata.Int64Statistics:
		return s.Min(), s.Max(), true
	}
	return 0, 0, false
}

// bound returns the stats values of the bounds of a column of type t;
// none for dates and timestamps outside years 1–9999, which readers
// cannot parse (PostgreSQL's infinities land as the extreme values).
func bound(t arrow.DataType, lo, hi int64) (any, any, bool) {
	inRange := func(tm time.Time) bool { return tm.Year() >= 1 && tm.Year() <= 9999 }
	switch t := t.(type) {
	case *arrow.Date32Type:
		l, h := time.Unix(lo*86400, 0).UTC(), time.Unix(hi*86400, 0).UTC()
		if !inRange(l) || !inRange(h) {
			return nil, nil, false
		}
		return l.Format("2006-01-02"), h.Format("2006-01-02"), true
	case *arrow.TimestampType:
		per := map[arrow.TimeUnit]int64{arrow.Second: 1, arrow.Millisecond: 1_000, arrow.Microsecond: 1_000_000}[t.Unit]
		ms := func(v int64, up bool) time.Time {
			sec, frac := v/per, v%per
			if frac < 0 {
				sec, frac = sec-1, frac+per
			}
			milli := frac * 1000 / per
			if up && milli*per != frac*1000 {
				milli++
			}
			return time.Unix(sec, milli*int64(time.Millisecond)).UTC()
		}
		l, h := ms(lo, false), ms(hi, true)
		if !inRange(l) || !inRange(h) {
			return nil, nil, false
		}
		const layout = "2006-01-02T15:04:05.000Z07:00"
		return l.Format(layout), h.Format(layout), true
	}
	return lo, hi, true
}

// put sets the value at path in nested stats maps.
func put(m map[string]any, path []string, v any) {
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}

// statsError names the file whose footer a stat could not be read from.
func statsError(key string, err error) error {
	return fmt.Errorf("reading the statistics of %s: %w", strings.TrimPrefix(key, "/"), err)
}
