package delta

import (
	"fmt"
	"math"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// FuzzLog: any commit file decodes to actions or fails, and any actions
// apply to a snapshot or fail, without panicking; a schema that parses
// serializes to one that parses the same.
func FuzzLog(f *testing.F) {
	f.Add([]byte(`{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["timestampNtz"],"writerFeatures":["timestampNtz"]}}
{"metaData":{"id":"x","format":{"provider":"parquet","options":{}},"schemaString":"{\"type\":\"struct\",\"fields\":[{\"name\":\"a\",\"type\":{\"type\":\"map\",\"keyType\":\"string\",\"valueType\":{\"type\":\"array\",\"elementType\":\"long\",\"containsNull\":true},\"valueContainsNull\":true},\"nullable\":true,\"metadata\":{}}]}","partitionColumns":[],"configuration":{}}}
{"txn":{"appId":"cdclake.offset.t.0","version":5}}
{"add":{"path":"a%20b.parquet","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true}}
{"remove":{"path":"a%20b.parquet","deletionTimestamp":1,"dataChange":true}}`))
	f.Add([]byte(`{"commitInfo":{}}` + "\n" + `{"cdc":{"path":"x"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		acts, err := decode(data)
		if err != nil {
			return
		}
		s := newSnapshot()
		if err := s.apply(0, acts); err != nil {
			return
		}
		if s.meta != nil {
			again, err := parseSchema(schemaString(s.schema))
			if err != nil || schemaString(again) != schemaString(s.schema) {
				t.Fatalf("schema %s does not round-trip: %v", schemaString(s.schema), err)
			}
		}
		_ = checkpointActions(s, 0)
	})
}

// TestBoundsReadersParse: dates and timestamps outside years 1–9999
// (PostgreSQL's infinities) get no bounds; others are floored and raised
// to the millisecond.
func TestBoundsReadersParse(t *testing.T) {
	ts := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	for _, tc := range []struct {
		t      arrow.DataType
		lo, hi int64
		ok     bool
		want   string
	}{
		{arrow.FixedWidthTypes.Date32, 0, 19000, true, "1970-01-01 2022-01-08"},
		{arrow.FixedWidthTypes.Date32, -2147483648, 19000, false, ""},
		{arrow.FixedWidthTypes.Date32, 0, 2147483647, false, ""},
		{ts, -1, 1, true, "1969-12-31T23:59:59.999Z 1970-01-01T00:00:00.001Z"},
		{ts, math.MinInt64, 0, false, ""},
		{ts, 0, math.MaxInt64, false, ""},
		{arrow.PrimitiveTypes.Int64, math.MinInt64, math.MaxInt64, true, "-9223372036854775808 9223372036854775807"},
	} {
		lo, hi, ok := bound(tc.t, tc.lo, tc.hi)
		if ok != tc.ok || ok && fmt.Sprint(lo, " ", hi) != tc.want {
			t.Errorf("%s [%d, %d]: %v %v %v, want %v %q", tc.t, tc.lo, tc.hi, lo, hi, ok, tc.ok, tc.want)
		}
	}
}
