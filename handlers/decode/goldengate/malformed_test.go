package goldengate

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/decode/decodetest"
	"github.com/valyala/fastjson"
)

// ins is the common head of a Data Streams INSERT.
const ins = `"qual_table":"S.T","op_type":"INSERT","op_ts":"2026-07-13T04:01:01.123456Z","xid":"x1","pos":"p1"`

// dataStreamsMalformed are Data Streams records the decoder rejects.
var dataStreamsMalformed = []decodetest.Malformed{
	{Name: "array", In: `[1]`, Want: "record is a JSON array"},
	{Name: "null", In: `null`, Want: "record is a JSON null"},
	{Name: "empty", In: `{}`, Want: "no op_type, and not a JSON Schema record"},
	{Name: "op not string", In: `{"op_type":1,"qual_table":"S.T"}`, Want: "op_type is a JSON number, want a string"},
	{Name: "unknown op", In: `{"op_type":"MERGE","qual_table":"S.T"}`, Want: `unknown op_type "MERGE" (want INSERT, UPDATE, DELETE, UPSERT, DDL, STREAM_METADATA or OBJECT_METADATA)`},
	{Name: "lower-case op", In: `{"op_type":"insert","qual_table":"S.T","after":{}}`, Want: `unknown op_type "insert"`},
	{Name: "long op clipped", In: `{"op_type":"` + strings.Repeat("X", 100) + `"}`, Want: `unknown op_type "` + strings.Repeat("X", 64) + `…"`},
	{Name: "duplicate op", In: `{"op_type":"INSERT","op_type":"DELETE","qual_table":"S.T","after":{}}`, Want: `field "op_type" appears more than once`},
	{Name: "duplicate after", In: `{` + ins + `,"after":{},"after":{}}`, Want: `field "after" appears more than once`},
	{Name: "missing table", In: `{"op_type":"INSERT","after":{"A":1}}`, Want: "missing qual_table"},
	{Name: "null table", In: `{"op_type":"INSERT","qual_table":null,"after":{"A":1}}`, Want: "missing qual_table"},
	{Name: "table not string", In: `{"op_type":"INSERT","qual_table":7,"after":{"A":1}}`, Want: "qual_table is a JSON number, want a string"},
	{Name: "empty table", In: `{"op_type":"INSERT","qual_table":"","after":{"A":1}}`, Want: "empty qual_table"},
	{Name: "insert without after", In: `{` + ins + `}`, Want: "INSERT on S.T without after image"},
	{Name: "insert with null after", In: `{` + ins + `,"after":null,"before":{"A":1}}`, Want: "INSERT on S.T without after image"},
	{Name: "update without after", In: `{"qual_table":"S.T","op_type":"UPDATE","before":{"A":1}}`, Want: "UPDATE on S.T without after image"},
	{Name: "upsert without after", In: `{"qual_table":"S.T","op_type":"UPSERT"}`, Want: "UPSERT on S.T without after image"},
	{Name: "delete without before", In: `{"qual_table":"S.T","op_type":"DELETE","after":{"A":1}}`, Want: "DELETE on S.T without before image"},
	{Name: "after array", In: `{` + ins + `,"after":[1]}`, Want: "after is a JSON array, want an object or null"},
	{Name: "before string", In: `{"qual_table":"S.T","op_type":"DELETE","before":"A"}`, Want: "before is a JSON string, want an object or null"},
	{Name: "op_ts nanoseconds", In: `{"qual_table":"S.T","op_type":"INSERT","op_ts":"2026-07-13T04:01:01.123456789Z","after":{}}`, Want: `op_ts: timestamp "2026-07-13T04:01:01.123456789Z": finer than us`},
	{Name: "op_ts garbage", In: `{"qual_table":"S.T","op_type":"INSERT","op_ts":"yesterday","after":{}}`, Want: `op_ts: timestamp "yesterday"`},
	{Name: "op_ts bad offset", In: `{"qual_table":"S.T","op_type":"INSERT","op_ts":"2026-07-13T04:01:01+25:00","after":{}}`, Want: "bad offset"},
	{Name: "op_ts number", In: `{"qual_table":"S.T","op_type":"INSERT","op_ts":1752379261123456,"after":{}}`, Want: "op_ts is a JSON number, want a string"},
	{Name: "xid object", In: `{"qual_table":"S.T","op_type":"INSERT","xid":{},"after":{}}`, Want: "xid is a JSON object, want a string"},
	{Name: "pos array", In: `{"qual_table":"S.T","op_type":"INSERT","pos":[],"after":{}}`, Want: "pos is a JSON array, want a string"},
	{Name: "pos bool", In: `{"qual_table":"S.T","op_type":"INSERT","pos":true,"after":{}}`, Want: "pos is a JSON true, want a string"},
	{Name: "csn object", In: `{` + ins + `,"after":{},"csn":{"a":1}}`, Want: "csn is a JSON object, want a string or number"},
	{Name: "tokens array", In: `{` + ins + `,"after":{},"tokens":["a"]}`, Want: "tokens is a JSON array, want an object"},
	{Name: "object metadata without columns", In: `{"op_type":"OBJECT_METADATA","qual_table":"S.T"}`, Want: "OBJECT_METADATA record for S.T: columns is not an object"},
	{Name: "object metadata columns array", In: `{"op_type":"OBJECT_METADATA","qual_table":"S.T","columns":[]}`, Want: "columns is not an object"},
	{Name: "object metadata without table", In: `{"op_type":"OBJECT_METADATA","columns":{}}`, Want: "missing qual_table"},
	{Name: "ddl without ddl", In: `{"op_type":"DDL","op_ts":"2026-07-13T04:04:30Z"}`, Want: "DDL record without a ddl object"},
	{Name: "ddl not object", In: `{"op_type":"DDL","ddl":"ALTER TABLE X"}`, Want: "DDL record without a ddl object"},
	{Name: "ddl object string", In: `{"op_type":"DDL","ddl":{"object":"S.T"}}`, Want: "ddl.object is a JSON string, want an object"},
	{Name: "ddl schema number", In: `{"op_type":"DDL","ddl":{"object":{"schema":1,"object":"T"}}}`, Want: "ddl.object.schema is a JSON number, want a string"},
	{Name: "ddl bad op_ts", In: `{"op_type":"DDL","op_ts":"2026-13-01T00:00:00Z","ddl":{"object":{"schema":"S","object":"T"}}}`, Want: "op_ts: timestamp"},
	{Name: "schema record without id", In: `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object"}`, Want: "JSON Schema record without a string id"},
	{Name: "schema record id number", In: `{"id":5,"type":"object","properties":{}}`, Want: "JSON Schema record without a string id"},
	{Name: "schema record empty id", In: `{"id":"","type":"object","properties":{}}`, Want: "JSON Schema record with an empty id"},
	{Name: "schema-like with two of three", In: `{"id":"S.T","properties":{}}`, Want: "no op_type, and not a JSON Schema record"},
}

// customMalformed are rejected with the custom options of
// datastreams_custom.
var customMalformed = []decodetest.Malformed{
	{Name: "default op string", In: `{"table_name":"S.T","operation":"INSERT","new":{}}`, Want: `unknown operation "INSERT" (want I, U, D, M, DDL, STREAM_METADATA or OBJECT_METADATA)`},
	{Name: "default names", In: `{"qual_table":"S.T","op_type":"I","after":{}}`, Want: "no operation, and not a JSON Schema record"},
	{Name: "custom image name", In: `{"table_name":"S.T","operation":"I","after":{"A":1}}`, Want: "INSERT on S.T without new image"},
	{Name: "custom table name", In: `{"operation":"D","old":{"A":1}}`, Want: "missing table_name"},
}

// hdr is the common head of a Big Data message.
const hdr = `"table":"S.T","op_ts":"2015-11-05 18:45:36.000000","current_ts":"2015-11-05T18:45:39.111000","pos":"00000000000000001444"`

// bigDataMalformed are Big Data messages the decoder rejects.
var bigDataMalformed = []decodetest.Malformed{
	{Name: "string", In: `"I"`, Want: "record is a JSON string"},
	{Name: "missing op", In: `{` + hdr + `,"after":{}}`, Want: "missing op_type"},
	{Name: "op number", In: `{` + hdr + `,"op_type":1}`, Want: "op_type is a JSON number, want a string"},
	{Name: "unknown op", In: `{` + hdr + `,"op_type":"X"}`, Want: `unknown op_type "X" (want I, U, D, T, INSERT, UPDATE, DELETE or TRUNCATE)`},
	{Name: "upsert is not Big Data", In: `{` + hdr + `,"op_type":"UPSERT","after":{}}`, Want: `unknown op_type "UPSERT"`},
	{Name: "duplicate table", In: `{` + hdr + `,"table":"S.U","op_type":"I","after":{}}`, Want: `field "table" appears more than once`},
	{Name: "missing table", In: `{"op_type":"I","after":{}}`, Want: "missing table"},
	{Name: "table object", In: `{"table":{},"op_type":"I","after":{}}`, Want: "table is a JSON object, want a string"},
	{Name: "empty table", In: `{"table":"","op_type":"I","after":{}}`, Want: "empty table"},
	{Name: "insert without after", In: `{` + hdr + `,"op_type":"I","before":{"A":1},"after":null}`, Want: "INSERT on S.T without after image"},
	{Name: "update without after", In: `{` + hdr + `,"op_type":"U","before":{"A":1}}`, Want: "UPDATE on S.T without after image"},
	{Name: "delete without before", In: `{` + hdr + `,"op_type":"D","before":null}`, Want: "DELETE on S.T without before image"},
	{Name: "truncate with image", In: `{` + hdr + `,"op_type":"T","after":{"A":1}}`, Want: "TRUNCATE on S.T with a row image"},
	{Name: "after number", In: `{` + hdr + `,"op_type":"I","after":1}`, Want: "after is a JSON number, want an object or null"},
	{Name: "op_ts nanoseconds", In: `{"table":"S.T","op_type":"I","op_ts":"2015-11-05 18:45:36.000000001","after":{}}`, Want: "finer than us"},
	{Name: "op_ts short", In: `{"table":"S.T","op_type":"I","op_ts":"2015-11-05","after":{}}`, Want: `op_ts: timestamp "2015-11-05"`},
	{Name: "current_ts number", In: `{"table":"S.T","op_type":"I","current_ts":1,"after":{}}`, Want: "current_ts is a JSON number, want a string"},
}

// TestDecodeKeepsEnvelopeExtras checks that Decode appends to the extras an
// envelope stage already put in the Change.
func TestDecodeKeepsEnvelopeExtras(t *testing.T) {
	v := fastjson.MustParse(`{"qual_table":"S.T","op_type":"INSERT","csn":12,"after":{"A":1},"x":true}`)
	var c change.Change
	c.AddString("_ce_id", []byte("evt-1"))
	if err := mustDataStreams(t, Options{}).Decode(v, &c); err != nil {
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
	if err := mustDataStreams(t, Options{}).Decode(v, &c); err != nil {
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
	dec := mustDataStreams(t, Options{})
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
	if err := mustDataStreams(t, Options{}).Decode(v, &c); err != nil {
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
