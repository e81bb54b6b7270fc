package debezium_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cdclake/cdclake/handlers/decode/debezium"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/valyala/fastjson"
)

func row(fields ...string) string {
	return `{"type":"struct","name":"srv.db.t.Value","optional":true,"fields":[` + strings.Join(fields, ",") + `]}`
}

func TestColumnsTypes(t *testing.T) {
	tests := []struct {
		name   string
		field  string // one field schema, "field":"c"
		want   string // Type.String()
		null   bool
		wantTy *schema.Type // extra checks when set
	}{
		{"int8", `{"type":"int8","optional":false,"field":"c"}`, "int8", false, nil},
		{"int16", `{"type":"int16","optional":true,"field":"c"}`, "int16", true, nil},
		{"int32", `{"type":"int32","field":"c"}`, "int32", false, nil},
		{"int64", `{"type":"int64","optional":true,"field":"c"}`, "int64", true, nil},
		{"float32", `{"type":"float32","optional":true,"field":"c"}`, "float", true, nil},
		{"float64", `{"type":"float64","optional":true,"field":"c"}`, "double", true, nil},
		{"JsonConverter float", `{"type":"float","optional":true,"field":"c"}`, "float", true, nil},
		{"JsonConverter double", `{"type":"double","optional":true,"field":"c"}`, "double", true, nil},
		{"boolean", `{"type":"boolean","optional":true,"field":"c"}`, "boolean", true, nil},
		{"string", `{"type":"string","optional":true,"field":"c"}`, "string", true, nil},
		{"bytes", `{"type":"bytes","optional":true,"field":"c"}`, "binary", true,
			&schema.Type{Kind: schema.Binary, Enc: schema.EncNative}},
		{"struct", `{"type":"struct","optional":true,"field":"c","fields":[{"type":"int32","optional":false,"field":"a"},{"type":"string","optional":true,"field":"b"}]}`,
			`struct<"a":int32 not null,"b":string>`, true, nil},
		{"array", `{"type":"array","optional":true,"field":"c","items":{"type":"string","optional":true}}`, "list<string>", true, nil},
		{"array of struct", `{"type":"array","optional":true,"field":"c","items":{"type":"struct","fields":[{"type":"int64","field":"x"}]}}`,
			`list<struct<"x":int64 not null>>`, true, nil},
		{"map", `{"type":"map","optional":true,"field":"c","keys":{"type":"string","optional":false},"values":{"type":"int32","optional":true}}`,
			"map<string,int32>", true, nil},
		{"decimal", `{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2","connect.decimal.precision":"8"},"field":"c"}`,
			"decimal(8,2)/e1", false, &schema.Type{Kind: schema.Decimal, Enc: schema.EncBase64Decimal, Precision: 8, Scale: 2}},
		{"decimal precision 38", `{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"0","connect.decimal.precision":"38"},"field":"c"}`,
			"decimal(38,0)/e1", false, nil},
		{"decimal numeric parameters", `{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":4,"connect.decimal.precision":19},"field":"c"}`,
			"decimal(19,4)/e1", false, nil},
		{"decimal without precision", `{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"3"},"field":"c"}`,
			"decimal_text/e1", true, &schema.Type{Kind: schema.DecimalText, Enc: schema.EncBase64Decimal, Scale: 3}},
		{"decimal precision over 38", `{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"30","connect.decimal.precision":"65"},"field":"c"}`,
			"decimal_text/e1", false, &schema.Type{Kind: schema.DecimalText, Enc: schema.EncBase64Decimal, Scale: 30}},
		{"decimal negative scale", `{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"-2","connect.decimal.precision":"5"},"field":"c"}`,
			"decimal_text/e1", false, &schema.Type{Kind: schema.DecimalText, Enc: schema.EncBase64Decimal, Scale: -2}},
		{"decimal scale over precision", `{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"5","connect.decimal.precision":"2"},"field":"c"}`,
			"decimal_text/e1", false, &schema.Type{Kind: schema.DecimalText, Enc: schema.EncBase64Decimal, Scale: 5}},
		{"variable scale decimal", `{"type":"struct","optional":true,"name":"io.debezium.data.VariableScaleDecimal","version":1,"doc":"Variable scaled decimal","fields":[{"type":"int32","optional":false,"field":"scale"},{"type":"bytes","optional":false,"field":"value"}],"field":"c"}`,
			"decimal_text/e2", true, &schema.Type{Kind: schema.DecimalText, Enc: schema.EncVariableScale}},
		{"debezium date", `{"type":"int32","optional":true,"name":"io.debezium.time.Date","version":1,"field":"c"}`, "date/e3", true, nil},
		{"connect date", `{"type":"int32","name":"org.apache.kafka.connect.data.Date","version":1,"field":"c"}`, "date/e3", false, nil},
		{"connect time", `{"type":"int32","name":"org.apache.kafka.connect.data.Time","version":1,"field":"c"}`, "time(ms)/e4", false, nil},
		{"debezium time", `{"type":"int32","name":"io.debezium.time.Time","version":1,"field":"c"}`, "time(ms)/e4", false, nil},
		{"micro time", `{"type":"int64","name":"io.debezium.time.MicroTime","version":1,"field":"c"}`, "time(us)/e4", false, nil},
		{"nano time", `{"type":"int64","name":"io.debezium.time.NanoTime","version":1,"field":"c"}`, "time(ns)/e4", false, nil},
		{"connect timestamp", `{"type":"int64","name":"org.apache.kafka.connect.data.Timestamp","version":1,"field":"c"}`,
			"timestamp(ms)/e4", false, &schema.Type{Kind: schema.Timestamp, Enc: schema.EncEpochUnit, Unit: schema.Millis}},
		{"debezium timestamp", `{"type":"int64","name":"io.debezium.time.Timestamp","version":1,"field":"c"}`, "timestamp(ms)/e4", false, nil},
		{"micro timestamp", `{"type":"int64","name":"io.debezium.time.MicroTimestamp","version":1,"field":"c"}`, "timestamp(us)/e4", false, nil},
		{"nano timestamp", `{"type":"int64","name":"io.debezium.time.NanoTimestamp","version":1,"field":"c"}`, "int64", false,
			&schema.Type{Kind: schema.Int64, Logical: "io.debezium.time.NanoTimestamp"}},
		{"zoned timestamp", `{"type":"string","optional":true,"name":"io.debezium.time.ZonedTimestamp","version":1,"field":"c"}`,
			"timestamp(us,utc)/e7", true, &schema.Type{Kind: schema.Timestamp, Enc: schema.EncZoned, Unit: schema.Micros, UTC: true}},
		{"zoned timestamp scale 6", `{"type":"string","name":"io.debezium.time.ZonedTimestamp","parameters":{"__debezium.source.column.type":"TIMESTAMPTZ","__debezium.source.column.scale":"6"},"field":"c"}`,
			"timestamp(us,utc)/e7", false, nil},
		{"zoned timestamp scale 7", `{"type":"string","name":"io.debezium.time.ZonedTimestamp","parameters":{"__debezium.source.column.type":"DATETIMEOFFSET","__debezium.source.column.scale":"7"},"field":"c"}`,
			"string", false, nil},
		{"zoned time", `{"type":"string","name":"io.debezium.time.ZonedTime","version":1,"field":"c"}`, "string", false, nil},
		{"json", `{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1,"field":"c"}`, "json", true, nil},
		{"uuid", `{"type":"string","name":"io.debezium.data.Uuid","version":1,"field":"c"}`, "string", false, nil},
		{"enum", `{"type":"string","name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":"a,b"},"field":"c"}`, "string", false, nil},
		{"enum set", `{"type":"string","name":"io.debezium.data.EnumSet","version":1,"parameters":{"allowed":"a,b"},"field":"c"}`, "string", false, nil},
		{"xml", `{"type":"string","name":"io.debezium.data.Xml","version":1,"field":"c"}`, "string", false, nil},
		{"bits", `{"type":"bytes","name":"io.debezium.data.Bits","version":1,"parameters":{"length":"10"},"field":"c"}`, "binary", false,
			&schema.Type{Kind: schema.Binary, Logical: "io.debezium.data.Bits"}},
		{"micro duration", `{"type":"int64","name":"io.debezium.time.MicroDuration","version":1,"field":"c"}`, "int64", false, nil},
		{"interval", `{"type":"string","name":"io.debezium.time.Interval","version":1,"field":"c"}`, "string", false, nil},
		{"year", `{"type":"int32","name":"io.debezium.time.Year","version":1,"field":"c"}`, "int32", false, nil},
		{"unknown logical", `{"type":"string","name":"io.debezium.data.Ltree","version":1,"field":"c"}`, "string", false,
			&schema.Type{Kind: schema.String, Logical: "io.debezium.data.Ltree"}},
		{"known name, other base type", `{"type":"string","name":"io.debezium.time.Date","field":"c"}`, "string", false,
			&schema.Type{Kind: schema.String, Logical: "io.debezium.time.Date"}},
		{"struct with a non-Connect field type", `{"type":"struct","optional":true,"name":"io.debezium.data.geometry.Point","version":1,"fields":[{"type":"number","optional":false,"field":"x"},{"type":"number","optional":false,"field":"y"},{"type":"bytes","optional":true,"field":"wkb"},{"type":"int32","optional":true,"field":"srid"}],"field":"c"}`,
			"", false, nil}, // "number" is not a Connect type: ErrSchema
		{"point", `{"type":"struct","optional":true,"name":"io.debezium.data.geometry.Point","version":1,"fields":[{"type":"float64","optional":false,"field":"x"},{"type":"float64","optional":false,"field":"y"},{"type":"bytes","optional":true,"field":"wkb"},{"type":"int32","optional":true,"field":"srid"}],"field":"c"}`,
			`struct<"x":double not null,"y":double not null,"wkb":binary,"srid":int32>`, true, nil},
		{"array of uuid", `{"type":"array","optional":true,"items":{"type":"string","optional":true,"name":"io.debezium.data.Uuid"},"field":"c"}`,
			"list<string>", true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := fastjson.Parse(row(tt.field))
			if err != nil {
				t.Fatal(err)
			}
			cols, err := debezium.Columns(v)
			if tt.want == "" {
				if !errors.Is(err, debezium.ErrSchema) {
					t.Fatalf("want an ErrSchema error, got %v (%v)", err, cols)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(cols) != 1 || cols[0].Name != "c" {
				t.Fatalf("columns %+v", cols)
			}
			c := cols[0]
			if got := c.Type.String(); got != tt.want {
				t.Errorf("type %s, want %s", got, tt.want)
			}
			if c.Nullable != tt.null {
				t.Errorf("nullable %v, want %v", c.Nullable, tt.null)
			}
			if c.Key {
				t.Errorf("key set")
			}
			name := fastjson.MustParse(tt.field).GetStringBytes("name")
			if c.Type.Logical != string(name) {
				t.Errorf("logical %q, want %q", c.Type.Logical, name)
			}
			if w := tt.wantTy; w != nil {
				if c.Type.Kind != w.Kind || c.Type.Enc != w.Enc || c.Type.Precision != w.Precision ||
					c.Type.Scale != w.Scale || c.Type.Unit != w.Unit || c.Type.UTC != w.UTC ||
					(w.Logical != "" && c.Type.Logical != w.Logical) {
					t.Errorf("type %+v, want %+v", c.Type, *w)
				}
			}
			// Every mapped type must have an Arrow type.
			_ = c.Type.Arrow()
		})
	}
}

func TestColumnsOrderAndLogicalInNested(t *testing.T) {
	v := fastjson.MustParse(row(
		`{"type":"int32","optional":false,"field":"id"}`,
		`{"type":"struct","optional":true,"field":"s","fields":[{"type":"int32","name":"io.debezium.time.Date","field":"d"}]}`,
		`{"type":"map","optional":true,"field":"m","keys":{"type":"string"},"values":{"type":"int64","name":"io.debezium.time.MicroTimestamp"}}`,
	))
	cols, err := debezium.Columns(v)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cols {
		names = append(names, c.Name+" "+c.Type.String())
	}
	want := []string{"id int32", `s struct<"d":date/e3 not null>`, "m map<string,timestamp(us)/e4>"}
	if strings.Join(names, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q, want %q", names, want)
	}
	if got := cols[1].Type.Fields[0].Type.Logical; got != "io.debezium.time.Date" {
		t.Errorf("nested logical %q", got)
	}
	if got := cols[2].Type.Value.Logical; got != "io.debezium.time.MicroTimestamp" {
		t.Errorf("map value logical %q", got)
	}
}

func TestColumnsErrors(t *testing.T) {
	deep := `{"type":"int32","field":"x"}`
	for i := 0; i < 70; i++ {
		deep = `{"type":"struct","field":"x","fields":[` + deep + `]}`
	}
	tests := []struct {
		name, schema, want string
	}{
		{"not an object", `[1]`, "not a JSON object"},
		{"not a struct", `{"type":"string"}`, `type "string", not struct`},
		{"no fields", `{"type":"struct"}`, "no fields array"},
		{"empty fields", `{"type":"struct","fields":[]}`, "struct has no fields"},
		{"field not an object", row(`1`), "fields[0] is not an object"},
		{"field without name", row(`{"type":"int32"}`), "fields[0] has no field name"},
		{"duplicate field", row(`{"type":"int32","field":"a"}`, `{"type":"int64","field":"a"}`), `field "a" given twice`},
		{"no type", row(`{"field":"a"}`), "field a: schema has no type"},
		{"unknown type", row(`{"type":"number","field":"a"}`), `field a: unknown type "number"`},
		{"nested empty struct", row(`{"type":"struct","fields":[],"field":"a"}`), "field a: struct has no fields"},
		{"array without items", row(`{"type":"array","field":"a"}`), "array has no items"},
		{"array bad items", row(`{"type":"array","items":{"type":"nope"},"field":"a"}`), `field a[]: unknown type "nope"`},
		{"map without values", row(`{"type":"map","keys":{"type":"string"},"field":"a"}`), "map needs keys and values"},
		{"decimal without scale", row(`{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","field":"a"}`), "without an integer scale"},
		{"decimal bad scale", row(`{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"two"},"field":"a"}`), "without an integer scale"},
		{"decimal bad precision", row(`{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"2","connect.decimal.precision":"x"},"field":"a"}`), "precision parameter is not an integer"},
		{"decimal zero precision", row(`{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"0","connect.decimal.precision":"0"},"field":"a"}`), "precision 0 is not positive"},
		{"decimal huge scale", row(`{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"99999"},"field":"a"}`), "out of range"},
		{"too deep", row(deep), "nested deeper than 64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := fastjson.Parse(tt.schema)
			if err != nil {
				t.Fatal(err)
			}
			cols, err := debezium.Columns(v)
			if err == nil {
				t.Fatalf("no error, columns %+v", cols)
			}
			if !errors.Is(err, debezium.ErrSchema) {
				t.Errorf("error %v does not wrap ErrSchema", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
	if _, err := debezium.Columns(nil); !errors.Is(err, debezium.ErrSchema) {
		t.Errorf("nil schema: %v", err)
	}
}
