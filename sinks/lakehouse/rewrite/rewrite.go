// Package rewrite writes the rows of several Parquet files, in order, as
// one: the compaction the lakehouse table formats share. Which files go
// together (Bins) and what the new file is called (Name) are functions of
// the files alone, so that compacting the same files again, after a
// commit that failed, writes the same file.
package rewrite

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/cdclake/cdclake/internal/arrowmerge"
	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/parquet"
)

// ErrNoMerge is returned for files whose schemas do not merge (a column
// whose type changed between them): they are left as they are.
var ErrNoMerge = arrowmerge.ErrNoMerge

// Input is a Parquet file to read: its name, for errors, and its bytes.
type Input struct {
	Name string
	R    pq.ReaderAtSeeker
}

// Options are the written file's Parquet settings (the route's; no
// compression named: zstd; no row group size: 128 Ki rows, the routes'
// defaults).
type Options struct {
	Compression         string
	Level, RowGroupRows int
}

// Written is what Files wrote.
type Written struct {
	Rows   int64
	Bytes  int64
	Schema *arrow.Schema // the merged schema of the inputs, without field ids
}

// Files writes the rows of in, in order, to w as one Parquet file under
// the schema that merges theirs (a column a file lacks is NULL in its
// rows). Every input is read whole into memory first.
func Files(ctx context.Context, w io.Writer, in []Input, opt Options, mem memory.Allocator) (Written, error) {
	if len(in) == 0 {
		return Written{}, fmt.Errorf("rewrite: no files")
	}
	var tables []arrow.Table
	defer func() {
		for _, t := range tables {
			t.Release()
		}
	}()
	for _, f := range in {
		t, err := readTable(ctx, f, mem)
		if err != nil {
			return Written{}, err
		}
		tables = append(tables, t)
	}
	target := tables[0].Schema()
	for i, t := range tables[1:] {
		var ok bool
		if target, ok = arrowmerge.Schemas(target, t.Schema()); !ok {
			return Written{}, fmt.Errorf("%w: %s and %s", ErrNoMerge, in[0].Name, in[i+1].Name)
		}
	}
	target = arrowmerge.WithoutFieldIDs(target)
	var parts []sinks.Part
	defer func() {
		for _, p := range parts {
			p.Record.Release()
		}
	}()
	var rows int64
	for _, t := range tables {
		tr := array.NewTableReader(t, 1<<16)
		for tr.Next() {
			rec, err := arrowmerge.Record(tr.RecordBatch(), target, mem)
			if err != nil {
				tr.Release()
				return Written{}, err
			}
			parts = append(parts, sinks.Part{Record: rec, Ranges: [][2]int{{0, int(rec.NumRows())}}})
			rows += rec.NumRows()
		}
		err := tr.Err()
		tr.Release()
		if err != nil {
			return Written{}, err
		}
	}
	cw := &countingWriter{w: w}
	popt := parquet.Options{Compression: cmp.Or(opt.Compression, "zstd"), Level: opt.Level, RowGroupRows: cmp.Or(opt.RowGroupRows, 128<<10)}
	if err := parquet.WriteParts(cw, parts, popt, mem); err != nil {
		return Written{}, err
	}
	return Written{Rows: rows, Bytes: cw.n, Schema: target}, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// readTable reads a Parquet file whole, with the Arrow schema it stores.
func readTable(ctx context.Context, f Input, mem memory.Allocator) (arrow.Table, error) {
	pr, err := file.NewParquetReader(f.R)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", f.Name, err)
	}
	defer pr.Close()
	fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{BatchSize: 1 << 16}, mem)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", f.Name, err)
	}
	t, err := fr.ReadTable(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", f.Name, err)
	}
	return t, nil
}

// Bins cuts files, in their order, into runs of about target bytes: a run
// ends with the file that brings it to target.
func Bins[F any](files []F, size func(F) int64, target int64) [][]F {
	var out [][]F
	var cur []F
	var sum int64
	for _, f := range files {
		cur = append(cur, f)
		sum += size(f)
		if sum >= target {
			out = append(out, cur)
			cur, sum = nil, 0
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// Name is the base name of the file that replaces the files of keys (in
// their order): compacted-<hash of the keys>.parquet.
func Name(keys []string) string {
	h := sha256.New()
	for _, k := range keys {
		h.Write([]byte(k))
		h.Write([]byte{'\n'})
	}
	return "compacted-" + hex.EncodeToString(h.Sum(nil))[:20] + ".parquet"
}
