package goldengate

import (
	"strings"
	"testing"

	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/valyala/fastjson"
)

// colText renders columns as name:type[ null][ key] for comparison.
func colText(cols []schema.Column) string {
	var parts []string
	for _, c := range cols {
		s := c.Name + ":" + c.Type.String()
		if c.Nullable {
			s += " null"
		}
		if c.Key {
			s += " key"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

func TestObjectColumns(t *testing.T) {
	lines := readLines(t, "datastreams")
	seedMeta, seedSchema := lines[3], lines[4]             // OBJECT_METADATA and JSON Schema of SALES.ORDERS
	refreshedMeta, refreshedSchema := lines[11], lines[12] // after the DDL
	dec := schema.Type{Kind: schema.DecimalText}

	cases := []struct {
		name         string
		meta, schema string
		numbers      schema.Type
		want         string
	}{
		{"seed without schema", seedMeta, "", dec,
			"ORDER_ID:decimal_text key, STATUS:string, TOTAL_AMOUNT:decimal_text null"},
		{"seed with schema", seedMeta, seedSchema, dec,
			"ORDER_ID:decimal_text key, STATUS:string, TOTAL_AMOUNT:decimal_text null"},
		{"refreshed, metadata order", refreshedMeta, refreshedSchema, dec,
			"ORDER_ID:decimal_text key, STATUS:string, TOTAL_AMOUNT:decimal_text null, CUSTOMER_TIER:string null"},
		{"numbers as the route says", seedMeta, "", schema.Type{Kind: schema.Float64},
			"ORDER_ID:double key, STATUS:string, TOTAL_AMOUNT:double null"},
		{"zero numbers type means decimal text", seedMeta, "", schema.Type{},
			"ORDER_ID:decimal_text key, STATUS:string, TOTAL_AMOUNT:decimal_text null"},
		{"refined by after image schema",
			`{"columns":{"ID":{"type":"number","null":false,"key":true},"QTY":{"type":"integer"},"BIG":{"type":"number"},"WIDE":{"type":"number"},"CREATED":{"type":"string","null":true},"BORN":{"type":"string"},"NAME":{"type":"string"},"OK":{"type":"boolean","null":false}}}`,
			`{"$schema":"http://json-schema.org/draft-04/schema#","id":"S.T","type":"object","definitions":{"row":{"type":"object","properties":{
				"ID":{"type":"integer"},"QTY":{"type":["integer","null"]},"BIG":{"type":["number","null"]},"WIDE":{"type":"integer","maximum":99999999999999999999},
				"CREATED":{"type":["string","null"],"format":"date-time"},"BORN":{"anyOf":[{"type":"string","format":"date"},{"type":"null"}]},"NAME":{"type":"string","maxLength":30},"OK":{"type":"boolean"}}}},
				"properties":{"before":{"oneOf":[{"type":"null"},{"$ref":"#/definitions/row"}]},"after":{"oneOf":[{"type":"null"},{"$ref":"#/definitions/row"}]}}}`,
			dec,
			"ID:int64 key, QTY:int64 null, BIG:decimal_text null, WIDE:decimal_text, CREATED:timestamp(us) null, BORN:date null, NAME:string, OK:boolean"},
		{"schema does not contradict metadata",
			`{"columns":{"A":{"type":"string","null":false},"B":{"type":"boolean","null":false}}}`,
			`{"type":"object","properties":{"after":{"type":"object","properties":{"A":{"type":"integer"},"B":{"type":"string","format":"date-time"}}}}}`,
			dec, "A:string, B:boolean"},
		{"row model schema",
			`{"columns":{"A":{"type":"number","null":false},"B":{"type":"string"}}}`,
			`{"id":"S.T","type":"object","properties":{"A":{"type":"integer"},"B":{"type":"string","format":"date-time"}}}`,
			dec, "A:int64, B:timestamp(us)"},
		{"before image schema only",
			`{"columns":{"A":{"type":"integer"}}}`,
			`{"definitions":{"r":{"properties":{"A":{"type":"integer"}}}},"properties":{"before":{"$ref":"#/definitions/r"}}}`,
			dec, "A:int64"},
		{"integer without schema stays numbers", `{"columns":{"A":{"type":"integer","key":true}}}`, "", dec, "A:decimal_text null key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			meta := fastjson.MustParse(tc.meta)
			var js *fastjson.Value
			if tc.schema != "" {
				js = fastjson.MustParse(tc.schema)
			}
			cols, err := ObjectColumns(meta, js, tc.numbers)
			if err != nil {
				t.Fatal(err)
			}
			if got := colText(cols); got != tc.want {
				t.Errorf("columns:\n  got  %s\n  want %s", got, tc.want)
			}
		})
	}
}

func TestObjectColumnsTimestampType(t *testing.T) {
	cols, err := ObjectColumns(
		fastjson.MustParse(`{"columns":{"T":{"type":"string"}}}`),
		fastjson.MustParse(`{"properties":{"T":{"type":"string","format":"date-time"}}}`),
		schema.Type{})
	if err != nil {
		t.Fatal(err)
	}
	want := schema.Type{Kind: schema.Timestamp, Unit: schema.Micros, UTC: false}
	if got := cols[0].Type; got.String() != want.String() {
		t.Errorf("date-time column type = %s, want %s", got, want)
	}
}

func TestObjectColumnsErrors(t *testing.T) {
	cases := []struct {
		meta, want string
	}{
		{`{"op_type":"OBJECT_METADATA","qual_table":"S.T"}`, "columns is not an object"},
		{`{"columns":[]}`, "columns is not an object"},
		{`{"columns":{}}`, "no columns"},
		{`{"columns":{"A":{"type":"string"},"GEOM":{"type":"object"}}}`, `column "GEOM": unknown type "object"`},
		{`{"columns":{"A":{"null":true}}}`, `column "A": type is missing or not a string`},
		{`{"columns":{"A":{"type":1}}}`, `column "A": type is missing or not a string`},
		{`{"columns":{"A":"string"}}`, `column "A": attributes are a JSON string, want an object`},
		{`{"columns":{"A":{"type":"string","null":"no"}}}`, `column "A": null is a JSON string, want a boolean`},
		{`{"columns":{"A":{"type":"string","key":1}}}`, `column "A": key is a JSON number, want a boolean`},
		{`{"columns":{"A":{"type":"string"},"A":{"type":"number"}}}`, `column "A": listed twice`},
	}
	for _, tc := range cases {
		_, err := ObjectColumns(fastjson.MustParse(tc.meta), nil, schema.Type{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ObjectColumns(%s) error = %v, want it to contain %q", tc.meta, err, tc.want)
		}
	}
	if _, err := ObjectColumns(nil, nil, schema.Type{}); err == nil {
		t.Error("ObjectColumns(nil) = nil error")
	}
}

func TestResolveRef(t *testing.T) {
	root := fastjson.MustParse(`{"definitions":{"a/b":{"x":1},"m~n":{"x":2},"arr":[{"x":3}]}}`)
	for ref, want := range map[string]string{
		"#/definitions/a~1b":    `{"x":1}`,
		"#/definitions/m~0n":    `{"x":2}`,
		"#/definitions/arr/0":   `{"x":3}`,
		"#/definitions/missing": "<nil>",
		"other.json#/x":         "<nil>",
		"#definitions":          "<nil>",
	} {
		got := "<nil>"
		if v := resolveRef(root, ref); v != nil {
			got = v.String()
		}
		if got != want {
			t.Errorf("resolveRef(%q) = %s, want %s", ref, got, want)
		}
	}
}
