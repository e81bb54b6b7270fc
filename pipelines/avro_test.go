package pipelines_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cdclake/cdclake/config"
	"github.com/cdclake/cdclake/pipelines/source"
	hamba "github.com/hamba/avro/v2"
	"gocloud.dev/blob"
)

// avroRows are three changes of one row, as Go values for the Avro
// encoder and as the payloads Kafka Connect's JsonConverter writes for
// them, by hand.
func avroRows() (values []map[string]any, payloads []string) {
	row1 := map[string]any{
		"id": 1, "qty": 2, "amount": big.NewRat(12345, 100), "created": int64(1700000000123456),
		"zoned": "2024-01-02T03:04:05.123456Z", "ratio": float32(0.5), "score": 2.25, "doc": `{"k":[1,2]}`,
		"anynum": map[string]any{"io.debezium.data.VariableScaleDecimal": map[string]any{"scale": 2, "value": []byte{0x04, 0xD2}}},
		"tags":   []any{"x", nil}, "flag": true, "raw": []byte{1, 2},
	}
	row2 := map[string]any{}
	for k, v := range row1 {
		row2[k] = v
	}
	row2["qty"], row2["score"], row2["zoned"], row2["tags"] = 3, math.NaN(), nil, nil
	wrap := func(r map[string]any) any {
		if r == nil {
			return nil
		}
		return map[string]any{"shop.public.orders.Value": r}
	}
	src := func(lsn int64) map[string]any {
		return map[string]any{"version": "3.6.1.Final", "snapshot": "false", "lsn": lsn}
	}
	values = []map[string]any{
		{"before": nil, "after": wrap(row1), "source": src(100), "op": "c", "ts_ms": int64(1700000000200)},
		{"before": wrap(row1), "after": wrap(row2), "source": src(200), "op": "u", "ts_ms": int64(1700000000300)},
		{"before": wrap(row2), "after": nil, "source": src(300), "op": "d", "ts_ms": int64(1700000000400)},
	}
	p1 := `{"id":1,"qty":2,"amount":"MDk=","created":1700000000123456,"zoned":"2024-01-02T03:04:05.123456Z","ratio":0.5,"score":2.25,"doc":"{\"k\":[1,2]}","anynum":{"scale":2,"value":"BNI="},"tags":["x",null],"flag":true,"raw":"AQI="}`
	p2 := `{"id":1,"qty":3,"amount":"MDk=","created":1700000000123456,"zoned":null,"ratio":0.5,"score":"NaN","doc":"{\"k\":[1,2]}","anynum":{"scale":2,"value":"BNI="},"tags":null,"flag":true,"raw":"AQI="}`
	s := func(lsn string) string {
		return `{"version":"3.6.1.Final","snapshot":"false","lsn":` + lsn + `}`
	}
	payloads = []string{
		`{"before":null,"after":` + p1 + `,"source":` + s("100") + `,"op":"c","ts_ms":1700000000200}`,
		`{"before":` + p1 + `,"after":` + p2 + `,"source":` + s("200") + `,"op":"u","ts_ms":1700000000300}`,
		`{"before":` + p2 + `,"after":null,"source":` + s("300") + `,"op":"d","ts_ms":1700000000400}`,
	}
	return values, payloads
}

func avroFrame(t *testing.T, schema hamba.Schema, id int, v any) []byte {
	t.Helper()
	return avroFrameAPI(t, hamba.DefaultConfig, schema, id, v)
}

func avroFrameAPI(t *testing.T, api hamba.API, schema hamba.Schema, id int, v any) []byte {
	t.Helper()
	body, err := api.Marshal(schema, v)
	if err != nil {
		t.Fatal(err)
	}
	out := binary.BigEndian.AppendUint32([]byte{0}, uint32(id))
	return append(out, body...)
}

// TestAvroLandsLikeJSON lands Debezium changes encoded as Confluent-framed
// Avro and the same changes as JsonConverter envelopes: the lakes must be
// identical, object for object and byte for byte. Records the registry
// does not know, and broken ones, are dead letters.
func TestAvroLandsLikeJSON(t *testing.T) {
	text, err := os.ReadFile("../handlers/avro/testdata/envelope.avsc")
	if err != nil {
		t.Fatal(err)
	}
	connect, err := os.ReadFile("../handlers/avro/testdata/envelope.connect.json")
	if err != nil {
		t.Fatal(err)
	}
	schema := hamba.MustParse(string(text))
	reg := filepath.Join(t.TempDir(), "schemas.json")
	saved, _ := json.Marshal(map[string]any{"7": map[string]string{"schema": string(text)}})
	if err := os.WriteFile(reg, saved, 0o644); err != nil {
		t.Fatal(err)
	}
	values, payloads := avroRows()
	var avroRecs, jsonRecs []source.Record
	for i := range values {
		avroRecs = append(avroRecs, source.Record{Offset: int64(i), Value: avroFrame(t, schema, 7, values[i])})
		jsonRecs = append(jsonRecs, source.Record{Offset: int64(i),
			Value: []byte(`{"schema":` + string(bytes.TrimSpace(connect)) + `,"payload":` + payloads[i] + `}`)})
	}
	block := func(recs []source.Record) *source.Block {
		return &source.Block{Source: "shop.public.orders", Topic: "shop.public.orders", Records: recs}
	}
	cfg := func(registry string) *config.Config {
		c, err := config.Load("")
		if err != nil {
			t.Fatal(err)
		}
		c.Source.SchemaRegistry.URL = registry
		return c
	}
	jb, jp := landSource(t, cfg(""), source.NewMemory(block(jsonRecs)))
	ab, ap := landSource(t, cfg(reg), source.NewMemory(block(avroRecs)))
	if jp.Stats().Rows.Load() != 3 || ap.Stats().Rows.Load() != 3 || ap.Stats().DeadLetters.Load() != 0 {
		t.Fatalf("rows: JSON %d, Avro %d; Avro dead letters %d", jp.Stats().Rows.Load(), ap.Stats().Rows.Load(), ap.Stats().DeadLetters.Load())
	}
	jk, ak := keys(t, jb), keys(t, ab)
	if strings.Join(jk, " ") != strings.Join(ak, " ") {
		t.Fatalf("objects differ:\nJSON %v\nAvro %v", jk, ak)
	}
	// Every column is equal.
	for _, k := range jk {
		jt, at := readTable(t, jb, k), readTable(t, ab, k)
		if !jt.Schema().Equal(at.Schema()) {
			t.Fatalf("%s: schemas differ:\n%s\n%s", k, jt.Schema(), at.Schema())
		}
		if jt.NumRows() != 3 {
			t.Errorf("%s: %d rows", k, jt.NumRows())
		}
		for i, f := range jt.Schema().Fields() {
			if j, a := fmt.Sprint(jt.Column(i).Data().Chunks()), fmt.Sprint(at.Column(i).Data().Chunks()); j != a {
				t.Errorf("%s: column %s differs:\nJSON %s\nAvro %s", k, f.Name, j, a)
			}
		}
	}

	// Unknown ids, broken records and no registry: dead letters with
	// their reasons; the good record between them lands.
	bad := []source.Record{
		{Offset: 0, Value: avroFrame(t, schema, 8, values[0])},
		{Offset: 1, Value: avroRecs[0].Value[:len(avroRecs[0].Value)-3]},
		{Offset: 2, Value: avroRecs[0].Value},
		{Offset: 3, Value: nil},
	}
	b, p := landSource(t, cfg(reg), source.NewMemory(block(bad)))
	if p.Stats().Rows.Load() != 1 || p.Stats().DeadLetters.Load() != 2 || p.Stats().Tombstones.Load() != 1 {
		t.Errorf("rows %d, dead letters %d, tombstones %d", p.Stats().Rows.Load(), p.Stats().DeadLetters.Load(), p.Stats().Tombstones.Load())
	}
	reasons := deadReasons(t, b)
	for _, want := range []string{"unknown Avro schema: no schema with id 8", "malformed Avro record: schema id 7"} {
		if !strings.Contains(reasons, want) {
			t.Errorf("no dead letter says %q in\n%s", want, reasons)
		}
	}
	_, p = landSource(t, cfg(""), source.NewMemory(block(avroRecs[:1])))
	if p.Stats().DeadLetters.Load() != 1 {
		t.Errorf("without a registry: %d dead letters", p.Stats().DeadLetters.Load())
	}
}

// deadReasons returns the text of every dead-letter object of b.
func deadReasons(t *testing.T, b *blob.Bucket) string {
	t.Helper()
	var out []string
	for _, k := range keys(t, b) {
		if strings.HasPrefix(k, "_dead_letter/") {
			data, err := b.ReadAll(context.Background(), k)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(data))
		}
	}
	return strings.Join(out, "\n")
}

// TestAvroSchemaIDRotates lands a table whose writer schema gains a column
// under a new id: the file is rotated at the change, and a second id of
// the same schema does not rotate it again.
func TestAvroSchemaIDRotates(t *testing.T) {
	text, err := os.ReadFile("../handlers/avro/testdata/envelope.avsc")
	if err != nil {
		t.Fatal(err)
	}
	v1 := string(text)
	v2 := strings.Replace(v1, `{"name":"raw","type":["null","bytes"],"default":null}`,
		`{"name":"raw","type":["null","bytes"],"default":null},{"name":"note","type":["null","string"],"default":null}`, 1)
	if v2 == v1 {
		t.Fatal("the schema has no raw field to extend")
	}
	reg := filepath.Join(t.TempDir(), "schemas.json")
	saved, _ := json.Marshal(map[string]any{"1": map[string]string{"schema": v1}, "2": map[string]string{"schema": v2},
		"3": map[string]string{"schema": v2}})
	if err := os.WriteFile(reg, saved, 0o644); err != nil {
		t.Fatal(err)
	}
	values, _ := avroRows()
	// The images under v2 carry the new column.
	noted := func(v map[string]any) map[string]any {
		out := map[string]any{}
		for k, x := range v {
			if img, ok := x.(map[string]any); ok && (k == "before" || k == "after") {
				row := map[string]any{}
				for c, y := range img["shop.public.orders.Value"].(map[string]any) {
					row[c] = y
				}
				row["note"] = "n"
				x = map[string]any{"shop.public.orders.Value": row}
			}
			out[k] = x
		}
		return out
	}
	// Each version in its own cache of named types: both name their row
	// record shop.public.orders.Value.
	parse := func(text string) hamba.Schema {
		s, err := hamba.ParseWithCache(text, "", &hamba.SchemaCache{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s1, s2 := parse(v1), parse(v2)
	// hamba/avro caches encoders of named types by name: v2's rows get
	// encoders of their own.
	api2 := hamba.Config{}.Freeze()
	recs := []source.Record{
		{Offset: 0, Value: avroFrame(t, s1, 1, values[0])},
		{Offset: 1, Value: avroFrameAPI(t, api2, s2, 2, noted(values[1]))},
		{Offset: 2, Value: avroFrameAPI(t, api2, s2, 3, noted(values[2]))},
	}
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Source.SchemaRegistry.URL = reg
	b, p := landSource(t, cfg, source.NewMemory(&source.Block{Source: "shop.public.orders", Topic: "shop.public.orders", Records: recs}))
	if p.Stats().Rows.Load() != 3 {
		t.Fatalf("%d rows, %d dead letters: %s", p.Stats().Rows.Load(), p.Stats().DeadLetters.Load(), deadReasons(t, b))
	}
	ks := keys(t, b)
	if len(ks) != 2 {
		t.Fatalf("objects %v, want one per schema", ks)
	}
	if n := readTable(t, b, ks[0]).NumRows(); n != 1 {
		t.Errorf("%s: %d rows", ks[0], n)
	}
	second := readTable(t, b, ks[1])
	if second.NumRows() != 2 || !strings.Contains(second.Schema().String(), "note") {
		t.Errorf("%s: %d rows, schema %s", ks[1], second.NumRows(), second.Schema())
	}
}

// TestAvroKey lands Avro record keys with source_columns [key]: as the
// JsonConverter would have sent them. A key whose schema the registry
// does not know makes its record a dead letter.
func TestAvroKey(t *testing.T) {
	text, err := os.ReadFile("../handlers/avro/testdata/envelope.avsc")
	if err != nil {
		t.Fatal(err)
	}
	keyText := `{"type":"record","name":"Key","namespace":"shop.public.orders","fields":[{"name":"id","type":"int"}],"connect.name":"shop.public.orders.Key"}`
	reg := filepath.Join(t.TempDir(), "schemas.json")
	saved, _ := json.Marshal(map[string]any{"7": map[string]string{"schema": string(text)}, "8": map[string]string{"schema": keyText}})
	if err := os.WriteFile(reg, saved, 0o644); err != nil {
		t.Fatal(err)
	}
	values, _ := avroRows()
	value, key := hamba.MustParse(string(text)), hamba.MustParse(keyText)
	recs := []source.Record{
		{Offset: 0, Value: avroFrame(t, value, 7, values[0]), Key: avroFrame(t, key, 8, map[string]any{"id": 1})},
		{Offset: 1, Value: avroFrame(t, value, 7, values[1]), Key: avroFrame(t, key, 9, map[string]any{"id": 1})},
		{Offset: 2, Value: avroFrame(t, value, 7, values[2]), Key: []byte("plain")},
	}
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Source.SchemaRegistry.URL = reg
	cfg.Defaults.SourceColumns = []string{"key"}
	b, p := landSource(t, cfg, source.NewMemory(&source.Block{Source: "shop.public.orders", Topic: "shop.public.orders", Records: recs}))
	if p.Stats().Rows.Load() != 2 || p.Stats().DeadLetters.Load() != 1 {
		t.Fatalf("%d rows, %d dead letters", p.Stats().Rows.Load(), p.Stats().DeadLetters.Load())
	}
	if r := deadReasons(t, b); !strings.Contains(r, "record key: schema id 9: unknown Avro schema") {
		t.Errorf("dead letter: %s", r)
	}
	var data string
	for _, k := range keys(t, b) {
		if strings.HasPrefix(k, "shop.public.orders/") {
			data = fmt.Sprint(column(t, readTable(t, b, k), "_cdc_key"))
		}
	}
	want := `["{\"schema\":{\"type\":\"struct\",\"fields\":[{\"type\":\"int32\",\"optional\":false,\"field\":\"id\"}],` +
		`\"optional\":false,\"name\":\"shop.public.orders.Key\"},\"payload\":{\"id\":1}}" "plain"]`
	if data != want {
		t.Errorf("_cdc_key\n got %s\nwant %s", data, want)
	}
}
