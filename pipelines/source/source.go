// Package source defines where the pipeline's messages come from: a Source
// is a watermill Subscriber whose messages each carry a Block, a run of
// consecutive records of one source partition.
//
// # Blocks
//
// The router costs about as much per message as decoding a whole event, so
// records travel in blocks: one watermill message per block, the Block
// itself riding in the message's context (NewMessage, BlockOf) so that its
// records are never copied or re-encoded. A record's bytes belong to the
// block until the message is acked or nacked.
//
// # Concurrency
//
// A source may have blocks of different partitions in flight at once, but
// never two blocks of the same partition: it delivers a partition's next
// block only after the previous one was acked. The pipeline relies on this
// for per-partition order (and enforces it with a per-partition lock). A
// nacked block ends the source with an error (Err).
//
// Implementations: Files (NDJSON files and standard input) and Memory
// (blocks given in advance, for tests and embedding).
package source

import (
	"context"
	"errors"
	"strconv"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/cdclake/cdclake/sinks"
)

// Source is where blocks come from; see the package documentation for what
// it may deliver concurrently.
type Source interface {
	message.Subscriber
	// Backlog returns the bytes or messages left to read, -1 if unknown.
	Backlog() int64
	// Err returns the error that stopped the source early, if any.
	Err() error
	// Drained is closed when a bounded source has been read to the end and
	// every block acked, or reading failed (see Err); it is never closed
	// for an unbounded one.
	Drained() <-chan struct{}
}

// Handover is implemented by sources whose partitions can move to another
// consumer and that record progress outside the lake (Kafka consumer
// groups). The pipeline binds its hooks before Subscribe and calls Finish
// once after its last flush.
type Handover interface {
	Bind(Hooks)
	// Finish records the final durable positions and releases the
	// source's partitions. Close must have been called.
	Finish(ctx context.Context) error
}

// Hooks are what a Handover source needs from the pipeline. They are safe
// for concurrent use.
type Hooks struct {
	// Durable returns the offset below which every message of a partition
	// is durably landed or dead-lettered, false when none was seen.
	Durable func(source string, partition int32) (int64, bool)
	// Flush writes the partition's open files. The source calls it for a
	// partition it gives up, once no block of it is in flight.
	Flush func(ctx context.Context, source string, partition int32) error
	// Drop forgets the partition's open files unwritten, for a partition
	// taken away before it could be flushed.
	Drop func(source string, partition int32)
	// Claim takes a newly assigned partition over: it reads the
	// partition's state in the lake, fences out its previous owner and
	// prepares the replay. It returns the offset to resume from, false when
	// the lake has no state of the partition (then the source's own
	// position stands). The source calls it before reading the partition.
	// incarnation identifies the partition's log (a Kafka topic's ID), ""
	// when unknown; a log other than the one the lake's state describes
	// is an error wrapping ErrRecreated.
	Claim func(ctx context.Context, source string, partition int32, incarnation string) (int64, bool, error)
	// Start records where a partition the lake has no state of starts
	// (resolved by the source: the group's offset, or the log's first or
	// end offset): a claim after a crash before its first file resumes
	// there. The source calls it after Claim reported no state.
	Start func(ctx context.Context, source string, partition int32, offset int64) error
	// Gap records that the partition's messages from offset from up to to
	// (excluded) will never land: they were deleted before they could.
	// The source calls it before it reads on from to.
	Gap func(ctx context.Context, source string, partition int32, from, to int64) error
}

// Record is one message of a source partition.
type Record struct {
	// Offset is the record's position in its partition: a Kafka offset or
	// a line number. Offsets increase within a block but need not be
	// consecutive.
	Offset int64
	// Value is the message value; empty for a tombstone.
	Value []byte
	// Key is the message key, nil when the source has none.
	Key []byte
	// Headers are the message headers (Kafka), in order.
	Headers []Header
	// TimeMicros is the record's own timestamp (Kafka's record timestamp),
	// in microseconds since the epoch; 0 when the source has none.
	TimeMicros int64
}

// Header is a message header.
type Header struct {
	Key   string
	Value []byte
}

// Block is a run of records of one source partition, in offset order.
type Block struct {
	Source    string
	Partition int32
	Records   []Record
	// Topic is the Kafka topic of the records, empty for sources without
	// topics (files).
	Topic string
	// buf is the buffer the records are in, when the source reuses it
	// once the block is acked (files).
	buf []byte
	// span is where the block's lines are in a mapped file (from its first
	// line's start to its last line's end).
	span [2]int
}

// Position returns the position of the block's i-th record.
func (b *Block) Position(i int) sinks.Position {
	return sinks.Position{Source: b.Source, Partition: b.Partition, Offset: b.Records[i].Offset}
}

// Bytes returns the size of the block's values.
func (b *Block) Bytes() int64 {
	var n int64
	for i := range b.Records {
		n += int64(len(b.Records[i].Value))
	}
	return n
}

// Metadata keys set on every block message, for logs and middleware that
// do not read the block itself.
const (
	MetaSource    = "cdclake_source"
	MetaPartition = "cdclake_partition"
	MetaOffset    = "cdclake_offset" // offset of the first record
	MetaRecords   = "cdclake_records"
)

type blockKey struct{}

// NewMessage returns the watermill message that carries b, with ctx (the
// subscription's) as its context.
func NewMessage(ctx context.Context, b *Block) *message.Message {
	msg := message.NewMessage(watermill.NewShortUUID(), nil)
	msg.Metadata.Set(MetaSource, b.Source)
	msg.Metadata.Set(MetaPartition, strconv.FormatInt(int64(b.Partition), 10))
	if len(b.Records) > 0 {
		msg.Metadata.Set(MetaOffset, strconv.FormatInt(b.Records[0].Offset, 10))
	}
	msg.Metadata.Set(MetaRecords, strconv.Itoa(len(b.Records)))
	msg.SetContext(context.WithValue(ctx, blockKey{}, b))
	return msg
}

// ErrNoBlock is returned by BlockOf for a message no source made.
var ErrNoBlock = errors.New("message carries no block")

// ErrRecreated is wrapped by a claim's error when the partition's log is
// not the one the lake's state describes (a topic deleted and created
// again): the source stops rather than land it under the old log's names.
var ErrRecreated = errors.New("the source was deleted and created again")

// BlockOf returns the block msg carries.
func BlockOf(msg *message.Message) (*Block, error) {
	if b, ok := msg.Context().Value(blockKey{}).(*Block); ok {
		return b, nil
	}
	return nil, ErrNoBlock
}
