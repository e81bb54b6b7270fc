package unwrap

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cdclake/cdclake/handlers/change"
)

func TestUnwrap(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		tombstone bool
		inner     string // JSON text of the returned value
		schema    string // JSON text of c.Schema
		extras    map[string]string
		err       bool
	}{
		{name: "empty", in: "", tombstone: true},
		{name: "blank", in: "  \r", tombstone: true},
		{name: "null", in: "null", tombstone: true},
		{name: "connect null payload", in: `{"schema":null,"payload":null}`, tombstone: true},
		{name: "bare", in: `{"op":"c","after":{"id":1}}`, inner: `{"op":"c","after":{"id":1}}`},
		{name: "connect envelope", in: `{"schema":{"type":"struct","name":"x.Envelope"},"payload":{"op":"c"}}`,
			inner: `{"op":"c"}`, schema: `{"type":"struct","name":"x.Envelope"}`},
		{name: "payload only with other keys is not an envelope", in: `{"schema":{"type":"struct"},"payload":{},"x":1}`,
			inner: `{"schema":{"type":"struct"},"payload":{},"x":1}`},
		{name: "cloudevents", in: `{"specversion":"1.0","type":"t.x","source":"/s","id":"42","time":"2026-07-13T04:01:01Z","datacontenttype":"application/json","data":{"op_type":"INSERT"}}`,
			inner: `{"op_type":"INSERT"}`, extras: map[string]string{"_ce_type": "t.x", "_ce_source": "/s", "_ce_id": "42", "_ce_time": "2026-07-13T04:01:01Z"}},
		{name: "cloudevents base64", in: `{"specversion":"1.0","type":"t","source":"s","id":"1","data_base64":"eyJvcCI6ImMifQ=="}`,
			inner: `{"op":"c"}`, extras: map[string]string{"_ce_type": "t", "_ce_source": "s", "_ce_id": "1"}},
		{name: "cloudevents null data", in: `{"specversion":"1.0","type":"t","source":"s","id":"1","data":null}`, tombstone: true},
		{name: "cloudevents around connect", in: `{"specversion":"1.0","type":"t","source":"s","id":"1","data":{"schema":{"type":"struct"},"payload":{"op":"u"}}}`,
			inner: `{"op":"u"}`, schema: `{"type":"struct"}`, extras: map[string]string{"_ce_type": "t", "_ce_source": "s", "_ce_id": "1"}},
		{name: "not json", in: `{"op":`, err: true},
		{name: "bad base64", in: `{"specversion":"1.0","data_base64":"%%%"}`, err: true},
		{name: "scalar", in: `42`, inner: `42`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var u Unwrapper
			var c change.Change
			v, err := u.Unwrap(&Arena{}, []byte(tt.in), &c)
			if (err != nil) != tt.err {
				t.Fatalf("err = %v, want error %v", err, tt.err)
			}
			if tt.err {
				return
			}
			if got := c.Kind == change.KindTombstone; got != tt.tombstone {
				t.Fatalf("tombstone = %v, want %v", got, tt.tombstone)
			}
			if tt.tombstone {
				return
			}
			if got := v.String(); got != tt.inner {
				t.Errorf("inner = %s, want %s", got, tt.inner)
			}
			gotSchema := ""
			if c.Schema != nil {
				gotSchema = c.Schema.String()
				if string(c.SchemaKey) != gotSchema {
					t.Errorf("schema key %q != schema %q", c.SchemaKey, gotSchema)
				}
			}
			if gotSchema != tt.schema {
				t.Errorf("schema = %s, want %s", gotSchema, tt.schema)
			}
			got := map[string]string{}
			for _, e := range c.Extras {
				got[e.Name] = string(c.ExtraBytes(e))
			}
			if len(got) != len(tt.extras) {
				t.Errorf("extras = %v, want %v", got, tt.extras)
			}
			for k, want := range tt.extras {
				if got[k] != want {
					t.Errorf("extra %s = %q, want %q", k, got[k], want)
				}
			}
		})
	}
}

func FuzzUnwrap(f *testing.F) {
	for _, s := range []string{"", "null", `{"schema":null,"payload":null}`, `{"schema":{"a":1},"payload":{"op":"c"}}`,
		`{"specversion":"1.0","type":"t","source":"s","id":"1","data":{"x":1}}`,
		`{"specversion":"1.0","data_base64":"eyJvcCI6ImMifQ=="}`} {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"schema":{"a":1},"payload":{"op":"c"},"x":1}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var u Unwrapper
		var a Arena
		var c change.Change
		v, err := u.Unwrap(&a, in, &c)
		if err == nil && v == nil && c.Kind != change.KindTombstone {
			t.Fatalf("nil value without tombstone for %q", in)
		}
		// The same message again, its schema now cached (recognised by its
		// bytes): the same outcome, and the same as a fresh unwrapper's.
		first := outcome(&u, in)
		if fresh := outcome(&Unwrapper{}, in); first != fresh {
			t.Fatalf("%q\ncached: %s\nfresh:  %s", in, first, fresh)
		}
	})
}

func TestHeaders(t *testing.T) {
	var c change.Change
	Headers([]Header{
		{"ce_specversion", []byte("1.0")}, {"ce_type", []byte("com.example.orders")}, {"ce_source", []byte("/ogg/1")},
		{"ce_id", []byte("evt-9")}, {"content-type", []byte("application/json")},
		{"__debezium.oldkey", []byte(`{"id":7}`)}, {"__debezium.newkey", []byte("not json")}, {"other", []byte("x")},
	}, &c)
	got := map[string]string{}
	for _, e := range c.Extras {
		got[e.Name] = string(c.ExtraBytes(e)) + "/" + fmt.Sprint(e.Kind)
	}
	want := map[string]string{"_ce_type": "com.example.orders/0", "_ce_source": "/ogg/1/0", "_ce_id": "evt-9/0",
		"_debezium_oldkey": `{"id":7}/1`, "_debezium_newkey": "not json/0"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("extras %v, want %v", got, want)
	}
	// Without ce_specversion, ce_ headers are not a CloudEvent.
	var d change.Change
	Headers([]Header{{"ce_type", []byte("x")}}, &d)
	if len(d.Extras) != 0 {
		t.Errorf("ce_type without ce_specversion became %v", d.Extras)
	}
}

// outcome renders what Unwrap made of a message, for comparisons.
func outcome(u *Unwrapper, raw []byte) string {
	var a Arena
	var c change.Change
	v, err := u.Unwrap(&a, raw, &c)
	out := fmt.Sprintf("kind=%v err=%v schema=%q", c.Kind, err != nil, c.SchemaKey)
	if v != nil {
		out += " value=" + string(v.MarshalTo(nil))
	}
	return out
}

// TestKnownEnvelope checks that an envelope whose schema is cached (the
// schema recognised by its bytes, not scanned) unwraps exactly as the first
// one, which scanned it, and that near misses take the scanning path.
func TestKnownEnvelope(t *testing.T) {
	schema := `{"type":"struct","fields":[{"type":"string","optional":true,"field":"payload"}],"name":"t.Envelope"}`
	params := `{"type":"string","parameters":{"a":"b","payload":"x"}}`
	for _, raw := range []string{
		`{"schema":` + schema + `,"payload":{"op":"c","after":{"payload":"{\"schema\":1,\"payload\":2}"}}}`,
		`{"schema":` + schema + `,"payload":null}`,
		`{"schema":` + schema + `,"payload":{"op":"c","after":{"a":1,"payload":2}}}`,
		`{"schema":` + schema + `,"payload":{"op":"c","after":{"a":1,"payload":2}},"payload":3}`,
		`{"schema":` + schema + `,"payload":{"op":"c"}}  `,
		`{"schema":` + schema + `,"payload":{"op":"c"},"payload":{"op":"d"}}`,
		`{"schema":` + schema + `,"payload":{"op":"c"},"extra":1}`,
		`{"schema":` + schema + `,"payload":{"op":"c"`,
		`{"schema":` + schema + `,"payload":{"op":"c"}}}`,
		`{"schema":` + schema + ` ,"payload":{"op":"c"}}`,
		`{"schema":` + params + `,"payload":"text"}`,
	} {
		// With few schema lengths cached, their ends are tried; with
		// many, ,"payload": is searched for.
		for _, cached := range []int{0, maxLengths + 1} {
			var u Unwrapper
			for i := range cached {
				outcome(&u, []byte(`{"schema":{"name":"`+strings.Repeat("x", i)+`"},"payload":{}}`))
			}
			if cached > maxLengths && u.lengths != nil {
				t.Fatalf("%d schema lengths tried one by one", len(u.lengths))
			}
			first := outcome(&u, []byte(raw))
			if again := outcome(&u, []byte(raw)); again != first {
				t.Errorf("%s\nfirst:  %s\nagain:  %s", raw, first, again)
			}
			if fresh := outcome(&Unwrapper{}, []byte(raw)); fresh != first {
				t.Errorf("%s\nfirst:  %s\nfresh:  %s", raw, first, fresh)
			}
		}
	}
}

// TestSchemasSharingTails checks that schemas of the same length whose
// texts end alike (the index hashes only their ends) are told apart, with
// few schema lengths cached and with many.
func TestSchemasSharingTails(t *testing.T) {
	tail := strings.Repeat(`{"type":"int32","optional":true,"field":"c"},`, 2*tailLen/40)
	schema := func(first string) string {
		return `{"type":"struct","fields":[{"type":"string","optional":true,"field":"` + first + `"},` + tail +
			`{"type":"int32","optional":true,"field":"z"}],"name":"t.Envelope"}`
	}
	texts := []string{schema("a"), schema("b"), schema("c"), schema("ab")}
	for _, cached := range []int{0, maxLengths + 1} {
		var u Unwrapper
		for i := range cached {
			outcome(&u, []byte(`{"schema":{"name":"`+strings.Repeat("x", i)+`"},"payload":{}}`))
		}
		for round := range 3 {
			for _, s := range texts {
				raw := []byte(`{"schema":` + s + `,"payload":{"op":"c","after":{"a":1}}}`)
				var a Arena
				var c change.Change
				if _, err := u.Unwrap(&a, raw, &c); err != nil {
					t.Fatal(err)
				}
				if string(c.SchemaKey) != s {
					t.Fatalf("cached %d, round %d: schema %.60q… unwrapped as %.60q…", cached, round, s, c.SchemaKey)
				}
				if got := string(c.Schema.MarshalTo(nil)); got != s {
					t.Fatalf("cached %d, round %d: parsed schema %.60q…, want %.60q…", cached, round, got, s)
				}
			}
		}
		if u.schemas.n-cached != len(texts) {
			t.Errorf("cached %d: %d schemas indexed, want %d", cached, u.schemas.n-cached, len(texts))
		}
	}
}
