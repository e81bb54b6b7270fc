package pipelines_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/cdclake/cdclake/config"
	"github.com/cdclake/cdclake/pipelines"
	"github.com/cdclake/cdclake/pipelines/source"
	"github.com/cdclake/cdclake/sinks/lake"
	"gocloud.dev/blob"
)

// land runs the pipeline over input with the given YAML config into a
// mem:// bucket and returns it.
func land(t *testing.T, yaml, input string) (*blob.Bucket, *pipelines.Pipeline) {
	t.Helper()
	cfgFile := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(cfgFile, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	return landSource(t, cfg, source.NewReader("in", strings.NewReader(input), 2, 1<<20))
}

// landSource runs the pipeline over src with cfg into a mem:// bucket and
// returns it.
func landSource(t *testing.T, cfg *config.Config, src source.Source, opts ...pipelines.Option) (*blob.Bucket, *pipelines.Pipeline) {
	t.Helper()
	cfg.ProgressInterval = 0
	plan, err := pipelines.Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bucket, err := lake.OpenBucket(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bucket.Close() })
	p, err := pipelines.New(plan, src, bucket, slog.New(slog.NewTextHandler(io.Discard, nil)), opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(ctx); err != nil {
		t.Fatal(err)
	}
	return bucket, p
}

// newPipeline compiles cfg and builds a pipeline over src into a new
// mem:// bucket, closed when the test ends.
func newPipeline(tb testing.TB, cfg *config.Config, src source.Source, log *slog.Logger, opts ...pipelines.Option) (*pipelines.Pipeline, *blob.Bucket) {
	tb.Helper()
	plan, err := pipelines.Compile(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	bucket, err := lake.OpenBucket(context.Background(), "mem://")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { bucket.Close() })
	p, err := pipelines.New(plan, src, bucket, log, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return p, bucket
}

func keys(t *testing.T, b *blob.Bucket) []string {
	t.Helper()
	var out []string
	it := b.List(nil)
	for {
		obj, err := it.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, obj.Key)
	}
	slices.Sort(out)
	return out
}

// readTable reads one Parquet object back with arrow-go.
func readTable(t *testing.T, b *blob.Bucket, key string) arrow.Table {
	t.Helper()
	data, err := b.ReadAll(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tbl.Release)
	return tbl
}

func column(t *testing.T, tbl arrow.Table, name string) arrow.Array {
	t.Helper()
	idx := tbl.Schema().FieldIndices(name)
	if len(idx) == 0 {
		t.Fatalf("no column %s in %s", name, tbl.Schema())
	}
	return tbl.Column(idx[0]).Data().Chunk(0)
}

const ggMeta = `{"op_type":"OBJECT_METADATA","qual_table":"HR.EMP","columns":{"ID":{"type":"number","null":false,"key":true},"HIRED":{"type":"string","null":true,"key":false},"SALARY":{"type":"number","null":true,"key":false},"SECRET":{"type":"string","null":true,"key":false}}}`

func TestFlatLayoutOverridesAndExclusions(t *testing.T) {
	input := strings.Join([]string{
		ggMeta,
		`{"qual_table":"HR.EMP","op_type":"INSERT","op_ts":"2026-07-13T04:01:01.000001Z","xid":"1","pos":"1","after":{"ID":1,"HIRED":"2020-01-31","SALARY":1234.5,"SECRET":"x"}}`,
		`{"qual_table":"HR.EMP","op_type":"UPDATE","op_ts":"2026-07-13T04:01:02Z","xid":"2","pos":"2","before":{"ID":1},"after":{"ID":1,"SALARY":99.99}}`,
		// 1234.567 does not fit DECIMAL(12,2): dead letter, never rounded.
		`{"qual_table":"HR.EMP","op_type":"INSERT","op_ts":"2026-07-13T04:01:03Z","xid":"3","pos":"3","after":{"ID":2,"HIRED":"2021-02-01","SALARY":1234.567}}`,
		`{"qual_table":"HR.EMP","op_type":"DELETE","op_ts":"2026-07-13T04:01:04Z","xid":"4","pos":"4","before":{"ID":1}}`,
		`{"qual_table":"TMP.SCRATCH","op_type":"INSERT","op_ts":"2026-07-13T04:01:05Z","xid":"5","pos":"5","after":{"ID":1}}`,
	}, "\n") + "\n"
	b, p := land(t, `
tables:
  exclude: ["TMP.*"]
routes:
  - match: "HR.*"
    layout: flat
    path: "hr/{table}/{yyyy}/{mm}"
    types:
      HIRED: date
      SALARY: decimal(12,2)
      ID: int64
    columns:
      exclude: ["SECRET"]
`, input)
	if got := p.Stats().DeadLetters.Load(); got != 1 {
		t.Errorf("dead letters = %d, want 1", got)
	}
	if got := p.Stats().Filtered.Load(); got != 1 {
		t.Errorf("filtered = %d, want 1", got)
	}
	ks := keys(t, b)
	var data string
	for _, k := range ks {
		if strings.HasPrefix(k, "hr/HR.EMP/2026/07/") {
			data = k
		}
		if strings.Contains(k, "TMP") {
			t.Errorf("excluded table landed: %s", k)
		}
	}
	if data == "" {
		t.Fatalf("no data file under hr/HR.EMP/2026/07/ in %v", ks)
	}
	tbl := readTable(t, b, data)
	if tbl.NumRows() != 3 {
		t.Fatalf("rows = %d, want 3 (insert, update, delete)", tbl.NumRows())
	}
	if idx := tbl.Schema().FieldIndices("SECRET"); len(idx) != 0 {
		t.Errorf("excluded column landed")
	}
	if ty := column(t, tbl, "SALARY").DataType(); ty.String() != "decimal(12, 2)" {
		t.Errorf("SALARY type %s", ty)
	}
	if ty := column(t, tbl, "HIRED").DataType(); ty.ID() != arrow.DATE32 {
		t.Errorf("HIRED type %s", ty)
	}
	sal := column(t, tbl, "SALARY").(*array.Decimal128)
	if got := sal.Value(0).ToString(2) + " " + sal.Value(1).ToString(2); got != "1234.50 99.99" {
		t.Errorf("SALARY values %s", got)
	}
	absent := column(t, tbl, "_cdc_absent").(*array.List)
	if got := absent.ValueStr(1); got != `["HIRED"]` {
		t.Errorf("update absent = %s, want [\"HIRED\"]", got)
	}
	ops := column(t, tbl, "_cdc_op").(*array.String)
	if ops.Value(2) != "DELETE" || column(t, tbl, "ID").(*array.Int64).Value(2) != 1 {
		t.Errorf("delete row lands its before image")
	}
	var dl string
	for _, k := range ks {
		if strings.HasPrefix(k, "_dead_letter/") {
			dl = k
		}
	}
	raw, err := b.ReadAll(context.Background(), dl)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"offset":4,"stage":"convert"`) || !strings.Contains(string(raw), "more fractional digits") {
		t.Errorf("dead letter: %s", raw)
	}
}

func TestForcedFormatAndCustomFields(t *testing.T) {
	input := `{"tbl":"HR.X","kind":"I","ts":"2026-07-13T04:01:01Z","after":{"ID":1}}` + "\n"
	_, p := land(t, `
source:
  format: goldengate
  goldengate:
    qualifiedTable: tbl
    opType: kind
    opTimestamp: ts
    insertOp: I
`, input)
	if p.Stats().Rows.Load() != 1 || p.Stats().DeadLetters.Load() != 0 {
		t.Errorf("rows %d dead %d", p.Stats().Rows.Load(), p.Stats().DeadLetters.Load())
	}
}

// TestZonedTextSibling: a zoned timestamp no TIMESTAMP(µs) can hold lands,
// exactly, in the column's text sibling; the typed column keeps its type.
func TestZonedTextSibling(t *testing.T) {
	schema := `{"type":"struct","name":"s.public.t.Envelope","fields":[` +
		`{"type":"struct","field":"before","optional":true,"fields":[{"type":"int32","field":"id"},{"type":"string","field":"at","optional":true,"name":"io.debezium.time.ZonedTimestamp"}]},` +
		`{"type":"struct","field":"after","optional":true,"fields":[{"type":"int32","field":"id"},{"type":"string","field":"at","optional":true,"name":"io.debezium.time.ZonedTimestamp"}]},` +
		`{"type":"struct","field":"source","fields":[{"type":"string","field":"db"},{"type":"string","field":"schema"},{"type":"string","field":"table"},{"type":"int64","field":"ts_ms"}]},` +
		`{"type":"string","field":"op"}]}`
	msg := func(id int, at string) string {
		return `{"schema":` + schema + `,"payload":{"op":"c","before":null,"after":{"id":` + strconv.Itoa(id) + `,"at":` + at +
			`},"source":{"db":"s","schema":"public","table":"t","ts_ms":1783915000000}}}`
	}
	input := strings.Join([]string{
		msg(1, `"2024-01-01T00:00:00.123456Z"`),
		msg(2, `"2019-06-05T12:34:56.1234567+02:00"`),
		msg(3, `"2024-01-01T02:00:00+02:00"`),
		msg(4, `null`),
	}, "\n") + "\n"
	b, p := land(t, "", input)
	if d := p.Stats().DeadLetters.Load(); d != 0 {
		t.Fatalf("%d dead letters", d)
	}
	var files []string
	for _, k := range keys(t, b) {
		if strings.HasPrefix(k, "s.public.t/") {
			files = append(files, k)
		}
	}
	if len(files) != 2 {
		t.Fatalf("files = %v, want one per version", files)
	}
	v2 := readTable(t, b, files[1]) // rows 2..4, with the sibling
	after := column(t, v2, "after").(*array.Struct)
	at := after.Field(1).(*array.Timestamp)
	text := after.Field(2).(*array.String)
	if v2.Schema().Field(v2.Schema().FieldIndices("after")[0]).Type.(*arrow.StructType).Field(2).Name != "at__text" {
		t.Fatalf("after = %s", after.DataType())
	}
	if !at.IsNull(0) || text.Value(0) != "2019-06-05T12:34:56.1234567+02:00" {
		t.Errorf("row 2: at null=%v text=%q", at.IsNull(0), text.Value(0))
	}
	if at.IsNull(1) || at.Value(1) != arrow.Timestamp(1704067200000000) || !text.IsNull(1) {
		t.Errorf("row 3: at=%v text null=%v", at.Value(1), text.IsNull(1))
	}
	absent := column(t, v2, "_cdc_after_absent").(*array.List)
	for i := 0; i < 3; i++ {
		if got := absent.ValueStr(i); got != "[]" {
			t.Errorf("row %d absent = %s, want none", i+2, got)
		}
	}
}

// TestLongLinesLand lands GoldenGate records of 1.5 MiB each, larger than
// a block's byte bound.
func TestLongLinesLand(t *testing.T) {
	note := strings.Repeat("ü", 3<<19) // 1.5 MiB of text
	var in strings.Builder
	for i := range 12 {
		fmt.Fprintf(&in, `{"qual_table":"S.BIG","op_type":"INSERT","op_ts":"2026-07-13T04:01:01Z","after":{"ID":%d,"NOTE":"%s"}}`+"\n", i, note)
	}
	b, p := land(t, "", in.String())
	if p.Stats().Rows.Load() != 12 || p.Stats().DeadLetters.Load() != 0 {
		t.Fatalf("rows %d, dead letters %d", p.Stats().Rows.Load(), p.Stats().DeadLetters.Load())
	}
	ks := keys(t, b)
	if len(ks) != 1 {
		t.Fatalf("objects %v", ks)
	}
	tbl := readTable(t, b, ks[0])
	defer tbl.Release()
	after := column(t, tbl, "after").(*array.Struct)
	notes := after.Field(1).(*array.String)
	for i := range notes.Len() {
		if notes.Value(i) != note {
			t.Fatalf("row %d: NOTE of %d bytes, want %d", i, len(notes.Value(i)), len(note))
		}
	}
}

// TestHeadersReachTheRows: a CloudEvent in Kafka binary content mode (its
// attributes in ce_* headers) lands like one in structured mode.
func TestHeadersReachTheRows(t *testing.T) {
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	value := []byte(`{"qual_table":"S.CE","op_type":"INSERT","op_ts":"2026-07-13T04:01:01Z","after":{"ID":1}}`)
	blk := &source.Block{Source: "orders", Partition: 2, Records: []source.Record{{Offset: 40, Value: value, Key: []byte("1"),
		Headers: []source.Header{{Key: "ce_specversion", Value: []byte("1.0")}, {Key: "ce_type", Value: []byte("com.example.order")},
			{Key: "ce_id", Value: []byte("evt-40")}}}}}
	b, p := landSource(t, cfg, source.NewMemory(blk))
	if p.Stats().Rows.Load() != 1 {
		t.Fatalf("rows %d, dead letters %d", p.Stats().Rows.Load(), p.Stats().DeadLetters.Load())
	}
	ks := keys(t, b)
	tbl := readTable(t, b, ks[0])
	defer tbl.Release()
	for name, want := range map[string]string{"_ce_type": "com.example.order", "_ce_id": "evt-40"} {
		if got := column(t, tbl, name).ValueStr(0); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
}

// TestSourceColumns: a route's source_columns land each row's record key
// (binary; NULL for a record without one, empty for an empty one) and
// headers (JSON; a value that is not UTF-8 in base64); other routes do not.
func TestSourceColumns(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cdclake.yaml")
	if err := os.WriteFile(file, []byte("routes:\n  - match: S.KEYED\n    source_columns: [key, headers]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	row := func(table string, id int) []byte {
		return fmt.Appendf(nil, `{"qual_table":%q,"op_type":"INSERT","op_ts":"2026-07-13T04:01:01Z","after":{"ID":%d}}`, table, id)
	}
	blk := &source.Block{Source: "orders", Partition: 0, Records: []source.Record{
		{Offset: 0, Value: row("S.KEYED", 1), Key: []byte(`{"ID":1}`),
			Headers: []source.Header{{Key: "trace", Value: []byte("t-1")}, {Key: "bin", Value: []byte{0xff, 0x00}}}},
		{Offset: 1, Value: row("S.KEYED", 2)},
		{Offset: 2, Value: row("S.KEYED", 3), Key: []byte{}},
		{Offset: 3, Value: row("S.PLAIN", 4), Key: []byte("k")},
	}}
	b, _ := landSource(t, cfg, source.NewMemory(blk))
	for _, k := range keys(t, b) {
		tbl := readTable(t, b, k)
		defer tbl.Release()
		if strings.HasPrefix(k, "S.PLAIN/") {
			if tbl.Schema().HasField("_cdc_key") || tbl.Schema().HasField("_cdc_headers") {
				t.Errorf("%s: source columns on a route without them: %v", k, tbl.Schema())
			}
			continue
		}
		// JSON (the Parquet JSON annotation) reads back as bytes here.
		key, headers := column(t, tbl, "_cdc_key").(*array.Binary), column(t, tbl, "_cdc_headers").(*array.Binary)
		if tbl.NumRows() != 3 || string(key.Value(0)) != `{"ID":1}` || !key.IsNull(1) || key.IsNull(2) || len(key.Value(2)) != 0 {
			t.Errorf("%s: _cdc_key %v", k, key)
		}
		for i, want := range []string{`[{"key":"trace","value":"t-1"},{"key":"bin","value_base64":"/wA="}]`, `[]`, `[]`} {
			if got := string(headers.Value(i)); got != want {
				t.Errorf("%s row %d: _cdc_headers %s, want %s", k, i, got, want)
			}
		}
	}
}

// TestSchemalessCatalog: Debezium JSON without schemas, typed by a route's
// types (some by glob), lands every value exactly from Debezium's
// encodings: epoch days, epoch ms and µs, µs since midnight, base64,
// decimal strings and numbers; a value that does not fit its declared type
// is a dead letter.
func TestSchemalessCatalog(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cdclake.yaml")
	if err := os.WriteFile(file, []byte(`routes:
  - match: "shop.public.*"
    types:
      birth_date: date
      "*_at": timestamptz(us)
      pickup_time: time(us)
      OPENED_ON: timestamp(ms)
      thumbnail: binary
      "amount*": decimal(12,2)
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	msg := func(after string) []byte {
		return []byte(`{"before":null,"after":` + after + `,"source":{"connector":"postgresql","db":"shop","schema":"public","table":"people","ts_ms":1752379261000},"op":"c","ts_ms":1752379261000}`)
	}
	blk := &source.Block{Source: "shop.public.people", Records: []source.Record{
		{Offset: 0, Value: msg(`{"id":1,"birth_date":19753,"created_at":1700000000123456,"pickup_time":45296123456,` +
			`"OPENED_ON":1700000000123,"thumbnail":"AQID/w==","amount":"12.50","amount_net":7.25}`)},
		{Offset: 1, Value: msg(`{"id":2,"birth_date":-1,"created_at":"2024-01-31T12:34:56.123456Z","pickup_time":0,` +
			`"OPENED_ON":0,"thumbnail":"","amount":"-0.01","amount_net":-3}`)},
		{Offset: 2, Value: msg(`{"id":3,"birth_date":"someday"}`)},
		{Offset: 3, Value: msg(`{"id":4,"amount":"1.234"}`)},
	}}
	b, p := landSource(t, cfg, source.NewMemory(blk))
	if p.Stats().Rows.Load() != 2 || p.Stats().DeadLetters.Load() != 2 {
		t.Fatalf("rows %d, dead letters %d; want 2 and 2", p.Stats().Rows.Load(), p.Stats().DeadLetters.Load())
	}
	var key string
	var reasons []string
	for _, k := range keys(t, b) {
		if strings.HasPrefix(k, "shop.public.people/") {
			key = k
		}
		if strings.HasPrefix(k, "_dead_letter/") {
			data, _ := b.ReadAll(context.Background(), k)
			reasons = append(reasons, string(data))
		}
	}
	// The reason names the column, the declared type and the value.
	for i, want := range []string{`birth_date`, `amount`} {
		if i >= len(reasons) || !strings.Contains(reasons[i], want) {
			t.Errorf("dead letter %d does not name %s: %v", i, want, reasons)
		}
	}
	tbl := readTable(t, b, key)
	defer tbl.Release()
	after := column(t, tbl, "after").(*array.Struct)
	st := after.DataType().(*arrow.StructType)
	field := func(name string) arrow.Array {
		i, ok := st.FieldIdx(name)
		if !ok {
			t.Fatalf("no column %s in %s", name, st)
		}
		return after.Field(i)
	}
	for name, want := range map[string][2]string{
		"birth_date":  {"2024-01-31", "1969-12-31"},
		"created_at":  {"2023-11-14T22:13:20.123456Z", "2024-01-31T12:34:56.123456Z"},
		"pickup_time": {"12:34:56.123456", "00:00:00.000000"},
		"OPENED_ON":   {"2023-11-14T22:13:20.123", "1970-01-01T00:00:00"},
		"amount":      {"12.50", "-0.01"},
		"amount_net":  {"7.25", "-3.00"},
	} {
		a := field(name)
		for i := range 2 {
			got := a.ValueStr(i)
			if d, ok := a.(*array.Decimal128); ok {
				got = d.Value(i).ToString(2) // the exact value at its scale
			}
			if got != want[i] {
				t.Errorf("%s[%d] = %s (%s), want %s", name, i, got, a.DataType(), want[i])
			}
		}
	}
	if th := field("thumbnail").(*array.Binary); !bytes.Equal(th.Value(0), []byte{1, 2, 3, 0xff}) || th.IsNull(1) || len(th.Value(1)) != 0 {
		t.Errorf("thumbnail = %v", th)
	}
}

// TestTableFromTopic: a Debezium event that names its table nowhere lands
// under its Kafka topic's name.
func TestTableFromTopic(t *testing.T) {
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	value := []byte(`{"before":null,"after":{"ID":1},"source":{"connector":"oracle","name":"server1","ts_ms":1752379261000},"op":"c","ts_ms":1752379261000}`)
	blk := &source.Block{Source: "server1.INVENTORY.CUSTOMERS", Topic: "server1.INVENTORY.CUSTOMERS",
		Records: []source.Record{{Offset: 7, Value: value}}}
	b, p := landSource(t, cfg, source.NewMemory(blk))
	if p.Stats().Rows.Load() != 1 {
		t.Fatalf("rows %d, dead letters %d", p.Stats().Rows.Load(), p.Stats().DeadLetters.Load())
	}
	if ks := keys(t, b); len(ks) != 1 || !strings.HasPrefix(ks[0], "server1.INVENTORY.CUSTOMERS/") {
		t.Errorf("objects %v", ks)
	}
}
