package goldengate

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/decode"
	"github.com/valyala/fastjson"
)

func errorsIsMalformed(err error) bool { return errors.Is(err, decode.ErrMalformed) }

type malformedCase struct {
	name, in, want string
}

func TestDataStreamsMalformed(t *testing.T) {
	const ins = `"qual_table":"S.T","op_type":"INSERT","op_ts":"2026-07-13T04:01:01.123456Z","xid":"x1","pos":"p1"`
	cases := []malformedCase{
		{"array", `[1]`, "record is a JSON array"},
		{"null", `null`, "record is a JSON null"},
		{"empty", `{}`, "no op_type, and not a JSON Schema record"},
		{"op not string", `{"op_type":1,"qual_table":"S.T"}`, "op_type is a JSON number, want a string"},
		{"unknown op", `{"op_type":"MERGE","qual_table":"S.T"}`, `unknown op_type "MERGE" (want INSERT, UPDATE, DELETE, UPSERT, DDL, STREAM_METADATA or OBJECT_METADATA)`},
		{"lower-case op", `{"op_type":"insert","qual_table":"S.T","after":{}}`, `unknown op_type "insert"`},
		{"long op clipped", `{"op_type":"` + strings.Repeat("X", 100) + `"}`, `unknown op_type "` + strings.Repeat("X", 64) + `…"`},
		{"duplicate op", `{"op_type":"INSERT","op_type":"DELETE","qual_table":"S.T","after":{}}`, `field "op_type" appears more than once`},
		{"duplicate after", `{` + ins + `,"after":{},"after":{}}`, `field "after" appears more than once`},
		{"missing table", `{"op_type":"INSERT","after":{"A":1}}`, "missing qual_table"},
		{"null table", `{"op_type":"INSERT","qual_table":null,"after":{"A":1}}`, "missing qual_table"},
		{"table not string", `{"op_type":"INSERT","qual_table":7,"after":{"A":1}}`, "qual_table is a JSON number, want a string"},
		{"empty table", `{"op_type":"INSERT","qual_table":"","after":{"A":1}}`, "empty qual_table"},
		{"insert without after", `{` + ins + `}`, "INSERT on S.T without after image"},
		{"insert with null after", `{` + ins + `,"after":null,"before":{"A":1}}`, "INSERT on S.T without after image"},
		{"update without after", `{"qual_table":"S.T","op_type":"UPDATE","before":{"A":1}}`, "UPDATE on S.T without after image"},
		{"upsert without after", `{"qual_table":"S.T","op_type":"UPSERT"}`, "UPSERT on S.T without after image"},
		{"delete without before", `{"qual_table":"S.T","op_type":"DELETE","after":{"A":1}}`, "DELETE on S.T without before image"},
		{"after array", `{` + ins + `,"after":[1]}`, "after is a JSON array, want an object or null"},
		{"before string", `{"qual_table":"S.T","op_type":"DELETE","before":"A"}`, "before is a JSON string, want an object or null"},
		{"op_ts nanoseconds", `{"qual_table":"S.T","op_type":"INSERT","op_ts":"2026-07-13T04:01:01.123456789Z","after":{}}`, `op_ts: timestamp "2026-07-13T04:01:01.123456789Z": finer than us`},
		{"op_ts garbage", `{"qual_table":"S.T","op_type":"INSERT","op_ts":"yesterday","after":{}}`, `op_ts: timestamp "yesterday"`},
		{"op_ts bad offset", `{"qual_table":"S.T","op_type":"INSERT","op_ts":"2026-07-13T04:01:01+25:00","after":{}}`, "bad offset"},
		{"op_ts number", `{"qual_table":"S.T","op_type":"INSERT","op_ts":1752379261123456,"after":{}}`, "op_ts is a JSON number, want a string"},
		{"xid object", `{"qual_table":"S.T","op_type":"INSERT","xid":{},"after":{}}`, "xid is a JSON object, want a string"},
		{"pos array", `{"qual_table":"S.T","op_type":"INSERT","pos":[],"after":{}}`, "pos is a JSON array, want a string"},
		{"pos bool", `{"qual_table":"S.T","op_type":"INSERT","pos":true,"after":{}}`, "pos is a JSON true, want a string"},
		{"csn object", `{` + ins + `,"after":{},"csn":{"a":1}}`, "csn is a JSON object, want a string or number"},
		{"tokens array", `{` + ins + `,"after":{},"tokens":["a"]}`, "tokens is a JSON array, want an object"},
		{"object metadata without columns", `{"op_type":"OBJECT_METADATA","qual_table":"S.T"}`, "OBJECT_METADATA record for S.T: columns is not an object"},
		{"object metadata columns array", `{"op_type":"OBJECT_METADATA","qual_table":"S.T","columns":[]}`, "columns is not an object"},
		{"object metadata without table", `{"op_type":"OBJECT_METADATA","columns":{}}`, "missing qual_table"},
		{"ddl without ddl", `{"op_type":"DDL","op_ts":"2026-07-13T04:04:30Z"}`, "DDL record without a ddl object"},
		{"ddl not object", `{"op_type":"DDL","ddl":"ALTER TABLE X"}`, "DDL record without a ddl object"},
		{"ddl object string", `{"op_type":"DDL","ddl":{"object":"S.T"}}`, "ddl.object is a JSON string, want an object"},
		{"ddl schema number", `{"op_type":"DDL","ddl":{"object":{"schema":1,"object":"T"}}}`, "ddl.object.schema is a JSON number, want a string"},
		{"ddl bad op_ts", `{"op_type":"DDL","op_ts":"2026-13-01T00:00:00Z","ddl":{"object":{"schema":"S","object":"T"}}}`, "op_ts: timestamp"},
		{"schema record without id", `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object"}`, "JSON Schema record without a string id"},
		{"schema record id number", `{"id":5,"type":"object","properties":{}}`, "JSON Schema record without a string id"},
		{"schema-like with two of three", `{"id":"S.T","properties":{}}`, "no op_type, and not a JSON Schema record"},
	}
	runMalformed(t, NewDataStreams(Options{}), cases)
}

func TestDataStreamsCustomMalformed(t *testing.T) {
	cases := []malformedCase{
		{"default op string", `{"table_name":"S.T","operation":"INSERT","new":{}}`, `unknown operation "INSERT" (want I, U, D, M, DDL, STREAM_METADATA or OBJECT_METADATA)`},
		{"default names", `{"qual_table":"S.T","op_type":"I","after":{}}`, "no operation, and not a JSON Schema record"},
		{"custom image name", `{"table_name":"S.T","operation":"I","after":{"A":1}}`, "INSERT on S.T without new image"},
		{"custom table name", `{"operation":"D","old":{"A":1}}`, "missing table_name"},
	}
	runMalformed(t, NewDataStreams(customOptions), cases)
}

func TestBigDataMalformed(t *testing.T) {
	const hdr = `"table":"S.T","op_ts":"2015-11-05 18:45:36.000000","current_ts":"2015-11-05T18:45:39.111000","pos":"00000000000000001444"`
	cases := []malformedCase{
		{"string", `"I"`, "record is a JSON string"},
		{"missing op", `{` + hdr + `,"after":{}}`, "missing op_type"},
		{"op number", `{` + hdr + `,"op_type":1}`, "op_type is a JSON number, want a string"},
		{"unknown op", `{` + hdr + `,"op_type":"X"}`, `unknown op_type "X" (want I, U, D, T, INSERT, UPDATE, DELETE or TRUNCATE)`},
		{"upsert is not Big Data", `{` + hdr + `,"op_type":"UPSERT","after":{}}`, `unknown op_type "UPSERT"`},
		{"duplicate table", `{` + hdr + `,"table":"S.U","op_type":"I","after":{}}`, `field "table" appears more than once`},
		{"missing table", `{"op_type":"I","after":{}}`, "missing table"},
		{"table object", `{"table":{},"op_type":"I","after":{}}`, "table is a JSON object, want a string"},
		{"empty table", `{"table":"","op_type":"I","after":{}}`, "empty table"},
		{"insert without after", `{` + hdr + `,"op_type":"I","before":{"A":1},"after":null}`, "INSERT on S.T without after image"},
		{"update without after", `{` + hdr + `,"op_type":"U","before":{"A":1}}`, "UPDATE on S.T without after image"},
		{"delete without before", `{` + hdr + `,"op_type":"D","before":null}`, "DELETE on S.T without before image"},
		{"truncate with image", `{` + hdr + `,"op_type":"T","after":{"A":1}}`, "TRUNCATE on S.T with a row image"},
		{"after number", `{` + hdr + `,"op_type":"I","after":1}`, "after is a JSON number, want an object or null"},
		{"op_ts nanoseconds", `{"table":"S.T","op_type":"I","op_ts":"2015-11-05 18:45:36.000000001","after":{}}`, "finer than us"},
		{"op_ts short", `{"table":"S.T","op_type":"I","op_ts":"2015-11-05","after":{}}`, `op_ts: timestamp "2015-11-05"`},
		{"current_ts number", `{"table":"S.T","op_type":"I","current_ts":1,"after":{}}`, "current_ts is a JSON number, want a string"},
		{"pos object", `{"table":"S.T","op_type":"I","pos":{},"after":{}}`, "pos is a JSON object, want a string"},
		{"primary_keys object", `{"table":"S.T","op_type":"I","primary_keys":{"A":1},"after":{}}`, "primary_keys is a JSON object, want an array"},
		{"xid array", `{"table":"S.T","op_type":"I","xid":[1],"after":{}}`, "xid is a JSON array, want a string"},
		{"csn bool", `{"table":"S.T","op_type":"I","csn":false,"after":{}}`, "csn is a JSON false, want a string or number"},
		{"tokens string", `{"table":"S.T","op_type":"I","tokens":"L=1","after":{}}`, "tokens is a JSON string, want an object"},
	}
	runMalformed(t, NewBigData(BigDataOptions{}), cases)
}

func runMalformed(t *testing.T, dec decode.Decoder, cases []malformedCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := fastjson.Parse(tc.in)
			if err != nil {
				t.Fatalf("test input does not parse: %v", err)
			}
			var c change.Change
			err = dec.Decode(v, &c)
			if err == nil {
				t.Fatalf("Decode(%s) = nil error, want one containing %q", tc.in, tc.want)
			}
			if !errors.Is(err, decode.ErrMalformed) {
				t.Errorf("error %q does not wrap decode.ErrMalformed", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Decode(%s) error:\n  %v\nwant it to contain:\n  %s", tc.in, err, tc.want)
			}
		})
	}
}

// TestDecodeKeepsEnvelopeExtras checks that Decode appends to the extras an
// envelope stage already put in the Change.
func TestDecodeKeepsEnvelopeExtras(t *testing.T) {
	v := fastjson.MustParse(`{"qual_table":"S.T","op_type":"INSERT","csn":12,"after":{"A":1},"x":true}`)
	var c change.Change
	c.AddString("_ce_id", []byte("evt-1"))
	if err := NewDataStreams(Options{}).Decode(v, &c); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range c.Extras {
		got = append(got, e.Name+"="+string(c.ExtraBytes(e)))
	}
	want := []string{"_ce_id=evt-1", "_gg_csn=12", `_gg_meta={"x":true}`}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("extras = %q, want %q", got, want)
	}
}

// TestMetaKeyEscaping checks that _gg_meta re-escapes keys that fastjson
// unescaped and keeps values' JSON text as sent.
func TestMetaKeyEscaping(t *testing.T) {
	v := fastjson.MustParse(`{"qual_table":"S.T","op_type":"INSERT","after":{},"a\"b\u0001":"x\ty\u00e9","n":1.50e+3,"o":{"k":[1,null]}}`)
	var c change.Change
	if err := NewDataStreams(Options{}).Decode(v, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Extras) != 1 || c.Extras[0].Name != ExtraMeta {
		t.Fatalf("extras = %+v, want only %s", c.Extras, ExtraMeta)
	}
	got := string(c.ExtraBytes(c.Extras[0]))
	want := `{"a\"b\u0001":"x\ty\u00e9","n":1.50e+3,"o":{"k":[1,null]}}`
	if got != want {
		t.Errorf("_gg_meta = %s\nwant       %s", got, want)
	}
}

// TestDecodeAllocations guards the hot path: a DML record in steady state
// costs at most the position string.
func TestDecodeAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation count")
	}
	dec := NewDataStreams(Options{})
	lines := readLines(t, "datastreams")
	v := fastjson.MustParse(lines[8]) // INSERT with csn, tokens and other metadata
	var c change.Change
	allocs := testing.AllocsPerRun(200, func() {
		c.Reset()
		if err := dec.Decode(v, &c); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Errorf("Decode allocates %.1f times per record, want ≤ 1", allocs)
	}
}

// TestManyFields covers records with more top-level fields than the
// decoder tracks by position: recognised fields past the 64th must still
// be decoded and kept out of _gg_meta.
func TestManyFields(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"qual_table":"S.T","op_type":"UPDATE"`)
	for i := range 70 {
		fmt.Fprintf(&b, `,"f%02d":%d`, i, i)
	}
	b.WriteString(`,"csn":"77","after":{"A":1},"tokens":{"L":"1"},"last":true}`)
	v := fastjson.MustParse(b.String())
	var c change.Change
	if err := NewDataStreams(Options{}).Decode(v, &c); err != nil {
		t.Fatal(err)
	}
	if !c.After.Present() {
		t.Error("after image past the 64th field not decoded")
	}
	var names []string
	var meta string
	for _, e := range c.Extras {
		names = append(names, e.Name)
		if e.Name == ExtraMeta {
			meta = string(c.ExtraBytes(e))
		}
	}
	if got := strings.Join(names, ","); got != "_gg_csn,_gg_tokens,_gg_meta" {
		t.Errorf("extras = %s", got)
	}
	if !strings.HasPrefix(meta, `{"f00":0,`) || !strings.HasSuffix(meta, `"f69":69,"last":true}`) ||
		strings.Contains(meta, "csn") || strings.Contains(meta, "after") || strings.Contains(meta, "tokens") {
		t.Errorf("_gg_meta = %s", meta)
	}
}
