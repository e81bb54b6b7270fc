package current

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestFold folds change sequences into a state of two columns (k, v) and
// compares the rows it leaves, each as key=v@input.row (v unknown: "?").
func TestFold(t *testing.T) {
	type ch struct {
		op, key, old, movedTo string
		ts                    int64
		part                  int32
		off                   int64
		absent                []string
	}
	for _, tc := range []struct {
		name    string
		changes []ch
		want    string
	}{
		{"insert then update", []ch{{op: opInsert, key: "a", off: 0}, {op: opUpdate, key: "a", off: 1}}, "a=1"},
		{"partial image keeps the value", []ch{{op: opInsert, key: "a", off: 0}, {op: opUpdate, key: "a", off: 1, absent: []string{"v"}}}, "a=0"},
		{"never carried", []ch{{op: opUpdate, key: "a", off: 0, absent: []string{"v"}}}, "a=?"},
		{"delete", []ch{{op: opInsert, key: "a", off: 0}, {op: opInsert, key: "b", off: 1}, {op: opDelete, key: "a", off: 2}}, "b=1"},
		{"truncate", []ch{{op: opInsert, key: "a", off: 0}, {op: opTruncate, off: 1}, {op: opRead, key: "b", off: 2}}, "b=2"},
		{"key change keeps what the image lacks", []ch{{op: opInsert, key: "a", off: 0},
			{op: opUpdate, key: "b", old: "a", off: 1, absent: []string{"v"}}}, "b=0"},
		{"offsets order a partition, not the input", []ch{{op: opUpdate, key: "a", off: 5}, {op: opInsert, key: "a", off: 3}}, "a=0"},
		{"partitions interleave by time", []ch{{op: opUpsert, key: "a", part: 1, ts: 20, off: 0},
			{op: opUpsert, key: "a", part: 0, ts: 10, off: 7}}, "a=0"},
		{"truncate by time across partitions", []ch{{op: opInsert, key: "b", part: 1, ts: 10, off: 0},
			{op: opTruncate, part: 0, ts: 20, off: 0}, {op: opInsert, key: "a", part: 1, ts: 30, off: 1}}, "a=2"},
		{"a key change in two events, delete first", []ch{{op: opInsert, key: "a", off: 0},
			{op: opDelete, key: "a", movedTo: "b", off: 1}, {op: opInsert, key: "b", old: "a", off: 2, absent: []string{"v"}}}, "b=0"},
		{"a key change in two events, create first", []ch{{op: opInsert, key: "a", part: 0, off: 0},
			{op: opInsert, key: "b", old: "a", part: 1, ts: 5, off: 0, absent: []string{"v"}},
			{op: opDelete, key: "a", movedTo: "b", part: 0, ts: 5, off: 1}}, "b=0"},
		{"a moved row a TRUNCATE came between", []ch{{op: opInsert, key: "a", off: 0},
			{op: opDelete, key: "a", movedTo: "b", off: 1}, {op: opTruncate, off: 2},
			{op: opInsert, key: "b", old: "a", off: 3, absent: []string{"v"}}}, "b=?"},
		{"unknown operation", []ch{{op: "MERGE", key: "a"}}, "error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Input 0: every change's after image, row i; columns k and v.
			s := &state{rows: map[string]*stateRow{}, cols: [][]int{{0, 1}}, names: []string{"k", "v"}}
			var cs []*change
			for i, c := range tc.changes {
				cs = append(cs, &change{meta: meta{op: c.op, ts: c.ts, source: "t", part: c.part, off: c.off},
					in: 0, row: int32(i), key: c.key, oldKey: c.old, movedTo: c.movedTo, absent: c.absent})
			}
			var got []string
			for _, c := range inOrder(cs) {
				if err := s.apply(c); err != nil {
					got = []string{"error"}
					break
				}
			}
			if got == nil {
				for _, k := range slices.Sorted(maps.Keys(s.rows)) {
					v := "?"
					if r := s.rows[k]; len(r.vals) > 1 && r.vals[1].in >= 0 {
						v = fmt.Sprint(r.vals[1].row)
					}
					got = append(got, k+"="+v)
				}
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("state %q, want %q", g, tc.want)
			}
		})
	}
}

func TestBucketsAreStable(t *testing.T) {
	// A bucket is a function of the key alone: state tables built by
	// different releases must agree.
	for key, want := range map[string]int{"1:1": bucketOf("1:1", 16), "2:40": bucketOf("2:40", 16)} {
		for range 3 {
			if got := bucketOf(key, 16); got != want {
				t.Fatalf("%s: bucket %d then %d", key, want, got)
			}
		}
	}
	if bucketOf("1:1", 16) != 9 || bucketOf("2:40", 16) != 1 {
		t.Errorf("FNV-1a buckets changed: %d %d", bucketOf("1:1", 16), bucketOf("2:40", 16))
	}
}

func TestJSONKey(t *testing.T) {
	for _, c := range []struct {
		raw  string
		key  []string
		want string
		ok   bool
	}{
		{`{"id":40}`, []string{"id"}, "2:40", true},
		{`{"schema":{"type":"struct"},"payload":{"order_id":7,"line_no":"x"}}`, []string{"order_id", "line_no"}, "1:71:x", true},
		{`{"id":12345678901234567890}`, []string{"id"}, "20:12345678901234567890", true},
		{`{"id":"AAE="}`, []string{"id"}, "4:AAE=", true},
		{`{"id":{"scale":2}}`, []string{"id"}, "", false},
		{`{"other":1}`, []string{"id"}, "", false},
		{`not json`, []string{"id"}, "", false},
	} {
		got, ok := jsonKey(c.raw, c.key)
		if got != c.want || ok != c.ok {
			t.Errorf("jsonKey(%s, %v) = %q, %v; want %q, %v", c.raw, c.key, got, ok, c.want, c.ok)
		}
	}
}
