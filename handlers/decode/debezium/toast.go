package debezium

import (
	"unsafe"

	"github.com/valyala/fastjson"
)

// dropUnavailable deletes from o the columns whose value is the unavailable
// value placeholder in any of its forms.
func (d *Decoder) dropUnavailable(o *fastjson.Object) {
	if o == nil {
		return
	}
	d.dels = d.dels[:0]
	o.Visit(d.collectUnavailable)
	for i, k := range d.dels {
		o.Del(k)
		d.dels[i] = ""
	}
}

func (d *Decoder) collectUnavailable(k []byte, v *fastjson.Value) {
	if !d.ph.matches(v) {
		return
	}
	// The key's bytes belong to the parse arena and stay unchanged until
	// the deletion below; a string over them avoids a copy.
	key := ""
	if len(k) > 0 {
		key = unsafe.String(&k[0], len(k))
	}
	d.dels = append(d.dels, key)
}

// matches reports whether v is the placeholder in one of the forms the
// PostgreSQL and Oracle connectors write it.
func (p *placeholder) matches(v *fastjson.Value) bool {
	switch v.Type() {
	case fastjson.TypeString:
		b, _ := v.StringBytes()
		return p.matchesText(b) || string(b) == p.hstore
	case fastjson.TypeArray:
		arr, _ := v.Array()
		if len(arr) == 1 {
			e := arr[0]
			if e.Type() != fastjson.TypeString {
				return len(p.ints) == 1 && p.matchesInts(arr)
			}
			b, _ := e.StringBytes()
			return p.matchesText(b) || string(b) == p.uuid
		}
		return len(arr) == len(p.ints) && p.matchesInts(arr)
	case fastjson.TypeObject:
		o, _ := v.Object()
		if o.Len() != 1 {
			return false
		}
		b, ok := stringBytes(o.Get(p.str))
		return ok && string(b) == p.str
	}
	return false
}

func (p *placeholder) matchesText(b []byte) bool {
	return string(b) == p.str || string(b) == p.b64
}

func (p *placeholder) matchesInts(arr []*fastjson.Value) bool {
	for i, e := range arr {
		if e.Type() != fastjson.TypeNumber {
			return false
		}
		if n, err := e.Int64(); err != nil || n != p.ints[i] {
			return false
		}
	}
	return true
}
