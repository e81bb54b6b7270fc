// Package parquet writes Arrow record batches as Parquet files.
//
// # Scope of the own writer
//
// The own writer (writer.go, column.go, plan.go) writes exactly this, and
// hands every other file to arrow-go's pqarrow with the same settings:
//
//   - Arrow types: boolean; int8, int16, int32 (INT32, with the INT(8) and
//     INT(16) annotations for the narrow ones), int64 (INT64); date32
//     (INT32 DATE); time32 in milliseconds (INT32 TIME) and time64 (INT64
//     TIME); timestamps of every unit as INT64 microseconds (seconds and
//     milliseconds widened exactly, nanoseconds only when whole
//     microseconds); float32 and float64 (FLOAT, DOUBLE); string, binary
//     and the JSON extension type on string storage (BYTE_ARRAY, with the
//     STRING or JSON annotation); decimal128 (FIXED_LEN_BYTE_ARRAY
//     DECIMAL); and structs, lists and maps of all of them, nullable or
//     not at every level. Unsigned integers, the NULL type, large and view
//     types, dictionaries, time32 in seconds and other extension types go
//     to pqarrow.
//   - The Parquet schema is the one pqarrow.ToParquet makes of the Arrow
//     schema, and the footer stores the Arrow schema under ARROW:schema as
//     pqarrow does, so readers see the same files either way.
//   - Encodings: PLAIN values, RLE/bit-packed definition and repetition
//     levels, in data pages v1; no dictionary, no page index, no bloom
//     filter.
//   - Statistics: min, max and null count on every page and column chunk
//     (the deprecated min/max fields too where the type's order is
//     signed; a min or max longer than maxStatsSize bytes is left out, as
//     pqarrow does); no distinct count.
//   - Pages are cut at blocks of rows, and within a block where a page of
//     byte arrays reaches Options.MaxPage; row groups hold at most
//     Options.RowGroupRows rows.
//   - Its own encoders: the Thrift compact protocol of the page headers
//     and the footer (thrift.go, tw), and, for zstd pages under 4 KiB at
//     the default level, one-block zstd frames with predefined FSE tables
//     (zstdpage.go, smallpage.go). Other codecs and larger pages use
//     arrow-go's codecs (zstd without its frame checksum).
//
// # Writers
//
// The files of cdclake's layouts (flat columns of the scalar types,
// structs, lists and maps of them) are written by the package's own writer
// (writer.go): the Parquet schema is the one arrow-go's pqarrow maps the
// Arrow schema to, with the Arrow schema stored in the footer as pqarrow
// stores it, so readers see the same files; every column is plain, in data
// pages v1 with RLE/bit-packed levels and statistics on pages and chunks.
// It costs a file little more than its values: pqarrow builds a column
// writer, page writer, buffers and statistics objects for every leaf of
// every file, most of what a file of a few dozen rows costs. A schema with
// a type it does not handle (the NULL type, unsigned integers, large or
// view types, dictionaries) is written by pqarrow, with the same settings.
//
// # Settings
//
// Compression is one of Compressions (zstd, snappy, gzip, lz4, none), at
// Level (CheckLevel); level 0 is zstd's fastest level, 1, rather than its
// default 3 (less time for slightly larger files on cdclake's benchmark
// streams: bench/README.md), and gzip's own default. Row groups hold at most
// RowGroupRows rows. Timestamps are written as
// INT64 microseconds (no INT96): milliseconds are widened exactly, and a
// nanosecond timestamp with a non-zero digit below the microsecond fails
// the write. The Arrow schema is stored so Arrow readers recover
// extension types.
//
// Every column is written plain, without a dictionary: on cdclake's
// benchmark streams dictionaries made files larger under zstd and writing
// slower, and arrow-go's dictionary encoder allocates for every value it
// looks up (the figures: docs/architecture.md, "Plain values, no
// dictionaries"). And a column whose dictionary fills up
// falls back to plain pages mid-file, which arrow-go records in its footer
// in an order that changes from run to run.
package parquet

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/cdclake/cdclake/sinks"
)

// Options are the Parquet settings of one file.
type Options struct {
	Compression  string
	Level        int
	RowGroupRows int
	// MaxPage bounds a page of byte arrays, in bytes (0: DefaultMaxPage):
	// the page is cut after the row that makes it reach the bound, where
	// pages are otherwise cut only where a block of rows ends. A page's
	// size is an int32 in its header: a block of a thousand values of a
	// few megabytes each (LOB columns) must not make one page of
	// gigabytes. Only the rows decide where (the cut does not depend on
	// how they came).
	MaxPage int
	// Pqarrow writes the file with arrow-go's pqarrow instead of the
	// package's own writer (the tests compare the two).
	Pqarrow bool
}

// DefaultMaxPage is Options.MaxPage's default.
const DefaultMaxPage = 64 << 20

// CheckLevel reports whether level suits the named codec: 0 (the default)
// for any, 1-22 for zstd, 1-9 for gzip.
func CheckLevel(codec string, level int) error {
	if level == 0 {
		return nil
	}
	switch codec {
	case "zstd":
		if level >= 1 && level <= 22 {
			return nil
		}
		return fmt.Errorf("zstd levels are 1 to 22, got %d", level)
	case "gzip":
		if level >= 1 && level <= 9 {
			return nil
		}
		return fmt.Errorf("gzip levels are 1 to 9, got %d", level)
	}
	return fmt.Errorf("%s has no levels (got %d)", codec, level)
}

// Compressions lists the compression names Codec accepts, the default
// first.
var Compressions = []string{"zstd", "snappy", "gzip", "lz4", "none"}

var codecs = map[string]compress.Compression{
	"zstd":   compress.Codecs.Zstd,
	"snappy": compress.Codecs.Snappy,
	"gzip":   compress.Codecs.Gzip,
	"lz4":    compress.Codecs.Lz4Raw,
	"none":   compress.Codecs.Uncompressed,
}

// Codec maps a compression name (one of Compressions) to a codec.
func Codec(name string) (compress.Compression, error) {
	if c, ok := codecs[name]; ok {
		return c, nil
	}
	return 0, fmt.Errorf("unknown compression %q (%s)", name, strings.Join(Compressions, ", "))
}

// Write writes the given row ranges of rec to w as one Parquet file. It
// does not close w.
func Write(w io.Writer, rec arrow.RecordBatch, ranges [][2]int, opts Options, mem memory.Allocator) error {
	return WriteParts(w, []sinks.Part{{Record: rec, Ranges: ranges}}, opts, mem)
}

// WriteParts writes the row ranges of every part, in order, to w as one
// Parquet file of the first part's schema. The rows reach the writer in
// chunks of ChunkRows (see Encoder), so the file does not depend on how
// they were split. It does not close w.
func WriteParts(w io.Writer, parts []sinks.Part, opts Options, mem memory.Allocator) error {
	if len(parts) == 0 {
		return errors.New("parquet: a file needs at least one part")
	}
	enc, err := NewEncoder(w, parts[0].Record.Schema(), opts, mem)
	if err != nil {
		return err
	}
	for _, p := range parts {
		if err := enc.Write(p); err != nil {
			enc.Abort()
			return err
		}
	}
	return enc.Close()
}

// Int64Column reads the named INT64 column of a Parquet file whole; the
// pipeline uses it to learn which message offsets a written file holds.
// ArrowSchema reads a Parquet file's Arrow schema (the one its footer
// stores, or pqarrow's mapping of its Parquet schema).
func ArrowSchema(r parquet.ReaderAtSeeker, mem memory.Allocator) (*arrow.Schema, error) {
	rdr, err := file.NewParquetReader(r, file.WithReadProps(parquet.NewReaderProperties(mem)))
	if err != nil {
		return nil, err
	}
	defer rdr.Close()
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, mem)
	if err != nil {
		return nil, err
	}
	return fr.Schema()
}

func Int64Column(r parquet.ReaderAtSeeker, name string, mem memory.Allocator) ([]int64, error) {
	rdr, err := file.NewParquetReader(r, file.WithReadProps(parquet.NewReaderProperties(mem)))
	if err != nil {
		return nil, err
	}
	defer rdr.Close()
	idx := rdr.MetaData().Schema.ColumnIndexByName(name)
	if idx < 0 {
		return nil, fmt.Errorf("no column %s", name)
	}
	var out []int64
	for g := range rdr.NumRowGroups() {
		rg := rdr.RowGroup(g)
		col, err := rg.Column(idx)
		if err != nil {
			return nil, err
		}
		cr, ok := col.(*file.Int64ColumnChunkReader)
		if !ok {
			return nil, fmt.Errorf("column %s is not INT64", name)
		}
		n := rg.NumRows()
		vals := make([]int64, n)
		def := make([]int16, n)
		total := int64(0)
		for total < n && cr.HasNext() {
			_, read, err := cr.ReadBatch(n-total, vals[total:], def[total:], nil)
			if err != nil {
				return nil, err
			}
			total += int64(read)
		}
		out = append(out, vals[:total]...)
	}
	return out, nil
}
