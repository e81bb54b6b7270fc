package classify_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/classify"
	"github.com/cdclake/cdclake/handlers/decode"
	"github.com/cdclake/cdclake/handlers/decode/debezium"
	"github.com/cdclake/cdclake/handlers/decode/goldengate"
	"github.com/cdclake/cdclake/handlers/unwrap"
	"github.com/valyala/fastjson"
)

// plain is a format that cannot recognise its messages: it is decoded only
// when configured.
type plain struct{}

func (plain) Format() string { return "plain" }
func (plain) Decode(v *fastjson.Value, c *change.Change) error {
	c.Format, c.Kind, c.Op, c.Table = "plain", change.KindDML, change.OpInsert, "t"
	o, err := v.Object()
	if err != nil {
		return decode.Malformed("not an object")
	}
	c.After = change.Image{Obj: o}
	return nil
}

func decoders(t *testing.T) []decode.Decoder {
	t.Helper()
	dbz, err1 := debezium.New(debezium.Options{})
	ds, err2 := goldengate.NewDataStreams(goldengate.Options{})
	bd, err3 := goldengate.NewBigData(goldengate.BigDataOptions{})
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Fatal(err)
	}
	return []decode.Decoder{dbz, ds, bd, plain{}}
}

func run(t *testing.T, cl *classify.Classifier, msg string) (decode.Decoder, *change.Change, error) {
	t.Helper()
	var u unwrap.Unwrapper
	var c change.Change
	v, err := u.Unwrap(&unwrap.Arena{}, []byte(msg), &c)
	if err != nil {
		t.Fatal(err)
	}
	d, err := cl.Decode(v, &c)
	return d, &c, err
}

func TestAutoDetection(t *testing.T) {
	cl, err := classify.New(decoders(t), classify.Auto)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, msg, format string
		kind              change.Kind
	}{
		{"debezium", `{"op":"c","after":{"id":1},"source":{"db":"d","table":"t"}}`, debezium.Format, change.KindDML},
		{"debezium with connect schema", `{"schema":{"type":"struct","fields":[{"field":"after","type":"struct","fields":[{"field":"id","type":"int32"}]}]},"payload":{"op":"c","after":{"id":1},"source":{"db":"d","table":"t"}}}`,
			debezium.Format, change.KindDML},
		{"debezium transaction", `{"status":"BEGIN","id":"571","ts_ms":1}`, debezium.Format, change.KindTransaction},
		{"data streams", `{"qual_table":"S.T","op_type":"INSERT","after":{"A":1}}`, goldengate.FormatDataStreams, change.KindDML},
		{"data streams schema record", `{"$schema":"x","id":"S.T","type":"object","properties":{}}`, goldengate.FormatDataStreams, change.KindSchemaRecord},
		{"big data", `{"table":"S.T","op_type":"I","after":{"A":1}}`, goldengate.FormatBigData, change.KindDML},
		{"cloudevents around data streams", `{"specversion":"1.0","type":"t","source":"s","id":"1","data":{"qual_table":"S.T","op_type":"DELETE","before":{"A":1}}}`,
			goldengate.FormatDataStreams, change.KindDML},
	} {
		d, c, err := run(t, cl, tc.msg)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if d.Format() != tc.format || c.Format != tc.format || c.Kind != tc.kind {
			t.Errorf("%s: decoder %s, change format %s kind %s; want %s, %s", tc.name, d.Format(), c.Format, c.Kind, tc.format, tc.kind)
		}
	}
	for _, msg := range []string{`{"op_type":"MERGE","x":1}`, `{"a":1}`, `[1,2]`, `"text"`} {
		d, _, err := run(t, cl, msg)
		if d != nil || !errors.Is(err, decode.ErrMalformed) {
			t.Errorf("%s: decoder %v, error %v; want a malformed-message error", msg, d, err)
		}
	}
	_, _, err = run(t, cl, `{"a":1}`)
	if !strings.Contains(err.Error(), "not one of the formats debezium, goldengate, goldengate-bigdata, plain") {
		t.Errorf("error %v does not list the formats", err)
	}
}

func TestForcedFormat(t *testing.T) {
	cl, err := classify.New(decoders(t), "plain")
	if err != nil {
		t.Fatal(err)
	}
	// Decoded by the forced format even though another would claim it.
	d, c, err := run(t, cl, `{"qual_table":"S.T","op_type":"INSERT","after":{"A":1}}`)
	if err != nil || d.Format() != "plain" || c.Format != "plain" {
		t.Errorf("forced: %v %v", d, err)
	}
	cl, err = classify.New(decoders(t), debezium.Format)
	if err != nil {
		t.Fatal(err)
	}
	// The forced decoder's error names its format.
	if _, _, err := run(t, cl, `{"qual_table":"S.T","op_type":"INSERT","after":{"A":1}}`); err == nil ||
		!strings.HasPrefix(err.Error(), "debezium: ") || !errors.Is(err, decode.ErrMalformed) {
		t.Errorf("forced debezium on a GoldenGate record: %v", err)
	}
	if _, err := classify.New(decoders(t), "avro"); err == nil ||
		!strings.Contains(err.Error(), `unknown format "avro" (auto, debezium, goldengate, goldengate-bigdata, plain)`) {
		t.Errorf("unknown format: %v", err)
	}
}
