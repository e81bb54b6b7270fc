package goldengate_test

import (
	"fmt"

	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/decode/goldengate"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/valyala/fastjson"
)

func ExampleDataStreams_Decode() {
	dec, err := goldengate.NewDataStreams(goldengate.Options{})
	if err != nil {
		panic(err)
	}
	var p fastjson.Parser
	v, err := p.Parse(`{"qual_table":"SALES.ORDERS","op_type":"UPDATE","op_ts":"2026-07-13T04:02:12.654321Z",` +
		`"xid":"example-transaction-1002","pos":"G-R0hJSktMTU5PUFFSU1RVVldYWVo=1002","csn":"48151623421",` +
		`"before":{"ORDER_ID":1001,"STATUS":"NEW"},"after":{"ORDER_ID":1001,"STATUS":"APPROVED"},"op_seq":"0000000002"}`)
	if err != nil {
		panic(err)
	}
	var c change.Change
	if err := dec.Decode(v, &c); err != nil {
		panic(err)
	}
	fmt.Println(c.Kind, c.Op, c.Table, c.TSMicros, c.Xid, c.Pos)
	fmt.Println(c.Before.Obj, c.After.Obj)
	for _, e := range c.Extras {
		fmt.Printf("%s=%s\n", e.Name, c.ExtraBytes(e))
	}
	// Output:
	// dml UPDATE SALES.ORDERS 1783915332654321 example-transaction-1002 G-R0hJSktMTU5PUFFSU1RVVldYWVo=1002
	// {"ORDER_ID":1001,"STATUS":"NEW"} {"ORDER_ID":1001,"STATUS":"APPROVED"}
	// _gg_csn=48151623421
	// _gg_meta={"op_seq":"0000000002"}
}

func ExampleBigData_Decode() {
	dec, err := goldengate.NewBigData(goldengate.BigDataOptions{})
	if err != nil {
		panic(err)
	}
	v := fastjson.MustParse(`{"table":"QASOURCE.TCUSTORD","op_type":"T","op_ts":"2015-11-05 18:45:39.000000",` +
		`"current_ts":"2016-10-05T10:15:51.312000","pos":"00000000000000005480"}`)
	var c change.Change
	if err := dec.Decode(v, &c); err != nil {
		panic(err)
	}
	fmt.Println(c.Kind, c.Op, c.Table, c.Pos, c.Before.Present(), c.After.Present())
	// Output:
	// dml TRUNCATE QASOURCE.TCUSTORD 00000000000000005480 false false
}

// Each decoder recognises its own format with the default field names.
func ExampleDataStreams_Detect() {
	ds, _ := goldengate.NewDataStreams(goldengate.Options{})
	bd, _ := goldengate.NewBigData(goldengate.BigDataOptions{})
	var c change.Change
	for _, s := range []string{
		`{"qual_table":"SALES.ORDERS","op_type":"INSERT","after":{}}`,
		`{"table":"QASOURCE.TCUSTORD","op_type":"I","after":{}}`,
		`{"payload":{"op":"c"}}`,
	} {
		v := fastjson.MustParse(s)
		fmt.Println(ds.Detect(v, &c), bd.Detect(v, &c))
	}
	// Output:
	// true false
	// false true
	// false false
}

func ExampleObjectColumns() {
	meta := fastjson.MustParse(`{"op_type":"OBJECT_METADATA","qual_table":"SALES.ORDERS","columns":{` +
		`"ORDER_ID":{"type":"number","null":false,"key":true},` +
		`"STATUS":{"type":"string","null":false,"key":false},` +
		`"TOTAL_AMOUNT":{"type":"number","null":true,"key":false}}}`)
	cols, err := goldengate.ObjectColumns(meta, nil, schema.Type{Kind: schema.DecimalText})
	if err != nil {
		panic(err)
	}
	for _, c := range cols {
		fmt.Println(c.Name, c.Type, c.Nullable, c.Key)
	}
	// Output:
	// ORDER_ID decimal_text false true
	// STATUS string false false
	// TOTAL_AMOUNT decimal_text true false
}
