package debezium

import (
	"strings"
	"testing"

	"github.com/cdclake/cdclake/handlers/change"
	"github.com/valyala/fastjson"
)

func TestUnquoteTableID(t *testing.T) {
	tests := []struct{ in, want, err string }{
		{`"testDB"."dbo"."customers"`, "testDB.dbo.customers", ""},
		{`"inventory"."customers"`, "inventory.customers", ""},
		{`inventory.customers`, "inventory.customers", ""},
		{`"a""b"."c"`, `a"b.c`, ""},
		{`"my.db"."t"`, "my.db.t", ""},
		{`"db"."old","db"."new"`, "db.new", ""},
		{`""`, "", ""},
		{`"db"."t`, "", "unterminated"},
		{`"db"x`, "", "text after"},
	}
	for _, tt := range tests {
		got, err := unquoteTableID(nil, []byte(tt.in))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: error %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || string(got) != tt.want {
			t.Errorf("%s: got %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestPlaceholderForms(t *testing.T) {
	p := newPlaceholder([]byte(DefaultUnavailableValuePlaceholder))
	if len(p.uuid) != 36 || p.uuid[14] != '3' {
		t.Fatalf("uuid %q", p.uuid)
	}
	if p.b64 != "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==" {
		t.Fatalf("base64 %q", p.b64)
	}
	yes := []string{
		`"__debezium_unavailable_value"`,
		`"X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="`,
		`["__debezium_unavailable_value"]`,
		`["X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="]`,
		`["` + p.uuid + `"]`,
		`[95,95,100,101,98,101,122,105,117,109,95,117,110,97,118,97,105,108,97,98,108,101,95,118,97,108,117,101]`,
		`{"__debezium_unavailable_value":"__debezium_unavailable_value"}`,
		`"{\"__debezium_unavailable_value\":\"__debezium_unavailable_value\"}"`,
		`"__debezium\u005funavailable_value"`,
	}
	no := []string{
		`"__debezium_unavailable_valu"`, `"x__debezium_unavailable_value"`, `null`, `1`, `true`,
		`["__debezium_unavailable_value","x"]`, `[]`, `[95,95]`, `{}`,
		`{"__debezium_unavailable_value":"x"}`, `{"__debezium_unavailable_value":"__debezium_unavailable_value","a":"b"}`,
		`[95,95,100,101,98,101,122,105,117,109,95,117,110,97,118,97,105,108,97,98,108,101,95,118,97,108,117,102]`,
		`[[1]]`,
	}
	for _, s := range yes {
		if !p.matches(fastjson.MustParse(s)) {
			t.Errorf("%s: not recognised", s)
		}
	}
	for _, s := range no {
		if p.matches(fastjson.MustParse(s)) {
			t.Errorf("%s: recognised", s)
		}
	}
}

func TestPlaceholderUUIDIsJavaNameUUID(t *testing.T) {
	// Java: UUID.nameUUIDFromBytes("abc".getBytes()) = 90015098-3cd2-3fb0-9696-3f7d28e17f72
	// (MD5 900150983cd24fb0d6963f7d28e17f72 with version 3 and the IETF variant).
	if got := newPlaceholder([]byte("abc")).uuid; got != "90015098-3cd2-3fb0-9696-3f7d28e17f72" {
		t.Fatalf("got %s", got)
	}
}

func TestHexPlaceholder(t *testing.T) {
	if err := (Options{UnavailableValuePlaceholder: "hex:zz"}).Validate(); err == nil {
		t.Fatal("bad hex accepted")
	}
	if err := (Options{UnavailableValuePlaceholder: "hex:"}).Validate(); err == nil {
		t.Fatal("empty hex accepted")
	}
	if err := (Options{}).Validate(); err != nil {
		t.Fatal(err)
	}
	d, err := New(Options{UnavailableValuePlaceholder: "hex:4e2f41"}) // "N/A"
	if err != nil {
		t.Fatal(err)
	}
	if d.ph.str != "N/A" || d.ph.b64 != "Ti9B" {
		t.Fatalf("placeholder %+v", d.ph)
	}
	v := fastjson.MustParse(`{"op":"u","after":{"id":1,"a":"N/A","b":"Ti9B","c":"__debezium_unavailable_value"},"source":{"db":"d","table":"t"}}`)
	var c change.Change
	if err := d.Decode(v, &c); err != nil {
		t.Fatal(err)
	}
	if got := string(c.After.Obj.MarshalTo(nil)); got != `{"id":1,"c":"__debezium_unavailable_value"}` {
		t.Fatalf("after %s", got)
	}
	if _, err := New(Options{UnavailableValuePlaceholder: "hex:0"}); err == nil {
		t.Error("New with an invalid placeholder succeeded")
	}
}

func TestKeepUnavailable(t *testing.T) {
	d, _ := New(Options{KeepUnavailable: true})
	v := fastjson.MustParse(`{"op":"u","after":{"id":1,"a":"__debezium_unavailable_value"},"source":{"db":"d","table":"t"}}`)
	var c change.Change
	if err := d.Decode(v, &c); err != nil {
		t.Fatal(err)
	}
	if c.After.Obj.Get("a") == nil {
		t.Fatal("placeholder removed")
	}
}

func TestDecodeKeepsEnvelopeExtrasAndFallsBackToBefore(t *testing.T) {
	d, _ := New(Options{})
	env := fastjson.MustParse(`{"type":"struct","name":"x.Envelope","fields":[
		{"type":"struct","field":"before","optional":true,"name":"x.Value","fields":[{"type":"int32","field":"id"}]},
		{"type":"struct","field":"source","fields":[{"type":"string","field":"db"}]},
		{"type":"string","field":"op"}]}`)
	v := fastjson.MustParse(`{"op":"d","before":{"id":1},"after":null,"source":{"db":"d","schema":"s","table":"t","lsn":7}}`)
	var c change.Change
	c.AddString("_ce_id", []byte("42"))
	c.Schema, c.SchemaKey = env, []byte("k")
	if err := d.Decode(v, &c); err != nil {
		t.Fatal(err)
	}
	if string(c.Schema.GetStringBytes("name")) != "x.Value" || string(c.SchemaKey) != "k" {
		t.Fatalf("schema %s key %q", c.Schema, c.SchemaKey)
	}
	if len(c.Extras) != 2 || c.Extras[0].Name != "_ce_id" || c.Extras[1].Name != ExtraSource {
		t.Fatalf("extras %+v", c.Extras)
	}
	if c.Table != "d.s.t" || c.Pos != "7" {
		t.Fatalf("table %q pos %q", c.Table, c.Pos)
	}
}

func TestDetect(t *testing.T) {
	tests := []struct {
		json      string
		hasSchema bool
		want      bool
	}{
		{`{"op":"c","after":{},"source":{}}`, false, true},
		{`{"op":"m","source":{},"message":{}}`, false, true},
		{`{"op":"c","after":{}}`, false, false},
		{`{"op":"c","after":{}}`, true, true},
		{`{"op":"x","source":{}}`, false, false},
		{`{"op_type":"I","table":"T"}`, false, false},
		{`{"status":"BEGIN","id":"1"}`, false, true},
		{`{"status":"DONE","id":"1"}`, false, false},
		{`{"databaseName":"db","ddl":"x"}`, false, true},
		{`{"databaseName":"db","tableChanges":[]}`, true, true},
		{`{"databaseName":"db"}`, false, false},
		{`{"ts_ms":1}`, false, true},
		{`{"ts_ms":1,"x":2}`, false, false},
		{`[1]`, false, false},
		{`"x"`, false, false},
	}
	for _, tt := range tests {
		if got := Detect(fastjson.MustParse(tt.json), tt.hasSchema); got != tt.want {
			t.Errorf("Detect(%s, %v) = %v", tt.json, tt.hasSchema, got)
		}
	}
	if Detect(nil, false) {
		t.Error("Detect(nil)")
	}
}

func TestParseInt(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "-5": -5, "1580390884335": 1580390884335,
		"9223372036854775807": 9223372036854775807, "-9223372036854775808": -9223372036854775808} {
		if got, err := parseInt([]byte(in)); err != nil || got != want {
			t.Errorf("%s: %d, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "-", "1.5", "1e3", "9223372036854775808", "-9223372036854775809", "99999999999999999999", " 1"} {
		if _, err := parseInt([]byte(in)); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func TestPostgresTxID(t *testing.T) {
	for in, want := range map[string]string{
		"747:26548048": "747",
		"3E11FA47-71CA-11E1-9E33-C80AA9429562:23": "3E11FA47-71CA-11E1-9E33-C80AA9429562:23",
		"00000025:00000d98:00a2":                  "00000025:00000d98:00a2",
		"571":                                     "571",
		"1:2:3":                                   "1:2:3",
		":5":                                      ":5",
		"5:":                                      "5:",
	} {
		if got := string(postgresTxID([]byte(in))); got != want {
			t.Errorf("postgresTxID(%q) = %q, want %q", in, got, want)
		}
	}
}
