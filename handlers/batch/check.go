package batch

import (
	"encoding/binary"
	"errors"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/schema"
)

// checks converts the images of the rows files freeze (frozenRows) into
// schema's packed values: a row whose images convert is frozen with
// their converted values, which reach the file's builders later without
// being converted again (thaw); a row that does not convert is refused
// with the error appending it to builders would give. A checker is
// compiled once for the table versions of one layout and one ColumnSet.
// The nested kinds are checked on scratch builders, one per Arrow type,
// emptied every resetChecksEvery rows. Each source partition has its own
// checks, used under its lock.
type checks struct {
	mem     memory.Allocator
	w       schema.PackWriter
	scratch map[string]array.Builder // by the Arrow type's fingerprint
	kinds   map[checkerKey]*checker
	convs   []*schema.Converters
	n       int
}

// resetChecksEvery is how many rows the scratch builders take before they
// are emptied.
const resetChecksEvery = 4096

func newChecks(mem memory.Allocator) *checks {
	return &checks{mem: mem, scratch: map[string]array.Builder{}, kinds: map[checkerKey]*checker{}}
}

// checker converts the images of the table versions of one checkerKey.
type checker struct {
	set *checks
	img *imageBuilder // writes packed values; nil in the events layout
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
		for j, c := range t.Columns {
			var scratch array.Builder
			switch c.Type.Kind {
			case schema.Struct, schema.List, schema.Map:
				scratch = cs.builder(c.Type.Arrow())
			}
			ib.app = append(ib.app, conv.CompilePacker(c.Name, j, c.Type, &cs.w, scratch))
		}
		k.img = ib
	}
	cs.kinds[key] = k
	return k
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

// image appends to d image img of a row of table version t as packed
// values, after its length (4 bytes, little endian), and returns the error
// appending it to builders would return.
func (k *checker) image(t *schema.Table, d []byte, img change.Image) ([]byte, error) {
	at := len(d)
	w := &k.set.w
	w.Buf = append(d, 0, 0, 0, 0)
	err := k.img.append(t, img)
	d, w.Buf = w.Buf, nil
	binary.LittleEndian.PutUint32(d[at:], uint32(len(d)-at-jsonLenBytes))
	return d, err
}

// counted counts a row and empties the scratch builders every
// resetChecksEvery rows.
func (cs *checks) counted() {
	if cs.n++; cs.n >= resetChecksEvery {
		cs.reset()
	}
}

var errEventText = errors.New("the event holds text that is not valid UTF-8")

// reset empties the scratch builders.
func (cs *checks) reset() {
	cs.n = 0
	for _, b := range cs.scratch {
		b.NewArray().Release()
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
}
