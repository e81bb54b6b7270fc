package iceappend

import (
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/hamba/avro/v2"
)

// maxBlock bounds an Avro block inflated, and decoding allocates no
// array or map larger than maxAlloc bytes: manifests and manifest lists
// come from the store, and a corrupt one must fail, not exhaust memory.
const (
	maxBlock = 256 << 20
	maxAlloc = 64 << 20
)

// decoding decodes the Avro read here.
var decoding = avro.Config{MaxSliceAllocSize: maxAlloc}.Freeze()

// ocfMagic starts an Avro object container file.
var ocfMagic = []byte{'O', 'b', 'j', 1}

// writeOCF returns an Avro object container file of the records (each
// encoded by sch, whose JSON text is text: the header keeps the field ids
// a parsed schema's canonical form drops) in one block, uncompressed, with meta in its header
// beside the schema. Its sync marker is a hash of its content, so the
// same records and metadata make the same bytes.
func writeOCF(sch avro.Schema, text string, meta map[string]string, records []any) ([]byte, error) {
	var body bytes.Buffer
	enc := avro.NewEncoderForSchema(sch, &body)
	for _, r := range records {
		if err := enc.Encode(r); err != nil {
			return nil, err
		}
	}
	meta["avro.schema"] = text
	meta["avro.codec"] = "null"
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var head bytes.Buffer
	head.Write(ocfMagic)
	putLong(&head, int64(len(keys)))
	for _, k := range keys {
		putBytes(&head, []byte(k))
		putBytes(&head, []byte(meta[k]))
	}
	putLong(&head, 0)
	sum := sha256.New()
	sum.Write(head.Bytes())
	sum.Write(body.Bytes())
	sync := sum.Sum(nil)[:16]
	out := bytes.NewBuffer(make([]byte, 0, head.Len()+body.Len()+64))
	out.Write(head.Bytes())
	out.Write(sync)
	putLong(out, int64(len(records)))
	putLong(out, int64(body.Len()))
	out.Write(body.Bytes())
	out.Write(sync)
	return out.Bytes(), nil
}

func putLong(w *bytes.Buffer, v int64) {
	var b [binary.MaxVarintLen64]byte
	w.Write(b[:binary.PutVarint(b[:], v)])
}

func putBytes(w *bytes.Buffer, p []byte) {
	putLong(w, int64(len(p)))
	w.Write(p)
}

// ocfFile is a read Avro object container file: its header's metadata and
// the bytes of its records, blocks decompressed and joined.
type ocfFile struct {
	meta    map[string]string
	schema  avro.Schema
	count   int64
	records []byte
}

// readOCF reads an Avro object container file, null- or
// deflate-compressed (what Iceberg's writers use by default).
func readOCF(data []byte) (*ocfFile, error) {
	r := bytes.NewReader(data)
	magic := make([]byte, 4)
	if _, err := io.ReadFull(r, magic); err != nil || !bytes.Equal(magic, ocfMagic) {
		return nil, errors.New("not an Avro object container file")
	}
	f := &ocfFile{meta: map[string]string{}}
	for {
		n, err := binary.ReadVarint(r)
		if err != nil {
			return nil, fmt.Errorf("avro header: %w", err)
		}
		if n == 0 {
			break
		}
		if n < 0 { // a block count given with its size
			n = -n
			if _, err := binary.ReadVarint(r); err != nil {
				return nil, fmt.Errorf("avro header: %w", err)
			}
		}
		for range n {
			k, err := readBytes(r)
			if err != nil {
				return nil, err
			}
			v, err := readBytes(r)
			if err != nil {
				return nil, err
			}
			f.meta[string(k)] = string(v)
		}
	}
	sync := make([]byte, 16)
	if _, err := io.ReadFull(r, sync); err != nil {
		return nil, fmt.Errorf("avro header: %w", err)
	}
	sch, err := parseSchema(f.meta["avro.schema"])
	if err != nil {
		return nil, fmt.Errorf("avro schema: %w", err)
	}
	f.schema = sch
	codec := f.meta["avro.codec"]
	if codec != "" && codec != "null" && codec != "deflate" {
		return nil, unsupported("the avro codec %q", codec)
	}
	var records bytes.Buffer
	for r.Len() > 0 {
		count, err := binary.ReadVarint(r)
		if err != nil {
			return nil, fmt.Errorf("avro block: %w", err)
		}
		block, err := readBytes(r)
		if err != nil {
			return nil, err
		}
		if codec == "deflate" {
			// A block inflates to no more than maxBlock.
			z := io.LimitReader(flate.NewReader(bytes.NewReader(block)), maxBlock+1)
			if block, err = io.ReadAll(z); err != nil {
				return nil, fmt.Errorf("avro block: %w", err)
			}
			if len(block) > maxBlock {
				return nil, fmt.Errorf("avro block: more than %d bytes inflated", maxBlock)
			}
		}
		records.Write(block)
		f.count += count
		end := make([]byte, 16)
		if _, err := io.ReadFull(r, end); err != nil || !bytes.Equal(end, sync) {
			return nil, errors.New("avro block: a wrong sync marker")
		}
	}
	f.records = records.Bytes()
	return f, nil
}

func readBytes(r *bytes.Reader) ([]byte, error) {
	n, err := binary.ReadVarint(r)
	if err != nil || n < 0 || n > int64(r.Len()) {
		return nil, errors.New("avro: a truncated value")
	}
	b := make([]byte, n)
	_, err = io.ReadFull(r, b)
	return b, err
}

// decodeAll decodes the file's records, each a new element.
func decodeAll[T any](f *ocfFile) ([]T, error) {
	// Every record of the schemas read here takes a byte or more.
	if f.count < 0 || f.count > int64(len(f.records)) {
		return nil, fmt.Errorf("avro: %d records in %d bytes", f.count, len(f.records))
	}
	dec := decoding.NewDecoder(f.schema, bytes.NewReader(f.records))
	out := make([]T, 0, f.count)
	for range f.count {
		var v T
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// schemas are the Avro schemas parsed, by JSON text: a table's manifest
// lists and manifests share theirs.
var schemas sync.Map // string -> avro.Schema

// parseSchema parses an Avro schema once per text, each with names of its
// own (two tables' manifests name different partition records alike).
func parseSchema(text string) (avro.Schema, error) {
	if s, ok := schemas.Load(text); ok {
		return s.(avro.Schema), nil
	}
	s, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
	if err != nil {
		return nil, err
	}
	schemas.Store(text, s)
	return s, nil
}
