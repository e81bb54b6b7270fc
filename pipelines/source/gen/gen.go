// Package gen generates mixed CDC streams with a known outcome, for the
// end-to-end tests and the landing benchmarks.
//
// A stream interleaves changes to several tables in three formats —
// GoldenGate Data Streams (OBJECT_METADATA, partial updates, a DDL adding a
// column mid-stream, CloudEvents-wrapped for some tables), Debezium with
// schemas (every Connect logical type, transactions, tombstones, heartbeats)
// and Debezium without schemas — and Expected gives, for each table, the
// number of change rows and the current state every row key should have, as
// the text DuckDB prints for each value.
package gen

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

// Expected is what a correct landing of the stream contains.
type Expected struct {
	Tables      map[string]*TableExpect `json:"tables"`
	Tombstones  int                     `json:"tombstones"`
	Heartbeats  int                     `json:"heartbeats"`
	Transaction int                     `json:"transactions"`
	DDL         int                     `json:"ddl"`
	Messages    int                     `json:"messages"`
}

// TableExpect describes one table.
type TableExpect struct {
	Format string `json:"format"`
	Key    string `json:"key"`
	// Columns maps each column to its kind for the checker: text, int,
	// decimal, timestamp, timestamptz, date, time, bool, json, blob, double.
	Columns map[string]string `json:"columns"`
	Changes int               `json:"changes"`
	// State maps the key's text to the row's column texts (null: SQL NULL).
	State map[string]map[string]*string `json:"state"`
}

type table struct {
	name   string
	format int // 0 GoldenGate, 1 Debezium with schemas, 2 Debezium without
	ce     bool
	rows   map[int64]map[string]*string
	nextID int64
	ddl    bool // GoldenGate: EXTRA column added
	exp    *TableExpect
}

type gen struct {
	w   *bufio.Writer
	rnd *rand.Rand
	exp *Expected
	ts  time.Time
	pos int64
}

// Formats of generated tables.
const (
	Mixed = iota - 1
	GoldenGate
	Debezium
	DebeziumSchemaless
)

// Generate writes a stream of events row changes over ntables tables (at
// least 3) to w, tables cycling through the three formats, and returns what
// a correct landing of it contains.
func Generate(w io.Writer, events, ntables int, seed uint64) (*Expected, error) {
	return GenerateFormat(w, events, ntables, seed, Mixed)
}

// GenerateFormat is Generate with every table in one format (or Mixed).
func GenerateFormat(w io.Writer, events, ntables int, seed uint64, format int) (*Expected, error) {
	if ntables < 3 && format == Mixed {
		return nil, fmt.Errorf("need at least 3 tables, got %d", ntables)
	}
	g := &gen{w: bufio.NewWriterSize(w, 1<<20), rnd: rand.New(rand.NewPCG(seed, 7)),
		exp: &Expected{Tables: map[string]*TableExpect{}}, ts: time.Date(2026, 7, 13, 4, 0, 0, 0, time.UTC)}
	var ts []*table
	for i := range ntables {
		t := &table{format: i % 3, ce: i%6 == 0, rows: map[int64]map[string]*string{}, nextID: 1}
		if format != Mixed {
			t.format = format
		}
		switch t.format {
		case 0:
			t.name = fmt.Sprintf("SALES.T%03d", i)
			t.exp = &TableExpect{Format: "goldengate", Key: "ID", Columns: map[string]string{
				"ID": "decimal_text", "NAME": "text", "AMOUNT": "decimal_text", "CREATED": "timestamp", "NOTE": "text", "EXTRA": "text",
				"QTY": "decimal_text", "PRICE": "decimal_text", "STATUS": "text", "CITY": "text", "COUNTRY": "text", "CODE": "text"}}
			g.ggMetadata(t)
		case 1:
			t.name = fmt.Sprintf("shop.public.t%03d", i)
			t.exp = &TableExpect{Format: "debezium", Key: "id", Columns: map[string]string{
				"id": "int", "name": "text", "amount": "decimal", "big": "text", "vsd": "text", "created": "timestamp",
				"zoned": "timestamptz", "day": "date", "at": "time", "flag": "bool", "doc": "json", "uid": "text",
				"raw": "blob", "ratio": "double", "small": "int", "note": "text"}}
		case 2:
			t.name = fmt.Sprintf("shop.t%03d", i)
			t.exp = &TableExpect{Format: "debezium-schemaless", Key: "id", Columns: map[string]string{
				"id": "int", "name": "text", "amount": "decimal_text", "flag": "bool", "note": "text"}}
		}
		g.exp.Tables[t.name] = t.exp
		ts = append(ts, t)
	}
	for n := range events {
		t := ts[g.rnd.IntN(len(ts))]
		g.ts = g.ts.Add(time.Duration(1+g.rnd.IntN(2000)) * time.Millisecond)
		g.pos++
		if t.format == 0 && !t.ddl && n > events/2 {
			g.ggDDL(t)
		}
		switch t.format {
		case 0:
			g.ggChange(t)
		case 1:
			g.dbzChange(t, true)
		case 2:
			g.dbzChange(t, false)
		}
		if g.rnd.IntN(50) == 0 {
			g.line(map[string]any{"ts_ms": g.ts.UnixMilli()})
			g.exp.Heartbeats++
		}
	}
	for _, t := range ts {
		t.exp.State = map[string]map[string]*string{}
		for _, row := range t.rows {
			t.exp.State[*row[t.exp.Key]] = row
		}
	}
	if err := g.w.Flush(); err != nil {
		return nil, err
	}
	return g.exp, nil
}

func (g *gen) line(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	g.w.Write(b)
	g.w.WriteByte('\n')
	g.exp.Messages++
}

func str(s string) *string { return &s }

// ordered is a JSON object whose keys come in a given order, as the real
// producers write them: Kafka Connect's JsonConverter in the order of the
// schema's fields, GoldenGate in the order of the table's columns. Keys
// of m that order does not name follow, sorted.
type ordered struct {
	m     map[string]any
	order []string
}

func (o ordered) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	write := func(k string) error {
		if len(b) > 1 {
			b = append(b, ',')
		}
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(o.m[k])
		if err != nil {
			return err
		}
		b = append(append(append(b, kb...), ':'), vb...)
		return nil
	}
	done := make(map[string]bool, len(o.order))
	for _, k := range o.order {
		if _, ok := o.m[k]; ok && !done[k] {
			done[k] = true
			if err := write(k); err != nil {
				return nil, err
			}
		}
	}
	var rest []string
	for k := range o.m {
		if !done[k] {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	for _, k := range rest {
		if err := write(k); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// ggColumns are the columns of a GoldenGate table, in table order.
var ggColumns = []string{"ID", "NAME", "AMOUNT", "CREATED", "NOTE", "QTY", "PRICE", "STATUS", "CITY", "COUNTRY", "CODE", "EXTRA"}

// dbzColumns are the fields of a Debezium row, in schema order
// (dbzRowSchema).
var dbzColumns = []string{"id", "name", "amount", "big", "vsd", "created", "zoned", "day", "at", "flag", "doc", "uid",
	"raw", "ratio", "small", "note"}

// dbzEnvelope and dbzSource are the fields of a Debezium envelope and of
// its source block, in schema order (dbzEnvelopeSchema); a MySQL source
// has its binlog position last.
var (
	dbzEnvelope = []string{"before", "after", "source", "op", "ts_ms", "transaction"}
	dbzSource   = []string{"version", "connector", "name", "ts_ms", "ts_us", "snapshot", "db", "schema", "table", "txId", "lsn",
		"file", "pos", "row"}
)

// pick chooses an existing row id, or 0 when the table is empty.
func (g *gen) pick(t *table) int64 {
	if len(t.rows) == 0 {
		return 0
	}
	// Deterministic: walk ids from a random start.
	for {
		id := 1 + g.rnd.Int64N(t.nextID)
		if _, ok := t.rows[id]; ok {
			return id
		}
	}
}

// op decides insert (0), update (1) or delete (2).
func (g *gen) op(t *table) (int, int64) {
	id := g.pick(t)
	r := g.rnd.IntN(10)
	switch {
	case id == 0 || r < 4:
		id = t.nextID
		t.nextID++
		return 0, id
	case r < 8:
		return 1, id
	}
	return 2, id
}

// ---- GoldenGate Data Streams ----

func (g *gen) ggWrap(t *table, rec map[string]any) {
	if t.ce {
		g.line(map[string]any{"specversion": "1.0", "type": "com.example.cdc.change", "source": "/ogg/stream1",
			"id": fmt.Sprintf("evt-%d", g.pos), "datacontenttype": "application/json", "data": rec})
		return
	}
	g.line(rec)
}

func (g *gen) ggMetadata(t *table) {
	cols := map[string]any{
		"ID":      map[string]any{"type": "number", "null": false, "key": true},
		"NAME":    map[string]any{"type": "string", "null": false, "key": false},
		"AMOUNT":  map[string]any{"type": "number", "null": true, "key": false},
		"CREATED": map[string]any{"type": "string", "null": true, "key": false},
		"NOTE":    map[string]any{"type": "string", "null": true, "key": false},
		"QTY":     map[string]any{"type": "number", "null": true, "key": false},
		"PRICE":   map[string]any{"type": "number", "null": true, "key": false},
		"STATUS":  map[string]any{"type": "string", "null": true, "key": false},
		"CITY":    map[string]any{"type": "string", "null": true, "key": false},
		"COUNTRY": map[string]any{"type": "string", "null": true, "key": false},
		"CODE":    map[string]any{"type": "string", "null": true, "key": false},
	}
	if t.ddl {
		cols["EXTRA"] = map[string]any{"type": "string", "null": true, "key": false}
	}
	g.ggWrap(t, map[string]any{"op_type": "OBJECT_METADATA", "qual_table": t.name, "columns": ordered{cols, ggColumns}})
}

func (g *gen) ggDDL(t *table) {
	t.ddl = true
	g.ggWrap(t, map[string]any{"op_type": "DDL", "op_ts": g.ts.Format("2006-01-02T15:04:05.000000Z"),
		"xid": fmt.Sprintf("x%d", g.pos), "pos": fmt.Sprintf("G-%d", g.pos),
		"ddl": map[string]any{"object": map[string]any{"catalog": "", "schema": "SALES", "object": t.name[6:]},
			"statement": "ALTER TABLE " + t.name + " ADD EXTRA VARCHAR2(20)"}})
	g.exp.DDL++
	g.ggMetadata(t)
	for _, row := range t.rows {
		row["EXTRA"] = nil
	}
}

// ggAmount returns an exact decimal as a JSON number, sometimes with 19+
// digits.
func (g *gen) ggAmount() json.Number {
	if g.rnd.IntN(5) == 0 {
		return json.Number(fmt.Sprintf("%d%04d.%04d", 1804367449443+g.rnd.IntN(1000), g.rnd.IntN(10000), g.rnd.IntN(10000)))
	}
	return json.Number(fmt.Sprintf("%d.%02d", g.rnd.IntN(100000), g.rnd.IntN(100)))
}

func (g *gen) ggChange(t *table) {
	kind, id := g.op(t)
	idNum := json.Number(strconv.FormatInt(id, 10))
	if id%7 == 0 {
		// 19-digit keys must stay exact.
		idNum = json.Number("9" + fmt.Sprintf("%018d", id))
	}
	rec := map[string]any{"qual_table": t.name, "op_ts": g.ts.Format("2006-01-02T15:04:05.000000Z"),
		"xid": fmt.Sprintf("x%d", g.pos), "pos": fmt.Sprintf("G-%d", g.pos), "csn": strconv.FormatInt(g.pos, 10)}
	key := string(idNum)
	switch kind {
	case 0:
		created := g.ts.Add(-time.Duration(g.rnd.IntN(1e6)) * time.Microsecond)
		after := map[string]any{"ID": idNum, "NAME": fmt.Sprintf("name-%d", id), "AMOUNT": g.ggAmount(),
			"CREATED": created.Format("2006-01-02 15:04:05.000000"), "NOTE": nil}
		row := map[string]*string{"ID": str(key), "NAME": str(after["NAME"].(string)),
			"AMOUNT": str(string(after["AMOUNT"].(json.Number))), "CREATED": str(created.Format("2006-01-02 15:04:05.000000")), "NOTE": nil}
		if g.rnd.IntN(3) == 0 {
			after["NOTE"] = "note ✓ \"quoted\""
			row["NOTE"] = str("note ✓ \"quoted\"")
		}
		if t.ddl {
			after["EXTRA"] = "x"
			row["EXTRA"] = str("x")
		}
		qty := json.Number(strconv.Itoa(1 + g.rnd.IntN(500)))
		price := json.Number(fmt.Sprintf("%d.%02d", g.rnd.IntN(10000), g.rnd.IntN(100)))
		status := []string{"NEW", "PAID", "SHIPPED", "CLOSED"}[g.rnd.IntN(4)]
		city := []string{"Lisboa", "München", "Zürich", "São Paulo", "Kraków", "Reykjavík"}[g.rnd.IntN(6)]
		country := []string{"PT", "DE", "CH", "BR", "PL", "IS"}[g.rnd.IntN(6)]
		code := fmt.Sprintf("C-%06d", g.rnd.IntN(1000000))
		after["QTY"], after["PRICE"], after["STATUS"], after["CITY"], after["COUNTRY"], after["CODE"] = qty, price, status, city, country, code
		row["QTY"], row["PRICE"], row["STATUS"], row["CITY"], row["COUNTRY"], row["CODE"] =
			str(string(qty)), str(string(price)), str(status), str(city), str(country), str(code)
		rec["op_type"], rec["after"] = "INSERT", ordered{after, ggColumns}
		t.rows[id] = row
	case 1:
		// Partial images: the key and the changed columns only.
		row := t.rows[id]
		after := map[string]any{"ID": idNum}
		if g.rnd.IntN(2) == 0 {
			a := g.ggAmount()
			after["AMOUNT"], row["AMOUNT"] = a, str(string(a))
		} else {
			after["NOTE"], row["NOTE"] = nil, nil // set to NULL: not the same as absent
		}
		rec["op_type"], rec["before"], rec["after"] = "UPDATE", map[string]any{"ID": idNum}, ordered{after, ggColumns}
	case 2:
		rec["op_type"], rec["before"] = "DELETE", map[string]any{"ID": idNum}
		delete(t.rows, id)
	}
	if kind != 2 {
		t.rows[id]["ID"] = str(key)
	}
	t.exp.Changes++
	g.ggWrap(t, rec)
}

// ---- Debezium ----

// connectEnvelope is the JsonConverter's envelope, schema first as it
// writes it.
type connectEnvelope struct {
	Schema  any `json:"schema"`
	Payload any `json:"payload"`
}

func field(typ, name string, optional bool, extra ...any) map[string]any {
	f := map[string]any{"type": typ, "field": name, "optional": optional}
	for i := 0; i+1 < len(extra); i += 2 {
		f[extra[i].(string)] = extra[i+1]
	}
	return f
}

func dbzRowSchema(name string) []any {
	return []any{
		field("int64", "id", false),
		field("string", "name", false),
		field("bytes", "amount", true, "name", "org.apache.kafka.connect.data.Decimal", "version", 1,
			"parameters", map[string]any{"scale": "2", "connect.decimal.precision": "12"}),
		field("bytes", "big", true, "name", "org.apache.kafka.connect.data.Decimal", "version", 1,
			"parameters", map[string]any{"scale": "5", "connect.decimal.precision": "45"}),
		map[string]any{"type": "struct", "field": "vsd", "optional": true, "name": "io.debezium.data.VariableScaleDecimal",
			"version": 1, "fields": []any{field("int32", "scale", false), field("bytes", "value", false)}},
		field("int64", "created", true, "name", "io.debezium.time.MicroTimestamp", "version", 1),
		field("string", "zoned", true, "name", "io.debezium.time.ZonedTimestamp", "version", 1),
		field("int32", "day", true, "name", "io.debezium.time.Date", "version", 1),
		field("int64", "at", true, "name", "io.debezium.time.MicroTime", "version", 1),
		field("boolean", "flag", true),
		field("string", "doc", true, "name", "io.debezium.data.Json", "version", 1),
		field("string", "uid", true, "name", "io.debezium.data.Uuid", "version", 1),
		field("bytes", "raw", true),
		field("double", "ratio", true),
		field("int16", "small", true),
		field("string", "note", true),
	}
}

func dbzEnvelopeSchema(t *table) map[string]any {
	row := dbzRowSchema(t.name)
	return map[string]any{"type": "struct", "optional": false, "name": t.name + ".Envelope", "version": 2, "fields": []any{
		map[string]any{"type": "struct", "fields": row, "optional": true, "name": t.name + ".Value", "field": "before"},
		map[string]any{"type": "struct", "fields": row, "optional": true, "name": t.name + ".Value", "field": "after"},
		map[string]any{"type": "struct", "optional": false, "name": "io.debezium.connector.postgresql.Source", "field": "source", "fields": []any{
			field("string", "version", false), field("string", "connector", false), field("string", "name", false),
			field("int64", "ts_ms", false), field("int64", "ts_us", true), field("string", "snapshot", true),
			field("string", "db", false), field("string", "schema", false), field("string", "table", false),
			field("int64", "txId", true), field("int64", "lsn", true)}},
		field("string", "op", false),
		field("int64", "ts_ms", true),
		map[string]any{"type": "struct", "optional": true, "name": "event.block", "version": 1, "field": "transaction", "fields": []any{
			field("string", "id", false), field("int64", "total_order", false), field("int64", "data_collection_order", false)}},
	}}
}

// unscaled encodes v as Kafka Connect Decimal bytes.
func unscaled(v *big.Int) string {
	var b []byte
	if v.Sign() >= 0 {
		b = v.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
	} else {
		// two's complement
		n := len(v.Bytes()) + 1
		m := new(big.Int).Lsh(big.NewInt(1), uint(n*8))
		b = new(big.Int).Add(m, v).Bytes()
		for len(b) < n {
			b = append([]byte{0xff}, b...)
		}
	}
	return base64.StdEncoding.EncodeToString(b)
}

func scaledText(v *big.Int, scale int) string {
	s := new(big.Int).Abs(v).String()
	for len(s) <= scale {
		s = "0" + s
	}
	out := s[:len(s)-scale] + "." + s[len(s)-scale:]
	if v.Sign() < 0 {
		out = "-" + out
	}
	return out
}

func (g *gen) dbzRow(t *table, id int64, schemas bool) (map[string]any, map[string]*string) {
	cents := big.NewInt(g.rnd.Int64N(2e9) - 1e9)
	name := fmt.Sprintf("name-%d-%d", id, g.rnd.IntN(1000))
	flag := g.rnd.IntN(2) == 0
	row := map[string]*string{"id": str(strconv.FormatInt(id, 10)), "name": str(name),
		"flag": str(strconv.FormatBool(flag)), "note": nil}
	img := map[string]any{"id": id, "name": name, "flag": flag, "note": nil}
	if g.rnd.IntN(3) == 0 {
		img["note"] = "héllo"
		row["note"] = str("héllo")
	}
	if !schemas {
		// decimal.handling.mode=string
		img["amount"] = scaledText(cents, 2)
		row["amount"] = str(scaledText(cents, 2))
		return img, row
	}
	img["amount"], row["amount"] = unscaled(cents), str(scaledText(cents, 2))
	big40, _ := new(big.Int).SetString(fmt.Sprintf("%d123456789012345678901234567890%05d", 1+g.rnd.IntN(9), g.rnd.IntN(100000)), 10)
	if g.rnd.IntN(2) == 0 {
		big40.Neg(big40)
	}
	img["big"], row["big"] = unscaled(big40), str(scaledText(big40, 5))
	vs := big.NewInt(g.rnd.Int64N(1e12))
	scale := g.rnd.IntN(6)
	img["vsd"] = map[string]any{"scale": scale, "value": unscaled(vs)}
	if scale == 0 {
		row["vsd"] = str(vs.String())
	} else {
		row["vsd"] = str(scaledText(vs, scale))
	}
	created := g.ts.Add(-time.Duration(1+g.rnd.IntN(1e9)) * time.Microsecond)
	img["created"], row["created"] = created.UnixMicro(), str(created.Format("2006-01-02 15:04:05.000000"))
	// ZonedTimestamp in a non-UTC offset: the instant must be kept.
	zone := time.FixedZone("", (g.rnd.IntN(25)-12)*3600+30*60*g.rnd.IntN(2))
	zoned := created.In(zone)
	img["zoned"], row["zoned"] = zoned.Format("2006-01-02T15:04:05.000000Z07:00"), str(created.UTC().Format("2006-01-02 15:04:05.000000"))
	day := created.Truncate(24 * time.Hour)
	img["day"], row["day"] = day.Unix()/86400, str(day.Format("2006-01-02"))
	at := time.Duration(g.rnd.Int64N(86400e6)) * time.Microsecond
	img["at"], row["at"] = at.Microseconds(), str(time.Time{}.Add(at).Format("15:04:05.000000"))
	doc := fmt.Sprintf(`{"k":%d,"tags":["a","b"]}`, id)
	img["doc"], row["doc"] = doc, str(doc)
	uid := fmt.Sprintf("%08x-0000-4000-8000-%012x", id, g.rnd.Int64N(1<<40))
	img["uid"], row["uid"] = uid, str(uid)
	raw := fmt.Sprintf("raw-%d", id)
	if g.rnd.IntN(5) == 0 {
		raw = "" // empty bytes are not NULL
	}
	img["raw"], row["raw"] = base64.StdEncoding.EncodeToString([]byte(raw)), str(raw)
	ratio := float64(g.rnd.IntN(1000)) + 0.25
	img["ratio"], row["ratio"] = ratio, str(strconv.FormatFloat(ratio, 'f', -1, 64))
	small := g.rnd.IntN(65536) - 32768
	img["small"], row["small"] = small, str(strconv.Itoa(small))
	return img, row
}

func (g *gen) dbzChange(t *table, schemas bool) {
	kind, id := g.op(t)
	txID := fmt.Sprintf("%d:%d", 500+g.pos, g.pos)
	tx := g.rnd.IntN(4) == 0 && schemas
	if tx {
		g.dbzTx(t, "BEGIN", txID, schemas)
	}
	source := map[string]any{"version": "3.0.0.Final", "connector": "postgresql", "name": "shop",
		"ts_ms": g.ts.UnixMilli(), "ts_us": g.ts.UnixMicro(), "snapshot": "false", "db": "shop",
		"schema": "public", "table": filepath.Ext(t.name)[1:], "txId": 500 + g.pos, "lsn": 1000 * g.pos}
	if !schemas {
		source["connector"], source["schema"] = "mysql", nil
		source["file"], source["pos"], source["row"] = "binlog.000003", 154+g.pos, 0
		delete(source, "lsn")
	}
	payload := map[string]any{"source": source, "ts_ms": g.ts.UnixMilli() + 3, "before": nil, "after": nil}
	if tx {
		payload["transaction"] = map[string]any{"id": txID, "total_order": 1, "data_collection_order": 1}
	} else {
		payload["transaction"] = nil
	}
	switch kind {
	case 0:
		img, row := g.dbzRow(t, id, schemas)
		payload["op"], payload["after"] = "c", ordered{img, dbzColumns}
		t.rows[id] = row
	case 1:
		before, _ := g.dbzRow(t, id, schemas)
		img, row := g.dbzRow(t, id, schemas)
		payload["op"], payload["before"], payload["after"] = "u", ordered{before, dbzColumns}, ordered{img, dbzColumns}
		t.rows[id] = row
	case 2:
		before, _ := g.dbzRow(t, id, schemas)
		payload["op"], payload["before"] = "d", ordered{before, dbzColumns}
		delete(t.rows, id)
	}
	payload["source"] = ordered{source, dbzSource}
	t.exp.Changes++
	if schemas {
		g.line(connectEnvelope{Schema: dbzEnvelopeSchema(t), Payload: ordered{payload, dbzEnvelope}})
	} else {
		g.line(ordered{payload, dbzEnvelope})
	}
	if kind == 2 {
		// Kafka tombstone after a delete.
		if schemas {
			g.line(connectEnvelope{})
		} else {
			g.w.WriteString("null\n")
			g.exp.Messages++
		}
		g.exp.Tombstones++
	}
	if tx {
		g.dbzTx(t, "END", txID, schemas)
	}
}

func (g *gen) dbzTx(t *table, status, id string, schemas bool) {
	ev := map[string]any{"status": status, "id": id, "ts_ms": g.ts.UnixMilli(), "event_count": nil, "data_collections": nil}
	if status == "END" {
		ev["event_count"] = 1
		ev["data_collections"] = []any{map[string]any{"data_collection": t.name, "event_count": 1}}
	}
	g.line(ev)
	g.exp.Transaction++
}
