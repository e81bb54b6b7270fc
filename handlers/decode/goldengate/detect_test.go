package goldengate

import (
	"testing"

	"github.com/cdclake/cdclake/handlers/change"
	"github.com/valyala/fastjson"
)

func TestDetect(t *testing.T) {
	cases := []struct {
		in   string
		want change.Format
		ok   bool
	}{
		{`{"qual_table":"S.T","op_type":"INSERT","after":{}}`, change.FormatGoldenGate, true},
		{`{"qual_table":"S.T","op_type":"I"}`, change.FormatGoldenGate, true},
		{`{"op_type":"UPSERT"}`, change.FormatGoldenGate, true},
		{`{"op_type":"DDL","ddl":{}}`, change.FormatGoldenGate, true},
		{`{"op_type":"STREAM_METADATA"}`, change.FormatGoldenGate, true},
		{`{"op_type":"OBJECT_METADATA","qual_table":"S.T","columns":{}}`, change.FormatGoldenGate, true},
		{`{"$schema":"http://json-schema.org/draft-04/schema#","id":"S.T"}`, change.FormatGoldenGate, true},
		{`{"id":"S.T","type":"object","properties":{}}`, change.FormatGoldenGate, true},
		{`{"table":"S.T","op_type":"I","after":{}}`, change.FormatGoldenGateBigData, true},
		{`{"table":"S.T","op_type":"T"}`, change.FormatGoldenGateBigData, true},
		{`{"table":"S.T","op_type":"INSERT"}`, change.FormatGoldenGateBigData, true},
		{`{"table":"S.T","op_type":"TRUNCATE"}`, change.FormatGoldenGateBigData, true},
		{`{"table":"S.T","op_type":"UPSERT"}`, change.FormatGoldenGate, true},
		{`{"op_type":"I"}`, change.FormatAuto, false},
		{`{"table":"S.T","op_type":"X"}`, change.FormatAuto, false},
		{`{"table":"S.T","op_type":1}`, change.FormatAuto, false},
		{`{"id":"S.T","properties":{}}`, change.FormatAuto, false},
		{`{"payload":{"op":"c"}}`, change.FormatAuto, false},
		{`{}`, change.FormatAuto, false},
		{`[]`, change.FormatAuto, false},
		{`"INSERT"`, change.FormatAuto, false},
	}
	for _, tc := range cases {
		got, ok := Detect(fastjson.MustParse(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("Detect(%s) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
	if got, ok := Detect(nil); ok || got != change.FormatAuto {
		t.Errorf("Detect(nil) = %v, %v; want auto, false", got, ok)
	}
}

func TestDetectAllocations(t *testing.T) {
	v := fastjson.MustParse(`{"table":"S.T","op_type":"U","op_ts":"2015-11-05 18:45:36.000000","pos":"1","after":{"A":1}}`)
	if n := testing.AllocsPerRun(100, func() { Detect(v) }); n != 0 {
		t.Errorf("Detect allocates %.1f times, want 0", n)
	}
}
