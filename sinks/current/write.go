package current

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/cdclake/cdclake/internal/arrowmerge"
	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/parquet"
)

// gather holds, per state column, the values of every input as one array
// (of the column's merged type) ending in a NULL: a state row's value is
// then one index into it.
type gather struct {
	b     *build
	cols  []arrow.Array // built on first use
	bases [][]int64     // bases[col][in]: where input in's rows begin; -1 without the column
}

func newGather(b *build) *gather {
	return &gather{b: b, cols: make([]arrow.Array, len(b.fields)), bases: make([][]int64, len(b.fields))}
}

func (g *gather) release() {
	for _, c := range g.cols {
		if c != nil {
			c.Release()
		}
	}
}

// column returns column col's values and each input's base in them.
func (g *gather) column(col int) (arrow.Array, []int64, error) {
	if g.cols[col] != nil {
		return g.cols[col], g.bases[col], nil
	}
	b := g.b
	to := b.fields[col].Type
	bases := make([]int64, len(b.inputs))
	var parts []arrow.Array
	defer func() {
		for _, p := range parts {
			p.Release()
		}
	}()
	var n int64
	for in, cols := range b.st.cols {
		bases[in] = -1
		for i, c := range cols {
			if c != col {
				continue
			}
			a, err := arrowmerge.Array(b.inputs[in].arrays[i], to, b.opt.Mem)
			if err != nil {
				return nil, nil, fmt.Errorf("%s column %s: %w", b.inputs[in].key, b.fields[col].Name, err)
			}
			parts = append(parts, a)
			bases[in] = n
			n += int64(a.Len())
		}
	}
	parts = append(parts, array.MakeArrayOfNull(b.opt.Mem, to, 1))
	all, err := array.Concatenate(parts, b.opt.Mem)
	if err != nil {
		return nil, nil, fmt.Errorf("column %s: %w", b.fields[col].Name, err)
	}
	g.cols[col], g.bases[col] = all, bases
	return all, bases, nil
}

// schema is the state files' schema: the data columns, then the change
// that made each row last and its unknown columns.
func (b *build) schema() *arrow.Schema {
	fields := make([]arrow.Field, 0, len(b.fields)+6)
	for _, f := range b.fields {
		fields = append(fields, arrow.Field{Name: f.Name, Type: f.Type, Nullable: true})
	}
	fields = append(fields,
		arrow.Field{Name: schema.ColOp, Type: arrow.BinaryTypes.String},
		arrow.Field{Name: schema.ColTS, Type: tsType, Nullable: true},
		arrow.Field{Name: schema.ColSource, Type: arrow.BinaryTypes.String},
		arrow.Field{Name: schema.ColPartition, Type: arrow.PrimitiveTypes.Int32},
		arrow.Field{Name: schema.ColOffset, Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: schema.ColAbsent, Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true})
	keyJSON, _ := json.Marshal(b.m.Key)
	md := arrow.NewMetadata([]string{"cdclake.current.dataset", "cdclake.current.key"},
		[]string{b.opt.Dataset, string(keyJSON)})
	return arrow.NewSchema(fields, &md)
}

var tsType = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

// contentName names a state file after its bytes: a build never
// overwrites a file another build may name. A table format's state table
// (KeepReplaced) names it after the build's version too: Iceberg refuses
// to add a file under the name of one a snapshot removed, and a later
// build may write a bucket's rows as an earlier one did.
func (b *build) contentName(data []byte) string {
	h := sha256.New()
	if b.opt.KeepReplaced {
		fmt.Fprintf(h, "version %d\n", b.m.Version+1)
	}
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// writeBucket writes a bucket's rows (keys, in order) as its state file
// and returns its key, bucket-NNNN-<contentName>.parquet. A bucket
// without rows has no file ("").
func (b *build) writeBucket(g *gather, bk int, keys []string) (string, error) {
	if len(keys) == 0 {
		return "", nil
	}
	key := fmt.Sprintf("%s/bucket-%04d", b.into, bk) // named below
	mem := b.opt.Mem
	n := len(keys)
	cols := make([]arrow.Array, 0, len(b.fields)+6)
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	absent := make([][]string, n)
	for col, f := range b.fields {
		all, bases, err := g.column(col)
		if err != nil {
			return "", err
		}
		null := int64(all.Len() - 1)
		ib := array.NewInt64Builder(mem)
		ib.Reserve(n)
		for i, k := range keys {
			r := b.st.rows[k]
			at := unknown
			if col < len(r.vals) {
				at = r.vals[col]
			}
			if at.in < 0 || bases[at.in] < 0 {
				ib.UnsafeAppend(null)
				absent[i] = append(absent[i], f.Name)
				continue
			}
			ib.UnsafeAppend(bases[at.in] + int64(at.row))
		}
		idx := ib.NewArray()
		ib.Release()
		var taken arrow.Array
		if f.Type.ID() == arrow.NULL {
			taken = array.MakeArrayOfNull(mem, f.Type, n)
		} else {
			taken, err = compute.TakeArray(b.ctx, all, idx)
		}
		idx.Release()
		if err != nil {
			return "", fmt.Errorf("%s column %s: %w", key, f.Name, err)
		}
		cols = append(cols, taken)
	}
	// The change that made each row last, and its unknown columns.
	ops, srcs := array.NewStringBuilder(mem), array.NewStringBuilder(mem)
	ts := array.NewTimestampBuilder(mem, tsType)
	parts, offs := array.NewInt32Builder(mem), array.NewInt64Builder(mem)
	abs := array.NewListBuilder(mem, arrow.BinaryTypes.String)
	absVals := abs.ValueBuilder().(*array.StringBuilder)
	for i, k := range keys {
		m := b.st.rows[k].last
		ops.Append(m.op)
		if m.hasTS {
			ts.Append(arrow.Timestamp(m.ts))
		} else {
			ts.AppendNull()
		}
		srcs.Append(m.source)
		parts.Append(m.part)
		offs.Append(m.off)
		abs.Append(true)
		for _, a := range absent[i] {
			absVals.Append(a)
		}
	}
	for _, bld := range []array.Builder{ops, ts, srcs, parts, offs, abs} {
		cols = append(cols, bld.NewArray())
		bld.Release()
	}
	rec := array.NewRecordBatch(b.schema(), cols, int64(n))
	defer rec.Release()
	var buf bytes.Buffer
	if err := parquet.WriteParts(&buf, []sinks.Part{{Record: rec, Ranges: [][2]int{{0, n}}}}, b.opt.Write, mem); err != nil {
		return "", fmt.Errorf("writing %s: %w", key, err)
	}
	key = fmt.Sprintf("%s-%s.parquet", key, b.contentName(buf.Bytes()))
	b.written = append(b.written, key)
	if err := b.w.WriteObject(b.ctx, key, buf.Bytes(), "application/vnd.apache.parquet"); err != nil {
		return "", fmt.Errorf("writing %s: %w", key, err)
	}
	return key, nil
}
