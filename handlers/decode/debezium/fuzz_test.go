package debezium_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/decode"
	"github.com/cdclake/cdclake/handlers/decode/debezium"
	"github.com/valyala/fastjson"
)

// FuzzDecode feeds arbitrary JSON through the unwrap step, Detect, Decode
// and Columns. None may panic; Decode's errors must wrap ErrMalformed and
// Columns' ErrSchema; a decoded row change must be consistent.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(fixtureDir, "*.ndjson"))
	for _, path := range files {
		for _, line := range readLines(f, path) {
			f.Add(line)
		}
	}
	d := debezium.New(debezium.Options{})
	var p fastjson.Parser
	var c change.Change
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := p.ParseBytes(data)
		if err != nil {
			return
		}
		c.Reset()
		payload, _ := unwrap(v, &c)
		envelope := c.Schema
		debezium.Detect(payload, c.Schema != nil)
		if envelope != nil {
			if _, err := debezium.Columns(envelope); err != nil && !errors.Is(err, debezium.ErrSchema) {
				t.Fatalf("Columns error %v does not wrap ErrSchema", err)
			}
		}
		err = d.Decode(payload, &c)
		if err != nil {
			if !errors.Is(err, decode.ErrMalformed) {
				t.Fatalf("Decode error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if c.Format != change.FormatDebezium {
			t.Fatalf("format %s", c.Format)
		}
		switch c.Kind {
		case change.KindDML:
			if c.Table == "" {
				t.Fatal("row change without a table")
			}
			if c.Op == change.OpTruncate && (c.Before.Present() || c.After.Present()) {
				t.Fatal("truncate with an image")
			}
			if c.Schema != nil {
				if _, err := debezium.Columns(c.Schema); err != nil && !errors.Is(err, debezium.ErrSchema) {
					t.Fatalf("Columns error %v does not wrap ErrSchema", err)
				}
			}
			for _, e := range c.Extras {
				if e.Kind != change.ExtraTimestamp {
					if _, err := fastjson.ParseBytes(c.ExtraBytes(e)); err != nil {
						t.Fatalf("extra %s is not JSON: %v", e.Name, err)
					}
				}
			}
		case change.KindTransaction, change.KindSchemaChange, change.KindHeartbeat, change.KindMessage:
			if c.Raw == nil {
				t.Fatalf("%s without Raw", c.Kind)
			}
		default:
			t.Fatalf("kind %s", c.Kind)
		}
	})
}
