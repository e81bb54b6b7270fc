// Package parquettest builds the record batches the Parquet writer's tests
// and benchmarks write: the images layout of a Debezium-like PostgreSQL
// table, with realistic values.
package parquettest

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/schema"
)

// Columns are the table's columns, as a Debezium Postgres table with
// decimal.handling.mode=precise and one decimal_text override would land.
var Columns = []schema.Column{
	{Name: "id", Type: schema.Type{Kind: schema.Int64}, Key: true},
	{Name: "name", Type: schema.Type{Kind: schema.String}},
	{Name: "amount", Type: schema.Type{Kind: schema.Decimal, Precision: 12, Scale: 2}},
	{Name: "balance", Type: schema.Type{Kind: schema.DecimalText}},
	{Name: "updated_at", Type: schema.Type{Kind: schema.Timestamp, Unit: schema.Micros}},
	{Name: "created_at", Type: schema.Type{Kind: schema.Timestamp, Unit: schema.Micros, UTC: true}},
	{Name: "birth_date", Type: schema.Type{Kind: schema.Date}},
	{Name: "opens_at", Type: schema.Type{Kind: schema.Time, Unit: schema.Micros}},
	{Name: "active", Type: schema.Type{Kind: schema.Bool}},
	{Name: "attrs", Type: schema.Type{Kind: schema.JSON}},
	{Name: "token", Type: schema.Type{Kind: schema.Binary}},
	{Name: "score", Type: schema.Type{Kind: schema.Float64}},
	{Name: "level", Type: schema.Type{Kind: schema.Int16}},
	{Name: "note", Type: schema.Type{Kind: schema.String}, Nullable: true},
}

// image is one row image of the table.
type image struct {
	id         int64
	name       string
	amount     int64 // cents
	balance    string
	updatedAt  int64
	createdAt  int64
	birthDate  int32
	opensAt    int64
	active     bool
	attrs      string
	token      []byte
	score      float64
	level      int16
	note       string
	noteIsNull bool
}

var (
	firstNames = []string{"Ada", "Alan", "Grace", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Margaret", "Dennis",
		"Radia", "John", "Sophie", "Tim", "Hedy", "Niklaus", "Katherine", "Linus", "Shafi", "Leslie"}
	lastNames = []string{"Lovelace", "Turing", "Hopper", "Dijkstra", "Liskov", "Knuth", "Allen", "Thompson", "Hamilton",
		"Ritchie", "Perlman", "Backus", "Wilson", "Berners-Lee", "Lamarr", "Wirth", "Johnson", "Torvalds", "Goldwasser", "Lamport"}
	tiers = []string{"bronze", "silver", "gold", "platinum"}
	tags  = []string{"vip", "new", "churn-risk", "b2b", "eu", "us", "apac", "beta"}
)

func newImage(r *rand.Rand, id int64, base int64) image {
	img := image{
		id:        id,
		name:      firstNames[r.IntN(len(firstNames))] + " " + lastNames[r.IntN(len(lastNames))],
		amount:    r.Int64N(2_000_000_000) - 100_000_000,
		balance:   strconv.FormatInt(r.Int64N(1_000_000_000), 10) + "." + fmt.Sprintf("%04d", r.IntN(10000)),
		updatedAt: base - r.Int64N(86_400_000_000),
		createdAt: base - r.Int64N(5*365*86_400_000_000),
		birthDate: int32(-10_000 + r.IntN(22_000)),
		opensAt:   r.Int64N(86_400_000_000),
		active:    r.IntN(4) != 0,
		score:     float64(r.IntN(100_000)) / 100,
		level:     int16(r.IntN(100)),
	}
	img.attrs = fmt.Sprintf(`{"tier":%q,"tags":[%q,%q],"visits":%d,"newsletter":%t}`,
		tiers[r.IntN(len(tiers))], tags[r.IntN(len(tags))], tags[r.IntN(len(tags))],
		r.IntN(5000), r.IntN(2) == 0)
	img.token = make([]byte, 16)
	for i := range img.token {
		img.token[i] = byte(r.Uint32())
	}
	if r.IntN(5) == 0 {
		img.note = fmt.Sprintf("called on %d, follow up #%d", r.IntN(28)+1, r.IntN(100_000))
	} else {
		img.noteIsNull = true
	}
	return img
}

// update changes a few columns of img, as an UPDATE would.
func (img image) update(r *rand.Rand, ts int64) image {
	img.amount += r.Int64N(100_000) - 50_000
	img.updatedAt = ts
	img.score = float64(r.IntN(100_000)) / 100
	if r.IntN(10) == 0 {
		img.active = !img.active
	}
	return img
}

func appendImage(sb *array.StructBuilder, img image) {
	sb.Append(true)
	sb.FieldBuilder(0).(*array.Int64Builder).Append(img.id)
	sb.FieldBuilder(1).(*array.StringBuilder).Append(img.name)
	sb.FieldBuilder(2).(*array.Decimal128Builder).Append(decimal128.FromI64(img.amount))
	sb.FieldBuilder(3).(*array.StringBuilder).Append(img.balance)
	sb.FieldBuilder(4).(*array.TimestampBuilder).Append(arrow.Timestamp(img.updatedAt))
	sb.FieldBuilder(5).(*array.TimestampBuilder).Append(arrow.Timestamp(img.createdAt))
	sb.FieldBuilder(6).(*array.Date32Builder).Append(arrow.Date32(img.birthDate))
	sb.FieldBuilder(7).(*array.Time64Builder).Append(arrow.Time64(img.opensAt))
	sb.FieldBuilder(8).(*array.BooleanBuilder).Append(img.active)
	sb.FieldBuilder(9).(*array.ExtensionBuilder).StorageBuilder().(*array.StringBuilder).Append(img.attrs)
	sb.FieldBuilder(10).(*array.BinaryBuilder).Append(img.token)
	sb.FieldBuilder(11).(*array.Float64Builder).Append(img.score)
	sb.FieldBuilder(12).(*array.Int16Builder).Append(img.level)
	if img.noteIsNull {
		sb.FieldBuilder(13).AppendNull()
	} else {
		sb.FieldBuilder(13).(*array.StringBuilder).Append(img.note)
	}
}

// appendAbsent appends an absent list: NULL without an image, else mostly
// empty, sometimes the TOASTed attrs column.
func appendAbsent(lb *array.ListBuilder, image bool, r *rand.Rand) {
	if !image {
		lb.AppendNull()
		return
	}
	lb.Append(true)
	if r.IntN(20) == 0 {
		lb.ValueBuilder().(*array.StringBuilder).Append("attrs")
	}
}

// Images returns n rows of the table in the images layout, as the batch
// stage lands them: the _cdc_ metadata columns, a ~250-byte
// _debezium_source JSON extra, before and after structs of Columns
// (before NULL for the 40% inserts, after for the 10% deletes) and the two
// absent lists, mostly empty. Values are pseudo-random from a fixed seed:
// every call returns the same rows.
func Images(mem memory.Allocator, n int) arrow.RecordBatch {
	tbl := schema.NewTable("inventory.public.customers", 1, schema.LayoutImages, Columns,
		[]schema.ExtraColumn{{Name: "_debezium_source", Kind: change.ExtraJSON}}, true, nil)
	rb := array.NewRecordBuilder(mem, tbl.Arrow)
	defer rb.Release()
	var (
		op        = rb.Field(0).(*array.StringBuilder)
		table     = rb.Field(1).(*array.StringBuilder)
		ts        = rb.Field(2).(*array.TimestampBuilder)
		xid       = rb.Field(3).(*array.StringBuilder)
		pos       = rb.Field(4).(*array.StringBuilder)
		source    = rb.Field(5).(*array.StringBuilder)
		partition = rb.Field(6).(*array.Int32Builder)
		offset    = rb.Field(7).(*array.Int64Builder)
		ingested  = rb.Field(8).(*array.TimestampBuilder)
		dbz       = rb.Field(9).(*array.ExtensionBuilder).StorageBuilder().(*array.StringBuilder)
		before    = rb.Field(10).(*array.StructBuilder)
		after     = rb.Field(11).(*array.StructBuilder)
		bAbsent   = rb.Field(12).(*array.ListBuilder)
		aAbsent   = rb.Field(13).(*array.ListBuilder)
	)
	r := rand.New(rand.NewPCG(20240531, 1))
	base := time.Date(2024, 5, 31, 12, 0, 0, 0, time.UTC).UnixMicro()
	tsNow, lsn, txID, txLeft := base, int64(24_023_928), int64(771), 0
	var dbzBuf []byte
	for i := range n {
		if txLeft == 0 {
			txID += 1 + r.Int64N(3)
			txLeft = 1 + r.IntN(8)
		}
		txLeft--
		tsNow += r.Int64N(2000)
		lsn += 40 + r.Int64N(400)
		var o string
		switch x := r.IntN(10); {
		case x < 4:
			o = "c"
		case x < 9:
			o = "u"
		default:
			o = "d"
		}
		op.Append(o)
		table.Append("inventory.public.customers")
		ts.Append(arrow.Timestamp(tsNow))
		xid.Append(strconv.FormatInt(txID, 10))
		pos.Append(strconv.FormatInt(lsn, 10))
		source.Append("dbserver1.public.customers")
		partition.Append(int32(i % 6))
		offset.Append(int64(1_000_000 + i))
		ingested.Append(arrow.Timestamp(base + int64(i/1000)*1_000_000 + 500_000))
		dbzBuf = fmt.Appendf(dbzBuf[:0], `{"version":"2.7.3.Final","connector":"postgresql","name":"dbserver1",`+
			`"ts_ms":%d,"snapshot":"false","db":"inventory","sequence":"[\"%d\",\"%d\"]","schema":"public",`+
			`"table":"customers","txId":%d,"lsn":%d,"xmin":null}`, tsNow/1000, lsn-40, lsn, txID, lsn)
		dbz.BinaryBuilder.Append(dbzBuf)

		img := newImage(r, 1+r.Int64N(1_000_000), base)
		switch o {
		case "c":
			before.AppendNull()
			appendImage(after, img)
		case "u":
			appendImage(before, img)
			appendImage(after, img.update(r, tsNow))
		case "d":
			appendImage(before, img)
			after.AppendNull()
		}
		appendAbsent(bAbsent, o != "c", r)
		appendAbsent(aAbsent, o != "d", r)
	}
	return rb.NewRecordBatch()
}
