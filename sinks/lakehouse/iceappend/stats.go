package iceappend

import (
	"encoding/binary"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

// truncateLength is how many characters of a string column's bounds are
// kept: Iceberg's default metrics mode, truncate(16).
const truncateLength = 16

// columnStats are the statistics of a file's column from its footer.
type columnStats struct {
	size, values, nulls int64
	nullsKnown          bool
	lower, upper        []byte // the Iceberg single-value forms; nil: none
	// lo and hi are an integer column's bounds (INT32 and INT64), when
	// known: a partition's source.
	lo, hi  int64
	intsSet bool
}

// fileStats reads a file's statistics from its footer, by field id of
// the table's leaves (fields of the current schema), and its split
// offsets (where its row groups start).
func fileStats(md *metadata.FileMetaData, ls map[string]leaf) (map[int]*columnStats, []int64, error) {
	out := map[int]*columnStats{}
	for c := 0; c < md.Schema.NumColumns(); c++ {
		col := md.Schema.Column(c)
		lf, ok := ls[strings.Join(col.ColumnPath(), sep)]
		if !ok {
			continue
		}
		st := &columnStats{nullsKnown: true}
		out[lf.id] = st
		bounded := lf.bounded
		var lo, hi []byte
		var ilo, ihi int64
		seen := false
		for g := 0; g < md.NumRowGroups(); g++ {
			cc, err := md.RowGroup(g).ColumnChunk(c)
			if err != nil {
				return nil, nil, err
			}
			st.size += cc.TotalCompressedSize()
			st.values += cc.NumValues()
			set, err := cc.StatsSet()
			if err != nil || !set {
				st.nullsKnown, bounded = false, false
				continue
			}
			s, err := cc.Statistics()
			if err != nil {
				return nil, nil, err
			}
			if s.HasNullCount() {
				st.nulls += s.NullCount()
			} else {
				st.nullsKnown = false
			}
			if !bounded || cc.NumValues() == s.NullCount() {
				continue // every value NULL: nothing to widen
			}
			if !s.HasMinMax() {
				bounded = false
				continue
			}
			l, h, il, ih, ok := bytesBounds(s, lf.typ, col)
			if !ok {
				bounded = false
				continue
			}
			if !seen {
				lo, hi, ilo, ihi = l, h, il, ih
			} else {
				if less(l, lo, lf.typ) {
					lo, ilo = l, il
				}
				if less(hi, h, lf.typ) {
					hi, ihi = h, ih
				}
			}
			seen = true
		}
		if bounded && seen {
			st.lo, st.hi, st.intsSet = ilo, ihi, lf.typ.Prim != "string" && lf.typ.Prim != "boolean"
			if lf.typ.Prim == "string" {
				st.lower, st.upper = truncateLower(lo), truncateUpper(hi)
			} else {
				st.lower, st.upper = lo, hi
			}
		}
	}
	var splits []int64
	for g := 0; g < md.NumRowGroups(); g++ {
		rg := md.RowGroup(g)
		off := rg.FileOffset()
		if off <= 0 && rg.NumColumns() > 0 {
			cc, err := rg.ColumnChunk(0)
			if err != nil {
				return nil, nil, err
			}
			off = cc.DataPageOffset()
			if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 {
				off = min(off, cc.DictionaryPageOffset())
			}
		}
		splits = append(splits, off)
	}
	return out, splits, nil
}

// bytesBounds returns a row group's bounds of a column in the Iceberg
// single-value form of its type, and as integers for integer types: only
// where the Parquet statistics mean the same values (a timestamp's unit
// as the Iceberg type's).
func bytesBounds(s metadata.TypedStatistics, t iceType, col *schema.Column) (lo, hi []byte, ilo, ihi int64, ok bool) {
	le4 := func(v int32) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(v)) }
	le8 := func(v int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(v)) }
	switch t.Prim {
	case "int", "date":
		if s, isInt := s.(*metadata.Int32Statistics); isInt {
			if u, isUnsigned := col.LogicalType().(schema.IntLogicalType); isUnsigned && !u.IsSigned() && (s.Min() < 0 || s.Max() < 0) {
				return nil, nil, 0, 0, false
			}
			return le4(s.Min()), le4(s.Max()), int64(s.Min()), int64(s.Max()), true
		}
	case "long":
		if s, isLong := s.(*metadata.Int64Statistics); isLong {
			if u, isInt := col.LogicalType().(schema.IntLogicalType); isInt && !u.IsSigned() {
				return nil, nil, 0, 0, false
			}
			return le8(s.Min()), le8(s.Max()), s.Min(), s.Max(), true
		}
	case "timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns":
		s, isLong := s.(*metadata.Int64Statistics)
		ts, isTS := col.LogicalType().(schema.TimestampLogicalType)
		want := schema.TimeUnitMicros
		if strings.HasSuffix(t.Prim, "_ns") {
			want = schema.TimeUnitNanos
		}
		if isLong && isTS && ts.TimeUnit() == want {
			return le8(s.Min()), le8(s.Max()), s.Min(), s.Max(), true
		}
	case "boolean":
		if s, isBool := s.(*metadata.BooleanStatistics); isBool {
			b := func(v bool) []byte {
				if v {
					return []byte{1}
				}
				return []byte{0}
			}
			return b(s.Min()), b(s.Max()), 0, 0, true
		}
	case "string":
		if s, isBytes := s.(*metadata.ByteArrayStatistics); isBytes && col.PhysicalType() == parquet.Types.ByteArray &&
			utf8.Valid(s.Min()) && utf8.Valid(s.Max()) {
			return append([]byte(nil), s.Min()...), append([]byte(nil), s.Max()...), 0, 0, true
		}
	}
	return nil, nil, 0, 0, false
}

// less compares two bounds of a column of type t.
func less(a, b []byte, t iceType) bool {
	switch t.Prim {
	case "int", "date":
		return int32(binary.LittleEndian.Uint32(a)) < int32(binary.LittleEndian.Uint32(b))
	case "boolean":
		return a[0] < b[0]
	case "string":
		return string(a) < string(b)
	}
	return int64(binary.LittleEndian.Uint64(a)) < int64(binary.LittleEndian.Uint64(b))
}

// truncateLower returns a string's first truncateLength characters, a
// lower bound of it.
func truncateLower(s []byte) []byte {
	n := 0
	for i := range string(s) {
		if n == truncateLength {
			return s[:i]
		}
		n++
	}
	return s
}

// truncateUpper returns an upper bound of a string of at most
// truncateLength characters: the string itself when it is that short,
// else its first characters with the last one raised; nil when none is
// (every character the largest).
func truncateUpper(s []byte) []byte {
	t := truncateLower(s)
	if len(t) == len(s) {
		return s
	}
	runes := []rune(string(t))
	for i := len(runes) - 1; i >= 0; i-- {
		r := runes[i] + 1
		if r >= 0xD800 && r <= 0xDFFF {
			r = 0xE000
		}
		if r <= utf8.MaxRune {
			runes[i] = r
			return []byte(string(runes[:i+1]))
		}
	}
	return nil
}

// partitionValue returns the value of a partition field with transform
// over a source column's integer bounds (a date's days, a timestamp's
// microseconds or, with nanos, nanoseconds), and whether every row of the
// file has the same one.
func partitionValue(transform, sourceType string, lo, hi int64) (int32, bool) {
	a, okA := transformed(transform, sourceType, lo)
	b, okB := transformed(transform, sourceType, hi)
	return a, okA && okB && a == b
}

func transformed(transform, sourceType string, v int64) (int32, bool) {
	var t time.Time
	switch sourceType {
	case "date":
		t = time.Unix(v*86400, 0).UTC()
	case "timestamp", "timestamptz":
		t = time.UnixMicro(v).UTC()
	case "timestamp_ns", "timestamptz_ns":
		t = time.Unix(0, v).UTC()
	default:
		return 0, false
	}
	switch transform {
	case "year":
		return int32(t.Year() - 1970), true
	case "month":
		return int32((t.Year()-1970)*12 + int(t.Month()) - 1), true
	case "day":
		days := t.Unix() / 86400
		if t.Unix() < 0 && t.Unix()%86400 != 0 {
			days--
		}
		return int32(days), true
	case "hour":
		hours := t.Unix() / 3600
		if t.Unix() < 0 && t.Unix()%3600 != 0 {
			hours--
		}
		return int32(hours), true
	}
	return 0, false
}
