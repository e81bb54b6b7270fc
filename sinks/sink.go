// Package sinks is the contract between the pipeline and storage: where a
// message came from (Position), how objects are named (ObjectName), what a
// data file handed to storage is (File) and who stores it (Sink).
//
// Sinks know nothing of how data was decoded or batched: the batching stage
// imports this package, never the reverse.
//
// # Object names
//
// Every object the pipeline writes is named from the position of the first
// message it holds:
//
//	{source}-p{partition}-o{offset, 20 digits}{ext}
//
// with the source made safe as one path segment (Sanitize). Names are a
// function of the input, so a replay of the same input rewrites the same
// objects, and within a partition they sort by offset.
package sinks

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// Position identifies a message in its source: a Kafka topic, partition and
// offset, or a file (partition 0) and line number.
type Position struct {
	Source    string
	Partition int32
	Offset    int64
}

// ObjectName is the name of an object whose first message is at pos, with
// the extension ext (".parquet", ".ndjson").
func ObjectName(pos Position, ext string) string {
	return fmt.Sprintf("%s-p%d-o%020d%s", Sanitize(pos.Source), pos.Partition, pos.Offset, ext)
}

// Sanitize makes a name safe as one path segment in every object store and
// file system: path separators, characters Windows and shells treat
// specially, spaces and control characters become '_', and "", "." and ".."
// become underscores.
func Sanitize(s string) string {
	if s == "." || s == ".." || s == "" {
		return strings.Repeat("_", max(len(s), 1))
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '/', '\\', ':', '*', '?', '"', '<', '>', '|', ' ':
			return '_'
		}
		if r < 32 {
			return '_'
		}
		return r
	}, s)
}

// WriteOptions are a file's format settings, from its table's route.
type WriteOptions struct {
	// Compression is a codec name the Parquet writer accepts
	// (parquet.Compressions).
	Compression string
	// CompressionLevel is the codec's level, 0 for the default
	// (parquet.Options).
	CompressionLevel int
	// RowGroupRows bounds the rows of one row group; it must be ≥ 1.
	RowGroupRows int
}

// File is a closed batch of rows on its way to storage: rows of one table
// version, one partition directory and one source partition, in source
// order.
type File struct {
	// Key is the object key relative to the lake root:
	// {directory}/{ObjectName(First, ".parquet")}.
	Key string
	// Table and Version name the table version the rows belong to.
	Table   string
	Version int
	// Parts hold the rows, in order, all of one schema. Only the
	// [start, end) row ranges of each are written; the rows between them
	// were rejected (and dead-lettered). Where parts meet says nothing of
	// the file's layout: the same rows make the same file however they
	// are split.
	Parts []Part
	// Rows is the number of rows in the parts' ranges.
	Rows int
	// First is the position of the first message in the file; LastOffset
	// the offset of the last.
	First      Position
	LastOffset int64
	Options    WriteOptions
	// Encoder, when set, holds the file's first rows, encoded while the
	// file was open; Parts follow them. It is the written sink's own
	// (Encoding.NewEncoder).
	Encoder Encoder
	// Once makes the write create-once: when Key holds another object,
	// with other bytes, Write fails with an error wrapping ErrExists and
	// leaves it be. The same bytes (an earlier attempt whose reply was
	// lost) are a success.
	Once bool
	// Check, when set, is asked before every attempt after the first: an
	// error means the file must not be written any more (its partition
	// went to another instance during the retries), and Write returns it.
	Check func(ctx context.Context) error
	// Footer is set by a Write that stored the file, when the sink kept
	// it: the file's Parquet footer (its serialized FileMetaData), from
	// which a table format's commit takes the file's stats without
	// reading it back.
	Footer []byte
}

// Part is a run of a file's rows: the [start, end) ranges of Record.
type Part struct {
	Record arrow.RecordBatch
	Ranges [][2]int
}

// Sink stores files.
//
// Write may be called for several files at once (the batcher writes files
// beside its appends) and returns only when the file is durably stored (nil
// error) or has failed; a failed or cancelled write
// leaves no object under f.Key. It returns the number of bytes stored. The
// caller keeps ownership of the parts' records.
type Sink interface {
	Write(ctx context.Context, f *File) (int64, error)
}

// Encoding is a Sink that can encode a file while it is still open: the
// batcher hands an Encoder the file's rows as they fill, off its own
// goroutine, and the rest as the File's Parts when it writes the file. A
// file must hold the same bytes whether it was encoded while open or when
// written.
type Encoding interface {
	Sink
	// NewEncoder starts a file of schema sch with the given settings.
	NewEncoder(sch *arrow.Schema, opts WriteOptions) (Encoder, error)
}

// Encoder encodes one file's rows, handed to it in order. Not safe for
// concurrent use.
type Encoder interface {
	// Write adds the rows of p's ranges; the caller may release p's
	// record once it returns. After an error, every later call fails.
	Write(p Part) error
	// Size is the memory the encoder holds: the encoded bytes and those
	// still being encoded.
	Size() int64
	// Finish encodes parts after the rows handed over and completes the
	// file, once: writing it (Sink.Write of the File with these Parts)
	// then only stores it. Files can so be finished in parallel and
	// stored in order.
	Finish(parts []Part) error
	// Abort drops the file, unless it was written.
	Abort()
}

// ObjectWriter stores small objects whole (dead letters, state).
//
// WriteObject returns nil only when the object is durably stored; a failed
// write leaves no object under key.
type ObjectWriter interface {
	WriteObject(ctx context.Context, key string, data []byte, contentType string) error
}

// ErrExists is returned by ObjectCreator.CreateObject for a key that
// already holds an object.
var ErrExists = errors.New("object already exists")

// ObjectCreator creates small objects that must not replace another
// (fencing: two writers can never both create the same key).
//
// CreateObject stores data under key only if no object is there, and
// returns an error wrapping ErrExists if one is. The check and the write are
// one atomic step in object stores with conditional writes (S3, GCS, Azure,
// mem://, and a local folder, where the object is linked into place).
type ObjectCreator interface {
	CreateObject(ctx context.Context, key string, data []byte, contentType string) error
}
