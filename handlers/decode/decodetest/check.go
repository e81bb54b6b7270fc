package decodetest

import (
	"errors"
	"testing"

	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/decode"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/cdclake/cdclake/handlers/unwrap"
	"github.com/valyala/fastjson"
)

// Check asserts what every decoder must guarantee of Decode's outcome for
// message msg:
//
//   - an error wraps decode.ErrMalformed;
//   - c.Format is dec.Format() and c.Kind is set;
//   - a row change has a table and an operation; INSERT, UPDATE, UPSERT
//     and READ carry an after image, TRUNCATE no image at all;
//   - schema records and object metadata name their table; every kind
//     other than a row change keeps its record in Raw;
//   - extras lie within ExtraBuf and have distinct names; when msg is
//     valid JSON, so is every JSON extra. (fastjson also accepts some
//     invalid JSON, such as unknown escapes; such text can reach extras.)
func Check(t testing.TB, msg []byte, dec decode.Decoder, c *change.Change, err error) {
	t.Helper()
	if err != nil {
		if !errors.Is(err, decode.ErrMalformed) {
			t.Fatalf("Decode(%q): error %q does not wrap decode.ErrMalformed", msg, err)
		}
		return
	}
	if c.Format != dec.Format() {
		t.Fatalf("Decode(%q): Format %q, want %q", msg, c.Format, dec.Format())
	}
	switch c.Kind {
	case change.KindUnknown, change.KindTombstone:
		t.Fatalf("Decode(%q) succeeded with kind %s", msg, c.Kind)
	case change.KindDML:
		if c.Op == change.OpNone || c.Table == "" {
			t.Fatalf("Decode(%q): row change without op or table: op %s table %q", msg, c.Op, c.Table)
		}
		switch c.Op {
		case change.OpInsert, change.OpUpdate, change.OpUpsert, change.OpRead:
			if !c.After.Present() {
				t.Fatalf("Decode(%q): %s without an after image", msg, c.Op)
			}
		case change.OpTruncate:
			if c.Before.Present() || c.After.Present() {
				t.Fatalf("Decode(%q): TRUNCATE with a row image", msg)
			}
		}
	default:
		if c.Raw == nil {
			t.Fatalf("Decode(%q): %s without Raw", msg, c.Kind)
		}
		if (c.Kind == change.KindSchemaRecord || c.Kind == change.KindObjectMetadata) && c.Table == "" {
			t.Fatalf("Decode(%q): %s without a table", msg, c.Kind)
		}
	}
	valid := fastjson.ValidateBytes(msg) == nil
	seen := map[string]bool{}
	for _, e := range c.Extras {
		if seen[e.Name] {
			t.Fatalf("Decode(%q): extra %s given twice", msg, e.Name)
		}
		seen[e.Name] = true
		if e.Kind == change.ExtraTimestamp {
			continue
		}
		if e.Start < 0 || e.Start > e.End || e.End > len(c.ExtraBuf) {
			t.Fatalf("Decode(%q): extra %s out of bounds", msg, e.Name)
		}
		if valid && e.Kind == change.ExtraJSON {
			if err := fastjson.ValidateBytes(c.ExtraBytes(e)); err != nil {
				t.Fatalf("Decode(%q): extra %s = %s is not valid JSON: %v", msg, e.Name, c.ExtraBytes(e), err)
			}
		}
	}
}

// Fuzz is the body of a decoder's fuzz target: every input goes through
// the unwrap stage, Detect and Decode of each decoder newDecoders returns
// (one decoder per configuration worth fuzzing), then the schema mappings
// the decoder offers. Nothing may panic, and Check must hold. Seeds are
// added from the fixture files.
func Fuzz(f *testing.F, newDecoders func() ([]decode.Decoder, error), fixtures ...string) {
	for _, path := range fixtures {
		for _, line := range ReadLines(f, path) {
			f.Add(line)
		}
	}
	decs, err := newDecoders()
	if err != nil {
		f.Fatal(err)
	}
	var u unwrap.Unwrapper
	var a unwrap.Arena
	var c change.Change
	f.Fuzz(func(t *testing.T, msg []byte) {
		for _, dec := range decs {
			c.Reset()
			r := Decode(&u, &a, dec, msg, &c)
			if !r.Decoded {
				continue
			}
			Check(t, msg, dec, &c, r.Err)
			if r.Err != nil {
				continue
			}
			if sc, ok := dec.(decode.SchemaColumns); ok && c.Schema != nil && c.Kind == change.KindDML {
				_, _ = sc.Columns(c.Schema) // errors are fine, panics are not
			}
			if mc, ok := dec.(decode.MetadataColumns); ok && c.Kind == change.KindObjectMetadata {
				_, _ = mc.MetadataColumns(c.Raw, nil, schema.Type{})
			}
		}
	})
}
