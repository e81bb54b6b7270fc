package unwrap

import (
	"bytes"
	"hash/maphash"
)

// schemaIndex finds cached Connect schemas by their text. A lookup hashes
// the text's length and its last tailLen bytes, not the whole text (a
// Debezium schema is a few kilobytes, and hashing it whole cost a visible
// share of a run), and compares the text whole with the schemas of that hash. The
// tail of a Debezium schema names the table's envelope
// ("name":"server.db.table.Envelope"), so schemas of different tables
// rarely share it; those that do are told apart by the comparison.
type schemaIndex struct {
	seed maphash.Seed
	m    map[uint64][]*cachedSchema
	n    int
}

const tailLen = 256

func (x *schemaIndex) key(text []byte) uint64 {
	return maphash.Bytes(x.seed, text[max(0, len(text)-tailLen):]) ^ uint64(len(text))*0x9e3779b97f4a7c15
}

// get returns the schema whose text is text, or nil.
func (x *schemaIndex) get(text []byte) *cachedSchema {
	if x.n == 0 {
		return nil
	}
	for _, cs := range x.m[x.key(text)] {
		if bytes.Equal(cs.text, text) {
			return cs
		}
	}
	return nil
}

// add caches cs, whose text get does not find.
func (x *schemaIndex) add(cs *cachedSchema) {
	k := x.key(cs.text)
	x.m[k] = append(x.m[k], cs)
	x.n++
}

// reset empties the index.
func (x *schemaIndex) reset() {
	if x.m == nil {
		x.seed = maphash.MakeSeed()
	}
	x.m = map[uint64][]*cachedSchema{}
	x.n = 0
}
