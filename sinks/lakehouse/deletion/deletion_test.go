package deletion_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"slices"
	"strconv"
	"testing"

	"github.com/apache/iceberg-go/puffin"
	"github.com/apache/iceberg-go/table/dv"
	"github.com/cdclake/cdclake/sinks/lakehouse/deletion"
)

func positions(rows ...uint64) *deletion.Positions {
	p := deletion.NewPositions()
	for _, r := range rows {
		p.Set(r)
	}
	return p
}

// TestRoundTrip encodes the deletion vectors of several files into one
// Puffin file and reads each back: the same rows, and blobs that name
// their data file's location and cardinality as the spec says. iceberg-go's
// Puffin and deletion vector readers read them too, and this package reads
// the blobs iceberg-go writes.
func TestRoundTrip(t *testing.T) {
	blobs := []deletion.Blob{
		{File: "t/a.parquet", Location: "s3://lake/t/a.parquet", Rows: positions(0, 3, 65535, 65536, 1<<20)},
		{File: "t/b.parquet", Location: "s3://lake/t/b.parquet", Rows: positions(7)},
		{File: "t/c.parquet", Location: "s3://lake/t/c.parquet", Rows: positions(1<<33, 1<<33+1)}, // past 32 bits
	}
	data, vecs, err := deletion.Encode(blobs)
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != len(blobs) {
		t.Fatalf("%d vectors for %d blobs", len(vecs), len(blobs))
	}
	r, err := puffin.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range blobs {
		v := vecs[i]
		if v.File != b.File || v.Rows != b.Rows.Cardinality() || v.PuffinSize != int64(len(data)) {
			t.Errorf("vector %d: %+v", i, v)
		}
		got, err := deletion.Decode(data, v)
		if err != nil {
			t.Fatal(err)
		}
		want := slices.Collect(b.Rows.All())
		if !slices.Equal(slices.Collect(got.All()), want) {
			t.Errorf("%s: rows %v, want %v", b.File, slices.Collect(got.All()), want)
		}
		// Iceberg's own reader agrees.
		meta := r.Blobs()[i]
		if meta.Type != puffin.BlobTypeDeletionVector || meta.Offset != v.Offset || meta.Length != v.Length ||
			meta.Properties["referenced-data-file"] != b.Location || meta.Properties["cardinality"] != strconv.Itoa(len(want)) {
			t.Errorf("blob %d: %+v", i, meta)
		}
		blob, err := r.ReadBlobByMetadata(meta)
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := dv.DeserializeDV(blob, int64(len(want)))
		if err != nil {
			t.Fatalf("%s: iceberg-go does not read it: %v", b.File, err)
		}
		if !slices.Equal(slices.Collect(theirs.Positions()), want) {
			t.Errorf("%s: iceberg-go reads rows %v, want %v", b.File, slices.Collect(theirs.Positions()), want)
		}
		// And this reader reads what Iceberg's writer writes.
		ref := dv.NewRoaringPositionBitmap()
		for _, p := range want {
			ref.Set(p)
		}
		data, err := dv.SerializeDV(ref)
		if err != nil {
			t.Fatal(err)
		}
		ours, err := deletion.Decode(data, deletion.Vector{File: b.File, Length: int64(len(data)), Rows: int64(len(want))})
		if err != nil {
			t.Fatalf("%s: iceberg-go's blob does not decode: %v", b.File, err)
		}
		if !slices.Equal(slices.Collect(ours.All()), want) {
			t.Errorf("%s: iceberg-go's blob reads %v", b.File, slices.Collect(ours.All()))
		}
	}
}

// TestDecodeRejects checks that a vector past its file, or whose rows are
// not its count, is an error.
func TestDecodeRejects(t *testing.T) {
	data, vecs, err := deletion.Encode([]deletion.Blob{{File: "a", Location: "file:///a", Rows: positions(1, 2)}})
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]deletion.Vector{
		"past the end": {File: "a", Offset: vecs[0].Offset, Length: int64(len(data)), Rows: 2},
		"wrong count":  {File: "a", Offset: vecs[0].Offset, Length: vecs[0].Length, Rows: 3},
		"negative":     {File: "a", Offset: -1, Length: 4, Rows: 2},
		"overflowing":  {File: "a", Offset: 1, Length: 1<<63 - 1, Rows: 2},
	} {
		if _, err := deletion.Decode(data, v); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// FuzzDecode feeds Decode arbitrary files and vectors: an error or rows,
// never a panic.
func FuzzDecode(f *testing.F) {
	data, vecs, err := deletion.Encode([]deletion.Blob{{File: "a", Location: "file:///a", Rows: positions(1, 2, 1<<17)}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data, vecs[0].Offset, vecs[0].Length, vecs[0].Rows)
	f.Add([]byte{}, int64(0), int64(0), int64(0))
	f.Fuzz(func(t *testing.T, data []byte, off, length, rows int64) {
		_, _ = deletion.Decode(data, deletion.Vector{File: "a", Offset: off, Length: length, Rows: rows})
	})
}

// FuzzPositions feeds the reader arbitrary bitmaps in a well-formed
// envelope (length, magic, checksum), so that the bitmaps themselves are
// read: an error or rows, never a panic.
func FuzzPositions(f *testing.F) {
	data, vecs, err := deletion.Encode([]deletion.Blob{{File: "a", Location: "file:///a", Rows: positions(1, 2, 1<<17, 1<<40)}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data[vecs[0].Offset+8 : vecs[0].Offset+vecs[0].Length-4]) // between magic and checksum
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, bitmaps []byte) {
		body := append([]byte{0xD1, 0xD3, 0x39, 0x64}, bitmaps...)
		blob := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
		blob = append(blob, body...)
		blob = binary.BigEndian.AppendUint32(blob, crc32.ChecksumIEEE(body))
		for _, rows := range []int64{0, 4} {
			_, _ = deletion.Decode(blob, deletion.Vector{File: "a", Length: int64(len(blob)), Rows: rows})
		}
	})
}
