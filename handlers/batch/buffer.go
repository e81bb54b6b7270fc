package batch

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/state"
	"github.com/valyala/fastjson"
)

// bufState is where a buffer's newest rows go, and whether it takes more.
// Rows moved on before stay where they went: the spilled runs and the
// file's encoder hold earlier rows in any state but released.
//
//	freezing ──build──▶ building ──unbuild (spill)──▶ freezing
//	freezing, building ──seal──▶ sealed ──release──▶ released
//
// A buffer is made freezing. Its rows are frozen (frozenRows) until they
// reach their limit or the file is written; build then moves them to
// Arrow builders (thaw), which take the rows after them. Under the memory
// bound the builders' rows move to the encoder or to a spilled run, and
// the builders are dropped (unbuild). seal marks the file being written:
// the encoder takes no more rows, and a write that fails keeps the built
// record for a retry (sealed again). release frees everything once the
// file is written or dropped.
type bufState uint8

const (
	freezing bufState = iota
	building
	sealed
	released
)

func (s bufState) String() string {
	return [...]string{"freezing", "building", "sealed", "released"}[s]
}

// buffer accumulates the rows of one output file: one table version, one
// partition directory, one source partition.
type buffer struct {
	key   bufKey
	table *schema.Table
	dir   string
	src   sinks.Position // source, partition and first offset
	last  int64
	rows  int
	bytes int64
	born  int64 // unix nanos of the first row
	// maxAge is the table's max age in nanoseconds (0: none).
	maxAge int64
	// used is the batcher's append count at the buffer's latest row:
	// files idle the longest spill first.
	used int64
	// builds counts how often the builders were made (tests): once per
	// move of frozen rows to builders.
	builds int
	// invalid holds the builders' rows that failed conversion (counted
	// from base); they are skipped on write.
	invalid []int
	// base is how many of the file's rows left the builders for spilled:
	// the builders hold rows base to rows.
	base int
	// spilled holds the rows an open file gave up its builders for under
	// the memory bound (spill), in order; spilledBytes their size.
	spilled      []spilled
	spilledBytes int64
	// heldSpilled is the part of held that the batcher counts as spilled
	// (Batcher.account).
	heldSpilled int64
	mem         memory.Allocator
	// forced is the recorded cut the buffer repeats (Batcher.Restore).
	forced *state.Cut
	// offsets are those of the rows that converted.
	offsets rowOffsets

	rb   *fieldBuilders // nil while the file has no builders
	conv *schema.Converters
	// alloc counts the bytes the builders hold; fixed estimates the
	// builders themselves (see footprint).
	alloc *countingAllocator
	fixed int64
	// held is the footprint the batcher's memory bound counts for it.
	held int64
	// built is the record of a buffer whose write failed, kept for a retry.
	built arrow.RecordBatch
	// enc encodes the file's rows while it is open (Batcher.encodeRows):
	// it holds the first encodedRows valid rows, the first of them at
	// offset first (named).
	enc         *encoding
	encodedRows int
	first       int64
	named       bool
	// state is the buffer's stage (bufState); its transitions are build,
	// unbuild, seal and release.
	state bufState
	// handed is the size of the last run of rows handed to the encoder,
	// counted until the next (the encoder frees it when it wants).
	handed int64
	// frozen holds the rows that came while the buffer was freezing, in
	// order after every other row of it (see frozenRows).
	frozen      frozenRows
	freezeLimit int64
	// planned and plannedBytes count the rows of a run (Batcher.AddRun)
	// assigned to the buffer and not appended yet.
	planned      int
	plannedBytes int64
	// appender is the goroutine of the run that appends its rows.
	appender int
	// metadata builders: the text ones are TextColumns (texts), and no
	// Arrow builder is made for their fields
	op, tbl, xid, pos, source *schema.TextColumn
	texts                     []textField
	extraTexts                []*schema.TextColumn // per extra column, nil unless text
	ts, ingested              *array.TimestampBuilder
	part                      *array.Int32Builder
	offset                    *array.Int64Builder
	extras                    []array.Builder
	// image builders: before/after structs (images layout) or top level (flat)
	images [2]*imageBuilder
	flat   *imageBuilder
	events *eventBuilders
	// lists are the images' absent-column lists, which the record
	// builder's list builders leave to them (newRecord).
	lists   []*nameList
	scratch []byte
}

// spilled is a run of a file's rows out of its builders: one record batch
// as an Arrow IPC stream (LZ4-compressed buffers) without its schema
// message, which is the table version's (streamPrefix), and its rows that
// converted.
type spilled struct {
	data   []byte
	ranges [][2]int
}

// eos ends an Arrow IPC stream.
var eos = []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}

// prefixes holds each schema's IPC schema message, the part of a spilled
// run every run of the table version shares.
var prefixes sync.Map // *arrow.Schema → []byte

// streamPrefix returns the schema message that starts an IPC stream of sch.
func streamPrefix(sch *arrow.Schema, mem memory.Allocator) ([]byte, error) {
	if p, ok := prefixes.Load(sch); ok {
		return p.([]byte), nil
	}
	var out bytes.Buffer
	w := ipc.NewWriter(&out, ipc.WithSchema(sch), ipc.WithAllocator(mem))
	if err := w.Close(); err != nil {
		return nil, err
	}
	p := bytes.Clone(bytes.TrimSuffix(out.Bytes(), eos))
	prefixes.Store(sch, p)
	return p, nil
}

// fieldBuilders are the Arrow builders of a file's fields that nothing
// else builds (text columns, image structs and absent lists do): nil for
// those, which newRecord takes from their builders.
type fieldBuilders struct {
	fields []array.Builder
}

// Fields returns the builders by field, nil for the fields built
// elsewhere.
func (r *fieldBuilders) Fields() []array.Builder { return r.fields }

// Release releases the builders.
func (r *fieldBuilders) Release() {
	for _, f := range r.fields {
		if f != nil {
			f.Release()
		}
	}
}

// textField is a text column of the record, built from a TextColumn (no
// Arrow builder is made for its field).
type textField struct {
	field int
	col   *schema.TextColumn
}

type imageBuilder struct {
	st       *imageStruct // nil in the flat layout
	noStruct bool         // images layout of a table without columns
	app      []schema.Appender
	// rep appends each column's values from packed values (replay); nil
	// in the checks.
	rep []schema.Replayer
	// absent lists the image's absent columns (nil when they are not
	// kept: the checks of frozen rows).
	absent *nameList
	// seen says which columns the image named; found counts them, and
	// siblings says whether the table has text siblings at all.
	seen     []bool
	found    int
	siblings bool
	// names are the table's column names, for the absent lists; gone is
	// the scratch list of an image's absent names.
	names [][]byte
	gone  [][]byte
	// check: the builder only checks that the image converts (the checks
	// of frozen rows), and appends no NULL for the columns it lacks.
	check bool
	// The image's columns: one of texts[i] and builders[i] is set (none
	// in the checks). A column an image does not name is NULL there, and
	// its NULLs are appended in one run when it next takes a value or
	// when the rows are taken (settle), not one at a time: partial images
	// (GoldenGate's, absent before images of inserts) leave columns out
	// of most rows.
	texts    []*schema.TextColumn
	builders []array.Builder
	filled   []int // the rows column i holds
	rows     int   // the images appended, absent ones included
}

// lazyNulls gives ib the columns its appenders write to.
func (ib *imageBuilder) lazyNulls(texts []*schema.TextColumn, builders []array.Builder) {
	ib.texts, ib.builders, ib.filled = texts, builders, make([]int, len(texts))
}

// fill appends the NULLs column i lacks before the image being appended,
// which it takes a value of next.
func (ib *imageBuilder) fill(i int) {
	if ib.filled == nil {
		return
	}
	if n := ib.rows - ib.filled[i]; n > 0 {
		ib.nulls(i, n)
	}
	ib.filled[i] = ib.rows + 1
}

// nulls appends n NULLs to column i.
func (ib *imageBuilder) nulls(i, n int) {
	if tc := ib.texts[i]; tc != nil {
		tc.AppendNulls(n)
	} else {
		ib.builders[i].AppendNulls(n)
	}
}

// settle appends the NULLs every column lacks, so that each holds the
// image's rows, which are taken next; the counts start over.
func (ib *imageBuilder) settle() {
	for i, f := range ib.filled {
		if n := ib.rows - f; n > 0 {
			ib.nulls(i, n)
		}
	}
	clear(ib.filled)
	ib.rows = 0
}

type eventBuilders struct {
	kind, object, statement *array.StringBuilder
	event                   *array.StringBuilder
	eventExt                array.Builder
}

// newBuffer returns a buffer without builders: its first rows are frozen
// (see frozenRows) up to freezeLimit of what its builders would cost.
func newBuffer(mem memory.Allocator, key bufKey, t *schema.Table, dir string, src sinks.Position, now int64,
	freezeLimit func(builders int64) int64) *buffer {
	fixed := bytesPerBuilder * int64(countFields(t.Arrow.Fields()))
	return &buffer{key: key, table: t, dir: dir, src: src, last: src.Offset, born: now, mem: mem,
		offsets: rowOffsets{first: src.Offset},
		alloc:   &countingAllocator{Allocator: mem}, fixed: fixed, freezeLimit: freezeLimit(fixed)}
}

// build makes the buffer's builders, when its frozen rows move to them:
// freezing becomes building (a sealed buffer stays sealed).
func (b *buffer) build() {
	b.builds++
	if b.state == freezing {
		b.state = building
	}
	t := b.table
	b.rb, b.conv = &fieldBuilders{fields: make([]array.Builder, t.Arrow.NumFields())}, schema.NewConverters(b.alloc)
	// f returns the Arrow builder of field i, made on first use.
	f := func(i int) array.Builder {
		if b.rb.fields[i] == nil {
			b.rb.fields[i] = array.NewBuilder(b.alloc, t.Arrow.Field(i).Type)
		}
		return b.rb.fields[i]
	}
	b.op, b.tbl, b.xid, b.pos, b.source = schema.NewTextColumn(), schema.NewTextColumn(), schema.NewTextColumn(),
		schema.NewTextColumn(), schema.NewTextColumn()
	b.texts = []textField{{0, b.op}, {1, b.tbl}, {3, b.xid}, {4, b.pos}, {5, b.source}}
	b.ts = f(2).(*array.TimestampBuilder)
	b.part = f(6).(*array.Int32Builder)
	b.offset = f(7).(*array.Int64Builder)
	b.ingested = f(8).(*array.TimestampBuilder)
	n := schema.NumMeta
	b.extras = make([]array.Builder, len(t.Extras))
	b.extraTexts = make([]*schema.TextColumn, len(t.Extras))
	for i, col := range t.Extras {
		if col.Kind != change.ExtraTimestamp {
			if tc := schema.NewVarColumn(t.Arrow.Field(n + i).Type); tc != nil {
				b.extraTexts[i] = tc
				b.texts = append(b.texts, textField{n + i, tc})
				continue
			}
		}
		b.extras[i] = f(n + i)
	}
	rest := n + len(t.Extras) // the first field after the extras
	switch t.Layout {
	case schema.LayoutImages:
		structs := 0
		if len(t.Columns) > 0 {
			structs = 2
		}
		for i := range 2 {
			at := n + len(t.Extras) + structs + i
			ib := &imageBuilder{absent: newNameList(at, t.Arrow.Field(at).Type), seen: make([]bool, len(t.Columns)), noStruct: structs == 0,
				names: t.ColumnNames(), siblings: t.HasSiblings()}
			if structs > 0 {
				field := n + len(t.Extras) + i
				ib.st, ib.app, ib.rep = newImageStruct(b.alloc, b.conv, t, field, t.Arrow.Field(field).Type.(*arrow.StructType))
				ib.lazyNulls(ib.st.texts, ib.st.builders)
			}
			b.images[i] = ib
			b.lists = append(b.lists, ib.absent)
		}
	case schema.LayoutFlat:
		at := n + len(t.Extras) + len(t.Columns)
		ib := &imageBuilder{absent: newNameList(at, t.Arrow.Field(at).Type), seen: make([]bool, len(t.Columns)),
			names: t.ColumnNames(), siblings: t.HasSiblings()}
		texts, builders := make([]*schema.TextColumn, len(t.Columns)), make([]array.Builder, len(t.Columns))
		for j, c := range t.Columns {
			field := n + len(t.Extras) + j
			if tc := textColumnFor(c.Type, t.Arrow.Field(field).Type); tc != nil {
				b.texts = append(b.texts, textField{field, tc})
				texts[j] = tc
				ib.app = append(ib.app, b.conv.CompileText(c.Name, c.Type, tc))
				ib.rep = append(ib.rep, schema.ReplayText(tc))
				continue
			}
			builders[j] = f(field)
			app := b.conv.Compile(c.Name, c.Type, builders[j])
			ib.app = append(ib.app, app)
			ib.rep = append(ib.rep, schema.Replay(c.Type, builders[j], app))
		}
		ib.lazyNulls(texts, builders)
		b.flat = ib
		b.lists = []*nameList{ib.absent}
	case schema.LayoutEvents:
		ext := f(rest + 3).(*array.ExtensionBuilder)
		b.events = &eventBuilders{kind: f(rest).(*array.StringBuilder), object: f(rest + 1).(*array.StringBuilder),
			statement: f(rest + 2).(*array.StringBuilder), eventExt: ext,
			event: ext.StorageBuilder().(*array.StringBuilder)}
	}
	// Any other field (none, as the layouts stand) gets a builder, so that
	// every field has its column.
	owned := make([]bool, len(b.rb.fields))
	for _, t := range b.texts {
		owned[t.field] = true
	}
	for _, l := range b.lists {
		owned[l.field] = true
	}
	for _, ib := range b.images {
		if ib != nil && ib.st != nil {
			owned[ib.st.field] = true
		}
	}
	for i, o := range owned {
		if !o {
			f(i)
		}
	}
}

var errDuplicateKey = errors.New("duplicate column in image")

// append adds one change as a row. A row that does not convert is
// returned as rowErr: it is counted, and never written. err is an
// internal failure.
//
// A buffer without builders freezes the row, once it converts (chk, of
// checks its caller owns, tells), until its frozen rows take freezeLimit
// bytes (half of what its builders would hold before any row); then they
// move to builders (thaw) and the row is appended there. A
// row that does not convert is appended too (with NULLs where values
// failed) and marked invalid, so builders stay aligned.
func (b *buffer) append(c *change.Change, at sinks.Position, size int, chk *checks) (rowErr, err error) {
	b.rows++
	b.bytes += int64(size)
	b.last = at.Offset
	if b.rb == nil {
		if int64(cap(b.frozen.data)) < b.freezeLimit {
			b.base++ // the builders hold no row
			rowErr = b.frozen.add(b.table, c, at.Offset, chk.of(b.table))
			if rowErr == nil {
				b.offsets.add(at.Offset)
			}
			return rowErr, nil
		}
		if err := b.thaw(); err != nil {
			return nil, err
		}
	}
	row := b.rows - 1 - b.base
	if rowErr = b.appendRow(c, at); rowErr != nil {
		b.invalid = append(b.invalid, row)
	} else {
		b.offsets.add(at.Offset)
	}
	return rowErr, nil
}

// rowOffsets records the offsets of a file's valid rows, in order, in the
// forms a cut can carry them (state.Cut.Runs and Bits): as runs of
// consecutive offsets while they make at most state.MaxRuns runs, and as a
// bitmap from the file's first offset while it spans at most
// state.MaxBits offsets.
type rowOffsets struct {
	first    int64
	runs     [][2]int64
	bits     []byte
	runsOver bool
	bitsOver bool
}

func (r *rowOffsets) add(offset int64) {
	switch n := len(r.runs); {
	case r.runsOver:
	case n > 0 && r.runs[n-1][1] == offset-1:
		r.runs[n-1][1] = offset
	case n == state.MaxRuns:
		r.runs, r.runsOver = nil, true
	default:
		r.runs = append(r.runs, [2]int64{offset, offset})
	}
	if r.bitsOver {
		return
	}
	i := offset - r.first
	if i < 0 || i >= state.MaxBits {
		r.bits, r.bitsOver = nil, true
		return
	}
	for int64(len(r.bits)) <= i/8 {
		r.bits = append(r.bits, 0)
	}
	r.bits[i/8] |= 1 << (i % 8)
}

// record sets the cut's form of the offsets: runs where they are few, else
// the bitmap where the file spans few offsets, else none.
func (r *rowOffsets) record(c *state.Cut) {
	c.Runs, c.Bits = nil, ""
	switch {
	case !r.runsOver:
		c.Runs = slices.Clone(r.runs)
	case !r.bitsOver:
		c.Bits = base64.RawStdEncoding.EncodeToString(r.bits)
	}
}

// thaw moves the frozen rows to the builders, which it makes if need be.
func (b *buffer) thaw() error {
	if b.rb == nil {
		b.build()
	}
	n := b.frozen.rows
	if n == 0 {
		return nil
	}
	b.reserve(n)
	err := b.frozen.each(b.table, func(c *change.Change, r *frozenRow, offset int64) error {
		at := sinks.Position{Source: b.src.Source, Partition: b.src.Partition, Offset: offset}
		if err := b.appendThawed(c, r, at); err != nil {
			return fmt.Errorf("the frozen row at offset %d: %w", offset, err)
		}
		return nil
	})
	b.base -= n
	b.frozen = frozenRows{}
	if err != nil {
		return fmt.Errorf("moving the rows of %s to builders: %w", b.dir, err)
	}
	return nil
}

// reserve makes room in the builders for n more rows: the Arrow builders
// (nil for the fields built elsewhere), the image structs, the text
// columns and the absent lists.
func (b *buffer) reserve(n int) {
	for _, f := range b.rb.Fields() {
		if f != nil {
			f.Reserve(n)
		}
	}
	for _, ib := range b.images {
		if ib != nil && ib.st != nil {
			ib.st.reserve(n)
		}
	}
	for _, t := range b.texts {
		t.col.Reserve(n)
	}
	for _, l := range b.lists {
		l.reserve(n)
	}
}

// appendRow appends c to the builders and returns why it does not convert.
func (b *buffer) appendRow(c *change.Change, at sinks.Position) error {
	b.appendMeta(c, at)
	var err error
	switch b.table.Layout {
	case schema.LayoutImages:
		err = errors.Join(b.images[0].append(b.table, c.Before), b.images[1].append(b.table, c.After))
	case schema.LayoutFlat:
		img := c.After
		if !img.Present() {
			img = c.Before
		}
		err = b.flat.append(b.table, img)
	case schema.LayoutEvents:
		err = b.appendEvent(c)
	}
	// The row is appended whatever it holds, so that the builders stay
	// aligned; the caller marks an invalid row, which is never written.
	return errors.Join(checkText(c), err)
}

// appendThawed appends a frozen row, c with the parts r, to the builders:
// it converted when it was frozen, so an error here means corrupt frozen
// rows.
func (b *buffer) appendThawed(c *change.Change, r *frozenRow, at sinks.Position) error {
	b.appendMeta(c, at)
	switch b.table.Layout {
	case schema.LayoutImages:
		return errors.Join(b.images[0].replay(b.table, r.before, r.hasBefore), b.images[1].replay(b.table, r.after, r.hasAfter))
	case schema.LayoutFlat:
		if r.hasAfter {
			return b.flat.replay(b.table, r.after, true)
		}
		return b.flat.replay(b.table, r.before, r.hasBefore)
	case schema.LayoutEvents:
		b.appendEventText(c, r.raw, r.hasRaw)
	}
	return nil
}

// appendMeta appends the columns every layout has and the extras.
func (b *buffer) appendMeta(c *change.Change, at sinks.Position) {
	if c.Kind == change.KindDML {
		b.op.AppendString(c.Op.String())
	} else {
		b.op.AppendString(kindOp(c.Kind))
	}
	b.tbl.AppendString(c.Table)
	if c.HasTS {
		b.ts.Append(arrow.Timestamp(c.TSMicros))
	} else {
		b.ts.AppendNull()
	}
	appendOptText(b.xid, c.Xid)
	appendOptText(b.pos, c.Pos)
	b.source.AppendString(at.Source)
	b.part.Append(at.Partition)
	b.offset.Append(at.Offset)
	// The record's own timestamp, not the clock's: a replay lands the
	// same value.
	if c.RecordMicros > 0 {
		b.ingested.Append(arrow.Timestamp(c.RecordMicros))
	} else {
		b.ingested.AppendNull()
	}
	b.appendExtras(c)
}

func kindOp(k change.Kind) string {
	switch k {
	case change.KindDDL:
		return "DDL"
	case change.KindSchemaChange:
		return "SCHEMA_CHANGE"
	case change.KindTransaction:
		return "TRANSACTION"
	case change.KindStreamMetadata:
		return "STREAM_METADATA"
	case change.KindObjectMetadata:
		return "OBJECT_METADATA"
	}
	return k.String()
}

func appendOptText(c *schema.TextColumn, s string) {
	if s == "" {
		c.AppendNull()
	} else {
		c.AppendString(s)
	}
}

func appendOpt(b *array.StringBuilder, s string) {
	if s == "" {
		b.AppendNull()
		return
	}
	b.Append(s)
}

func (b *buffer) appendExtras(c *change.Change) {
	// A change names its extras in the table version's order, as a rule:
	// while it does, the extra at the column's index is the column's (the
	// first of its name, the columns' names being distinct).
	inOrder := true
	for i, col := range b.table.Extras {
		var e *change.Extra
		if inOrder && i < len(c.Extras) && c.Extras[i].Name == col.Name {
			e = &c.Extras[i]
		} else {
			inOrder = false
			if k := extraOf(c, col.Name); k >= 0 {
				e = &c.Extras[k]
			}
		}
		if tc := b.extraTexts[i]; tc != nil {
			if e == nil || e.Null {
				tc.AppendNull()
			} else {
				tc.Append(c.ExtraBytes(*e))
			}
			continue
		}
		bld := b.extras[i]
		switch {
		case e == nil || e.Null:
			bld.AppendNull()
		case col.Kind == change.ExtraBinary:
			bld.(*array.BinaryBuilder).Append(c.ExtraBytes(*e))
		case col.Kind == change.ExtraTimestamp:
			bld.(*array.TimestampBuilder).Append(arrow.Timestamp(e.Micros))
		case col.Kind == change.ExtraJSON:
			if ext, ok := bld.(*array.ExtensionBuilder); ok {
				bld = ext.StorageBuilder()
			}
			bld.(*array.StringBuilder).BinaryBuilder.Append(c.ExtraBytes(*e))
		default:
			bld.(*array.StringBuilder).BinaryBuilder.Append(c.ExtraBytes(*e))
		}
	}
}

func (ib *imageBuilder) append(t *schema.Table, img change.Image) error {
	if !img.Present() {
		// Its columns are NULL: they take that when they next take a
		// value (fill) or the rows are taken (settle).
		if ib.st != nil {
			ib.st.appendNull()
		}
		if ib.absent != nil {
			ib.absent.appendNull()
		}
		ib.rows++
		return nil
	}
	if ib.st != nil {
		ib.st.appendValid()
	}
	ib.unmark()
	var first error
	// Images name their columns in the table's order, as a rule: the
	// column after the last one found is tried before the index.
	next := 0
	img.Obj.Visit(func(key []byte, v *fastjson.Value) {
		i, ok := next, next < len(t.Columns) && t.Columns[next].Name == string(key)
		if !ok {
			i, ok = t.ColumnIndex(key)
		}
		next = i + 1
		if !ok {
			if first == nil && !t.Ignored(key) {
				first = fmt.Errorf("column %q is not in table %s version %d", key, t.Name, t.Version)
			}
			return
		}
		if ib.seen[i] {
			if first == nil {
				first = fmt.Errorf("%w: %q", errDuplicateKey, key)
			}
			return
		}
		ib.mark(i)
		if t.Declared && !t.Columns[i].Nullable && v.Type() == fastjson.TypeNull && first == nil {
			// The source's schema says the column is never NULL.
			first = fmt.Errorf("column %q is NULL, which its declared type (not optional) does not allow", key)
		}
		if j, ok := t.Sibling(i); ok && schema.Overflow(t.Columns[i].Type, v) {
			// A value the typed column cannot hold lands in its text
			// sibling; the typed column is NULL.
			ib.fill(i)
			_ = ib.app[i](nil)
			ib.fill(j)
			if err := ib.app[j](v); err != nil && first == nil {
				first = err
			}
			ib.mark(j)
			return
		}
		ib.fill(i)
		if err := ib.app[i](v); err != nil && first == nil {
			first = err
		}
	})
	if ib.check {
		return first
	}
	ib.finish(t)
	return first
}

// replay appends an image from its packed values (see checks), or an absent
// image when the row has none.
func (ib *imageBuilder) replay(t *schema.Table, data []byte, present bool) error {
	if !present {
		return ib.append(t, change.Image{})
	}
	if ib.st != nil {
		ib.st.appendValid()
	}
	ib.unmark()
	for len(data) > 0 {
		i, value, rest, err := schema.PackedEntry(data)
		if err == nil && i >= len(ib.app) {
			err = schema.ErrPackedCorrupt
		}
		if err != nil {
			return err
		}
		ib.mark(i)
		ib.fill(i)
		if !value {
			_ = ib.app[i](nil)
			data = rest
			continue
		}
		if data, err = ib.rep[i](rest); err != nil {
			return err
		}
	}
	ib.finish(t)
	return nil
}

// finish ends an image: the columns it did not name are NULL (fill and
// settle append those), and those that are absent are listed.
func (ib *imageBuilder) finish(t *schema.Table) {
	if ib.siblings {
		// A sibling whose typed column was sent is NULL, not absent.
		for i, seen := range ib.seen {
			if j, ok := t.Sibling(i); ok && seen {
				ib.mark(j)
			}
		}
	}
	switch {
	case ib.absent == nil:
	case ib.found == len(ib.seen):
		ib.absent.appendNames(nil) // a whole image: none absent
	default:
		gone := ib.gone[:0]
		for i, seen := range ib.seen {
			if !seen {
				gone = append(gone, ib.names[i])
			}
		}
		ib.absent.appendNames(gone)
		ib.gone = gone
	}
	ib.rows++
}

// mark notes that the image named column i.
func (ib *imageBuilder) mark(i int) {
	if !ib.seen[i] {
		ib.seen[i] = true
		ib.found++
	}
}

// unmark starts an image: it has named no column yet.
func (ib *imageBuilder) unmark() {
	clear(ib.seen)
	ib.found = 0
}

func (b *buffer) appendEvent(c *change.Change) error {
	if c.Raw == nil {
		b.appendEventText(c, nil, false)
		return nil
	}
	b.scratch = c.Raw.MarshalTo(b.scratch[:0])
	b.appendEventText(c, b.scratch, true)
	if !utf8.Valid(b.scratch) {
		return errEventText
	}
	return nil
}

// appendEventText appends the events layout's columns of c, with raw, the
// event's JSON text, when it has one.
func (b *buffer) appendEventText(c *change.Change, raw []byte, has bool) {
	e := b.events
	e.kind.Append(c.Kind.String())
	appendOpt(e.object, c.Table)
	appendOpt(e.statement, c.Statement)
	if !has {
		e.eventExt.AppendNull()
		return
	}
	e.event.BinaryBuilder.Append(raw)
}

// checkText returns an error when a string of c that lands is not valid
// UTF-8: engines refuse to read a file that holds one.
func checkText(c *change.Change) error {
	for _, f := range [...]struct{ name, v string }{
		{"table name", c.Table}, {"transaction id", c.Xid}, {"position", c.Pos}, {"statement", c.Statement}} {
		if !utf8.ValidString(f.v) {
			return fmt.Errorf("the %s is not valid UTF-8", f.name)
		}
	}
	if textExtrasValid(c) {
		return nil
	}
	for _, e := range c.Extras {
		if (e.Kind == change.ExtraString || e.Kind == change.ExtraJSON) && !e.Null && !utf8.Valid(c.ExtraBytes(e)) {
			return fmt.Errorf("%s is not valid UTF-8", e.Name)
		}
	}
	return nil
}

// textExtrasValid reports, in one pass over the extras' buffer, that every
// string and JSON extra of c is valid UTF-8: the buffer is, and none of
// those extras starts or ends inside a character. False may also mean
// that a binary extra is not UTF-8; the extras are then checked one by
// one.
func textExtrasValid(c *change.Change) bool {
	buf := c.ExtraBuf
	if !utf8.Valid(buf) {
		return false
	}
	inside := func(at int) bool { return at < len(buf) && !utf8.RuneStart(buf[at]) }
	for _, e := range c.Extras {
		if (e.Kind == change.ExtraString || e.Kind == change.ExtraJSON) && !e.Null && (inside(e.Start) || inside(e.End)) {
			return false
		}
	}
	return true
}

// validRanges returns the [start, end) ranges of the builders' rows that
// converted cleanly.
func (b *buffer) validRanges() [][2]int {
	var out [][2]int
	start := 0
	for _, bad := range b.invalid {
		if bad > start {
			out = append(out, [2]int{start, bad})
		}
		start = bad + 1
	}
	if n := b.rows - b.base; start < n {
		out = append(out, [2]int{start, n})
	}
	return out
}

// live reports whether the builders hold rows.
func (b *buffer) live() bool { return b.rows > b.base }

// spill gives the builders' memory back and keeps their rows, compressed,
// for the file's write: the file stays open (its name, its rows and the
// rotation settings do not change) and costs the size of its rows in
// Arrow IPC with LZ4, a fraction of builders holding them, or nothing
// for a file with no rows since its last spill. A file with an encoder
// hands it the rows instead. A buffer whose write
// failed and waits for a retry (built) keeps its builders.
func (b *buffer) spill() error {
	if b.rb == nil || b.built != nil {
		return nil
	}
	if b.enc != nil && b.state != sealed {
		// The file's encoder takes the rows.
		if b.live() {
			b.toEncoder()
		}
	} else if b.live() {
		rec := b.newRecord(true) // the builders are dropped below
		defer rec.Release()
		ranges := b.validRanges()
		// A small last run is merged with the new rows: every run costs
		// its IPC framing (a few KB for a wide table), which for a table
		// with a handful of rows per spill would outweigh the rows.
		if n := len(b.spilled); n > 0 && len(b.spilled[n-1].data) < mergeSpilledBelow {
			last := b.spilled[n-1]
			prev, err := decodeSpilled(last.data, b.table.Arrow, b.mem)
			if err != nil {
				return fmt.Errorf("spilling the rows of %s: %w", b.dir, err)
			}
			merged, err := concatBatches(prev, rec, b.mem)
			prev.Release()
			if err != nil {
				return fmt.Errorf("spilling the rows of %s: %w", b.dir, err)
			}
			defer merged.Release()
			off := int(merged.NumRows() - rec.NumRows())
			ranges = append(slices.Clone(last.ranges), shiftRanges(ranges, off)...)
			b.spilled = b.spilled[:n-1]
			b.spilledBytes -= int64(len(last.data))
			rec = merged
		}
		var out bytes.Buffer
		// Buffers that LZ4 would not shrink by a tenth stay as they are:
		// a few rows gain nothing from a frame of their own.
		w := ipc.NewWriter(&out, ipc.WithSchema(rec.Schema()), ipc.WithLZ4(), ipc.WithMinSpaceSavings(0.1),
			ipc.WithAllocator(b.mem))
		if err := errors.Join(w.Write(rec), w.Close()); err != nil {
			return fmt.Errorf("spilling the rows of %s: %w", b.dir, err)
		}
		prefix, err := streamPrefix(b.table.Arrow, b.mem)
		if err != nil {
			return fmt.Errorf("spilling the rows of %s: %w", b.dir, err)
		}
		if !bytes.HasPrefix(out.Bytes(), prefix) || !bytes.HasSuffix(out.Bytes(), eos) {
			return fmt.Errorf("spilling the rows of %s: the IPC stream does not start with its schema", b.dir)
		}
		data := bytes.Clone(out.Bytes()[len(prefix) : out.Len()-len(eos)])
		b.spilled = append(b.spilled, spilled{data: data, ranges: ranges})
		b.spilledBytes += int64(len(data))
		b.invalid, b.base = b.invalid[:0], b.rows
	}
	b.unbuild()
	return nil
}

// seal marks the file being written: its encoder takes no more rows.
func (b *buffer) seal() { b.state = sealed }

// unbuild drops the builders once their rows went to the encoder or a
// spilled run: building becomes freezing again (a sealed buffer stays
// sealed).
func (b *buffer) unbuild() {
	b.dropBuilders()
	if b.state == building {
		b.state = freezing
	}
}

// dropBuilders releases the builders and forgets every reference to them.
func (b *buffer) dropBuilders() {
	for _, ib := range b.images {
		if ib != nil && ib.st != nil {
			ib.st.release()
		}
	}
	b.rb.Release()
	b.conv.Release()
	b.rb, b.conv = nil, nil
	b.op, b.tbl, b.xid, b.pos, b.source, b.ts, b.ingested, b.part, b.offset = nil, nil, nil, nil, nil, nil, nil, nil, nil
	b.extras, b.images, b.flat, b.events, b.lists, b.texts, b.extraTexts = nil, [2]*imageBuilder{}, nil, nil, nil, nil, nil
}

// parts returns the file's rows as record batches with the ranges to
// write, in order: the spilled runs, decoded, then the builders' rows
// (built). The caller releases the spilled runs' batches (the first
// len(parts)-1 when the builders hold rows).
func (b *buffer) parts() ([]sinks.Part, error) {
	if b.frozen.rows > 0 {
		if err := b.thaw(); err != nil {
			return nil, err
		}
	}
	out := make([]sinks.Part, 0, len(b.spilled)+1)
	for _, s := range b.spilled {
		rec, err := decodeSpilled(s.data, b.table.Arrow, b.mem)
		if err != nil {
			releaseParts(out)
			return nil, fmt.Errorf("reading the spilled rows of %s: %w", b.dir, err)
		}
		out = append(out, sinks.Part{Record: rec, Ranges: s.ranges})
	}
	if b.rb != nil && (b.live() || b.built != nil) {
		if b.built == nil {
			b.built = b.newRecord(true)
		}
		out = append(out, sinks.Part{Record: b.built, Ranges: b.validRanges()})
	}
	return out, nil
}

// mergeSpilledBelow is the size under which a buffer's last spilled run
// takes the next spill's rows in (one run instead of two).
const mergeSpilledBelow = 256 << 10

// decodeSpilled reads the one record batch of a spilled run.
func decodeSpilled(data []byte, sch *arrow.Schema, mem memory.Allocator) (arrow.RecordBatch, error) {
	prefix, err := streamPrefix(sch, mem)
	if err != nil {
		return nil, err
	}
	stream := io.MultiReader(bytes.NewReader(prefix), bytes.NewReader(data), bytes.NewReader(eos))
	r, err := ipc.NewReader(stream, ipc.WithAllocator(mem), ipc.WithSchema(sch))
	if err != nil {
		return nil, err
	}
	defer r.Release()
	if !r.Next() {
		if err := r.Err(); err != nil {
			return nil, fmt.Errorf("no record batch: %w", err)
		}
		return nil, errors.New("no record batch")
	}
	rec := r.RecordBatch()
	rec.Retain()
	return rec, nil
}

// concatBatches returns a's rows followed by b's.
func concatBatches(a, b arrow.RecordBatch, mem memory.Allocator) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, a.NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i := range cols {
		c, err := array.Concatenate([]arrow.Array{a.Column(i), b.Column(i)}, mem)
		if err != nil {
			return nil, err
		}
		cols[i] = c
	}
	return array.NewRecordBatch(a.Schema(), cols, a.NumRows()+b.NumRows()), nil
}

func shiftRanges(rs [][2]int, by int) [][2]int {
	out := make([][2]int, len(rs))
	for i, r := range rs {
		out[i] = [2]int{r[0] + by, r[1] + by}
	}
	return out
}

func releaseParts(ps []sinks.Part) {
	for _, p := range ps {
		p.Record.Release()
	}
}

// bytesPerBuilder is what an open buffer costs per Arrow field (a
// builder, its converter and their bookkeeping) before any row: measured
// as about 70 KB of heap for a 12-column table in the images layout (39
// fields) with one row, of which the allocator counts 6.6 KB.
const bytesPerBuilder = 1664

// footprint is the memory the buffer holds: the builders' buffers as its
// allocator counted them, the builders themselves while it has them, and
// its spilled rows.
func (b *buffer) footprint() int64 {
	n := b.spilledBytes + b.alloc.n.Load() + int64(cap(b.frozen.data))
	if b.enc != nil {
		n += b.enc.size + b.handed
	}
	if b.rb == nil {
		return n
	}
	for _, l := range b.lists {
		n += l.size()
	}
	for _, ib := range b.images {
		if ib != nil && ib.st != nil {
			n += ib.st.size()
		}
	}
	for _, t := range b.texts {
		n += t.col.Size()
	}
	return b.fixed + n
}

// newRecord returns the builders' rows as a record batch and empties the
// builders. The absent lists come from b.lists, the image structs from
// the images and the text columns from b.texts; the other columns from
// their Arrow builders. last says the builders take no more rows (the
// file is written, or gives its builders up): the record then holds the
// absent lists' and text columns' slices themselves, not copies.
func (b *buffer) newRecord(last bool) arrow.RecordBatch {
	var mem memory.Allocator = b.alloc
	if last {
		mem = nil
	}
	for _, ib := range [...]*imageBuilder{b.images[0], b.images[1], b.flat} {
		if ib != nil {
			ib.settle()
		}
	}
	fs := b.rb.Fields()
	cols := make([]arrow.Array, len(fs))
	for _, l := range b.lists {
		cols[l.field] = l.newArray(mem)
	}
	for _, ib := range b.images {
		if ib != nil && ib.st != nil {
			cols[ib.st.field] = ib.st.newArray(mem)
		}
	}
	for _, t := range b.texts {
		if last {
			cols[t.field] = t.col.MoveArray()
		} else {
			cols[t.field] = t.col.NewArray(b.alloc)
		}
	}
	for i, f := range fs {
		if cols[i] == nil {
			cols[i] = f.NewArray()
		}
	}
	rec := array.NewRecordBatch(b.table.Arrow, cols, int64(cols[0].Len()))
	for _, c := range cols {
		c.Release()
	}
	return rec
}

// countFields counts fields and their nested fields.
func countFields(fs []arrow.Field) int {
	n := 0
	for _, f := range fs {
		n++
		switch t := f.Type.(type) {
		case *arrow.StructType:
			n += countFields(t.Fields())
		case arrow.ListLikeType:
			n += countFields([]arrow.Field{t.ElemField()})
		case *arrow.MapType:
			n += countFields([]arrow.Field{t.KeyField(), t.ItemField()})
		}
	}
	return n
}

// countingAllocator counts the bytes allocated through it and not freed.
// One buffer's builders use it, under its partition's lock; the records
// they build are released there, by the file's encoder or by its writer.
// The allocations of a record handed to the encoder (hand) leave the
// count at once, whenever the encoder frees them.
type countingAllocator struct {
	memory.Allocator
	n      atomic.Int64
	mu     sync.Mutex
	handed map[*byte]bool
}

// hand takes rec's allocations out of the count and returns their size.
func (a *countingAllocator) hand(rec arrow.RecordBatch) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.handed == nil {
		a.handed = map[*byte]bool{}
	}
	size := int64(0)
	var walk func(d arrow.ArrayData)
	walk = func(d arrow.ArrayData) {
		for _, b := range d.Buffers() {
			if b == nil || len(b.Buf()) == 0 || a.handed[unsafe.SliceData(b.Buf())] {
				continue
			}
			a.handed[unsafe.SliceData(b.Buf())] = true
			size += int64(len(b.Buf()))
		}
		for _, c := range d.Children() {
			walk(c)
		}
	}
	for _, c := range rec.Columns() {
		walk(c.Data())
	}
	a.n.Add(-size)
	return size
}

func (a *countingAllocator) Allocate(size int) []byte {
	a.n.Add(int64(size))
	return a.Allocator.Allocate(size)
}

func (a *countingAllocator) Reallocate(size int, b []byte) []byte {
	a.n.Add(int64(size - len(b)))
	return a.Allocator.Reallocate(size, b)
}

func (a *countingAllocator) Free(b []byte) {
	if len(b) > 0 {
		a.mu.Lock()
		handed := a.handed[unsafe.SliceData(b)]
		delete(a.handed, unsafe.SliceData(b))
		a.mu.Unlock()
		if handed {
			a.Allocator.Free(b)
			return
		}
	}
	a.n.Add(-int64(len(b)))
	a.Allocator.Free(b)
}

// release frees the buffer's rows in every form: the file was written or
// dropped.
func (b *buffer) release() {
	b.state = released
	if b.enc != nil {
		b.enc.abort()
		b.enc = nil
	}
	if b.built != nil {
		b.built.Release()
		b.built = nil
	}
	if b.rb != nil {
		b.dropBuilders()
	}
	b.spilled, b.spilledBytes = nil, 0
	b.frozen = frozenRows{}
}
