package goldengate

import (
	"testing"

	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/schema"
	"github.com/valyala/fastjson"
)

// addSeeds seeds f with every fixture line.
func addSeeds(f *testing.F) {
	for _, fx := range fixtures {
		for _, l := range readLines(f, fx.name) {
			f.Add(l)
		}
	}
}

func FuzzDataStreams(f *testing.F) {
	addSeeds(f)
	decs := []*DataStreams{NewDataStreams(Options{}), NewDataStreams(customOptions)}
	var p fastjson.Parser
	var c change.Change
	f.Fuzz(func(t *testing.T, s string) {
		for _, d := range decs {
			v, err := p.Parse(s)
			if err != nil {
				return
			}
			Detect(v)
			c.Reset()
			err = d.Decode(v, &c)
			checkDecoded(t, s, &c, err)
			if err == nil && c.Kind == change.KindObjectMetadata {
				// Must not panic; errors are fine.
				_, _ = ObjectColumns(c.Raw, v, schema.Type{})
			}
		}
	})
}

func FuzzBigData(f *testing.F) {
	addSeeds(f)
	d := NewBigData(BigDataOptions{})
	var p fastjson.Parser
	var c change.Change
	f.Fuzz(func(t *testing.T, s string) {
		v, err := p.Parse(s)
		if err != nil {
			return
		}
		Detect(v)
		c.Reset()
		err = d.Decode(v, &c)
		checkDecoded(t, s, &c, err)
	})
}

// checkDecoded asserts what every decoded Change must satisfy.
func checkDecoded(t *testing.T, in string, c *change.Change, err error) {
	t.Helper()
	if err != nil {
		if !errorsIsMalformed(err) {
			t.Fatalf("Decode(%q): error %q does not wrap decode.ErrMalformed", in, err)
		}
		return
	}
	if c.Kind == change.KindUnknown {
		t.Fatalf("Decode(%q) succeeded without a kind", in)
	}
	if c.Kind == change.KindDML {
		if c.Op == change.OpNone || c.Table == "" {
			t.Fatalf("Decode(%q): DML without op or table: %+v", in, c)
		}
		switch c.Op {
		case change.OpInsert, change.OpUpdate, change.OpUpsert:
			if !c.After.Present() {
				t.Fatalf("Decode(%q): %v without after image", in, c.Op)
			}
		case change.OpDelete:
			if !c.Before.Present() {
				t.Fatalf("Decode(%q): DELETE without before image", in)
			}
		}
	} else if c.Raw == nil {
		t.Fatalf("Decode(%q): %v without Raw", in, c.Kind)
	}
	// Extras must lie within the buffer; JSON extras of a valid document
	// must be valid JSON.
	valid := fastjson.Validate(in) == nil
	for _, e := range c.Extras {
		if e.Start < 0 || e.Start > e.End || e.End > len(c.ExtraBuf) {
			t.Fatalf("Decode(%q): extra %s out of bounds", in, e.Name)
		}
		if valid && e.Kind == change.ExtraJSON {
			if err := fastjson.ValidateBytes(c.ExtraBytes(e)); err != nil {
				t.Fatalf("Decode(%q): extra %s = %s is not valid JSON: %v", in, e.Name, c.ExtraBytes(e), err)
			}
		}
	}
}
