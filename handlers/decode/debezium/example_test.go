package debezium_test

import (
	"fmt"

	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/decode/debezium"
	"github.com/valyala/fastjson"
)

// A PostgreSQL update whose TOASTed column was not sent: the placeholder
// column is removed from the after image.
func ExampleDecoder_Decode() {
	d, err := debezium.New(debezium.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	var p fastjson.Parser
	v, _ := p.Parse(`{"before":null,
		"after":{"id":7,"title":"v2","body":"__debezium_unavailable_value"},
		"source":{"connector":"postgresql","ts_ms":1559033905100,"ts_us":1559033905100200,
			"db":"postgres","schema":"public","table":"documents","txId":557,"lsn":24025000},
		"op":"u","ts_ms":1559033905200}`)
	var c change.Change
	if err := d.Decode(v, &c); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.Kind, c.Op, c.Table, c.TSMicros, c.Xid, c.Pos)
	fmt.Println(c.After.Obj)
	// Output:
	// dml UPDATE postgres.public.documents 1559033905100200 557 24025000
	// {"id":7,"title":"v2"}
}

// Columns maps the row schema that Decode leaves in Change.Schema.
func ExampleColumns() {
	row := fastjson.MustParse(`{"type":"struct","name":"srv.inventory.items.Value","fields":[
		{"type":"int32","optional":false,"field":"id"},
		{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal",
		 "parameters":{"scale":"2","connect.decimal.precision":"8"},"field":"price"},
		{"type":"string","optional":true,"name":"io.debezium.time.ZonedTimestamp","field":"seen"}]}`)
	cols, err := debezium.Columns(row)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range cols {
		fmt.Println(c.Name, c.Type, c.Nullable)
	}
	// Output:
	// id int32 false
	// price decimal(8,2)/e1 true
	// seen timestamp(us,utc)/e7 true
}
