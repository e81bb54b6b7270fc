package goldengate

import (
	"testing"

	"github.com/cdclake/cdclake/handlers/change"
	"github.com/valyala/fastjson"
)

// benchLines are realistic Data Streams DML records: a 12-column insert with
// csn, tokens and optional metadata, a partial update and a key-only delete.
var benchLines = []string{
	`{"qual_table":"SALES.ORDERS","op_type":"INSERT","op_ts":"2026-07-13T04:01:01.123456Z","xid":"0.4.17.2291","pos":"G-QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=1001","csn":"48151623420","op_seq":"0000000001","tokens":{"L":"206080450","R":"AADPkvAAEAAEqLzAAC"},"after":{"ORDER_ID":1001,"CUSTOMER_ID":88231,"STATUS":"NEW","TOTAL_AMOUNT":125.50,"CURRENCY":"EUR","CREATED_AT":"2026-07-13T04:01:01.123456","UPDATED_AT":"2026-07-13T04:01:01.123456","CHANNEL":"web","DISCOUNT":0,"NOTES":"leave at the door","REGION":"EMEA","PRIORITY":3}}`,
	`{"qual_table":"SALES.ORDERS","op_type":"UPDATE","op_ts":"2026-07-13T04:02:12.654321Z","xid":"0.4.17.2292","pos":"G-R0hJSktMTU5PUFFSU1RVVldYWVo=1002","csn":"48151623421","before":{"ORDER_ID":1001,"STATUS":"NEW"},"after":{"ORDER_ID":1001,"STATUS":"APPROVED","UPDATED_AT":"2026-07-13T04:02:12.654321"}}`,
	`{"qual_table":"SALES.ORDERS","op_type":"DELETE","op_ts":"2026-07-13T04:03:15.000000Z","xid":"0.4.17.2293","pos":"G-SktMTU5PUFFSU1RVVldYWVo=1003","csn":"48151623422","before":{"ORDER_ID":1001}}`,
}

// BenchmarkDataStreamsDecode measures Decode alone (records parsed once)
// and parse plus Decode, as the classify stage runs them.
func BenchmarkDataStreamsDecode(b *testing.B) {
	b.Run("decode", func(b *testing.B) {
		dec := mustDataStreams(b, Options{})
		vals := make([]*fastjson.Value, len(benchLines))
		for i, l := range benchLines {
			vals[i] = fastjson.MustParse(l)
		}
		var c change.Change
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			c.Reset()
			if err := dec.Decode(vals[i%len(vals)], &c); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("parse+decode", func(b *testing.B) {
		dec := mustDataStreams(b, Options{})
		var p fastjson.Parser
		var c change.Change
		var bytes int64
		for _, l := range benchLines {
			bytes += int64(len(l))
		}
		b.SetBytes(bytes / int64(len(benchLines)))
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			v, err := p.Parse(benchLines[i%len(benchLines)])
			if err != nil {
				b.Fatal(err)
			}
			c.Reset()
			if err := dec.Decode(v, &c); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
}

func BenchmarkBigDataDecode(b *testing.B) {
	lines := readLines(b, "bigdata")[:3]
	dec := mustBigData(b, BigDataOptions{})
	var p fastjson.Parser
	var c change.Change
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		v, err := p.Parse(lines[i%len(lines)])
		if err != nil {
			b.Fatal(err)
		}
		c.Reset()
		if err := dec.Decode(v, &c); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
