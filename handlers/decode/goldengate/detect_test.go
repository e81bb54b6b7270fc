package goldengate

import (
	"testing"

	"github.com/cdclake/cdclake/handlers/change"
	"github.com/valyala/fastjson"
)

func TestDetect(t *testing.T) {
	cases := []struct {
		in   string
		want string
	}{
		{`{"qual_table":"S.T","op_type":"INSERT","after":{}}`, FormatDataStreams},
		{`{"qual_table":"S.T","op_type":"I"}`, FormatDataStreams},
		{`{"op_type":"UPSERT"}`, FormatDataStreams},
		{`{"op_type":"DDL","ddl":{}}`, FormatDataStreams},
		{`{"op_type":"STREAM_METADATA"}`, FormatDataStreams},
		{`{"op_type":"OBJECT_METADATA","qual_table":"S.T","columns":{}}`, FormatDataStreams},
		{`{"$schema":"http://json-schema.org/draft-04/schema#","id":"S.T"}`, FormatDataStreams},
		{`{"id":"S.T","type":"object","properties":{}}`, FormatDataStreams},
		{`{"table":"S.T","op_type":"I","after":{}}`, FormatBigData},
		{`{"table":"S.T","op_type":"T"}`, FormatBigData},
		{`{"table":"S.T","op_type":"INSERT"}`, FormatBigData},
		{`{"table":"S.T","op_type":"TRUNCATE"}`, FormatBigData},
		{`{"table":"S.T","op_type":"UPSERT"}`, FormatDataStreams},
		{`{"op_type":"I"}`, ""},
		{`{"table":"S.T","op_type":"X"}`, ""},
		{`{"table":"S.T","op_type":1}`, ""},
		{`{"id":"S.T","properties":{}}`, ""},
		{`{"payload":{"op":"c"}}`, ""},
		{`{}`, ""},
		{`[]`, ""},
		{`"INSERT"`, ""},
	}
	ds, bd := mustDataStreams(t, Options{}), mustBigData(t, BigDataOptions{})
	var c change.Change
	for _, tc := range cases {
		v := fastjson.MustParse(tc.in)
		if got := detect(v); got != tc.want {
			t.Errorf("detect(%s) = %q, want %q", tc.in, got, tc.want)
		}
		if ds.Detect(v, &c) != (tc.want == FormatDataStreams) || bd.Detect(v, &c) != (tc.want == FormatBigData) {
			t.Errorf("%s: the decoders' Detect disagree with %q", tc.in, tc.want)
		}
	}
	if got := detect(nil); got != "" {
		t.Errorf("detect(nil) = %q, want none", got)
	}
}

func TestDetectAllocations(t *testing.T) {
	v := fastjson.MustParse(`{"table":"S.T","op_type":"U","op_ts":"2015-11-05 18:45:36.000000","pos":"1","after":{"A":1}}`)
	if n := testing.AllocsPerRun(100, func() { detect(v) }); n != 0 {
		t.Errorf("Detect allocates %.1f times, want 0", n)
	}
}
