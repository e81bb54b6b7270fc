package resolve_test

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/decode"
	"github.com/cdclake/cdclake/handlers/decode/debezium"
	"github.com/cdclake/cdclake/handlers/decode/goldengate"
	"github.com/cdclake/cdclake/handlers/resolve"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/cdclake/cdclake/handlers/unwrap"
)

// decoded is one message run through the unwrap stage and a decoder, with
// an arena of its own so that it stays valid.
func decoded(t testing.TB, dec decode.Decoder, msg string) *change.Change {
	t.Helper()
	var u unwrap.Unwrapper
	c := &change.Change{}
	v, err := u.Unwrap(&unwrap.Arena{}, []byte(msg), c)
	if err != nil {
		t.Fatal(err)
	}
	if err := dec.Decode(v, c); err != nil {
		t.Fatalf("decoding %s: %v", msg, err)
	}
	return c
}

// testResolver is a Resolver and the Scope of one partition.
type testResolver struct {
	*resolve.Resolver
	*resolve.Scope
}

func newResolver(opts map[string]*resolve.TableOptions) testResolver {
	r := resolve.New(func(table string) *resolve.TableOptions {
		if o, ok := opts[table]; ok {
			return o
		}
		return &resolve.TableOptions{}
	}, slog.New(slog.DiscardHandler))
	return testResolver{r, r.Partition("topic", 0)}
}

func columns(t *schema.Table) string {
	var b strings.Builder
	for i, c := range t.Columns {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s:%s", c.Name, c.Type)
	}
	return b.String()
}

func resolveOK(t *testing.T, r testResolver, c *change.Change, dec decode.Decoder) *schema.Table {
	t.Helper()
	tb, _, err := r.Resolve(c, dec)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// connectMsg is a Debezium insert with a Connect schema of the given row
// fields.
func connectMsg(fields string, after string) string {
	row := `{"type":"struct","optional":true,"name":"s.public.t.Value","field":"%s","fields":[` + fields + `]}`
	return `{"schema":{"type":"struct","name":"s.public.t.Envelope","fields":[` +
		fmt.Sprintf(row, "before") + `,` + fmt.Sprintf(row, "after") + `,` +
		`{"type":"struct","field":"source","fields":[{"type":"string","field":"db"}]},{"type":"string","field":"op"}]},` +
		`"payload":{"op":"c","before":null,"after":` + after + `,"source":{"db":"s","schema":"public","table":"t"}}}`
}

func TestConnectSchemaVersions(t *testing.T) {
	dbz, _ := debezium.New(debezium.Options{})
	r := newResolver(nil)
	v1 := `{"type":"int32","field":"id"},{"type":"string","optional":true,"field":"name"}`
	v2 := v1 + `,{"type":"int64","optional":true,"field":"qty"}`
	t1 := resolveOK(t, r, decoded(t, dbz, connectMsg(v1, `{"id":1,"name":"a"}`)), dbz)
	if got := columns(t1); got != "id:int32 name:string" || t1.Version != 1 || !t1.Declared {
		t.Fatalf("v1 = %s (version %d)", got, t1.Version)
	}
	if again := resolveOK(t, r, decoded(t, dbz, connectMsg(v1, `{"id":2,"name":"b"}`)), dbz); again != t1 {
		t.Error("the same schema made a new version")
	}
	t2 := resolveOK(t, r, decoded(t, dbz, connectMsg(v2, `{"id":3,"name":"c","qty":4}`)), dbz)
	if got := columns(t2); got != "id:int32 name:string qty:int64" || t2.Version != 2 {
		t.Fatalf("v2 = %s (version %d)", got, t2.Version)
	}
	// A connector switching back to the old schema gets the old version.
	if back := resolveOK(t, r, decoded(t, dbz, connectMsg(v1, `{"id":5,"name":"e"}`)), dbz); back != t1 {
		t.Errorf("switching back made version %d, want version 1", back.Version)
	}
	bad := `{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"x"},"field":"d"}`
	if _, _, err := r.Resolve(decoded(t, dbz, connectMsg(bad, `{"d":"AQ=="}`)), dbz); err == nil ||
		!strings.Contains(err.Error(), "table s.public.t: row schema:") {
		t.Errorf("an unlandable schema: %v", err)
	}
}

const (
	ordersMeta  = `{"op_type":"OBJECT_METADATA","qual_table":"SALES.ORDERS","columns":{"ID":{"type":"number","null":false,"key":true},"AT":{"type":"string","null":true,"key":false}}}`
	archiveMeta = `{"op_type":"OBJECT_METADATA","qual_table":"SALES.ORDERS_ARCHIVE","columns":{"ID":{"type":"number","null":false,"key":true},"AT":{"type":"string","null":true,"key":false}}}`
	// The two tables' JSON Schemas differ: ORDERS' AT is a date-time and
	// its ID an integer, ORDERS_ARCHIVE's AT a date.
	ordersSchema  = `{"$schema":"http://json-schema.org/draft-04/schema#","id":"SALES.ORDERS","type":"object","properties":{"after":{"type":"object","properties":{"ID":{"type":"integer"},"AT":{"type":"string","format":"date-time"}}}}}`
	archiveSchema = `{"$schema":"http://json-schema.org/draft-04/schema#","id":"SALES.ORDERS_ARCHIVE","type":"object","properties":{"after":{"type":"object","properties":{"AT":{"type":"string","format":"date"}}}}}`
	ordersInsert  = `{"qual_table":"SALES.ORDERS","op_type":"INSERT","after":{"ID":1,"AT":"2026-07-13 04:01:01.000001"}}`
)

// TestJSONSchemaChoiceIsExact: a table's JSON Schema record is the one whose
// id names it, never one whose id merely contains its name, whatever the
// order the records came in.
func TestJSONSchemaChoiceIsExact(t *testing.T) {
	ds, _ := goldengate.NewDataStreams(goldengate.Options{})
	orders := []string{ordersMeta, archiveMeta, ordersSchema, archiveSchema}
	for run := range 200 {
		r := newResolver(nil)
		for i := range orders {
			r.Observe(decoded(t, ds, orders[(i+run)%len(orders)]))
		}
		got := columns(resolveOK(t, r, decoded(t, ds, ordersInsert), ds))
		if got != "ID:int64 AT:timestamp(us)" {
			t.Fatalf("run %d: SALES.ORDERS = %s, want its own JSON Schema's types", run, got)
		}
	}
	// A schema id that is a path or file name names its last segment.
	r := newResolver(nil)
	r.Observe(decoded(t, ds, ordersMeta))
	r.Observe(decoded(t, ds, strings.Replace(ordersSchema, `"id":"SALES.ORDERS"`, `"id":"https://x/schemas/SALES.ORDERS.json"`, 1)))
	if got := columns(resolveOK(t, r, decoded(t, ds, ordersInsert), ds)); got != "ID:int64 AT:timestamp(us)" {
		t.Errorf("schema by URL: %s", got)
	}
}

func TestMetadataRefresh(t *testing.T) {
	ds, _ := goldengate.NewDataStreams(goldengate.Options{})
	r := newResolver(nil)
	r.Observe(decoded(t, ds, ordersMeta))
	t1 := resolveOK(t, r, decoded(t, ds, ordersInsert), ds)
	if got := columns(t1); got != "ID:decimal_text AT:string" {
		t.Fatalf("from metadata: %s", got)
	}
	// The same metadata again changes nothing.
	r.Observe(decoded(t, ds, ordersMeta))
	if again := resolveOK(t, r, decoded(t, ds, ordersInsert), ds); again != t1 {
		t.Error("re-sent metadata made a new version")
	}
	// A DDL, then refreshed metadata with a new column.
	r.Observe(decoded(t, ds, `{"op_type":"DDL","qual_table":"SALES.ORDERS","ddl":{"statement":"ALTER TABLE SALES.ORDERS ADD NOTE VARCHAR2(10)","object":{"schema":"SALES","object":"ORDERS"}}}`))
	r.Observe(decoded(t, ds, strings.Replace(ordersMeta, `}}}`, `},"NOTE":{"type":"string","null":true,"key":false}}}`, 1)))
	t2 := resolveOK(t, r, decoded(t, ds, ordersInsert), ds)
	if got := columns(t2); got != "ID:decimal_text AT:string NOTE:string" || t2.Version != 2 {
		t.Errorf("after the DDL: %s (version %d)", got, t2.Version)
	}
}

func TestInferenceAndWidening(t *testing.T) {
	dbz, _ := debezium.New(debezium.Options{})
	r := newResolver(nil)
	msg := func(after string) *change.Change {
		return decoded(t, dbz, `{"op":"c","after":`+after+`,"source":{"db":"s","table":"t"}}`)
	}
	t1 := resolveOK(t, r, msg(`{"id":1,"note":null}`), dbz)
	if got := columns(t1); got != "id:int64 note:null" || t1.Declared {
		t.Fatalf("inferred %s", got)
	}
	t2 := resolveOK(t, r, msg(`{"id":2,"note":"x"}`), dbz)
	if got := columns(t2); got != "id:int64 note:string" || t2.Version != 2 {
		t.Errorf("a first value: %s (version %d)", got, t2.Version)
	}
	t3 := resolveOK(t, r, msg(`{"id":3.5,"note":"y","more":true}`), dbz)
	if got := columns(t3); got != "id:decimal_text note:string more:boolean" || t3.Version != 3 {
		t.Errorf("widened: %s (version %d)", got, t3.Version)
	}
	if same := resolveOK(t, r, msg(`{"id":4,"note":"z"}`), dbz); same != t3 {
		t.Error("a row the current version accepts made a new one")
	}
}

func TestRouteOverridesAndExclusions(t *testing.T) {
	dbz, _ := debezium.New(debezium.Options{})
	price, _ := schema.ParseType("decimal(12,2)")
	i64, _ := schema.ParseType("int64")
	opts := map[string]*resolve.TableOptions{"s.public.t": {
		Layout:    schema.LayoutFlat,
		Overrides: map[string]schema.Type{"price": price},
		Ignore:    func(c string) bool { return c == "secret" },
	}}
	r := newResolver(opts)
	fields := `{"type":"int32","field":"id"},{"type":"string","optional":true,"field":"price"},{"type":"string","optional":true,"field":"secret"}`
	tb := resolveOK(t, r, decoded(t, dbz, connectMsg(fields, `{"id":1,"price":"9.99","secret":"x"}`)), dbz)
	if got := columns(tb); got != "id:int32 price:decimal(12,2)" || tb.Layout != schema.LayoutFlat || !tb.Ignored([]byte("secret")) {
		t.Errorf("route applied: %s layout %s", got, tb.Layout)
	}
	// An override the source's encoding cannot honour is an error.
	opts["s.public.t"].Overrides = map[string]schema.Type{"price": i64}
	dec := `{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"2"},"field":"price"}`
	r = newResolver(opts)
	if _, _, err := r.Resolve(decoded(t, dbz, connectMsg(`{"type":"int32","field":"id"},`+dec, `{"id":1,"price":"AQ=="}`)), dbz); err == nil ||
		!strings.Contains(err.Error(), "column price: cannot land") {
		t.Errorf("an impossible override: %v", err)
	}
}

func TestEventDatasets(t *testing.T) {
	r := newResolver(nil)
	plain := &change.Change{Kind: change.KindDDL}
	e1 := r.Event(schema.TableDDL, plain)
	if e1.Version != 1 || len(e1.Extras) != 0 || e1.Layout != schema.LayoutEvents {
		t.Fatalf("first version %+v", e1)
	}
	withCSN := &change.Change{Kind: change.KindDDL}
	withCSN.AddString("_gg_csn", []byte("1"))
	e2 := r.Event(schema.TableDDL, withCSN)
	if e2.Version != 2 || len(e2.Extras) != 1 {
		t.Errorf("a new extra: version %d, %d extras", e2.Version, len(e2.Extras))
	}
	if other := r.Event(schema.TableTransactions, withCSN); other.Version != 1 || other.Name != schema.TableTransactions {
		t.Errorf("datasets share versions: %s version %d", other.Name, other.Version)
	}
	if r.Event(schema.TableDDL, plain) != e1 || r.Event(schema.TableDDL, withCSN) != e2 {
		t.Error("an event of a known shape made a new version")
	}
}

// TestConcurrentUse resolves tables from several goroutines at once, as
// pipeline workers do; run under -race.
func TestConcurrentUse(t *testing.T) {
	dbz, _ := debezium.New(debezium.Options{})
	ds, _ := goldengate.NewDataStreams(goldengate.Options{})
	r := newResolver(nil)
	var wg sync.WaitGroup
	for g := range 4 {
		// Every goroutine decodes its own messages: decoders are not shared.
		dbz, _ := debezium.New(debezium.Options{})
		ds, _ := goldengate.NewDataStreams(goldengate.Options{})
		wg.Go(func() {
			for i := range 50 {
				table := fmt.Sprintf("t%d", (g+i)%3)
				c := decoded(t, dbz, `{"op":"c","after":{"id":`+fmt.Sprint(i)+`,"v":"x"},"source":{"db":"s","table":"`+table+`"}}`)
				if _, _, err := r.Resolve(c, dbz); err != nil {
					t.Error(err)
				}
				r.Observe(decoded(t, ds, ordersMeta))
				if _, _, err := r.Resolve(decoded(t, ds, ordersInsert), ds); err != nil {
					t.Error(err)
				}
				r.Event(schema.TableTransactions, &change.Change{Kind: change.KindTransaction})
			}
		})
	}
	wg.Wait()
	_, _ = dbz, ds
}

// TestPartitionsResolveApart: what a partition's rows land as depends on
// that partition's messages alone, not on what other partitions sent.
func TestPartitionsResolveApart(t *testing.T) {
	ds, _ := goldengate.NewDataStreams(goldengate.Options{})
	r := newResolver(nil)
	other := r.Partition("topic", 1)
	r.Observe(decoded(t, ds, ordersMeta)) // partition 0's metadata
	if got := columns(resolveOK(t, r, decoded(t, ds, ordersInsert), ds)); got != "ID:decimal_text AT:string" {
		t.Errorf("partition 0, after its metadata: %s", got)
	}
	t1, _, err := other.Resolve(decoded(t, ds, ordersInsert), ds)
	if err != nil {
		t.Fatal(err)
	}
	if t1.Declared || t1.Version != 1 {
		t.Errorf("partition 1, which carried no metadata, landed its row as %s (declared %v, version %d), want it inferred",
			columns(t1), t1.Declared, t1.Version)
	}
}

// TestRecordAndRestore: a version recorded by one partition's owner and
// restored by the next makes the next rows resolve as they did before,
// though they would infer another version from scratch; a version the
// route's settings no longer make is refused.
func TestRecordAndRestore(t *testing.T) {
	dbz, _ := debezium.New(debezium.Options{})
	msg := func(after string) *change.Change {
		return decoded(t, dbz, `{"op":"c","after":`+after+`,"source":{"db":"s","table":"t"}}`)
	}
	r := newResolver(nil)
	resolveOK(t, r, msg(`{"id":1,"a":true}`), dbz)
	before, changed, err := r.Resolve(msg(`{"id":2.5,"b":"x"}`), dbz)
	if err != nil || !changed {
		t.Fatalf("a new column and a widening: changed %v, %v", changed, err)
	}
	if _, changed, _ := r.Resolve(msg(`{"id":3,"b":"y"}`), dbz); changed {
		t.Error("a row the version accepts reported a change")
	}
	rec, err := r.Record("s.t")
	if err != nil {
		t.Fatal(err)
	}

	next := newResolver(nil)
	if fresh := resolveOK(t, newResolver(nil), msg(`{"id":4,"b":"z"}`), dbz); fresh.Fingerprint == before.Fingerprint {
		t.Fatal("the test needs a row that infers another version from scratch")
	}
	if err := next.Restore(rec); err != nil {
		t.Fatal(err)
	}
	got, changed, err := next.Resolve(msg(`{"id":4,"b":"z"}`), dbz)
	if err != nil || changed || got.Fingerprint != before.Fingerprint || got.Version != before.Version {
		t.Errorf("after Restore: %s version %d (changed %v, %v), want %s version %d",
			columns(got), got.Version, changed, err, columns(before), before.Version)
	}
	if t3 := resolveOK(t, next, msg(`{"id":5,"c":1}`), dbz); t3.Version != before.Version+1 {
		t.Errorf("the version after a restored one is %d, want %d", t3.Version, before.Version+1)
	}

	excluded := newResolver(map[string]*resolve.TableOptions{"s.t": {Ignore: func(c string) bool { return c == "a" }}})
	if err := excluded.Restore(rec); !errors.Is(err, resolve.ErrRouteChanged) {
		t.Errorf("restoring a version the route no longer makes: %v, want ErrRouteChanged", err)
	}
}

// TestRestoreKeepsVersionNumbers: a shape the partition's table took before
// the recorded version keeps its number after a Restore, as it did in the
// run that recorded it, and the record made then is the same.
func TestRestoreKeepsVersionNumbers(t *testing.T) {
	dbz, _ := debezium.New(debezium.Options{})
	v1 := `{"type":"int32","field":"id"}`
	v2 := v1 + `,{"type":"int64","optional":true,"field":"qty"}`
	msg := func(fields string) *change.Change { return decoded(t, dbz, connectMsg(fields, `{"id":1}`)) }
	r := newResolver(nil)
	resolveOK(t, r, msg(v1), dbz)
	resolveOK(t, r, msg(v2), dbz)
	rec, err := r.Record("s.public.t")
	if err != nil {
		t.Fatal(err)
	}
	next := newResolver(nil)
	if err := next.Restore(rec); err != nil {
		t.Fatal(err)
	}
	for _, x := range []testResolver{r, next} {
		if back := resolveOK(t, x, msg(v1), dbz); back.Version != 1 {
			t.Errorf("the first shape again: version %d, want 1", back.Version)
		}
	}
	a, _ := r.Record("s.public.t")
	b, _ := next.Record("s.public.t")
	if string(a) != string(b) {
		t.Errorf("records differ after the same rows:\n%s\n%s", a, b)
	}
	if v3 := resolveOK(t, next, decoded(t, dbz, connectMsg(v1+`,{"type":"string","optional":true,"field":"s"}`, `{"id":1}`)), dbz); v3.Version != 3 {
		t.Errorf("a new shape after the restore: version %d, want 3", v3.Version)
	}
}

// TestTextForDelta: with TimeAsText a time of day lands as text (its
// unit's count as HH:MM:SS.fraction), and with NullAsText an inferred
// column first seen NULL lands as text that takes any later value, with
// no new version; a types: string override does the first in any route.
func TestTextForDelta(t *testing.T) {
	dbz, _ := debezium.New(debezium.Options{})
	str, _ := schema.ParseType("string")
	opts := map[string]*resolve.TableOptions{
		"s.public.t": {TimeAsText: true, NullAsText: true},
		"s.public.u": {Overrides: map[string]schema.Type{"clock": str}},
		"s.public.v": {NullAsText: true},
	}
	r := newResolver(opts)
	clock := `{"type":"int64","optional":true,"name":"io.debezium.time.MicroTime","field":"clock"}`
	for _, table := range []string{"t", "u"} {
		msg := strings.ReplaceAll(connectMsg(`{"type":"int32","field":"id"},`+clock, `{"id":1,"clock":45296789012}`), "s.public.t", "s.public."+table)
		msg = strings.Replace(msg, `"table":"t"`, `"table":"`+table+`"`, 1)
		tb := resolveOK(t, r, decoded(t, dbz, msg), dbz)
		if got := columns(tb); got != "id:int32 clock:string/e8" || tb.Columns[1].Type.Enc != schema.EncDuration {
			t.Errorf("s.public.%s: %s (enc %v), want clock as duration text", table, got, tb.Columns[1].Type.Enc)
		}
	}
	if got := string(schema.AppendDuration(nil, 45296789012, schema.Micros)); got != "12:34:56.789012" {
		t.Errorf("the text of 45296789012 µs: %s", got)
	}
	msg := func(after string) *change.Change {
		return decoded(t, dbz, `{"op":"c","after":`+after+`,"source":{"db":"s","schema":"public","table":"v"}}`)
	}
	t1 := resolveOK(t, r, msg(`{"id":1,"note":null}`), dbz)
	if got := columns(t1); got != "id:int64 note:string/e5" {
		t.Fatalf("first NULL: %s", got)
	}
	if t2 := resolveOK(t, r, msg(`{"id":2,"note":7}`), dbz); t2 != t1 {
		t.Errorf("a later number made version %d: %s", t2.Version, columns(t2))
	}
}
