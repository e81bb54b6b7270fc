package batch

import (
	"errors"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/schema"
)

// checks converts the rows a file logs (rowLog) to find those that do not
// convert, as appending them to the file's builders would, but into
// scratch builders shared by every table: one per Arrow type (a text
// column for the types files gather in text columns, as their image
// structs do), emptied every resetChecksEvery rows. A checker is compiled once for the table
// versions of one layout and one ColumnSet. Each source partition has its
// own checks, used under its lock.
type checks struct {
	mem     memory.Allocator
	scratch map[string]array.Builder // by the Arrow type's fingerprint
	texts   map[string]*schema.TextColumn
	kinds   map[checkerKey]*checker
	convs   []*schema.Converters
	n       int
}

// resetChecksEvery is how many rows the scratch builders take before they
// are emptied.
const resetChecksEvery = 4096

func newChecks(mem memory.Allocator) *checks {
	return &checks{mem: mem, scratch: map[string]array.Builder{}, texts: map[string]*schema.TextColumn{},
		kinds: map[checkerKey]*checker{}}
}

// checker checks the rows of the table versions of one checkerKey.
type checker struct {
	set *checks
	img *imageBuilder // appends to scratch builders; nil in the events layout
}

type checkerKey struct {
	layout schema.Layout
	cols   *schema.ColumnSet
}

// of returns the checker of table version t.
func (cs *checks) of(t *schema.Table) *checker {
	key := checkerKey{t.Layout, t.ColumnSet()}
	if k := cs.kinds[key]; k != nil {
		return k
	}
	k := &checker{set: cs}
	if t.Layout != schema.LayoutEvents {
		conv := schema.NewConverters(cs.mem)
		cs.convs = append(cs.convs, conv)
		ib := &imageBuilder{seen: make([]bool, len(t.Columns)), noStruct: true, check: true}
		for _, c := range t.Columns {
			if tc := cs.text(c.Type); tc != nil {
				ib.app = append(ib.app, conv.CompileText(c.Name, c.Type, tc))
				continue
			}
			ib.app = append(ib.app, conv.Compile(c.Name, c.Type, cs.builder(c.Type.Arrow())))
		}
		k.img = ib
	}
	cs.kinds[key] = k
	return k
}

// text returns the scratch text column of type t, or nil when t does not
// land through one.
func (cs *checks) text(t schema.Type) *schema.TextColumn {
	if !schema.IsText(t) {
		return nil
	}
	fp := t.Arrow().Fingerprint()
	if tc, ok := cs.texts[fp]; ok {
		return tc
	}
	tc := schema.NewVarColumn(t.Arrow())
	if tc != nil {
		cs.texts[fp] = tc
	}
	return tc
}

// builder returns the scratch builder of type dt.
func (cs *checks) builder(dt arrow.DataType) array.Builder {
	fp := dt.Fingerprint()
	if b, ok := cs.scratch[fp]; ok {
		return b
	}
	b := array.NewBuilder(cs.mem, dt)
	cs.scratch[fp] = b
	return b
}

// check returns the error appending c to a file of table version t would
// return (buffer.appendRow), without appending it. raw is c.Raw's JSON
// text.
func (k *checker) check(t *schema.Table, c *change.Change, raw []byte) error {
	cs := k.set
	if cs.n++; cs.n >= resetChecksEvery {
		cs.reset()
	}
	var err error
	switch t.Layout {
	case schema.LayoutImages:
		err = errors.Join(k.img.append(t, c.Before), k.img.append(t, c.After))
	case schema.LayoutFlat:
		img := c.After
		if !img.Present() {
			img = c.Before
		}
		err = k.img.append(t, img)
	case schema.LayoutEvents:
		if c.Raw != nil && !utf8.Valid(raw) {
			err = errEventText
		}
	}
	return errors.Join(checkText(c), err)
}

var errEventText = errors.New("the event holds text that is not valid UTF-8")

// reset empties the scratch builders.
func (cs *checks) reset() {
	cs.n = 0
	for _, b := range cs.scratch {
		b.NewArray().Release()
	}
	for _, tc := range cs.texts {
		tc.Reset()
	}
}

// release frees the scratch builders.
func (cs *checks) release() {
	for _, b := range cs.scratch {
		b.Release()
	}
	for _, c := range cs.convs {
		c.Release()
	}
	cs.scratch, cs.convs, cs.kinds = map[string]array.Builder{}, nil, map[checkerKey]*checker{}
	cs.texts = map[string]*schema.TextColumn{}
}
