package iceappend

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"strings"
	"testing"
	"time"
)

func TestTruncatedBounds(t *testing.T) {
	for _, c := range []struct{ in, lower, upper string }{
		{"", "", ""},
		{"short", "short", "short"},
		{"exactly sixteen!", "exactly sixteen!", "exactly sixteen!"},
		{"seventeen chars!!", "seventeen chars!", "seventeen chars\""},
		{"ąćęłńóśźżąćęłńóśźż", "ąćęłńóśźżąćęłńóś", "ąćęłńóśźżąćęłńóŜ"},
		{strings.Repeat("\U0010FFFF", 17), strings.Repeat("\U0010FFFF", 16), ""},
		{"aaaaaaaaaaaaaaa\U0010FFFFb", "aaaaaaaaaaaaaaa\U0010FFFF", "aaaaaaaaaaaaaab"},
		{"aaaaaaaaaaaaaaa\uD7FFb", "aaaaaaaaaaaaaaa\uD7FF", "aaaaaaaaaaaaaaa\uE000"},
	} {
		lo, hi := string(truncateLower([]byte(c.in))), truncateUpper([]byte(c.in))
		if lo != c.lower || string(hi) != c.upper || (c.upper == "" && c.in != "" && hi != nil) {
			t.Errorf("%q: bounds %q, %q; want %q, %q", c.in, lo, hi, c.lower, c.upper)
		}
		if lo > c.in || hi != nil && string(hi) < c.in {
			t.Errorf("%q: %q and %q do not bound it", c.in, lo, hi)
		}
	}
}

func TestPartitionValues(t *testing.T) {
	ts := func(s string) int64 {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v.UnixMicro()
	}
	for _, c := range []struct {
		transform, typ string
		lo, hi         int64
		want           int32
		ok             bool
	}{
		{"day", "timestamptz", ts("2024-05-31T00:00:00Z"), ts("2024-05-31T23:59:59.999999Z"), 19874, true},
		{"day", "timestamptz", ts("2024-05-31T23:59:59.999999Z"), ts("2024-06-01T00:00:00Z"), 0, false},
		{"day", "timestamptz", ts("1969-12-31T23:59:59.999999Z"), ts("1969-12-31T00:00:00Z"), -1, true},
		{"hour", "timestamp", ts("1970-01-01T01:30:00Z"), ts("1970-01-01T01:59:00Z"), 1, true},
		{"hour", "timestamp", ts("1969-12-31T23:30:00Z"), ts("1969-12-31T23:00:00Z"), -1, true},
		{"month", "timestamptz", ts("2024-05-01T00:00:00Z"), ts("2024-05-31T23:00:00Z"), 652, true},
		{"year", "timestamptz", ts("1969-01-01T00:00:00Z"), ts("1969-12-31T23:00:00Z"), -1, true},
		{"day", "timestamptz_ns", ts("2024-05-31T10:00:00Z") * 1000, ts("2024-05-31T11:00:00Z") * 1000, 19874, true},
		{"day", "date", 19874, 19874, 19874, true},
		{"day", "string", 0, 0, 0, false},
		{"bucket[4]", "timestamptz", 0, 0, 0, false},
	} {
		got, ok := partitionValue(c.transform, c.typ, c.lo, c.hi)
		if ok != c.ok || ok && got != c.want {
			t.Errorf("%s of %s [%d, %d] = %d, %v; want %d, %v", c.transform, c.typ, c.lo, c.hi, got, ok, c.want, c.ok)
		}
	}
}

// TestOCF writes manifest list records and reads them back, from the
// file as written and from the same blocks deflated (as Iceberg's
// writers compress them).
func TestOCF(t *testing.T) {
	first := int64(7)
	lo, hi := []byte{1, 0, 0, 0}, []byte{9, 0, 0, 0}
	in := []manifestFile{
		{Path: "file:///lake/t/metadata/a-m0.avro", Length: 4242, SequenceNumber: 3, MinSequenceNumber: 2, AddedSnapshotID: 99,
			AddedFiles: 2, AddedRows: 10, FirstRowID: &first, Partitions: &[]fieldSummary{{Lower: &lo, Upper: &hi}}},
		{Path: "file:///lake/t/metadata/b-m0.avro", Content: 1, ExistingFiles: 4},
	}
	records := []any{in[0], in[1]}
	b, err := writeOCF(manifestListSchema, manifestListJSON, map[string]string{"format-version": "3"}, records)
	if err != nil {
		t.Fatal(err)
	}
	again, err := writeOCF(manifestListSchema, manifestListJSON, map[string]string{"format-version": "3"}, records)
	if err != nil || !bytes.Equal(b, again) {
		t.Fatalf("the same records wrote different files (%v)", err)
	}
	check := func(name string, b []byte) {
		f, err := readOCF(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if f.meta["format-version"] != "3" || !strings.Contains(f.meta["avro.schema"], `"field-id":520`) {
			t.Errorf("%s: header %v", name, f.meta)
		}
		out, err := decodeAll[manifestFile](f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(out) != 2 || out[0].Path != in[0].Path || *out[0].FirstRowID != 7 || !bytes.Equal(*(*out[0].Partitions)[0].Upper, hi) ||
			out[1].Content != 1 || out[1].ExistingFiles != 4 || out[1].FirstRowID != nil {
			t.Errorf("%s: read %+v", name, out)
		}
	}
	check("null codec", b)
	check("deflate", deflated(t, b))
}

// deflated returns an object container file as b with its block
// deflated and its codec so named.
func deflated(t *testing.T, b []byte) []byte {
	f, err := readOCF(b)
	if err != nil {
		t.Fatal(err)
	}
	var z bytes.Buffer
	w, _ := flate.NewWriter(&z, flate.BestSpeed)
	w.Write(f.records)
	w.Close()
	var out bytes.Buffer
	out.Write(ocfMagic)
	putLong(&out, int64(len(f.meta)))
	for k, v := range f.meta {
		if k == "avro.codec" {
			v = "deflate"
		}
		putBytes(&out, []byte(k))
		putBytes(&out, []byte(v))
	}
	putLong(&out, 0)
	sync := bytes.Repeat([]byte{0xab}, 16)
	out.Write(sync)
	putLong(&out, f.count)
	putLong(&out, int64(z.Len()))
	out.Write(z.Bytes())
	out.Write(sync)
	return out.Bytes()
}

// FuzzReadOCF: any bytes read as a manifest list fail or decode, without
// a panic or a runaway allocation.
func FuzzReadOCF(f *testing.F) {
	b, err := writeOCF(manifestListSchema, manifestListJSON, map[string]string{}, []any{manifestFile{Path: "p"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(ocfMagic)
	f.Add(binary.AppendVarint(append([]byte(nil), ocfMagic...), 1<<40))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := readOCF(data)
		if err != nil {
			return
		}
		_, _ = decodeAll[manifestFile](file)
	})
}

// TestMainSnapshot: the snapshot a REST commit requires main to be at,
// from the refs; none for a table without snapshots, whose
// current-snapshot-id Java wrote as -1 before format version 3.
func TestMainSnapshot(t *testing.T) {
	for _, tc := range []struct {
		meta string
		want int64 // -1: none
	}{
		{`{"current-snapshot-id": null, "refs": {}}`, -1},
		{`{"current-snapshot-id": -1, "refs": {}}`, -1},
		{`{"current-snapshot-id": -1}`, -1},
		{`{"current-snapshot-id": 7}`, 7},
		{`{"current-snapshot-id": 7, "refs": {"main": {"snapshot-id": 7, "type": "branch"}}}`, 7},
		{`{"current-snapshot-id": 7, "refs": {"audit": {"snapshot-id": 5, "type": "tag"}}}`, -1},
	} {
		m, err := parseMetadata([]byte(tc.meta))
		if err != nil {
			t.Fatal(err)
		}
		got := int64(-1)
		if id := m.mainSnapshot(); id != nil {
			got = *id
		}
		if got != tc.want {
			t.Errorf("%s: main at %d, want %d", tc.meta, got, tc.want)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		header string
		want   time.Duration
	}{
		{"", 0},
		{"3", 3 * time.Second},
		{" 7 ", 7 * time.Second},
		{"0", 0},
		{"-5", 0},
		{"86400", busyWaitMax},
		{"Mon, 07 Dec 2026 12:00:30 GMT", 30 * time.Second},
		{"Mon, 07 Dec 2026 11:59:00 GMT", 0},
		{"soon", 0},
	} {
		if got := retryAfter(c.header, now); got != c.want {
			t.Errorf("Retry-After %q: %v, want %v", c.header, got, c.want)
		}
	}
	for n, base := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 7: busyWaitMax, 30: busyWaitMax} {
		if got := busyWait(0, n); got < base || got > base+base/10 || got > busyWaitMax {
			t.Errorf("wait after answer %d without Retry-After: %v, want %v plus at most a tenth", n, got, base)
		}
	}
	if got := busyWait(5*time.Second, 3); got != 5*time.Second {
		t.Errorf("wait told 5s: %v", got)
	}
}
