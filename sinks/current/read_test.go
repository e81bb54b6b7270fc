package current

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestTextOfJSON: a JSON column (Debezium's key headers, GoldenGate's
// primary keys) gives its text.
func TestTextOfJSON(t *testing.T) {
	b := array.NewStringBuilder(memory.DefaultAllocator)
	b.Append(`{"id":40}`)
	b.AppendNull()
	str := b.NewArray()
	defer str.Release()
	jt, err := extensions.NewJSONType(arrow.BinaryTypes.String)
	if err != nil {
		t.Fatal(err)
	}
	j := array.NewExtensionArrayWithStorage(jt, str)
	defer j.Release()
	if v, ok := text(j, 0); !ok || v != `{"id":40}` {
		t.Errorf("text = %q, %v", v, ok)
	}
	if _, ok := text(j, 1); ok {
		t.Error("NULL gave a text")
	}
}

// FuzzJSONKey: a key header's JSON, whatever it holds, gives a key or
// none, never a panic; a key it gives is the one its columns' texts make.
func FuzzJSONKey(f *testing.F) {
	for _, s := range []string{`{"id":40}`, `{"schema":{},"payload":{"id":"a","n":1.5}}`, `{"id":null}`, `[]`, `{"id":{"x":1}}`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		k, ok := jsonKey(raw, []string{"id", "n"})
		if !ok && k != "" {
			t.Fatalf("no key, but %q", k)
		}
		if ok && k == "" {
			t.Fatal("a key of nothing")
		}
	})
}
