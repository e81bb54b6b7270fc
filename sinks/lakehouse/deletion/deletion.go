// Package deletion writes and reads deletion vectors: which rows of a data
// file a table no longer holds, as Iceberg's format v3 keeps them, blobs
// of type deletion-vector-v1 in a Puffin file. It follows the Puffin and
// Iceberg v3 specifications and links no table format library, so that
// the binaries that build state tables stay small.
package deletion

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"iter"
	"maps"
	"slices"
	"strconv"

	"github.com/RoaringBitmap/roaring/v2"
)

// Vector names one deletion vector: the rows of File deleted, a blob of
// the Puffin file Puffin. Keys are the lake's (warehouse-relative).
type Vector struct {
	// File is the data file whose rows it deletes.
	File string `json:"file"`
	// Puffin is the file holding it, of PuffinSize bytes; the blob is
	// Length bytes at Offset.
	Puffin     string `json:"puffin"`
	PuffinSize int64  `json:"puffin_size"`
	Offset     int64  `json:"offset"`
	Length     int64  `json:"length"`
	// Rows is how many rows it deletes.
	Rows int64 `json:"rows"`
}

// Positions is a set of row positions: a 32-bit roaring bitmap per value
// of the positions' high 32 bits, as the deletion vector format keeps
// them.
type Positions struct {
	hi map[uint32]*roaring.Bitmap
}

// NewPositions returns an empty set of row positions.
func NewPositions() *Positions { return &Positions{hi: map[uint32]*roaring.Bitmap{}} }

// Set adds pos.
func (p *Positions) Set(pos uint64) {
	b := p.hi[uint32(pos>>32)]
	if b == nil {
		b = roaring.New()
		p.hi[uint32(pos>>32)] = b
	}
	b.Add(uint32(pos))
}

// Or adds every position of o.
func (p *Positions) Or(o *Positions) {
	for k, b := range o.hi {
		if mine := p.hi[k]; mine != nil {
			mine.Or(b)
		} else {
			p.hi[k] = b.Clone()
		}
	}
}

// Contains reports whether pos is in the set.
func (p *Positions) Contains(pos uint64) bool {
	b := p.hi[uint32(pos>>32)]
	return b != nil && b.Contains(uint32(pos))
}

// Cardinality is how many positions the set holds.
func (p *Positions) Cardinality() int64 {
	var n int64
	for _, b := range p.hi {
		n += int64(b.GetCardinality())
	}
	return n
}

// All yields the positions in ascending order.
func (p *Positions) All() iter.Seq[uint64] {
	return func(yield func(uint64) bool) {
		for _, k := range slices.Sorted(maps.Keys(p.hi)) {
			it := p.hi[k].Iterator()
			for it.HasNext() {
				if !yield(uint64(k)<<32 | uint64(it.Next())) {
					return
				}
			}
		}
	}
}

// The deletion vector blob: its length (big-endian), then this magic and
// the positions, then a CRC-32 of both (big-endian).
var dvMagic = []byte{0xD1, 0xD3, 0x39, 0x64}

// serialize writes p as a deletion-vector-v1 blob.
func (p *Positions) serialize() ([]byte, error) {
	var body bytes.Buffer
	body.Write(dvMagic)
	keys := slices.Sorted(maps.Keys(p.hi))
	var n [8]byte
	live := 0
	for _, k := range keys {
		if !p.hi[k].IsEmpty() {
			live++
		}
	}
	binary.LittleEndian.PutUint64(n[:], uint64(live))
	body.Write(n[:])
	for _, k := range keys {
		b := p.hi[k]
		if b.IsEmpty() {
			continue
		}
		binary.LittleEndian.PutUint32(n[:4], k)
		body.Write(n[:4])
		b = b.Clone()
		b.RunOptimize()
		if _, err := b.WriteTo(&body); err != nil {
			return nil, err
		}
	}
	out := make([]byte, 4, 4+body.Len()+4)
	binary.BigEndian.PutUint32(out, uint32(body.Len()))
	out = append(out, body.Bytes()...)
	return binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(body.Bytes())), nil
}

// deserialize reads a deletion-vector-v1 blob.
func deserialize(blob []byte) (*Positions, error) {
	if len(blob) < 4+len(dvMagic)+8+4 {
		return nil, errors.New("too short for a deletion vector")
	}
	n := binary.BigEndian.Uint32(blob)
	if uint64(n) != uint64(len(blob))-8 {
		return nil, fmt.Errorf("its length says %d bytes, it holds %d", n, len(blob)-8)
	}
	body := blob[4 : len(blob)-4]
	if !bytes.Equal(body[:4], dvMagic) {
		return nil, errors.New("not a deletion vector: no magic")
	}
	if crc := binary.BigEndian.Uint32(blob[len(blob)-4:]); crc != crc32.ChecksumIEEE(body) {
		return nil, errors.New("its checksum does not match")
	}
	rest := body[4:]
	count := binary.LittleEndian.Uint64(rest)
	rest = rest[8:]
	p := NewPositions()
	last := int64(-1)
	for i := uint64(0); i < count; i++ {
		if len(rest) < 4 {
			return nil, fmt.Errorf("bitmap %d of %d: cut short", i, count)
		}
		k := binary.LittleEndian.Uint32(rest)
		if int64(k) <= last {
			return nil, fmt.Errorf("bitmap %d of %d: its key %d does not ascend", i, count, k)
		}
		last = int64(k)
		b := roaring.New()
		read, err := b.ReadFrom(bytes.NewReader(rest[4:]))
		if err != nil {
			return nil, fmt.Errorf("bitmap %d of %d: %w", i, count, err)
		}
		p.hi[k] = b
		rest = rest[4+read:]
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%d bytes after its bitmaps", len(rest))
	}
	return p, nil
}

// Blob is one data file's deleted rows, to encode.
type Blob struct {
	// File is the data file's key; Location its full path, as the table
	// names it (the blob records it: readers match vectors to data files
	// by it).
	File, Location string
	Rows           *Positions
}

var puffinMagic = []byte("PFA1")

// blobMeta is a blob's entry in a Puffin file's footer.
type blobMeta struct {
	Type           string            `json:"type"`
	Fields         []int32           `json:"fields"`
	SnapshotID     int64             `json:"snapshot-id"`
	SequenceNumber int64             `json:"sequence-number"`
	Offset         int64             `json:"offset"`
	Length         int64             `json:"length"`
	Properties     map[string]string `json:"properties,omitempty"`
}

type footer struct {
	Blobs      []blobMeta        `json:"blobs"`
	Properties map[string]string `json:"properties,omitempty"`
}

// Encode writes blobs as one Puffin file, in order, and returns its
// bytes and a Vector per blob (Puffin to be set by the caller, who names
// the file).
func Encode(blobs []Blob) ([]byte, []Vector, error) {
	var buf bytes.Buffer
	buf.Write(puffinMagic)
	f := footer{Blobs: []blobMeta{}, Properties: map[string]string{"created-by": "cdclake"}}
	out := make([]Vector, 0, len(blobs))
	for _, b := range blobs {
		data, err := b.Rows.serialize()
		if err != nil {
			return nil, nil, fmt.Errorf("the deletion vector of %s: %w", b.File, err)
		}
		n := b.Rows.Cardinality()
		v := Vector{File: b.File, Offset: int64(buf.Len()), Length: int64(len(data)), Rows: n}
		buf.Write(data)
		// Readers of a deletion vector blob find its data file and count
		// in these properties; snapshot and sequence are the manifest's.
		f.Blobs = append(f.Blobs, blobMeta{Type: "deletion-vector-v1", Fields: []int32{}, SnapshotID: -1, SequenceNumber: -1,
			Offset: v.Offset, Length: v.Length,
			Properties: map[string]string{"referenced-data-file": b.Location, "cardinality": strconv.FormatInt(n, 10)}})
		out = append(out, v)
	}
	payload, err := json.Marshal(f)
	if err != nil {
		return nil, nil, err
	}
	buf.Write(puffinMagic)
	buf.Write(payload)
	buf.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(payload))))
	buf.Write([]byte{0, 0, 0, 0}) // flags: the payload is not compressed
	buf.Write(puffinMagic)
	for i := range out {
		out[i].PuffinSize = int64(buf.Len())
	}
	return buf.Bytes(), out, nil
}

// Decode reads v's rows from its Puffin file's bytes.
func Decode(file []byte, v Vector) (*Positions, error) {
	if v.Offset < 0 || v.Length < 0 || v.Offset > int64(len(file)) || v.Length > int64(len(file))-v.Offset {
		return nil, fmt.Errorf("%s: the deletion vector of %s at %d+%d is past its %d bytes", v.Puffin, v.File, v.Offset, v.Length, len(file))
	}
	rows, err := deserialize(file[v.Offset : v.Offset+v.Length])
	if err != nil {
		return nil, fmt.Errorf("%s: the deletion vector of %s: %w", v.Puffin, v.File, err)
	}
	if n := rows.Cardinality(); n != v.Rows {
		return nil, fmt.Errorf("%s: the deletion vector of %s holds %d rows, not %d", v.Puffin, v.File, n, v.Rows)
	}
	return rows, nil
}
