package batch

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/state"
	"github.com/valyala/fastjson"
)

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
	// invalid holds rows that failed conversion; they are skipped on write.
	invalid []int
	// forced is the recorded cut the buffer repeats (Batcher.Restore).
	forced *state.Cut

	rb   *array.RecordBuilder
	conv *schema.Converters
	// alloc counts the bytes the builders hold; fixed estimates the
	// builders themselves (see footprint).
	alloc *countingAllocator
	fixed int64
	// held is the footprint the batcher's memory bound counts for it.
	held int64
	// built is the record of a buffer whose write failed, kept for a retry.
	built arrow.RecordBatch
	// metadata builders
	op, tbl, xid, pos, source *array.StringBuilder
	ts, ingested              *array.TimestampBuilder
	part                      *array.Int32Builder
	offset                    *array.Int64Builder
	extras                    []array.Builder
	// image builders: before/after structs (images layout) or top level (flat)
	images  [2]*imageBuilder
	flat    *imageBuilder
	events  *eventBuilders
	scratch []byte
}

type imageBuilder struct {
	st       *array.StructBuilder // nil in the flat layout
	noStruct bool                 // images layout of a table without columns
	app      []schema.Appender
	absent   *array.ListBuilder
	absentV  *array.StringBuilder
	seen     []bool
}

type eventBuilders struct {
	kind, object, statement *array.StringBuilder
	event                   *array.StringBuilder
	eventExt                array.Builder
}

func newBuffer(mem memory.Allocator, key bufKey, t *schema.Table, dir string, src sinks.Position, now int64) *buffer {
	alloc := &countingAllocator{Allocator: mem}
	b := &buffer{key: key, table: t, dir: dir, src: src, last: src.Offset, born: now,
		rb: array.NewRecordBuilder(alloc, t.Arrow), conv: schema.NewConverters(alloc),
		alloc: alloc, fixed: bytesPerBuilder * int64(countFields(t.Arrow.Fields()))}
	f := b.rb.Fields()
	b.op = f[0].(*array.StringBuilder)
	b.tbl = f[1].(*array.StringBuilder)
	b.ts = f[2].(*array.TimestampBuilder)
	b.xid = f[3].(*array.StringBuilder)
	b.pos = f[4].(*array.StringBuilder)
	b.source = f[5].(*array.StringBuilder)
	b.part = f[6].(*array.Int32Builder)
	b.offset = f[7].(*array.Int64Builder)
	b.ingested = f[8].(*array.TimestampBuilder)
	n := schema.NumMeta
	b.extras = f[n : n+len(t.Extras)]
	rest := f[n+len(t.Extras):]
	switch t.Layout {
	case schema.LayoutImages:
		structs := 0
		if len(t.Columns) > 0 {
			structs = 2
		}
		for i := range 2 {
			ib := &imageBuilder{absent: rest[structs+i].(*array.ListBuilder), seen: make([]bool, len(t.Columns)), noStruct: structs == 0}
			ib.absentV = ib.absent.ValueBuilder().(*array.StringBuilder)
			if structs > 0 {
				ib.st = rest[i].(*array.StructBuilder)
				for j, c := range t.Columns {
					ib.app = append(ib.app, b.conv.Compile(c.Name, c.Type, ib.st.FieldBuilder(j)))
				}
			}
			b.images[i] = ib
		}
	case schema.LayoutFlat:
		ib := &imageBuilder{absent: rest[len(t.Columns)].(*array.ListBuilder), seen: make([]bool, len(t.Columns))}
		ib.absentV = ib.absent.ValueBuilder().(*array.StringBuilder)
		for j, c := range t.Columns {
			ib.app = append(ib.app, b.conv.Compile(c.Name, c.Type, rest[j]))
		}
		b.flat = ib
	case schema.LayoutEvents:
		ext := rest[3].(*array.ExtensionBuilder)
		b.events = &eventBuilders{kind: rest[0].(*array.StringBuilder), object: rest[1].(*array.StringBuilder),
			statement: rest[2].(*array.StringBuilder), eventExt: ext,
			event: ext.StorageBuilder().(*array.StringBuilder)}
	}
	return b
}

var errDuplicateKey = errors.New("duplicate column in image")

// append adds one change as a row. On error the row is still appended (with
// NULLs where values failed) and marked invalid, so builders stay aligned.
func (b *buffer) append(c *change.Change, at sinks.Position, ingested int64, size int) error {
	row := b.rows
	b.rows++
	b.bytes += int64(size)
	b.last = at.Offset

	if c.Kind == change.KindDML {
		b.op.Append(c.Op.String())
	} else {
		b.op.Append(kindOp(c.Kind))
	}
	b.tbl.Append(c.Table)
	if c.HasTS {
		b.ts.Append(arrow.Timestamp(c.TSMicros))
	} else {
		b.ts.AppendNull()
	}
	appendOpt(b.xid, c.Xid)
	appendOpt(b.pos, c.Pos)
	b.source.Append(at.Source)
	b.part.Append(at.Partition)
	b.offset.Append(at.Offset)
	b.ingested.Append(arrow.Timestamp(ingested))
	b.appendExtras(c)

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
	// aligned; an invalid row is never written.
	err = errors.Join(checkText(c), err)
	if err != nil {
		b.invalid = append(b.invalid, row)
	}
	return err
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

func appendOpt(b *array.StringBuilder, s string) {
	if s == "" {
		b.AppendNull()
		return
	}
	b.Append(s)
}

func (b *buffer) appendExtras(c *change.Change) {
	for i, col := range b.table.Extras {
		bld := b.extras[i]
		found := false
		for _, e := range c.Extras {
			if e.Name != col.Name {
				continue
			}
			found = true
			switch {
			case e.Null:
				bld.AppendNull()
			case col.Kind == change.ExtraBinary:
				bld.(*array.BinaryBuilder).Append(c.ExtraBytes(e))
			case col.Kind == change.ExtraTimestamp:
				bld.(*array.TimestampBuilder).Append(arrow.Timestamp(e.Micros))
			case col.Kind == change.ExtraJSON:
				bld.(*array.ExtensionBuilder).StorageBuilder().(*array.StringBuilder).BinaryBuilder.Append(c.ExtraBytes(e))
			default:
				bld.(*array.StringBuilder).BinaryBuilder.Append(c.ExtraBytes(e))
			}
			break
		}
		if !found {
			bld.AppendNull()
		}
	}
}

func (ib *imageBuilder) append(t *schema.Table, img change.Image) error {
	if !img.Present() {
		if ib.st != nil {
			ib.st.AppendNull()
		} else if !ib.noStruct {
			for _, app := range ib.app {
				_ = app(nil)
			}
		}
		ib.absent.AppendNull()
		return nil
	}
	if ib.st != nil {
		ib.st.Append(true)
	}
	clear(ib.seen)
	var first error
	img.Obj.Visit(func(key []byte, v *fastjson.Value) {
		i, ok := t.ColumnIndex(key)
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
		ib.seen[i] = true
		if t.Declared && !t.Columns[i].Nullable && v.Type() == fastjson.TypeNull && first == nil {
			// The source's schema says the column is never NULL.
			first = fmt.Errorf("column %q is NULL, which its declared type (not optional) does not allow", key)
		}
		if j, ok := t.Sibling(i); ok && schema.Overflow(t.Columns[i].Type, v) {
			// A value the typed column cannot hold lands in its text
			// sibling; the typed column is NULL.
			_ = ib.app[i](nil)
			if err := ib.app[j](v); err != nil && first == nil {
				first = err
			}
			ib.seen[j] = true
			return
		}
		if err := ib.app[i](v); err != nil && first == nil {
			first = err
		}
	})
	// A sibling whose typed column was sent is NULL, not absent.
	for i, seen := range ib.seen {
		if j, ok := t.Sibling(i); ok && seen && !ib.seen[j] {
			_ = ib.app[j](nil)
			ib.seen[j] = true
		}
	}
	ib.absent.Append(true)
	for i, seen := range ib.seen {
		if !seen {
			_ = ib.app[i](nil)
			ib.absentV.Append(t.Columns[i].Name)
		}
	}
	return first
}

func (b *buffer) appendEvent(c *change.Change) error {
	e := b.events
	e.kind.Append(c.Kind.String())
	appendOpt(e.object, c.Table)
	appendOpt(e.statement, c.Statement)
	if c.Raw == nil {
		e.eventExt.AppendNull()
		return nil
	}
	b.scratch = c.Raw.MarshalTo(b.scratch[:0])
	e.event.BinaryBuilder.Append(b.scratch)
	if !utf8.Valid(b.scratch) {
		return errors.New("the event holds text that is not valid UTF-8")
	}
	return nil
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
	for _, e := range c.Extras {
		if (e.Kind == change.ExtraString || e.Kind == change.ExtraJSON) && !e.Null && !utf8.Valid(c.ExtraBytes(e)) {
			return fmt.Errorf("%s is not valid UTF-8", e.Name)
		}
	}
	return nil
}

// validRanges returns the [start, end) row ranges that converted cleanly.
func (b *buffer) validRanges() [][2]int {
	var out [][2]int
	start := 0
	for _, bad := range b.invalid {
		if bad > start {
			out = append(out, [2]int{start, bad})
		}
		start = bad + 1
	}
	if start < b.rows {
		out = append(out, [2]int{start, b.rows})
	}
	return out
}

// offsetAt returns the source offset of a row of the built record.
func (b *buffer) offsetAt(row int) int64 {
	return b.built.Column(7).(*array.Int64).Value(row)
}

// bytesPerBuilder is what an open buffer costs per Arrow field (a
// builder, its converter and their bookkeeping) before any row: measured
// as about 70 KB of heap for a 12-column table in the images layout (39
// fields) with one row, of which the allocator counts 6.6 KB.
const bytesPerBuilder = 1664

// footprint is the memory the buffer holds: the builders' buffers as its
// allocator counted them, and the builders themselves.
func (b *buffer) footprint() int64 { return b.fixed + b.alloc.n }

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
// One buffer's builders use it, under the batcher's lock, or the writer
// that releases the buffer.
type countingAllocator struct {
	memory.Allocator
	n int64
}

func (a *countingAllocator) Allocate(size int) []byte {
	a.n += int64(size)
	return a.Allocator.Allocate(size)
}

func (a *countingAllocator) Reallocate(size int, b []byte) []byte {
	a.n += int64(size - len(b))
	return a.Allocator.Reallocate(size, b)
}

func (a *countingAllocator) Free(b []byte) {
	a.n -= int64(len(b))
	a.Allocator.Free(b)
}

func (b *buffer) release() {
	if b.built != nil {
		b.built.Release()
		b.built = nil
	}
	b.rb.Release()
	b.conv.Release()
}
